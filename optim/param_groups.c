/* param_groups.c - the weight-decay / no-decay split of BERT recipes
 * (Devlin et al. 2019's optimizer setup; Hugging Face Trainer's
 * get_decay_parameter_names): biases and the parameters of normalisation
 * layers take no weight decay.
 */
#include <stdlib.h>
#include <string.h>

#include "optim_impl.h"

/* The module that owns the parameter named path ("enc.0.ln.weight" ->
 * child enc, its child 0, its child ln), or NULL. */
static nb_module *owner_of(nb_module *m, const char *path) {
    char part[256];
    const char *p = path;
    for (const char *dot; m && (dot = strchr(p, '.')); p = dot + 1) {
        size_t len = (size_t)(dot - p);
        if (len >= sizeof part) return NULL;
        memcpy(part, p, len);
        part[len] = 0;
        m = nb_module_child(m, part);
    }
    return m;
}

static bool takes_no_decay(nb_module *root, const char *name) {
    const char *last = strrchr(name, '.');
    if (!strcmp(last ? last + 1 : name, "bias")) return true;
    nb_module *owner = owner_of(root, name);
    const char *kind = owner ? nb_module_kind(owner) : NULL;
    return kind && strstr(kind, "Norm") != NULL;
}

nb_status nb_decay_split_module(nb_module *m, nb_decay_split *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!m || !out) return nb_set_error(NB_ERR_INVALID_ARG, "decay_split_module: NULL module or output");
    int n = nb_module_parameters(m, NULL, 0);
    if (n < 0) return nb_last_status();
    nb_named_tensor *named = malloc(sizeof *named * ((size_t)n + 1));
    out->decay = malloc(sizeof *out->decay * ((size_t)n + 1));
    out->no_decay = malloc(sizeof *out->no_decay * ((size_t)n + 1));
    if (!named || !out->decay || !out->no_decay) {
        free(named);
        nb_decay_split_free(out);
        return nb_set_error(NB_ERR_OOM, "decay_split_module: out of host memory");
    }
    nb_module_parameters(m, named, n);
    for (int i = 0; i < n; i++) {
        if (takes_no_decay(m, named[i].name)) out->no_decay[out->n_no_decay++] = named[i].tensor;
        else out->decay[out->n_decay++] = named[i].tensor;
    }
    free(named);
    return NB_OK;
}

void nb_decay_split_free(nb_decay_split *s) {
    if (!s) return;
    free(s->decay);
    free(s->no_decay);
    memset(s, 0, sizeof *s);
}
