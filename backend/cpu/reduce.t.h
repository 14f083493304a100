/* reduce.t.h - the reduction loops (T the element, A the accumulator) for one
 * type, included by reduce.c with T, A, S, MAX, MIN, MUL, STORE defined; no
 * include guard, by design. TS(name_) pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static A TS(seg_)(nb_reduce_op op, const T *p, int64_t n, int64_t s) {
    if (op == NB_REDUCE_SUM) {
        A acc = 0;
        int64_t i = 0;
        if (s == 1 && n >= NB_RED_LANES) {
            A l[NB_RED_LANES] = {0};
            for (; i + NB_RED_LANES <= n; i += NB_RED_LANES)
                for (int j = 0; j < NB_RED_LANES; j++) l[j] += (A)p[i + j];
            acc = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        }
        for (; i < n; i++) acc += (A)p[i * s];
        return acc;
    }
    A acc = (A)p[0];
    if (op == NB_REDUCE_PROD)
        for (int64_t i = 1; i < n; i++) acc = MUL(acc, (A)p[i * s]);
    else if (op == NB_REDUCE_MAX)
        for (int64_t i = 1; i < n; i++) acc = MAX((A)p[i * s], acc);
    else
        for (int64_t i = 1; i < n; i++) acc = MIN((A)p[i * s], acc);
    return acc;
}
static A TS(combine_)(nb_reduce_op op, A a, A b) {
    return op == NB_REDUCE_SUM    ? a + b
           : op == NB_REDUCE_PROD ? MUL(a, b)
           : op == NB_REDUCE_MAX  ? MAX(b, a)
                                  : MIN(b, a);
}
static A TS(range_)(const red_plan *pl, nb_reduce_op op, const T *x, int64_t r0, int64_t r1) {
    int last = pl->nr - 1;
    int64_t idx[NB_MAX_DIMS], rem = r0;
    for (int d = last; d >= 0; d--) idx[d] = rem % pl->rshape[d], rem /= pl->rshape[d];
    A acc = 0;
    for (int64_t r = r0; r < r1;) {
        const T *p = x;
        for (int d = 0; d <= last; d++) p += idx[d] * pl->rx[d];
        int64_t n = pl->rshape[last] - idx[last];
        if (n > r1 - r) n = r1 - r;
        A v = TS(seg_)(op, p, n, pl->rx[last]);
        acc = r == r0 ? v : TS(combine_)(op, acc, v);
        r += n, idx[last] += n;
        for (int d = last; d > 0 && idx[d] == pl->rshape[d]; d--) idx[d] = 0, idx[d - 1]++;
    }
    return acc;
}
static A TS(block_)(const red_plan *pl, nb_reduce_op op, const T *x, int64_t b) {
    int64_t r1 = (b + 1) * NB_RED_BLOCK;
    return TS(range_)(pl, op, x, b * NB_RED_BLOCK, r1 < pl->R ? r1 : pl->R);
}
static void TS(outputs_)(void *arg, int64_t m0, int64_t m1) {
    const red_job *j = arg;
    const red_plan *pl = j->pl;
    for (int64_t m = m0; m < m1; m++) {
        int64_t xo, oo;
        kept_offsets(pl, m, &xo, &oo);
        const T *x = (const T *)j->x + xo;
        A acc = 0;
        for (int64_t b = 0; b < pl->nblocks; b++) {
            A v = j->partial ? ((const A *)j->partial)[m * pl->nblocks + b]
                             : TS(block_)(pl, j->op, x, b);
            acc = b == 0 ? v : TS(combine_)(j->op, acc, v);
        }
        STORE(j->out->dtype, j->out->data, oo, acc, j->scale);
    }
}
static void TS(blocks_)(void *arg, int64_t t0, int64_t t1) {
    const red_job *j = arg;
    const red_plan *pl = j->pl;
    for (int64_t t = t0; t < t1; t++) {
        int64_t m = t / pl->nblocks, b = t % pl->nblocks, xo, oo;
        kept_offsets(pl, m, &xo, &oo);
        ((A *)j->partial)[t] = TS(block_)(pl, j->op, (const T *)j->x + xo, b);
    }
}
static void TS(cols_)(void *arg, int64_t c0, int64_t c1) {
    const red_job *j = arg;
    const red_plan *pl = j->pl;
    int64_t ncol = pl->kshape[0], rs = pl->rx[0];
    for (int64_t c = c0; c < c1; c++) {
        int64_t j0 = c * NB_RED_COLS, w = ncol - j0 < NB_RED_COLS ? ncol - j0 : NB_RED_COLS;
        A tot[NB_RED_COLS], part[NB_RED_COLS];
        for (int64_t b = 0; b < pl->nblocks; b++) {
            int64_t r0 = b * NB_RED_BLOCK, r1 = r0 + NB_RED_BLOCK;
            if (r1 > pl->R) r1 = pl->R;
            const T *row = (const T *)j->x + r0 * rs + j0 * pl->kx[0];
            if (j->op == NB_REDUCE_SUM)
                for (int64_t k = 0; k < w; k++) part[k] = 0;
            else
                for (int64_t k = 0; k < w; k++) part[k] = (A)row[k];
            for (int64_t r = r0 + (j->op != NB_REDUCE_SUM); r < r1; r++) {
                const T *q = (const T *)j->x + r * rs + j0;
                if (j->op == NB_REDUCE_SUM)
                    for (int64_t k = 0; k < w; k++) part[k] += (A)q[k];
                else if (j->op == NB_REDUCE_PROD)
                    for (int64_t k = 0; k < w; k++) part[k] = MUL(part[k], (A)q[k]);
                else if (j->op == NB_REDUCE_MAX)
                    for (int64_t k = 0; k < w; k++) part[k] = MAX((A)q[k], part[k]);
                else
                    for (int64_t k = 0; k < w; k++) part[k] = MIN((A)q[k], part[k]);
            }
            for (int64_t k = 0; k < w; k++)
                tot[k] = b == 0 ? part[k] : TS(combine_)(j->op, tot[k], part[k]);
        }
        for (int64_t k = 0; k < w; k++)
            STORE(j->out->dtype, j->out->data, (j0 + k) * pl->ko[0], tot[k], j->scale);
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef A
#undef S
#undef MAX
#undef MIN
#undef MUL
#undef STORE
