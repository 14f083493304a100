/* sequential.c - nn.Sequential: applies its children in order. Children are
 * named "0", "1", ... so parameters read "0.weight", as in PyTorch's
 * state_dict. The forward runs in its own scope so that the intermediate
 * activations of a chain are not leaked when no scope is open; the tape
 * keeps what backward needs.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "nb_extension.h"
#include "nb_nn.h"

static nb_tensor *sequential_forward(nb_module *m, nb_tensor *x) {
    nb_scope *s = nb_op_scope_begin();
    if (!s) return NULL;
    nb_tensor *h = x;
    nb_module *child;
    for (int i = 0; h && (child = nb_module_child_at(m, i)); i++) h = nb_forward(child, h);
    nb_retain(h); /* one reference past the scope, handed to the caller's scope below */
    nb_scope_end(s);
    return nb_scope_adopt(h);
}

/* Several tensors: each child's outputs are the next one's inputs. */
static int sequential_forward_n(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    nb_scope *s = nb_op_scope_begin();
    if (!s) return -1;
    nb_tensor *h[NB_FORWARD_MAX];
    int n = n_in;
    for (int i = 0; i < n_in; i++) h[i] = in[i];
    nb_module *child;
    for (int i = 0; n >= 0 && (child = nb_module_child_at(m, i)); i++) {
        bool last = !nb_module_child_at(m, i + 1);
        int got = nb_forward_n(child, n, h, h, last ? max_out : NB_FORWARD_MAX); /* in is copied first */
        n = got;
    }
    int kept = n < 0 ? 0 : n < max_out ? n : max_out;
    for (int i = 0; i < kept; i++) nb_retain(h[i]); /* past the scope, handed to the caller's scope below */
    nb_scope_end(s);
    for (int i = 0; i < kept; i++) out[i] = nb_scope_adopt(h[i]);
    return n;
}

static const nb_module_ops sequential_ops = {"Sequential", sequential_forward, NULL, sequential_forward_n};
/* The ctx of every Sequential: tells a Sequential from a user kind of the same name. */
static char sequential_marker;

nb_status nb_nn_sequential_append(nb_module *seq, nb_module *child) {
    if (!seq || nb_module_ctx(seq) != &sequential_marker) {
        nb_module_free(child);
        return nb_set_error(NB_ERR_INVALID_ARG, "sequential_append: %s is not a Sequential",
                            seq ? nb_module_kind(seq) : "NULL");
    }
    char name[24];
    snprintf(name, sizeof name, "%d", nb_module_num_children(seq));
    return nb_module_add(seq, name, child);
}

/* Frees children[from..n) that are not NULL. */
static void free_rest(nb_module *const *children, int from, int n) {
    for (int i = from; i < n; i++) nb_module_free(children[i]);
}

nb_module *nb_nn_sequential_array(nb_module *const *children, int n) {
    if (n < 0 || (n > 0 && !children))
        return NB_FAIL(NB_ERR_INVALID_ARG, "sequential: bad child list (n = %d)", n);
    for (int i = 0; i < n; i++) {
        if (children[i]) continue;
        free_rest(children, 0, n);
        if (nb_last_status() == NB_OK) /* keep the failed constructor's error */
            nb_set_error(NB_ERR_INVALID_ARG, "sequential: child %d is NULL", i);
        return NULL;
    }
    nb_module *seq = nb_module_new(&sequential_ops, &sequential_marker);
    if (!seq) {
        free_rest(children, 0, n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (nb_nn_sequential_append(seq, children[i]) == NB_OK) continue;
        free_rest(children, i + 1, n); /* children[i] was freed by append */
        nb_module_free(seq);
        return NULL;
    }
    return seq;
}

/* The list ends at the first NULL, so a NULL from a failed constructor
 * cannot be told from the end marker: the children after it are not seen
 * (leaked), and a NULL first argument gives NULL (see nb_nn_sequential_array,
 * which has neither problem). */
nb_module *nb_nn_sequential_n(nb_module *first, ...) {
    enum { NB_SEQ_MAX = 256 };
    nb_module *children[NB_SEQ_MAX];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (nb_module *m = first; m; m = va_arg(ap, nb_module *)) {
        if (n == NB_SEQ_MAX) {
            for (; m; m = va_arg(ap, nb_module *)) nb_module_free(m);
            va_end(ap);
            free_rest(children, 0, n);
            return NB_FAIL(NB_ERR_INVALID_ARG, "sequential: more than %d children", NB_SEQ_MAX);
        }
        children[n++] = m;
    }
    va_end(ap);
    if (first == NULL) { /* nb_nn_sequential(failed_constructor(), ...) */
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "sequential: first child is NULL");
        return NULL;
    }
    return nb_nn_sequential_array(children, n);
}
