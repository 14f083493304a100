// scan.cu - cumulative ops along one dim on CUDA (cumsum, cumprod, cummax,
// cummin, logcumsumexp) and their backward rules: the scan and
// scan_backward slots, with backend/cpu/scan.c's formulas line for line.
// One thread per line (every position of the other dims), walking its line
// sequentially along dim: each output has one evaluation order, so results
// are deterministic with no atomics. Neighbouring threads take neighbouring
// lines, so reads coalesce when dim is not the innermost dim. Floats
// accumulate in double, integers in int64 (wrapping). A float cumsum over
// a few long lines (a sampler's [1, vocab] row) would leave the GPU to one
// serial thread, so there the lines are cut into chunks of 8192 over many
// blocks: one kernel sums each chunk, a second scans each chunk from the
// sum of the chunks before it (each thread 8 neighbours in double, a
// fixed-order block scan over the threads). The order is fixed by the shape,
// so results are still deterministic; they can differ from the CPU's serial
// sums in the last bits of a float64 output (and, rarely, of a float32 one,
// where the two double sums round to neighbouring floats).
#include "block_reduce.cuh"
#include "red_util.cuh"

namespace nbc {
namespace red {
namespace { // internal linkage: no clash with other files' kernels

// PyTorch's _log_add_exp_helper (scan.c's log_add_exp): exact for
// infinities, NaN propagates.
__device__ inline double log_add_exp(double a, double b) {
    if (isnan(a) || isnan(b)) return a + b;
    double lo = fmin(a, b), hi = fmax(a, b);
    if (lo != hi || isfinite(lo)) return log1p(exp(lo - hi)) + hi;
    return a;
}

template <typename O> __device__ inline O int_out(int64_t v) {
    if constexpr (std::is_same<O, bool>::value) return v != 0;
    else return (O)v;
}

// ---- forward ----------------------------------------------------------------------------

// Lines: views 0 out, 1 indices (or out again), 2 x; st = their element
// steps along dim.
template <typename T>
__global__ void k_scan_float(Iter<3> it, int op, int64_t n, int64_t so, int64_t si, int64_t sx, bool has_idx) {
    NBC_GRID_STRIDE(l, it.numel) {
        int64_t off[3];
        iter_off(it, l, off);
        T *o = (T *)it.ptr[0] + off[0];
        int64_t *ix = (int64_t *)it.ptr[1] + off[1];
        const T *x = (const T *)it.ptr[2] + off[2];
        double acc = op == NB_REDUCE_PROD ? 1.0 : op == NB_REDUCE_LOGSUMEXP ? -INFINITY : 0.0;
        int64_t best = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = (double)x[i * sx];
            switch (op) {
            case NB_REDUCE_SUM: acc += v; break;
            case NB_REDUCE_PROD: acc *= v; break;
            case NB_REDUCE_LOGSUMEXP: acc = log_add_exp(acc, v); break;
            case NB_REDUCE_MAX:
                if (i == 0 || isnan(v) || (!isnan(acc) && v >= acc)) acc = v, best = i;
                break;
            default:
                if (i == 0 || isnan(v) || (!isnan(acc) && v <= acc)) acc = v, best = i;
                break;
            }
            o[i * so] = (T)acc;
            if (has_idx) ix[i * si] = best;
        }
    }
}

constexpr int LONG_THREADS = 1024, LONG_PER = 8, LONG_CHUNK = LONG_THREADS * LONG_PER;

// The inclusive scan of v over the block in a fixed order (warp shuffles, then
// the warp totals); every thread must call it. red: 32 doubles of shared.
__device__ inline double block_scan(double v, double *red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        double u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += u;
    }
    __syncthreads(); // red may still be read by an earlier use
    if (lane == 31) red[w] = v;
    __syncthreads();
    if (w == 0) {
        double t = red[lane];
        for (int o = 1; o < 32; o <<= 1) {
            double u = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t += u;
        }
        red[lane] = t;
    }
    __syncthreads();
    return w ? v + red[w - 1] : v;
}

// Long lines, first pass: block (chunk c, line l) sums its LONG_CHUNK elements
// (each thread every LONG_THREADS-th, in order; then a fixed tree) into
// part[l * chunks + c].
template <typename T>
__global__ void __launch_bounds__(LONG_THREADS) k_cumsum_parts(Iter<2> it, int64_t n, int64_t sx, double *part) {
    __shared__ double red[32];
    int64_t off[2];
    iter_off(it, blockIdx.y, off);
    const T *x = (const T *)it.ptr[1] + off[1];
    int64_t base = (int64_t)blockIdx.x * LONG_CHUNK;
    double s = 0;
#pragma unroll
    for (int j = 0; j < LONG_PER; j++) {
        int64_t i = base + j * LONG_THREADS + threadIdx.x;
        s += i < n ? (double)x[i * sx] : 0.0;
    }
    s = block_sum(s, red);
    if (threadIdx.x == 0) part[(int64_t)blockIdx.y * gridDim.x + blockIdx.x] = s;
}

// Second pass: the chunks before this one summed in order, then the chunk's
// scan, each thread taking LONG_PER neighbours (loads issued together).
template <typename T>
__global__ void __launch_bounds__(LONG_THREADS) k_cumsum_chunks(Iter<2> it, int64_t n, int64_t so, int64_t sx,
                                                                const double *part) {
    __shared__ double red[32], incl[LONG_THREADS], before;
    int64_t off[2];
    iter_off(it, blockIdx.y, off);
    T *o = (T *)it.ptr[0] + off[0];
    const T *x = (const T *)it.ptr[1] + off[1];
    if (threadIdx.x == 0) {
        double p = 0;
        for (unsigned c = 0; c < blockIdx.x; c++) p += part[(int64_t)blockIdx.y * gridDim.x + c];
        before = p;
    }
    int64_t i0 = (int64_t)blockIdx.x * LONG_CHUNK + (int64_t)threadIdx.x * LONG_PER;
    double v[LONG_PER], sum = 0;
#pragma unroll
    for (int j = 0; j < LONG_PER; j++) v[j] = i0 + j < n ? (double)x[(i0 + j) * sx] : 0.0;
#pragma unroll
    for (int j = 0; j < LONG_PER; j++) sum += v[j];
    incl[threadIdx.x] = block_scan(sum, red); // its barriers also publish `before`
    __syncthreads();
    double acc = before + (threadIdx.x ? incl[threadIdx.x - 1] : 0.0);
#pragma unroll
    for (int j = 0; j < LONG_PER; j++)
        if (i0 + j < n) {
            acc += v[j];
            o[(i0 + j) * so] = (T)acc;
        }
}

template <typename T, typename O>
__global__ void k_scan_int(Iter<3> it, int op, int64_t n, int64_t so, int64_t si, int64_t sx, bool has_idx) {
    NBC_GRID_STRIDE(l, it.numel) {
        int64_t off[3];
        iter_off(it, l, off);
        O *o = (O *)it.ptr[0] + off[0];
        int64_t *ix = (int64_t *)it.ptr[1] + off[1];
        const T *x = (const T *)it.ptr[2] + off[2];
        int64_t acc = op == NB_REDUCE_PROD ? 1 : 0, best = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = (int64_t)x[i * sx];
            switch (op) {
            case NB_REDUCE_SUM: acc = wadd(acc, v); break;
            case NB_REDUCE_PROD: acc = wmul(acc, v); break;
            case NB_REDUCE_MAX:
                if (i == 0 || v >= acc) acc = v, best = i;
                break;
            default:
                if (i == 0 || v <= acc) acc = v, best = i;
                break;
            }
            o[i * so] = int_out<O>(acc);
            if (has_idx) ix[i * si] = best;
        }
    }
}

// ---- backward ---------------------------------------------------------------------------

// Lines: views 0 gx, 1 g, 2 x, 3 out, 4 indices (unused ones are gx again);
// st = element steps along dim.
struct Steps {
    int64_t s[5];
};

template <typename T>
__global__ void k_scan_back(Iter<5> it, int op, int64_t n, Steps st, int *err, int tag) {
    NBC_GRID_STRIDE(l, it.numel) {
        int64_t off[5];
        iter_off(it, l, off);
        T *gx = (T *)it.ptr[0] + off[0];
        const T *g = (const T *)it.ptr[1] + off[1], *x = (const T *)it.ptr[2] + off[2],
                *out = (const T *)it.ptr[3] + off[3];
        const int64_t *idx = (const int64_t *)it.ptr[4] + off[4];
        const int64_t s0 = st.s[0], s1 = st.s[1], s2 = st.s[2], s3 = st.s[3], s4 = st.s[4];
        if (op == NB_REDUCE_SUM) { // reverse cumsum of g
            double acc = 0;
            for (int64_t i = n - 1; i >= 0; i--) {
                acc += (double)g[i * s1];
                gx[i * s0] = (T)acc;
            }
        } else if (op == NB_REDUCE_PROD) { // PyTorch's cumprod_backward, exact with zeros
            int64_t k = 0;
            while (k < n && (double)x[k * s2] != 0.0) k++; // the first zero, or n
            double acc = 0;
            for (int64_t i = k - 1; i >= 0; i--) { // before it: revcumsum(g * out) / x
                acc += (double)g[i * s1] * (double)out[i * s3];
                gx[i * s0] = (T)(acc / (double)x[i * s2]);
            }
            if (k < n) {
                // at it: sum_{j >= k} g_j prod_{m <= j, m != k} x_m, left to right
                double pr = k ? (double)out[(k - 1) * s3] : 1.0, s = (double)g[k * s1] * pr;
                for (int64_t i = k + 1; i < n; i++) {
                    pr *= (double)x[i * s2];
                    s += (double)g[i * s1] * pr;
                }
                gx[k * s0] = (T)s;
                for (int64_t i = k + 1; i < n; i++) gx[i * s0] = (T)0; // two zeros in each product
            }
        } else if (op == NB_REDUCE_LOGSUMEXP) { // T_i = g_i + exp(out_i - out_{i+1}) T_{i+1}
            double t = 0, next = 0;
            for (int64_t i = n - 1; i >= 0; i--) {
                double oi = (double)out[i * s3], xi = (double)x[i * s2];
                double r = i == n - 1 ? 0.0 : oi == next ? 1.0 : exp(oi - next);
                t = (double)g[i * s1] + r * t;
                gx[i * s0] = (T)(xi == oi ? t : exp(xi - oi) * t);
                next = oi;
            }
        } else { // MAX/MIN: g scattered to the indices in increasing position order
            for (int64_t i = 0; i < n; i++) gx[i * s0] = (T)0;
            for (int64_t i = 0; i < n; i++) {
                int64_t t = idx[i * s4];
                if (t < 0 || t >= n) { // reported at the next sync; never written out of bounds
                    raise(err, ERR_INDEX, tag);
                    continue;
                }
                gx[t * s0] = (T)((double)gx[t * s0] + (double)g[i * s1]);
            }
        }
    }
}

} // namespace
} // namespace red
} // namespace nbc

using namespace nbc;
using namespace nbc::red;

extern "C" nb_status nb_cuda_scan(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *indices,
                                  const nb_kview *x, int dim) {
    // checked: backend/check/scan.c
    bool ext = op == NB_REDUCE_MAX || op == NB_REDUCE_MIN;
    if (numel(x) == 0) return NB_OK;
    const nb_kview *iv = ext ? indices : out;
    nb_kview lv[3] = {lines_of(out, x, dim), lines_of(iv, x, dim), lines_of(x, x, dim)};
    const nb_kview *v[3] = {&lv[0], &lv[1], &lv[2]};
    Iter<3> it = make_iter<3>(v);
    int64_t n = x->shape[dim], so = out->strides[dim], si = iv->strides[dim], sx = x->strides[dim];
    unsigned grid = blocks_for(it.numel);
    cudaStream_t st = stream_of(be);
    if (op == NB_REDUCE_SUM && (x->dtype == NB_F32 || x->dtype == NB_F64) && n >= 2048 && it.numel <= 1024) {
        const nb_kview *v2[2] = {&lv[0], &lv[2]};
        Iter<2> it2 = make_iter<2>(v2);
        dim3 g((unsigned)((n + LONG_CHUNK - 1) / LONG_CHUNK), (unsigned)it.numel);
        Scratch part;
        if (!part.alloc(be, sizeof(double) * g.x * g.y)) return NB_ERR_OOM;
        if (x->dtype == NB_F32) {
            k_cumsum_parts<float><<<g, LONG_THREADS, 0, st>>>(it2, n, sx, part.as<double>());
            k_cumsum_chunks<float><<<g, LONG_THREADS, 0, st>>>(it2, n, so, sx, part.as<double>());
        } else {
            k_cumsum_parts<double><<<g, LONG_THREADS, 0, st>>>(it2, n, sx, part.as<double>());
            k_cumsum_chunks<double><<<g, LONG_THREADS, 0, st>>>(it2, n, so, sx, part.as<double>());
        }
        return launched("scan");
    }
    switch (x->dtype) {
    case NB_F32: k_scan_float<float><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext); break;
    case NB_F64: k_scan_float<double><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext); break;
    case NB_I32:
        if (ext) k_scan_int<int32_t, int32_t><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext);
        else k_scan_int<int32_t, int64_t><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext);
        break;
    case NB_I64: k_scan_int<int64_t, int64_t><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext); break;
    case NB_I8:
        if (ext) k_scan_int<int8_t, int8_t><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext);
        else k_scan_int<int8_t, int64_t><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext);
        break;
    case NB_I16:
        if (ext) k_scan_int<int16_t, int16_t><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext);
        else k_scan_int<int16_t, int64_t><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext);
        break;
    case NB_U8:
        if (ext) k_scan_int<uint8_t, uint8_t><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext);
        else k_scan_int<uint8_t, int64_t><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext);
        break;
    default: // bool: 0/1 bytes
        if (ext) k_scan_int<uint8_t, bool><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext);
        else k_scan_int<uint8_t, int64_t><<<grid, THREADS, 0, st>>>(it, op, n, so, si, sx, ext);
        break;
    }
    return launched("scan");
}

extern "C" nb_status nb_cuda_scan_backward(nb_backend *be, nb_reduce_op op, const nb_kview *gx, const nb_kview *g,
                                           const nb_kview *x, const nb_kview *out, const nb_kview *indices, int dim) {
    // checked (but the indices' values: the kernel's error word): backend/check/scan.c
    bool need_xo = op == NB_REDUCE_PROD || op == NB_REDUCE_LOGSUMEXP;
    bool need_i = op == NB_REDUCE_MAX || op == NB_REDUCE_MIN;
    const nb_kview *vs[] = {g, need_xo ? x : nullptr, need_xo ? out : nullptr, need_i ? indices : nullptr};
    if (numel(gx) == 0) return NB_OK;
    const nb_kview *use[5] = {gx, g, vs[1] ? vs[1] : gx, vs[2] ? vs[2] : gx, vs[3] ? vs[3] : gx};
    nb_kview lv[5];
    const nb_kview *v[5];
    Steps st;
    for (int k = 0; k < 5; k++) {
        lv[k] = lines_of(use[k], gx, dim);
        v[k] = &lv[k];
        st.s[k] = use[k]->strides[dim];
    }
    Iter<5> it = make_iter<5>(v);
    int *err = err_word(be);
    int tag = slot_tag("scan_backward");
    if (gx->dtype == NB_F32)
        k_scan_back<float><<<blocks_for(it.numel), THREADS, 0, stream_of(be)>>>(it, op, gx->shape[dim], st, err, tag);
    else
        k_scan_back<double><<<blocks_for(it.numel), THREADS, 0, stream_of(be)>>>(it, op, gx->shape[dim], st, err, tag);
    return launched("scan_backward");
}
