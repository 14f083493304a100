/* embedding.c - nn.Embedding(num_embeddings, embedding_dim, padding_idx):
 * a lookup table "weight" [num, dim] initialised N(0, 1) as PyTorch's
 * reset_parameters (then the padding row zeroed); the forward is
 * nb_embedding, whose backward gives the padding row no gradient.
 */
#include <stdlib.h>

#include "nb_extension.h"
#include "nn_impl.h"
#include "nb_transformer.h"

typedef struct nb_embedding_ctx {
    int64_t num, dim;
    int64_t padding_idx; /* wrapped to [0, num), or NB_NO_PADDING_IDX */
    nb_tensor *weight;   /* borrowed from the module's parameters */
} nb_embedding_ctx;

static nb_tensor *embedding_forward(nb_module *m, nb_tensor *x) {
    const nb_embedding_ctx *c = nb_module_ctx(m);
    return nb_embedding(x, c->weight, c->padding_idx);
}

static const nb_module_ops embedding_ops = {"Embedding", embedding_forward, free, NULL};

int64_t nb_nn_embedding_padding_idx(const nb_module *m) {
    if (!m) return nb_module_kind(m), NB_NO_PADDING_IDX; /* nb_module_kind records the NULL */
    if (nb_module_kind(m) != embedding_ops.kind) return NB_NO_PADDING_IDX;
    return ((const nb_embedding_ctx *)nb_module_ctx((nb_module *)m))->padding_idx;
}

/* Zeroes row `row` of a [num, dim] leaf without recording autograd (a view
 * of its storage, as PyTorch's `weight[padding_idx].fill_(0)` under no_grad). */
static nb_status zero_row(nb_tensor *w, int64_t row) {
    nb_scope *s = nb_op_scope_begin();
    if (!s) return nb_last_status();
    nb_tensor *r =
        nb_tensor_view_of(w, 1, &nb_shape(w)[1], &nb_strides(w)[1], nb_storage_offset(w) + row * nb_strides(w)[0]);
    nb_status st = r ? nb_fill_(r, 0.0) : nb_last_status();
    nb_scope_end(s);
    return st;
}

nb_module *nb_nn_embedding_ex(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx, nb_dtype dt) {
    if (num_embeddings < 0 || embedding_dim < 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "Embedding: sizes must be >= 0 (got num_embeddings %lld, embedding_dim %lld)",
                       (long long)num_embeddings, (long long)embedding_dim);
    if (padding_idx != NB_NO_PADDING_IDX && (padding_idx < -num_embeddings || padding_idx >= num_embeddings))
        return NB_FAIL(NB_ERR_INVALID_ARG, "Embedding: padding_idx %lld must be within num_embeddings %lld",
                       (long long)padding_idx, (long long)num_embeddings);
    if (!nb_nn_check_dtype("Embedding", NB_OP_EMBEDDING, dt)) return NULL;
    nb_embedding_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "Embedding: out of host memory");
    c->num = num_embeddings, c->dim = embedding_dim;
    c->padding_idx = padding_idx == NB_NO_PADDING_IDX ? padding_idx
                     : padding_idx < 0                ? padding_idx + num_embeddings
                                                      : padding_idx;
    nb_module *m = nb_module_new(&embedding_ops, c);
    if (!m) return NULL;
    nb_tensor *w = nb_tensor_new_unscoped(NB_SHAPE(num_embeddings, embedding_dim), dt, nb_default_device());
    nb_status st = w ? NB_OK : nb_last_status();
    if (!st && nb_numel(w) > 0) st = nb_normal_(w, 0.0, 1.0, NULL);
    if (!st && c->padding_idx != NB_NO_PADDING_IDX && embedding_dim > 0) st = zero_row(w, c->padding_idx);
    if (st) {
        nb_release(w);
        nb_module_free(m);
        return NULL;
    }
    if (nb_module_adopt_parameter(m, "weight", w)) { /* w released by the call */
        nb_module_free(m);
        return NULL;
    }
    c->weight = w;
    return m;
}

nb_module *nb_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx) {
    return nb_nn_embedding_ex(num_embeddings, embedding_dim, padding_idx, NB_F32);
}

/* ---- EmbeddingBag -------------------------------------------------------------------- */

/* nb_forward_n: (input[, offsets[, per_sample_weights]]); NULL entries allowed. */
static int bag_forward(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    if (n_in < 1 || n_in > 3)
        return nb_set_error(NB_ERR_INVALID_ARG, "EmbeddingBag: forward takes (input[, offsets[, per_sample_weights]]), "
                            "got %d inputs", n_in), -1;
    nb_embedding_bag_options o = *(const nb_embedding_bag_options *)nb_module_ctx(m);
    o.per_sample_weights = n_in > 2 ? in[2] : NULL;
    out[0] = nb_embedding_bag(in[0], nb_module_get(m, "weight"), n_in > 1 ? in[1] : NULL, o);
    return out[0] ? 1 : -1;
}

static nb_tensor *bag_forward1(nb_module *m, nb_tensor *x) {
    nb_tensor *out[NB_FORWARD_MAX];
    return bag_forward(m, 1, &x, 1, out) < 0 ? NULL : out[0];
}

static const nb_module_ops bag_ops = {"EmbeddingBag", bag_forward1, free, bag_forward};

nb_module *nb_nn_embedding_bag(int64_t num_embeddings, int64_t embedding_dim, nb_embedding_bag_options o) {
    /* the weight as Embedding's (N(0, 1), the padding row zeroed), then the bag options */
    nb_module *e = nb_nn_embedding(num_embeddings, embedding_dim, o.has_padding_idx ? o.padding_idx : NB_NO_PADDING_IDX);
    if (!e) return NULL;
    if ((unsigned)o.mode > NB_BAG_MAX) {
        nb_module_free(e);
        return NB_FAIL(NB_ERR_INVALID_ARG, "EmbeddingBag: bad mode %d", (int)o.mode);
    }
    nb_embedding_bag_options *c = malloc(sizeof *c);
    nb_module *m = c ? nb_module_new(&bag_ops, c) : NB_FAIL(NB_ERR_OOM, "EmbeddingBag: out of host memory");
    if (m) {
        o.per_sample_weights = NULL;
        *c = o;
        if (nb_module_register_parameter(m, "weight", nb_module_get(e, "weight"))) {
            nb_module_free(m);
            m = NULL;
        }
    }
    nb_module_free(e); /* the bag holds its own reference to the weight */
    return m;
}
