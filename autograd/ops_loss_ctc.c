/* ops_loss_ctc.c - F.ctc_loss (Graves et al. 2006, "Connectionist Temporal
 * Classification"), with PyTorch's arguments, reductions, zero_infinity and
 * gradient (LossCTC.cpp's: the gradient of the loss as a function of the
 * logits behind log_softmax, eq. 16 of the paper, which is what PyTorch
 * returns for log_probs).
 *
 * The forward (alpha) and backward (beta) recursions run over time as
 * nabla ops on [N, 2S + 1] tensors in log space, inside one custom
 * function (nb_function_apply): the same code on every backend, each step
 * a few elementwise kernels. Its log-sum-exp treats an all -inf triple as
 * -inf, so no NaN arises from the paths that do not exist. The lengths and
 * targets are read to the host (as PyTorch's lengths are host integers) to
 * build the extended label sequence (blank, l1, blank, l2, ..., blank), its
 * skip mask and the end positions, uploaded once per call.
 * Tests: tests/torch_diff (values, gradients, errors against PyTorch), the
 * op harness (CPU against CUDA), tests/test_ops_loss.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd_impl.h"

/* log(exp(a) + exp(b) [+ exp(c)]) elementwise, -inf where all are -inf. */
static nb_tensor *logsumexp3(nb_tensor *a, nb_tensor *b, nb_tensor *c) {
    nb_tensor *m = nb_maximum(a, b);
    if (c) m = nb_maximum(m, c);
    nb_tensor *zero = m ? nb_scalar_like(m, 0, m->dtype) : NULL;
    nb_tensor *ms = nb_where(nb_isinf(m), zero, m); /* max is -inf (or inf): shift by 0 */
    nb_tensor *e = nb_add(nb_exp(nb_sub(a, ms)), nb_exp(nb_sub(b, ms)));
    if (c) e = nb_add(e, nb_exp(nb_sub(c, ms)));
    return nb_add(nb_log(e), ms);
}

/* x shifted by k along the last dim (x[..., s - k], or x[..., s + k] for
 * negative k), -inf where that falls outside. */
static nb_tensor *shift(nb_tensor *x, int k) {
    int64_t S = x->shape[x->ndim - 1];
    int64_t pads[2] = {k > 0 ? k : 0, k < 0 ? -k : 0};
    nb_tensor *p = nb_pad(x, pads, 2, NB_PAD_CONSTANT, -INFINITY);
    return nb_narrow(p, -1, k > 0 ? 0 : -k, S);
}

/* inputs: lpe [T, N, S'] (log_probs at the extended labels), skip [N, S']
 * (bool: s may come from s - 2), valid [N, S'] (s < 2 L + 1), len [N]
 * (int64), end [N, 2] (int64: 2L and 2L - 1, or 2L and S' for L = 0:
 * S' indexes the -inf column appended before the gather),
 * nll_fix [N] (0 or inf where the input is empty, NaN elsewhere),
 * log_probs [T, N, C] (the input whose gradient this is), the extended
 * labels [N, S'] (int64). Output: nll [N]. Saves what backward reads. */
static nb_status ctc_forward(nb_function_ctx *ctx, nb_tensor *const *in, int n_in, nb_tensor **out) {
    (void)n_in;
    nb_tensor *lpe = in[0], *skip = in[1], *valid = in[2], *len = in[3], *end = in[4], *fix = in[5];
    int64_t T = lpe->shape[0];
    nb_tensor *neg_inf = nb_scalar_like(lpe, -INFINITY, lpe->dtype);
    nb_tensor *first2 = nb_lt_scalar(nb_arange_on(0, (double)lpe->shape[2], 1, NB_I64, lpe->storage->device), 2);
    nb_tensor *alpha = nb_where(nb_logical_and(first2, valid), nb_select(lpe, 0, 0), neg_inf);
    nb_tensor **alphas = calloc((size_t)T, sizeof *alphas);
    if (!alphas) return nb_set_error(NB_ERR_OOM, "ctc_loss: out of host memory");
    alphas[0] = alpha;
    for (int64_t t = 1; t < T && alpha; t++) {
        nb_tensor *a3 = nb_where(skip, shift(alpha, 2), neg_inf);
        nb_tensor *next = nb_add(logsumexp3(alpha, shift(alpha, 1), a3), nb_select(lpe, 0, t));
        next = nb_where(valid, next, neg_inf);
        /* a sequence past its length keeps its last alpha (read at the end) */
        nb_tensor *live = nb_unsqueeze(nb_gt_scalar(len, (double)t), 1);
        alpha = alphas[t] = nb_where(live, next, alpha);
    }
    nb_tensor *all = alpha ? nb_stack(alphas, (int)T, 0) : NULL;
    free(alphas);
    /* nll = -logsumexp(alpha_{len-1}[2L], alpha_{len-1}[2L-1]) */
    int64_t pad_end[2] = {0, 1};
    nb_tensor *ends = nb_gather(nb_pad(alpha, pad_end, 2, NB_PAD_CONSTANT, -INFINITY), 1, end);
    nb_tensor *nll = ends ? nb_neg(logsumexp3(nb_select(ends, 1, 0), nb_select(ends, 1, 1), NULL)) : NULL;
    nll = nb_where(nb_isnan(fix), nll, fix);
    if (!nll || !all) return nb_last_status();
    nb_tensor *keep[9] = {lpe, all, nll, in[6], in[7], skip, valid, len, end};
    nb_status st = nb_ctx_save_for_backward(ctx, keep, 9);
    if (st == NB_OK) st = nb_ctx_set_value(ctx, "zero_infinity", *(const bool *)nb_ctx_user(ctx));
    out[0] = nll;
    return st;
}

static nb_status ctc_backward(nb_function_ctx *ctx, nb_tensor *const *gout, nb_tensor **gin) {
    nb_tensor *lpe = nb_ctx_saved_tensor(ctx, 0), *alphas = nb_ctx_saved_tensor(ctx, 1), *nll = nb_ctx_saved_tensor(ctx, 2);
    nb_tensor *lp = nb_ctx_saved_tensor(ctx, 3), *ext = nb_ctx_saved_tensor(ctx, 4), *skip = nb_ctx_saved_tensor(ctx, 5);
    nb_tensor *valid = nb_ctx_saved_tensor(ctx, 6), *len = nb_ctx_saved_tensor(ctx, 7), *end = nb_ctx_saved_tensor(ctx, 8);
    if (!lpe || !alphas || !nll || !lp || !ext || !skip || !valid || !len || !end) return nb_last_status();
    bool zero_inf = nb_ctx_value(ctx, "zero_infinity") != 0;
    int64_t T = lpe->shape[0], N = lpe->shape[1], Sx = lpe->shape[2];
    nb_device dev = lpe->storage->device;
    nb_tensor *neg_inf = nb_scalar_like(lpe, -INFINITY, lpe->dtype);
    /* beta at t = len - 1: lpe there at the two end positions */
    nb_tensor *s_idx = nb_unsqueeze(nb_arange_on(0, (double)Sx, 1, NB_I64, dev), 0); /* [1, S'] */
    nb_tensor *at_end = nb_logical_or(nb_eq(s_idx, nb_narrow(end, 1, 0, 1)), nb_eq(s_idx, nb_narrow(end, 1, 1, 1)));
    nb_tensor **betas = calloc((size_t)T, sizeof *betas);
    if (!betas) return nb_set_error(NB_ERR_OOM, "ctc_loss: out of host memory");
    nb_tensor *beta = nb_full_on(NB_SHAPE(N, Sx), -INFINITY, lpe->dtype, dev);
    nb_tensor *skip_next = shift(nb_where(skip, nb_scalar_like(lpe, 0, lpe->dtype), neg_inf), -2); /* 0 where s + 2 may skip to s */
    for (int64_t t = T - 1; t >= 0 && beta; t--) {
        nb_tensor *lpe_t = nb_select(lpe, 0, t);
        nb_tensor *b3 = nb_add(shift(beta, -2), skip_next);
        nb_tensor *rec = nb_where(valid, nb_add(logsumexp3(beta, shift(beta, -1), b3), lpe_t), neg_inf);
        nb_tensor *init = nb_where(at_end, lpe_t, neg_inf);
        nb_tensor *last = nb_unsqueeze(nb_eq_scalar(len, (double)(t + 1)), 1), *inside = nb_unsqueeze(nb_gt_scalar(len, (double)(t + 1)), 1);
        beta = betas[t] = nb_where(inside, rec, nb_where(last, init, neg_inf));
    }
    nb_tensor *all_b = beta ? nb_stack(betas, (int)T, 0) : NULL;
    free(betas);
    if (!all_b) return nb_last_status();
    /* lcab[t, n, c] = log sum over s with ext[n, s] = c of exp(alpha + beta), by a scatter_add of exp(ab - max) */
    nb_tensor *ab = nb_add(alphas, all_b);
    nb_tensor *m = nb_amax(ab, (int[]){2}, 1, true);
    nb_tensor *ms = nb_where(nb_isinf(m), nb_scalar_like(m, 0, m->dtype), m);
    nb_tensor *e = nb_exp(nb_sub(ab, ms));
    nb_tensor *idx = nb_expand(nb_unsqueeze(ext, 0), NB_SHAPE(T, N, Sx));
    nb_tensor *sums = nb_scatter_add(nb_zeros_like(lp), 2, idx, e);
    nb_tensor *lcab = nb_add(nb_log(sums), ms);
    /* PyTorch's: (exp(lp) - exp(lcab + nll - lp)) * grad, 0 past each input's length (and for an infinite
       loss under zero_infinity) */
    nb_tensor *nll3 = nb_reshape(nll, NB_SHAPE(1, N, 1));
    nb_tensor *g = nb_sub(nb_exp(lp), nb_exp(nb_sub(nb_add(lcab, nll3), lp)));
    g = nb_mul(g, nb_reshape(gout[0], NB_SHAPE(1, N, 1)));
    nb_tensor *t_idx = nb_reshape(nb_arange_on(0, (double)T, 1, NB_I64, dev), NB_SHAPE(T, 1, 1));
    nb_tensor *live = nb_lt(t_idx, nb_reshape(len, NB_SHAPE(1, N, 1)));
    if (zero_inf) live = nb_logical_and(live, nb_logical_not(nb_isinf(nll3)));
    gin[6] = nb_where(live, g, nb_scalar_like(lp, 0, lp->dtype));
    return gin[6] ? NB_OK : nb_last_status();
}

static bool is_int(const nb_tensor *t) { return t->dtype == NB_I64 || t->dtype == NB_I32; }

/* Everything after the checks of the public function: builds the extended
 * labels on the host, runs the recursions, reduces. */
static nb_tensor *ctc_impl(nb_tensor *lp, nb_tensor *targets, nb_tensor *in_len, nb_tensor *tgt_len, nb_ctc_loss_options o,
                           bool batched) {
    int64_t T = lp->shape[0], N = lp->shape[1], C = lp->shape[2];
    bool padded = targets->ndim == 2;
    int64_t S_pad = padded ? targets->shape[1] : 0, n_tg = nb_numel(targets);
    int64_t *il = nb_host_int64("ctc_loss", in_len), *tl = il ? nb_host_int64("ctc_loss", tgt_len) : NULL;
    int64_t *tg = tl ? nb_host_int64("ctc_loss", targets) : NULL;
    int64_t *ext = NULL, *endv = NULL;
    bool *skipv = NULL, *validv = NULL;
    double *fixv = NULL;
    nb_tensor *r = NULL;
    if (!tg) goto done;
    int64_t maxL = 0, total = 0;
    for (int64_t n = 0; n < N; n++) {
        if (il[n] < 0 || il[n] > T || tl[n] < 0 || (padded && tl[n] > S_pad)) {
            nb_set_error(NB_ERR_INVALID_ARG, "ctc_loss: sample %lld has input length %lld (of %lld) and target length "
                         "%lld (of %lld)", (long long)n, (long long)il[n], (long long)T, (long long)tl[n],
                         (long long)(padded ? S_pad : n_tg));
            goto done;
        }
        maxL = tl[n] > maxL ? tl[n] : maxL;
        total += tl[n];
    }
    if (!padded && total > n_tg) {
        nb_set_error(NB_ERR_INVALID_ARG, "ctc_loss: the target lengths sum to %lld, past the %lld concatenated targets",
                     (long long)total, (long long)n_tg);
        goto done;
    }
    int64_t Sx = 2 * maxL + 1;
    ext = calloc((size_t)(N * Sx), sizeof *ext), endv = calloc((size_t)(N * 2), sizeof *endv);
    skipv = calloc((size_t)(N * Sx), sizeof *skipv), validv = calloc((size_t)(N * Sx), sizeof *validv);
    fixv = calloc((size_t)N, sizeof *fixv);
    if (!ext || !endv || !skipv || !validv || !fixv) {
        nb_set_error(NB_ERR_OOM, "ctc_loss: out of host memory");
        goto done;
    }
    for (int64_t n = 0, off = 0; n < N; n++) {
        const int64_t *lab = padded ? tg + n * S_pad : tg + off;
        off += padded ? 0 : tl[n];
        for (int64_t s = 0; s < Sx; s++) {
            int64_t c = s % 2 == 0 || s >= 2 * tl[n] + 1 ? o.blank : lab[s / 2];
            if (c < 0 || c >= C) {
                nb_set_error(NB_ERR_INVALID_ARG, "ctc_loss: target %lld of sample %lld is outside [0, %lld)",
                             (long long)c, (long long)n, (long long)C);
                goto done;
            }
            ext[n * Sx + s] = c;
            validv[n * Sx + s] = s < 2 * tl[n] + 1;
            skipv[n * Sx + s] = s >= 2 && s % 2 == 1 && s < 2 * tl[n] + 1 && lab[s / 2] != lab[s / 2 - 1];
        }
        endv[2 * n] = 2 * tl[n], endv[2 * n + 1] = tl[n] ? 2 * tl[n] - 1 : Sx; /* Sx: a -inf column */
        fixv[n] = il[n] > 0 ? NAN : tl[n] ? INFINITY : 0; /* an empty input aligns only with an empty target */
    }
    nb_device dev = lp->storage->device;
    nb_tensor *ext_t = nb_from_data_on(ext, NB_SHAPE(N, Sx), NB_I64, dev);
    nb_tensor *skip_t = nb_from_data_on(skipv, NB_SHAPE(N, Sx), NB_BOOL, dev);
    nb_tensor *valid_t = nb_from_data_on(validv, NB_SHAPE(N, Sx), NB_BOOL, dev);
    nb_tensor *len_t = nb_from_data_on(il, NB_SHAPE(N), NB_I64, dev);
    nb_tensor *end_t = nb_from_data_on(endv, NB_SHAPE(N, 2), NB_I64, dev);
    nb_tensor *fix_t = nb_to_dtype(nb_from_data_on(fixv, NB_SHAPE(N), NB_F64, dev), lp->dtype);
    /* log_probs at the extended labels: [T, N, S'] (its gradient is the custom function's) */
    nb_tensor *lpe = ext_t ? nb_gather(nb_detach(lp), 2, nb_expand(nb_unsqueeze(ext_t, 0), NB_SHAPE(T, N, Sx))) : NULL;
    if (!lpe || !skip_t || !valid_t || !len_t || !end_t || !fix_t) goto done;
    static const nb_function fn = {.name = "ctc_loss", .n_outputs = 1, .forward = ctc_forward, .backward = ctc_backward};
    /* the custom function's input is lp itself (its gradient); lpe and the rest ride along, not requiring grad */
    nb_tensor *ins[8] = {lpe, skip_t, valid_t, len_t, end_t, fix_t, lp, ext_t};
    nb_tensor *nll = NULL;
    if (nb_function_apply(&fn, ins, 8, &nll, &o.zero_infinity) != NB_OK) goto done;
    if (o.zero_infinity) nll = nb_where(nb_isinf(nll), nb_scalar_like(nll, 0, nll->dtype), nll);
    if (o.reduction == NB_REDUCTION_MEAN) { /* each loss over its target length (at least 1), then the batch mean */
        double *den = malloc(sizeof *den * (size_t)N);
        for (int64_t n = 0; den && n < N; n++) den[n] = tl[n] > 1 ? (double)tl[n] : 1.0;
        nb_tensor *den_t = den ? nb_to_dtype(nb_from_data_on(den, NB_SHAPE(N), NB_F64, dev), lp->dtype) : NULL;
        free(den);
        r = den_t ? nb_mean(nb_div(nll, den_t), NULL, 0, false) : NB_FAIL(NB_ERR_OOM, "ctc_loss: out of host memory");
    } else if (o.reduction == NB_REDUCTION_SUM) {
        r = nb_sum(nll, NULL, 0, false);
    } else {
        r = batched ? nll : nb_reshape(nll, 0, NULL);
    }
done:
    free(il), free(tl), free(tg), free(ext), free(endv), free(skipv), free(validv), free(fixv);
    return r;
}

nb_tensor *nb_ctc_loss(nb_tensor *log_probs, nb_tensor *targets, nb_tensor *input_lengths, nb_tensor *target_lengths,
                       nb_ctc_loss_options opts) {
    nb_tensor *in[4] = {log_probs, targets, input_lengths, target_lengths};
    /* targets and lengths may live on any device (read to the host; PyTorch's lengths are CPU tensors) */
    for (int i = 0; i < 4; i++)
        if (!nb_check_inputs("ctc_loss", 1, &in[i])) return NULL;
    if (!nb_autocast_inputs(NB_OP_CTC_LOSS, 1, in) || !nb_check_dtypes(NB_OP_CTC_LOSS, 1, in)) return NULL;
    log_probs = in[0];
    if ((unsigned)opts.reduction > NB_REDUCTION_NONE)
        return NB_FAIL(NB_ERR_INVALID_ARG, "ctc_loss: bad reduction %d", (int)opts.reduction);
    bool batched = log_probs->ndim == 3;
    int tnd = targets->ndim;
    char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF], c[NB_SHAPE_BUF], d[NB_SHAPE_BUF];
    int64_t N = batched ? log_probs->shape[1] : 1, C = log_probs->ndim >= 2 ? log_probs->shape[log_probs->ndim - 1] : 0;
    bool shapes_ok = (batched || log_probs->ndim == 2) && (batched ? tnd == 1 || (tnd == 2 && targets->shape[0] == N) : tnd == 1) &&
                     input_lengths->ndim == (batched ? 1 : 0) && target_lengths->ndim == (batched ? 1 : 0) &&
                     (!batched || (input_lengths->shape[0] == N && target_lengths->shape[0] == N));
    if (shapes_ok && log_probs->shape[0] < 1)
        return NB_FAIL(NB_ERR_SHAPE, "ctc_loss: log_probs has no time steps");
    if (!shapes_ok)
        return NB_FAIL(NB_ERR_SHAPE, "ctc_loss: log_probs %s, targets %s, input_lengths %s, target_lengths %s: expected "
                       "[T, N, C], [N, S] or [sum of lengths], [N], [N] (or [T, C], [S], 0-d, 0-d unbatched)",
                       nb_fmt_shape(log_probs->ndim, log_probs->shape, a, sizeof a),
                       nb_fmt_shape(targets->ndim, targets->shape, b, sizeof b),
                       nb_fmt_shape(input_lengths->ndim, input_lengths->shape, c, sizeof c),
                       nb_fmt_shape(target_lengths->ndim, target_lengths->shape, d, sizeof d));
    if (!is_int(targets) || !is_int(input_lengths) || !is_int(target_lengths))
        return NB_FAIL(NB_ERR_DTYPE, "ctc_loss: targets and the lengths must be int64 or int32 (got %s, %s, %s)",
                       nb_dtype_name(targets->dtype), nb_dtype_name(input_lengths->dtype),
                       nb_dtype_name(target_lengths->dtype));
    if (opts.blank < 0 || opts.blank >= C)
        return NB_FAIL(NB_ERR_INVALID_ARG, "ctc_loss: blank %lld must be in [0, %lld)", (long long)opts.blank, (long long)C);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *lp = batched ? log_probs : nb_unsqueeze(log_probs, 1);
    nb_tensor *tg = batched ? targets : nb_unsqueeze(targets, 0);
    nb_tensor *il = batched ? input_lengths : nb_reshape(input_lengths, NB_SHAPE(1));
    nb_tensor *tl = batched ? target_lengths : nb_reshape(target_lengths, NB_SHAPE(1));
    return nb_scope_return(s, lp && tg && il && tl ? ctc_impl(lp, tg, il, tl, opts, batched) : NULL);
}
