/* attention.t.h - the fused attention kernels (forward, backward) for one
 * float type, included by attention.c with T, SFX, EXP defined; no include
 * guard, by design. TS(name_) pastes the suffix (name_f32). */
#define TS(name) NB_CPU_CAT(name, SFX)

/* dst [cols x rows] = src [rows x cols]^T, eight source rows at a time (contiguous stores) */
static void TS(transpose_)(const T *restrict src, int64_t rows, int64_t cols, T *restrict dst) {
    int64_t r = 0;
    for (; r + 8 <= rows; r += 8)
        for (int64_t c = 0; c < cols; c++)
            for (int h = 0; h < 8; h++) dst[c * rows + r + h] = src[(r + h) * cols + c];
    for (; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c];
}
/* s = scale Q_i K_j^T (kt = K_j^T [E x nk]), masked: bool -inf, float added, causal j > i -inf */
static void TS(scores_)(const att_job *j, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                         const T *kt, T *s) {
    const T *q = (const T *)j->q + (b * j->L + i0) * j->E;
    att_gemm(j, NB_CBLAS_NO_TRANS, NB_CBLAS_NO_TRANS, nq, nk, j->E, j->scale, q, j->E, kt, nk, 0, s, nk);
    if (j->mask) {
        int64_t off = mask_offset(j, b) + i0 * j->msi + j0 * j->msj;
        for (int64_t r = 0; r < nq; r++) {
            T *sr = s + r * nk;
            if (j->mask_bool) {
                const uint8_t *m = (const uint8_t *)j->mask + off + r * j->msi;
                for (int64_t c = 0; c < nk; c++) sr[c] = m[c * j->msj] ? sr[c] : (T)-INFINITY;
            } else {
                const T *m = (const T *)j->mask + off + r * j->msi;
                for (int64_t c = 0; c < nk; c++) sr[c] += m[c * j->msj];
            }
        }
    }
    if (j->causal)
        for (int64_t r = 0; r < nq; r++)
            for (int64_t c = i0 + r - j0 + 1 > 0 ? i0 + r - j0 + 1 : 0; c < nk; c++)
                s[r * nk + c] = (T)-INFINITY;
}
/* kf = keep ? 1/(1-p) : 0 for the tile */
static void TS(keep_tile_)(const att_job *j, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                            T *kf) {
    T ks = (T)j->keep_scale;
    uint64_t bits[NB_ATT_BK];
    for (int64_t r = 0; r < nq; r++) {
        uint64_t idx = (uint64_t)((b * j->L + i0 + r) * j->S + j0);
        nb_philox_bits_run(j->seed, j->offset, idx, nk, bits); /* nk <= NB_ATT_BK */
        for (int64_t c = 0; c < nk; c++) kf[r * nk + c] = (bits[c] >> 11) >= j->thresh ? ks : (T)0;
    }
}
/* one row of the online softmax: s becomes exp(s - m_new), acc is rescaled */
static void TS(online_row_)(T *s, int64_t nk, double *m, double *l, T *acc, int64_t ev) {
    T mx[ATT_LANES], sm[ATT_LANES], mt, sum = 0;
    int64_t c = 0;
    for (int h = 0; h < ATT_LANES; h++) mx[h] = (T)-INFINITY, sm[h] = 0;
    for (; c + ATT_LANES <= nk; c += ATT_LANES)
        for (int h = 0; h < ATT_LANES; h++) mx[h] = s[c + h] > mx[h] ? s[c + h] : mx[h];
    for (; c < nk; c++) mx[0] = s[c] > mx[0] ? s[c] : mx[0];
    for (int h = 1; h < ATT_LANES; h++) mx[0] = mx[h] > mx[0] ? mx[h] : mx[0];
    double mnew = *m > (double)mx[0] ? *m : (double)mx[0];
    if (mnew == -INFINITY) { /* all masked so far: nothing to add */
        memset(s, 0, sizeof(T) * (size_t)nk);
        return;
    }
    mt = (T)mnew;
    for (c = 0; c < nk; c++) s[c] = EXP(s[c] - mt);
    for (c = 0; c + ATT_LANES <= nk; c += ATT_LANES)
        for (int h = 0; h < ATT_LANES; h++) sm[h] += s[c + h];
    for (int h = 0; h < ATT_LANES; h++) sum += sm[h];
    for (; c < nk; c++) sum += s[c];
    double alpha = exp(*m - mnew);
    *l = *l * alpha + (double)sum;
    *m = mnew;
    if (alpha != 1)
        for (int64_t e = 0; e < ev; e++) acc[e] *= (T)alpha;
}
/* forward for query blocks qb0.. (a group) of batch b: each K_j^T is made once for the group */
static void TS(fwd_item_)(const att_job *j, int64_t item, char *ws) {
    int64_t b = item / j->nqg, qb0 = (item % j->nqg) * j->qgrp, qb1 = ATT_MIN(qb0 + j->qgrp, j->nqb);
    int64_t r0 = qb0 * j->bq, r1 = ATT_MIN(qb1 * j->bq, j->L);
    T *s = (T *)ws, *kf = (T *)(ws + j->off_keep), *kt = (T *)(ws + j->off_kt);
    T *out = (T *)j->out + (b * j->L + r0) * j->Ev;
    double *m = (double *)(ws + j->off_m), *l = m + j->qgrp * j->bq;
    memset(out, 0, sizeof(T) * (size_t)((r1 - r0) * j->Ev));
    for (int64_t r = 0; r < r1 - r0; r++) m[r] = -INFINITY, l[r] = 0;
    int64_t kend = j->causal ? ATT_MIN(j->S, r1) : j->S; /* later blocks: all j > i */
    for (int64_t j0 = 0; j0 < kend; j0 += j->bk) {
        int64_t nk = ATT_MIN(j->bk, j->S - j0);
        const T *v = (const T *)j->v + (b * j->S + j0) * j->Ev;
        TS(transpose_)((const T *)j->k + (b * j->S + j0) * j->E, nk, j->E, kt);
        for (int64_t qb = qb0; qb < qb1; qb++) {
            int64_t i0 = qb * j->bq, nq = ATT_MIN(j->bq, j->L - i0), o = i0 - r0;
            if (j->causal && j0 >= i0 + nq) continue; /* every j > i */
            T *acc = out + o * j->Ev;
            TS(scores_)(j, b, i0, nq, j0, nk, kt, s);
            for (int64_t r = 0; r < nq; r++)
                TS(online_row_)(s + r * nk, nk, &m[o + r], &l[o + r], acc + r * j->Ev, j->Ev);
            if (j->dropout) { /* after l: lse is that of the undropped weights */
                TS(keep_tile_)(j, b, i0, nq, j0, nk, kf);
                for (int64_t x = 0; x < nq * nk; x++) s[x] *= kf[x];
            }
            att_gemm(j, NB_CBLAS_NO_TRANS, NB_CBLAS_NO_TRANS, nq, j->Ev, nk, 1, s, nk, v, j->Ev, 1, acc, j->Ev);
        }
    }
    T *lse = (T *)j->lse + b * j->L + r0;
    for (int64_t r = 0; r < r1 - r0; r++) {
        T inv = (T)(1 / l[r]); /* l = 0 (all masked): 0 * inf = NaN, as PyTorch */
        for (int64_t e = 0; e < j->Ev; e++) out[r * j->Ev + e] *= inv;
        lse[r] = (T)(m[r] + log(l[r]));
    }
}
/* dp (dO V^T) becomes dS = P * (dP * kf - D) (kf NULL: no dropout) */
static void TS(dscores_)(const T *restrict p, T *restrict dp, const T *restrict kf, const T *restrict D,
                          int64_t nq, int64_t nk) {
    for (int64_t r = 0; r < nq; r++) {
        int64_t x0 = r * nk;
        T d = D[r];
        if (kf)
            for (int64_t c = 0; c < nk; c++) dp[x0 + c] = p[x0 + c] * (dp[x0 + c] * kf[x0 + c] - d);
        else
            for (int64_t c = 0; c < nk; c++) dp[x0 + c] = p[x0 + c] * (dp[x0 + c] - d);
    }
}
/* One tile (kt = K_j^T, vt = V_j^T): P = exp(S - lse) in s; returns the weights that multiplied V
 * (P, or P * kf in pd); if need_ds, dS in dp */
static const T *TS(tile_grad_)(const att_job *j, char *ws, int64_t b, int64_t i0, int64_t nq,
                                int64_t j0, int64_t nk, const T *kt, const T *vt, bool need_ds) {
    T *s = (T *)ws, *dp = (T *)(ws + j->off_dp), *pd = (T *)(ws + j->off_pd);
    T *kf = j->dropout ? (T *)(ws + j->off_keep) : NULL;
    const T *lse = (const T *)j->lse + b * j->L + i0;
    TS(scores_)(j, b, i0, nq, j0, nk, kt, s);
    for (int64_t r = 0; r < nq; r++)
        for (int64_t c = 0; c < nk; c++) s[r * nk + c] = EXP(s[r * nk + c] - lse[r]);
    const T *pv = s;
    if (kf) {
        TS(keep_tile_)(j, b, i0, nq, j0, nk, kf);
        for (int64_t x = 0; x < nq * nk; x++) pd[x] = s[x] * kf[x];
        pv = pd;
    }
    if (need_ds) {
        const T *go = (const T *)j->gout + (b * j->L + i0) * j->Ev;
        att_gemm(j, NB_CBLAS_NO_TRANS, NB_CBLAS_NO_TRANS, nq, nk, j->Ev, 1, go, j->Ev, vt, nk, 0, dp, nk);
        TS(dscores_)(s, dp, kf, (const T *)j->D + b * j->L + i0, nq, nk);
    }
    return pv;
}
/* K_j^T and V_j^T of the key block at j0 into slot g of the workspace */
static void TS(kv_tiles_)(const att_job *j, char *ws, int64_t g, int64_t b, int64_t j0, int64_t nk, T **kt,
                           T **vt) {
    *kt = (T *)(ws + j->off_kt) + g * j->bk * j->E, *vt = (T *)(ws + j->off_vt) + g * j->bk * j->Ev;
    TS(transpose_)((const T *)j->k + (b * j->S + j0) * j->E, nk, j->E, *kt);
    TS(transpose_)((const T *)j->v + (b * j->S + j0) * j->Ev, nk, j->Ev, *vt);
}
/* pass 1: dK, dV rows of key blocks kb0.. (a group) of batch b; each row sums over query blocks
 * in increasing order. Where one group holds every key block (fused_dq), dQ too: each query
 * block's rows sum over the key blocks in increasing order, the GEMMs pass 2 would run on the
 * same tiles, so the same bits without recomputing them. */
static void TS(bwd_kv_item_)(const att_job *j, int64_t item, char *ws) {
    int64_t b = item / j->nkg, kb0 = (item % j->nkg) * j->kgrp, kb1 = ATT_MIN(kb0 + j->kgrp, j->nkb);
    int64_t c0 = kb0 * j->bk, c1 = ATT_MIN(kb1 * j->bk, j->S);
    T *gk = j->gk ? (T *)j->gk + b * j->S * j->E : NULL, *gv = j->gv ? (T *)j->gv + b * j->S * j->Ev : NULL;
    T *gq = j->gq && j->fused_dq ? (T *)j->gq + b * j->L * j->E : NULL;
    if (gq) memset(gq, 0, sizeof(T) * (size_t)(j->L * j->E));
    if (gk) memset(gk + c0 * j->E, 0, sizeof(T) * (size_t)((c1 - c0) * j->E));
    if (gv) memset(gv + c0 * j->Ev, 0, sizeof(T) * (size_t)((c1 - c0) * j->Ev));
    T *ds = (T *)(ws + j->off_dp), *kt, *vt;
    for (int64_t kb = kb0; kb < kb1; kb++)
        TS(kv_tiles_)(j, ws, kb - kb0, b, kb * j->bk, ATT_MIN(j->bk, j->S - kb * j->bk), &kt, &vt);
    for (int64_t qb = j->causal ? c0 / j->bq : 0; qb < j->nqb; qb++) { /* causal: rows i >= j0 */
        int64_t i0 = qb * j->bq, nq = ATT_MIN(j->bq, j->L - i0);
        const T *go = (const T *)j->gout + (b * j->L + i0) * j->Ev;
        const T *q = (const T *)j->q + (b * j->L + i0) * j->E;
        for (int64_t kb = kb0; kb < kb1; kb++) {
            int64_t j0 = kb * j->bk, nk = ATT_MIN(j->bk, j->S - j0), g = kb - kb0;
            if (j->causal && j0 >= i0 + nq) continue;
            kt = (T *)(ws + j->off_kt) + g * j->bk * j->E, vt = (T *)(ws + j->off_vt) + g * j->bk * j->Ev;
            const T *pv = TS(tile_grad_)(j, ws, b, i0, nq, j0, nk, kt, vt, gk || gq);
            if (gv) /* dV += P^T dO */
                att_gemm(j, NB_CBLAS_TRANS, NB_CBLAS_NO_TRANS, nk, j->Ev, nq, 1, pv, nk, go, j->Ev, 1,
                         gv + j0 * j->Ev, j->Ev);
            if (gk) /* dK += scale dS^T Q */
                att_gemm(j, NB_CBLAS_TRANS, NB_CBLAS_NO_TRANS, nk, j->E, nq, j->scale, ds, nk, q, j->E, 1,
                         gk + j0 * j->E, j->E);
            if (gq) /* dQ += scale dS K, as bwd_q_item_ */
                att_gemm(j, NB_CBLAS_NO_TRANS, NB_CBLAS_NO_TRANS, nq, j->E, nk, j->scale, ds, nk,
                         (const T *)j->k + (b * j->S + j0) * j->E, j->E, 1, gq + i0 * j->E, j->E);
        }
    }
}
/* pass 2: dQ rows of query blocks qb0.. (a group) of batch b; each row sums over key blocks in
 * increasing order */
static void TS(bwd_q_item_)(const att_job *j, int64_t item, char *ws) {
    int64_t b = item / j->nqg, qb0 = (item % j->nqg) * j->qgrp, qb1 = ATT_MIN(qb0 + j->qgrp, j->nqb);
    int64_t r0 = qb0 * j->bq, r1 = ATT_MIN(qb1 * j->bq, j->L);
    T *gq = (T *)j->gq + b * j->L * j->E, *ds = (T *)(ws + j->off_dp), *kt, *vt;
    memset(gq + r0 * j->E, 0, sizeof(T) * (size_t)((r1 - r0) * j->E));
    int64_t kend = j->causal ? ATT_MIN(j->S, r1) : j->S;
    for (int64_t j0 = 0; j0 < kend; j0 += j->bk) {
        int64_t nk = ATT_MIN(j->bk, j->S - j0);
        const T *k = (const T *)j->k + (b * j->S + j0) * j->E;
        TS(kv_tiles_)(j, ws, 0, b, j0, nk, &kt, &vt);
        for (int64_t qb = qb0; qb < qb1; qb++) {
            int64_t i0 = qb * j->bq, nq = ATT_MIN(j->bq, j->L - i0);
            if (j->causal && j0 >= i0 + nq) continue;
            TS(tile_grad_)(j, ws, b, i0, nq, j0, nk, kt, vt, true);
            att_gemm(j, NB_CBLAS_NO_TRANS, NB_CBLAS_NO_TRANS, nq, j->E, nk, j->scale, ds, nk, k, j->E, 1,
                     gq + i0 * j->E, j->E);
        }
    }
}
/* D[row] = sum_e dO * O, each row in a fixed order (double accumulator) */
static void TS(rowdot_)(void *arg, int64_t r0, int64_t r1) {
    const att_job *j = arg;
    for (int64_t r = r0; r < r1; r++) {
        const T *g = (const T *)j->gout + r * j->Ev, *o = (const T *)j->out + r * j->Ev;
        double acc = 0;
        for (int64_t e = 0; e < j->Ev; e++) acc += (double)g[e] * (double)o[e];
        ((T *)j->D)[r] = (T)acc;
    }
}

#undef TS

/* the template consumes its parameters: the includer defines them again for the next type */
#undef T
#undef SFX
#undef EXP
