/* fuzz_pt.c - libFuzzer target for PyTorch checkpoints (nb_pt_load): the
 * first byte picks the form. Even: the rest is a whole file (the zip
 * reader's paths). Odd: the rest is data.pkl, wrapped here in a valid
 * archive with four storages (data/0..3, 64 bytes each, CRCs right), so
 * mutations reach the restricted unpickler and the tensor rebuilds instead
 * of failing a CRC. Any bytes must load or fail with an error, never
 * crash, hang, leak or read out of bounds. Built and run by
 * tests/fuzz/run.sh. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "nabla.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];
static uint8_t buf[1 << 16];

static void le(uint8_t **p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) *(*p)++ = (uint8_t)(v >> (8 * i));
}

/* A stored zip of the records (name, bytes) into buf; its length. */
static size_t archive(const char *const *names, const uint8_t *const *bodies, const size_t *lens, int n) {
    uint8_t *p = buf;
    uint32_t off[8], crc[8];
    for (int i = 0; i < n; i++) {
        off[i] = (uint32_t)(p - buf), crc[i] = (uint32_t)crc32(0, bodies[i], (uInt)lens[i]);
        size_t nl = strlen(names[i]);
        le(&p, 0x04034b50, 4), le(&p, 20, 2), le(&p, 0, 2), le(&p, 0, 2), le(&p, 0, 2), le(&p, 0x21, 2);
        le(&p, crc[i], 4), le(&p, lens[i], 4), le(&p, lens[i], 4), le(&p, nl, 2), le(&p, 0, 2);
        memcpy(p, names[i], nl), p += nl;
        memcpy(p, bodies[i], lens[i]), p += lens[i];
    }
    uint32_t cd = (uint32_t)(p - buf);
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(names[i]);
        le(&p, 0x02014b50, 4), le(&p, 20, 2), le(&p, 20, 2), le(&p, 0, 2), le(&p, 0, 2), le(&p, 0, 2), le(&p, 0x21, 2);
        le(&p, crc[i], 4), le(&p, lens[i], 4), le(&p, lens[i], 4), le(&p, nl, 2), le(&p, 0, 2), le(&p, 0, 2);
        le(&p, 0, 2), le(&p, 0, 2), le(&p, 0, 4), le(&p, off[i], 4);
        memcpy(p, names[i], nl), p += nl;
    }
    uint32_t cds = (uint32_t)(p - buf) - cd;
    le(&p, 0x06054b50, 4), le(&p, 0, 4), le(&p, (uint64_t)n, 2), le(&p, (uint64_t)n, 2), le(&p, cds, 4), le(&p, cd, 4), le(&p, 0, 2);
    return (size_t)(p - buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 8192) return 0;
    bool wrap = data[0] & 1;
    data++, size--;
    if (!path[0]) snprintf(path, sizeof path, "/tmp/nb_fuzz_pt.%ld", (long)getpid());
    const uint8_t *file = data;
    size_t len = size;
    if (wrap) {
        static uint8_t st[64];
        for (int i = 0; i < 64; i++) st[i] = (uint8_t)(i * 7);
        const char *names[] = {"archive/data.pkl", "archive/data/0", "archive/data/1", "archive/data/2",
                               "archive/data/3", "archive/version"};
        const uint8_t *bodies[] = {data, st, st, st, st, (const uint8_t *)"3\n"};
        size_t lens[] = {size, 64, 64, 64, 64, 2};
        len = archive(names, bodies, lens, 6);
        file = buf;
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    bool ok = fwrite(file, 1, len, f) == len;
    if (fclose(f) || !ok) return 0;
    nb_scope *s = nb_scope_begin();
    nb_pt *pt = nb_pt_load(path);
    if (!pt && !nb_last_error()[0]) __builtin_trap(); /* a failure must say why */
    for (int i = 0; pt && i < pt->n; i++)
        if (pt->entries[i].kind == NB_PT_TENSOR) (void)nb_sum(pt->entries[i].tensor, NULL, 0, false); /* touch it */
    nb_pt_free(pt);
    nb_scope_end(s);
    return 0;
}
