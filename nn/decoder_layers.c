/* decoder_layers.c - the small modules of the decoder models: nn.RMSNorm,
 * the rotary-embedding table builder (transformers' LlamaRotaryEmbedding,
 * with Llama 3's frequency scaling), the SwiGLU feed-forward (LlamaMLP),
 * GPT-2's Conv1D (weight [in, out]) and a tied bias-free head.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decoder_impl.h"
#include "nb_autograd.h"
#include "nb_foreach.h"
#include "nb_quantize.h"
#include "nn_impl.h"

bool nb_decoder_add(nb_module *m, const char *name, nb_module *child, nb_module **slot) {
    if (nb_module_add(m, name, child)) return false;
    if (slot) *slot = child;
    return true;
}

/* ---- fused projections ---------------------------------------------------------------- */

/* The parameters named `name` of linears[0..n), NULL where absent; false if some lack it and others have it. */
static bool params_of(nb_module *const *linears, int n, const char *name, nb_tensor **p) {
    int have = 0;
    for (int i = 0; i < n; i++) have += (p[i] = nb_module_get(linears[i], name)) != NULL;
    return have == 0 || have == n;
}

static nb_status pack(nb_tensor *const *p, int n) {
    if (!p[0]) return NB_OK;
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += nb_numel(p[i]);
    nb_tensor *base = nb_tensor_new_unscoped(1, &total, nb_dtype_of(p[0]), nb_device_of(p[0]));
    if (!base) return nb_last_status();
    nb_status st = NB_OK;
    for (int64_t i = 0, off = 0; i < n && !st; off += nb_numel(p[i]), i++) st = nb_tensor_rebase(p[i], base, off);
    nb_release(base); /* the parameters hold the storage */
    return st;
}

nb_status nb_decoder_pack(nb_module *const *linears, int n) {
    nb_tensor *w[4], *b[4];
    if (n < 1 || n > 4 || !params_of(linears, n, "weight", w) || !params_of(linears, n, "bias", b) || !w[0])
        return nb_set_error(NB_ERR_INVALID_ARG, "decoder: 1 to 4 Linears with weights, all or none with a bias");
    nb_status st = pack(w, n);
    return st ? st : pack(b, n);
}

/* p[0..n) as one [sum of dim 0, ...] view when they lie back to back in one
 * storage (contiguous, one dtype, equal trailing dims), else NULL. */
static nb_tensor *rows_view(nb_tensor *const *p, int n) {
    int nd = nb_dim(p[0]);
    int64_t shape[2] = {0, nd == 2 ? nb_size(p[0], 1) : 1}, next = nb_storage_offset(p[0]);
    for (int i = 0; i < n; i++) {
        if (nb_dim(p[i]) != nd || !nb_is_contiguous(p[i]) || nb_storage_offset(p[i]) != next ||
            !nb_shares_storage(p[0], p[i]) || nb_dtype_of(p[i]) != nb_dtype_of(p[0]) ||
            (nd == 2 && nb_size(p[i], 1) != shape[1]))
            return NULL;
        shape[0] += nb_size(p[i], 0), next += nb_numel(p[i]);
    }
    return nb_tensor_view_of(p[0], nd, shape, NULL, nb_storage_offset(p[0]));
}

bool nb_decoder_fused_linear(nb_module *const *linears, int n, nb_tensor *x, nb_tensor **y) {
    nb_tensor *w[4], *b[4];
    if (n < 1 || n > 4 || !x) return false;
    for (int i = 0; i < n; i++)
        if (strcmp(nb_module_kind(linears[i]), "Linear") || nb_module_has_hooks(linears[i])) return false;
    if (!params_of(linears, n, "weight", w) || !params_of(linears, n, "bias", b) || !w[0] || nb_dim(w[0]) != 2)
        return false;
    bool grad = nb_is_grad_enabled() && nb_requires_grad(x);
    for (int i = 0; i < n; i++) grad |= nb_is_grad_enabled() && (nb_requires_grad(w[i]) || (b[i] && nb_requires_grad(b[i])));
    /* under autocast a float32 weight would be cast at every call (only the parameters' casts are cached) */
    if (grad || (nb_autocast_is_enabled(nb_device_of(x)) && nb_dtype_of(w[0]) == NB_F32)) return false;
    nb_tensor *wv = rows_view(w, n), *bv = b[0] ? rows_view(b, n) : NULL;
    if (!wv || (b[0] && !bv)) return false;
    *y = nb_linear(x, wv, bv);
    return true;
}

static const char *dtype_str(nb_dtype dt) { return (unsigned)dt < NB_DTYPE_COUNT ? nb_dtype_name(dt) : "invalid"; }

/* ---- RMSNorm --------------------------------------------------------------------- */

typedef struct nb_rms_norm_ctx {
    int64_t size;
    double eps;
    nb_tensor *weight; /* borrowed parameter */
} nb_rms_norm_ctx;

static nb_tensor *rms_norm_forward(nb_module *m, nb_tensor *x) {
    const nb_rms_norm_ctx *c = nb_module_ctx(m);
    return nb_rms_norm(x, 1, &c->size, c->weight, c->eps);
}

static const char rms_norm_kind[] = "RMSNorm"; /* its address tells the kind (an array: never merged) */
static const nb_module_ops rms_norm_ops = {rms_norm_kind, rms_norm_forward, free, NULL};

bool nb_decoder_is_plain_rms_norm(const nb_module *m) {
    return m && nb_module_kind(m) == rms_norm_kind && !nb_module_has_hooks(m);
}

nb_tensor *nb_decoder_add_norm(nb_module *m, nb_tensor *x, nb_tensor *residual, nb_tensor **sum) {
    const nb_rms_norm_ctx *c = nb_module_ctx(m);
    return nb_add_rms_norm(x, residual, 1, &c->size, c->weight, c->eps, sum);
}

nb_module *nb_nn_rms_norm(int64_t normalized_shape, double eps, nb_dtype dt) {
    if (normalized_shape < 1 || !(eps >= 0) || isinf(eps))
        return NB_FAIL(NB_ERR_INVALID_ARG, "RMSNorm: normalized_shape %lld must be >= 1 and eps %g finite and >= 0",
                       (long long)normalized_shape, eps);
    if (!nb_dtype_is_float(dt))
        return NB_FAIL(NB_ERR_DTYPE, "RMSNorm: dtype must be a float dtype (got %s)", dtype_str(dt));
    nb_rms_norm_ctx *c = calloc(1, sizeof *c);
    nb_module *m = c ? nb_module_new(&rms_norm_ops, c) : NB_FAIL(NB_ERR_OOM, "RMSNorm: out of host memory");
    if (!m) return NULL;
    c->size = normalized_shape, c->eps = eps;
    nb_tensor *w = nb_tensor_new_unscoped(1, &normalized_shape, dt, nb_default_device());
    if (!w || nb_fill_(w, 1.0)) {
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

/* ---- RotaryEmbedding ---------------------------------------------------------------- */

typedef struct nb_rotary_ctx {
    int64_t head_dim;
    nb_dtype dtype;
    nb_tensor *inv_freq; /* owned [head_dim / 2]; not a buffer (not in the state_dict) */
} nb_rotary_ctx;

static void rotary_free(void *p) {
    nb_rotary_ctx *c = p;
    if (c) nb_release(c->inv_freq);
    free(c);
}

static nb_tensor *rotary_forward1(nb_module *m, nb_tensor *x) {
    (void)m, (void)x;
    return NB_FAIL(NB_ERR_INVALID_ARG, "RotaryEmbedding: use nb_nn_rotary_embedding_forward (it takes a length "
                                       "and an offset, not a tensor)");
}

static const nb_module_ops rotary_ops = {"RotaryEmbedding", rotary_forward1, rotary_free, NULL};

/* transformers' _compute_llama3_parameters, in double. */
static double llama3_scale(double inv, const nb_rope_config *c) {
    double old = (double)c->original_max_position_embeddings;
    double low_wl = old / c->low_freq_factor, high_wl = old / c->high_freq_factor;
    double wl = 2 * M_PI / inv;
    if (wl > low_wl) return inv / c->factor;
    if (wl < high_wl) return inv;
    double smooth = (old / wl - c->low_freq_factor) / (c->high_freq_factor - c->low_freq_factor);
    return (1 - smooth) * inv / c->factor + smooth * inv;
}

nb_module *nb_nn_rotary_embedding(int64_t head_dim, nb_rope_config rc, nb_dtype dt) {
    bool scaled = rc.factor != 0;
    if (head_dim < 2 || head_dim % 2 || !(rc.theta > 0) ||
        (scaled && !(rc.factor > 0 && rc.low_freq_factor > 0 && rc.high_freq_factor > rc.low_freq_factor &&
                     rc.original_max_position_embeddings > 0)))
        return NB_FAIL(NB_ERR_INVALID_ARG,
                       "RotaryEmbedding: head_dim %lld must be even and >= 2, theta %g > 0, and a llama3 scaling "
                       "needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings "
                       "> 0 (got %g, %g, %g, %lld)",
                       (long long)head_dim, rc.theta, rc.factor, rc.low_freq_factor, rc.high_freq_factor,
                       (long long)rc.original_max_position_embeddings);
    if (!nb_dtype_is_float(dt))
        return NB_FAIL(NB_ERR_DTYPE, "RotaryEmbedding: dtype must be a float dtype (got %s)", dtype_str(dt));
    int64_t h = head_dim / 2;
    double *f = malloc(sizeof(double) * (size_t)h);
    nb_rotary_ctx *c = f ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        free(f);
        return NB_FAIL(NB_ERR_OOM, "RotaryEmbedding: out of host memory");
    }
    nb_module *m = nb_module_new(&rotary_ops, c); /* frees c on failure */
    if (!m) {
        free(f);
        return NULL;
    }
    c->head_dim = head_dim, c->dtype = dt;
    for (int64_t i = 0; i < h; i++) {
        f[i] = 1.0 / pow(rc.theta, (double)(2 * i) / (double)head_dim);
        if (scaled) f[i] = llama3_scale(f[i], &rc);
    }
    nb_scope *s = nb_op_scope_begin();
    /* 16-bit models keep inv_freq and the angles in float32, as transformers computes them */
    nb_tensor *t = nb_to_dtype(nb_from_data(f, 1, &h, NB_F64), dt == NB_F64 ? NB_F64 : NB_F32);
    if (t) nb_retain(t), c->inv_freq = t;
    nb_scope_end(s);
    free(f);
    if (!c->inv_freq) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

/* cos and sin of positions pos (1-d, in inv_freq's dtype and device) times inv_freq, in the module's dtype:
 * angles rounded to inv_freq's dtype, as transformers' float32 matmul of the two. Ends the library scope s. */
static nb_status tables_of(const nb_rotary_ctx *c, nb_scope *s, nb_tensor *pos, nb_tensor **cos, nb_tensor **sin) {
    nb_tensor *ang = nb_mul(nb_unsqueeze(pos, 1), nb_unsqueeze(c->inv_freq, 0));
    nb_tensor *co = nb_cos(ang), *si = nb_sin(ang);
    if (co && si && c->dtype != nb_dtype_of(co)) co = nb_to_dtype(co, c->dtype), si = nb_to_dtype(si, c->dtype);
    if (!co || !si) {
        nb_scope_end(s);
        return nb_last_status();
    }
    nb_retain(co), nb_retain(si);
    nb_scope_end(s);
    *cos = nb_scope_adopt(co), *sin = nb_scope_adopt(si);
    return NB_OK;
}

nb_status nb_nn_rotary_embedding_forward(nb_module *m, int64_t seq_len, int64_t offset, nb_tensor **cos,
                                         nb_tensor **sin) {
    if (!m || nb_module_kind(m) != rotary_ops.kind || seq_len < 0 || offset < 0 || !cos || !sin)
        return nb_set_error(NB_ERR_INVALID_ARG, "rotary_embedding_forward: needs a RotaryEmbedding (got %s), "
                                                "seq_len %lld and offset %lld >= 0, and outputs",
                            m ? nb_module_kind(m) : "NULL", (long long)seq_len, (long long)offset);
    const nb_rotary_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *pos = nb_arange((double)offset, (double)(offset + seq_len), 1, nb_dtype_of(c->inv_freq));
    nb_device dev = nb_device_of(c->inv_freq), pd = pos ? nb_device_of(pos) : dev;
    if (pos && (pd.type != dev.type || pd.index != dev.index)) pos = nb_to_device(pos, dev);
    return tables_of(c, s, pos, cos, sin);
}

nb_status nb_rotary_tables_at(nb_module *m, nb_tensor *pos, nb_tensor **cos, nb_tensor **sin) {
    const nb_rotary_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    /* the int64 position in inv_freq's dtype (exact), as nb_nn_rotary_embedding_forward's arange */
    return tables_of(c, s, nb_to_dtype(pos, nb_dtype_of(c->inv_freq)), cos, sin);
}

/* ---- SwiGLU ---------------------------------------------------------------------------- */

typedef struct nb_swiglu_ctx {
    nb_module *gate, *up, *down; /* borrowed children */
} nb_swiglu_ctx;

enum { FUSED_MLP_ROWS = 64 };

static nb_tensor *swiglu_forward(nb_module *m, nb_tensor *x) {
    const nb_swiglu_ctx *c = nb_module_ctx(m);
    /* the [.., intermediate] tensors freed as soon as they are dead (a long
     * prefill's peak memory): silu(gate) alone outlives its scope, and
     * takes up's product in place when nothing records a gradient */
    nb_scope *s = nb_op_scope_begin();
    /* a few rows (decoding): gate | up as one product [.., 2 I], which
     * outlives silu(gate), so only where it is small */
    nb_module *gu[2] = {c->gate, c->up};
    nb_tensor *both = NULL;
    if (x && nb_numel(x) <= FUSED_MLP_ROWS * nb_size(x, nb_dim(x) - 1) && nb_decoder_fused_linear(gu, 2, x, &both) &&
        !both)
        return nb_scope_return(s, NULL);
    if (both) { /* silu(gate) * up in one pass where nothing records a gradient (nb_silu_mul) */
        int64_t I = nb_size(both, nb_dim(both) - 1) / 2;
        nb_tensor *h = nb_silu_mul(nb_narrow(both, -1, 0, I), nb_narrow(both, -1, I, I));
        return nb_scope_return(s, nb_forward(c->down, h));
    }
    nb_scope *s1 = nb_op_scope_begin();
    nb_tensor *a = nb_scope_return(s1, nb_silu(nb_forward(c->gate, x)));
    nb_scope *s2 = nb_op_scope_begin();
    nb_tensor *u = nb_forward(c->up, x), *h;
    if (a && u && !nb_requires_grad(a) && !nb_requires_grad(u)) {
        h = nb_mul_(a, u) == NB_OK ? a : NULL;
        nb_scope_return(s2, NULL); /* u dies */
    } else h = nb_scope_return(s2, nb_mul(a, u));
    return nb_scope_return(s, nb_forward(c->down, h));
}

static const nb_module_ops swiglu_ops = {"SwiGLU", swiglu_forward, free, NULL};

nb_module *nb_swiglu_new(int64_t hidden_size, int64_t intermediate_size, bool bias, nb_dtype dt, bool bitlinear) {
    nb_module *(*lin)(int64_t, int64_t, bool, nb_dtype) = bitlinear ? nb_nn_bitlinear : nb_nn_linear_ex;
    if (hidden_size < 1 || intermediate_size < 1)
        return NB_FAIL(NB_ERR_INVALID_ARG, "SwiGLU: hidden_size %lld and intermediate_size %lld must be >= 1",
                       (long long)hidden_size, (long long)intermediate_size);
    nb_swiglu_ctx *c = calloc(1, sizeof *c);
    nb_module *m = c ? nb_module_new(&swiglu_ops, c) : NB_FAIL(NB_ERR_OOM, "SwiGLU: out of host memory");
    if (!m) return NULL;
    bool ok = nb_decoder_add(m, "gate_proj", lin(hidden_size, intermediate_size, bias, dt), &c->gate) &&
              nb_decoder_add(m, "up_proj", lin(hidden_size, intermediate_size, bias, dt), &c->up) &&
              nb_decoder_add(m, "down_proj", lin(intermediate_size, hidden_size, bias, dt), &c->down) &&
              nb_decoder_pack((nb_module *[]){c->gate, c->up}, 2) == NB_OK;
    if (!ok) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_module *nb_nn_swiglu(int64_t hidden_size, int64_t intermediate_size, bool bias, nb_dtype dt) {
    return nb_swiglu_new(hidden_size, intermediate_size, bias, dt, false);
}

/* ---- Conv1D (GPT-2) ----------------------------------------------------------------------- */

typedef struct nb_conv1d_hf_ctx {
    nb_tensor *weight, *bias; /* borrowed: [nx, nf], [nf] */
} nb_conv1d_hf_ctx;

static nb_tensor *conv1d_hf_forward(nb_module *m, nb_tensor *x) {
    const nb_conv1d_hf_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    /* x W + b as F.linear with the transposed view: one GEMM, no copy */
    return nb_scope_return(s, nb_linear(x, nb_transpose(c->weight, 0, 1), c->bias));
}

static const nb_module_ops conv1d_hf_ops = {"Conv1D", conv1d_hf_forward, free, NULL};

static nb_tensor *new_param(nb_module *m, const char *name, int ndim, const int64_t *shape, nb_dtype dt,
                            double std) {
    nb_tensor *t = nb_tensor_new_unscoped(ndim, shape, dt, nb_default_device());
    nb_status st = t ? (std > 0 ? nb_normal_(t, 0, std, NULL) : nb_fill_(t, 0)) : nb_last_status();
    if (st) {
        nb_release(t);
        return NULL;
    }
    return nb_module_adopt_parameter(m, name, t) ? NULL : t;
}

nb_module *nb_hf_conv1d(int64_t nx, int64_t nf, nb_dtype dt) {
    if (nx < 1 || nf < 1) return NB_FAIL(NB_ERR_INVALID_ARG, "Conv1D: sizes %lld, %lld must be >= 1", (long long)nx, (long long)nf);
    if (!nb_dtype_is_float(dt))
        return NB_FAIL(NB_ERR_DTYPE, "Conv1D: dtype must be a float dtype (got %s)", dtype_str(dt));
    nb_conv1d_hf_ctx *c = calloc(1, sizeof *c);
    nb_module *m = c ? nb_module_new(&conv1d_hf_ops, c) : NB_FAIL(NB_ERR_OOM, "Conv1D: out of host memory");
    if (!m) return NULL;
    c->weight = new_param(m, "weight", NB_SHAPE(nx, nf), dt, 0.02);
    if (c->weight) c->bias = new_param(m, "bias", NB_SHAPE(nf), dt, 0);
    if (!c->bias) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- tied head ------------------------------------------------------------------ */

/* its own kind object, so that nb_tied_linear_int8 knows a tied head by address */
static const char tied_kind[] = "Linear";

static nb_tensor *tied_forward(nb_module *m, nb_tensor *x) {
    nb_tensor *q = nb_module_get(m, "weight_int8"), *s = nb_module_get(m, "weight_scale");
    if (q && s) return nb_linear_int8(x, q, s, NULL); /* nb_tied_linear_int8's copy */
    return nb_linear(x, nb_module_ctx(m), NULL);
}

static const nb_module_ops tied_ops = {tied_kind, tied_forward, NULL, NULL};

nb_status nb_tied_linear_int8(nb_module *m) {
    if (nb_module_kind(m) != tied_kind || nb_module_get(m, "weight_int8")) return NB_OK;
    /* the embedding keeps the float weight (ctx borrows it) */
    return nb_module_weight_to_buffers(m, "weight", nb_module_ctx(m), nb_int8_weight_quantize,
                                       (const char *const[]){"weight_int8", "weight_scale"});
}

nb_module *nb_tied_linear(nb_tensor *weight) {
    nb_module *m = nb_module_new(&tied_ops, weight);
    /* the head takes its own reference, as PyTorch's lm_head.weight = wte.weight */
    if (m && nb_module_register_parameter(m, "weight", weight)) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

