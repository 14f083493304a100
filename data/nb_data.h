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
 * NumPy's types load as nabla dtypes: bool, uint8, int8, int16, int32,
 * int64, float16, float32, float64 as they are; uint16 widens to int32, uint32 and uint64 to int64 (a uint64 above INT64_MAX fails);
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
 * is: little-endian bool-free types of nabla's widths (uint8, int8,
 * int16, int32, int64, float16, float32, float64) in C order; other files fail with
 * NB_ERR_UNSUPPORTED (nb_npy_load converts them). As any mapping, a file
 * truncated by another process while mapped faults (SIGBUS) when the lost
 * pages are touched. Errors: as nb_npy_load, NB_ERR_UNSUPPORTED. */
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
    int n;                   /* number of arrays (the .npy members), >= 0 */
    nb_named_tensor *arrays; /* [n] {name, tensor} in archive order; owned by the file */
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

/* ---- PyTorch checkpoints (.pt, .pth, .bin) ------------------------------
 * torch.load(path, weights_only=True, map_location='cpu') and torch.save of
 * a state_dict: PyTorch's zip format (torch >= 1.6: "<archive>/data.pkl", a
 * pickle, beside one "<archive>/data/<key>" record per storage). The pickle
 * runs through a restricted unpickler that accepts exactly the opcodes and
 * globals PyTorch's weights_only unpickler accepts by default
 * (torch/_weights_only_unpickler.py) and refuses any other global by name
 * (a file that names os.system fails with NB_ERR_FORMAT before anything is
 * called). Of what it allows, nabla builds dicts (OrderedDict, Counter),
 * lists, tuples, sets, None, bools, ints (64-bit), floats, complex
 * numbers, strings, bytes, torch.Size, torch.device and dtypes (as their
 * names), tensors (_rebuild_tensor, _v2, _v3) and nn.Parameter; sparse,
 * quantized, meta and subclassed tensors fail with NB_ERR_UNSUPPORTED and
 * dtypes nabla lacks (complex, float8, uint16) with NB_ERR_DTYPE. The
 * legacy formats (before torch 1.6: a bare pickle or a tar file) fail with
 * NB_ERR_UNSUPPORTED. */

/* What a checkpoint value is. */
typedef enum nb_pt_kind {
    NB_PT_TENSOR,  /* a tensor: entry.tensor */
    NB_PT_NONE,    /* None */
    NB_PT_BOOL,    /* entry.i is 0 or 1 */
    NB_PT_INT,     /* entry.i */
    NB_PT_FLOAT,   /* entry.f */
    NB_PT_COMPLEX, /* entry.f + entry.imag * 1j */
    NB_PT_STRING,  /* entry.s (UTF-8, len bytes, NUL-terminated): str, and torch.device, dtypes and layouts by name
                      ("cuda:0", "torch.float16") */
    NB_PT_BYTES    /* entry.s, len bytes (bytes, bytearray) */
} nb_pt_kind;

/* One leaf of a loaded checkpoint, named by its path through the nested
 * dicts, lists and tuples joined with dots, as state_dict keys are:
 * {"model": {"fc.weight": t}, "epoch": 3, "betas": (0.9, 0.999)} gives
 * "model.fc.weight", "epoch", "betas.0" and "betas.1" (a dict's int keys
 * in decimal). Empty containers give no entry. */
typedef struct nb_pt_entry {
    const char *name;   /* owned by the file */
    nb_pt_kind kind;    /* which of the fields below holds the value */
    nb_tensor *tensor;  /* NB_PT_TENSOR: a CPU tensor with the file's shape, strides and offset; tensors that shared
                           a storage in the file share one here (views); a reference owned by the file */
    int64_t i;          /* NB_PT_INT, NB_PT_BOOL */
    double f, imag;     /* NB_PT_FLOAT, NB_PT_COMPLEX */
    const char *s;      /* NB_PT_STRING, NB_PT_BYTES: owned by the file */
    size_t len;         /* bytes in s */
} nb_pt_entry;

/* A loaded checkpoint: its leaves in the pickle's order. */
typedef struct nb_pt {
    int n;                /* number of entries, >= 0 */
    nb_pt_entry *entries; /* [n] */
} nb_pt;

/* torch.load(path, weights_only=True, map_location='cpu'). The file is
 * mapped copy-on-write: a stored storage aligned to its element size (as
 * torch.save writes them) becomes the tensors' memory without a copy
 * (the mapping lives until the last tensor of it is released; its pages
 * stay the page cache's until written); others are copied. Every record
 * read is CRC-32 checked (so the load reads each storage once); a
 * big-endian file ("byteorder" record) is swapped. Errors (NULL
 * returned): NB_ERR_INVALID_ARG (NULL path), NB_ERR_IO, NB_ERR_FORMAT (not
 * a zip, a corrupt archive or pickle, a refused opcode or global, a
 * storage record missing or of the wrong size, a tensor reaching past its
 * storage, negative sizes or strides, two entries of one name, nesting
 * deeper than 64 levels or shared values that unfold past 16 times the
 * pickle's size), NB_ERR_UNSUPPORTED, NB_ERR_DTYPE (above), NB_ERR_OOM.
 * Unlike torch.load, a dict holding one key twice is refused (two entries
 * of one name) rather than keeping the last value. */
nb_pt *nb_pt_load(const char *path);
/* The tensor of entry `name` (borrowed from f), or NULL (no error set when
 * there is none; NULL f or name: NB_ERR_INVALID_ARG unless an error is
 * pending). */
nb_tensor *nb_pt_get(const nb_pt *f, const char *name);
/* The tensor entries under `prefix` as a state_dict: names with
 * "prefix." cut ("" or NULL: every tensor, names whole), for
 * nb_module_load_tensors. *out is malloc'd (free() it); its names and
 * tensors are borrowed from f. Returns the count, or -1 (NB_ERR_INVALID_ARG
 * for NULL f or out, NB_ERR_OOM). */
int nb_pt_state_dict(const nb_pt *f, const char *prefix, nb_named_tensor **out);
/* NULL is ignored. */
void nb_pt_free(nb_pt *f);
/* torch.save(state_dict, path): an OrderedDict of the n tensors by name,
 * in PyTorch's zip format (records "archive/data.pkl",
 * "archive/.format_version" = "1", "archive/.storage_alignment" = "64",
 * "archive/byteorder" = "little", "archive/data/<k>", "archive/version" =
 * "3", each stored and aligned to 64 bytes as torch.save aligns them) that torch.load reads
 * with weights_only=True (checked against torch 1.13 and 2.11). Tensors
 * may live on any device (read to the host; written with location "cpu")
 * and have any strides: those sharing a storage (views of one tensor,
 * tied weights) are saved as views of one storage, as torch.save does.
 * Written atomically (a failed write leaves the old file). Errors:
 * NB_ERR_INVALID_ARG (NULL path, n < 0, a NULL name or tensor, a repeated
 * name), NB_ERR_IO, NB_ERR_OOM (the archive is built in host memory), a
 * device copy's error. */
nb_status nb_pt_save(const char *path, const nb_named_tensor *tensors, int n);

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

/* A batching loader over an nb_dataset (torch.utils.data.DataLoader over a TensorDataset); nb_loader_new. */
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

/* ---- samples, map-style datasets, samplers, the DataLoader --------------
 * torch.utils.data for data of any shape:
 *
 *   static nb_status get_item(void *state, int64_t i, nb_generator *gen, nb_sample *out) {
 *       nb_tensor *img = load_image(state, i);                  // [3, H, W] float32, CPU
 *       if (!img) return nb_last_status();
 *       if (nb_item(nb_rand(NB_SHAPE(1), NB_F64, gen)) < 0.5) img = nb_flip(img, (int[]){2}, 1);
 *       nb_sample_set(out, "image", img);
 *       return nb_sample_set(out, "label", nb_scalar(label_of(state, i), NB_I64));
 *   }
 *   nb_map_dataset *ds = nb_map_dataset_new(n, get_item, state, NULL);
 *   nb_dataloader *dl = nb_dataloader_new(ds, (nb_dataloader_options){.batch_size = 64,
 *                                         .shuffle = true, .seed = 1, .num_workers = 4});
 *   nb_sample b;
 *   while (nb_dataloader_next(dl, &b)) {   // b: "image" [64, 3, H, W], "label" [64]
 *       ... nb_sample_get(&b, "image") ...
 *   }
 *   nb_dataloader_reset(dl);               // the next epoch
 *
 * Determinism: an epoch's indices are a pure function of (sampler options,
 * seed, epoch), and each sample's generator of (seed, epoch, index), so the
 * batches are bit for bit the same for any num_workers and prefetch_factor,
 * and nb_dataloader_seek resumes exactly. So an index drawn twice in one
 * epoch (sampling with replacement, a distributed sampler's padding) gets
 * the same random choices both times, and so do loaders sharing a seed
 * (PyTorch's workers draw from per-worker streams instead). With
 * num_workers 0 samples are made on the calling thread, inside its
 * autocast region if one is open: call nb_dataloader_next outside it (as
 * workers always are). */

/* The most named tensors an nb_sample holds. */
#define NB_SAMPLE_MAX_FIELDS 16

/* A sample or a batch: up to 16 named tensors (Python's dict of a
 * dataset's __getitem__). Names are not copied: literals, or strings that
 * live as long as the dataset. */
typedef struct nb_sample {
    int n;                                   /* fields set, 0..NB_SAMPLE_MAX_FIELDS ({0}: an empty sample) */
    const char *names[NB_SAMPLE_MAX_FIELDS]; /* names[0..n): the fields' names (borrowed, not copied) */
    nb_tensor *fields[NB_SAMPLE_MAX_FIELDS]; /* fields[0..n): the tensors, fields[i] named names[i] */
} nb_sample;
/* Sets field name to t (replacing one of that name). Errors:
 * NB_ERR_INVALID_ARG (NULL s, name or t (a failed op's result keeps its
 * error), more than NB_SAMPLE_MAX_FIELDS fields). */
nb_status nb_sample_set(nb_sample *s, const char *name, nb_tensor *t);
/* The field named name (borrowed), or NULL (no error set for a missing
 * name; NULL arguments set NB_ERR_INVALID_ARG). */
nb_tensor *nb_sample_get(const nb_sample *s, const char *name);

/* torch.utils.data.Dataset (map-style): len samples, sample i made by
 * get_item(state, i, gen, out) into an empty *out with nb_sample_set. Its
 * tensors (any dtype and shape, on any device) are made in a scope the
 * caller opens and closes around the call: whatever the sample keeps
 * survives it, the rest is freed. gen: the generator for the sample's
 * random choices, seeded from (the loader's seed, epoch, i), so the draws do
 * not depend on which worker runs the call. A DataLoader with num_workers
 * > 0 calls get_item from several threads at once. Return NB_OK, or an
 * error (nb_set_error), which stops the loader with that message. */
typedef struct nb_map_dataset nb_map_dataset;
/* Dataset.__getitem__: makes sample index (0 <= index < len) into the empty *out; NB_OK or an error. */
typedef nb_status (*nb_get_item_fn)(void *state, int64_t index, nb_generator *gen, nb_sample *out);
/* A dataset over state (borrowed; free_state(state), if given, runs in
 * nb_map_dataset_free). Errors: NB_ERR_INVALID_ARG (len < 0, NULL
 * get_item), NB_ERR_OOM. */
nb_map_dataset *nb_map_dataset_new(int64_t len, nb_get_item_fn get_item, void *state, void (*free_state)(void *));
/* TensorDataset as a map-style dataset: sample i is {"x": x[i], "y": y[i]}
 * (ds borrowed: it must outlive the result). */
nb_map_dataset *nb_map_dataset_from_tensors(nb_dataset *ds);
/* torch.utils.data.Subset: sample k is ds's sample indices[k] (indices
 * copied; ds borrowed). Errors: NB_ERR_INVALID_ARG (an index outside ds). */
nb_map_dataset *nb_subset(nb_map_dataset *ds, const int64_t *indices, int64_t n);
/* torch.utils.data.ConcatDataset: the datasets one after another (borrowed). */
nb_map_dataset *nb_concat_dataset(nb_map_dataset *const *datasets, int n);
/* torch.utils.data.random_split: n subsets of the given lengths (summing to
 * ds's length), from one permutation drawn from seed; out[0..n) are new
 * (free each). Errors: NB_ERR_INVALID_ARG (lengths that do not sum to the
 * length, a negative one). */
nb_status nb_random_split(nb_map_dataset *ds, const int64_t *lengths, int n, uint64_t seed, nb_map_dataset **out);
int64_t nb_map_dataset_len(const nb_map_dataset *ds);
/* Calls ds's get_item (gen NULL: the default generator): sample i into
 * *out (emptied first), its tensors in the caller's scope. */
nb_status nb_map_dataset_get(nb_map_dataset *ds, int64_t index, nb_generator *gen, nb_sample *out);
/* NULL is ignored. */
void nb_map_dataset_free(nb_map_dataset *ds);

/* torch.utils.data.IterableDataset: a stream of samples. reset(state,
 * epoch) restarts it for epoch (from its first sample: what a loader's
 * seek and resume rely on); each next(state, gen, out) puts the next
 * sample into the empty *out with nb_sample_set and returns NB_OK, or
 * returns NB_OK with *out left empty at the end of the epoch, or an error
 * (nb_set_error), which stops the loader with that message. Tensors are
 * made in a scope the caller opens, as get_item's. gen: seeded from (the
 * loader's seed, epoch, the sample's position in the epoch). A DataLoader
 * calls reset and next one call at a time, in order, whatever its
 * num_workers (so the stream and the batches are the same for any
 * num_workers); the workers collate in parallel. Work that should run in
 * parallel per sample belongs in a map-style dataset. */
typedef struct nb_iterable_dataset nb_iterable_dataset;
/* An iterable dataset's reset (restart the stream for epoch >= 0) and next (the next sample into the empty *out;
 * left empty at the end): NB_OK or an error. */
typedef nb_status (*nb_reset_fn)(void *state, int64_t epoch);
typedef nb_status (*nb_next_item_fn)(void *state, nb_generator *gen, nb_sample *out);
/* A stream over state (borrowed; free_state(state), if given, runs in
 * nb_iterable_dataset_free). Errors: NB_ERR_INVALID_ARG (NULL reset or
 * next), NB_ERR_OOM. */
nb_iterable_dataset *nb_iterable_dataset_new(nb_reset_fn reset, nb_next_item_fn next, void *state,
                                             void (*free_state)(void *));
/* torch.utils.data.ChainDataset: the streams one after another (borrowed;
 * each is reset with the epoch as the chain reaches it). */
nb_iterable_dataset *nb_chain_dataset(nb_iterable_dataset *const *datasets, int n);
/* Calls reset (errors: NB_ERR_INVALID_ARG for NULL ds or a negative epoch, reset's). */
nb_status nb_iterable_dataset_reset(nb_iterable_dataset *ds, int64_t epoch);
/* Calls next (gen NULL: the default generator): the next sample into *out
 * (emptied first; still empty at the end), its tensors in the caller's scope. */
nb_status nb_iterable_dataset_next(nb_iterable_dataset *ds, nb_generator *gen, nb_sample *out);
/* NULL is ignored. */
void nb_iterable_dataset_free(nb_iterable_dataset *ds);

/* torch.utils.data's samplers. A zeroed struct is SequentialSampler. */
typedef enum nb_sampler_kind {
    NB_SAMPLER_SEQUENTIAL = 0,  /* 0, 1, ..., len - 1 */
    NB_SAMPLER_RANDOM,          /* a permutation each epoch; replacement: num_samples uniform draws */
    NB_SAMPLER_SUBSET_RANDOM,   /* a permutation of indices[] each epoch */
    NB_SAMPLER_WEIGHTED_RANDOM, /* index i with probability weights[i] / sum (replacement: default true) */
    NB_SAMPLER_DISTRIBUTED,     /* rank's shard: DistributedSampler (shuffle: default true) */
    NB_SAMPLER_CUSTOM,          /* custom_len / custom_indices */
} nb_sampler_kind;
/* Options of nb_sampler_new: the sampler kind and the fields it reads (PyTorch's SequentialSampler,
 * RandomSampler, SubsetRandomSampler, WeightedRandomSampler, DistributedSampler arguments); others are ignored. */
typedef struct nb_sampler_options {
    nb_sampler_kind kind;            /* default NB_SAMPLER_SEQUENTIAL */
    uint64_t seed;                   /* Philox key of every draw */
    nb_flag replacement;             /* RANDOM (default false), WEIGHTED_RANDOM (default true) */
    int64_t num_samples;             /* RANDOM, WEIGHTED_RANDOM: indices per epoch (0: the dataset's/weights' count) */
    const int64_t *indices;          /* SUBSET_RANDOM (copied) */
    int64_t n_indices;               /* SUBSET_RANDOM: entries of indices (>= 0), the indices per epoch */
    const double *weights;           /* WEIGHTED_RANDOM (copied; finite, >= 0, not all 0) */
    int64_t n_weights;               /* WEIGHTED_RANDOM: entries of weights, 1..dataset_len */
    int num_replicas, rank;          /* DISTRIBUTED */
    nb_flag shuffle;                 /* DISTRIBUTED (default true) */
    bool drop_last;                  /* DISTRIBUTED: drop the tail that does not divide by num_replicas (else pad
                                        by repeating from the start) */
    int64_t (*custom_len)(void *state);                                        /* CUSTOM: indices per epoch */
    nb_status (*custom_indices)(void *state, int64_t epoch, int64_t *out);    /* CUSTOM: an epoch's indices */
    void *custom_state;              /* CUSTOM: passed to custom_len and custom_indices (borrowed) */
} nb_sampler_options;
/* A sampler (torch.utils.data.Sampler): each epoch's dataset indices; nb_sampler_new. */
typedef struct nb_sampler nb_sampler;
/* A sampler over a dataset of dataset_len samples. Errors:
 * NB_ERR_INVALID_ARG (a negative length or num_samples, more samples than
 * there are without replacement, an index outside the dataset, bad
 * weights, a rank outside num_replicas, a bad kind), NB_ERR_OOM. */
nb_sampler *nb_sampler_new(int64_t dataset_len, nb_sampler_options o);
/* Indices per epoch (DISTRIBUTED: this rank's). */
int64_t nb_sampler_len(const nb_sampler *s);
/* Writes epoch's indices (nb_sampler_len of them) to out: the same for the
 * same (options, epoch) on every run. */
nb_status nb_sampler_indices(const nb_sampler *s, int64_t epoch, int64_t *out);
void nb_sampler_free(nb_sampler *s);

/* How a batch's fields are made from its samples' fields. */
typedef enum nb_collate {
    NB_COLLATE_STACK = 0, /* default_collate: nb_stack of each field (equal shapes, dtypes and devices) */
    NB_COLLATE_PAD,       /* pad_sequence: every field of one or more dims padded along its first to the
                             batch's longest with padding_value, [B, max, ...], followed by an int64 [B] field
                             "<name>_lengths" (every batch has the same fields); 0-d fields are stacked */
} nb_collate;

/* torch.utils.data.DataLoader's options; a field left 0 takes PyTorch's default. */
typedef struct nb_dataloader_options {
    int64_t batch_size;   /* default 1 */
    bool shuffle;         /* a RandomSampler seeded with seed (when sampler is NULL) */
    uint64_t seed;        /* the shuffle's, and every sample's generator's */
    nb_sampler *sampler;  /* borrowed; NULL: sequential, or shuffled with shuffle */
    bool drop_last;       /* drop a final batch smaller than batch_size */
    nb_collate collate;   /* default NB_COLLATE_STACK (default_collate); ignored with collate_fn */
    double padding_value; /* NB_COLLATE_PAD */
    /* collate_fn: a batch from n samples (new tensors in the caller's scope, set with nb_sample_set);
       replaces collate. Runs on the workers. */
    nb_status (*collate_fn)(void *state, const nb_sample *samples, int64_t n, nb_sample *batch);
    void *collate_state;  /* passed to collate_fn (borrowed; shared by the workers) */
    int num_workers;      /* 0: batches are made in nb_dataloader_next; N > 0: N threads make them ahead */
    int prefetch_factor;  /* batches ahead per worker (default 2) */
    bool persistent_workers; /* accepted: the workers live as long as the loader either way */
    void (*worker_init_fn)(void *state, int worker_id); /* called on each worker as it starts */
    void *worker_init_state; /* passed to worker_init_fn with worker_id in [0, num_workers) (borrowed) */
    /* batch_sampler: each epoch's batches as lists of indices (PyTorch's batch_sampler, e.g. buckets of
       samples of similar length); excludes shuffle, sampler and drop_last, and batch_size is then required:
       the most indices a batch may hold. As an epoch starts (or a seek reaches it) the loader's thread calls
       batch_sampler_len(state, epoch) for its batch count and batch_sampler(state, epoch, k, indices, &n) for
       batch k's n indices (1 <= n <= batch_size; indices has room for batch_size), which must be the same for
       the same (epoch, k): resuming depends on it. */
    int64_t (*batch_sampler_len)(void *state, int64_t epoch);
    nb_status (*batch_sampler)(void *state, int64_t epoch, int64_t batch, int64_t *indices, int64_t *n);
    void *batch_sampler_state; /* passed to batch_sampler_len and batch_sampler (borrowed) */
    nb_device device;     /* where batches are delivered (default the CPU, where samples are usually made) */
    /* pin_memory, with a CUDA device: the workers (or nb_dataloader_next with num_workers 0) write each batch
       into pinned host memory (nb_host_alloc; reused once the copy out of it is done), and its copy to the
       device runs on the device's copy stream (nb_stream_copy), overlapping the compute stream's work; the
       current stream waits for it (an event), so the batch is used as any tensor. Without pin_memory the
       copy is synchronous, from pageable memory. Ignored for the CPU (batches stay where they are made);
       fields already on a device are moved as they are. */
    bool pin_memory;
} nb_dataloader_options;
/* torch.utils.data.DataLoader over a map-style or iterable dataset: nb_dataloader_new(_iterable). */
typedef struct nb_dataloader nb_dataloader;
/* A loader over ds (borrowed; it must outlive the loader) at epoch 0,
 * batch 0. Errors: NULL ds (an earlier error kept), NB_ERR_INVALID_ARG
 * (batch_size, num_workers or prefetch_factor < 0, a sampler for another
 * length than ds's), NB_ERR_DEVICE (a device that is not there), NB_ERR_OOM,
 * NB_ERR_STATE (a worker thread could not start). */
nb_dataloader *nb_dataloader_new(nb_map_dataset *ds, nb_dataloader_options o);
/* A loader over an iterable dataset (borrowed), reset for epoch 0: batches
 * of batch_size samples in the stream's order, the last one shorter
 * unless drop_last. nb_dataloader_indices gives the samples' positions in
 * the epoch's stream; nb_dataloader_num_batches is -1 (the length is
 * unknown, as len() of PyTorch's loader over an IterableDataset); a seek
 * (and a checkpoint's resume) resets the stream for the epoch and reads
 * past the batches before the one sought, and the next call after a
 * failed read does the same to find its place again. Errors: as
 * nb_dataloader_new, NB_ERR_INVALID_ARG (shuffle, a sampler or a
 * batch_sampler), reset's. */
nb_dataloader *nb_dataloader_new_iterable(nb_iterable_dataset *ds, nb_dataloader_options o);
/* The next batch of the epoch into *batch and true; false at the end of
 * the epoch (nb_dataloader_status NB_OK; nb_dataloader_reset starts the
 * next) or on failure (the status and nb_last_error() say why: a
 * get_item's or collate's error, named with the sample's index). The
 * batch's tensors belong to the loader until the next call on it (do not
 * release them; nb_retain one to keep it). */
bool nb_dataloader_next(nb_dataloader *l, nb_sample *batch);
/* NB_OK, or the failure of the last nb_dataloader_next / seek. */
nb_status nb_dataloader_status(const nb_dataloader *l);
/* The indices of the batch nb_dataloader_next gave last (borrowed, *n of them). */
const int64_t *nb_dataloader_indices(const nb_dataloader *l, int64_t *n);
/* The next epoch from its first batch (also mid-epoch). */
void nb_dataloader_reset(nb_dataloader *l);
/* Positions the loader at batch `batch` of epoch `epoch`, where one that
 * ran from the start would be (resuming); the batch it gave last is
 * released. Errors: NB_ERR_INVALID_ARG (batch past the epoch's batches),
 * the sampler's, batch sampler's or stream's; on failure the loader stays
 * at its batch (an iterable dataset's finds it again on the next call). */
nb_status nb_dataloader_seek(nb_dataloader *l, int64_t epoch, int64_t batch);
/* Batches in the current epoch (-1 for an iterable dataset). */
int64_t nb_dataloader_num_batches(const nb_dataloader *l);
int64_t nb_dataloader_epoch(const nb_dataloader *l);
int64_t nb_dataloader_position(const nb_dataloader *l); /* batches given in this epoch */
/* The options the loader was made with (its seed, batch size...; zeroed for NULL). */
nb_dataloader_options nb_dataloader_get_options(const nb_dataloader *l);
/* Stops and joins the workers, releases the batch; NULL is ignored. */
void nb_dataloader_free(nb_dataloader *l);

/* ---- CSV (numpy.loadtxt) ---------------------------------------------------
 * Text files of numbers, one row per line, as numpy.loadtxt(path,
 * delimiter=",", ndmin=2) reads them: blank lines and text from '#' to the
 * end of a line are skipped; fields may carry blanks around them and
 * double quotes ("1.5"); numbers are read in the C locale whatever the
 * program's (1.5 with a dot; nan, inf and hex floats as strtod reads them;
 * a float too large gives inf, as numpy does). */
/* Options of nb_csv_load, numpy.loadtxt's names; (nb_csv_options){0} reads every column as float32. */
typedef struct nb_csv_options {
    char delimiter;          /* default ','; ' ' splits on runs of blanks (numpy's delimiter=None) */
    int64_t skip_rows;       /* lines skipped first, before comments and blank lines count (a header: 1) */
    int64_t max_rows;        /* 0: all; else at most this many rows (after skip_rows) */
    nb_dtype dtype;          /* the result's (default float32); integer dtypes read integers exactly
                                (int64 beyond 2^53), bool reads 0 and 1 */
    const int64_t *usecols;  /* NULL: every column; else these (0-based), in this order */
    int n_usecols;           /* entries of usecols (>= 0); 0: usecols is ignored, every column */
} nb_csv_options;
/* A new [rows, cols] tensor of dtype on the default device ([0, 0] for a
 * file with no rows, [0, n_usecols] with usecols). Errors (NULL
 * returned): NB_ERR_INVALID_ARG (NULL path, a delimiter of '\n', '#' or
 * '"', a negative skip_rows, max_rows or n_usecols, a negative or repeated
 * usecols entry, a bad dtype), NB_ERR_IO (cannot read), NB_ERR_FORMAT
 * naming the file, line and column (a field that is empty, longer than 511
 * characters or not a number of the dtype (an integer out of its range), a
 * row with another column count than the first, a usecols column past a
 * row's end, a NUL byte), NB_ERR_OOM. */
nb_tensor *nb_csv_load(const char *path, nb_csv_options o);

/* ---- token shards (llm.c's .bin files) ---------------------------------
 * Pretraining data as token ids in files: 256 little-endian int32 (magic,
 * version, token count, then zeros) and the tokens, uint16 for magic
 * 20240520 version 1 (GPT-2's vocabulary), uint32 for 20240801 version 7
 * (Llama 3's), as llm.c's dev/data/data_common.py writes them. */
/* An open token shard (the file mapped read-only): nb_token_shard_open, nb_token_shard_close. */
typedef struct nb_token_shard nb_token_shard;
/* Maps path read-only (pages are read as windows touch them; a file
 * truncated while mapped faults when the lost pages are read). Errors:
 * NB_ERR_INVALID_ARG, NB_ERR_IO, NB_ERR_FORMAT (a file shorter than the
 * header, another magic or version, a token count the file's size does not
 * match). */
nb_token_shard *nb_token_shard_open(const char *path);
void nb_token_shard_close(nb_token_shard *t);
/* The shard's token count (-1 for NULL). */
int64_t nb_token_shard_len(const nb_token_shard *t);
/* Tokens [start, start + n) as int64 into out. Errors: NB_ERR_INVALID_ARG
 * (NULL, a range outside the shard). */
nb_status nb_token_shard_read(const nb_token_shard *t, int64_t start, int64_t n, int64_t *out);
/* Writes n tokens as a shard (uint32_tokens: the Llama 3 layout), atomically.
 * Errors: NB_ERR_INVALID_ARG (NULL, n < 0 or >= 2^31, a token that does not
 * fit the width), NB_ERR_IO, NB_ERR_OOM. */
nb_status nb_token_shard_write(const char *path, const int64_t *tokens, int64_t n, bool uint32_tokens);
/* A map-style dataset of windows over the shards (each window inside one
 * shard, shards in order): sample i is {"input_ids": int64 [seq_len],
 * "labels": int64 [seq_len]}, the seq_len + 1 tokens from the window's
 * start split as llm.c's and nanoGPT's get_batch split them, windows
 * starting every stride tokens. With stride 1 and a RANDOM sampler with
 * replacement it draws nanoGPT's random windows; with stride seq_len and a
 * sequential one it walks the shards as llm.c's loader. CPU tensors. The
 * shards are mapped until nb_map_dataset_free. Errors: NB_ERR_INVALID_ARG
 * (no paths, seq_len or stride < 1), nb_token_shard_open's. */
nb_map_dataset *nb_token_window_dataset(const char *const *paths, int n_paths, int64_t seq_len, int64_t stride);

/* ---- images (libpng, libjpeg-turbo) -------------------------------------
 * PNG and JPEG files as uint8 [C, H, W] tensors (torchvision.io.read_image)
 * on the default device, torchvision's common transforms, and ImageFolder.
 * Built without libpng / libjpeg (meson option `images`) the readers and
 * writers fail with NB_ERR_UNSUPPORTED. */

/* Largest image decoded (width x height): a larger header is refused before
 * any allocation (a decompression bomb), as PIL's MAX_IMAGE_PIXELS limit. */
#define NB_IMAGE_MAX_PIXELS ((uint64_t)1 << 28)

/* The channels wanted (PIL's Image.convert): RGB (3: alpha dropped, gray
 * replicated; ImageFolder's default), GRAY (1: ITU-R 601-2 luma, (19595 R +
 * 38470 G + 7471 B + 2^15) >> 16), UNCHANGED (the file's: 1 gray, 2 gray and
 * alpha, 3 RGB, 4 RGBA; palettes expanded). */
typedef enum nb_image_mode {
    NB_IMAGE_RGB = 0,  /* 3 channels, PIL's convert("RGB") (default) */
    NB_IMAGE_GRAY,     /* 1 channel, PIL's convert("L") */
    NB_IMAGE_UNCHANGED /* the file's channels, 1 to 4 */
} nb_image_mode;
/* Decodes a PNG (any color type; palettes expanded, their transparency as
 * alpha; 16-bit samples cut to their high byte and gAMA chunks ignored, as
 * PIL reads them, but 16-bit gray is cut where PIL's "L" clips)
 * or JPEG (baseline or progressive, gray or YCbCr; not CMYK) file. Errors:
 * NB_ERR_INVALID_ARG, NB_ERR_IO, NB_ERR_FORMAT (neither format, corrupt or
 * truncated data, more than NB_IMAGE_MAX_PIXELS), NB_ERR_UNSUPPORTED (CMYK,
 * a build without the libraries), NB_ERR_OOM. */
nb_tensor *nb_image_read(const char *path, nb_image_mode mode);
/* The same from len bytes in memory (name labels messages; NULL: "image"). */
nb_tensor *nb_image_decode(const void *data, size_t len, const char *name, nb_image_mode mode);
/* Writes img (uint8 [C, H, W], C 1 to 4, any device) as an 8-bit PNG /
 * img (C 1 or 3) as a baseline JPEG of quality 1..100 (0: PIL's 75),
 * atomically. Errors: NB_ERR_INVALID_ARG, NB_ERR_SHAPE (another dtype or
 * shape, sides above 65535), NB_ERR_IO, NB_ERR_UNSUPPORTED, NB_ERR_OOM. */
nb_status nb_image_write_png(const char *path, nb_tensor *img);
nb_status nb_image_write_jpeg(const char *path, nb_tensor *img, int quality);

/* torchvision.transforms applied in this order to an image [C, H, W]:
 * ToTensor (uint8 to float32 / 255; a float image is kept), Resize,
 * CenterCrop, RandomCrop, RandomHorizontalFlip, Normalize. A zeroed struct
 * is ToTensor alone. Resize is bilinear as F.interpolate (align_corners
 * false, no antialiasing: shrinking by large factors differs from PIL's
 * and torchvision's antialiased resize). */
typedef struct nb_image_transforms {
    int64_t resize[2];           /* [h, w]; [s, 0]: the shorter side to s, the other scaled and truncated
                                    (Resize(int)); 0: none */
    int64_t center_crop[2];      /* [h, w] ([h, 0]: square) around the center, zero-padded if larger; 0: none */
    int64_t random_crop[2];      /* [h, w] ([h, 0]: square) at a position drawn from gen; 0: none */
    int64_t random_crop_padding; /* zeros on every side before the random crop */
    double horizontal_flip_p;    /* flipped with this probability (drawn from gen) */
    bool normalize;              /* (x - mean[c]) / std[c] per channel (std 0 reads as 1) */
    double mean[4], std[4];      /* Normalize's mean / std, entry c for channel c (C <= 4) */
} nb_image_transforms;
/* A new float32 [C, h, w] (NULL t: ToTensor alone); gen: NULL for the
 * default generator. Errors: NB_ERR_INVALID_ARG, NB_ERR_SHAPE (not 3-d, a
 * random crop larger than the padded image). */
nb_tensor *nb_image_transform(nb_tensor *img, const nb_image_transforms *t, nb_generator *gen);

/* A transform of your own: image uint8 [C, H, W] to a sample's tensor (gen: the sample's generator). */
typedef nb_tensor *(*nb_image_transform_fn)(void *state, nb_tensor *image, nb_generator *gen);
/* Options of nb_image_folder (ImageFolder's loader and transform); (nb_image_folder_options){0}: RGB, ToTensor. */
typedef struct nb_image_folder_options {
    nb_image_mode mode;                  /* default RGB (torchvision's PIL loader) */
    nb_image_transforms transforms;      /* applied to each image (default: ToTensor) */
    nb_image_transform_fn transform_fn;  /* replaces transforms when given */
    void *transform_state;               /* passed to transform_fn (borrowed; shared by the workers) */
} nb_image_folder_options;
/* torchvision.datasets.ImageFolder: root/<class>/.../<image>.png|jpg|jpeg
 * (any case; torchvision's other extensions, bmp, tif, webp..., are not
 * listed: nabla cannot decode them); classes are root's subdirectories in
 * sorted order, hidden ones included (label = position), each class's
 * images found recursively (symlinks followed, loops cut) and sorted by
 * directory, then name, as torchvision's make_dataset. Sample i is
 * {"image": the transformed image, "label": int64}. Images are read in
 * get_item (on the DataLoader's workers). Errors: NB_ERR_INVALID_ARG (NULL
 * root, a bad mode, no classes, a class without images), NB_ERR_IO (an
 * unreadable directory), NB_ERR_OOM. */
nb_map_dataset *nb_image_folder(const char *root, nb_image_folder_options o);
/* The classes of an image folder dataset (-1 / NULL with
 * NB_ERR_INVALID_ARG for another dataset or k outside). */
int64_t nb_image_folder_num_classes(const nb_map_dataset *ds);
const char *nb_image_folder_class(const nb_map_dataset *ds, int64_t k);

#ifdef __cplusplus
}
#endif
#endif
