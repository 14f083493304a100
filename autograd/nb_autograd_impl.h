/* nb_autograd_impl.h - the tape's node and the helpers every op uses to
 * record itself (not installed).
 *
 * An op records a node when grad mode is on and one of its inputs requires
 * grad: nb_record() links the node to the output, then the op saves what
 * its backward needs with nb_save(). A backward rule receives the gradient
 * of the node's output and writes one gradient per input (NULL where an
 * input needs none), each of that input's shape. */
#ifndef NB_AUTOGRAD_IMPL_H
#define NB_AUTOGRAD_IMPL_H

#include "nb_autograd.h"
#include "nb_impl.h"
#include "nb_op_table.h"
#include "nb_ops.h"

#define NB_NODE_MAX_IN 4
#define NB_NODE_MAX_SAVED 6

typedef struct nb_node nb_node;
typedef nb_status (*nb_backward_fn)(nb_node *n, nb_tensor *gout, nb_tensor **gin);

/* What a backward rule needs besides tensors: one typed member per op
 * family (the op id on the node says which is live). */
typedef union nb_op_params {
    struct { nb_unary_op kop; double alpha; } unary;                  /* unary ops, gelu */
    struct { nb_rounding_mode rounding; bool maximum; } binary;      /* remainder/fmod; maximum/minimum */
    struct { bool reduced[NB_MAX_DIMS]; double scale, p; int dim; } reduce; /* sum/mean/amax, max_dim, norm */
    struct { nb_reduce_op kop; int dim; } scan;
    struct { int dim; } axis;                                        /* sort, gather, index_select */
    struct { int dim; bool log; } softmax;
    struct { int dim; nb_scatter_mode mode; bool include_self; } scatter;
    struct { int64_t padding_idx; } embedding;
    struct { int dim; int64_t sizes[NB_NODE_MAX_IN]; } cat;
    struct { int dim; double alpha; } index_add;
    struct { int dims[NB_MAX_DIMS]; } permute;
    struct { int dim; int64_t start, step; } slice;                  /* also unfold: start = size */
    struct { int64_t offset; int dim1, dim2; } diagonal;             /* diagonal, diag_embed */
    struct { int64_t lo[NB_MAX_DIMS]; } pad;
    struct { int64_t rows, m; } layer_norm;
    struct { bool training; double eps; } batch_norm;
    struct { bool bilinear, align_corners; } upsample;
    struct { int64_t ignore_index; } cross_entropy;
    nb_conv_params conv;
    nb_pool_params pool;
    struct {
        int64_t B, L, S, E, Ev;
        bool causal, has_mask;
        uint64_t seed, offset;
        double scale, dropout_p;
    } attention;
    struct { int flag; } linalg; /* cholesky: upper; qr: mode; svd: full_matrices */
} nb_op_params;

struct nb_node {
    int refcount; /* the output tensor's, plus one while a backward walks it */
    uint64_t seq; /* recording order: backward runs in decreasing seq */
    nb_op_id op;  /* the op that recorded the node (nb_op_name for messages) */
    nb_backward_fn backward;
    int n_in;
    nb_tensor *in[NB_NODE_MAX_IN];      /* retained inputs that require grad, else NULL */
    nb_tensor *saved[NB_NODE_MAX_SAVED]; /* detached aliases kept for backward */
    nb_op_params p;
    int out_ndim;
    int64_t out_shape[NB_MAX_DIMS];
    nb_dtype out_dtype;
    bool freed;         /* tape already released by a backward */
    bool save_failed;   /* nb_save ran out of memory: backward must fail */
    nb_tensor *grad_acc; /* gradient of the output, during backward */
    uint64_t visit;     /* generation stamp of the backward walk */
    nb_node *release_next; /* nb_node_release's pending list (no recursion) */
};

/* Whether an op on these inputs must record a node. */
bool nb_needs_grad(int n, nb_tensor *const *inputs);
/* Records a node for `out` if nb_needs_grad(n, inputs); returns it or NULL.
 * On allocation failure returns NULL and sets *failed. */
nb_node *nb_record(nb_op_id op, nb_backward_fn fn, nb_tensor *out, int n, nb_tensor *const *inputs,
                   bool *failed);
/* Keeps a detached alias of t for backward (does not keep t's graph alive). */
void nb_save(nb_node *n, int slot, const nb_tensor *t);
void nb_node_release(nb_node *n);

/* ---- helpers for ops (autograd/ops_common.c) ------------------------------ */

/* NULL inputs -> false (error kept); different devices -> NB_ERR_DEVICE. */
bool nb_check_inputs(const char *op, int n, nb_tensor *const *inputs);
/* The inputs share one dtype, which the op's row of the op table accepts
 * (else NB_ERR_DTYPE naming the dtypes it takes) and which the inputs'
 * backend supports for the op (else NB_ERR_UNSUPPORTED naming op, dtype and
 * backend): the capability query that replaces fixed float32/float64 gates. */
bool nb_check_dtypes(nb_op_id op, int n, nb_tensor *const *inputs);
/* The capability check alone, for one dtype on t's backend. */
bool nb_check_supported(nb_op_id op, nb_dtype dt, const nb_tensor *t);
/* Sums g over broadcast dims so it has the given shape (the backward of broadcasting). */
nb_tensor *nb_sum_to_shape(nb_tensor *g, int ndim, const int64_t *shape);
/* A new tensor like t (shape, dtype, device), uninitialised, scoped. */
nb_tensor *nb_empty_like(const nb_tensor *t);
/* torch.result_type(t, <scalar value>): t's dtype if floating; for an
 * integer or bool t, an integral value t's dtype holds acts as a Python int
 * (t's dtype; int64 for bool), any other value as a Python float (NB_F32). */
nb_dtype nb_scalar_result_type(const nb_tensor *t, double value);
/* Replaces each inputs[i] whose dtype is not dt by nb_to_dtype(inputs[i], dt)
 * (scoped; differentiable, so each gradient returns in its input's dtype).
 * False (error kept) if a cast fails. */
bool nb_promote_inputs(int n, nb_tensor **inputs, nb_dtype dt);
/* A 0-dim tensor holding value, of dtype dt, on t's device (scoped). */
nb_tensor *nb_scalar_like(const nb_tensor *t, double value, nb_dtype dt);

#endif
