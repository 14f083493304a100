/* conv_winograd.t.h - the Winograd convolution loops for one type, included by
 * conv.c with T, S defined; no include guard, by design. TS(name_) pastes the
 * suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, S)

/* sp[R][0][i] = x[R - offh][2i - offw], sp[R][1][i] = x[R - offh][2i + 1 - offw] for R < rows,
 * i < n (zero outside the plane): each row split into its even and odd columns. */
/* The input transform of tile column tx: its 4x4 patch from the split rows
 * e0..e3 (even columns at +0, odd at +n), B^T d B stored at o[x*st + tx*step]. */
static inline __attribute__((always_inline)) void TS(wg_in_tile_)(const T *e0, const T *e1, const T *e2,
                                                                  const T *e3, int64_t n, T *o, int64_t st,
                                                                  int64_t tx, int64_t step) {
    T a[4][4];
    for (int j = 0; j < 4; j++) {
        int64_t k = tx + (j >> 1), h = (j & 1) * n;
        T d0 = e0[h + k], d1 = e1[h + k], d2 = e2[h + k], d3 = e3[h + k];
        a[0][j] = d0 - d2, a[1][j] = d1 + d2, a[2][j] = d2 - d1, a[3][j] = d1 - d3;
    }
    for (int r = 0; r < 4; r++) { /* columns 0..3 are a[r][0], [1], [2], [3] */
        o[(4 * r + 0) * st + tx * step] = a[r][0] - a[r][2];
        o[(4 * r + 1) * st + tx * step] = a[r][1] + a[r][2];
        o[(4 * r + 2) * st + tx * step] = a[r][2] - a[r][1];
        o[(4 * r + 3) * st + tx * step] = a[r][1] - a[r][3];
    }
}

static void TS(wg_split_)(const T *x, int64_t h, int64_t w, int64_t offh, int64_t offw,
                         int64_t rows, int64_t n, T *sp) {
    for (int64_t R = 0; R < rows; R++) {
        T *restrict ev = sp + 2 * R * n, *restrict od = ev + n;
        int64_t r = R - offh, lo, hi;
        if (r < 0 || r >= h) {
            memset(ev, 0, sizeof(T) * (size_t)(2 * n));
            continue;
        }
        const T *restrict s = x + r * w;
        valid_range(-offw, 2, w - 1, n, &lo, &hi); /* both columns of pair i inside */
        for (int64_t i = lo; i < hi; i++) ev[i] = s[2 * i - offw], od[i] = s[2 * i + 1 - offw];
        for (int64_t i = 0; i < n; i++) { /* the edges, with padding */
            if (i == lo && hi > lo) {
                i = hi - 1;
                continue;
            }
            int64_t c = 2 * i - offw;
            ev[i] = c >= 0 && c < w ? s[c] : 0, od[i] = c + 1 >= 0 && c + 1 < w ? s[c + 1] : 0;
        }
    }
}
/* v [16, ci, t] = B^T d B for every channel and tile of x [ci, ih, iw];
 * tile_major: v [16, t, ci] instead (for the weight gradient's GEMMs). */
static void TS(wg_input_)(const wg_geom *q, const T *x, T *v, T *sp, bool tile_major) {
    int64_t n = q->tw + 1, st = q->vs, cs = q->ci, psz = (2 * q->th + 2) * 2 * n;
    if (tile_major) { /* all planes split first, then tile rows outermost: the stores of one
                       * tile row (16 slabs x tw x ci) stay in L1 across channels */
        for (int64_t c = 0; c < q->ci; c++)
            TS(wg_split_)(x + c * q->ih * q->iw, q->ih, q->iw, q->offh, q->offw, 2 * q->th + 2, n,
                         sp + c * psz);
        for (int64_t ty = 0; ty < q->th; ty++)
            for (int64_t c = 0; c < q->ci; c++) {
                const T *e0 = sp + c * psz + 4 * ty * n, *e1 = e0 + 2 * n, *e2 = e0 + 4 * n;
                const T *e3 = e0 + 6 * n;
                T *o = v + ty * q->tw * cs + c;
                for (int64_t tx = 0; tx < q->tw; tx++) TS(wg_in_tile_)(e0, e1, e2, e3, n, o, st, tx, cs);
            }
        return;
    }
    for (int64_t c = 0; c < q->ci; c++) {
        TS(wg_split_)(x + c * q->ih * q->iw, q->ih, q->iw, q->offh, q->offw, 2 * q->th + 2, n, sp);
        for (int64_t ty = 0; ty < q->th; ty++) {
            const T *e0 = sp + 4 * ty * n, *e1 = e0 + 2 * n, *e2 = e0 + 4 * n, *e3 = e0 + 6 * n;
            T *o = v + c * q->ld + ty * q->tw;
            _Pragma("GCC ivdep") for (int64_t tx = 0; tx < q->tw; tx++)
                TS(wg_in_tile_)(e0, e1, e2, e3, n, o, st, tx, 1);
        }
    }
}
/* y [co, oh, ow] = A^T m A (+ bias) for m [16, co, t]. rows: 2 * 2tw scratch. */
static void TS(wg_output_)(const wg_geom *q, const T *m, const T *bias, T *y, T *rows) {
    int64_t st = q->ms, w2 = 2 * q->tw;
    for (int64_t c = 0; c < q->co; c++) {
        T b = bias ? bias[c] : 0;
        for (int64_t ty = 0; ty < q->th; ty++) {
            const T *s = m + c * q->ld + ty * q->tw;
            T *restrict r0 = rows, *restrict r1 = rows + w2;
            for (int64_t tx = 0; tx < q->tw; tx++) {
                T u[2][4];
                for (int j = 0; j < 4; j++) {
                    T m0 = s[j * st + tx], m1 = s[(4 + j) * st + tx];
                    T m2 = s[(8 + j) * st + tx], m3 = s[(12 + j) * st + tx];
                    u[0][j] = m0 + m1 + m2, u[1][j] = m1 - m2 - m3;
                }
                r0[2 * tx] = u[0][0] + u[0][1] + u[0][2] + b;
                r0[2 * tx + 1] = u[0][1] - u[0][2] - u[0][3] + b;
                r1[2 * tx] = u[1][0] + u[1][1] + u[1][2] + b;
                r1[2 * tx + 1] = u[1][1] - u[1][2] - u[1][3] + b;
            }
            T *out = y + (c * q->ohs + 2 * ty) * q->ow;
            memcpy(out, r0, sizeof(T) * (size_t)q->ow);
            if (2 * ty + 1 < q->oh) memcpy(out + q->ow, r1, sizeof(T) * (size_t)q->ow);
        }
    }
}
/* u [16, co, t] = A dy A^T for the 2x2 tiles of gy [co, oh, ow] (q's output side). */
static void TS(wg_grad_tiles_)(const wg_geom *q, const T *gy, T *u, T *sp) {
    int64_t n = q->tw, st = q->ms;
    for (int64_t c = 0; c < q->co; c++) {
        TS(wg_split_)(gy + c * q->ohs * q->ow, q->oh, q->ow, 0, 0, 2 * q->th, n, sp);
        for (int64_t ty = 0; ty < q->th; ty++) {
            const T *e0 = sp + 4 * ty * n, *o0 = e0 + n, *e1 = e0 + 2 * n, *o1 = e0 + 3 * n;
            T *o = u + c * q->ld + ty * q->tw;
            _Pragma("GCC ivdep") for (int64_t tx = 0; tx < n; tx++) {
                T y00 = e0[tx], y01 = o0[tx], y10 = e1[tx], y11 = o1[tx], z[4][2];
                z[0][0] = y00, z[0][1] = y01, z[1][0] = y00 + y10, z[1][1] = y01 + y11;
                z[2][0] = y00 - y10, z[2][1] = y01 - y11, z[3][0] = -y10, z[3][1] = -y11;
                for (int r = 0; r < 4; r++) {
                    o[(4 * r + 0) * st + tx] = z[r][0];
                    o[(4 * r + 1) * st + tx] = z[r][0] + z[r][1];
                    o[(4 * r + 2) * st + tx] = z[r][0] - z[r][1];
                    o[(4 * r + 3) * st + tx] = -z[r][1];
                }
            }
        }
    }
}
/* u [groups][16][cog][cg] = G g G^T for w [co, cg, 3, 3]; flip: the input gradient's
 * kernel, rot180(g) with the channels swapped: u [groups][16][cg][cog]. */
static void TS(wg_weights_)(const conv_geom *g, const T *w, T *u, bool flip) {
    for (int64_t gr = 0; gr < g->groups; gr++)
        for (int64_t o = 0; o < g->cog; o++)
            for (int64_t i = 0; i < g->cg; i++) {
                const T *k = w + ((gr * g->cog + o) * g->cg + i) * 9;
                T t[4][3], r[4][4];
                for (int j = 0; j < 3; j++) {
                    int a = flip ? 8 - j : j, b = flip ? 5 - j : 3 + j, c = flip ? 2 - j : 6 + j;
                    t[0][j] = k[a], t[1][j] = (k[a] + k[b] + k[c]) / 2;
                    t[2][j] = (k[a] - k[b] + k[c]) / 2, t[3][j] = k[c];
                }
                for (int x = 0; x < 4; x++) {
                    r[x][0] = t[x][0], r[x][1] = (t[x][0] + t[x][1] + t[x][2]) / 2;
                    r[x][2] = (t[x][0] - t[x][1] + t[x][2]) / 2, r[x][3] = t[x][2];
                }
                for (int x = 0; x < 16; x++) {
                    int64_t at = flip ? ((gr * 16 + x) * g->cg + i) * g->cog + o
                                      : ((gr * 16 + x) * g->cog + o) * g->cg + i;
                    u[at] = r[x / 4][x % 4];
                }
            }
}
/* gw [co, cg, 3, 3] = G^T m G for m [groups][16][cog][cg]. */
static void TS(wg_weight_grad_)(const conv_geom *g, const T *m, T *gw) {
    int64_t st = g->cog * g->cg;
    for (int64_t gr = 0; gr < g->groups; gr++)
        for (int64_t e = 0; e < st; e++) {
            const T *s = m + gr * 16 * st + e;
            T t[3][4];
            for (int j = 0; j < 4; j++) {
                T m0 = s[j * st], m1 = s[(4 + j) * st], m2 = s[(8 + j) * st], m3 = s[(12 + j) * st];
                t[0][j] = m0 + (m1 + m2) / 2, t[1][j] = (m1 - m2) / 2, t[2][j] = (m1 + m2) / 2 + m3;
            }
            T *d = gw + (gr * st + e) * 9;
            for (int r = 0; r < 3; r++) {
                d[3 * r] = t[r][0] + (t[r][1] + t[r][2]) / 2;
                d[3 * r + 1] = (t[r][1] - t[r][2]) / 2;
                d[3 * r + 2] = (t[r][1] + t[r][2]) / 2 + t[r][3];
            }
        }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef S
