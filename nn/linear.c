/* linear.c - nn.Linear: y = x W^T + b with PyTorch's reset_parameters
 * (weight by kaiming_uniform_(a=sqrt(5)), bias by U(-1/sqrt(in), 1/sqrt(in))),
 * drawn from the default generator, weight first and then bias, so that a
 * seed fixes the initial network; BitLinear (BitNet b1.58), a Linear whose
 * forward quantizes; and nn.Bilinear.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "decoder_impl.h"
#include "nb_extension.h"
#include "nb_nn.h"
#include "nn_impl.h"
#include "nb_ops.h"
#include "nb_quantize.h"

typedef struct nb_linear_ctx {
    int64_t in_features, out_features;
    nb_tensor *weight, *bias; /* borrowed from the module's parameters; bias may be NULL */
    nb_tensor *packed, *w_scale; /* a packed BitLinear's buffers (nb_module_bitnet_pack; weight NULL) */
    nb_tensor *qweight;          /* an int8 weight-only Linear's (nb_module_int8_weight_only), with w_scale */
} nb_linear_ctx;

static nb_tensor *linear_forward(nb_module *m, nb_tensor *x) {
    nb_linear_ctx *c = nb_module_ctx(m);
    if (c->qweight) return nb_linear_int8(x, c->qweight, c->w_scale, c->bias);
    return nb_linear(x, c->weight, c->bias);
}

/* The kinds as arrays of their own: distinct objects have distinct
 * addresses, while equal string literals may be merged with other modules'
 * "Linear" (a tied head, BERT's decoder), whose ctx is not an nb_linear_ctx:
 * the weight swaps below compare these addresses. */
static const char linear_kind[] = "Linear", bitlinear_kind[] = "BitLinear";

static const nb_module_ops linear_ops = {linear_kind, linear_forward, free, NULL};

/* kaiming_uniform_(w, a=sqrt(5)) as torch.nn.init computes it:
 * gain = sqrt(2 / (1 + a^2)), std = gain / sqrt(fan_in), bound = sqrt(3) * std,
 * which is 1/sqrt(fan_in). fan_in 0 gives 0 (torch warns and does nothing). */
static double kaiming_bound(int64_t fan_in) {
    if (fan_in <= 0) return 0.0;
    double a = sqrt(5.0);
    double gain = sqrt(2.0 / (1.0 + a * a));
    return sqrt(3.0) * (gain / sqrt((double)fan_in));
}

static nb_status init_uniform(nb_tensor *t, double bound) {
    if (nb_numel(t) == 0) return NB_OK;
    if (bound == 0.0) return nb_fill_(t, 0.0);
    return nb_uniform_(t, -bound, bound, NULL);
}

/* Creates, initialises and registers one parameter; NULL on failure (the
 * module frees anything it already owns). */
static nb_tensor *new_param(nb_module *m, const char *name, int ndim, const int64_t *shape,
                            nb_dtype dt, double bound) {
    nb_tensor *t = nb_tensor_new_unscoped(ndim, shape, dt, nb_default_device());
    if (!t) return NULL;
    if (init_uniform(t, bound)) {
        nb_release(t);
        return NULL;
    }
    return nb_module_adopt_parameter(m, name, t) ? NULL : t;
}

/* A Linear or BitLinear (ops) with PyTorch's Linear parameters and init. */
static nb_module *linear_new(const nb_module_ops *ops, const char *name, int64_t in_features, int64_t out_features,
                             bool bias, nb_dtype dt) {
    if (in_features < 0 || out_features < 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "%s: sizes must be >= 0 (got in_features %lld, out_features %lld)", name,
                       (long long)in_features, (long long)out_features);
    if (!nb_nn_check_dtype(name, NB_OP_LINEAR, dt)) return NULL;
    nb_linear_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", name);
    c->in_features = in_features, c->out_features = out_features;
    nb_module *m = nb_module_new(ops, c);
    if (!m) return NULL;
    /* both bounds equal 1/sqrt(in) up to rounding; each is computed as torch does */
    double bias_bound = in_features > 0 ? 1.0 / sqrt((double)in_features) : 0.0;
    c->weight = new_param(m, "weight", NB_SHAPE(out_features, in_features), dt, kaiming_bound(in_features));
    if (c->weight && bias) c->bias = new_param(m, "bias", NB_SHAPE(out_features), dt, bias_bound);
    if (!c->weight || (bias && !c->bias)) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_module *nb_nn_linear_ex(int64_t in_features, int64_t out_features, bool bias, nb_dtype dt) {
    return linear_new(&linear_ops, "linear", in_features, out_features, bias, dt);
}

nb_module *nb_nn_linear(int64_t in_features, int64_t out_features) {
    return nb_nn_linear_ex(in_features, out_features, true, NB_F32);
}

/* ---- BitLinear (BitNet b1.58) ------------------------------------------------------ */

/* The reference training code's forward: a parameter-free RMSNorm (a
 * fresh LlamaRMSNorm, eps 1e-6), then F.linear of the int8-quantized
 * activations and the ternary weights, both straight-through. */
static nb_tensor *bitlinear_forward(nb_module *m, nb_tensor *x) {
    nb_linear_ctx *c = nb_module_ctx(m);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *xn = nb_rms_norm(x, 1, &c->in_features, NULL, NB_BITLINEAR_EPS), *y;
    if (c->packed) /* inference on the packed weights */
        y = xn ? nb_bitnet_linear(xn, c->packed, c->w_scale, c->bias) : NULL;
    else
        y = xn ? nb_linear(nb_bitnet_activation_quant(xn), nb_bitnet_weight_quant(c->weight), c->bias) : NULL;
    return nb_scope_return(s, y);
}

static const nb_module_ops bitlinear_ops = {bitlinear_kind, bitlinear_forward, free, NULL};

nb_module *nb_nn_bitlinear(int64_t in_features, int64_t out_features, bool bias, nb_dtype dt) {
    return linear_new(&bitlinear_ops, "BitLinear", in_features, out_features, bias, dt);
}

/* ---- weight replacements: packed BitLinear, int8 weight-only Linear ---------------- */

/* How a module kind trades its float weight for two buffers. */
typedef struct weight_swap {
    const nb_module_ops *ops;                                  /* the modules it applies to (their kind) */
    nb_status (*quantize)(nb_tensor *, nb_tensor **, nb_tensor **); /* weight -> the two buffers */
    const char *const names[2];                                /* the buffers' names */
    size_t slot;                                               /* offsetof the ctx field for buffer 0 */
    nb_status (*other)(nb_module *);                           /* or NULL: run on every other module */
} weight_swap;

static nb_status bitnet_other(nb_module *m) { return nb_mha_convert(m, true); }
static nb_status int8_other(nb_module *m) {
    nb_status st = nb_tied_linear_int8(m);
    return st ? st : nb_mha_convert(m, false);
}

static const weight_swap bitnet_swap = {&bitlinear_ops, nb_bitnet_pack, {"weight_packed", "weight_scale"},
                                        offsetof(nb_linear_ctx, packed), bitnet_other};
static const weight_swap int8_swap = {&linear_ops, nb_int8_weight_quantize, {"weight_int8", "weight_scale"},
                                      offsetof(nb_linear_ctx, qweight), int8_other};

nb_status nb_module_weight_to_buffers(nb_module *m, const char *param, nb_tensor *weight,
                                      nb_status (*quantize)(nb_tensor *, nb_tensor **, nb_tensor **),
                                      const char *const names[2]) {
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *a, *b;
    nb_status st = quantize(weight, &a, &b);
    if (!st) st = nb_module_register_buffer(m, names[0], a);
    if (!st) st = nb_module_register_buffer(m, names[1], b); /* failing: the weight stays, still used */
    if (!st) nb_release(nb_module_take_parameter(m, param));
    nb_scope_end(s);
    return st;
}

/* One module: weight -> the two buffers (nothing when it has them already). */
static nb_status swap_weight(nb_module *m, const weight_swap *w) {
    nb_linear_ctx *c = nb_module_ctx(m);
    nb_tensor **slot = (nb_tensor **)((char *)c + w->slot);
    if (*slot) return NB_OK;
    nb_status st = nb_module_weight_to_buffers(m, "weight", c->weight, w->quantize, w->names);
    if (!st) c->weight = NULL, *slot = nb_module_get(m, w->names[0]), c->w_scale = nb_module_get(m, w->names[1]);
    return st;
}

/* m's tree, m included, in order. */
static nb_status swap_tree(nb_module *m, const weight_swap *w) {
    const char *kind = nb_module_kind(m); /* records a NULL m */
    if (!kind) return nb_last_status();
    nb_status st = kind == w->ops->kind ? swap_weight(m, w) : w->other ? w->other(m) : NB_OK;
    if (st) return st;
    for (int i = 0; i < nb_module_num_children(m); i++)
        if ((st = swap_tree(nb_module_child_at(m, i), w))) return st;
    return NB_OK;
}

nb_status nb_module_bitnet_pack(nb_module *m) { return swap_tree(m, &bitnet_swap); }

nb_status nb_module_int8_weight_only(nb_module *m) { return swap_tree(m, &int8_swap); }

/* ---- Bilinear ---------------------------------------------------------------------- */

/* nb_forward_n: (input1, input2) -> y. */
static int bilinear_forward(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    if (n_in != 2) return nb_set_error(NB_ERR_INVALID_ARG, "Bilinear: forward takes (input1, input2), got %d inputs", n_in), -1;
    out[0] = nb_bilinear(in[0], in[1], nb_module_get(m, "weight"), nb_module_get(m, "bias"));
    return out[0] ? 1 : -1;
}

static const nb_module_ops bilinear_ops = {"Bilinear", NULL, NULL, bilinear_forward};

nb_module *nb_nn_bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias, nb_dtype dt) {
    if (in1_features < 1 || in2_features < 1 || out_features < 0)
        return NB_FAIL(NB_ERR_INVALID_ARG, "Bilinear: in1_features %lld and in2_features %lld must be >= 1, "
                       "out_features %lld >= 0", (long long)in1_features, (long long)in2_features,
                       (long long)out_features);
    if (!nb_nn_check_dtype("Bilinear", NB_OP_BILINEAR, dt)) return NULL;
    nb_module *m = nb_module_new(&bilinear_ops, NULL);
    if (!m) return NULL;
    double bound = 1.0 / sqrt((double)in1_features); /* PyTorch's reset_parameters: both U(-b, b) */
    bool ok = new_param(m, "weight", NB_SHAPE(out_features, in1_features, in2_features), dt, bound) != NULL;
    if (ok && bias) ok = new_param(m, "bias", NB_SHAPE(out_features), dt, bound) != NULL;
    if (!ok) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}
