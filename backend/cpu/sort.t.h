/* sort.t.h - the sort loops for one type, included by sort.c with T, S, ISNAN
 * defined; no include guard, by design. TS(name_) pastes the suffix
 * (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static inline bool TS(before_)(T a, T b, bool desc) {
    if (desc) return !ISNAN(b) && (ISNAN(a) || a > b);
    return !ISNAN(a) && (ISNAN(b) || a < b);
}
static void TS(sort_line_)(const sort_job *j, int64_t line, char *ws) {
    const nb_kview *x = j->x;
    int64_t n = j->n, xs = x->strides[j->dim];
    T *keys = (T *)ws;
    int64_t *a = (int64_t *)(ws + ((sizeof(T) * (size_t)n + 7) / 8 * 8)), *b = a + n;
    const T *xp = (const T *)x->data + line_offset(x->ndim, x->shape, x->strides, j->dim, line);
    for (int64_t i = 0; i < n; i++) keys[i] = xp[i * xs], a[i] = i;
    bool desc = j->descending;
    for (int64_t s = 0; s < n; s += RUN) { /* insertion sort of each run */
        int64_t e = s + RUN < n ? s + RUN : n;
        for (int64_t i = s + 1; i < e; i++) {
            int64_t v = a[i], p = i;
            while (p > s && TS(before_)(keys[v], keys[a[p - 1]], desc)) a[p] = a[p - 1], p--;
            a[p] = v;
        }
    }
    for (int64_t w = RUN; w < n; w *= 2) { /* merge runs of w from a into b */
        for (int64_t s = 0; s < n; s += 2 * w) {
            int64_t m = s + w < n ? s + w : n, e = s + 2 * w < n ? s + 2 * w : n;
            int64_t i = s, r = m, o = s;
            while (i < m && r < e) b[o++] = TS(before_)(keys[a[r]], keys[a[i]], desc) ? a[r++] : a[i++];
            while (i < m) b[o++] = a[i++];
            while (r < e) b[o++] = a[r++];
        }
        int64_t *t = a;
        a = b, b = t;
    }
    const nb_kview *vi = j->indices, *vv = j->values;
    int64_t *ip = (int64_t *)vi->data + line_offset(vi->ndim, vi->shape, vi->strides, j->dim, line);
    for (int64_t i = 0; i < j->k; i++) ip[i * vi->strides[j->dim]] = a[i];
    if (!vv) return;
    T *vp = (T *)vv->data + line_offset(vv->ndim, vv->shape, vv->strides, j->dim, line);
    for (int64_t i = 0; i < j->k; i++) vp[i * vv->strides[j->dim]] = keys[a[i]];
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
#undef ISNAN
