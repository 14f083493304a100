/* containers.c - torch.nn's holders: ModuleList, ModuleDict, ParameterList,
 * ParameterDict (no forward, as PyTorch's: they only hold, and their
 * entries' names are the state_dict keys "0.weight", "blocks.0", "proj.w")
 * and Identity (returns its inputs). Sequential is sequential.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_extension.h"
#include "nn_impl.h"

static int no_forward(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)n_in, (void)in, (void)max_out, (void)out;
    return nb_set_error(NB_ERR_INVALID_ARG, "%s: has no forward (it only holds %s)", nb_module_kind(m),
                        strstr(nb_module_kind(m), "Parameter") ? "parameters" : "modules"), -1;
}

/* ParameterList's ctx: the number of entries appended (the next name; a
 * parameter appended twice is two entries, as PyTorch's len()). */
typedef struct plist_ctx {
    int64_t n;
} plist_ctx;

static const nb_module_ops module_list_ops = {"ModuleList", NULL, NULL, no_forward};
static const nb_module_ops module_dict_ops = {"ModuleDict", NULL, NULL, no_forward};
static const nb_module_ops parameter_list_ops = {"ParameterList", NULL, free, no_forward};
static const nb_module_ops parameter_dict_ops = {"ParameterDict", NULL, NULL, no_forward};

nb_module *nb_nn_module_list(void) { return nb_module_new(&module_list_ops, NULL); }

nb_status nb_nn_module_list_append(nb_module *list, nb_module *child) {
    if (!list || nb_module_kind(list) != module_list_ops.kind) { /* the kind string's address: ours only */
        nb_module_free(child);
        return nb_set_error(NB_ERR_INVALID_ARG, "module_list_append: %s is not a ModuleList",
                            list ? nb_module_kind(list) : "NULL");
    }
    char name[24];
    snprintf(name, sizeof name, "%d", nb_module_num_children(list));
    return nb_module_add(list, name, child);
}

nb_module *nb_nn_module_list_array(nb_module *const *children, int n) {
    if (n < 0 || (n > 0 && !children)) return NB_FAIL(NB_ERR_INVALID_ARG, "module_list: bad child list (n = %d)", n);
    int failed = -1;
    for (int i = 0; i < n; i++)
        if (!children[i]) failed = i;
    nb_module *list = failed < 0 ? nb_nn_module_list() : NULL;
    nb_status st = list ? NB_OK : NB_ERR_OOM;
    for (int i = 0; i < n; i++) {
        if (!st) st = nb_nn_module_list_append(list, children[i]); /* frees the child on failure */
        else nb_module_free(children[i]);
    }
    if (failed >= 0 && nb_last_status() == NB_OK) /* keep the failed constructor's error */
        nb_set_error(NB_ERR_INVALID_ARG, "module_list: child %d is NULL", failed);
    if (st) {
        nb_module_free(list);
        return NULL;
    }
    return list;
}

nb_module *nb_nn_module_dict(void) { return nb_module_new(&module_dict_ops, NULL); }

nb_module *nb_nn_parameter_list(void) {
    plist_ctx *c = calloc(1, sizeof *c);
    if (!c) return NB_FAIL(NB_ERR_OOM, "ParameterList: out of host memory");
    return nb_module_new(&parameter_list_ops, c); /* frees c on failure */
}

nb_status nb_nn_parameter_list_append(nb_module *list, nb_tensor *p) {
    if (!list || nb_module_kind(list) != parameter_list_ops.kind) /* the kind string's address: ours only */
        return nb_set_error(NB_ERR_INVALID_ARG, "parameter_list_append: %s is not a ParameterList",
                            list ? nb_module_kind(list) : "NULL");
    plist_ctx *c = nb_module_ctx(list);
    char name[24];
    snprintf(name, sizeof name, "%lld", (long long)c->n);
    nb_status st = nb_module_register_parameter(list, name, p);
    if (!st) c->n++;
    return st;
}

nb_module *nb_nn_parameter_dict(void) { return nb_module_new(&parameter_dict_ops, NULL); }

/* ---- Identity ----------------------------------------------------------------- */

static int identity_forward(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)max_out;
    if (n_in < 1)
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: takes at least 1 input", nb_module_kind(m)), -1;
    for (int i = 0; i < n_in; i++) {
        if (in[i]) continue;
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "Identity: input %d is NULL", i);
        return -1;
    }
    for (int i = 0; i < n_in; i++) out[i] = in[i];
    return n_in;
}

static nb_tensor *identity_forward1(nb_module *m, nb_tensor *x) {
    (void)m;
    return x;
}

static const nb_module_ops identity_ops = {"Identity", identity_forward1, NULL, identity_forward};

nb_module *nb_nn_identity(void) { return nb_module_new(&identity_ops, NULL); }
