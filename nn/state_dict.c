/* state_dict.c - a module's state_dict (parameters then buffers by dotted
 * name) saved to safetensors files and loaded from safetensors or
 * PyTorch's .pt files (nb_weights_open tells them apart by content). Loading matches keys
 * by name as PyTorch's load_state_dict: it first classifies every key
 * (missing, unexpected, shape mismatch), decides, and only then copies, so
 * a rejected load never leaves a half-loaded model.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_data.h"
#include "nb_extension.h"
#include "nn_impl.h"

nb_status nb_weights_open(const char *path, nb_weights *w) {
    memset(w, 0, sizeof *w);
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "load_state_dict: NULL path");
    unsigned char magic[262] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f) fclose(f);
    /* torch.save's zip, or its legacy forms (a bare pickle, a tar) that nb_pt_load refuses by name */
    if ((got >= 4 && !memcmp(magic, "PK\x03\x04", 4)) || (got >= 2 && magic[0] == 0x80 && magic[1] <= 5) ||
        (got == sizeof magic && !memcmp(magic + 257, "ustar", 5))) {
        if (!(w->pt = nb_pt_load(path))) return nb_last_status();
        if ((w->n = nb_pt_state_dict(w->pt, NULL, &w->owned)) < 0) {
            nb_weights_close(w);
            return nb_last_status();
        }
        w->tensors = w->owned;
        return NB_OK;
    }
    if (!(w->st = nb_safetensors_load(path))) return nb_last_status();
    w->tensors = w->st->tensors, w->n = w->st->n_tensors;
    return NB_OK;
}

void nb_weights_close(nb_weights *w) {
    nb_safetensors_free(w->st), nb_pt_free(w->pt), free(w->owned);
    memset(w, 0, sizeof *w);
}

int nb_module_state_dict(nb_module *m, nb_named_tensor **out) {
    if (!m || !out) return nb_set_error(NB_ERR_INVALID_ARG, "state_dict: NULL module or output"), -1;
    int np = nb_module_parameters(m, NULL, 0), nbuf = nb_module_buffers(m, NULL, 0);
    if (np < 0 || nbuf < 0) return -1;
    *out = malloc(sizeof **out * (size_t)(np + nbuf ? np + nbuf : 1));
    if (!*out) return nb_set_error(NB_ERR_OOM, "state_dict: out of host memory"), -1;
    nb_module_parameters(m, *out, np);
    nb_module_buffers(m, *out + np, nbuf);
    return np + nbuf;
}

nb_status nb_module_state_dict_save(nb_module *m, const char *path) {
    nb_named_tensor *sd = NULL;
    int n = nb_module_state_dict(m, &sd);
    if (n < 0) return nb_last_status();
    const nb_st_pair meta[] = {{"format", "pt"}};
    nb_status st = nb_safetensors_save(path, sd, n, meta, 1);
    free(sd);
    return st;
}

/* ---- the load report --------------------------------------------------------- */

void nb_load_report_free(nb_load_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n_missing; i++) free(r->missing[i]);
    for (int i = 0; i < r->n_unexpected; i++) free(r->unexpected[i]);
    for (int i = 0; i < r->n_mismatched; i++) free(r->mismatched[i]);
    free(r->missing), free(r->unexpected), free(r->mismatched);
    memset(r, 0, sizeof *r);
}

/* Appends a printf-formatted string to a list (lists are sized by the caller). */
static nb_status list_add(char **list, int *n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!(list[*n] = strdup(buf))) return nb_set_error(NB_ERR_OOM, "load_state_dict: out of host memory");
    (*n)++;
    return NB_OK;
}

/* "2 missing keys (a, b, ...)" into buf at *len, for the error message;
 * what is the singular, plural the plural ("size mismatch", "size mismatches"). */
static void describe(char *buf, size_t cap, size_t *len, const char *what, const char *plural, char **items, int n) {
    if (n == 0 || *len + 1 >= cap) return;
    *len += (size_t)snprintf(buf + *len, cap - *len, "%s%d %s (", *len ? "; " : "", n, n == 1 ? what : plural);
    for (int i = 0; i < n && *len + 1 < cap; i++) {
        if (*len + strlen(items[i]) + 8 >= cap) {
            *len += (size_t)snprintf(buf + *len, cap - *len, "...");
            break;
        }
        *len += (size_t)snprintf(buf + *len, cap - *len, "%s%s", i ? ", " : "", items[i]);
    }
    if (*len + 1 < cap) *len += (size_t)snprintf(buf + *len, cap - *len, ")");
    if (*len >= cap) *len = cap - 1;
}

static const nb_named_tensor *find_named(const nb_named_tensor *ts, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (ts[i].name && !strcmp(ts[i].name, name)) return &ts[i];
    return NULL;
}

static bool same_shape(const nb_tensor *a, const nb_tensor *b) {
    return nb_dim(a) == nb_dim(b) && !memcmp(nb_shape(a), nb_shape(b), sizeof(int64_t) * (size_t)nb_dim(a));
}

/* Sorts every key into the report's three lists. */
static nb_status classify(const nb_named_tensor *sd, int nsd, const nb_named_tensor *ts, int n, nb_load_report *r) {
    r->missing = calloc((size_t)nsd + 1, sizeof(char *));
    r->mismatched = calloc((size_t)nsd + 1, sizeof(char *));
    r->unexpected = calloc((size_t)n + 1, sizeof(char *));
    if (!r->missing || !r->mismatched || !r->unexpected)
        return nb_set_error(NB_ERR_OOM, "load_state_dict: out of host memory");
    nb_status st = NB_OK;
    for (int i = 0; i < nsd && !st; i++) {
        const nb_named_tensor *src = find_named(ts, n, sd[i].name);
        char a[NB_SHAPE_BUF], b[NB_SHAPE_BUF];
        if (!src || !src->tensor) st = list_add(r->missing, &r->n_missing, "%s", sd[i].name);
        else if (!same_shape(src->tensor, sd[i].tensor))
            st = list_add(r->mismatched, &r->n_mismatched, "%s: file %s, model %s", sd[i].name,
                          nb_shape_str(src->tensor, a, sizeof a), nb_shape_str(sd[i].tensor, b, sizeof b));
    }
    for (int i = 0; i < n && !st; i++)
        if (ts[i].name && !find_named(sd, nsd, ts[i].name))
            st = list_add(r->unexpected, &r->n_unexpected, "%s", ts[i].name);
    return st;
}

/* Copies src into dst (same shape) across dtype and device. */
static nb_status copy_into(nb_tensor *dst, nb_tensor *src) {
    nb_device dd = nb_device_of(dst), sd = nb_device_of(src);
    if (dd.type == sd.type && dd.index == sd.index) return nb_copy_(dst, src);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *moved = nb_to_device(src, dd);
    nb_status st = moved ? nb_copy_(dst, moved) : nb_last_status();
    nb_scope_end(s);
    return st;
}

nb_status nb_module_load_tensors(nb_module *m, const nb_named_tensor *ts, int n, bool strict, nb_load_report *report) {
    nb_load_report local = {0}, *r = report ? report : &local;
    memset(r, 0, sizeof *r);
    if (!m || n < 0 || (n > 0 && !ts))
        return nb_set_error(NB_ERR_INVALID_ARG, "load_state_dict: NULL module or tensor list");
    nb_named_tensor *sd = NULL;
    int nsd = nb_module_state_dict(m, &sd);
    if (nsd < 0) return nb_last_status();
    nb_status st = classify(sd, nsd, ts, n, r);
    if (!st && (r->n_mismatched || (strict && (r->n_missing || r->n_unexpected)))) {
        char msg[900];
        size_t len = 0;
        msg[0] = 0;
        describe(msg, sizeof msg, &len, "size mismatch", "size mismatches", r->mismatched, r->n_mismatched);
        if (strict) {
            describe(msg, sizeof msg, &len, "missing key", "missing keys", r->missing, r->n_missing);
            describe(msg, sizeof msg, &len, "unexpected key", "unexpected keys", r->unexpected, r->n_unexpected);
        }
        st = nb_set_error(r->n_mismatched ? NB_ERR_SHAPE : NB_ERR_FORMAT, "load_state_dict: %s", msg);
    }
    for (int i = 0; i < nsd && !st; i++) {
        const nb_named_tensor *src = find_named(ts, n, sd[i].name);
        if (src && src->tensor) st = copy_into(sd[i].tensor, src->tensor);
    }
    free(sd);
    if (!report) nb_load_report_free(&local);
    return st;
}

nb_status nb_module_load_state_dict(nb_module *m, const char *path, bool strict, nb_load_report *report) {
    if (report) memset(report, 0, sizeof *report);
    if (!m) return nb_set_error(NB_ERR_INVALID_ARG, "load_state_dict: module is NULL");
    nb_weights w;
    nb_status st = nb_weights_open(path, &w);
    if (!st) st = nb_module_load_tensors(m, w.tensors, w.n, strict, report);
    nb_weights_close(&w);
    return st;
}
