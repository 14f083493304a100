/* conv_sum_buckets.t.h - the bucketed sums for one type, included by conv.c
 * with T, S defined; no include guard, by design. TS(name_) pastes the suffix
 * (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static void TS(sum_buckets_)(conv_job *j, T *gbias, int64_t r0, int64_t r1) {
    const conv_geom *g = &j->g;
    int64_t cog = g->cog, bsz = g->groups * j->kx * cog;
    T *part = (T *)j->partial, *gw = (T *)j->y;
    for (int64_t r = r0; r < r1; r++) {
        T *restrict acc = part + r * cog;
        for (int64_t b = 1; b < j->nitems; b++) {
            const T *restrict src = part + b * bsz + r * cog;
            for (int64_t o = 0; o < cog; o++) acc[o] += src[o];
        }
        int64_t gr = r / j->kx, kk = r % j->kx;
        if (kk == g->k)
            for (int64_t o = 0; o < cog; o++) gbias[gr * cog + o] = acc[o];
        else
            for (int64_t o = 0; o < cog; o++) gw[(gr * cog + o) * g->k + kk] = acc[o];
    }
}
/* Winograd path: bucket 0 += the others, elementwise, in order. */
static void TS(add_buckets_)(conv_job *j, int64_t e0, int64_t e1) {
    int64_t bsz = bucket_elems(j);
    T *restrict acc = (T *)j->partial;
    for (int64_t b = 1; b < j->nitems; b++) {
        const T *restrict src = (const T *)j->partial + b * bsz;
        for (int64_t e = e0; e < e1; e++) acc[e] += src[e];
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
