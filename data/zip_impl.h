/* zip_impl.h - the zip container shared by .npz (npz.c) and PyTorch's .pt
 * (pt.c) (not installed): reading a whole archive held in memory, and
 * writing one into memory, then atomically to a file. PKWARE's APPNOTE.TXT:
 * local headers, the central directory, the end record, zip64 where sizes
 * or offsets pass 4 GiB (as Python's zipfile and PyTorch's miniz write
 * them); members stored or deflated (zlib), CRC-32 checked. */
#ifndef NB_ZIP_IMPL_H
#define NB_ZIP_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nb_core.h"

/* One member as the central directory gives it. */
typedef struct zip_member {
    const char *name; /* into the archive's bytes, not NUL-terminated */
    size_t name_len;
    int method;       /* 0 stored, 8 deflated */
    unsigned flags;
    uint32_t crc;
    uint64_t csize, usize; /* compressed and uncompressed sizes */
    uint64_t local;        /* offset of the local header */
    uint64_t start;        /* offset of the data (past the local header) */
} zip_member;

/* The central directory of the archive buf[0..len): every member, in the
 * directory's order, into *out (malloc'd; free it) and *n. Each member's
 * local header and data lie inside buf, no two members' data overlap and
 * no two names are equal (so the file's size bounds what the members
 * inflate to), no name holds a NUL byte. by_name (may be NULL) receives
 * pointers into *out sorted by name (malloc'd; free it), the order the
 * duplicate check sorts them in, for zip_find. Messages start "<fmt>:
 * <path>:". Errors: NB_ERR_FORMAT, NB_ERR_OOM. */
nb_status zip_read_dir(const uint8_t *buf, size_t len, const char *fmt, const char *path, zip_member **out,
                       size_t *n, zip_member ***by_name);
/* The member named name (len bytes) among by_name[0..n) (zip_read_dir's), or NULL. */
const zip_member *zip_find(zip_member *const *by_name, size_t n, const char *name, size_t len);
/* The bytes of member m: a pointer into buf for a stored member, else
 * inflated into *owned (malloc'd: the caller frees it; NULL for stored),
 * CRC-32 checked. NULL with NB_ERR_FORMAT, NB_ERR_UNSUPPORTED (encrypted,
 * another method) or NB_ERR_OOM. */
const uint8_t *zip_member_data(const uint8_t *buf, size_t len, const zip_member *m, const char *fmt,
                               const char *path, uint8_t **owned);
/* The CRC-32 of data[0..len) (zlib's; lengths past 4 GiB fed in pieces). */
uint32_t zip_crc32(const void *data, size_t len);

/* An archive being built in memory: members added in order, then written
 * by zip_writer_finish. A failure is kept and reported there. */
typedef struct zip_writer {
    uint8_t *buf;
    size_t len, cap;
    struct zip_written *w; /* per member: what the central directory repeats */
    size_t n, n_cap;
    nb_status st;
    const char *op; /* the caller's name, for messages */
} zip_writer;

/* Adds member `name` holding data[0..len): stored, or raw-deflated at
 * zlib's default level (as zipfile.ZIP_DEFLATED). align > 1 pads the local
 * header's extra field (an "FB" field, as PyTorch's writer does) so the
 * data starts at a multiple of align in the file. */
void zip_writer_add(zip_writer *z, const char *name, const void *data, size_t len, bool deflated, unsigned align);
/* Ends the archive (central directory, zip64 records where needed) and
 * writes it to path through nb_write_file_atomic, unless an add failed;
 * frees z's memory either way. Returns the first failure. */
nb_status zip_writer_finish(zip_writer *z, const char *path);
/* Frees z's memory without writing. */
void zip_writer_free(zip_writer *z);

#endif
