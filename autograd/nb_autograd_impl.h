/* nb_autograd_impl.h - the tape's node and the helpers every op uses to
 * record itself (not installed).
 *
 * An op records a node when grad mode is on and one of its inputs requires
 * grad: nb_record() links the node to the output, then the op saves what
 * its backward needs with nb_save(). A backward rule receives the gradient
 * of the node's output and writes one gradient per input (NULL where an
 * input needs none), each of that input's shape.
 *
 * Under create_graph (nb_grad, nb_backward_ex) grad mode is on while rules
 * run and n->saved[] holds the saved tensors connected to their graphs (the
 * original tensor, or for the node's own output an alias whose grad_fn is
 * the node), so nb_needs_grad() of the gradient and the saved tensors tells
 * a rule to compute with recorded ops (or to record its raw result with
 * nb_record_grad and a rule of its own). An op whose rule does so carries
 * NB_OPF_DIFF2 in the op table; the engine records the gradients of the
 * others as nodes that fail when a double backward reaches them. */
#ifndef NB_AUTOGRAD_IMPL_H
#define NB_AUTOGRAD_IMPL_H

#ifdef NB_ABOVE_OPS
#error "nb_autograd_impl.h is private to core/, backend/ and autograd/"
#endif

#include "nb_autograd.h"
#include "nb_impl.h"
#include "nb_op_table.h"
#include "nb_ops.h"

#define NB_NODE_MAX_IN 4
#define NB_NODE_MAX_SAVED 6
/* A custom function's inputs and outputs (autograd/function.c). */
#define NB_FUNCTION_MAX_IO 16

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
    struct { int64_t rows, m; double eps; } layer_norm;
    struct { bool training; double eps; } batch_norm;
    struct { bool bilinear, align_corners; } upsample;
    struct { int64_t ignore_index; } cross_entropy;
    nb_conv_params conv;
    struct { nb_conv_params conv; int64_t shape[4]; } conv_grad;     /* a convolution's gradient node */
    nb_pool_params pool;
    struct {
        int64_t B, L, S, E, Ev;
        bool causal, has_mask, own_rng; /* own_rng: dropout drawn by the backend's generator (nb_attention_args) */
        uint64_t seed, offset;
        const uint64_t *offset_base; /* captured in a CUDA graph: the device offset base (core/graph.c) */
        double scale, dropout_p;
    } attention;
    struct { int flag; } linalg; /* cholesky: upper; qr: mode; svd: full_matrices */
    struct { nb_fake_quant_params q; int64_t geo[3]; } fake_quant; /* x as [outer, C, inner] */
} nb_op_params;

/* What recorded a node. */
typedef enum nb_node_kind {
    NB_NODE_OP,       /* an op's forward */
    NB_NODE_GRAD,     /* a backward rule under create_graph: a step of the op's gradient */
    NB_NODE_NODIFF,   /* a gradient whose rule is not differentiable: backward through it fails */
    NB_NODE_FUNCTION, /* a custom function (nb_function_apply) */
} nb_node_kind;

/* Per-node state most nodes lack (allocated on demand): the gradient
 * hooks of the node's outputs, anomaly mode's record of the forward, a
 * custom function's context. */
typedef struct nb_node_ext {
    struct nb_tensor_hooks *hooks; /* hooks of the outputs (non-leaf tensors), each naming its output */
    char *trace;                   /* anomaly mode: "mul([3] float64, [3] float64) -> [3] float64" */
    struct nb_function_ctx *fn;    /* NB_NODE_FUNCTION */
} nb_node_ext;

/* ---- autocast (autocast.c) ---- */
/* Under an autocast region for an input's device type, replaces in[i] by
 * its cast under op's policy (the row's ac column; NULL entries skipped);
 * false with an error. */
bool nb_autocast_inputs(nb_op_id op, int n, nb_tensor **in);
/* Records out as t cast to out's dtype (nb_to_dtype's node), out already
 * holding the cast values; false (error set) when recording failed. */
bool nb_cast_record(nb_tensor *t, nb_tensor *out);
/* Whether the gradient of n's input i may be computed in float32 though
 * that input is 16-bit: it is an autocast cast of a float32 tensor, or a
 * reshape of one, without hooks (the cast's backward then passes a float32
 * gradient through, so a GEMM can write it without rounding it to 16 bits
 * first). */
bool nb_grad_f32_ok(const nb_node *n, int i);
/* Backward passes run without autocast (nested: pause true, then false). */
void nb_autocast_pause(bool pause);
/* An autocast region is open for dev's type and not paused (by backward). */
bool nb_autocast_active(nb_device dev);

struct nb_node {
    int refcount; /* the output tensors', plus one while a backward walks it */
    uint64_t seq; /* recording order: backward runs in decreasing seq */
    nb_op_id op;  /* the op that recorded the node (nb_op_name for messages) */
    uint8_t kind; /* nb_node_kind */
    uint8_t saved_out; /* bit i: saved[i] is the node's own output (see nb_save) */
    uint8_t bw;   /* flags of the running backward (engine.c) */
    bool freed;         /* tape already released by a backward */
    bool save_failed;   /* nb_save ran out of memory: backward must fail */
    bool acc_owned;     /* grad_acc is a buffer the engine made (nothing else refers to it): added into in place */
    /* a cast autocast made (autocast.c): nothing outside sees its output,
     * so when it cast float32 to 16 bits its gradient may arrive in
     * float32 already (nb_grad_f32_ok) and its backward passes it on */
    bool autocast_cast;
    nb_backward_fn backward;
    int n_in;
    nb_tensor **in;                      /* in_buf, or a custom function's inputs */
    nb_tensor *in_buf[NB_NODE_MAX_IN];   /* retained inputs that require grad, else NULL */
    /* The edges, taken when the node was recorded (PyTorch's next_edges):
     * input i's grad_fn (retained; NULL for a leaf) and output number. The
     * engine follows these, not in[i]'s current grad_fn, so an in-place op
     * or a parametrization that later rebinds an input's history
     * (nb_tensor_become) leaves this graph as it was. */
    nb_node **edge;                      /* edge_buf, or a custom function's */
    int *edge_nr;
    nb_node *edge_buf[NB_NODE_MAX_IN];
    int edge_nr_buf[NB_NODE_MAX_IN];
    nb_tensor *saved[NB_NODE_MAX_SAVED]; /* detached aliases kept for backward */
    /* the saved tensor itself when it required grad and is not the
     * node's output: under create_graph, backward computes with it, so
     * the gradient is connected to the graph that made it */
    nb_tensor *saved_var[NB_NODE_MAX_SAVED];
    unsigned saved_version[NB_NODE_MAX_SAVED]; /* its storage's version when saved */
    nb_op_params p;
    int out_ndim;
    int64_t out_shape[NB_MAX_DIMS];
    nb_dtype out_dtype;
    nb_tensor *grad_acc; /* gradient of output 0, during backward */
    /* grad_acc made by the engine for slices' gradients and not zeroed:
     * only [acc_lo, acc_hi) of dim acc_dim written so far (engine.c) */
    bool acc_lazy;
    int acc_dim;
    int64_t acc_lo, acc_hi;
    uint64_t visit;     /* generation stamp of the backward walk */
    nb_node *release_next; /* nb_node_release's pending list (no recursion) */
    nb_node_ext *ext;   /* NULL for most nodes */
};

/* Whether an op on these inputs must record a node: grad mode is on and
 * one of them requires grad. Inside backward grad mode is on only under
 * create_graph, so a backward rule asks this of its gradient and saved
 * tensors to choose between its raw kernels (first order) and recorded
 * ops whose result can be differentiated again. */
bool nb_needs_grad(int n, nb_tensor *const *inputs);
/* Records a node of op for `out` if nb_needs_grad(n, inputs), with the
 * backward rule op's row names (NB_OP_TABLE's bw column: a BW(f) row runs
 * nb_bw_f; recording a BW_CALLS or BW_NONE row is a broken invariant).
 * Returns the node or NULL. On allocation failure (or an anomaly, in
 * anomaly mode) returns NULL and sets *failed. */
nb_node *nb_record(nb_op_id op, nb_tensor *out, int n, nb_tensor *const *inputs, bool *failed);
/* The backward rule of op's row, NULL for BW_CALLS and BW_NONE rows. */
nb_backward_fn nb_op_backward(nb_op_id op);
/* The backward rules the rows name (nb_bw_unary for BW(unary)), each
 * defined in its family's autograd/ops_<family>.c. */
#define BW(f) nb_status nb_bw_##f(nb_node *n, nb_tensor *gout, nb_tensor **gin);
#define BW_CALLS
#define BW_NONE
#define NB_OP_BW_DECL(id, name, family, flags, dtypes, slots, bw, ac) bw
NB_OP_TABLE(NB_OP_BW_DECL)
#undef NB_OP_BW_DECL
#undef BW
#undef BW_CALLS
#undef BW_NONE
/* An embedding or index_select node's input gradient, for g the
 * gradient of its output, added straight into dst, the input's existing
 * .grad (its shape and dtype, contiguous; float32/float64), instead of
 * into zeros (autograd/ops_index.c; the engine's choice). NB_OK or the
 * kernel's error. */
nb_status nb_index_grad_into(nb_node *n, nb_tensor *g, nb_tensor *dst);
/* The next recording order number of this thread (a node made by hand). */
uint64_t nb_next_seq(void);
/* A backward rule's own node under create_graph: records `out` (a
 * gradient the rule computed with raw kernels) as a step of src's op's
 * gradient with rule fn, which must itself use recorded ops. Copies src's
 * params. Returns the node or NULL (no input needs grad, or *failed). */
nb_node *nb_record_grad(const nb_node *src, nb_backward_fn fn, nb_tensor *out, int n, nb_tensor *const *inputs,
                        bool *failed);
/* Keeps a detached alias of t for backward (does not keep t's graph
 * alive), and t's storage version for the in-place check. Saving the
 * node's own output (t->grad_fn == n) keeps no reference to it. */
void nb_save(nb_node *n, int slot, const nb_tensor *t);
void nb_node_release(nb_node *n);
/* A new view of t's storage (scoped) holding output out_nr of node n as
 * its history (n retained): a saved output unpacked for double backward,
 * and the old history an in-place op differentiates through. */
nb_tensor *nb_history_view(nb_tensor *t, nb_node *n, int out_nr);
/* Sets node n's edge i from input t (its grad_fn retained, its output_nr). */
void nb_node_set_edge(nb_node *n, int i, const nb_tensor *t);
/* t (same shape and dtype as src) becomes a view of src's storage with
 * src's autograd node (grad_fn, output_nr, requires_grad), releasing its
 * own: the in-place ops under autograd and the parametrizations
 * (nn/parametrize.c) rewrite a tensor object the caller keeps this way.
 * Nothing but its owner may hold t (a node holding it would see the new
 * history): the callers check its refcount. */
void nb_tensor_become(nb_tensor *t, nb_tensor *src);
/* Fills core's nb_tape hooks (core/nb_impl.h), once per process: called
 * where a node or a tensor's hook list is first made. */
void nb_tape_register(void);
/* Frees a leaf's hook list (hooks.c; core calls it, through nb_tape, when t dies). */
void nb_tensor_hooks_free(struct nb_tensor_hooks *h);
/* The node's ext, allocated on first use (NULL on OOM, error set). */
nb_node_ext *nb_node_ext_get(nb_node *n);
/* "mul", or "the backward of mul" for a gradient node, or a custom
 * function's name: for messages. */
const char *nb_node_name(const nb_node *n, char *buf, size_t len);

/* ---- saved tensors (engine.c; also a custom function's) ------------------- */

/* Fails with PyTorch's message when t's storage changed since it was saved
 * at `version` by node n. */
nb_status nb_saved_check(const nb_node *n, const nb_tensor *alias, unsigned version, int index);
/* The tensor backward computes with: connected (create_graph) is the
 * original var when there is one, or for the node's output an alias whose
 * grad_fn is n (output out_nr); else the detached alias. Scoped (NULL on
 * OOM). */
nb_tensor *nb_saved_unpack(nb_node *n, nb_tensor *alias, nb_tensor *var, bool is_out, int out_nr, bool connected);

/* ---- hooks and anomaly mode (autograd/hooks.c) ----------------------------- */

typedef struct nb_hook {
    int64_t id;
    int kind;      /* NB_HOOK_* */
    int output_nr; /* the output a node hook belongs to */
    union {
        nb_grad_hook_fn grad;
        nb_post_accumulate_grad_hook_fn post;
    } fn;
    void *user;
} nb_hook;
enum { NB_HOOK_GRAD, NB_HOOK_POST_ACCUMULATE };
struct nb_tensor_hooks {
    nb_hook *v;
    int len, cap;
};
/* Runs the gradient hooks of kind NB_HOOK_GRAD for output out_nr on *g
 * (each may replace it). */
nb_status nb_hooks_run_grad(struct nb_tensor_hooks *h, int out_nr, nb_tensor **g, const char *what);
/* Runs a leaf's post-accumulate-grad hooks. */
nb_status nb_hooks_run_post(nb_tensor *leaf);
bool nb_anomaly_enabled(void);
/* Anomaly mode: NB_ERR_ANOMALY when t holds NaN or inf (what names the op
 * and the tensor). */
nb_status nb_anomaly_check(const nb_tensor *t, const char *what);
/* Whether any of the float tensors holds NaN or inf. */
bool nb_anomaly_nonfinite(int n, nb_tensor *const *ts);

/* ---- custom functions (autograd/function.c) --------------------------------- */

/* nb_function_apply for an op of the table whose backward runs kernels
 * no rule differentiates (torch.autograd.function.once_differentiable):
 * the node is named after fn, and under create_graph its gradients are
 * recorded as constants that fail, naming op, when a double backward
 * reaches them. op NB_OP_COUNT: nb_function_apply. */
nb_status nb_function_apply_as(nb_op_id op, const nb_function *fn, nb_tensor *const *inputs, int n_inputs,
                               nb_tensor **outputs, void *user);
const char *nb_function_node_name(const nb_node *n);
int nb_function_n_outputs(const nb_node *n);
/* The gradient accumulator of output out_nr >= 1 (output 0's is grad_acc). */
nb_tensor **nb_function_acc(nb_node *n, int out_nr);
bool nb_function_has_grad(const nb_node *n);
void nb_function_drop_grads(nb_node *n);
void nb_function_free_tape(nb_node *n); /* the inputs and saved tensors */
void nb_function_free(nb_node *n);      /* the rest of the context */

/* ---- helpers for ops (autograd/ops_common.c) ------------------------------ */

/* NULL inputs -> false (error kept); different devices -> NB_ERR_DEVICE. */
bool nb_check_inputs(const char *op, int n, nb_tensor *const *inputs);
/* The inputs share one dtype, which the op's row of the op table accepts
 * (else NB_ERR_DTYPE naming the dtypes it takes) and which the inputs'
 * backend supports for the op (else NB_ERR_UNSUPPORTED naming op, dtype and
 * backend): the capability query that replaces fixed float32/float64 gates. */
bool nb_check_dtypes(nb_op_id op, int n, nb_tensor *const *inputs);
/* The values of t (an integer tensor, any device) read to the host as a
 * malloc'd int64 array of nb_numel(t) entries: the ops whose output sizes
 * or index tables depend on lengths and offsets (ctc_loss, the packed
 * sequences, grouped_mm). NULL with the error set (NB_ERR_OOM naming op). */
int64_t *nb_host_int64(const char *op, nb_tensor *t);
/* Layers of an RNN / LSTM / GRU stack in one backend call (ops_rnn_fused.c):
 * x [T, B, I] time-major, h0 [n D, B, H_out], c0 [n D, B, H] (LSTM, else
 * NULL), params the n_params parameters of num_layers layers (checked by
 * the caller), lengths NULL or a host [B] (packed input). 1: out holds y
 * [T, B, D H_out], h_n and c_n (LSTM); 0: declined (the backend has no
 * recurrent kernels, nb_cudnn_enabled() is false, or it cannot run this
 * geometry or dtype), nothing set; -1: error. */
int nb_rnn_fused(nb_rnn_mode mode, nb_tensor *x, nb_tensor *h0, nb_tensor *c0, nb_tensor *const *params, int n_params,
                 int64_t num_layers, bool bidirectional, bool bias, int64_t proj_size, const int64_t *lengths,
                 nb_tensor **out);
/* Sums g over broadcast dims so it has the given shape (the backward of broadcasting). */
nb_tensor *nb_sum_to_shape(nb_tensor *g, int ndim, const int64_t *shape);
/* The same sums in dtype dt (float32 sums of a 16-bit g, not rounded to 16
 * bits); under create_graph (a g that requires grad) dt must be g's. */
nb_tensor *nb_sum_to_shape_as(nb_tensor *g, int ndim, const int64_t *shape, nb_dtype dt);
/* A contiguous copy of t (or t itself) without recording a node: the
 * calling op's own node stands for it. */
nb_tensor *nb_contiguous_nograd(nb_tensor *t);
/* The 16-bit path of rms_norm, layer_norm and rope (PyTorch's kernels
 * accumulate float16/bfloat16 in float32 and round once): in[0..n) with
 * the 16-bit ones cast to float32 (differentiably), and the dtype to cast
 * the result back to (NB_DTYPE_COUNT: in[0] was not 16-bit, nothing
 * changed). NULL entries are kept. False on a failed cast. */
bool nb_widen_16bit(int n, nb_tensor **in, nb_dtype *back);
/* The result r of a widened op cast back to back (nb_widen_16bit's);
 * r itself for back NB_DTYPE_COUNT or a NULL r. */
nb_tensor *nb_unwiden_16bit(nb_tensor *r, nb_dtype back);
/* Whether in[0..n) (in[0] 16-bit; NULL entries skipped) can run through
 * the backend's 16-bit norm and rope forwards instead: every one in
 * in[0]'s dtype, the backend's norms_16bit set, and no gradient recorded
 * (nb_needs_grad false). */
bool nb_norms_16bit_native(int n, nb_tensor *const *in);
/* The kernel view of contiguous t as rows [rows, m], or as a vector [m]
 * for rows < 0 (the norms' per-column weights). */
nb_kview nb_kview_rows(const nb_tensor *t, int64_t rows, int64_t m);
/* Whether a and b have one shape (what a fused kernel of the two needs, where the op itself would broadcast). */
static inline bool nb_same_shape(const nb_tensor *a, const nb_tensor *b) {
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
    return same;
}
/* PyTorch's dtype categories: bool 0 < integer 1 < floating 2 (a result
 * may be stored only in a dtype of its category or above). */
int nb_dtype_category(nb_dtype dt);
/* torch.result_type(t, <scalar value>): t's dtype if floating; for an
 * integer or bool t, an integral value t's dtype holds acts as a Python int
 * (t's dtype; int64 for bool), any other value as a Python float (NB_F32). */
nb_dtype nb_scalar_result_type(const nb_tensor *t, double value);
/* Replaces each inputs[i] whose dtype is not dt by nb_to_dtype(inputs[i], dt)
 * (scoped; differentiable, so each gradient returns in its input's dtype).
 * False (error kept) if a cast fails. */
bool nb_promote_inputs(int n, nb_tensor **inputs, nb_dtype dt);

/* ---- the losses written from ops (autograd/ops_loss.c) -------------------- */

/* input and target non-NULL, on one device, of one float dtype the op takes,
 * with shapes that broadcast, and a known reduction (else false, error set). */
bool nb_loss_check(const char *op, nb_op_id id, nb_tensor *input, nb_tensor *target, nb_reduction reduction);
/* A weight tensor (weight, pos_weight): NULL, or of the input's dtype and device. */
bool nb_loss_weight_check(const char *op, const char *what, nb_tensor *w, nb_tensor *input);
/* l itself (none), its sum or its mean; NULL in gives NULL. */
nb_tensor *nb_loss_reduce(nb_tensor *l, nb_reduction reduction);
/* max(v, eps) in value, with v's own gradient everywhere (PyTorch's clamps
 * made under no_grad: gaussian_nll_loss's var, cosine_similarity's norms). */
nb_tensor *nb_clamp_min_passthrough(nb_tensor *v, double eps);

#endif
