/* loss.c - torch.nn's loss modules and the two distance modules: each
 * holds its options and calls the functional of the same name
 * (autograd/ops_loss*.c) on the tensors given to nb_forward_n, in
 * PyTorch's forward order: (input, target), (input1, input2, target) for
 * MarginRanking and CosineEmbedding, (input, target, var) for GaussianNLL,
 * (anchor, positive, negative) for the triplet losses, (log_probs,
 * targets, input_lengths, target_lengths) for CTC, (x1, x2) for
 * CosineSimilarity and PairwiseDistance. A class weight or pos_weight given
 * to the constructor is registered as the buffer "weight" / "pos_weight",
 * as PyTorch's register_buffer, so it is in the state_dict and the forward
 * uses the module's copy.
 */
#include <stdlib.h>

#include "nb_extension.h"
#include "nn_impl.h"

/* Each kind: enum name, torch.nn class, input count, the forward's parameters. */
#define LOSS_KINDS_LIST(X)                                                               \
    X(L1, "L1Loss", 2, "input, target")                                                  \
    X(MSE, "MSELoss", 2, "input, target")                                                \
    X(CROSS_ENTROPY, "CrossEntropyLoss", 2, "input, target")                             \
    X(NLL, "NLLLoss", 2, "input, target")                                                \
    X(SMOOTH_L1, "SmoothL1Loss", 2, "input, target")                                     \
    X(HUBER, "HuberLoss", 2, "input, target")                                            \
    X(BCE, "BCELoss", 2, "input, target")                                                \
    X(BCE_LOGITS, "BCEWithLogitsLoss", 2, "input, target")                               \
    X(KL_DIV, "KLDivLoss", 2, "input, target")                                           \
    X(SOFT_MARGIN, "SoftMarginLoss", 2, "input, target")                                 \
    X(HINGE_EMBEDDING, "HingeEmbeddingLoss", 2, "input, target")                         \
    X(MARGIN_RANKING, "MarginRankingLoss", 3, "input1, input2, target")                  \
    X(POISSON_NLL, "PoissonNLLLoss", 2, "log_input, target")                             \
    X(GAUSSIAN_NLL, "GaussianNLLLoss", 3, "input, target, var")                          \
    X(MULTILABEL_SOFT_MARGIN, "MultiLabelSoftMarginLoss", 2, "input, target")            \
    X(MULTI_MARGIN, "MultiMarginLoss", 2, "input, target")                               \
    X(MULTILABEL_MARGIN, "MultiLabelMarginLoss", 2, "input, target")                     \
    X(COSINE_EMBEDDING, "CosineEmbeddingLoss", 3, "input1, input2, target")              \
    X(TRIPLET_MARGIN, "TripletMarginLoss", 3, "anchor, positive, negative")              \
    X(TRIPLET_DISTANCE, "TripletMarginWithDistanceLoss", 3, "anchor, positive, negative") \
    X(CTC, "CTCLoss", 4, "log_probs, targets, input_lengths, target_lengths")          \
    X(COSINE_SIMILARITY, "CosineSimilarity", 2, "x1, x2")                                \
    X(PAIRWISE_DISTANCE, "PairwiseDistance", 2, "x1, x2")

#define LOSS_ENUM(id, kind, n, inputs) id,
typedef enum loss_kind { LOSS_KINDS_LIST(LOSS_ENUM) LOSS_KINDS } loss_kind;

typedef struct loss_ctx {
    loss_kind kind;
    nb_loss_options o;           /* weight and pos_weight: NULL here, the buffers are read at each forward */
    nb_cross_entropy_options ce; /* CrossEntropyLoss, NLLLoss */
    nb_distance_fn distance;     /* TripletMarginWithDistanceLoss */
    nb_ctc_loss_options ctc;     /* CTCLoss */
    void *user;
    int dim;                     /* CosineSimilarity */
    bool keepdim;                /* PairwiseDistance */
} loss_ctx;

#define LOSS_INFO(id, kind, n, inputs) [id] = {kind, n, inputs},
static const struct {
    const char *kind;
    int n_in;
    const char *inputs;
} kinds[LOSS_KINDS] = {LOSS_KINDS_LIST(LOSS_INFO)};

static nb_tensor *loss_call(nb_module *m, const loss_ctx *c, nb_tensor *const *x) {
    nb_loss_options o = c->o;
    nb_cross_entropy_options ce = c->ce;
    o.weight = ce.weight = nb_module_get(m, "weight"); /* NULL when none was given */
    o.pos_weight = nb_module_get(m, "pos_weight");
    switch (c->kind) {
    case L1: return nb_l1_loss(x[0], x[1], o.reduction);
    case MSE: return nb_mse_loss(x[0], x[1], o.reduction);
    case CROSS_ENTROPY: return nb_cross_entropy_ex(x[0], x[1], ce);
    case NLL: return nb_nll_loss(x[0], x[1], ce);
    case SMOOTH_L1: return nb_smooth_l1_loss(x[0], x[1], o);
    case HUBER: return nb_huber_loss(x[0], x[1], o);
    case BCE: return nb_binary_cross_entropy(x[0], x[1], o);
    case BCE_LOGITS: return nb_binary_cross_entropy_with_logits(x[0], x[1], o);
    case KL_DIV: return nb_kl_div(x[0], x[1], o);
    case SOFT_MARGIN: return nb_soft_margin_loss(x[0], x[1], o.reduction);
    case HINGE_EMBEDDING: return nb_hinge_embedding_loss(x[0], x[1], o);
    case MARGIN_RANKING: return nb_margin_ranking_loss(x[0], x[1], x[2], o);
    case POISSON_NLL: return nb_poisson_nll_loss(x[0], x[1], o);
    case GAUSSIAN_NLL: return nb_gaussian_nll_loss(x[0], x[1], x[2], o);
    case MULTILABEL_SOFT_MARGIN: return nb_multilabel_soft_margin_loss(x[0], x[1], o);
    case MULTI_MARGIN: return nb_multi_margin_loss(x[0], x[1], o);
    case MULTILABEL_MARGIN: return nb_multilabel_margin_loss(x[0], x[1], o.reduction);
    case COSINE_EMBEDDING: return nb_cosine_embedding_loss(x[0], x[1], x[2], o);
    case TRIPLET_MARGIN: return nb_triplet_margin_loss(x[0], x[1], x[2], o);
    case TRIPLET_DISTANCE: return nb_triplet_margin_with_distance_loss(x[0], x[1], x[2], c->distance, c->user, o);
    case CTC: return nb_ctc_loss(x[0], x[1], x[2], x[3], c->ctc);
    case COSINE_SIMILARITY: return nb_cosine_similarity(x[0], x[1], c->dim, o.eps);
    case PAIRWISE_DISTANCE: return nb_pairwise_distance(x[0], x[1], o.p, o.eps, c->keepdim);
    default: break;
    }
    NB_ASSERT(!"unknown loss kind");
    return NULL;
}

static int loss_forward(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    const loss_ctx *c = nb_module_ctx(m);
    if (n_in != kinds[c->kind].n_in)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: forward takes (%s), got %d input%s", kinds[c->kind].kind,
                            kinds[c->kind].inputs, n_in, n_in == 1 ? "" : "s"), -1;
    out[0] = loss_call(m, c, in);
    return out[0] ? 1 : -1;
}

#define LOSS_OPS(id, kind, n, inputs) [id] = {kind, NULL, free, loss_forward},
static const nb_module_ops loss_ops[LOSS_KINDS] = {LOSS_KINDS_LIST(LOSS_OPS)};

/* A loss module of kind k; weight and pos_weight (may be NULL) become buffers. */
static nb_module *make(loss_kind k, loss_ctx c, nb_tensor *weight, nb_tensor *pos_weight) {
    const char *name = kinds[k].kind;
    if ((unsigned)c.o.reduction > NB_REDUCTION_NONE || (unsigned)c.ce.reduction > NB_REDUCTION_NONE ||
        (unsigned)c.ctc.reduction > NB_REDUCTION_NONE)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: bad reduction %d", name,
                       (int)(c.o.reduction ? c.o.reduction : c.ce.reduction ? c.ce.reduction : c.ctc.reduction));
    loss_ctx *ctx = malloc(sizeof *ctx);
    if (!ctx) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", name);
    c.kind = k;
    c.o.weight = c.o.pos_weight = c.ce.weight = NULL;
    *ctx = c;
    nb_module *m = nb_module_new(&loss_ops[k], ctx);
    nb_status st = m ? NB_OK : nb_last_status();
    if (!st && weight) st = nb_module_register_buffer(m, "weight", weight);
    if (!st && pos_weight) st = nb_module_register_buffer(m, "pos_weight", pos_weight);
    if (st) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

static loss_ctx with_reduction(nb_reduction r) { return (loss_ctx){.o = {.reduction = r}}; }
static loss_ctx with_options(nb_loss_options o) { return (loss_ctx){.o = o}; }

nb_module *nb_nn_l1_loss(nb_reduction r) { return make(L1, with_reduction(r), NULL, NULL); }
nb_module *nb_nn_mse_loss(nb_reduction r) { return make(MSE, with_reduction(r), NULL, NULL); }
nb_module *nb_nn_cross_entropy_loss(nb_cross_entropy_options o) {
    return make(CROSS_ENTROPY, (loss_ctx){.ce = o}, o.weight, NULL);
}
nb_module *nb_nn_nll_loss(nb_cross_entropy_options o) { return make(NLL, (loss_ctx){.ce = o}, o.weight, NULL); }
nb_module *nb_nn_smooth_l1_loss(nb_loss_options o) { return make(SMOOTH_L1, with_options(o), NULL, NULL); }
nb_module *nb_nn_huber_loss(nb_loss_options o) { return make(HUBER, with_options(o), NULL, NULL); }
nb_module *nb_nn_bce_loss(nb_loss_options o) { return make(BCE, with_options(o), o.weight, NULL); }
nb_module *nb_nn_bce_with_logits_loss(nb_loss_options o) {
    return make(BCE_LOGITS, with_options(o), o.weight, o.pos_weight);
}
nb_module *nb_nn_kl_div_loss(nb_loss_options o) { return make(KL_DIV, with_options(o), NULL, NULL); }
nb_module *nb_nn_soft_margin_loss(nb_reduction r) { return make(SOFT_MARGIN, with_reduction(r), NULL, NULL); }
nb_module *nb_nn_hinge_embedding_loss(nb_loss_options o) { return make(HINGE_EMBEDDING, with_options(o), NULL, NULL); }
nb_module *nb_nn_margin_ranking_loss(nb_loss_options o) { return make(MARGIN_RANKING, with_options(o), NULL, NULL); }
nb_module *nb_nn_poisson_nll_loss(nb_loss_options o) { return make(POISSON_NLL, with_options(o), NULL, NULL); }
nb_module *nb_nn_gaussian_nll_loss(nb_loss_options o) { return make(GAUSSIAN_NLL, with_options(o), NULL, NULL); }
nb_module *nb_nn_multilabel_soft_margin_loss(nb_loss_options o) {
    return make(MULTILABEL_SOFT_MARGIN, with_options(o), o.weight, NULL);
}
nb_module *nb_nn_multi_margin_loss(nb_loss_options o) { return make(MULTI_MARGIN, with_options(o), o.weight, NULL); }
nb_module *nb_nn_multilabel_margin_loss(nb_reduction r) {
    return make(MULTILABEL_MARGIN, with_reduction(r), NULL, NULL);
}
nb_module *nb_nn_cosine_embedding_loss(nb_loss_options o) {
    return make(COSINE_EMBEDDING, with_options(o), NULL, NULL);
}
nb_module *nb_nn_triplet_margin_loss(nb_loss_options o) { return make(TRIPLET_MARGIN, with_options(o), NULL, NULL); }
nb_module *nb_nn_triplet_margin_with_distance_loss(nb_distance_fn distance, void *user, nb_loss_options o) {
    loss_ctx c = with_options(o);
    c.distance = distance, c.user = user;
    return make(TRIPLET_DISTANCE, c, NULL, NULL);
}
nb_module *nb_nn_ctc_loss(nb_ctc_loss_options o) { return make(CTC, (loss_ctx){.ctc = o}, NULL, NULL); }
nb_module *nb_nn_cosine_similarity(int dim, double eps) {
    return make(COSINE_SIMILARITY, (loss_ctx){.o = {.eps = eps}, .dim = dim}, NULL, NULL);
}
nb_module *nb_nn_pairwise_distance(double p, double eps, bool keepdim) {
    return make(PAIRWISE_DISTANCE, (loss_ctx){.o = {.p = p, .eps = eps}, .keepdim = keepdim}, NULL, NULL);
}
