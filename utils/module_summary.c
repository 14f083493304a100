/* module_summary.c - nb_module_summary (torchinfo's summary): the module
 * tree, a forward hook on each module for output shapes and mult-adds, the
 * table. */
#include <stdlib.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_extension.h"
#include "nb_module_summary.h"

typedef struct node {
    nb_module *m;
    char *path;      /* dotted, "" for the root */
    int parent, depth;
    int64_t handle;  /* its hook */
    int64_t own_macs; /* the layer's own products, summed over its calls */
    int64_t out_bytes; /* a leaf's outputs, summed over its calls */
    int64_t child_params; /* the sum of its children's subtree counts */
} node;

typedef struct walk {
    node *nodes;
    nb_summary_row *rows;
    int n, cap;
    nb_status st;
} walk;

static int add_nodes(walk *w, nb_module *m, const char *path, int parent, int depth) {
    if (w->st) return -1;
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        node *nn = realloc(w->nodes, sizeof(node) * (size_t)cap);
        if (nn) w->nodes = nn;
        nb_summary_row *nr = nn ? realloc(w->rows, sizeof(nb_summary_row) * (size_t)cap) : NULL;
        if (nr) w->rows = nr;
        if (!nn || !nr) return w->st = nb_set_error(NB_ERR_OOM, "module_summary: out of host memory"), -1;
        w->cap = cap;
    }
    int me = w->n++;
    w->nodes[me] = (node){.m = m, .path = strdup(path), .parent = parent, .depth = depth};
    w->rows[me] = (nb_summary_row){.name = NULL, .kind = nb_module_kind(m), .depth = depth, .ndim = -1};
    if (!w->nodes[me].path) return w->st = nb_set_error(NB_ERR_OOM, "module_summary: out of host memory"), -1;
    for (int i = 0; i < nb_module_num_children(m); i++) {
        const char *name = nb_module_child_name(m, i);
        size_t len = strlen(path) + strlen(name) + 2;
        char *p = malloc(len);
        if (!p) return w->st = nb_set_error(NB_ERR_OOM, "module_summary: out of host memory"), -1;
        snprintf(p, len, "%s%s%s", path, *path ? "." : "", name);
        add_nodes(w, nb_module_child_at(m, i), p, me, depth + 1);
        free(p);
    }
    return me;
}

static int64_t numel_of(const nb_tensor *t) { return t ? nb_numel(t) : 0; }

/* The mult-adds of one call of a layer (the table in nb_module_summary.h). */
static int64_t layer_macs(nb_module *m, int n_in, nb_tensor *const *in, nb_tensor *out) {
    const char *k = nb_module_kind(m);
    nb_tensor *w = nb_module_get(m, "weight");
    const int64_t *ws = w ? nb_shape(w) : NULL;
    int wd = w ? nb_dim(w) : 0;
    if (!strcmp(k, "Linear") && wd == 2) return numel_of(out) * ws[1];
    if (!strcmp(k, "Conv1D") && wd == 2) return numel_of(out) * ws[0]; /* GPT-2's: weight [in, out] */
    if (!strcmp(k, "Bilinear") && wd == 3) return numel_of(out) * ws[1] * ws[2];
    if (!strncmp(k, "Conv", 4) && w && wd >= 3 && ws[0] > 0) {
        bool transposed = !strncmp(k, "ConvTranspose", 13);
        return transposed ? numel_of(in[0]) * (nb_numel(w) / ws[0]) : numel_of(out) * (nb_numel(w) / ws[0]);
    }
    bool rnn = !strcmp(k, "RNN") || !strcmp(k, "LSTM") || !strcmp(k, "GRU") || !strcmp(k, "RNNCell") ||
               !strcmp(k, "LSTMCell") || !strcmp(k, "GRUCell");
    if (rnn && out && nb_dim(out) >= 1) {
        int64_t rows = nb_numel(out) / (nb_shape(out)[nb_dim(out) - 1] ? nb_shape(out)[nb_dim(out) - 1] : 1), macs = 0;
        int n = nb_module_parameters(m, NULL, 0);
        nb_named_tensor *ps = n > 0 ? malloc(sizeof *ps * (size_t)n) : NULL;
        if (ps) nb_module_parameters(m, ps, n);
        for (int i = 0; ps && i < n; i++)
            if (!strncmp(ps[i].name, "weight_ih", 9) || !strncmp(ps[i].name, "weight_hh", 9)) macs += nb_numel(ps[i].tensor);
        free(ps);
        return rows * macs;
    }
    bool attn = !strcmp(k, "MultiheadAttention") || !strcmp(k, "GPT2Attention") || !strcmp(k, "LlamaAttention");
    if (attn && n_in >= 1 && in[0] && nb_dim(in[0]) == 3 && out && nb_dim(out) >= 1) {
        const int64_t *q = nb_shape(in[0]);
        int64_t B = q[0], L = q[1], S = n_in >= 2 && in[1] && nb_dim(in[1]) == 3 ? nb_shape(in[1])[1] : L;
        int64_t E = nb_shape(out)[nb_dim(out) - 1], macs = 2 * B * L * S * E;
        /* MultiheadAttention's packed Q, K, V (in_proj_weight [3E, E], or its converted buffers) */
        if (!strcmp(k, "MultiheadAttention")) macs += B * (L + 2 * S) * E * E;
        return macs;
    }
    return 0;
}

typedef struct hook_ctx {
    walk *w;
    int me;
} hook_ctx;

static nb_status on_forward(nb_module *m, int n_in, nb_tensor *const *in, int n_out, nb_tensor **out, void *user) {
    hook_ctx *h = user;
    nb_summary_row *r = &h->w->rows[h->me];
    node *nd = &h->w->nodes[h->me];
    r->calls++;
    nb_tensor *o = n_out >= 1 ? out[0] : NULL;
    r->ndim = o ? nb_dim(o) : -1;
    for (int d = 0; o && d < r->ndim; d++) r->shape[d] = nb_shape(o)[d];
    nd->own_macs += layer_macs(m, n_in, in, o);
    if (nb_module_num_children(m) == 0)
        for (int i = 0; i < n_out; i++)
            if (out[i]) nd->out_bytes += nb_numel(out[i]) * (int64_t)nb_dtype_size(nb_dtype_of(out[i]));
    return NB_OK;
}

/* Parameters of m's subtree, each shared tensor once. */
static nb_status count_params(nb_module *m, int64_t *all, int64_t *trainable, int64_t *bytes) {
    int n;
    nb_tensor **ps = nb_module_parameter_list(m, &n);
    if (!ps) return nb_last_status();
    *all = *trainable = 0;
    if (bytes) *bytes = 0;
    for (int i = 0; i < n; i++) {
        *all += nb_numel(ps[i]);
        if (nb_requires_grad(ps[i])) *trainable += nb_numel(ps[i]);
        if (bytes) *bytes += nb_numel(ps[i]) * (int64_t)nb_dtype_size(nb_dtype_of(ps[i]));
    }
    free(ps);
    return NB_OK;
}

/* 12,460,032 */
static const char *grouped(int64_t v, char *buf, size_t len) {
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)(v < 0 ? -v : v));
    size_t n = strlen(raw), k = 0;
    if (v < 0 && k + 1 < len) buf[k++] = '-';
    for (size_t i = 0; i < n && k + 2 < len; i++) {
        if (i && (n - i) % 3 == 0) buf[k++] = ',';
        buf[k++] = raw[i];
    }
    buf[k] = 0;
    return buf;
}

static void print_table(FILE *f, const walk *w, const nb_summary *s, int depth) {
    const char *rule = "==========================================================================================";
    fprintf(f, "%s\n%-44s %-24s %12s %16s\n%s\n", rule, "Layer (type:depth-idx)", "Output Shape", "Param #",
            "Mult-Adds", rule);
    int *index = calloc((size_t)w->n, sizeof(int)); /* the child number under its parent, for depth-idx */
    int *counter = calloc((size_t)w->n, sizeof(int));
    for (int i = 0; i < w->n; i++) {
        const node *nd = &w->nodes[i];
        const nb_summary_row *r = &s->rows[i];
        if (index && counter && nd->parent >= 0) index[i] = ++counter[nd->parent];
        if (r->depth > depth) continue;
        char label[160] = "", shape[96] = "--", p[32], mac[32];
        int k = 0;
        for (int d = 1; d < r->depth && k < 64; d++) k += snprintf(label + k, sizeof label - (size_t)k, "\xe2\x94\x82    ");
        if (r->depth > 0) {
            bool last = true; /* a later sibling shown? then ├─, else └─ */
            for (int j = i + 1; j < w->n && w->nodes[j].depth >= r->depth; j++)
                if (w->nodes[j].depth == r->depth && w->nodes[j].parent == nd->parent) last = false;
            k += snprintf(label + k, sizeof label - (size_t)k, "%s", last ? "\xe2\x94\x94\xe2\x94\x80" : "\xe2\x94\x9c\xe2\x94\x80");
            snprintf(label + k, sizeof label - (size_t)k, "%s: %d-%d", r->kind, r->depth, index ? index[i] : 0);
        } else {
            snprintf(label, sizeof label, "%s", r->kind);
        }
        if (r->ndim >= 0) {
            int q = snprintf(shape, sizeof shape, "[");
            for (int d = 0; d < r->ndim && q < (int)sizeof shape; d++)
                q += snprintf(shape + q, sizeof shape - (size_t)q, "%s%lld", d ? ", " : "", (long long)r->shape[d]);
            if (q < (int)sizeof shape) snprintf(shape + q, sizeof shape - (size_t)q, "]");
        }
        bool leaf = i + 1 >= w->n || w->nodes[i + 1].depth <= r->depth;
        bool folded = !leaf && r->depth == depth; /* its subtree is not shown: its sums are */
        /* a layer shown with its children: what it holds and computes itself
         * (MultiheadAttention's in_proj_weight and products) */
        int64_t np = leaf || folded ? r->params : r->params - nd->child_params, nm = leaf || folded ? r->mult_adds : nd->own_macs;
        /* box-drawing characters are 3 bytes and one column: pad by columns */
        int cols = 0;
        for (const char *c = label; *c; c++) cols += ((unsigned char)*c & 0xC0) != 0x80;
        fprintf(f, "%s%*s %-24s %12s %16s\n", label, cols < 44 ? 44 - cols : 0, "", shape,
                np > 0 ? grouped(np, p, sizeof p) : "--", nm > 0 ? grouped(nm, mac, sizeof mac) : "--");
    }
    free(index), free(counter);
    char a[32], b[32], c[32], d[32];
    fprintf(f, "%s\nTotal params: %s\nTrainable params: %s\nNon-trainable params: %s\nTotal mult-adds: %s\n%s\n", rule,
            grouped(s->total_params, a, sizeof a), grouped(s->trainable_params, b, sizeof b),
            grouped(s->total_params - s->trainable_params, c, sizeof c), grouped(s->mult_adds, d, sizeof d), rule);
    double mb = 1e6;
    fprintf(f, "Input size (MB): %.2f\nForward pass size (MB): %.2f\nParams size (MB): %.2f\nEstimated Total Size (MB): %.2f\n%s\n",
            (double)s->input_bytes / mb, (double)s->forward_bytes / mb, (double)s->param_bytes / mb,
            (double)(s->input_bytes + s->forward_bytes + s->param_bytes) / mb, rule);
}

nb_status nb_module_summary(nb_module *m, int n_in, nb_tensor *const *inputs, const nb_summary_options *opt,
                            nb_summary *out) {
    const char *op = "module_summary";
    if (!m || !inputs) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL %s", op, m ? "inputs" : "module");
    if (n_in < 1 || n_in > NB_FORWARD_MAX)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %d inputs (1 to %d)", op, n_in, NB_FORWARD_MAX);
    nb_summary_options o = opt ? *opt : (nb_summary_options){0};
    if (o.depth < 0) return nb_set_error(NB_ERR_INVALID_ARG, "%s: depth %d must be >= 0", op, o.depth);
    int depth = o.depth ? o.depth : 3;
    walk w = {0};
    add_nodes(&w, m, "", -1, 0);
    hook_ctx *ctx = w.st ? NULL : calloc((size_t)w.n, sizeof *ctx);
    if (!w.st && !ctx) w.st = nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    int hooked = 0;
    for (; !w.st && hooked < w.n; hooked++) {
        ctx[hooked] = (hook_ctx){&w, hooked};
        w.nodes[hooked].handle = nb_module_register_forward_hook_n(w.nodes[hooked].m, on_forward, &ctx[hooked]);
        if (w.nodes[hooked].handle < 0) w.st = nb_last_status();
    }
    nb_summary s = {0};
    if (!w.st) { /* one forward, eval mode, grad off */
        bool training = nb_module_is_training(m), prev = nb_set_grad_enabled(false);
        nb_module_train(m, false);
        nb_scope *sc = nb_scope_begin();
        nb_tensor *outs[NB_FORWARD_MAX];
        if (nb_forward_n(m, n_in, inputs, outs, NB_FORWARD_MAX) < 0) w.st = nb_last_status();
        nb_scope_end(sc);
        nb_module_train(m, training);
        nb_set_grad_enabled(prev);
    }
    for (int i = 0; i < hooked; i++)
        if (w.nodes[i].handle > 0) nb_module_remove_hook(w.nodes[i].m, w.nodes[i].handle);
    /* the subtree sums, deepest first (children follow their parent) */
    for (int i = w.n - 1; !w.st && i >= 0; i--) {
        nb_summary_row *r = &w.rows[i];
        r->name = w.nodes[i].path;
        r->mult_adds += w.nodes[i].own_macs;
        s.forward_bytes += w.nodes[i].out_bytes;
        if (w.nodes[i].parent >= 0) w.rows[w.nodes[i].parent].mult_adds += r->mult_adds;
        if ((w.st = count_params(w.nodes[i].m, &r->params, &r->trainable_params, NULL))) break;
        if (w.nodes[i].parent >= 0) w.nodes[w.nodes[i].parent].child_params += r->params;
    }
    if (!w.st) w.st = count_params(m, &s.total_params, &s.trainable_params, &s.param_bytes);
    for (int i = 0; i < n_in; i++)
        if (inputs[i]) s.input_bytes += nb_numel(inputs[i]) * (int64_t)nb_dtype_size(nb_dtype_of(inputs[i]));
    s.rows = w.rows, s.n_rows = w.n;
    s.mult_adds = w.n ? w.rows[0].mult_adds : 0;
    if (!w.st && !o.quiet) print_table(o.file ? o.file : stdout, &w, &s, depth);
    free(ctx);
    if (!w.st && out) { /* the rows keep the paths: they move to the caller */
        *out = s;
        free(w.nodes);
        return NB_OK;
    }
    for (int i = 0; i < w.n; i++) free(w.nodes[i].path);
    free(w.nodes), free(w.rows);
    return w.st;
}

void nb_summary_free(nb_summary *s) {
    if (!s) return;
    for (int i = 0; i < s->n_rows; i++) free((char *)s->rows[i].name);
    free(s->rows);
    memset(s, 0, sizeof *s);
}
