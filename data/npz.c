/* npz.c - NumPy's .npz archives (numpy.savez, savez_compressed and
 * numpy.load of them): a zip file (zip.c; zip64 where sizes or offsets pass
 * 4 GiB, as Python's zipfile writes them) of .npy members, stored or
 * deflated. Members are read from the central directory (numpy's members
 * carry their sizes after the data), each CRC-32 checked. */
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "nb_data.h"
#include "nb_extension.h"
#include "npy_impl.h"
#include "zip_impl.h"

/* ---- reading ----------------------------------------------------------------------------------- */

void nb_npz_free(nb_npz *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free((char *)f->arrays[i].name), nb_release(f->arrays[i].tensor);
    free(f->arrays);
    free(f);
}

/* Loads every .npy member of the archive buf into f (numpy.load lists
 * them by name without ".npy"; other members it gives as bytes: skipped). */
static nb_status load_members(const uint8_t *buf, size_t len, const char *path, nb_npz *f) {
    zip_member *ms;
    size_t nm;
    nb_status st = zip_read_dir(buf, len, "npz", path, &ms, &nm, NULL);
    if (st) return st;
    f->arrays = calloc(nm ? nm : 1, sizeof *f->arrays);
    if (!f->arrays) st = nb_set_error(NB_ERR_OOM, "npz: %s: out of host memory", path);
    for (size_t k = 0; !st && k < nm; k++) { /* in the directory's order */
        const zip_member *m = &ms[k];
        if (m->name_len < 4 || memcmp(m->name + m->name_len - 4, ".npy", 4)) continue;
        char *key = malloc(m->name_len - 3);
        if (!key) {
            st = nb_set_error(NB_ERR_OOM, "npz: %s: out of host memory", path);
            break;
        }
        memcpy(key, m->name, m->name_len - 4), key[m->name_len - 4] = 0;
        uint8_t *owned;
        const uint8_t *data = zip_member_data(buf, len, m, "npz", path, &owned);
        char label[512];
        snprintf(label, sizeof label, "%s[%s]", path, key);
        nb_scope *s = nb_op_scope_begin();
        nb_tensor *t = data ? npy_tensor_from_bytes(data, (size_t)m->usize, label) : NULL;
        if (t) nb_retain(t); /* the file's own reference, past the scope */
        nb_scope_end(s);
        free(owned);
        if (!t) {
            free(key);
            st = nb_last_status();
            break;
        }
        f->arrays[f->n].name = key, f->arrays[f->n].tensor = t, f->n++;
    }
    free(ms);
    return st;
}

nb_npz *nb_npz_load(const char *path) {
    if (!path) return NB_FAIL(NB_ERR_INVALID_ARG, "npz_load: NULL path");
    size_t len;
    uint8_t *buf = nb_data_read_file("npz_load", path, &len);
    if (!buf) return NULL;
    nb_npz *f = calloc(1, sizeof *f);
    nb_status st = f ? load_members(buf, len, path, f) : nb_set_error(NB_ERR_OOM, "npz_load: out of host memory");
    free(buf);
    if (st) {
        nb_npz_free(f);
        return NULL;
    }
    return f;
}

nb_tensor *nb_npz_get(const nb_npz *f, const char *name) {
    if (!f || !name) {
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "npz_get: NULL %s", f ? "name" : "file");
        return NULL;
    }
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->arrays[i].name, name)) return f->arrays[i].tensor;
    return NULL;
}

/* ---- writing ----------------------------------------------------------------------------------- */

static nb_status check_names(const nb_named_tensor *arrays, int n) {
    if (n < 0 || (n && !arrays)) return nb_set_error(NB_ERR_INVALID_ARG, "npz_save: %d arrays", n);
    for (int i = 0; i < n; i++) {
        if (!arrays[i].name || !arrays[i].name[0] || !arrays[i].tensor || strlen(arrays[i].name) > 60000)
            return nb_set_error(NB_ERR_INVALID_ARG, "npz_save: array %d: NULL or empty name, or NULL tensor", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(arrays[i].name, arrays[j].name))
                return nb_set_error(NB_ERR_INVALID_ARG, "npz_save: two arrays named %s", arrays[i].name);
    }
    return NB_OK;
}

nb_status nb_npz_save(const char *path, const nb_named_tensor *arrays, int n, bool compressed) {
    const char *op = "npz_save";
    if (!path) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL path", op);
    nb_status st = check_names(arrays, n);
    if (st) return st;
    zip_writer z = {.op = op};
    for (int i = 0; i < n && !z.st; i++) {
        size_t len, nlen = strlen(arrays[i].name);
        uint8_t *npy = npy_encode(op, arrays[i].tensor, &len);
        char *name = npy ? malloc(nlen + 5) : NULL;
        if (!name) {
            free(npy);
            z.st = npy ? nb_set_error(NB_ERR_OOM, "%s: out of host memory", op) : nb_last_status();
            break;
        }
        memcpy(name, arrays[i].name, nlen), memcpy(name + nlen, ".npy", 5);
        zip_writer_add(&z, name, npy, len, compressed, 0);
        free(name), free(npy);
    }
    return zip_writer_finish(&z, path);
}
