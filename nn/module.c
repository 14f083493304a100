/* module.c - the module tree: a vtable and context per module, its named
 * parameters, buffers and children, train/eval mode, and the dotted-name
 * lists ("0.weight", "fc1.bias") of nb_module_parameters/buffers, built on
 * demand, cached per module and invalidated up the tree when it changes.
 * Modules never touch tensor data; parameters are plain leaf tensors that
 * require grad and that no scope owns.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd.h"
#include "nb_extension.h"
#include "nb_nn.h"
#include "nn_impl.h"

typedef struct nb_slot {
    char *name;
    nb_tensor *tensor; /* owned reference */
} nb_slot;

typedef struct nb_child {
    char *name;
    nb_module *module; /* owned */
} nb_child;

typedef struct nb_slots {
    nb_slot *items;
    int len, cap;
} nb_slots;

/* A cached dotted-name list: items[i].name points into chars. */
typedef struct nb_name_cache {
    bool valid;
    int len;
    nb_named_tensor *items;
    char *chars;
} nb_name_cache;

enum { NB_PARAMS = 0, NB_BUFFERS = 1 };
#define NB_FLAT_MAX 4 /* (dtype, device) groups of flat parameter buffers */

/* A forward pre-hook or forward hook (Module.register_forward_pre_hook /
 * register_forward_hook), run by nb_forward. */
typedef struct nb_module_hook {
    int64_t id;
    bool post;
    bool multi; /* registered with the _n form: sees every input and output */
    union {
        nb_forward_pre_hook_fn pre;
        nb_forward_hook_fn post;
        nb_forward_pre_hook_n_fn pre_n;
        nb_forward_hook_n_fn post_n;
    } fn;
    void *user;
} nb_module_hook;

struct nb_module {
    const nb_module_ops *ops;
    void *ctx;
    bool training;
    nb_module *parent; /* NULL for a root */
    nb_slots slots[2]; /* NB_PARAMS, NB_BUFFERS */
    nb_slots attrs;    /* tensors found by name but neither parameters nor buffers (a parametrized weight) */
    nb_child *children;
    int n_children, cap_children;
    nb_name_cache cache[2];
    nb_module_hook *hooks;
    int n_hooks, cap_hooks;
    /* nb_module_flatten_parameters: per (dtype, device) group, the flat
     * parameter and gradient buffers (owned) */
    nb_tensor *flat[NB_FLAT_MAX], *gflat[NB_FLAT_MAX];
    int n_flat;
};

/* ---- lifetime ------------------------------------------------------------ */

nb_module *nb_module_new(const nb_module_ops *ops, void *ctx) {
    if (!ops || (!ops->forward && !ops->forward_n)) {
        if (ops && ops->free_ctx) ops->free_ctx(ctx);
        return NB_FAIL(NB_ERR_INVALID_ARG, "module_new: ops and ops->forward or ops->forward_n are required");
    }
    nb_module *m = calloc(1, sizeof *m);
    if (!m) {
        if (ops->free_ctx) ops->free_ctx(ctx);
        return NB_FAIL(NB_ERR_OOM, "module_new: out of host memory");
    }
    m->ops = ops;
    m->ctx = ctx;
    m->training = true; /* PyTorch: modules start in training mode */
    return m;
}

static void cache_clear(nb_name_cache *c) {
    free(c->items);
    free(c->chars);
    memset(c, 0, sizeof *c);
}

/* Marks the name lists of m and of every ancestor stale. */
static void invalidate(nb_module *m) {
    for (; m; m = m->parent) m->cache[NB_PARAMS].valid = m->cache[NB_BUFFERS].valid = false;
}

/* Removes m from its parent's children (so freeing a child never leaves
 * a dangling pointer in the tree). */
static void detach(nb_module *m) {
    nb_module *p = m->parent;
    if (!p) return;
    for (int i = 0; i < p->n_children; i++) {
        if (p->children[i].module != m) continue;
        free(p->children[i].name);
        memmove(&p->children[i], &p->children[i + 1],
                sizeof(nb_child) * (size_t)(p->n_children - i - 1));
        p->n_children--;
        break;
    }
    m->parent = NULL;
    invalidate(p);
}

static void module_free_tree(nb_module *m) {
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < m->slots[k].len; i++) {
            free(m->slots[k].items[i].name);
            nb_release(m->slots[k].items[i].tensor); /* also drops its .grad */
        }
        free(m->slots[k].items);
        cache_clear(&m->cache[k]);
    }
    for (int i = 0; i < m->attrs.len; i++) free(m->attrs.items[i].name), nb_release(m->attrs.items[i].tensor);
    free(m->attrs.items);
    for (int i = 0; i < m->n_children; i++) {
        free(m->children[i].name);
        module_free_tree(m->children[i].module);
    }
    free(m->children);
    free(m->hooks);
    for (int i = 0; i < m->n_flat; i++) nb_release(m->flat[i]), nb_release(m->gflat[i]);
    if (m->ops->free_ctx) m->ops->free_ctx(m->ctx);
    free(m);
}

void nb_module_free(nb_module *m) {
    if (!m) return;
    detach(m);
    module_free_tree(m);
}

bool nb_nn_check_dtype(const char *module, nb_op_id op, nb_dtype dt) {
    const nb_op_info *r = nb_op_get(op);
    if ((unsigned)dt >= NB_DTYPE_COUNT || !(r->dtypes & NB_DTM(dt))) {
        nb_set_error(NB_ERR_DTYPE, "%s: dtype %s is not supported (%s takes %s)", module,
                     (unsigned)dt < NB_DTYPE_COUNT ? nb_dtype_name(dt) : "invalid", r->name,
                     r->dtypes == NB_DTM_F ? "float32, float64" : "other dtypes");
        return false;
    }
    if (!nb_backend_supports(nb_default_device(), op, dt)) {
        char d[32];
        nb_set_error(NB_ERR_UNSUPPORTED, "%s: %s in %s is not supported on %s", module, r->name, nb_dtype_name(dt),
                     nb_device_str(nb_default_device(), d, sizeof d));
        return false;
    }
    return true;
}

/* ---- plain accessors ----------------------------------------------------- */

/* A NULL module (a failed constructor upstream): keeps that error, else
 * records one naming op. */
static bool no_module(const char *op, const void *m) {
    if (m) return false;
    if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: module is NULL", op);
    return true;
}

void *nb_module_ctx(nb_module *m) { return no_module("module_ctx", m) ? NULL : m->ctx; }

const char *nb_module_kind(const nb_module *m) { return no_module("module_kind", m) ? NULL : m->ops->kind; }

bool nb_module_is_training(const nb_module *m) { return m && m->training; }

void nb_module_train(nb_module *m, bool training) {
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->n_children; i++) nb_module_train(m->children[i].module, training);
}

/* A hook's failure keeps its own message, or gets one naming the module. */
static int hook_failed(const nb_module *m, nb_status st, const char *what) {
    if (nb_last_status() == NB_OK || !nb_last_error()[0])
        nb_set_error(st, "forward: a %s of %s failed (status %s)", what, m->ops->kind, nb_status_str(st));
    return -1;
}

/* The module's own forward on in[0..n_in), without hooks: the one-tensor
 * forward for one input and one output asked (it takes exactly one input,
 * not NULL), else forward_n. */
static int call_forward(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    if (m->ops->forward_n && !(m->ops->forward && n_in == 1 && max_out == 1)) {
        int n = m->ops->forward_n(m, n_in, in, max_out, out);
        if (n > NB_FORWARD_MAX) /* a module kind's bug, not the caller's */
            return nb_set_error(NB_ERR_STATE, "forward: %s gave %d outputs (at most %d)", m->ops->kind, n,
                                NB_FORWARD_MAX), -1;
        if (n < 0) {
            if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_STATE, "forward: %s failed without an error", m->ops->kind);
            return -1;
        }
        if (n == 0) return nb_set_error(NB_ERR_INVALID_ARG, "forward: %s gave no output", m->ops->kind), -1;
        for (int i = 0; i < n && i < max_out; i++)
            if (!out[i]) {
                if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_STATE, "forward: output %d of %s is NULL", i, m->ops->kind);
                return -1;
            }
        return n;
    }
    if (n_in != 1)
        return nb_set_error(NB_ERR_INVALID_ARG, "forward: %s takes 1 input, got %d", m->ops->kind, n_in), -1;
    if (!in[0]) {
        /* keep the error that produced the NULL; say something if there was none */
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "forward: input of %s is NULL", m->ops->kind);
        return -1;
    }
    out[0] = m->ops->forward(m, in[0]);
    return out[0] ? 1 : -1;
}

bool nb_module_has_hooks(const nb_module *m) { return m && m->n_hooks > 0; }

/* nb_forward_n's body: pre-hooks (each may replace inputs), the forward,
 * then forward hooks (each may replace outputs), in registration order.
 * out has NB_FORWARD_MAX entries. */
nb_status nb_module_run_pre_hooks(nb_module *m, int n_in, nb_tensor **in) {
    for (int i = 0; i < m->n_hooks; i++) {
        nb_module_hook h = m->hooks[i];
        if (h.post) continue;
        nb_clear_error(); /* a failing hook's own message, not a stale one */
        nb_status st;
        if (h.multi) {
            st = h.fn.pre_n(m, n_in, in, h.user);
        } else {
            nb_tensor *r = NULL;
            st = h.fn.pre(m, n_in ? in[0] : NULL, &r, h.user);
            if (r && n_in) in[0] = r;
        }
        if (st != NB_OK) return hook_failed(m, st, "forward pre-hook"), nb_last_status();
    }
    return NB_OK;
}

nb_status nb_module_run_post_hooks(nb_module *m, int n_in, nb_tensor *const *in, int n_out, nb_tensor **out) {
    for (int i = 0; i < m->n_hooks; i++) {
        nb_module_hook h = m->hooks[i];
        if (!h.post) continue;
        nb_clear_error();
        nb_status st;
        if (h.multi) {
            st = h.fn.post_n(m, n_in, in, n_out, out, h.user);
        } else {
            nb_tensor *r = NULL;
            st = h.fn.post(m, n_in ? in[0] : NULL, out[0], &r, h.user);
            if (r) out[0] = r;
        }
        if (st != NB_OK) return hook_failed(m, st, "forward hook"), nb_last_status();
        for (int k = 0; k < n_out; k++)
            if (!out[k])
                return nb_set_error(NB_ERR_INVALID_ARG, "forward: a forward hook of %s set output %d to NULL", m->ops->kind, k);
    }
    return NB_OK;
}

static int forward_hooked(nb_module *m, int n_in, nb_tensor **in, int max_out, nb_tensor **out) {
    if (nb_module_run_pre_hooks(m, n_in, in) != NB_OK) return -1;
    int n_out = call_forward(m, n_in, in, max_out, out);
    if (n_out < 0) return -1;
    return nb_module_run_post_hooks(m, n_in, in, n_out < max_out ? n_out : max_out, out) ? -1 : n_out;
}

int nb_forward_n(nb_module *m, int n_in, nb_tensor *const *in, nb_tensor **out, int max_out) {
    if (!m) return nb_set_error(NB_ERR_INVALID_ARG, "forward: module is NULL"), -1;
    if (n_in < 0 || n_in > NB_FORWARD_MAX || (n_in && !in))
        return nb_set_error(NB_ERR_INVALID_ARG, "forward: %s: %d inputs (0 to %d, in not NULL)", m->ops->kind, n_in,
                            NB_FORWARD_MAX), -1;
    if (max_out < 1 || !out)
        return nb_set_error(NB_ERR_INVALID_ARG, "forward: %s: no room for outputs (max_out %d)", m->ops->kind,
                            max_out), -1;
    if (max_out > NB_FORWARD_MAX) max_out = NB_FORWARD_MAX;
    nb_tensor *args[NB_FORWARD_MAX] = {0}, *res[NB_FORWARD_MAX] = {0};
    if (n_in) memcpy(args, in, sizeof *args * (size_t)n_in); /* hooks may replace inputs: not the caller's array */
    int n = forward_hooked(m, n_in, args, max_out, res);
    if (n < 0) return -1;
    memcpy(out, res, sizeof *out * (size_t)(n < max_out ? n : max_out));
    return n;
}

nb_tensor *nb_forward(nb_module *m, nb_tensor *x) {
    if (!m) return NB_FAIL(NB_ERR_INVALID_ARG, "forward: module is NULL");
    if (!x) {
        /* keep the error that produced the NULL; say something if there was none */
        if (nb_last_status() == NB_OK)
            nb_set_error(NB_ERR_INVALID_ARG, "forward: input of %s is NULL", m->ops->kind);
        return NULL;
    }
    if (!m->n_hooks && m->ops->forward) return m->ops->forward(m, x);
    nb_tensor *y = NULL;
    return nb_forward_n(m, 1, &x, &y, 1) < 0 ? NULL : y;
}

static int64_t add_module_hook(nb_module *m, nb_module_hook h, const char *op) {
    static _Atomic int64_t next_id = 1;
    if (no_module(op, m)) return -1;
    if (m->n_hooks == m->cap_hooks) {
        int cap = m->cap_hooks ? 2 * m->cap_hooks : 4;
        nb_module_hook *v = realloc(m->hooks, sizeof *v * (size_t)cap);
        if (!v) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op), -1;
        m->hooks = v, m->cap_hooks = cap;
    }
    h.id = atomic_fetch_add(&next_id, 1);
    m->hooks[m->n_hooks++] = h;
    return h.id;
}

int64_t nb_module_register_forward_pre_hook(nb_module *m, nb_forward_pre_hook_fn fn, void *user) {
    if (!fn) return nb_set_error(NB_ERR_INVALID_ARG, "register_forward_pre_hook: NULL hook"), -1;
    return add_module_hook(m, (nb_module_hook){.post = false, .fn.pre = fn, .user = user}, "register_forward_pre_hook");
}

int64_t nb_module_register_forward_hook(nb_module *m, nb_forward_hook_fn fn, void *user) {
    if (!fn) return nb_set_error(NB_ERR_INVALID_ARG, "register_forward_hook: NULL hook"), -1;
    return add_module_hook(m, (nb_module_hook){.post = true, .fn.post = fn, .user = user}, "register_forward_hook");
}

int64_t nb_module_register_forward_pre_hook_n(nb_module *m, nb_forward_pre_hook_n_fn fn, void *user) {
    if (!fn) return nb_set_error(NB_ERR_INVALID_ARG, "register_forward_pre_hook: NULL hook"), -1;
    return add_module_hook(m, (nb_module_hook){.post = false, .multi = true, .fn.pre_n = fn, .user = user},
                           "register_forward_pre_hook");
}

int64_t nb_module_register_forward_hook_n(nb_module *m, nb_forward_hook_n_fn fn, void *user) {
    if (!fn) return nb_set_error(NB_ERR_INVALID_ARG, "register_forward_hook: NULL hook"), -1;
    return add_module_hook(m, (nb_module_hook){.post = true, .multi = true, .fn.post_n = fn, .user = user},
                           "register_forward_hook");
}

nb_status nb_module_remove_hook(nb_module *m, int64_t handle) {
    if (no_module("module_remove_hook", m)) return nb_last_status();
    for (int i = 0; i < m->n_hooks; i++)
        if (m->hooks[i].id == handle) {
            memmove(&m->hooks[i], &m->hooks[i + 1], sizeof *m->hooks * (size_t)(m->n_hooks - i - 1));
            m->n_hooks--;
            return NB_OK;
        }
    return nb_set_error(NB_ERR_INVALID_ARG, "module_remove_hook: %s has no hook with handle %lld", m->ops->kind,
                        (long long)handle);
}

int nb_module_num_children(const nb_module *m) { return no_module("module_num_children", m) ? -1 : m->n_children; }

nb_module *nb_module_child_at(nb_module *m, int i) {
    if (no_module("module_child_at", m)) return NULL;
    return (i >= 0 && i < m->n_children) ? m->children[i].module : NULL;
}

const char *nb_module_child_name(const nb_module *m, int i) {
    if (no_module("module_child_name", m)) return NULL;
    return (i >= 0 && i < m->n_children) ? m->children[i].name : NULL;
}

static nb_module *direct_child(nb_module *m, const char *name, size_t len) {
    for (int i = 0; i < m->n_children; i++)
        if (strlen(m->children[i].name) == len && !memcmp(m->children[i].name, name, len))
            return m->children[i].module;
    return NULL;
}

/* A direct child, or a descendant by dotted path ("0.fc1"), as get_submodule. */
nb_module *nb_module_child(nb_module *m, const char *name) {
    if (no_module("module_child", m)) return NULL;
    if (!name) return NB_FAIL(NB_ERR_INVALID_ARG, "module_child: NULL name");
    while (m) {
        const char *dot = strchr(name, '.');
        size_t len = dot ? (size_t)(dot - name) : strlen(name);
        m = direct_child(m, name, len);
        if (!dot) return m;
        name = dot + 1;
    }
    return NULL;
}

static nb_tensor *find_slot(const nb_slots *s, const char *name) {
    for (int i = 0; i < s->len; i++)
        if (!strcmp(s->items[i].name, name)) return s->items[i].tensor;
    return NULL;
}

nb_tensor *nb_module_get(nb_module *m, const char *name) {
    if (no_module("module_get", m)) return NULL;
    if (!name) return NB_FAIL(NB_ERR_INVALID_ARG, "module_get: NULL name");
    nb_tensor *t = find_slot(&m->slots[NB_PARAMS], name);
    if (!t) t = find_slot(&m->slots[NB_BUFFERS], name);
    return t ? t : find_slot(&m->attrs, name);
}

/* ---- registration -------------------------------------------------------- */

/* PyTorch's rules for attribute names: non-empty, no '.', not taken by a
 * parameter, buffer or child of the same module. */
static nb_status check_name(nb_module *m, const char *op, const char *name) {
    if (!name || !name[0]) return nb_set_error(NB_ERR_INVALID_ARG, "%s: name must be non-empty", op);
    if (strchr(name, '.'))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: name can't contain \".\" (got \"%s\")", op, name);
    if (nb_module_get(m, name) || direct_child(m, name, strlen(name)))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: \"%s\" already exists in %s", op, name,
                            m->ops->kind);
    return NB_OK;
}

static nb_status slot_push(nb_slots *s, const char *op, const char *name, nb_tensor *t) {
    if (s->len == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        nb_slot *n = realloc(s->items, sizeof *n * (size_t)cap);
        if (!n) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
        s->items = n, s->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", op);
    s->items[s->len++] = (nb_slot){copy, t};
    return NB_OK;
}

/* Takes the caller's reference to t in every case: on failure it is
 * released. */
static nb_status register_slot(nb_module *m, int kind, const char *name, nb_tensor *t) {
    const char *op = kind == NB_PARAMS ? "register_parameter" : "register_buffer";
    nb_status st = NB_OK;
    if (!m) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: module is NULL", op);
    else if (!t) st = nb_set_error(NB_ERR_INVALID_ARG, "%s: tensor \"%s\" is NULL", op, name ? name : "");
    else st = check_name(m, op, name);
    if (!st && kind == NB_PARAMS) {
        char buf[NB_SHAPE_BUF];
        if (!nb_dtype_is_float(nb_dtype_of(t)))
            st = nb_set_error(NB_ERR_DTYPE, "%s: \"%s\" %s: parameters must be float", op, name,
                              nb_shape_str(t, buf, sizeof buf));
        else if (!nb_is_leaf(t))
            st = nb_set_error(NB_ERR_INVALID_ARG, "%s: \"%s\" is not a leaf tensor", op, name);
        else st = nb_set_requires_grad(t, true);
    }
    if (!st) st = slot_push(&m->slots[kind], op, name, t);
    if (st) {
        nb_release(t);
        return st;
    }
    invalidate(m);
    return NB_OK;
}

/* The public forms keep the caller's reference untouched: the module
 * takes one of its own (the ownership rule of nb_core.h). */
nb_status nb_module_register_parameter(nb_module *m, const char *name, nb_tensor *t) {
    nb_retain(t);
    return register_slot(m, NB_PARAMS, name, t);
}

nb_status nb_module_register_buffer(nb_module *m, const char *name, nb_tensor *t) {
    nb_retain(t);
    return register_slot(m, NB_BUFFERS, name, t);
}

nb_status nb_module_adopt_parameter(nb_module *m, const char *name, nb_tensor *t) {
    return register_slot(m, NB_PARAMS, name, t);
}

nb_status nb_module_adopt_buffer(nb_module *m, const char *name, nb_tensor *t) {
    return register_slot(m, NB_BUFFERS, name, t);
}

nb_status nb_module_set_attribute(nb_module *m, const char *name, nb_tensor *t) {
    if (no_module("set_attribute", m)) return nb_last_status();
    nb_status st = t ? check_name(m, "set_attribute", name) : nb_set_error(NB_ERR_INVALID_ARG, "set_attribute: NULL tensor");
    if (st == NB_OK) st = slot_push(&m->attrs, "set_attribute", name, t);
    if (st == NB_OK) nb_retain(t);
    return st;
}

void nb_module_drop_attribute(nb_module *m, const char *name) {
    for (int i = 0; m && name && i < m->attrs.len; i++)
        if (!strcmp(m->attrs.items[i].name, name)) {
            free(m->attrs.items[i].name);
            nb_release(m->attrs.items[i].tensor);
            memmove(m->attrs.items + i, m->attrs.items + i + 1, sizeof *m->attrs.items * (size_t)(m->attrs.len - i - 1));
            m->attrs.len--;
            return;
        }
}

nb_tensor *nb_module_take_parameter(nb_module *m, const char *name) {
    if (no_module("take_parameter", m)) return NULL;
    nb_slots *s = &m->slots[NB_PARAMS];
    for (int i = 0; name && i < s->len; i++)
        if (!strcmp(s->items[i].name, name)) {
            nb_tensor *t = s->items[i].tensor;
            free(s->items[i].name);
            memmove(s->items + i, s->items + i + 1, sizeof *s->items * (size_t)(s->len - i - 1));
            s->len--;
            invalidate(m);
            return t;
        }
    return NB_FAIL(NB_ERR_INVALID_ARG, "take_parameter: %s has no parameter \"%s\"", m->ops->kind, name ? name : "");
}

static bool is_ancestor_or_self(const nb_module *a, const nb_module *m) {
    for (; m; m = m->parent)
        if (m == a) return true;
    return false;
}

/* Takes ownership of child, freeing it on failure, unless it already
 * belongs to a tree (then that tree keeps it). */
nb_status nb_module_add(nb_module *parent, const char *name, nb_module *child) {
    nb_status st = NB_OK;
    if (!child) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "module_add: child is NULL");
        return nb_last_status(); /* keep the constructor's error */
    }
    if (child->parent || (parent && is_ancestor_or_self(child, parent)))
        return nb_set_error(NB_ERR_INVALID_ARG, "module_add: \"%s\" already belongs to a module tree",
                            name ? name : "");
    if (!parent) st = nb_set_error(NB_ERR_INVALID_ARG, "module_add: parent is NULL");
    else st = check_name(parent, "module_add", name);
    if (!st && parent->n_children == parent->cap_children) {
        int cap = parent->cap_children ? 2 * parent->cap_children : 4;
        nb_child *n = realloc(parent->children, sizeof *n * (size_t)cap);
        if (!n) st = nb_set_error(NB_ERR_OOM, "module_add: out of host memory");
        else parent->children = n, parent->cap_children = cap;
    }
    char *copy = st ? NULL : strdup(name);
    if (!st && !copy) st = nb_set_error(NB_ERR_OOM, "module_add: out of host memory");
    if (st) {
        module_free_tree(child);
        return st;
    }
    parent->children[parent->n_children++] = (nb_child){copy, child};
    child->parent = parent;
    invalidate(parent);
    return NB_OK;
}

/* ---- dotted-name lists ----------------------------------------------------- */

static bool listed(const nb_named_tensor *items, int len, const nb_tensor *t) {
    for (int i = 0; i < len; i++)
        if (items[i].tensor == t) return true;
    return false;
}

static void add_entry(nb_name_cache *c, char **pos, const char *prefix, const char *name,
                      nb_tensor *t) {
    if (listed(c->items, c->len, t)) return; /* shared tensors once, as PyTorch */
    char *s = *pos;
    if (prefix) s += sprintf(s, "%s.", prefix);
    s += sprintf(s, "%s", name) + 1;
    c->items[c->len++] = (nb_named_tensor){*pos, t};
    *pos = s;
}

/* Rebuilds m's list of kind from its own slots and its children's lists:
 * own entries first, then each child's subtree (named_parameters' order). */
static nb_status cache_build(nb_module *m, int kind) {
    nb_name_cache *c = &m->cache[kind];
    if (c->valid) return NB_OK;
    size_t n = (size_t)m->slots[kind].len, chars = 0;
    for (int i = 0; i < m->slots[kind].len; i++) chars += strlen(m->slots[kind].items[i].name) + 1;
    for (int i = 0; i < m->n_children; i++) {
        nb_name_cache *cc = &m->children[i].module->cache[kind];
        nb_status st = cache_build(m->children[i].module, kind);
        if (st) return st;
        n += (size_t)cc->len;
        for (int j = 0; j < cc->len; j++)
            chars += strlen(m->children[i].name) + 1 + strlen(cc->items[j].name) + 1;
    }
    cache_clear(c);
    c->items = malloc(sizeof *c->items * (n ? n : 1));
    c->chars = malloc(chars ? chars : 1);
    if (!c->items || !c->chars) {
        cache_clear(c);
        return nb_set_error(NB_ERR_OOM, "module_parameters: out of host memory");
    }
    char *pos = c->chars;
    for (int i = 0; i < m->slots[kind].len; i++)
        add_entry(c, &pos, NULL, m->slots[kind].items[i].name, m->slots[kind].items[i].tensor);
    for (int i = 0; i < m->n_children; i++) {
        nb_name_cache *cc = &m->children[i].module->cache[kind];
        for (int j = 0; j < cc->len; j++)
            add_entry(c, &pos, m->children[i].name, cc->items[j].name, cc->items[j].tensor);
    }
    c->valid = true;
    return NB_OK;
}

static int list_named(nb_module *m, int kind, nb_named_tensor *out, int cap) {
    if (!m) {
        nb_set_error(NB_ERR_INVALID_ARG, "%s: module is NULL",
                     kind == NB_PARAMS ? "module_parameters" : "module_buffers");
        return -1;
    }
    if (cache_build(m, kind)) return -1;
    const nb_name_cache *c = &m->cache[kind];
    for (int i = 0; out && i < c->len && i < cap; i++) out[i] = c->items[i];
    return c->len;
}

int nb_module_parameters(nb_module *m, nb_named_tensor *out, int cap) {
    return list_named(m, NB_PARAMS, out, cap);
}

nb_tensor **nb_module_parameter_list(nb_module *m, int *n) {
    if (!m || !n) return NB_FAIL(NB_ERR_INVALID_ARG, "module_parameter_list: %s is NULL", m ? "n" : "module");
    int count = list_named(m, NB_PARAMS, NULL, 0);
    if (count < 0) return NULL;
    nb_tensor **out = malloc(sizeof *out * (size_t)(count > 0 ? count : 1));
    if (!out) return NB_FAIL(NB_ERR_OOM, "module_parameter_list: out of host memory for %d tensors", count);
    for (int i = 0; i < count; i++) out[i] = m->cache[NB_PARAMS].items[i].tensor;
    *n = count;
    return out;
}

int nb_module_buffers(nb_module *m, nb_named_tensor *out, int cap) {
    return list_named(m, NB_BUFFERS, out, cap);
}

int64_t nb_module_num_params(nb_module *m) {
    if (list_named(m, NB_PARAMS, NULL, 0) < 0) return -1;
    int64_t total = 0;
    for (int i = 0; i < m->cache[NB_PARAMS].len; i++) total += nb_numel(m->cache[NB_PARAMS].items[i].tensor);
    return total;
}

void nb_module_zero_grad(nb_module *m) {
    if (list_named(m, NB_PARAMS, NULL, 0) < 0) return;
    if (m->n_flat) { /* one fill per flat gradient buffer */
        for (int i = 0; i < m->n_flat; i++) nb_fill_(m->gflat[i], 0);
        return;
    }
    for (int i = 0; i < m->cache[NB_PARAMS].len; i++) nb_tensor_zero_grad(m->cache[NB_PARAMS].items[i].tensor);
}

/* ---- flat parameter buffers ---------------------------------------------------- */

#define NB_FLAT_ALIGN 64 /* elements: each parameter starts 256-byte aligned in float32 */

static nb_status flatten_group(nb_module *m, nb_named_tensor *ps, int n, nb_dtype dt, nb_device dev,
                               int64_t pad_multiple) {
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        if (nb_dtype_of(ps[i].tensor) == dt && nb_device_of(ps[i].tensor).type == dev.type &&
            nb_device_of(ps[i].tensor).index == dev.index)
            total += (nb_numel(ps[i].tensor) + NB_FLAT_ALIGN - 1) / NB_FLAT_ALIGN * NB_FLAT_ALIGN;
    total = (total + pad_multiple - 1) / pad_multiple * pad_multiple;
    nb_tensor *flat = nb_tensor_new_unscoped(1, &total, dt, dev), *gflat = nb_tensor_new_unscoped(1, &total, dt, dev);
    nb_status st = flat && gflat ? nb_fill_(flat, 0) : nb_last_status();
    if (!st) st = nb_fill_(gflat, 0);
    int64_t off = 0;
    for (int i = 0; i < n && !st; i++) {
        nb_tensor *p = ps[i].tensor;
        if (nb_dtype_of(p) != dt || nb_device_of(p).type != dev.type || nb_device_of(p).index != dev.index) continue;
        st = nb_tensor_rebase(p, flat, off);
        nb_tensor *g = st ? NULL : nb_tensor_view_of(gflat, nb_dim(p), nb_shape(p), NULL, off);
        if (!st && !g) st = nb_last_status();
        if (!st && nb_tensor_grad(p)) st = nb_copy_(g, nb_tensor_grad(p)); /* a gradient present carries over */
        if (!st) st = nb_tensor_set_grad(p, g, true); /* p takes its own reference (the view is scoped) */
        off += (nb_numel(p) + NB_FLAT_ALIGN - 1) / NB_FLAT_ALIGN * NB_FLAT_ALIGN;
    }
    if (st) {
        nb_release(flat), nb_release(gflat);
        return st;
    }
    m->flat[m->n_flat] = flat, m->gflat[m->n_flat] = gflat;
    m->n_flat++;
    return NB_OK;
}

nb_status nb_module_flatten_parameters(nb_module *m) { return nb_module_flatten_parameters_ex(m, 1); }

nb_status nb_module_flatten_parameters_ex(nb_module *m, int64_t pad_multiple) {
    if (pad_multiple < 1)
        return nb_set_error(NB_ERR_INVALID_ARG, "module_flatten_parameters: pad_multiple %lld < 1", (long long)pad_multiple);
    int n = list_named(m, NB_PARAMS, NULL, 0);
    if (n < 0) return nb_last_status();
    if (m->n_flat) return NB_OK; /* already flat */
    if (m->parent)
        return nb_set_error(NB_ERR_INVALID_ARG, "module_flatten_parameters: flatten the root module, not a child");
    nb_named_tensor *ps = malloc(sizeof *ps * (size_t)(n ? n : 1));
    if (!ps) return nb_set_error(NB_ERR_OOM, "module_flatten_parameters: out of host memory");
    int k = 0; /* distinct tensors (a tied weight appears once) */
    for (int i = 0; i < n; i++) {
        nb_tensor *t = m->cache[NB_PARAMS].items[i].tensor;
        bool seen = false;
        for (int j = 0; j < k && !seen; j++) seen = ps[j].tensor == t;
        if (!seen) ps[k++] = m->cache[NB_PARAMS].items[i];
    }
    nb_status st = NB_OK;
    for (int i = 0; i < k && !st; i++)
        if (!nb_is_contiguous(ps[i].tensor))
            st = nb_set_error(NB_ERR_INVALID_ARG, "module_flatten_parameters: parameter %s is not contiguous", ps[i].name);
    nb_scope *s = st ? NULL : nb_op_scope_begin();
    for (int i = 0; i < k && !st; i++) { /* one group per (dtype, device), in first-seen order */
        nb_tensor *p = ps[i].tensor;
        bool done = false;
        for (int g = 0; g < m->n_flat && !done; g++)
            done = nb_dtype_of(m->flat[g]) == nb_dtype_of(p) && nb_device_of(m->flat[g]).type == nb_device_of(p).type &&
                   nb_device_of(m->flat[g]).index == nb_device_of(p).index;
        if (done) continue;
        if (m->n_flat == NB_FLAT_MAX)
            st = nb_set_error(NB_ERR_UNSUPPORTED, "module_flatten_parameters: more than %d (dtype, device) groups",
                              NB_FLAT_MAX);
        else st = flatten_group(m, ps, k, nb_dtype_of(p), nb_device_of(p), pad_multiple);
    }
    if (s) nb_scope_end(s);
    free(ps);
    return st;
}

int nb_module_flat_buffers(nb_module *m, nb_tensor **params, nb_tensor **grads, int cap) {
    if (!m) return nb_set_error(NB_ERR_INVALID_ARG, "module_flat_buffers: module is NULL"), -1;
    for (int i = 0; i < m->n_flat && i < cap; i++) {
        if (params) params[i] = m->flat[i];
        if (grads) grads[i] = m->gflat[i];
    }
    return m->n_flat;
}
