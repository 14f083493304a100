/* containers.c - torch.nn's holders: ModuleList, ModuleDict, ParameterList,
 * ParameterDict (no forward, as PyTorch's: they only hold, and their
 * entries' names are the state_dict keys "0.weight", "blocks.0", "proj.w")
 * and Identity (returns its inputs). Sequential is sequential.c.
 */
#include <stdio.h>

#include "nb_extension.h"
#include "nn_impl.h"

static int no_forward(nb_module *m, int n_in, nb_tensor *const *in, int max_out, nb_tensor **out) {
    (void)n_in, (void)in, (void)max_out, (void)out;
    return nb_set_error(NB_ERR_INVALID_ARG, "%s: has no forward (it only holds %s)", nb_module_kind(m),
                        nb_module_ctx(m) ? "parameters" : "modules"), -1;
}

/* The parameter holders' ctx: tells them from a user kind of the same name
 * (the module holders are told by their ops). */
static char plist_marker, pdict_marker;

static const nb_module_ops module_list_ops = {"ModuleList", NULL, NULL, no_forward};
static const nb_module_ops module_dict_ops = {"ModuleDict", NULL, NULL, no_forward};
static const nb_module_ops parameter_list_ops = {"ParameterList", NULL, NULL, no_forward};
static const nb_module_ops parameter_dict_ops = {"ParameterDict", NULL, NULL, no_forward};

static bool is_kind(nb_module *m, const void *marker) { return m && nb_module_ctx(m) == marker; }

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

nb_module *nb_nn_parameter_list(void) { return nb_module_new(&parameter_list_ops, &plist_marker); }

nb_status nb_nn_parameter_list_append(nb_module *list, nb_tensor *p) {
    if (!is_kind(list, &plist_marker))
        return nb_set_error(NB_ERR_INVALID_ARG, "parameter_list_append: %s is not a ParameterList",
                            list ? nb_module_kind(list) : "NULL");
    char name[24];
    snprintf(name, sizeof name, "%d", nb_module_parameters(list, NULL, 0));
    return nb_module_register_parameter(list, name, p);
}

nb_module *nb_nn_parameter_dict(void) { return nb_module_new(&parameter_dict_ops, &pdict_marker); }

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
