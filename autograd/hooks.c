/* hooks.c - tensor gradient hooks (Tensor.register_hook), post-accumulate-
 * grad hooks (Tensor.register_post_accumulate_grad_hook) and anomaly mode
 * (torch.autograd.set_detect_anomaly). A leaf keeps its hooks on the
 * tensor; an op result's hooks live on its node (one list for the node's
 * outputs, each entry naming its output), where the engine finds them when
 * the node's gradient is complete. Tests: tests/test_autograd_hooks.c. */
#include <stdatomic.h>
#include <string.h>

#include "nb_autograd_impl.h"

static atomic_llong next_hook_id = 1;
static atomic_bool anomaly_on;

void nb_tensor_hooks_free(struct nb_tensor_hooks *h) {
    if (!h) return;
    free(h->v);
    free(h);
}

static int64_t add_hook(struct nb_tensor_hooks **list, nb_hook k) {
    nb_tape_register();
    if (!*list && !(*list = nb_host_calloc(1, sizeof **list))) {
        nb_set_error(NB_ERR_OOM, "register_hook: out of host memory");
        return -1;
    }
    struct nb_tensor_hooks *h = *list;
    if (h->len == h->cap) {
        int cap = h->cap ? 2 * h->cap : 4;
        nb_hook *v = realloc(h->v, sizeof *v * (size_t)cap);
        if (!v) {
            nb_set_error(NB_ERR_OOM, "register_hook: out of host memory");
            return -1;
        }
        h->v = v, h->cap = cap;
    }
    k.id = atomic_fetch_add(&next_hook_id, 1);
    h->v[h->len++] = k;
    return k.id;
}

int64_t nb_register_hook(nb_tensor *t, nb_grad_hook_fn fn, void *user) {
    if (!t || !fn) {
        nb_set_error(NB_ERR_INVALID_ARG, "register_hook: NULL %s", t ? "hook" : "tensor");
        return -1;
    }
    if (!t->requires_grad) {
        nb_set_error(NB_ERR_STATE, "register_hook: cannot register a hook on a tensor that does not require grad");
        return -1;
    }
    nb_hook k = {.kind = NB_HOOK_GRAD, .output_nr = t->output_nr, .fn.grad = fn, .user = user};
    if (!t->grad_fn) return add_hook(&t->hooks, k);
    nb_node_ext *e = nb_node_ext_get(t->grad_fn);
    return e ? add_hook(&e->hooks, k) : -1;
}

int64_t nb_register_post_accumulate_grad_hook(nb_tensor *t, nb_post_accumulate_grad_hook_fn fn, void *user) {
    if (!t || !fn) {
        nb_set_error(NB_ERR_INVALID_ARG, "register_post_accumulate_grad_hook: NULL %s", t ? "hook" : "tensor");
        return -1;
    }
    if (!t->requires_grad || t->grad_fn) {
        nb_set_error(NB_ERR_STATE, "register_post_accumulate_grad_hook: only leaf tensors that require grad "
                                   "accumulate a .grad (got %s)", t->grad_fn ? "an op result" : "a tensor without grad");
        return -1;
    }
    return add_hook(&t->hooks, (nb_hook){.kind = NB_HOOK_POST_ACCUMULATE, .fn.post = fn, .user = user});
}

nb_status nb_remove_hook(nb_tensor *t, int64_t handle) {
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "remove_hook: NULL tensor");
    struct nb_tensor_hooks *h = t->grad_fn ? (t->grad_fn->ext ? t->grad_fn->ext->hooks : NULL) : t->hooks;
    for (int i = 0; h && i < h->len; i++)
        if (h->v[i].id == handle) {
            memmove(&h->v[i], &h->v[i + 1], sizeof *h->v * (size_t)(h->len - i - 1));
            h->len--;
            return NB_OK;
        }
    return nb_set_error(NB_ERR_INVALID_ARG, "remove_hook: the tensor has no hook with handle %lld", (long long)handle);
}

/* A hook's failure keeps its own message, or gets one. */
static nb_status hook_failed(nb_status st, const char *what) {
    if (nb_last_status() == NB_OK || !nb_last_error()[0])
        return nb_set_error(st, "backward: %s failed (status %s)", what, nb_status_str(st));
    return st;
}

nb_status nb_hooks_run_grad(struct nb_tensor_hooks *h, int out_nr, nb_tensor **g, const char *what) {
    for (int i = 0; i < h->len; i++) { /* len is read each time: a hook may remove itself */
        nb_hook k = h->v[i];
        if (k.kind != NB_HOOK_GRAD || k.output_nr != out_nr) continue;
        nb_tensor *r = NULL;
        nb_clear_error();
        nb_status st = k.fn.grad(*g, &r, k.user);
        if (st != NB_OK) return hook_failed(st, what);
        if (!r) continue;
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        if (r->ndim != (*g)->ndim || memcmp(r->shape, (*g)->shape, sizeof(int64_t) * (size_t)r->ndim) ||
            r->dtype != (*g)->dtype)
            return nb_set_error(NB_ERR_SHAPE, "backward: %s returned %s %s for a gradient of %s %s", what,
                                nb_fmt_shape(r->ndim, r->shape, a, sizeof a), nb_dtype_name(r->dtype),
                                nb_fmt_shape((*g)->ndim, (*g)->shape, b, sizeof b), nb_dtype_name((*g)->dtype));
        *g = r;
    }
    return NB_OK;
}

nb_status nb_hooks_run_post(nb_tensor *leaf) {
    struct nb_tensor_hooks *h = leaf->hooks;
    for (int i = 0; h && i < h->len; i++) {
        nb_hook k = h->v[i];
        if (k.kind != NB_HOOK_POST_ACCUMULATE) continue;
        nb_clear_error();
        nb_status st = k.fn.post(leaf, k.user);
        if (st != NB_OK) return hook_failed(st, "a post-accumulate-grad hook");
    }
    return NB_OK;
}

/* ---- anomaly mode -------------------------------------------------------------- */

void nb_set_detect_anomaly(bool enabled) { atomic_store(&anomaly_on, enabled); }
bool nb_is_anomaly_enabled(void) { return atomic_load(&anomaly_on); }
bool nb_anomaly_enabled(void) { return atomic_load_explicit(&anomaly_on, memory_order_relaxed); }

bool nb_anomaly_nonfinite(int n, nb_tensor *const *ts) {
    bool bad = false;
    nb_status keep = nb_last_status();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", nb_last_error());
    nb_scope *s = nb_op_scope_begin();
    NB_NO_GRAD {
        for (int i = 0; i < n && !bad; i++) {
            nb_tensor *t = ts[i];
            if (!t || !nb_dtype_is_float(t->dtype) || nb_numel(t) == 0) continue;
            nb_tensor *ok = nb_all(nb_isfinite(t), NULL, 0, false);
            bad = ok && nb_item(ok) == 0;
        }
    }
    nb_scope_end(s);
    if (keep != NB_OK) nb_set_error(keep, "%s", msg); /* the check leaves the caller's error as it was */
    else nb_clear_error();
    return bad;
}

nb_status nb_anomaly_check(const nb_tensor *t, const char *what) {
    nb_tensor *x = (nb_tensor *)t;
    if (!nb_anomaly_nonfinite(1, &x)) return NB_OK;
    char a[NB_SHAPE_BUF];
    return nb_set_error(NB_ERR_ANOMALY, "anomaly: %s (%s %s) holds NaN or inf", what,
                        nb_fmt_shape(t->ndim, t->shape, a, sizeof a), nb_dtype_name(t->dtype));
}
