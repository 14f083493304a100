// sort.cu - the sort slot on CUDA (sort, argsort, topk, kthvalue): a
// stable sort of every line of x along dim, NaN larger than every number,
// equal keys (-0.0 == +0.0 included) in their original order both
// ascending and descending, as backend/cpu/sort.c; the first k of each
// line's order are written.
//
// Method: every element gets an unsigned key whose unsigned order is the
// wanted order (floats: sign-magnitude flipped to two's complement order,
// every NaN the largest key, -0.0 made +0.0; signed integers: the sign bit
// flipped; descending: all bits inverted, which keeps ties in order because
// the sort is stable). Two stable LSD radix sorts (CUB's DeviceRadixSort)
// of all the lines at once, carrying each element's flat position: first
// by key, then by line number; a stable sort by line after one by key
// orders each line by key with ties by position. A sort's output is fully
// determined (ties are ordered by position), so it is deterministic
// whatever the kernels' scheduling. Lines of any length (CUB's radix sort
// takes 64-bit counts).
#define CCCL_DISABLE_NVTX // no NVTX ranges (they would dlopen libnvToolsExt)
#include <cub/device/device_radix_sort.cuh>

#include "red_util.cuh"

namespace nbc {
namespace red {
namespace { // internal linkage: no clash with other files' kernels

// The key type and the order-preserving map of each dtype.
template <typename T> struct SortKey;
template <> struct SortKey<float> {
    using K = uint32_t;
    __device__ static K of(float v) {
        if (isnan(v)) return 0xffffffffu;
        if (v == 0.0f) v = 0.0f; // -0.0 sorts equal to +0.0
        uint32_t u = __float_as_uint(v);
        return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    }
};
template <> struct SortKey<double> {
    using K = uint64_t;
    __device__ static K of(double v) {
        if (isnan(v)) return ~0ull;
        if (v == 0.0) v = 0.0;
        uint64_t u = (uint64_t)__double_as_longlong(v);
        return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
    }
};
template <> struct SortKey<int32_t> {
    using K = uint32_t;
    __device__ static K of(int32_t v) { return (uint32_t)v ^ 0x80000000u; }
};
template <> struct SortKey<int64_t> {
    using K = uint64_t;
    __device__ static K of(int64_t v) { return (uint64_t)v ^ 0x8000000000000000ull; }
};
template <> struct SortKey<int8_t> {
    using K = uint8_t;
    __device__ static K of(int8_t v) { return (uint8_t)((uint8_t)v ^ 0x80u); }
};
template <> struct SortKey<int16_t> {
    using K = uint16_t;
    __device__ static K of(int16_t v) { return (uint16_t)((uint16_t)v ^ 0x8000u); }
};
template <> struct SortKey<uint8_t> { // uint8 and bool (0/1 bytes)
    using K = uint8_t;
    __device__ static K of(uint8_t v) { return v; }
};

// keys[p] and pos[p] = p for flat position p = line * n + j (line-major).
template <typename T>
__global__ void k_sort_keys(Iter<1> lines, int64_t xs, int64_t n, int64_t total, bool desc,
                            typename SortKey<T>::K *keys, int64_t *pos) {
    using K = typename SortKey<T>::K;
    NBC_GRID_STRIDE(p, total) {
        int64_t l = p / n, j = p - l * n, off[1];
        iter_off(lines, l, off);
        K k = SortKey<T>::of(((const T *)lines.ptr[0])[off[0] + j * xs]);
        keys[p] = desc ? (K)~k : k;
        pos[p] = p;
    }
}

// The line of each sorted element: the key of the second sort.
__global__ void k_line_keys(const int64_t *pos, int64_t n, int64_t total, uint64_t *lk) {
    NBC_GRID_STRIDE(p, total) lk[p] = (uint64_t)(pos[p] / n);
}

// The first k of each line: lines views 0 x, 1 indices, 2 values (or
// indices again); sorted[l * n + q] is the flat position of line l's q-th.
template <typename T>
__global__ void k_sort_out(Iter<3> lines, const int64_t *sorted, int64_t n, int64_t k, int64_t xs, int64_t is,
                           int64_t vs, bool has_values) {
    NBC_GRID_STRIDE(t, lines.numel * k) {
        int64_t l = t / k, q = t - l * k, off[3];
        iter_off(lines, l, off);
        int64_t j = sorted[l * n + q] - l * n; // position within the line
        ((int64_t *)lines.ptr[1])[off[1] + q * is] = j;
        if (has_values) ((T *)lines.ptr[2])[off[2] + q * vs] = ((const T *)lines.ptr[0])[off[0] + j * xs];
    }
}

template <typename T>
static nb_status sort_t(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x, int dim,
                        bool descending) {
    using K = typename SortKey<T>::K;
    cudaStream_t st = stream_of(be);
    const int64_t total = numel(x), n = x->shape[dim], k = indices->shape[dim], lines = total / n;
    nb_kview lx = lines_of(x, x, dim), li = lines_of(indices, x, dim), lvv = lines_of(values ? values : indices, x, dim);
    const nb_kview *v1[1] = {&lx}, *v3[3] = {&lx, &li, &lvv};
    Iter<1> it1 = make_iter<1>(v1);
    Iter<3> it3 = make_iter<3>(v3);

    // scratch: keys in/out, positions in/out, line keys in/out, CUB's temporary storage
    const int kbits = (int)(8 * sizeof(K)), lbits = lines > 1 ? bits_for((uint64_t)(lines - 1)) : 0;
    size_t t1 = 0, t2 = 0;
    NBC_TRY("sort", cub::DeviceRadixSort::SortPairs(nullptr, t1, (const K *)nullptr, (K *)nullptr,
                                                    (const int64_t *)nullptr, (int64_t *)nullptr, total, 0, kbits, st));
    if (lines > 1)
        NBC_TRY("sort", cub::DeviceRadixSort::SortPairs(nullptr, t2, (const uint64_t *)nullptr, (uint64_t *)nullptr,
                                                        (const int64_t *)nullptr, (int64_t *)nullptr, total, 0, lbits,
                                                        st));
    Carve c;
    size_t o_k0 = c.take<K>(total), o_k1 = c.take<K>(total), o_p0 = c.take<int64_t>(total),
           o_p1 = c.take<int64_t>(total), o_l0 = c.take<uint64_t>(lines > 1 ? total : 1),
           o_l1 = c.take<uint64_t>(lines > 1 ? total : 1), o_t = c.take<char>((int64_t)(t1 > t2 ? t1 : t2));
    Scratch s;
    if (!s.alloc(be, c.used))
        return nb_set_error(NB_ERR_OOM, "sort: out of memory for %zu bytes of workspace", c.used);
    K *k0 = at<K>(s, o_k0), *k1 = at<K>(s, o_k1);
    int64_t *p0 = at<int64_t>(s, o_p0), *p1 = at<int64_t>(s, o_p1);
    uint64_t *l0 = at<uint64_t>(s, o_l0), *l1 = at<uint64_t>(s, o_l1);
    void *tmp = at<void>(s, o_t);

    k_sort_keys<T><<<blocks_for(total), THREADS, 0, st>>>(it1, x->strides[dim], n, total, descending, k0, p0);
    nb_status r = launched("sort");
    if (r != NB_OK) return r;
    size_t tb = t1;
    NBC_TRY("sort", cub::DeviceRadixSort::SortPairs(tmp, tb, (const K *)k0, k1, (const int64_t *)p0, p1, total, 0,
                                                    kbits, st));
    count_launch();
    const int64_t *sorted = p1;
    if (lines > 1) {
        k_line_keys<<<blocks_for(total), THREADS, 0, st>>>(p1, n, total, l0);
        if ((r = launched("sort")) != NB_OK) return r;
        tb = t2;
        NBC_TRY("sort", cub::DeviceRadixSort::SortPairs(tmp, tb, (const uint64_t *)l0, l1, (const int64_t *)p1, p0,
                                                        total, 0, lbits, st));
        count_launch();
        sorted = p0;
    }
    k_sort_out<T><<<blocks_for(lines * k), THREADS, 0, st>>>(it3, sorted, n, k, x->strides[dim],
                                                             indices->strides[dim],
                                                             values ? values->strides[dim] : 0, values != nullptr);
    return launched("sort");
}

} // namespace
} // namespace red
} // namespace nbc

using namespace nbc;
using namespace nbc::red;

// Arguments checked: backend/check/sort.c.
extern "C" nb_status nb_cuda_sort(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x,
                                  int dim, bool descending) {
    if (numel(x) == 0 || indices->shape[dim] == 0) return NB_OK;
    switch (x->dtype) {
    case NB_F32: return sort_t<float>(be, values, indices, x, dim, descending);
    case NB_F64: return sort_t<double>(be, values, indices, x, dim, descending);
    case NB_I32: return sort_t<int32_t>(be, values, indices, x, dim, descending);
    case NB_I64: return sort_t<int64_t>(be, values, indices, x, dim, descending);
    case NB_I8: return sort_t<int8_t>(be, values, indices, x, dim, descending);
    case NB_I16: return sort_t<int16_t>(be, values, indices, x, dim, descending);
    default: return sort_t<uint8_t>(be, values, indices, x, dim, descending); // uint8, bool
    }
}
