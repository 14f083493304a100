/* conv_im2col.t.h - the im2col and col2im loops for one type, included by
 * conv.c with T, S defined; no include guard, by design. TS(name_) pastes the
 * suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static void TS(im2col_)(const conv_geom *g, const T *x, T *col) {
    for (int64_t c = 0; c < g->cg; c++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++) {
                T *row = col + ((c * g->kh + i) * g->kw + j) * g->p;
                const T *xc = x + c * g->h * g->w;
                int64_t off = j * g->dw - g->pw, lo, hi;
                valid_range(off, g->sw, g->w, g->wo, &lo, &hi);
                for (int64_t oh = 0; oh < g->ho; oh++) {
                    T *restrict r = row + oh * g->wo;
                    int64_t ih = oh * g->sh - g->ph + i * g->dh;
                    if (ih < 0 || ih >= g->h) {
                        for (int64_t ow = 0; ow < g->wo; ow++) r[ow] = 0;
                        continue;
                    }
                    const T *restrict xr = xc + ih * g->w;
                    for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;
                    if (g->sw == 1)
                        for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow + off];
                    else
                        for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * g->sw + off];
                    for (int64_t ow = hi; ow < g->wo; ow++) r[ow] = 0;
                }
            }
}
static void TS(col2im_)(const conv_geom *g, const T *col, T *x) {
    memset(x, 0, sizeof(T) * (size_t)(g->cg * g->h * g->w));
    for (int64_t c = 0; c < g->cg; c++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++) {
                const T *row = col + ((c * g->kh + i) * g->kw + j) * g->p;
                T *xc = x + c * g->h * g->w;
                int64_t off = j * g->dw - g->pw, lo, hi;
                valid_range(off, g->sw, g->w, g->wo, &lo, &hi);
                for (int64_t oh = 0; oh < g->ho; oh++) {
                    int64_t ih = oh * g->sh - g->ph + i * g->dh;
                    if (ih < 0 || ih >= g->h) continue;
                    const T *restrict r = row + oh * g->wo;
                    T *restrict xr = xc + ih * g->w;
                    if (g->sw == 1)
                        for (int64_t ow = lo; ow < hi; ow++) xr[ow + off] += r[ow];
                    else
                        for (int64_t ow = lo; ow < hi; ow++) xr[ow * g->sw + off] += r[ow];
                }
            }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
