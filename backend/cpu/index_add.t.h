/* index_add.t.h - the index_add loop for one type, included by index.c with T,
 * S, ADD defined; no include guard, by design. TS(name_) pastes the suffix
 * (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static void TS(add_units_)(void *arg, int64_t u0, int64_t u1) {
    const add_job *j = arg;
    for (int64_t u = u0; u < u1; u++) {
        int64_t o = u / j->ncb, c0 = (u % j->ncb) * j->cb;
        int64_t w = j->inner - c0 < j->cb ? j->inner - c0 : j->cb;
        T *gx = (T *)j->gx + o * j->size * j->inner + c0;
        const T *g = (const T *)j->g + o * j->k * j->inner + c0;
        for (int64_t i = 0; i < j->k; i++) {
            if (j->idx[i] == j->skip) continue;
            T *dst = gx + j->idx[i] * j->inner;
            const T *src = g + i * j->inner;
            for (int64_t c = 0; c < w; c++) dst[c] = ADD(dst[c], src[c]);
        }
    }
}

/* accumulate: units u0..u1 of (outer slice, run); each run's row += its sum. */
static void TS(acc_runs_)(void *arg, int64_t u0, int64_t u1) {
    const acc_job *j = arg;
    T acc[ACC_CHUNK];
    for (int64_t u = u0; u < u1; u++) {
        int64_t o = u / j->nruns, r = u % j->nruns, lo = j->start[r], hi = j->start[r + 1];
        if (j->kp[lo].key == j->skip) continue;
        T *dst = (T *)j->gx + (o * j->size + j->kp[lo].key) * j->inner;
        const T *g = (const T *)j->g + o * j->k * j->inner;
        for (int64_t c0 = 0; c0 < j->inner; c0 += ACC_CHUNK) {
            int64_t w = j->inner - c0 < ACC_CHUNK ? j->inner - c0 : ACC_CHUNK;
            for (int64_t c = 0; c < w; c++) acc[c] = (T)0;
            for (int64_t i = lo; i < hi; i++) {
                const T *src = g + j->kp[i].pos * j->inner + c0;
                for (int64_t c = 0; c < w; c++) acc[c] = ADD(acc[c], src[c]);
            }
            for (int64_t c = 0; c < w; c++) dst[c0 + c] = ADD(dst[c0 + c], acc[c]);
        }
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
#undef ADD
