/* nb_data.h - datasets, a batching data loader, and an MNIST/IDX reader.
 *
 *   nb_dataset *train;
 *   if (nb_mnist_load(NULL, true, (nb_mnist_options){0}, &train))  // x [60000,1,28,28]
 *       fprintf(stderr, "%s\n", nb_last_error());                 // "... run data/fetch_mnist.sh"
 *   nb_loader *ld = nb_loader_new(train, (nb_loader_options){.batch_size = 64,
 *                                                            .shuffle = true, .seed = 1});
 *   for (int epoch = 0; epoch < 10; epoch++, nb_loader_reset(ld)) {
 *       nb_batch b;
 *       while (nb_loader_next(ld, &b)) {      // b.x [64,1,28,28] float32, b.y [64] int64
 *           nb_scope *s = nb_scope_begin();
 *           ... forward(b.x), loss(b.y), backward, step ...
 *           nb_scope_end(s);
 *       }
 *   }
 *   nb_loader_free(ld);
 *   nb_dataset_free(train);
 *
 * Ownership: a dataset holds its own references to its tensors; there is
 * no host copy (the loader gathers each batch from those tensors on their
 * device with nb_index_select_out, so no batch crosses from the host). A
 * loader borrows its dataset, which must outlive it. Batch tensors belong to
 * the loader: never release them; they are overwritten by the next
 * nb_loader_next.
 *
 * Determinism: the order of epoch e is a fixed function of (seed, e),
 * computed with Philox (core/philox.h), so it is the same on every run, with
 * or without prefetch, on any number of threads, and can be recomputed to
 * resume training at (epoch, batch) with nb_loader_seek.
 */
#ifndef NB_DATA_H
#define NB_DATA_H

#include "nb_core.h"
#include "nb_safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- IDX files (LeCun's MNIST format) -------------------------------------
 * Layout (http://yann.lecun.com/exdb/mnist/): bytes 0,1 = 0; byte 2 = type
 * (0x08 = unsigned byte, the only type read here); byte 3 = ndim; then ndim
 * big-endian uint32 sizes; then the data in C order. A file may be raw or
 * gzip-compressed (detected from its contents, not its name). */

/* Largest data payload accepted from an IDX header, so a corrupt header can
 * never ask for an unbounded allocation. */
#define NB_IDX_MAX_BYTES ((uint64_t)2 << 30) /* 2 GiB */

/* An IDX file's contents on the host. */
typedef struct nb_idx {
    int ndim;                     /* 1..NB_MAX_DIMS */
    int64_t shape[NB_MAX_DIMS];   /* every size >= 1 */
    uint8_t *data;                /* bytes, C order; owned, freed by nb_idx_free */
    size_t bytes;                 /* product of shape */
} nb_idx;

/* Reads a ubyte IDX file (raw or .gz) into *out, which the caller frees with
 * nb_idx_free. The file must hold exactly the bytes its header declares.
 * Errors (the message names the file and the problem; *out is left empty):
 *   NB_ERR_INVALID_ARG  path or out is NULL
 *   NB_ERR_IO           the file cannot be opened or read (missing, a directory)
 *   NB_ERR_FORMAT       bad magic, type other than 0x08, ndim 0 or > NB_MAX_DIMS,
 *                       a zero size, more than NB_IDX_MAX_BYTES declared,
 *                       truncated header or data, trailing bytes (after the
 *                       declared data, or after the gzip stream), corrupt gzip
 *                       (a failed CRC-32 is named as such)
 *   NB_ERR_OOM          the data buffer could not be allocated
 * Memory: the buffer grows as the data arrives, so a file whose header
 * claims more than its stream holds never makes it allocate the claim.
 * Concatenated gzip members read as one stream (as gunzip). */
nb_status nb_idx_read(const char *path, nb_idx *out);
/* Frees the data of an nb_idx and empties it; NULL or an empty one is ignored. */
void nb_idx_free(nb_idx *idx);

/* Reads a ubyte IDX file (raw or .gz) into a new uint8 tensor of the file's
 * shape on the default device (ownership as any new tensor, nb_core.h).
 * Errors: as nb_idx_read; returns NULL. */
nb_tensor *nb_idx_load(const char *path);

/* ---- NumPy files (.npy, .npz) ------------------------------------------
 * numpy.save / numpy.load / numpy.savez (format: numpy/lib/format.py).
 * NumPy's types load as nabla dtypes: bool, uint8, int32, int64, float16,
 * float32, float64 as they are; int8 and int16 widen to int32, uint16 to
 * int32, uint32 and uint64 to int64 (a uint64 above INT64_MAX fails);
 * big-endian data is byte-swapped; Fortran-order arrays load C-ordered
 * with the same values. Other types (complex, strings, objects,
 * structured arrays) fail with NB_ERR_DTYPE naming them. Files are written
 * as NumPy 1.24 writes them (format 1.0, little-endian, C order; a .npy
 * byte for byte) and atomically (a temporary file beside path, renamed
 * over it: a failed write leaves the old file). bfloat16 has no NumPy type
 * (NB_ERR_DTYPE: cast it first). */

/* Largest .npy header accepted (NumPy's own limit is 10,000 bytes). */
#define NB_NPY_MAX_HEADER ((size_t)1 << 20)

/* numpy.load of a .npy: a new contiguous tensor on the default device.
 * The file must hold exactly the header and the data its shape and type
 * need. Errors (NULL returned): NB_ERR_INVALID_ARG (NULL path), NB_ERR_IO
 * (cannot open or read), NB_ERR_FORMAT (no magic, a version other than
 * 1.0-3.0, a header that is not a dict of 'descr', 'fortran_order' and
 * 'shape' or is longer than NB_NPY_MAX_HEADER, a data size that differs
 * from the shape's), NB_ERR_DTYPE (above), NB_ERR_OOM. */
nb_tensor *nb_npy_load(const char *path);
/* numpy.load(path, mmap_mode='c'): a CPU tensor over the file mapped
 * copy-on-write (pages are read when touched; writes through the tensor
 * stay in this process, the file never changes). The mapping lives until
 * the last tensor or view of it is released. Only data nabla reads as it
 * is: little-endian bool-free types of nabla's widths (uint8, int32,
 * int64, float16, float32, float64) in C order; other files fail with
 * NB_ERR_UNSUPPORTED (nb_npy_load converts them). Errors: as nb_npy_load,
 * NB_ERR_UNSUPPORTED. */
nb_tensor *nb_npy_load_mmap(const char *path);
/* numpy.save: t (any device, any strides; read to the host) to path.
 * Errors: NB_ERR_INVALID_ARG (NULL), NB_ERR_DTYPE (bfloat16), NB_ERR_IO,
 * NB_ERR_OOM (the file is built in host memory). */
nb_status nb_npy_save(const char *path, nb_tensor *t);

/* A loaded .npz: its .npy members in archive order, by name without
 * ".npy" (numpy's NpzFile keys; other members are skipped). Names and one
 * reference to each tensor (new, contiguous, on the default device, no
 * scope owns them; nb_retain one to keep it past the file) are owned by
 * the file and freed by nb_npz_free. */
typedef struct nb_npz {
    int n;
    nb_named_tensor *arrays;
} nb_npz;
/* numpy.load of an .npz (numpy.savez or savez_compressed; zip64 too):
 * every .npy member, stored or deflated, its CRC-32 checked. Errors (NULL
 * returned): NB_ERR_INVALID_ARG, NB_ERR_IO, NB_ERR_FORMAT (not a zip, a
 * directory or header past the file, a bad CRC, corrupt deflate data, a
 * member claiming more than deflate can expand to, two members of one
 * name, a bad member as nb_npy_load), NB_ERR_UNSUPPORTED (encrypted
 * members, methods other than stored and deflate), NB_ERR_DTYPE,
 * NB_ERR_OOM. */
nb_npz *nb_npz_load(const char *path);
/* The array named name (borrowed from f), or NULL (no error set; NULL f
 * or name set NB_ERR_INVALID_ARG unless an error is pending). */
nb_tensor *nb_npz_get(const nb_npz *f, const char *name);
/* NULL is ignored. */
void nb_npz_free(nb_npz *f);
/* numpy.savez (compressed: numpy.savez_compressed, deflate at zlib's
 * default level): n arrays as members "<name>.npy" in the given order, no
 * timestamps (equal arrays give equal files); zip64 records where sizes
 * or offsets pass 4 GiB. Errors: NB_ERR_INVALID_ARG (NULL path, n < 0, a
 * NULL or empty or repeated name, a NULL tensor), NB_ERR_DTYPE
 * (bfloat16), NB_ERR_UNSUPPORTED (a compressed member above 1 GiB),
 * NB_ERR_IO, NB_ERR_OOM (the archive is built in host memory). */
nb_status nb_npz_save(const char *path, const nb_named_tensor *arrays, int n, bool compressed);

/* ---- datasets --------------------------------------------------------- */

/* A tensor dataset (torch.utils.data.TensorDataset): sample i is
 * (x[i], y[i]). */
typedef struct nb_dataset nb_dataset;

/* A dataset of inputs x [N, ...] and targets y [N, ...] (class indices
 * [N] int64 for nb_cross_entropy, or regression targets, masks, ...) of any
 * dtypes, on one device. Takes its own references to x and y (the caller
 * keeps theirs); a non-contiguous one is copied once to a contiguous tensor
 * on its device. The loader gathers batches from these tensors: there is
 * no host copy of the data.
 * Errors: NULL input (first error kept), NB_ERR_SHAPE (x or y 0-dim, N
 * differs), NB_ERR_DEVICE (x and y on different devices), NB_ERR_OOM. */
nb_dataset *nb_dataset_from_tensors(nb_tensor *x, nb_tensor *y);
/* NULL is ignored. Releases the dataset's references to x and y. */
void nb_dataset_free(nb_dataset *ds);
/* N, the number of samples. */
int64_t nb_dataset_len(const nb_dataset *ds);
/* The whole inputs [N, ...] / targets [N, ...]; borrowed (valid while the
 * dataset lives; nb_retain to keep longer). */
nb_tensor *nb_dataset_x(const nb_dataset *ds);
nb_tensor *nb_dataset_y(const nb_dataset *ds);

/* ---- MNIST ----------------------------------------------------------- */

/* How pixels (bytes 0..255) become float32 inputs. */
typedef enum nb_mnist_transform {
    /* (p/255 - 0.1307) / 0.3081: ToTensor then Normalize((0.1307,), (0.3081,))
     * as in PyTorch's examples/mnist/main.py (the training set's mean and
     * std), computed in float32 in that order, as torchvision does. Default. */
    NB_MNIST_NORMALIZE = 0,
    NB_MNIST_UNIT, /* p/255 in [0, 1] (ToTensor alone) */
} nb_mnist_transform;

/* Options of nb_mnist_load; (nb_mnist_options){0} gives the defaults. */
typedef struct nb_mnist_options {
    bool flatten;                 /* x [N, 784] instead of [N, 1, 28, 28] (default false) */
    nb_mnist_transform transform; /* default NB_MNIST_NORMALIZE */
    int64_t limit;                /* > 0: keep only the first `limit` samples; 0: all */
} nb_mnist_options;

/* Writes the directory nb_mnist_load(NULL, ...) searches into buf:
 * $NB_MNIST_DIR if set and non-empty, else $XDG_CACHE_HOME/nabla/mnist,
 * else $HOME/.cache/nabla/mnist (where data/fetch_mnist.sh puts the files).
 * Errors: NB_ERR_INVALID_ARG (buf NULL or too short, no HOME). */
nb_status nb_mnist_default_dir(char *buf, size_t len);

/* Loads the MNIST training set (train = true: train-images-idx3-ubyte and
 * train-labels-idx1-ubyte, 60000 samples) or test set (t10k-*, 10000) from
 * dir, each file raw or with a ".gz" suffix; dir NULL means
 * nb_mnist_default_dir. On success *out is a new dataset (free it with
 * nb_dataset_free) with x [N, 1, 28, 28] (or [N, 784]) float32 on the
 * default device and y [N] int64 labels in 0..9.
 * Errors (*out set to NULL):
 *   NB_ERR_INVALID_ARG  out NULL, limit < 0
 *   NB_ERR_IO           a file is missing (the message says to run
 *                       data/fetch_mnist.sh) or unreadable
 *   NB_ERR_FORMAT       a corrupt file (see nb_idx_read), images not
 *                       [N, 28, 28], labels not [N] or not in 0..9, image
 *                       and label counts that differ
 *   NB_ERR_OOM */
nb_status nb_mnist_load(const char *dir, bool train, nb_mnist_options opts, nb_dataset **out);

/* ---- data loader ------------------------------------------------------ */

typedef struct nb_loader nb_loader;

/* Options of nb_loader_new, torch.utils.data.DataLoader's names; a field
 * left 0 takes PyTorch's default. */
typedef struct nb_loader_options {
    int64_t batch_size; /* >= 1; default 1 (left 0) */
    bool shuffle;       /* a new permutation every epoch (else dataset order) */
    uint64_t seed;      /* the shuffle's Philox key */
    bool drop_last;     /* drop a final batch smaller than batch_size */
    bool prefetch;      /* CPU: gather the next batch on a background thread
                           while the caller trains on this one (the loader
                           alternates between two sets of batch tensors). On
                           a GPU the gather is already an asynchronous kernel
                           on the current stream, so it changes nothing. The
                           batches are identical either way */
    bool pin_memory;    /* accepted for PyTorch's DataLoader; changes nothing:
                           batches are gathered on the dataset's device from
                           its tensors, so none is uploaded from the host */
    /* torch.utils.data.DistributedSampler: with num_replicas > 1 this
       loader visits only rank's shard of each epoch. Every rank draws the
       same order of all N rows from (seed, epoch), pads it to a multiple
       of num_replicas by repeating it from its start, and takes every
       num_replicas-th row from `rank` on: ceil(N / num_replicas) rows per
       rank, disjoint across ranks but for the padding, reshuffled every
       epoch (nb_loader_reset / nb_loader_seek play set_epoch). Batch k of
       all ranks together is batch k of one loader with batch_size *
       num_replicas. 0 or 1: the whole dataset. nb_process_group_rank and
       _size (nb_distributed.h) give the values. */
    int num_replicas;
    int rank;           /* in [0, num_replicas) */
} nb_loader_options;

/* One batch. The tensors are owned by the loader and valid until the next
 * nb_loader_next, nb_loader_reset, nb_loader_seek or nb_loader_free on the
 * same loader: do not release them (nb_retain one to keep it, but its
 * contents will still be overwritten by later batches; with prefetch on the
 * CPU the loader alternates between two sets of tensors). */
typedef struct nb_batch {
    nb_tensor *x;           /* [size, ...] rows of the dataset's x (its dtype and device) */
    nb_tensor *y;           /* [size, ...] rows of its y */
    int64_t size;           /* batch_size, or less for a final short batch */
    int64_t index;          /* this batch's number in the epoch, from 0 */
    const int64_t *indices; /* the dataset rows in this batch (size entries); borrowed */
} nb_batch;

/* A loader over ds (borrowed: it must outlive the loader), at epoch 0,
 * batch 0. Errors: NULL ds, NB_ERR_INVALID_ARG (batch_size < 1), NB_ERR_OOM.
 * If the prefetch thread cannot be started the loader silently works
 * without it (same batches). */
nb_loader *nb_loader_new(nb_dataset *ds, nb_loader_options opts);
/* Joins the prefetch thread and releases the batch tensors; NULL is ignored. */
void nb_loader_free(nb_loader *l);

/* Fills *b with the next batch of the current epoch and returns true; returns
 * false at the end of the epoch (b zeroed; call nb_loader_reset to start
 * the next one) or on failure: then nb_loader_status(l) is not NB_OK and
 * nb_last_error() says why (e.g. NB_ERR_OOM creating a batch tensor). */
bool nb_loader_next(nb_loader *l, nb_batch *b);
/* NB_OK, or the status of the last failed nb_loader_next/seek. */
nb_status nb_loader_status(const nb_loader *l);
/* Starts the next epoch (epoch + 1, batch 0), also when called mid-epoch. */
void nb_loader_reset(nb_loader *l);
/* Positions the loader at batch `batch` of epoch `epoch`, exactly where a
 * loader that ran from the start would be (to resume training).
 * Errors: NB_ERR_INVALID_ARG (epoch < 0, batch < 0 or > num_batches). */
nb_status nb_loader_seek(nb_loader *l, int64_t epoch, int64_t batch);
/* Batches per epoch: ceil(N / batch_size), or floor with drop_last (N: the
 * rows of this loader's shard when sharded). */
int64_t nb_loader_num_batches(const nb_loader *l);
/* The current epoch, from 0 (incremented by nb_loader_reset). */
int64_t nb_loader_epoch(const nb_loader *l);
/* The options the loader was made with (its shuffle seed, batch size...). */
nb_loader_options nb_loader_get_options(const nb_loader *l);
/* Batches already returned in the current epoch. */
int64_t nb_loader_position(const nb_loader *l);

#ifdef __cplusplus
}
#endif
#endif
