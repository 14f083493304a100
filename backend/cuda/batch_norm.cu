// batch_norm.cu - batch norm forward and backward on CUDA over x [N, C, *]
// (contiguous, float32/float64), per channel C with M = N * prod(*) values
// each; the formulas are backend/cpu/batch_norm.c's (PyTorch's):
//   training: mean = sum(x)/M, var = sum((x - mean)^2)/M (biased, two
//             passes), invstd = 1/sqrt(var + eps) saved; running stats
//             r = (1 - momentum) r + momentum stat, with var * M/(M-1)
//             (NaN for M == 1; an empty batch leaves them alone)
//   eval:     mean, var from the running statistics
//   y = x * scale + shift with scale = w*invstd, shift = b - mean*scale
//   backward: gx = (gy - sum(gy)/M - (x - mean) * sum(gy*(x-mean))*invstd^2/M) * w*invstd
//             (eval: gx = gy * w*invstd), gweight = sum(gy*(x-mean))*invstd,
//             gbias = sum(gy).
// Sums accumulate in double without atomics: each channel's values (planes
// n = 0..N-1 in order) are cut into chunks of whole planes fixed by the
// shapes; one block sums a chunk (thread partials, then a fixed tree) into
// scratch, and the per-channel step adds the chunk partials in order. The
// per-channel coefficients are computed in double and rounded to the dtype
// before the elementwise pass, as the CPU does.
#include <math.h>

#include "block_reduce.cuh"
#include "cuda_common.cuh"

namespace nbc {
namespace {

constexpr int64_t BN_CHUNK = 4096; // values per reduction block (at least one plane)

struct BnGeom {
    int64_t N, C, S, M; // x is [N, C, S], M = N*S
    int64_t NP, P;      // planes per chunk, chunks per channel
};

// Block b of a reduction: channel b / P, chunk b % P = planes [n0, n1).
__device__ inline void chunk_of(const BnGeom &g, int64_t b, int64_t *c, int64_t *n0, int64_t *n1) {
    *c = b / g.P;
    int64_t k = b % g.P;
    *n0 = k * g.NP;
    *n1 = *n0 + g.NP < g.N ? *n0 + g.NP : g.N;
}
__device__ inline int64_t addr(const BnGeom &g, int64_t c, int64_t n0, int64_t j) {
    int64_t n = n0 + j / g.S, s = j % g.S;
    return (n * g.C + c) * g.S + s;
}
// sum of a channel's chunk partials, in chunk order
__device__ inline double chan_total(const double *part, int64_t c, int64_t P) {
    double s = 0;
    for (int64_t k = 0; k < P; k++) s += part[c * P + k];
    return s;
}

// part[b] = sum of x over block b's chunk.
template <typename T> __global__ void k_sum(double *part, const T *__restrict__ x, BnGeom g) {
    __shared__ double red[32];
    for (int64_t b = blockIdx.x; b < g.C * g.P; b += gridDim.x) { // uniform across the block
        int64_t c, n0, n1;
        chunk_of(g, b, &c, &n0, &n1);
        double acc = 0;
        for (int64_t j = threadIdx.x; j < (n1 - n0) * g.S; j += blockDim.x) acc += (double)x[addr(g, c, n0, j)];
        double s = block_sum(acc, red);
        if (threadIdx.x == 0) part[b] = s;
    }
}

// part2[b] = sum of (x - mean)^2 over block b's chunk, mean from part1.
template <typename T> __global__ void k_sqdev(double *part2, const double *part1, const T *__restrict__ x, BnGeom g) {
    __shared__ double red[32];
    __shared__ double mean_s;
    for (int64_t b = blockIdx.x; b < g.C * g.P; b += gridDim.x) {
        int64_t c, n0, n1;
        chunk_of(g, b, &c, &n0, &n1);
        __syncthreads(); // mean_s of the previous b has been read
        if (threadIdx.x == 0) mean_s = chan_total(part1, c, g.P) / (double)g.M;
        __syncthreads();
        const double mean = mean_s;
        double acc = 0;
        for (int64_t j = threadIdx.x; j < (n1 - n0) * g.S; j += blockDim.x) {
            double d = (double)x[addr(g, c, n0, j)] - mean;
            acc += d * d;
        }
        double s = block_sum(acc, red);
        if (threadIdx.x == 0) part2[b] = s;
    }
}

// Per-channel views (NULL allowed) passed to the coefficient kernels.
template <typename T> struct ChanPtrs {
    T *save_mean, *save_invstd, *rmean, *rvar, *gweight, *gbias;
    const T *weight, *bias;
};

// Forward coefficients of every channel (backend/cpu/batch_norm.c's
// fwd_coeffs): writes save_mean/save_invstd and the running stats in
// training; scale/shift rounded to T (kept in double slots).
template <typename T>
__global__ void k_fwd_coeffs(double *scale, double *shift, const double *part1, const double *part2, ChanPtrs<T> v,
                             BnGeom g, bool training, double momentum, double eps) {
    NBC_GRID_STRIDE(c, g.C) {
        double mean = 0, var = 0, invstd;
        if (training) {
            if (g.M > 0) {
                mean = chan_total(part1, c, g.P) / (double)g.M;
                var = chan_total(part2, c, g.P) / (double)g.M;
            }
            invstd = 1.0 / sqrt(var + eps);
            v.save_mean[c] = (T)mean;
            v.save_invstd[c] = (T)invstd;
            if (v.rmean && g.M > 0) {
                double unbiased = g.M > 1 ? var * (double)g.M / (double)(g.M - 1) : NAN;
                // no FMA contraction: the CPU's rounding
                v.rmean[c] = (T)__dadd_rn(__dmul_rn(1 - momentum, (double)v.rmean[c]), __dmul_rn(momentum, mean));
                v.rvar[c] = (T)__dadd_rn(__dmul_rn(1 - momentum, (double)v.rvar[c]), __dmul_rn(momentum, unbiased));
            }
        } else {
            mean = (double)v.rmean[c];
            invstd = 1.0 / sqrt((double)v.rvar[c] + eps);
        }
        double w = v.weight ? (double)v.weight[c] : 1.0, b = v.bias ? (double)v.bias[c] : 0.0;
        double sc = w * invstd;
        scale[c] = (double)(T)sc;
        shift[c] = (double)(T)__dsub_rn(b, __dmul_rn(mean, sc));
    }
}

// Elementwise pass over x [N, C, S]: y = x * scale[c] + shift[c] (forward),
// or the gx formula (backward); I is the index type (32-bit division when
// the tensor allows it).
template <typename T, typename I>
__global__ void k_apply(T *__restrict__ y, const T *__restrict__ x, const double *scale, const double *shift, I total,
                        I S, I C) {
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        I c = (i / S) % C;
        y[i] = x[i] * (T)scale[c] + (T)shift[c];
    }
}

// Backward sums of block b's chunk: g[b] = sum(gy), gx[b] = sum(gy * (x - mean)),
// mean the forward's (save_mean in training, running_mean in eval).
template <typename T>
__global__ void k_gsums(double *part_g, double *part_gx, const T *__restrict__ gy, const T *__restrict__ x,
                        const T *mean_src, BnGeom g) {
    __shared__ double red[32];
    for (int64_t b = blockIdx.x; b < g.C * g.P; b += gridDim.x) {
        int64_t c, n0, n1;
        chunk_of(g, b, &c, &n0, &n1);
        const double mean = (double)mean_src[c];
        double a = 0, bx = 0;
        for (int64_t j = threadIdx.x; j < (n1 - n0) * g.S; j += blockDim.x) {
            int64_t e = addr(g, c, n0, j);
            double gv = (double)gy[e];
            a += gv;
            bx += gv * ((double)x[e] - mean);
        }
        double sa = block_sum(a, red);
        double sb = block_sum(bx, red);
        if (threadIdx.x == 0) part_g[b] = sa, part_gx[b] = sb;
    }
}

// Backward coefficients (bwd_stats + bwd_coeffs of the CPU): gweight,
// gbias, and coef[4c..4c+3] = mean, gmean, k, wi rounded to T.
template <typename T>
__global__ void k_bwd_coeffs(double *coef, const double *part_g, const double *part_gx, ChanPtrs<T> v,
                             const T *mean_src, BnGeom g, bool training, bool sums, double eps) {
    NBC_GRID_STRIDE(c, g.C) {
        double mean, invstd;
        if (training) mean = (double)v.save_mean[c], invstd = (double)v.save_invstd[c];
        else mean = (double)mean_src[c], invstd = 1.0 / sqrt((double)v.rvar[c] + eps);
        double sg = sums ? chan_total(part_g, c, g.P) : 0, sgx = sums ? chan_total(part_gx, c, g.P) : 0;
        if (v.gweight) v.gweight[c] = (T)(sgx * invstd);
        if (v.gbias) v.gbias[c] = (T)sg;
        double wi = (v.weight ? (double)v.weight[c] : 1.0) * invstd;
        double gmean = training && g.M > 0 ? sg / (double)g.M : 0;
        double k = training && g.M > 0 ? sgx * invstd * invstd / (double)g.M : 0;
        coef[4 * c] = (double)(T)mean, coef[4 * c + 1] = (double)(T)gmean;
        coef[4 * c + 2] = (double)(T)k, coef[4 * c + 3] = (double)(T)wi;
    }
}

template <typename T, typename I>
__global__ void k_gx(T *__restrict__ gx, const T *__restrict__ gy, const T *__restrict__ x, const double *coef,
                     I total, I S, I C, bool training) {
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        I c = (i / S) % C;
        const T wi = (T)coef[4 * c + 3];
        if (training) {
            const T m = (T)coef[4 * c], gm = (T)coef[4 * c + 1], k = (T)coef[4 * c + 2];
            gx[i] = (gy[i] - gm - (x[i] - m) * k) * wi;
        } else {
            gx[i] = gy[i] * wi;
        }
    }
}

BnGeom geom(const nb_kview *x) {
    BnGeom g = {};
    g.N = x->shape[0], g.C = x->shape[1], g.S = 1;
    for (int d = 2; d < x->ndim; d++) g.S *= x->shape[d];
    g.M = g.N * g.S;
    if (g.M > 0) {
        g.NP = BN_CHUNK / g.S > 1 ? BN_CHUNK / g.S : 1;
        g.P = (g.N + g.NP - 1) / g.NP;
    }
    return g;
}

unsigned grid_for(int64_t blocks) { return (unsigned)(blocks < 65535LL * 16 ? blocks : 65535LL * 16); }

template <typename T> T *ptr(const nb_kview *v) { return v ? (T *)v->data : nullptr; }

template <typename T>
nb_status launch_apply(nb_backend *be, const char *slot, T *y, const T *x, const double *scale, const double *shift,
                       const BnGeom &g) {
    int64_t total = g.M * g.C;
    if (total == 0) return NB_OK;
    if (total <= (int64_t)INT32_MAX) // i + the grid stride stays below 2^32
        k_apply<T, uint32_t><<<blocks_for(total), THREADS, 0, stream_of(be)>>>(y, x, scale, shift, (uint32_t)total,
                                                                               (uint32_t)g.S, (uint32_t)g.C);
    else
        k_apply<T, uint64_t><<<blocks_for(total), THREADS, 0, stream_of(be)>>>(y, x, scale, shift, (uint64_t)total,
                                                                               (uint64_t)g.S, (uint64_t)g.C);
    return launched(slot);
}

template <typename T>
nb_status launch_gx(nb_backend *be, const char *slot, T *gx, const T *gy, const T *x, const double *coef,
                    const BnGeom &g, bool training) {
    int64_t total = g.M * g.C;
    if (total == 0) return NB_OK;
    if (total <= (int64_t)INT32_MAX) // i + the grid stride stays below 2^32
        k_gx<T, uint32_t><<<blocks_for(total), THREADS, 0, stream_of(be)>>>(gx, gy, x, coef, (uint32_t)total,
                                                                            (uint32_t)g.S, (uint32_t)g.C, training);
    else
        k_gx<T, uint64_t><<<blocks_for(total), THREADS, 0, stream_of(be)>>>(gx, gy, x, coef, (uint64_t)total,
                                                                            (uint64_t)g.S, (uint64_t)g.C, training);
    return launched(slot);
}

} // namespace
} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_batch_norm(nb_backend *be, const nb_kview *out, const nb_kview *save_mean,
                                        const nb_kview *save_invstd, const nb_batch_norm_args *args) {
    const nb_kview *x = args->x, *weight = args->weight, *bias = args->bias, *running_mean = args->running_mean,
                   *running_var = args->running_var;
    const bool training = args->training;
    const double momentum = args->momentum, eps = args->eps;
    const char *name = "batch_norm"; // checked: backend/check/batch_norm.c
    BnGeom g = geom(x);
    if (g.C == 0) return NB_OK;
    return dispatch_float(name, x->dtype, [&](auto tag) {
        using T = decltype(tag);
        bool reduce = training && g.M > 0;
        int64_t nb = g.C * g.P; // reduction blocks
        Scratch sc;             // part1, part2 [C*P] (training), scale, shift [C]
        double *part1 = nullptr, *part2 = nullptr, *scale, *shift;
        if (!sc.alloc(be, sizeof(double) * (size_t)((reduce ? 2 * nb : 0) + 2 * g.C))) return nb_last_status();
        scale = sc.as<double>() + (reduce ? 2 * nb : 0), shift = scale + g.C;
        cudaStream_t s = stream_of(be);
        if (reduce) {
            part1 = sc.as<double>(), part2 = part1 + nb;
            k_sum<T><<<grid_for(nb), THREADS, 0, s>>>(part1, (const T *)x->data, g);
            nb_status e = launched(name);
            if (e != NB_OK) return e;
            k_sqdev<T><<<grid_for(nb), THREADS, 0, s>>>(part2, part1, (const T *)x->data, g);
            if ((e = launched(name)) != NB_OK) return e;
        }
        ChanPtrs<T> v = {ptr<T>(save_mean), ptr<T>(save_invstd), ptr<T>(running_mean), ptr<T>(running_var),
                         nullptr, nullptr, ptr<T>(weight), ptr<T>(bias)};
        k_fwd_coeffs<T><<<blocks_for(g.C), THREADS, 0, s>>>(scale, shift, part1, part2, v, g, training, momentum, eps);
        nb_status e = launched(name);
        if (e != NB_OK) return e;
        return launch_apply<T>(be, name, (T *)out->data, (const T *)x->data, scale, shift, g);
    });
}

extern "C" nb_status nb_cuda_batch_norm_backward(nb_backend *be, const nb_kview *gx, const nb_kview *gweight,
                                                 const nb_kview *gbias, const nb_kview *gy, const nb_kview *save_mean,
                                                 const nb_kview *save_invstd, const nb_batch_norm_args *args) {
    const nb_kview *x = args->x, *weight = args->weight, *running_mean = args->running_mean,
                   *running_var = args->running_var;
    const bool training = args->training;
    const double eps = args->eps;
    const char *name = "batch_norm_backward"; // checked: backend/check/batch_norm.c
    BnGeom g = geom(x);
    if (g.C == 0) return NB_OK;
    return dispatch_float(name, x->dtype, [&](auto tag) {
        using T = decltype(tag);
        const T *mean_src = training ? ptr<T>(save_mean) : ptr<T>(running_mean);
        bool sums = (gweight || gbias || (gx && training)) && g.M > 0;
        int64_t nb = g.C * g.P;
        Scratch sc; // part_g, part_gx [C*P], coef [4C]
        if (!sc.alloc(be, sizeof(double) * (size_t)((sums ? 2 * nb : 0) + 4 * g.C))) return nb_last_status();
        double *part_g = sums ? sc.as<double>() : nullptr, *part_gx = sums ? part_g + nb : nullptr;
        double *coef = sc.as<double>() + (sums ? 2 * nb : 0);
        cudaStream_t s = stream_of(be);
        nb_status e;
        if (sums) {
            k_gsums<T><<<grid_for(nb), THREADS, 0, s>>>(part_g, part_gx, (const T *)gy->data, (const T *)x->data,
                                                        mean_src, g);
            if ((e = launched(name)) != NB_OK) return e;
        }
        ChanPtrs<T> v = {ptr<T>(save_mean), ptr<T>(save_invstd), ptr<T>(running_mean), ptr<T>(running_var),
                         ptr<T>(gweight), ptr<T>(gbias), ptr<T>(weight), nullptr};
        k_bwd_coeffs<T><<<blocks_for(g.C), THREADS, 0, s>>>(coef, part_g, part_gx, v, mean_src, g, training, sums, eps);
        if ((e = launched(name)) != NB_OK) return e;
        if (!gx) return NB_OK;
        return launch_gx<T>(be, name, (T *)gx->data, (const T *)gy->data, (const T *)x->data, coef, g, training);
    });
}
