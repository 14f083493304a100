/* onnx_export.c - nb_onnx_export: a graph builder over protobuf-c's ONNX
 * messages (onnx.pb-c.h, compiled from Debian's onnx.proto) and one
 * translation per layer kind. Every allocation goes to the builder's arena,
 * freed at the end. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_decoder.h"
#include "nb_extension.h"
#include "nb_onnx.h"
#include "nb_transformer.h"

#ifdef NB_WITH_ONNX
#include "onnx.pb-c.h"

enum { OPSET = 17, IR_VERSION = 8 };

typedef struct ox {
    void **arena;
    size_t n_arena, cap_arena;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    const nb_tensor **init_src; /* the tensor each initializer came from (a tied weight once) */
    char **init_names;
    size_t n_inits, cap_inits;
    int next; /* value names: v<next> */
    nb_status st;
} ox;

static void *ox_alloc(ox *x, size_t n) {
    if (x->st) return NULL;
    void *p = calloc(1, n ? n : 1);
    if (p && x->n_arena == x->cap_arena) {
        size_t cap = x->cap_arena ? 2 * x->cap_arena : 256;
        void **a = realloc(x->arena, sizeof *a * cap);
        if (!a) free(p), p = NULL;
        else x->arena = a, x->cap_arena = cap;
    }
    if (!p) {
        x->st = nb_set_error(NB_ERR_OOM, "onnx_export: out of host memory");
        return NULL;
    }
    return x->arena[x->n_arena++] = p;
}

static char *ox_str(ox *x, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = ox_alloc(x, (size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static bool grow(ox *x, void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return true;
    size_t c = *cap ? 2 * *cap : 64;
    void *a = realloc(*arr, elem * c);
    if (!a) return x->st = nb_set_error(NB_ERR_OOM, "onnx_export: out of host memory"), false;
    *arr = a, *cap = c;
    return true;
}

/* ---- attributes ---------------------------------------------------------- */

static Onnx__AttributeProto *attr_new(ox *x, const char *name, Onnx__AttributeProto__AttributeType t) {
    Onnx__AttributeProto *a = ox_alloc(x, sizeof *a);
    if (!a) return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name, a->has_type = true, a->type = t;
    return a;
}

static Onnx__AttributeProto *attr_i(ox *x, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr_new(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) a->has_i = true, a->i = v;
    return a;
}

static Onnx__AttributeProto *attr_f(ox *x, const char *name, double v) {
    Onnx__AttributeProto *a = attr_new(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) a->has_f = true, a->f = (float)v;
    return a;
}

static Onnx__AttributeProto *attr_ints(ox *x, const char *name, int n, const int64_t *v) {
    Onnx__AttributeProto *a = attr_new(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *c = a ? ox_alloc(x, sizeof(int64_t) * (size_t)n) : NULL;
    if (!c) return NULL;
    memcpy(c, v, sizeof(int64_t) * (size_t)n);
    a->n_ints = (size_t)n, a->ints = c;
    return a;
}

/* ---- nodes and initializers ------------------------------------------------ */

/* Adds op_type(in...) with n_attr attributes; returns its output's name
 * (NULL after an earlier failure or a NULL input, which poisons the rest). */
static const char *node(ox *x, const char *op, int n_in, const char *const *in, int n_attr,
                        Onnx__AttributeProto *const *attrs) {
    for (int i = 0; i < n_in; i++)
        if (!in[i] && !x->st) x->st = nb_set_error(NB_ERR_OOM, "onnx_export: out of host memory");
    for (int i = 0; i < n_attr; i++)
        if (!attrs[i] && !x->st) x->st = nb_set_error(NB_ERR_OOM, "onnx_export: out of host memory");
    Onnx__NodeProto *n = ox_alloc(x, sizeof *n);
    char **ins = ox_alloc(x, sizeof(char *) * (size_t)(n_in ? n_in : 1));
    char **outs = ox_alloc(x, sizeof(char *));
    Onnx__AttributeProto **as = ox_alloc(x, sizeof *as * (size_t)(n_attr ? n_attr : 1));
    char *out = ox_str(x, "v%d", x->next++);
    if (!n || !ins || !outs || !as || !out || !grow(x, (void **)&x->nodes, &x->cap_nodes, x->n_nodes, sizeof *x->nodes))
        return NULL;
    onnx__node_proto__init(n);
    for (int i = 0; i < n_in; i++) ins[i] = (char *)in[i];
    for (int i = 0; i < n_attr; i++) as[i] = attrs[i];
    outs[0] = out;
    n->op_type = (char *)op, n->name = ox_str(x, "%s_%d", op, x->next - 1);
    n->n_input = (size_t)n_in, n->input = ins, n->n_output = 1, n->output = outs;
    n->n_attribute = (size_t)n_attr, n->attribute = as;
    x->nodes[x->n_nodes++] = n;
    return out;
}

#define NODE(x, op, ...) node(x, op, (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *)), (const char *[]){__VA_ARGS__}, 0, NULL)
#define NODE_A(x, op, ins, attrs)                                                                              \
    node(x, op, (int)(sizeof((const char *[])ins) / sizeof(char *)), (const char *[])ins,                      \
         (int)(sizeof((Onnx__AttributeProto *[])attrs) / sizeof(void *)), (Onnx__AttributeProto *[])attrs)
#define LIST(...) {__VA_ARGS__}

static Onnx__TensorProto *init_new(ox *x, const char *name, int32_t type, int nd, const int64_t *dims, size_t bytes) {
    Onnx__TensorProto *t = ox_alloc(x, sizeof *t);
    int64_t *d = ox_alloc(x, sizeof(int64_t) * (size_t)(nd ? nd : 1));
    uint8_t *data = ox_alloc(x, bytes);
    if (!t || !d || !data) return NULL;
    onnx__tensor_proto__init(t);
    if (nd) memcpy(d, dims, sizeof(int64_t) * (size_t)nd); /* a scalar has no dims (and dims may be NULL) */
    t->name = (char *)name, t->n_dims = (size_t)nd, t->dims = d;
    t->has_data_type = true, t->data_type = type;
    t->has_raw_data = true, t->raw_data = (ProtobufCBinaryData){bytes, data};
    return t;
}

/* Registers t (already filled) as the next initializer, from tensor src (may be NULL). */
static const char *init_add(ox *x, Onnx__TensorProto *t, const nb_tensor *src) {
    if (!t) return NULL;
    if (x->n_inits == x->cap_inits) { /* the two arrays grow together */
        size_t cap = x->cap_inits ? 2 * x->cap_inits : 64;
        Onnx__TensorProto **a = realloc(x->inits, sizeof *a * cap);
        if (a) x->inits = a;
        const nb_tensor **b = a ? realloc(x->init_src, sizeof *b * cap) : NULL;
        if (b) x->init_src = b;
        if (!a || !b) return x->st = nb_set_error(NB_ERR_OOM, "onnx_export: out of host memory"), NULL;
        x->cap_inits = cap;
    }
    x->init_src[x->n_inits] = src;
    x->inits[x->n_inits++] = t;
    return t->name;
}

/* A parameter (float32, any device) as an initializer under its
 * state_dict name; a tensor seen before gives its first name (a tied
 * weight is stored once). With transpose, a Transpose node of it (Linear's
 * weight for MatMul; runtimes fold it at load). */
static const char *param(ox *x, const char *name, nb_tensor *p, bool transpose) {
    if (x->st) return NULL;
    if (!p) return x->st = nb_set_error(NB_ERR_INVALID_ARG, "onnx_export: no parameter %s", name), NULL;
    const char *have = NULL;
    for (size_t i = 0; i < x->n_inits && !have; i++)
        if (x->init_src[i] == p) have = x->inits[i]->name;
    if (!have) {
        if (nb_dtype_of(p) != NB_F32)
            return x->st = nb_set_error(NB_ERR_DTYPE, "onnx_export: %s is %s, not float32", name,
                                        nb_dtype_name(nb_dtype_of(p))), NULL;
        size_t bytes = (size_t)nb_numel(p) * 4;
        Onnx__TensorProto *t = init_new(x, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, nb_dim(p), nb_shape(p), bytes);
        if (!t) return NULL;
        nb_status st = nb_to_host(p, t->raw_data.data, bytes);
        if (st) return x->st = st, NULL;
        have = init_add(x, t, p);
    }
    if (!transpose || !have) return have;
    if (nb_dim(p) != 2) return x->st = nb_set_error(NB_ERR_SHAPE, "onnx_export: %s is not a matrix", name), NULL;
    int64_t perm[2] = {1, 0};
    return NODE_A(x, "Transpose", LIST(have), LIST(attr_ints(x, "perm", 2, perm)));
}

/* An int64 constant: a vector of n, or with n -1 the scalar v[0]. */
static const char *const_i64(ox *x, int n, const int64_t *v) {
    int64_t d = n;
    Onnx__TensorProto *t = init_new(x, ox_str(x, "c%d", x->next++), ONNX__TENSOR_PROTO__DATA_TYPE__INT64, n < 0 ? 0 : 1,
                                    &d, sizeof(int64_t) * (size_t)(n < 0 ? 1 : n));
    if (n < 0) n = 1;
    if (t) memcpy(t->raw_data.data, v, sizeof(int64_t) * (size_t)n);
    return init_add(x, t, NULL);
}

static const char *const_f32(ox *x, float v) {
    Onnx__TensorProto *t = init_new(x, ox_str(x, "c%d", x->next++), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, 4);
    if (t) memcpy(t->raw_data.data, &v, 4);
    return init_add(x, t, NULL);
}

#define I64S(...) const_i64(x, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static nb_status unsupported(ox *x, const char *path, const char *what) {
    if (!x->st)
        x->st = nb_set_error(NB_ERR_UNSUPPORTED, "onnx_export: %s at '%s' has no ONNX translation", what, *path ? path : "(root)");
    return x->st;
}

/* ---- layers ----------------------------------------------------------------- */

/* x W^T + b, for any leading dims (Linear; weight [out, in]). */
static const char *linear(ox *x, const char *path, nb_module *m, const char *in) {
    const char *w = param(x, ox_str(x, "%s%sweight", path, *path ? "." : ""), nb_module_get(m, "weight"), true);
    const char *y = NODE(x, "MatMul", in, w);
    nb_tensor *b = nb_module_get(m, "bias");
    return b ? NODE(x, "Add", y, param(x, ox_str(x, "%s%sbias", path, *path ? "." : ""), b, false)) : y;
}

/* x W + b with W stored [in, out] (GPT-2's Conv1D). */
static const char *conv1d_hf(ox *x, const char *path, nb_module *m, const char *in) {
    const char *y = NODE(x, "MatMul", in, param(x, ox_str(x, "%s.weight", path), nb_module_get(m, "weight"), false));
    return NODE(x, "Add", y, param(x, ox_str(x, "%s.bias", path), nb_module_get(m, "bias"), false));
}

static const char *layer_norm(ox *x, const char *path, nb_module *m, const char *in, double eps) {
    const char *w = param(x, ox_str(x, "%s.weight", path), nb_module_get(m, "weight"), false);
    const char *b = param(x, ox_str(x, "%s.bias", path), nb_module_get(m, "bias"), false);
    return NODE_A(x, "LayerNormalization", LIST(in, w, b), LIST(attr_i(x, "axis", -1), attr_f(x, "epsilon", eps)));
}

/* GELU: 0.5 x (1 + erf(x / sqrt 2)), or with tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static const char *gelu(ox *x, const char *in, bool tanh_approx) {
    const char *inner;
    if (tanh_approx) {
        const char *cube = NODE(x, "Mul", NODE(x, "Mul", in, in), in);
        const char *s = NODE(x, "Add", in, NODE(x, "Mul", cube, const_f32(x, 0.044715f)));
        inner = NODE(x, "Tanh", NODE(x, "Mul", s, const_f32(x, (float)sqrt(2.0 / 3.14159265358979323846))));
    } else {
        inner = NODE(x, "Erf", NODE(x, "Div", in, const_f32(x, (float)sqrt(2.0))));
    }
    return NODE(x, "Mul", NODE(x, "Mul", in, const_f32(x, 0.5f)), NODE(x, "Add", inner, const_f32(x, 1.0f)));
}

static const char *emit(ox *x, const char *path, nb_module *m, const char *in);

static const char *emit_sequential(ox *x, const char *path, nb_module *m, const char *in) {
    for (int i = 0; in && i < nb_module_num_children(m); i++)
        in = emit(x, ox_str(x, "%s%s%s", path, *path ? "." : "", nb_module_child_name(m, i)), nb_module_child_at(m, i), in);
    return in;
}

static const char *emit_conv2d(ox *x, const char *path, nb_module *m, const char *in) {
    nb_conv2d_options o;
    if (nb_nn_conv2d_get_options(m, &o)) return x->st = nb_last_status(), NULL;
    if (o.padding_same) return unsupported(x, path, "Conv2d with padding='same'"), NULL;
    nb_tensor *w = nb_module_get(m, "weight"), *b = nb_module_get(m, "bias");
    const int64_t *ws = nb_shape(w);
    int64_t k[2] = {ws[2], ws[3]}, st[2] = {o.stride[0] ? o.stride[0] : 1, o.stride[1] ? o.stride[1] : 1};
    int64_t dil[2] = {o.dilation[0] ? o.dilation[0] : 1, o.dilation[1] ? o.dilation[1] : 1};
    int64_t pads[4] = {o.padding[0], o.padding[1], o.padding[0], o.padding[1]};
    const char *wn = param(x, ox_str(x, "%s.weight", path), w, false);
    const char *bn = b ? param(x, ox_str(x, "%s.bias", path), b, false) : NULL;
    Onnx__AttributeProto *attrs[] = {attr_ints(x, "kernel_shape", 2, k), attr_ints(x, "strides", 2, st),
                                     attr_ints(x, "dilations", 2, dil), attr_ints(x, "pads", 4, pads),
                                     attr_i(x, "group", o.groups ? o.groups : 1)};
    const char *ins[] = {in, wn, bn};
    return node(x, "Conv", b ? 3 : 2, ins, 5, attrs);
}

static const char *emit_pool2d(ox *x, const char *path, nb_module *m, const char *in, bool max) {
    nb_pool2d_options o;
    if (nb_nn_pool2d_get_options(m, &o)) return x->st = nb_last_status(), NULL;
    if (o.divisor_override) return unsupported(x, path, "AvgPool2d with divisor_override"), NULL;
    int64_t st[2] = {o.stride[0] ? o.stride[0] : o.kernel[0], o.stride[1] ? o.stride[1] : o.kernel[1]};
    int64_t pads[4] = {o.padding[0], o.padding[1], o.padding[0], o.padding[1]};
    int64_t dil[2] = {o.dilation[0] ? o.dilation[0] : 1, o.dilation[1] ? o.dilation[1] : 1};
    if (max) {
        Onnx__AttributeProto *a[] = {attr_ints(x, "kernel_shape", 2, o.kernel), attr_ints(x, "strides", 2, st),
                                     attr_ints(x, "pads", 4, pads), attr_ints(x, "dilations", 2, dil),
                                     attr_i(x, "ceil_mode", o.ceil_mode)};
        return node(x, "MaxPool", 1, &in, 5, a);
    }
    Onnx__AttributeProto *a[] = {attr_ints(x, "kernel_shape", 2, o.kernel), attr_ints(x, "strides", 2, st),
                                 attr_ints(x, "pads", 4, pads), attr_i(x, "ceil_mode", o.ceil_mode),
                                 attr_i(x, "count_include_pad", !o.count_include_pad_false)};
    return node(x, "AveragePool", 1, &in, 5, a);
}

static const char *emit(ox *x, const char *path, nb_module *m, const char *in) {
    if (!in || x->st) return NULL;
    const char *k = nb_module_kind(m);
    if (!strcmp(k, "Sequential")) return emit_sequential(x, path, m, in);
    if (!strcmp(k, "Linear")) return linear(x, path, m, in);
    if (!strcmp(k, "Conv2d")) return emit_conv2d(x, path, m, in);
    if (!strcmp(k, "MaxPool2d") || !strcmp(k, "AvgPool2d")) return emit_pool2d(x, path, m, in, k[0] == 'M');
    if (!strcmp(k, "ReLU")) return NODE(x, "Relu", in);
    if (!strcmp(k, "Sigmoid")) return NODE(x, "Sigmoid", in);
    if (!strcmp(k, "Tanh")) return NODE(x, "Tanh", in);
    if (!strncmp(k, "Dropout", 7) || !strcmp(k, "Identity")) return in; /* eval mode */
    if (!strcmp(k, "Flatten")) {
        int s, e;
        if (nb_nn_flatten_get_dims(m, &s, &e)) return x->st = nb_last_status(), NULL;
        if (s != 1 || e != -1) return unsupported(x, path, "Flatten other than (1, -1)"), NULL;
        return NODE_A(x, "Flatten", LIST(in), LIST(attr_i(x, "axis", 1)));
    }
    return unsupported(x, path, k), NULL;
}

/* ---- attention and the token models ------------------------------------------------ */

/* [B, T, E] -> [B, heads, T, E/heads] (perm 0 2 1 3), or with keys_t the
 * keys' [B, heads, E/heads, T] (perm 0 2 3 1). */
static const char *split_heads(ox *x, const char *t, int64_t heads, int64_t hd, bool keys_t) {
    const char *r = NODE(x, "Reshape", t, I64S(0, 0, heads, hd));
    int64_t p[4] = {0, 2, keys_t ? 3 : 1, keys_t ? 1 : 3};
    return NODE_A(x, "Transpose", LIST(r), LIST(attr_ints(x, "perm", 4, p)));
}

/* softmax(q k^T / sqrt(hd) [masked]) v, heads merged back to [B, T, E]. */
static const char *attention(ox *x, const char *q, const char *k, const char *v, int64_t heads, int64_t E,
                             const char *causal) {
    int64_t hd = E / heads;
    const char *s = NODE(x, "Mul", NODE(x, "MatMul", split_heads(x, q, heads, hd, false), split_heads(x, k, heads, hd, true)),
                         const_f32(x, (float)(1.0 / sqrt((double)hd))));
    if (causal) s = NODE(x, "Where", causal, s, const_f32(x, -INFINITY));
    const char *p = NODE_A(x, "Softmax", LIST(s), LIST(attr_i(x, "axis", -1)));
    const char *o = NODE(x, "MatMul", p, split_heads(x, v, heads, hd, false));
    int64_t perm[4] = {0, 2, 1, 3};
    o = NODE_A(x, "Transpose", LIST(o), LIST(attr_ints(x, "perm", 4, perm)));
    return NODE(x, "Reshape", o, I64S(0, 0, E));
}

/* Splits [B, T, 3E] into q, k, v: a Split node given two more outputs. */
static void split3(ox *x, const char *qkv, int64_t E, const char **q, const char **k, const char **v) {
    const char *sizes = I64S(E, E, E);
    const char *split = NODE_A(x, "Split", LIST(qkv, sizes), LIST(attr_i(x, "axis", -1)));
    if (!split) return;
    Onnx__NodeProto *n = x->nodes[x->n_nodes - 1];
    char **outs = ox_alloc(x, sizeof(char *) * 3);
    if (!outs) return;
    outs[0] = (char *)split, outs[1] = ox_str(x, "v%d", x->next++), outs[2] = ox_str(x, "v%d", x->next++);
    n->n_output = 3, n->output = outs;
    *q = outs[0], *k = outs[1], *v = outs[2];
}

/* Positions 0..T-1 of ids [B, T], as int64 [T] (Range of scalars: a
 * scalar index gathers a scalar T). */
static const char *positions(ox *x, const char *ids) {
    const char *T = NODE_A(x, "Gather", LIST(NODE(x, "Shape", ids), const_i64(x, -1, (int64_t[]){1})), LIST(attr_i(x, "axis", 0)));
    return NODE(x, "Range", const_i64(x, -1, (int64_t[]){0}), T, const_i64(x, -1, (int64_t[]){1}));
}

static const char *embed(ox *x, const char *name, nb_module *emb, const char *ids) {
    return NODE(x, "Gather", param(x, name, nb_module_get(emb, "weight"), false), ids);
}

static const char *emit_bert(ox *x, nb_module *m, const char *ids) {
    nb_bert_config c = nb_bert_get_config(m);
    int64_t E = c.hidden_size;
    double eps = c.layer_norm_eps;
    const char *h = NODE(x, "Add", embed(x, "tok.weight", nb_module_child(m, "tok"), ids),
                         embed(x, "pos.weight", nb_module_child(m, "pos"), positions(x, ids)));
    nb_module *seg = nb_module_child(m, "seg");
    if (seg) { /* no segment ids: every position is segment 0 */
        const char *w = param(x, "seg.weight", nb_module_get(seg, "weight"), false);
        h = NODE(x, "Add", h, NODE_A(x, "Gather", LIST(w, I64S(0)), LIST(attr_i(x, "axis", 0))));
    }
    h = layer_norm(x, "ln", nb_module_child(m, "ln"), h, eps);
    nb_module *enc = nb_module_child(m, "enc"), *layers = nb_module_child(enc, "layers");
    for (int i = 0; h && i < c.num_layers; i++) {
        nb_module *L = nb_module_child_at(layers, i), *sa = nb_module_child(L, "self_attn");
        char *p = ox_str(x, "enc.layers.%d", i);
        const char *in = c.norm_first ? layer_norm(x, ox_str(x, "%s.norm1", p), nb_module_child(L, "norm1"), h, eps) : h;
        const char *qkv = NODE(x, "Add", NODE(x, "MatMul", in, param(x, ox_str(x, "%s.self_attn.in_proj_weight", p), nb_module_get(sa, "in_proj_weight"), true)),
                               param(x, ox_str(x, "%s.self_attn.in_proj_bias", p), nb_module_get(sa, "in_proj_bias"), false));
        const char *q = NULL, *k = NULL, *v = NULL;
        split3(x, qkv, E, &q, &k, &v);
        const char *a = linear(x, ox_str(x, "%s.self_attn.out_proj", p), nb_module_child(sa, "out_proj"),
                               attention(x, q, k, v, c.num_heads, E, NULL));
        h = NODE(x, "Add", h, a);
        if (!c.norm_first) h = layer_norm(x, ox_str(x, "%s.norm1", p), nb_module_child(L, "norm1"), h, eps);
        in = c.norm_first ? layer_norm(x, ox_str(x, "%s.norm2", p), nb_module_child(L, "norm2"), h, eps) : h;
        const char *f = linear(x, ox_str(x, "%s.linear1", p), nb_module_child(L, "linear1"), in);
        f = c.activation == NB_ACTIVATION_RELU ? NODE(x, "Relu", f) : gelu(x, f, c.activation == NB_ACTIVATION_GELU_TANH);
        h = NODE(x, "Add", h, linear(x, ox_str(x, "%s.linear2", p), nb_module_child(L, "linear2"), f));
        if (!c.norm_first) h = layer_norm(x, ox_str(x, "%s.norm2", p), nb_module_child(L, "norm2"), h, eps);
    }
    nb_module *fin = nb_module_child(enc, "norm");
    if (fin) h = layer_norm(x, "enc.norm", fin, h, eps);
    nb_module *head = nb_module_child(m, "head");
    h = linear(x, "head.0", nb_module_child_at(head, 0), h);
    h = layer_norm(x, "head.2", nb_module_child_at(head, 2), gelu(x, h, false), eps);
    nb_module *dec = nb_module_child(m, "dec"); /* weight tied to tok.weight [V, H]: x tok^T + b */
    const char *wt = param(x, "tok.weight", nb_module_get(dec, "weight"), true);
    return NODE(x, "Add", NODE(x, "MatMul", h, wt), param(x, "dec.bias", nb_module_get(dec, "bias"), false));
}

/* The causal mask for T = ids' length: bool [T, T], true where key j <= query i. */
static const char *causal_mask(ox *x, const char *ids, int64_t max_t) {
    int64_t d[2] = {max_t, max_t};
    Onnx__TensorProto *t = init_new(x, ox_str(x, "causal_mask"), ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 2, d,
                                    (size_t)(max_t * max_t));
    if (!t) return NULL;
    for (int64_t i = 0; i < max_t; i++)
        for (int64_t j = 0; j <= i; j++) t->raw_data.data[i * max_t + j] = 1;
    const char *full = init_add(x, t, NULL);
    const char *T = NODE_A(x, "Gather", LIST(NODE(x, "Shape", ids), I64S(1)), LIST(attr_i(x, "axis", 0)));
    const char *ends = NODE_A(x, "Concat", LIST(T, T), LIST(attr_i(x, "axis", 0)));
    return NODE(x, "Slice", full, I64S(0, 0), ends, I64S(0, 1));
}

static const char *emit_gpt2(ox *x, nb_module *m, const char *ids) {
    nb_gpt2_config c = nb_gpt2_get_config(m);
    int64_t E = c.n_embd;
    double eps = c.layer_norm_epsilon;
    nb_module *tr = nb_module_child(m, "transformer"), *hs = nb_module_child(tr, "h");
    const char *h = NODE(x, "Add", embed(x, "transformer.wte.weight", nb_module_child(tr, "wte"), ids),
                         embed(x, "transformer.wpe.weight", nb_module_child(tr, "wpe"), positions(x, ids)));
    const char *mask = causal_mask(x, ids, c.n_positions);
    for (int i = 0; h && i < c.n_layer; i++) {
        nb_module *b = nb_module_child_at(hs, i), *at = nb_module_child(b, "attn"), *mlp = nb_module_child(b, "mlp");
        char *p = ox_str(x, "transformer.h.%d", i);
        const char *in = layer_norm(x, ox_str(x, "%s.ln_1", p), nb_module_child(b, "ln_1"), h, eps);
        const char *q = NULL, *k = NULL, *v = NULL;
        split3(x, conv1d_hf(x, ox_str(x, "%s.attn.c_attn", p), nb_module_child(at, "c_attn"), in), E, &q, &k, &v);
        const char *a = attention(x, q, k, v, c.n_head, E, mask);
        h = NODE(x, "Add", h, conv1d_hf(x, ox_str(x, "%s.attn.c_proj", p), nb_module_child(at, "c_proj"), a));
        in = layer_norm(x, ox_str(x, "%s.ln_2", p), nb_module_child(b, "ln_2"), h, eps);
        const char *f = gelu(x, conv1d_hf(x, ox_str(x, "%s.mlp.c_fc", p), nb_module_child(mlp, "c_fc"), in), true);
        h = NODE(x, "Add", h, conv1d_hf(x, ox_str(x, "%s.mlp.c_proj", p), nb_module_child(mlp, "c_proj"), f));
    }
    h = layer_norm(x, "transformer.ln_f", nb_module_child(tr, "ln_f"), h, eps);
    return NODE(x, "MatMul", h, param(x, "transformer.wte.weight", nb_module_get(nb_module_child(tr, "wte"), "weight"), true));
}

/* ---- the model -------------------------------------------------------------------- */

static Onnx__ValueInfoProto *value_info(ox *x, const char *name, nb_dtype dt, int nd, const int64_t *shape,
                                        int n_dynamic, bool static_batch) {
    Onnx__ValueInfoProto *v = ox_alloc(x, sizeof *v);
    Onnx__TypeProto *tp = ox_alloc(x, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ox_alloc(x, sizeof *tt);
    Onnx__TensorShapeProto *sp = ox_alloc(x, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dims = ox_alloc(x, sizeof *dims * (size_t)(nd ? nd : 1));
    if (!v || !tp || !tt || !sp || !dims) return NULL;
    onnx__value_info_proto__init(v), onnx__type_proto__init(tp), onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    for (int d = 0; d < nd; d++) {
        Onnx__TensorShapeProto__Dimension *dim = ox_alloc(x, sizeof *dim);
        if (!dim) return NULL;
        onnx__tensor_shape_proto__dimension__init(dim);
        if (d < n_dynamic && !(d == 0 && static_batch)) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = d == 0 ? "batch" : "sequence";
        } else {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = shape[d];
        }
        dims[d] = dim;
    }
    sp->n_dim = (size_t)nd, sp->dim = dims;
    tt->has_elem_type = true;
    tt->elem_type = dt == NB_I64 ? ONNX__TENSOR_PROTO__DATA_TYPE__INT64 : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tp->tensor_type = tt;
    v->name = (char *)name, v->type = tp;
    return v;
}

static void ox_free(ox *x) {
    for (size_t i = 0; i < x->n_arena; i++) free(x->arena[i]);
    free(x->arena), free(x->nodes), free(x->inits), free(x->init_src);
}

nb_status nb_onnx_export(nb_module *m, int n_in, nb_tensor *const *example_inputs, const char *path,
                         const nb_onnx_options *opt) {
    const char *op = "onnx_export";
    if (!m || !example_inputs || !path)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL %s", op, !m ? "module" : !path ? "path" : "inputs");
    if (n_in < 1 || n_in > NB_FORWARD_MAX) return nb_set_error(NB_ERR_INVALID_ARG, "%s: %d inputs (1 to %d)", op, n_in, NB_FORWARD_MAX);
    for (int i = 0; i < n_in; i++)
        if (!example_inputs[i]) return nb_set_error(NB_ERR_INVALID_ARG, "%s: example input %d is NULL", op, i);
    nb_onnx_options o = opt ? *opt : (nb_onnx_options){0};
    const char *kind = nb_module_kind(m);
    bool tokens = !strcmp(kind, "BERT") || !strcmp(kind, "GPT2LMHeadModel");
    if (tokens && n_in != 1)
        return nb_set_error(NB_ERR_UNSUPPORTED, "%s: %s is exported with input_ids alone, not %d inputs", op, kind, n_in);
    if (!tokens && n_in != 1) return nb_set_error(NB_ERR_UNSUPPORTED, "%s: %s: one input only", op, kind);
    /* the example's forward: checks the model and gives the output's shape */
    nb_scope *s = nb_scope_begin();
    bool training = nb_module_is_training(m), prev = nb_set_grad_enabled(false);
    nb_module_train(m, false);
    nb_tensor *y = nb_forward(m, example_inputs[0]);
    nb_module_train(m, training);
    nb_set_grad_enabled(prev);
    if (!y) {
        nb_scope_end(s);
        return nb_last_status();
    }
    int ynd = nb_dim(y);
    int64_t yshape[NB_MAX_DIMS];
    memcpy(yshape, nb_shape(y), sizeof(int64_t) * (size_t)ynd);
    nb_dtype ydt = nb_dtype_of(y);
    nb_scope_end(s);

    ox x = {0};
    const char *in_name = o.input_names[0] ? o.input_names[0] : tokens ? "input_ids" : "input";
    const char *out;
    if (!strcmp(kind, "BERT")) out = emit_bert(&x, m, in_name);
    else if (!strcmp(kind, "GPT2LMHeadModel")) out = emit_gpt2(&x, m, in_name);
    else out = emit(&x, "", m, in_name);
    const char *out_name = o.output_name ? o.output_name : "output";
    if (!x.st && out) out = NODE(&x, "Identity", out); /* the graph's output under its own name */
    if (!x.st && out) x.nodes[x.n_nodes - 1]->output[0] = (char *)out_name;
    Onnx__ValueInfoProto *vin = value_info(&x, in_name, nb_dtype_of(example_inputs[0]), nb_dim(example_inputs[0]),
                                           nb_shape(example_inputs[0]), tokens ? 2 : 1, o.static_batch);
    Onnx__ValueInfoProto *vout = value_info(&x, out_name, ydt, ynd, yshape, tokens ? 2 : 1, o.static_batch);
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto ops = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsp = &ops;
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    nb_status st = x.st;
    if (!st && (!vin || !vout || !out)) st = nb_last_status() ? nb_last_status() : NB_ERR_OOM;
    if (!st) {
        g.name = (char *)(o.graph_name ? o.graph_name : kind);
        g.n_node = x.n_nodes, g.node = x.nodes;
        g.n_initializer = x.n_inits, g.initializer = x.inits;
        g.n_input = 1, g.input = &vin;
        g.n_output = 1, g.output = &vout;
        ops.domain = "", ops.has_version = true, ops.version = OPSET;
        model.has_ir_version = true, model.ir_version = IR_VERSION;
        model.n_opset_import = 1, model.opset_import = &opsp;
        model.producer_name = "nabla", model.producer_version = (char *)nb_version();
        model.graph = &g;
        size_t len = onnx__model_proto__get_packed_size(&model);
        uint8_t *buf = len > INT32_MAX ? NULL : malloc(len ? len : 1);
        if (len > INT32_MAX) /* protobuf's parsers stop at 2 GiB; larger models need external data */
            st = nb_set_error(NB_ERR_UNSUPPORTED, "%s: the model is %zu bytes; ONNX files over 2 GiB (external data) "
                              "are not written yet", op, len);
        else if (!buf) st = nb_set_error(NB_ERR_OOM, "%s: out of host memory (%zu bytes)", op, len);
        else {
            onnx__model_proto__pack(&model, buf);
            st = nb_write_file_atomic(op, path, buf, len);
            free(buf);
        }
    }
    ox_free(&x);
    return st;
}

#else

nb_status nb_onnx_export(nb_module *m, int n_in, nb_tensor *const *example_inputs, const char *path,
                         const nb_onnx_options *opt) {
    (void)m, (void)n_in, (void)example_inputs, (void)path, (void)opt;
    return nb_set_error(NB_ERR_UNSUPPORTED, "onnx_export: this build has no onnx.proto (Debian's libonnx-dev)");
}

#endif
