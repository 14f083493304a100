/* adaptive.c - nn.AdaptiveLogSoftmaxWithLoss (Grave et al. 2017, "Efficient
 * softmax approximation for GPUs"), with PyTorch's children and keys: head
 * (Linear in_features -> shortlist + n_clusters, bias head_bias), tail.i
 * (Sequential of Linear in_features -> in_features // div_value^(i+1) and
 * Linear -> the cluster's size, no biases), initialised in that order.
 *
 * The log-probabilities are PyTorch's _get_full_log_prob: the head's
 * log_softmax for the shortlist, and for cluster i its tail's log_softmax
 * plus the head's log-probability of the cluster. The forward gathers the
 * target's column of that matrix: every tail runs on every row (PyTorch
 * runs each on its cluster's rows alone); the values and gradients are
 * the same, each a sum of the same two terms.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_extension.h"
#include "nn_impl.h"

#define ASM_MAX_CLUSTERS 32

typedef struct asm_ctx {
    int64_t in_features, n_classes, shortlist;
    int n_clusters;
    int64_t cutoffs[ASM_MAX_CLUSTERS + 1]; /* the given cutoffs, then n_classes */
    nb_module *head, *tail[ASM_MAX_CLUSTERS];
} asm_ctx;

/* [N, n_classes] log-probabilities of x [N, in_features]. */
static nb_tensor *full_log_prob(const asm_ctx *c, nb_tensor *x) {
    nb_tensor *head = nb_log_softmax(nb_forward(c->head, x), 1);
    nb_tensor *parts[ASM_MAX_CLUSTERS + 1];
    parts[0] = nb_narrow(head, 1, 0, c->shortlist);
    for (int i = 0; i < c->n_clusters; i++) {
        nb_tensor *cluster = nb_log_softmax(nb_forward(c->tail[i], x), 1);
        parts[i + 1] = nb_add(cluster, nb_narrow(head, 1, c->shortlist + i, 1));
    }
    return nb_cat(parts, c->n_clusters + 1, 1);
}

static bool asm_input(nb_module *m, const asm_ctx *c, nb_tensor *x) {
    if (!x) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: input is NULL", nb_module_kind(m));
        return false;
    }
    char a[NB_SHAPE_BUF];
    if ((nb_dim(x) != 1 && nb_dim(x) != 2) || nb_shape(x)[nb_dim(x) - 1] != c->in_features) {
        nb_set_error(NB_ERR_SHAPE, "%s: input %s must be [N, %lld] or [%lld]", nb_module_kind(m),
                     nb_shape_str(x, a, sizeof a), (long long)c->in_features, (long long)c->in_features);
        return false;
    }
    return true;
}

/* forward_n (input, target) -> (output, loss): output [N] the target's log-probability, loss its negated mean. */
static int asm_forward_n(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    const asm_ctx *c = nb_module_ctx(m);
    if (n_in != 2)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: forward takes (input, target), got %d inputs", nb_module_kind(m),
                            n_in), -1;
    nb_tensor *x = in[0], *t = in[1];
    if (!asm_input(m, c, x)) return -1;
    bool batched = nb_dim(x) == 2;
    char a[NB_SHAPE_BUF];
    if (!t || nb_dim(t) != (batched ? 1 : 0) || (batched && nb_shape(t)[0] != nb_shape(x)[0]) ||
        (nb_dtype_of(t) != NB_I64 && nb_dtype_of(t) != NB_I32)) {
        if (t || nb_last_status() == NB_OK)
            nb_set_error(NB_ERR_SHAPE, "%s: target %s must be int64 [N] for input [N, in_features] (0-d for [in])",
                         nb_module_kind(m), t ? nb_shape_str(t, a, sizeof a) : "NULL");
        return -1;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *xb = batched ? x : nb_unsqueeze(x, 0), *tb = nb_reshape(t, NB_SHAPE(-1, 1));
    nb_tensor *lp = full_log_prob(c, xb);
    nb_tensor *o = nb_reshape(nb_gather(lp, 1, tb), batched ? 1 : 0, (int64_t[]){nb_numel(t)});
    nb_tensor *loss = max_out > 1 ? nb_mean(nb_neg(o), NULL, 0, false) : NULL;
    bool ok = o && (max_out < 2 || loss);
    if (ok) {
        nb_retain(o);
        if (loss) nb_retain(loss);
    }
    nb_scope_end(s);
    if (!ok) return -1;
    out[0] = nb_scope_adopt(o);
    if (loss) out[1] = nb_scope_adopt(loss);
    return 2;
}

static nb_tensor *asm_forward1(nb_module *m, nb_tensor *x) {
    (void)x;
    return NB_FAIL(NB_ERR_INVALID_ARG, "%s: forward takes (input, target): use nb_forward_n", nb_module_kind(m));
}

static const nb_module_ops asm_ops = {"AdaptiveLogSoftmaxWithLoss", asm_forward1, free, asm_forward_n};

nb_module *nb_nn_adaptive_log_softmax_with_loss(int64_t in_features, int64_t n_classes, const int64_t *cutoffs,
                                                int n_cutoffs, double div_value, bool head_bias, nb_dtype dtype) {
    const char *kind = asm_ops.kind;
    div_value = nb_option(div_value, 4.0);
    if (in_features < 1 || n_classes < 2 || n_cutoffs < 1 || n_cutoffs > ASM_MAX_CLUSTERS || !cutoffs || !(div_value > 0))
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: in_features %lld and n_classes %lld must be positive (n_classes >= 2), "
                       "1 to %d cutoffs, div_value > 0", kind, (long long)in_features, (long long)n_classes,
                       ASM_MAX_CLUSTERS);
    for (int i = 0; i < n_cutoffs; i++)
        if (cutoffs[i] <= 0 || cutoffs[i] >= n_classes || (i && cutoffs[i] <= cutoffs[i - 1]))
            return NB_FAIL(NB_ERR_INVALID_ARG, "%s: cutoffs should be a sequence of unique, positive integers sorted in "
                           "an increasing order, where each value is between 1 and n_classes-1", kind);
    asm_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", kind);
    c->in_features = in_features, c->n_classes = n_classes, c->shortlist = cutoffs[0], c->n_clusters = n_cutoffs;
    for (int i = 0; i < n_cutoffs; i++) c->cutoffs[i] = cutoffs[i];
    c->cutoffs[n_cutoffs] = n_classes;
    nb_module *m = nb_module_new(&asm_ops, c);
    if (!m) return NULL;
    bool ok = nb_nn_add_child(m, "head", nb_nn_linear_ex(in_features, c->shortlist + n_cutoffs, head_bias, dtype), &c->head);
    nb_module *tail = NULL;
    ok = ok && nb_nn_add_child(m, "tail", nb_nn_module_list(), &tail);
    for (int i = 0; ok && i < n_cutoffs; i++) {
        int64_t hsz = (int64_t)floor((double)in_features / pow(div_value, i + 1)); /* in_features // div_value**(i+1) */
        int64_t osz = c->cutoffs[i + 1] - c->cutoffs[i];
        if (hsz < 1) {
            nb_set_error(NB_ERR_INVALID_ARG, "%s: cluster %d's projection has size %lld (in_features %lld // %g^%d)",
                         kind, i, (long long)hsz, (long long)in_features, div_value, i + 1);
            ok = false;
            break;
        }
        nb_module *proj = nb_nn_sequential_array((nb_module *[]){nb_nn_linear_ex(in_features, hsz, false, dtype),
                                                                  nb_nn_linear_ex(hsz, osz, false, dtype)}, 2);
        ok = proj && nb_nn_module_list_append(tail, proj) == NB_OK;
        c->tail[i] = ok ? proj : NULL;
    }
    if (!ok) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_tensor *nb_nn_adaptive_log_softmax_log_prob(nb_module *m, nb_tensor *input) {
    if (!m || strcmp(nb_module_kind(m), asm_ops.kind))
        return NB_FAIL(NB_ERR_INVALID_ARG, "log_prob: %s is not an AdaptiveLogSoftmaxWithLoss", m ? nb_module_kind(m) : "NULL");
    const asm_ctx *c = nb_module_ctx(m);
    if (!asm_input(m, c, input)) return NULL;
    nb_scope *s = nb_scope_begin();
    bool batched = nb_dim(input) == 2;
    nb_tensor *lp = full_log_prob(c, batched ? input : nb_unsqueeze(input, 0));
    return nb_scope_return(s, lp && !batched ? nb_squeeze(lp, 0) : lp);
}

nb_tensor *nb_nn_adaptive_log_softmax_predict(nb_module *m, nb_tensor *input) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *lp = nb_nn_adaptive_log_softmax_log_prob(m, input);
    return nb_scope_return(s, lp ? nb_argmax(lp, nb_dim(lp) - 1, false) : NULL);
}
