/* pool.t.h - the pooling loops for one type, included by pool.c with T, S
 * defined; no include guard, by design. TS(name_) pastes the suffix
 * (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

/* max over one output row, SW the width stride (a constant at each call) */
static inline __attribute__((always_inline)) void TS(max_row_)(const T *restrict x, const pool_job *jb, int64_t h0,
                                                               int64_t h1, int64_t a, int64_t b, T *restrict y,
                                                               int64_t *restrict ix, const int SW) {
    const nb_pool_params *p = jb->p;
    int64_t W = jb->W, dH = p->dilation[0], dW = p->dilation[1], kW = p->kernel[1];
    int32_t mo[MAX_CHUNK];
    for (int64_t o0 = a; o0 < b; o0 += MAX_CHUNK) {
        int n = (int)min64(b - o0, MAX_CHUNK);
        T *restrict mv = y + o0; /* the maxima build up in the output row */
        int32_t first = (int32_t)(h0 * W + SW * o0 - p->padding[1]);
        for (int c = 0; c < n; c++) mv[c] = -INFINITY, mo[c] = first + SW * c;
        for (int64_t h = h0; h < h1; h += dH)
            for (int64_t j = 0; j < kW; j++) {
                int32_t k0 = (int32_t)(h * W + SW * o0 - p->padding[1] + j * dW);
                const T *restrict q = x + k0;
                for (int c = 0; c < n; c++) {
                    T v = q[SW * c];
                    int t = (v > mv[c]) | (v != v);
                    mv[c] = t ? v : mv[c];
                    mo[c] = t ? k0 + SW * c : mo[c];
                }
            }
        if (ix)
            for (int c = 0; c < n; c++) ix[o0 + c] = mo[c];
    }
}
/* the two strides as loops of their own: SW is a constant in each */
static void TS(max_row_s1_)(const T *restrict x, const pool_job *jb, int64_t h0, int64_t h1, int64_t a, int64_t b,
                            T *restrict y, int64_t *restrict ix) {
    TS(max_row_)(x, jb, h0, h1, a, b, y, ix, 1);
}
static void TS(max_row_s2_)(const T *restrict x, const pool_job *jb, int64_t h0, int64_t h1, int64_t a, int64_t b,
                            T *restrict y, int64_t *restrict ix) {
    TS(max_row_)(x, jb, h0, h1, a, b, y, ix, 2);
}
static void TS(max_row22_)(const T *restrict x, int64_t W, int64_t h, int64_t padW, int64_t a,
                          int64_t b, T *restrict y, int64_t *restrict ix) {
    const T *restrict r0 = x + h * W, *restrict r1 = r0 + W;
    int w = (int)W;
    for (int64_t ow = a; ow < b; ow++) {
        int64_t c = 2 * ow - padW;
        T m = r0[c];
        int mi = 0;
        MAX_UPD(T, r0[c + 1], 1);
        MAX_UPD(T, r1[c], w);
        MAX_UPD(T, r1[c + 1], w + 1);
        y[ow] = m;
        if (ix) ix[ow] = h * W + c + mi;
    }
}
/* outputs [a, b) of a row, any window; rows [h0, h1) step dH already clipped */
static void TS(max_cells_)(const T *x, const pool_job *jb, int64_t h0, int64_t h1, int64_t a,
                          int64_t b, T *y, int64_t *ix) {
    const nb_pool_params *p = jb->p;
    int64_t W = jb->W, sW = p->stride[1], dH = p->dilation[0], dW = p->dilation[1];
    for (int64_t ow = a; ow < b; ow++) {
        int64_t w0 = ow * sW - p->padding[1];
        int64_t w1 = min64(w0 + dW * (p->kernel[1] - 1) + 1, W);
        while (w0 < 0) w0 += dW;
        T m = -INFINITY;
        int64_t mi = h0 * W + w0;
        for (int64_t h = h0; h < h1; h += dH)
            for (int64_t w = w0; w < w1; w += dW) MAX_UPD(T, x[h * W + w], h * W + w);
        y[ow] = m;
        if (ix) ix[ow] = mi;
    }
}
static void TS(maxpool_fwd_)(void *arg, int64_t p0, int64_t p1) {
    const pool_job *jb = arg;
    const nb_pool_params *p = jb->p;
    int64_t H = jb->H, W = jb->W, Ho = jb->Ho, Wo = jb->Wo, a, b;
    int64_t dH = p->dilation[0], sW = p->stride[1];
    bool fast = fast_columns(p, W, Wo, H * W, &a, &b);
    bool k22 = fast && p->kernel[0] == 2 && p->kernel[1] == 2 && sW == 2 && dH == 1 &&
               p->dilation[1] == 1;
    for (int64_t pl = p0; pl < p1; pl++) {
        const T *x = (const T *)jb->in + pl * H * W;
        T *y = (T *)jb->out + pl * Ho * Wo;
        int64_t *ix = jb->idx ? jb->idx + pl * Ho * Wo : NULL;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t h0 = oh * p->stride[0] - p->padding[0];
            int64_t h1 = min64(h0 + dH * (p->kernel[0] - 1) + 1, H);
            while (h0 < 0) h0 += dH;
            T *yr = y + oh * Wo;
            int64_t *ir = ix ? ix + oh * Wo : NULL;
            if (!fast) {
                TS(max_cells_)(x, jb, h0, h1, 0, Wo, yr, ir);
                continue;
            }
            TS(max_cells_)(x, jb, h0, h1, 0, a, yr, ir);
            if (k22 && h1 - h0 == 2) TS(max_row22_)(x, W, h0, p->padding[1], a, b, yr, ir);
            else if (sW == 1) TS(max_row_s1_)(x, jb, h0, h1, a, b, yr, ir);
            else TS(max_row_s2_)(x, jb, h0, h1, a, b, yr, ir);
            TS(max_cells_)(x, jb, h0, h1, b, Wo, yr, ir);
        }
    }
}
/* gx plane = 0, then gx[idx[i]] += gy[i] in output order. An index
 * outside the plane (only from a window that misses the input, whose
 * value is -inf) receives nothing. */
static void TS(maxpool_bwd_)(void *arg, int64_t p0, int64_t p1) {
    const pool_job *j = arg;
    int64_t HW = j->H * j->W, HoWo = j->Ho * j->Wo;
    for (int64_t pl = p0; pl < p1; pl++) {
        T *gx = (T *)j->out + pl * HW;
        const T *gy = (const T *)j->in + pl * HoWo;
        const int64_t *ix = j->cidx + pl * HoWo;
        memset(gx, 0, sizeof(T) * (size_t)HW);
        for (int64_t i = 0; i < HoWo; i++)
            if ((uint64_t)ix[i] < (uint64_t)HW) gx[ix[i]] += gy[i];
    }
}
static void TS(avgpool_fwd_)(void *arg, int64_t p0, int64_t p1) {
    const pool_job *j = arg;
    int64_t H = j->H, W = j->W, Ho = j->Ho, Wo = j->Wo, h0, h1, w0, w1;
    for (int64_t pl = p0; pl < p1; pl++) {
        const T *x = (const T *)j->in + pl * H * W;
        T *y = (T *)j->out + pl * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t div = avg_window(j->p, H, W, oh, ow, &h0, &h1, &w0, &w1);
                double sum = 0;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++) sum += x[h * W + w];
                y[oh * Wo + ow] = div ? (T)(sum / (double)div) : (T)0;
            }
    }
}
static void TS(avgpool_bwd_)(void *arg, int64_t p0, int64_t p1) {
    const pool_job *j = arg;
    int64_t H = j->H, W = j->W, Ho = j->Ho, Wo = j->Wo, h0, h1, w0, w1;
    for (int64_t pl = p0; pl < p1; pl++) {
        T *gx = (T *)j->out + pl * H * W;
        const T *gy = (const T *)j->in + pl * Ho * Wo;
        memset(gx, 0, sizeof(T) * (size_t)(H * W));
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t div = avg_window(j->p, H, W, oh, ow, &h0, &h1, &w0, &w1);
                if (!div) continue;
                T g = gy[oh * Wo + ow] / (T)div;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++) gx[h * W + w] += g;
            }
    }
}
static void TS(adavg_fwd_)(void *arg, int64_t p0, int64_t p1) {
    const pool_job *j = arg;
    int64_t H = j->H, W = j->W, Ho = j->Ho, Wo = j->Wo;
    for (int64_t pl = p0; pl < p1; pl++) {
        const T *x = (const T *)j->in + pl * H * W;
        T *y = (T *)j->out + pl * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t h0 = ad_start(oh, Ho, H), h1 = ad_end(oh, Ho, H);
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t w0 = ad_start(ow, Wo, W), w1 = ad_end(ow, Wo, W);
                double sum = 0;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++) sum += x[h * W + w];
                y[oh * Wo + ow] = (T)(sum / (double)((h1 - h0) * (w1 - w0)));
            }
        }
    }
}
static void TS(adavg_bwd_)(void *arg, int64_t p0, int64_t p1) {
    const pool_job *j = arg;
    int64_t H = j->H, W = j->W, Ho = j->Ho, Wo = j->Wo;
    for (int64_t pl = p0; pl < p1; pl++) {
        T *gx = (T *)j->out + pl * H * W;
        const T *gy = (const T *)j->in + pl * Ho * Wo;
        memset(gx, 0, sizeof(T) * (size_t)(H * W));
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t h0 = ad_start(oh, Ho, H), h1 = ad_end(oh, Ho, H);
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t w0 = ad_start(ow, Wo, W), w1 = ad_end(ow, Wo, W);
                T g = gy[oh * Wo + ow] / (T)((h1 - h0) * (w1 - w0));
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++) gx[h * W + w] += g;
            }
        }
    }
}
static void TS(admax_fwd_)(void *arg, int64_t p0, int64_t p1) {
    const pool_job *j = arg;
    int64_t H = j->H, W = j->W, Ho = j->Ho, Wo = j->Wo;
    for (int64_t pl = p0; pl < p1; pl++) {
        const T *x = (const T *)j->in + pl * H * W;
        T *y = (T *)j->out + pl * Ho * Wo;
        int64_t *ix = j->idx ? j->idx + pl * Ho * Wo : NULL;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t h0 = ad_start(oh, Ho, H), h1 = ad_end(oh, Ho, H);
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t w0 = ad_start(ow, Wo, W), w1 = ad_end(ow, Wo, W);
                T m = -INFINITY;
                int64_t mi = h0 * W + w0;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++) {
                        MAX_UPD(T, x[h * W + w], h * W + w);
                    }
                y[oh * Wo + ow] = m;
                if (ix) ix[oh * Wo + ow] = mi;
            }
        }
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
