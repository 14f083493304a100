// index.cu - index_select, index_add, index_copy, where and nonzero on
// CUDA, with backend/cpu/index.c's semantics. A contiguous tensor is seen
// as [outer, size, inner] around the indexed dim.
//
// index_select (embedding lookups): a block row per output row, its threads
// copying the row's bytes in the widest unit (up to 16 bytes) that the row
// length and alignment allow.
// index_add (the backward of embedding and index_select) and index_copy:
// the index is sorted stably by value (CUB's radix sort over the bits the
// size needs, carrying positions), so the positions that hit one row are
// contiguous and in index order. index_add then gives each gx row (o, r) to
// one block row: it finds r's run by binary search and adds g's rows of
// that run into a zero accumulator in index order (the CPU's order: bitwise
// the CPU's sums), or writes zeros (rows not hit, skip_index): every
// element written once, no atomics, no separate zeroing pass. Accumulating
// (into a parameter's .grad), each hit row gets its run's sum added. index_copy
// copies only the last position of each run (the last repeat wins).
// where: the strided iterator, moving element bits.
// nonzero: fixed blocks of 4096 C-order positions: a count per block, one
// exclusive scan of the counts, then each block writes its positions in
// order (a scan of its threads' counts): fully determined (C order).
//
// Dims, dtypes, shapes and layouts are checked before these run
// (backend/check/index.c; where's in backend/check/binary.c). An index
// outside [0, size) goes to the stream's error word (NB_ERR_INVALID_ARG at
// the next sync point) and is never followed.
#define CCCL_DISABLE_NVTX // no NVTX ranges (they would dlopen libnvToolsExt)
#include <cub/device/device_radix_sort.cuh>

#include "red_util.cuh"

namespace nbc {
namespace red {
namespace { // internal linkage: no clash with other files' kernels

static void split_dims(const nb_kview *v, int dim, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < dim; d++) *outer *= v->shape[d];
    for (int d = dim + 1; d < v->ndim; d++) *inner *= v->shape[d];
}

// The widest unit (16, 8, 4, 2 or 1 bytes) dividing a row of `bytes` and
// the alignment of every pointer.
static int unit_for(size_t bytes, const void *a, const void *b) {
    uintptr_t al = (uintptr_t)a | (uintptr_t)b;
    for (int u = 16; u > 1; u >>= 1)
        if (bytes % (size_t)u == 0 && al % (uintptr_t)u == 0) return u;
    return 1;
}

// Launch shape for rows of w units: a block row per row (grid.y, strided),
// block.x threads across the row.
struct RowGrid {
    dim3 grid, block;
};
static RowGrid row_grid(int64_t rows, int64_t w) {
    int64_t t = (w + 31) / 32 * 32;
    if (t > THREADS) t = THREADS;
    RowGrid g;
    g.block = dim3((unsigned)t);
    g.grid = dim3(grid_for(w, t, 64), (unsigned)(rows < 65535 ? rows : 65535));
    return g;
}

// ---- index_select ---------------------------------------------------------------------

// Output rows [outer * k] of w units: row o * k + i copies x's row
// o * size + idx[i].
template <typename U>
__global__ void k_select_rows(const U *x, U *out, const int64_t *idx, int64_t k, int64_t size, int64_t rows, int64_t w,
                              int *err, int tag) {
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        int64_t o = row / k, i = row - o * k, t = idx[i];
        if (t < 0 || t >= size) { // the same for the whole block row
            if (blockIdx.x == 0 && threadIdx.x == 0) raise(err, ERR_INDEX, tag);
            continue;
        }
        const U *src = x + (o * size + t) * w;
        U *dst = out + row * w;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < w; c += (int64_t)gridDim.x * blockDim.x)
            dst[c] = src[c];
    }
}

// Narrow rows (a few units each): one thread per unit.
template <typename U>
__global__ void k_select_flat(const U *x, U *out, const int64_t *idx, int64_t k, int64_t size, int64_t total,
                              int64_t w, int *err, int tag) {
    NBC_GRID_STRIDE(e, total) {
        int64_t row = e / w, c = e - row * w, o = row / k, i = row - o * k, t = idx[i];
        if (t < 0 || t >= size) {
            raise(err, ERR_INDEX, tag);
            continue;
        }
        out[e] = x[(o * size + t) * w + c];
    }
}

template <typename U>
static nb_status select_u(nb_backend *be, const nb_kview *out, const nb_kview *x, const nb_kview *index, int64_t outer,
                          int64_t k, int64_t size, int64_t w) {
    cudaStream_t st = stream_of(be);
    int *err = err_word(be);
    int tag = slot_tag("index_select");
    int64_t rows = outer * k;
    if (w >= 32) {
        RowGrid g = row_grid(rows, w);
        k_select_rows<U><<<g.grid, g.block, 0, st>>>((const U *)x->data, (U *)out->data, (const int64_t *)index->data,
                                                      k, size, rows, w, err, tag);
    } else {
        k_select_flat<U><<<blocks_for(rows * w), THREADS, 0, st>>>((const U *)x->data, (U *)out->data,
                                                                   (const int64_t *)index->data, k, size, rows * w, w,
                                                                   err, tag);
    }
    return launched("index_select");
}

// ---- the sorted index (index_add, index_copy) ---------------------------------------------

// keys[i] = idx[i] (size for a bad index, which then matches no row), pos[i] = i.
__global__ void k_index_keys(const int64_t *idx, int64_t k, int64_t size, uint64_t *keys, int64_t *pos, int *err,
                             int tag) {
    NBC_GRID_STRIDE(i, k) {
        int64_t t = idx[i];
        bool ok = t >= 0 && t < size;
        if (!ok) raise(err, ERR_INDEX, tag);
        keys[i] = ok ? (uint64_t)t : (uint64_t)size;
        pos[i] = i;
    }
}

// The index's values sorted stably (keys) with their positions (pos): the
// positions of one value are contiguous and increasing.
struct SortedIndex {
    Scratch s;
    const uint64_t *keys = nullptr;
    const int64_t *pos = nullptr;
};

static nb_status sort_index(nb_backend *be, const char *slot, const nb_kview *index, int64_t size, SortedIndex *si) {
    cudaStream_t st = stream_of(be);
    const int64_t k = index->shape[0];
    const int bits = bits_for((uint64_t)size);
    size_t tb = 0;
    NBC_TRY(slot, cub::DeviceRadixSort::SortPairs(nullptr, tb, (const uint64_t *)nullptr, (uint64_t *)nullptr,
                                                  (const int64_t *)nullptr, (int64_t *)nullptr, k, 0, bits, st));
    Carve c;
    size_t o_k0 = c.take<uint64_t>(k), o_k1 = c.take<uint64_t>(k), o_p0 = c.take<int64_t>(k),
           o_p1 = c.take<int64_t>(k), o_t = c.take<char>((int64_t)tb);
    if (!si->s.alloc(be, c.used))
        return nb_set_error(NB_ERR_OOM, "%s: out of memory for %zu bytes of workspace", slot, c.used);
    uint64_t *k0 = at<uint64_t>(si->s, o_k0), *k1 = at<uint64_t>(si->s, o_k1);
    int64_t *p0 = at<int64_t>(si->s, o_p0), *p1 = at<int64_t>(si->s, o_p1);
    k_index_keys<<<blocks_for(k), THREADS, 0, st>>>((const int64_t *)index->data, k, size, k0, p0, err_word(be),
                                                    slot_tag(slot));
    nb_status r = launched(slot);
    if (r != NB_OK) return r;
    if (k <= 1) { // one value is sorted: no radix sort (a KV cache written at one position per step)
        si->keys = k0, si->pos = p0;
        return NB_OK;
    }
    NBC_TRY(slot, cub::DeviceRadixSort::SortPairs(at<void>(si->s, o_t), tb, (const uint64_t *)k0, k1,
                                                  (const int64_t *)p0, p1, k, 0, bits, st));
    count_launch();
    si->keys = k1, si->pos = p1;
    return NB_OK;
}

// First position in keys[0, k) whose key is >= v.
__device__ inline int64_t lower_bound(const uint64_t *keys, int64_t k, uint64_t v) {
    int64_t lo = 0, hi = k;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// ---- index_add -------------------------------------------------------------------------------

// 0 + gb[pos[lo] * wv + c] + ... + gb[pos[hi - 1] * wv + c]: one run's
// V-element column c, the positions in index order.
template <typename T, int V>
__device__ inline Vec<T, V> run_sum(const Vec<T, V> *gb, const int64_t *pos, int64_t lo, int64_t hi, int64_t wv,
                                    int64_t c) {
    Vec<T, V> acc;
#pragma unroll
    for (int e = 0; e < V; e++) acc.v[e] = (T)0;
    for (int64_t j = lo; j < hi; j++) {
        Vec<T, V> v = gb[pos[j] * wv + c];
#pragma unroll
        for (int e = 0; e < V; e++) acc.v[e] = wadd(acc.v[e], v.v[e]);
    }
    return acc;
}

// gx rows [outer * size] of inner elements, V at a time: row (o, r) =
// 0 + g[o, p1] + g[o, p2] + ... over the positions p of r's run, in index
// order; zero for rows not hit and for skip.
template <typename T, int V>
__global__ void k_index_add(const T *g, T *gx, const uint64_t *keys, const int64_t *pos, int64_t k, int64_t size,
                            int64_t rows, int64_t inner, int64_t skip) {
    using W = Vec<T, V>;
    const int64_t wv = inner / V;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        int64_t o = row / size, r = row - o * size, lo = 0, hi = 0;
        if (r != skip) {
            lo = lower_bound(keys, k, (uint64_t)r);
            hi = lower_bound(keys, k, (uint64_t)r + 1);
        }
        const W *gb = (const W *)(g + o * k * inner);
        W *dst = (W *)(gx + row * inner);
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < wv; c += (int64_t)gridDim.x * blockDim.x)
            dst[c] = run_sum<T, V>(gb, pos, lo, hi, wv, c);
    }
}

// The same sums for a large table (size > k: most rows not hit), gx
// already zeroed: one block row per (o, j) of the sorted index that starts
// a run, writing that run's row only (so the grid follows the index, not
// the 30522 rows of a vocabulary: bert's word-embedding gradient took about
// 0.2 ms in the per-row kernel, most of it in the rows' binary searches).
// ACC: the run's sum is added to the row (a parameter's .grad) instead.
template <typename T, int V, bool ACC>
__global__ void k_index_add_runs(const T *g, T *gx, const uint64_t *keys, const int64_t *pos, int64_t k, int64_t size,
                                 int64_t outer, int64_t inner, int64_t skip) {
    using W = Vec<T, V>;
    const int64_t wv = inner / V;
    for (int64_t bj = blockIdx.y; bj < outer * k; bj += gridDim.y) {
        int64_t o = bj / k, j = bj - o * k;
        uint64_t r = keys[j];
        if ((j > 0 && keys[j - 1] == r) || r >= (uint64_t)size || (int64_t)r == skip) continue; // not a run's start
        int64_t hi = j + 1 + lower_bound(keys + j + 1, k - j - 1, r + 1);
        const W *gb = (const W *)(g + o * k * inner);
        W *dst = (W *)(gx + (o * size + (int64_t)r) * inner);
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < wv; c += (int64_t)gridDim.x * blockDim.x) {
            W sum = run_sum<T, V>(gb, pos, j, hi, wv, c);
            if (ACC) {
                W d = dst[c];
#pragma unroll
                for (int e = 0; e < V; e++) sum.v[e] = wadd(d.v[e], sum.v[e]);
            }
            dst[c] = sum;
        }
    }
}

template <typename T, bool ACC>
static void launch_runs(cudaStream_t st, bool wide, const nb_kview *gx, const nb_kview *g, const SortedIndex &si,
                        int64_t k, int64_t size, int64_t outer, int64_t inner, int64_t skip) {
    constexpr int VW = 16 / (int)sizeof(T);
    RowGrid rr = row_grid(outer * k, wide ? inner / VW : inner);
    if (wide)
        k_index_add_runs<T, VW, ACC><<<rr.grid, rr.block, 0, st>>>((const T *)g->data, (T *)gx->data, si.keys, si.pos,
                                                                    k, size, outer, inner, skip);
    else
        k_index_add_runs<T, 1, ACC><<<rr.grid, rr.block, 0, st>>>((const T *)g->data, (T *)gx->data, si.keys, si.pos,
                                                                   k, size, outer, inner, skip);
}

template <typename T>
static nb_status index_add_t(nb_backend *be, const nb_kview *gx, const nb_kview *g, const SortedIndex &si, int64_t k,
                             int64_t size, int64_t outer, int64_t inner, int64_t skip, bool accumulate) {
    constexpr int VW = 16 / (int)sizeof(T);
    int64_t rows = outer * size;
    bool wide = inner % VW == 0 && ((uintptr_t)gx->data | (uintptr_t)g->data) % 16 == 0;
    cudaStream_t st = stream_of(be);
    if (accumulate) { // the hit rows, added to
        launch_runs<T, true>(st, wide, gx, g, si, k, size, outer, inner, skip);
        return launched("index_add");
    }
    if (size > k) { // zeros, then the hit rows
        NBC_TRY("index_add", cudaMemsetAsync(gx->data, 0, sizeof(T) * (size_t)(rows * inner), st));
        launch_runs<T, false>(st, wide, gx, g, si, k, size, outer, inner, skip);
        return launched("index_add");
    }
    RowGrid rg = row_grid(rows, wide ? inner / VW : inner);
    if (wide)
        k_index_add<T, VW><<<rg.grid, rg.block, 0, st>>>((const T *)g->data, (T *)gx->data, si.keys, si.pos, k, size,
                                                          rows, inner, skip);
    else
        k_index_add<T, 1><<<rg.grid, rg.block, 0, st>>>((const T *)g->data, (T *)gx->data, si.keys, si.pos, k, size,
                                                         rows, inner, skip);
    return launched("index_add");
}

// ---- index_copy ------------------------------------------------------------------------------

// For each (o, j) of the sorted index whose j is the last of its run (the
// last repeat in index order): out row o * size + keys[j] = src row
// o * k + pos[j]; w units per row. Each out row is written by one block row.
template <typename U>
__global__ void k_index_copy(const U *src, U *out, const uint64_t *keys, const int64_t *pos, int64_t k, int64_t size,
                             int64_t rows, int64_t w) {
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        int64_t o = row / k, j = row - o * k;
        uint64_t key = keys[j];
        if (key >= (uint64_t)size || (j + 1 < k && keys[j + 1] == key)) continue; // bad, or not the last
        const U *s = src + (o * k + pos[j]) * w;
        U *d = out + (o * size + (int64_t)key) * w;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < w; c += (int64_t)gridDim.x * blockDim.x)
            d[c] = s[c];
    }
}

// One index (a KV cache written at one position per step): no sorted index,
// the index read and checked here. out row o * size + idx[0] = src row o.
template <typename U>
__global__ void k_index_copy1(const U *src, U *out, const int64_t *idx, int64_t size, int64_t rows, int64_t w,
                              int *err, int tag) {
    const int64_t t = idx[0];
    if (t < 0 || t >= size) {
        if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) raise(err, ERR_INDEX, tag);
        return;
    }
    for (int64_t o = blockIdx.y; o < rows; o += gridDim.y) {
        const U *s = src + o * w;
        U *d = out + (o * size + t) * w;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < w; c += (int64_t)gridDim.x * blockDim.x)
            d[c] = s[c];
    }
}

// ---- where ---------------------------------------------------------------------------------

template <typename U> __global__ void k_where(Iter<4> it) {
    NBC_GRID_STRIDE(i, it.numel) {
        int64_t off[4];
        iter_off(it, i, off);
        bool c = ((const uint8_t *)it.ptr[1])[off[1]] != 0;
        ((U *)it.ptr[0])[off[0]] = c ? ((const U *)it.ptr[2])[off[2]] : ((const U *)it.ptr[3])[off[3]];
    }
}

// ---- nonzero ---------------------------------------------------------------------------------

constexpr int NZ_T = 256, NZ_PER = 16; // a block takes NZ_T * NZ_PER positions, a thread NZ_PER in a row
constexpr int64_t NZ_BLOCK = (int64_t)NZ_T * NZ_PER;

// Element != 0 (NaN counts, -0.0 does not); U is the dtype's storage type.
template <typename U> __device__ inline bool nz_of(U v) { return v != (U)0; }
__device__ inline bool nz_half(uint16_t bits) { return (bits & 0x7FFF) != 0; } // float16/bfloat16: +-0 are zero

template <typename U, bool HALF> __device__ inline uint32_t nz_mask(const Iter<1> &it, int64_t p0, int64_t numel) {
    uint32_t m = 0;
    for (int j = 0; j < NZ_PER; j++) {
        int64_t p = p0 + j, off[1];
        if (p >= numel) break;
        iter_off(it, p, off);
        U v = ((const U *)it.ptr[0])[off[0]];
        bool nz;
        if constexpr (HALF) nz = nz_half(v);
        else nz = nz_of(v);
        if (nz) m |= 1u << j;
    }
    return m;
}

// Pass 1: counts[b] = the nonzero elements of block b's positions.
template <typename U, bool HALF> __global__ void __launch_bounds__(NZ_T) k_nz_count(Iter<1> it, int64_t *counts) {
    __shared__ int64_t sm[NZ_T / 32];
    int64_t p0 = (int64_t)blockIdx.x * NZ_BLOCK + (int64_t)threadIdx.x * NZ_PER;
    int64_t c = __popc(nz_mask<U, HALF>(it, p0, it.numel));
    c = group_reduce(c, NZ_T, Plus<int64_t>(), sm);
    if (threadIdx.x == 0) counts[blockIdx.x] = c;
}

// Pass 2 (one block of 1024): counts become exclusive offsets; *total = the
// sum. With expect >= 0, a total != expect is an error (out's rows do not
// match the count).
__global__ void __launch_bounds__(1024) k_nz_scan(int64_t *counts, int64_t nblk, int64_t *total, int64_t expect,
                                                  int *err, int tag) {
    __shared__ int64_t a[2][1024];
    const int t = threadIdx.x;
    const int64_t per = (nblk + 1023) / 1024, b0 = t * per, b1 = b0 + per < nblk ? b0 + per : nblk;
    int64_t s = 0;
    for (int64_t b = b0; b < b1; b++) s += counts[b];
    int cur = 0;
    a[0][t] = s;
    __syncthreads();
    for (int o = 1; o < 1024; o <<= 1) { // inclusive scan over the threads (double-buffered)
        int64_t v = a[cur][t];
        if (t >= o) v += a[cur][t - o];
        a[cur ^ 1][t] = v;
        cur ^= 1;
        __syncthreads();
    }
    int64_t run = a[cur][t] - s;
    for (int64_t b = b0; b < b1; b++) {
        int64_t c = counts[b];
        counts[b] = run;
        run += c;
    }
    if (t == 1023) {
        *total = a[cur][1023];
        if (expect >= 0 && a[cur][1023] != expect) raise(err, ERR_INDEX, tag);
    }
}

struct Shape {
    int64_t s[MAXD];
};

// Pass 3: block b writes its nonzero positions from row counts[b] on, in
// order (rows >= n_out are not written: a count mismatch was reported).
template <typename U, bool HALF>
__global__ void __launch_bounds__(NZ_T) k_nz_write(Iter<1> it, const int64_t *offsets, int64_t *out, int64_t n_out,
                                                   int ndim, Shape shape, bool flat) {
    __shared__ int a[2][NZ_T];
    const int t = threadIdx.x;
    const int64_t p0 = (int64_t)blockIdx.x * NZ_BLOCK + (int64_t)t * NZ_PER;
    uint32_t m = nz_mask<U, HALF>(it, p0, it.numel);
    int c = __popc(m), cur = 0;
    a[0][t] = c;
    __syncthreads();
    for (int o = 1; o < NZ_T; o <<= 1) {
        int v = a[cur][t];
        if (t >= o) v += a[cur][t - o];
        a[cur ^ 1][t] = v;
        cur ^= 1;
        __syncthreads();
    }
    int64_t row = offsets[blockIdx.x] + (a[cur][t] - c);
    for (int j = 0; j < NZ_PER; j++) {
        if (!(m >> j & 1u)) continue;
        int64_t p = p0 + j;
        if (row < n_out) {
            if (flat) {
                out[row] = p;
            } else {
                int64_t rem = p;
                for (int d = ndim - 1; d >= 0; d--) {
                    int64_t q = rem / shape.s[d];
                    out[row * ndim + d] = rem - q * shape.s[d];
                    rem = q;
                }
            }
        }
        row++;
    }
}

template <typename U, bool HALF>
static nb_status nonzero_u(nb_backend *be, const nb_kview *out, int64_t *count, const nb_kview *x) {
    cudaStream_t st = stream_of(be);
    if (!out && stream_capturing(st)) // the count comes back to the host: a wait a graph cannot hold
        return nb_set_error(NB_ERR_STATE, "nonzero: the count of nonzero elements comes back to the host, which a "
                                          "step captured in a CUDA graph cannot do");
    const nb_kview *v[1] = {x};
    Iter<1> it = make_iter<1>(v);
    int64_t nblk = (it.numel + NZ_BLOCK - 1) / NZ_BLOCK;
    if (nblk > 0x7fffffffLL) return nb_set_error(NB_ERR_UNSUPPORTED, "nonzero: input of %lld elements is too large",
                                                 (long long)it.numel);
    Scratch s;
    if (!s.alloc(be, sizeof(int64_t) * (size_t)(nblk + 1)))
        return nb_set_error(NB_ERR_OOM, "nonzero: out of memory for %lld block counts", (long long)nblk);
    int64_t *counts = s.as<int64_t>(), *total = counts + nblk;
    k_nz_count<U, HALF><<<(unsigned)nblk, NZ_T, 0, st>>>(it, counts);
    nb_status r = launched("nonzero");
    if (r != NB_OK) return r;
    int64_t expect = out ? out->shape[0] : -1;
    k_nz_scan<<<1, 1024, 0, st>>>(counts, nblk, total, expect, err_word(be), slot_tag("nonzero"));
    if ((r = launched("nonzero")) != NB_OK) return r;
    if (!out) { // the count to the host: this slot synchronizes (torch.nonzero does too)
        NBC_TRY("nonzero", cudaMemcpyAsync(count, total, sizeof(int64_t), cudaMemcpyDeviceToHost, st));
        NBC_TRY("nonzero", cudaStreamSynchronize(st));
        count_sync(be);
        return NB_OK;
    }
    Shape sh;
    for (int d = 0; d < x->ndim; d++) sh.s[d] = x->shape[d];
    k_nz_write<U, HALF><<<(unsigned)nblk, NZ_T, 0, st>>>(it, counts, (int64_t *)out->data, out->shape[0], x->ndim, sh,
                                                         out->ndim == 1);
    return launched("nonzero");
}

} // namespace
} // namespace red
} // namespace nbc

using namespace nbc;
using namespace nbc::red;

extern "C" nb_status nb_cuda_index_select(nb_backend *be, const nb_kview *out, const nb_kview *x, int dim,
                                          const nb_kview *index) {
    int64_t outer, inner, k = index->shape[0], size = x->shape[dim];
    split_dims(x, dim, &outer, &inner);
    if (outer * k * inner == 0) return NB_OK;
    size_t es = nb_dtype_size(x->dtype), rb = (size_t)inner * es;
    int u = unit_for(rb, x->data, out->data);
    int64_t w = (int64_t)(rb / (size_t)u);
    switch (u) {
    case 16: return select_u<uint4>(be, out, x, index, outer, k, size, w);
    case 8: return select_u<uint64_t>(be, out, x, index, outer, k, size, w);
    case 4: return select_u<uint32_t>(be, out, x, index, outer, k, size, w);
    case 2: return select_u<uint16_t>(be, out, x, index, outer, k, size, w);
    default: return select_u<uint8_t>(be, out, x, index, outer, k, size, w);
    }
}

extern "C" nb_status nb_cuda_index_add(nb_backend *be, const nb_kview *gx, int dim, const nb_kview *index,
                                       const nb_kview *g, int64_t skip_index, bool accumulate) {
    nb_dtype dt = gx->dtype;
    int64_t outer, inner, k = index->shape[0], size = gx->shape[dim];
    split_dims(gx, dim, &outer, &inner);
    if (outer * size * inner == 0 || (k == 0 && accumulate)) return NB_OK;
    if (k == 0) { // nothing added: zeros (all-zero bits in every dtype here)
        NBC_TRY("index_add", cudaMemsetAsync(gx->data, 0, (size_t)(outer * size * inner) * nb_dtype_size(dt),
                                             stream_of(be)));
        return NB_OK;
    }
    SortedIndex si;
    nb_status st = sort_index(be, "index_add", index, size, &si);
    if (st != NB_OK) return st;
    switch (dt) {
    case NB_F32: return index_add_t<float>(be, gx, g, si, k, size, outer, inner, skip_index, accumulate);
    case NB_F64: return index_add_t<double>(be, gx, g, si, k, size, outer, inner, skip_index, accumulate);
    case NB_I32: return index_add_t<int32_t>(be, gx, g, si, k, size, outer, inner, skip_index, accumulate);
    case NB_I64: return index_add_t<int64_t>(be, gx, g, si, k, size, outer, inner, skip_index, accumulate);
    case NB_I8: return index_add_t<int8_t>(be, gx, g, si, k, size, outer, inner, skip_index, accumulate);
    case NB_I16: return index_add_t<int16_t>(be, gx, g, si, k, size, outer, inner, skip_index, accumulate);
    default: return index_add_t<uint8_t>(be, gx, g, si, k, size, outer, inner, skip_index, accumulate); // NB_U8
    }
}

extern "C" nb_status nb_cuda_index_copy(nb_backend *be, const nb_kview *out, int dim, const nb_kview *index,
                                        const nb_kview *src) {
    int64_t outer, inner, k = index->shape[0], size = out->shape[dim];
    split_dims(out, dim, &outer, &inner);
    if (outer * k * inner == 0) return NB_OK;
    SortedIndex si;
    if (k > 1) {
        nb_status st = sort_index(be, "index_copy", index, size, &si);
        if (st != NB_OK) return st;
    }
    size_t rb = (size_t)inner * nb_dtype_size(out->dtype);
    int u = unit_for(rb, out->data, src->data);
    int64_t w = (int64_t)(rb / (size_t)u), rows = outer * k;
    RowGrid rg = row_grid(rows, w);
    cudaStream_t s = stream_of(be);
    auto go = [&](auto tag) {
        using U = decltype(tag);
        if (k == 1)
            k_index_copy1<U><<<rg.grid, rg.block, 0, s>>>((const U *)src->data, (U *)out->data,
                                                           (const int64_t *)index->data, size, rows, w, err_word(be),
                                                           slot_tag("index_copy"));
        else
            k_index_copy<U><<<rg.grid, rg.block, 0, s>>>((const U *)src->data, (U *)out->data, si.keys, si.pos, k,
                                                          size, rows, w);
        return launched("index_copy");
    };
    switch (u) {
    case 16: return go(uint4());
    case 8: return go(uint64_t());
    case 4: return go(uint32_t());
    case 2: return go(uint16_t());
    default: return go(uint8_t());
    }
}

extern "C" nb_status nb_cuda_where(nb_backend *be, const nb_kview *out, const nb_kview *cond, const nb_kview *a,
                                   const nb_kview *b) {
    const nb_kview *v[4] = {out, cond, a, b};
    Iter<4> it = make_iter<4>(v);
    if (it.numel == 0) return NB_OK;
    unsigned grid = blocks_for(it.numel);
    cudaStream_t s = stream_of(be);
    switch (nb_dtype_size(out->dtype)) {
    case 1: k_where<uint8_t><<<grid, THREADS, 0, s>>>(it); break;
    case 2: k_where<uint16_t><<<grid, THREADS, 0, s>>>(it); break;
    case 4: k_where<uint32_t><<<grid, THREADS, 0, s>>>(it); break;
    default: k_where<uint64_t><<<grid, THREADS, 0, s>>>(it); break;
    }
    return launched("where");
}

extern "C" nb_status nb_cuda_nonzero(nb_backend *be, const nb_kview *out, int64_t *count, const nb_kview *x) {
    char b1[VSTR], b2[VSTR];
    if (numel(x) == 0) { // out's rows must be the count (its dtype and layout: backend/check/index.c)
        if (!out) *count = 0;
        else if (out->shape[0] != 0)
            return nb_set_error(NB_ERR_INVALID_ARG, "nonzero: out %s must have 0 rows for the empty input %s",
                                vstr(out, b1, sizeof b1), vstr(x, b2, sizeof b2));
        return NB_OK;
    }
    switch (x->dtype) {
    case NB_F32: return nonzero_u<float, false>(be, out, count, x);
    case NB_F64: return nonzero_u<double, false>(be, out, count, x);
    case NB_I32: return nonzero_u<int32_t, false>(be, out, count, x);
    case NB_I64: return nonzero_u<int64_t, false>(be, out, count, x);
    case NB_I16: return nonzero_u<int16_t, false>(be, out, count, x);
    case NB_F16:
    case NB_BF16: return nonzero_u<uint16_t, true>(be, out, count, x);
    default: return nonzero_u<uint8_t, false>(be, out, count, x); // uint8, int8, bool
    }
}
