// gather.cu - gather and scatter (scatter_reduce's sum, prod, mean, amax,
// amin, include_self) along one dim on CUDA, on views of any strides, with
// backend/cpu/gather.c's semantics.
//
// gather: one thread per output element (each written once). scatter: one
// thread per line (one setting of the coordinates other than dim): a
// scatter's destinations in a line are written only by that line's
// sources, so the thread walks its line's index in order and every
// destination is updated by one thread in index order (duplicates: the last
// write wins; sums and products accumulate in index order): deterministic,
// no atomics. include_self = false and mean need, per destination, how many
// sources it has received: a count buffer [size at dim, lines of a batch]
// (zero on entry; each thread resets what it used), lines taken in batches
// so the buffer stays bounded.
//
// Dims, dtypes and shapes are checked before these run
// (backend/check/gather.c). An index outside [0, size) is reported through
// the stream's error word (NB_ERR_INVALID_ARG at the next sync point) and
// nothing is read or written out of bounds: gather skips that element;
// scatter checks a line's whole index first and leaves the line untouched
// (the outputs of a failed kernel are unspecified, nb_backend.h).
#include "red_util.cuh"

namespace nbc {
namespace red {
namespace { // internal linkage: no clash with other files' kernels

// ---- gather ------------------------------------------------------------------------------

// Elements of index's shape: views 0 out, 1 index, 2 x with its dim stride
// zeroed (the index supplies that coordinate); U moves the element's bits.
template <typename U> __global__ void k_gather(Iter<3> it, int64_t xs, int64_t size, int *err, int tag) {
    NBC_GRID_STRIDE(i, it.numel) {
        int64_t off[3];
        iter_off(it, i, off);
        int64_t t = ((const int64_t *)it.ptr[1])[off[1]];
        if (t < 0 || t >= size) {
            raise(err, ERR_INDEX, tag);
            continue;
        }
        ((U *)it.ptr[0])[off[0]] = ((const U *)it.ptr[2])[off[2] + t * xs];
    }
}

// ---- scatter -------------------------------------------------------------------------------

// The mean of integers rounds down, as PyTorch (floor division); floats divide.
template <typename T> __device__ inline T mean_div(T a, T c) {
    if constexpr (std::is_floating_point<T>::value || std::is_unsigned<T>::value) return a / c;
    else return a / c - (((a % c) != 0) && ((a < 0) != (c < 0)));
}

// Lines l0 .. l0 + m - 1 of index's shape without dim: views 0 out, 1
// index, 2 src; os/is/ss their steps along dim. counts (NULL when the mode
// needs none) holds count[t * nl + b] for line b of the batch (nl >= m).
template <typename T>
__global__ void k_scatter(Iter<3> it, int64_t n, int64_t os, int64_t is, int64_t ss, int64_t size, int mode,
                          bool incl, int64_t *counts, int64_t l0, int64_t m, int64_t nl, int *err, int tag) {
    NBC_GRID_STRIDE(b, m) {
        int64_t off[3];
        iter_off(it, l0 + b, off);
        T *op = (T *)it.ptr[0] + off[0];
        const int64_t *ip = (const int64_t *)it.ptr[1] + off[1];
        const T *sp = (const T *)it.ptr[2] + off[2];
        bool bad = false;
        for (int64_t i = 0; i < n; i++) {
            int64_t t = ip[i * is];
            bad |= t < 0 || t >= size;
        }
        if (bad) { // the whole line is left untouched
            raise(err, ERR_INDEX, tag);
            continue;
        }
        int64_t *cnt = counts ? counts + b : nullptr;
        for (int64_t i = 0; i < n; i++) {
            int64_t t = ip[i * is];
            T v = sp[i * ss], *dst = op + t * os;
            if (mode == NB_SCATTER_ASSIGN || (!incl && cnt[t * nl] == 0)) *dst = v; // the first source replaces self
            else if (mode == NB_SCATTER_SUM || mode == NB_SCATTER_MEAN) *dst = wadd(*dst, v);
            else if (mode == NB_SCATTER_PROD) *dst = wmul(*dst, v);
            else if (mode == NB_SCATTER_AMAX) {
                if (is_nan(v) || v > *dst) *dst = v;
            } else if (is_nan(v) || v < *dst) {
                *dst = v;
            }
            if (cnt) cnt[t * nl]++;
        }
        if (!cnt) continue;
        for (int64_t i = 0; i < n; i++) { // mean's divisions, once per destination; counts back to 0
            int64_t t = ip[i * is], c = cnt[t * nl];
            if (!c) continue;
            if (mode == NB_SCATTER_MEAN) {
                T d = (T)(c + (incl ? 1 : 0));
                if (d != (T)0) op[t * os] = mean_div(op[t * os], d); // a uint8 count can wrap to 0: left undivided
            }
            cnt[t * nl] = 0;
        }
    }
}

template <typename T>
static nb_status scatter_t(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index, const nb_kview *src,
                           int mode, bool incl) {
    cudaStream_t st = stream_of(be);
    const int64_t n = index->shape[dim], lines = numel(index) / n, size = out->shape[dim];
    nb_kview lv[3] = {lines_of(out, index, dim), lines_of(index, index, dim), lines_of(src, index, dim)};
    const nb_kview *v[3] = {&lv[0], &lv[1], &lv[2]};
    Iter<3> it = make_iter<3>(v);
    bool need_counts = (!incl && mode != NB_SCATTER_ASSIGN) || mode == NB_SCATTER_MEAN;
    // at most 8M counts (64 MiB) at a time
    const int64_t cap = (int64_t)1 << 23;
    int64_t nl = need_counts ? (size > 0 ? cap / size : lines) : lines;
    if (nl < 1) nl = 1;
    if (nl > lines) nl = lines;
    Scratch cs;
    int64_t *counts = nullptr;
    if (need_counts) {
        size_t bytes = sizeof(int64_t) * (size_t)size * (size_t)nl;
        if (!cs.alloc(be, bytes))
            return nb_set_error(NB_ERR_OOM, "scatter: out of memory for %zu bytes of counts", bytes);
        counts = cs.as<int64_t>();
        NBC_TRY("scatter", cudaMemsetAsync(counts, 0, bytes, st));
    }
    int *err = err_word(be);
    int tag = slot_tag("scatter");
    for (int64_t l0 = 0; l0 < lines; l0 += nl) {
        int64_t m = lines - l0 < nl ? lines - l0 : nl;
        k_scatter<T><<<blocks_for(m), THREADS, 0, st>>>(it, n, out->strides[dim], index->strides[dim],
                                                        src->strides[dim], size, mode, incl, counts, l0, m, nl, err, tag);
        nb_status r = launched("scatter");
        if (r != NB_OK) return r;
    }
    return NB_OK;
}

} // namespace
} // namespace red
} // namespace nbc

using namespace nbc;
using namespace nbc::red;

extern "C" nb_status nb_cuda_gather(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim,
                                    const nb_kview *index) {
    int64_t total = numel(index);
    if (total == 0) return NB_OK;
    nb_kview xr = *x; // x at index's shape, the dim coordinate coming from the index
    for (int d = 0; d < x->ndim; d++) xr.shape[d] = index->shape[d];
    xr.strides[dim] = 0;
    const nb_kview *v[3] = {out, index, &xr};
    Iter<3> it = make_iter<3>(v);
    int64_t xs = x->strides[dim], size = x->shape[dim];
    int *err = err_word(be);
    int tag = slot_tag("gather");
    unsigned grid = blocks_for(total);
    cudaStream_t s = stream_of(be);
    switch (nb_dtype_size(x->dtype)) {
    case 1: k_gather<uint8_t><<<grid, THREADS, 0, s>>>(it, xs, size, err, tag); break;
    case 2: k_gather<uint16_t><<<grid, THREADS, 0, s>>>(it, xs, size, err, tag); break;
    case 4: k_gather<uint32_t><<<grid, THREADS, 0, s>>>(it, xs, size, err, tag); break;
    case 8: k_gather<uint64_t><<<grid, THREADS, 0, s>>>(it, xs, size, err, tag); break;
    default: return nb_set_error(NB_ERR_DTYPE, "gather: invalid dtype %d", (int)x->dtype);
    }
    return launched("gather");
}

extern "C" nb_status nb_cuda_scatter(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index,
                                     const nb_kview *src, nb_scatter_mode mode, bool include_self) {
    if (numel(index) == 0) return NB_OK;
    switch (out->dtype) {
    case NB_F32: return scatter_t<float>(be, out, dim, index, src, mode, include_self);
    case NB_F64: return scatter_t<double>(be, out, dim, index, src, mode, include_self);
    case NB_I32: return scatter_t<int32_t>(be, out, dim, index, src, mode, include_self);
    case NB_I64: return scatter_t<int64_t>(be, out, dim, index, src, mode, include_self);
    case NB_I8: return scatter_t<int8_t>(be, out, dim, index, src, mode, include_self);
    case NB_I16: return scatter_t<int16_t>(be, out, dim, index, src, mode, include_self);
    default: return scatter_t<uint8_t>(be, out, dim, index, src, mode, include_self); // uint8; bool (assign only)
    }
}
