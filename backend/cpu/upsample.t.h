/* upsample.t.h - the interpolation loops for one type, included by upsample.c
 * with T, S defined; no include guard, by design. TS(name_) pastes the suffix
 * (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

static void TS(up_fwd_)(void *arg, int64_t p0, int64_t p1) {
    const up_job *j = arg;
    for (int64_t p = p0; p < p1; p++) {
        const T *x = (const T *)j->src + p * j->H * j->W;
        T *o = (T *)j->dst + p * j->Ho * j->Wo;
        for (int64_t oh = 0; oh < j->Ho; oh++, o += j->Wo) {
            const up_tap *h = &j->th[oh];
            const T *r0 = x + h->i0 * j->W, *r1 = x + h->i1 * j->W;
            if (!j->bilinear) {
                for (int64_t ow = 0; ow < j->Wo; ow++) o[ow] = r0[j->tw[ow].i0];
                continue;
            }
            T h0 = (T)h->l0, h1 = (T)h->l1;
            for (int64_t ow = 0; ow < j->Wo; ow++) {
                const up_tap *w = &j->tw[ow];
                T w0 = (T)w->l0, w1 = (T)w->l1;
                o[ow] = h0 * (w0 * r0[w->i0] + w1 * r0[w->i1]) + h1 * (w0 * r1[w->i0] + w1 * r1[w->i1]);
            }
        }
    }
}
static void TS(up_bwd_)(void *arg, int64_t p0, int64_t p1) {
    const up_job *j = arg;
    for (int64_t p = p0; p < p1; p++) {
        T *gx = (T *)j->dst + p * j->H * j->W;
        const T *g = (const T *)j->src + p * j->Ho * j->Wo;
        memset(gx, 0, sizeof(T) * (size_t)(j->H * j->W));
        for (int64_t oh = 0; oh < j->Ho; oh++, g += j->Wo) {
            const up_tap *h = &j->th[oh];
            T *r0 = gx + h->i0 * j->W, *r1 = gx + h->i1 * j->W;
            if (!j->bilinear) {
                for (int64_t ow = 0; ow < j->Wo; ow++) r0[j->tw[ow].i0] += g[ow];
                continue;
            }
            T h0 = (T)h->l0, h1 = (T)h->l1;
            for (int64_t ow = 0; ow < j->Wo; ow++) {
                const up_tap *w = &j->tw[ow];
                T w0 = (T)w->l0, w1 = (T)w->l1, v = g[ow];
                r0[w->i0] += h0 * w0 * v;
                r0[w->i1] += h0 * w1 * v;
                r1[w->i0] += h1 * w0 * v;
                r1[w->i1] += h1 * w1 * v;
            }
        }
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
