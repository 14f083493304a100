/* loss.t.h - the cross-entropy loops (forward and backward by rows) for one
 * float type, included by loss.c with T and S defined; no include guard, by
 * design. TS(name_) pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static void TS(ce_rows_)(void *arg, int64_t r0, int64_t r1) {
    const ce_job *j = arg;
    int64_t c = j->logits->shape[1];
    for (int64_t r = r0; r < r1; r++) {
        const T *x = (const T *)j->logits->data + r * c;
        T mx = TS(row_max_)(x, c);
        T lse = mx + (T)log(TS(sum_exp_)(x, c, mx));
        int64_t t = target_at(j, r);
        ((T *)j->lse->data)[r * j->lse->strides[0]] = lse;
        ((T *)j->loss->data)[r * j->loss->strides[0]] = t == j->ignore_index ? 0 : lse - x[t];
        if (j->valid) ((T *)j->valid->data)[r * j->valid->strides[0]] = t != j->ignore_index;
    }
}
static void TS(ceb_rows_)(void *arg, int64_t r0, int64_t r1) {
    const ce_job *j = arg;
    int64_t c = j->logits->shape[1];
    for (int64_t r = r0; r < r1; r++) {
        const T *x = (const T *)j->logits->data + r * c;
        T *gx = (T *)j->glogits->data + r * c;
        int64_t t = target_at(j, r);
        if (t == j->ignore_index) {
            for (int64_t i = 0; i < c; i++) gx[i] = 0;
            continue;
        }
        T g = ((const T *)j->gloss->data)[r * j->gloss->strides[0]];
        T lse = ((const T *)j->lse->data)[r * j->lse->strides[0]];
        TS(scaled_exp_)(gx, x, c, lse, g);
        gx[t] -= g;
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
