/* scatter.t.h - the scatter reductions of one line for one type, included by
 * gather.c with T, S, ISNAN, DIV defined; no include guard, by design.
 * TS(name_) pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static void TS(scatter_line_)(const line_job *j, int64_t l, int64_t *counts) {
    const nb_kview *o = j->dst, *s = j->src, *ix = j->index;
    int d = j->dim, m = j->mode;
    T *op = (T *)o->data + line_offset(o->ndim, ix->shape, o->strides, d, l);
    const T *sp = (const T *)s->data + line_offset(s->ndim, ix->shape, s->strides, d, l);
    const int64_t *ip = (const int64_t *)ix->data + line_offset(ix->ndim, ix->shape, ix->strides, d, l);
    int64_t os = o->strides[d], ss = s->strides[d], is = ix->strides[d];
    for (int64_t i = 0; i < j->n; i++) {
        int64_t t = ip[i * is];
        T v = sp[i * ss], *dst = op + t * os;
        if (m == M_ASSIGN || (!j->include_self && counts[t] == 0)) *dst = v;
        else if (m == M_SUM || m == M_MEAN) *dst += v;
        else if (m == M_PROD) *dst *= v;
        else if (m == M_AMAX) { if (ISNAN(v) || v > *dst) *dst = v; }
        else if (ISNAN(v) || v < *dst) *dst = v;
        counts[t]++;
    }
    for (int64_t i = 0; i < j->n; i++) {
        int64_t t = ip[i * is];
        if (!counts[t]) continue;
        if (m == M_MEAN) {
            T c = (T)(counts[t] + j->include_self);
            if (c != 0) op[t * os] = DIV(op[t * os], c); /* a narrow count can wrap to 0: left undivided, as CUDA */
        }
        counts[t] = 0;
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
#undef ISNAN
#undef DIV
