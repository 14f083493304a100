/* fuzz_data_files.c - libFuzzer target for the data readers: the first
 * byte picks one (.npy, .npz, PNG/JPEG, an llm.c token shard, CSV, IDX),
 * the rest is the file. Any bytes must load or fail with an error, never
 * crash, hang, leak or read out of bounds. Built and run by
 * tests/fuzz/run.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "nabla.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

static bool write_file(const uint8_t *p, size_t n) {
    if (!path[0]) snprintf(path, sizeof path, "/tmp/nb_fuzz_data.%ld", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* A reader that failed must say why. */
static void failed(bool ok) {
    if (!ok && !nb_last_error()[0]) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int kind = data[0] % 6;
    data++, size--;
    nb_scope *s = nb_scope_begin();
    if (kind == 2) { /* images decode from memory */
        nb_tensor *t = nb_image_decode(data, size, "fuzz", NB_IMAGE_UNCHANGED);
        failed(t != NULL);
        if (t) failed(nb_image_transform(t, &(nb_image_transforms){.resize = {7, 5}, .normalize = true}, NULL) != NULL);
    } else if (write_file(data, size)) {
        if (kind == 0) {
            failed(nb_npy_load(path) != NULL);
            nb_tensor *m = nb_npy_load_mmap(path);
            if (m) (void)nb_sum(m, NULL, 0, false); /* touch every element */
            else failed(false);
        } else if (kind == 1) {
            nb_npz *z = nb_npz_load(path);
            failed(z != NULL);
            nb_npz_free(z);
        } else if (kind == 3) {
            nb_token_shard *t = nb_token_shard_open(path);
            failed(t != NULL);
            int64_t tok[8], n = nb_token_shard_len(t);
            if (t) failed(nb_token_shard_read(t, n > 8 ? n - 8 : 0, n > 8 ? 8 : n, tok) == NB_OK);
            nb_token_shard_close(t);
        } else if (kind == 4) {
            failed(nb_csv_load(path, (nb_csv_options){.skip_rows = size % 2}) != NULL);
            failed(nb_csv_load(path, (nb_csv_options){.delimiter = ' ', .dtype = NB_I64,
                                                      .usecols = (int64_t[]){1, 0}, .n_usecols = 2}) != NULL);
        } else {
            nb_idx idx = {0};
            failed(nb_idx_read(path, &idx) == NB_OK);
            nb_idx_free(&idx);
        }
    }
    nb_scope_end(s);
    nb_clear_error();
    return 0;
}
