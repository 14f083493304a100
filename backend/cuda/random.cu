// random.cu - the random and dropout slots on CUDA: uniform, normal and bernoulli fills
// of a contiguous tensor by core/philox.h's layout (element i takes the 64
// bits of words 2*(i%2), 2*(i%2)+1 of counter block offset + i/2 under key
// seed), so values depend only on (seed, offset, i), never on the launch.
// A thread takes PER consecutive counter blocks, computes
// nb_philox4x32_10 for each and writes their 2 PER elements (one vector
// store where aligned).
// Formulas are the CPU backend's (backend/cpu/random.c):
//   uniform:   a + (b - a) u, u = (bits >> 11) 2^-53, rounded to the dtype
//              and kept below b; written with __dmul_rn/__dadd_rn (no FMA
//              contraction) and the float32 rounding and clamp constants
//              computed on the host, so the bits equal the CPU's.
//   bernoulli: 1 if (bits >> 11) < ceil(p 2^53) (the CPU's integer
//              compare), any of the six compute dtypes: the CPU's bits.
//   normal:    a + b n, n = nb_bits_to_normal(bits) (Box-Muller in
//              double). NOT bit-identical to the CPU: CUDA's double log and
//              cos are within 1-2 ulp but not correctly rounded as glibc's,
//              so n may differ in its last bits (relative ~1e-15, well
//              inside 1e-12); float32 results can then differ by one ulp
//              where the double lands next to a float rounding boundary.
#include <math.h>

#include "cuda_common.cuh"
#include "elementwise.cuh"
#include "philox.h"

namespace nbc {

// Per-call constants, computed on the host as the CPU computes them.
struct RandArgs {
    uint64_t seed, offset;
    const uint64_t *offset_base; // graph capture: added to offset on the device (random slot's contract)
    double a, ba, b, b_prev; // uniform: a, b - a, b, the double below b
    float fb, fb_prev;       // uniform float32: (float)b and the float below it
    uint64_t th;             // bernoulli: ceil(p 2^53)
    bool clamp;              // uniform with b > a: results stay below b
};

template <typename T, int DIST> __device__ __forceinline__ T rng_value(uint64_t bits, const RandArgs &r) {
    if constexpr (DIST == NB_RNG_BERNOULLI) {
        const bool one = (bits >> 11) < r.th;
        if constexpr (std::is_same<T, bool>::value) return one;
        else if constexpr (std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value)
            return Traits<T>::store(one ? 1.f : 0.f);
        else return one ? (T)1 : (T)0;
    } else {
        double v;
        if constexpr (DIST == NB_RNG_UNIFORM) v = __dadd_rn(r.a, __dmul_rn(r.ba, nb_bits_to_unit(bits)));
        else v = __dadd_rn(r.a, __dmul_rn(r.b, nb_bits_to_normal(bits)));
        if constexpr (std::is_same<T, float>::value) {
            float f = __double2float_rn(v);
            if (DIST == NB_RNG_UNIFORM && r.clamp && f >= r.fb) f = r.fb_prev;
            return f;
        } else {
            if (DIST == NB_RNG_UNIFORM && r.clamp && v >= r.b) v = r.b_prev;
            return v;
        }
    }
}

// Counter blocks a thread of k_random and k_dropout takes (2 elements
// each): the per-thread index and address work is shared by PER Philox
// chains, which run independently (measured on the H200: one block a
// thread spent about as many instructions around Philox as in it).
constexpr int PER = 4;

// Element k of a thread's 2 PER: the 64 bits of its block's words (k % 2) * 2, (k % 2) * 2 + 1.
__device__ __forceinline__ uint64_t bits_of(const nb_philox_u4 *w, int k) {
    const uint32_t *v = w[k / 2].v + (k % 2) * 2;
    return ((uint64_t)v[0] << 32) | v[1];
}

// The Philox words of the PER counter blocks from q0 on (a thread's group).
__device__ __forceinline__ void philox_group(nb_philox_u4 *w, int64_t q0, const RandArgs &r) {
    const uint64_t off = r.offset + (r.offset_base ? *r.offset_base : 0);
#pragma unroll
    for (int k = 0; k < PER; k++) w[k] = nb_philox4x32_10(off + (uint64_t)(q0 + k), 0, r.seed);
}

// Groups of PER counter blocks over n elements (a block is 2 elements).
__host__ __device__ inline int64_t philox_groups(int64_t n) { return (n / 2 + n % 2 + PER - 1) / PER; }

template <typename T, int DIST> __global__ void k_random(T *out, int64_t n, RandArgs r, bool vec) {
    NBC_GRID_STRIDE(g, philox_groups(n)) {
        const int64_t q0 = g * PER, i0 = 2 * q0;
        nb_philox_u4 w[PER];
        philox_group(w, q0, r);
        if (vec && i0 + 2 * PER <= n) {
            Vec<T, 2 * PER> y;
#pragma unroll
            for (int k = 0; k < 2 * PER; k++) y.v[k] = rng_value<T, DIST>(bits_of(w, k), r);
            *reinterpret_cast<Vec<T, 2 * PER> *>(out + i0) = y;
        } else {
            for (int k = 0; k < 2 * PER && i0 + k < n; k++) out[i0 + k] = rng_value<T, DIST>(bits_of(w, k), r);
        }
    }
}

template <typename T, int DIST> static nb_status rng_launch(nb_backend *be, const nb_kview *dst, int64_t n,
                                                            RandArgs r) {
    k_random<T, DIST><<<blocks_for(philox_groups(n)), THREADS, 0, stream_of(be)>>>((T *)dst->data, n, r,
                                                                        aligned_to(dst->data, 2 * PER * sizeof(T)));
    return launched(DIST == NB_RNG_UNIFORM ? "uniform" : DIST == NB_RNG_NORMAL ? "normal" : "bernoulli");
}

// Dropout's forward (the dropout slot): random's bernoulli bits for each
// element, the kept scale m1 (1/(1-p) rounded as unary mul_scalar rounds it)
// or 0 into mask, and x * mask into out, in T's arithmetic as binary mul
// (16-bit: float products rounded once).
template <typename T> __device__ __forceinline__ T dropout_mul(T x, T m) {
    if constexpr (std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value)
        return Traits<T>::store(Traits<T>::load(x) * Traits<T>::load(m));
    else return x * m;
}

template <typename T>
__global__ void k_dropout(const T *x, T *out, T *mask, int64_t n, RandArgs r, T m1, bool vec) {
    const T zero = Traits<T>::store(0);
    NBC_GRID_STRIDE(g, philox_groups(n)) { // counter blocks as k_random
        const int64_t q0 = g * PER, i0 = 2 * q0;
        nb_philox_u4 w[PER];
        philox_group(w, q0, r);
        if (vec && i0 + 2 * PER <= n) {
            const Vec<T, 2 * PER> xv = *reinterpret_cast<const Vec<T, 2 * PER> *>(x + i0);
            Vec<T, 2 * PER> ov, mv;
#pragma unroll
            for (int k = 0; k < 2 * PER; k++) {
                const T m = (bits_of(w, k) >> 11) < r.th ? m1 : zero;
                mv.v[k] = m, ov.v[k] = dropout_mul(xv.v[k], m);
            }
            *reinterpret_cast<Vec<T, 2 * PER> *>(mask + i0) = mv;
            *reinterpret_cast<Vec<T, 2 * PER> *>(out + i0) = ov;
        } else {
            for (int k = 0; k < 2 * PER && i0 + k < n; k++) {
                const T m = (bits_of(w, k) >> 11) < r.th ? m1 : zero;
                mask[i0 + k] = m, out[i0 + k] = dropout_mul(x[i0 + k], m);
            }
        }
    }
}

template <typename T>
static nb_status dropout_launch(nb_backend *be, const nb_kview *out, const nb_kview *mask, const nb_kview *x,
                                int64_t n, const RandArgs &r, T m1) {
    const size_t vb = 2 * PER * sizeof(T);
    const bool vec = aligned_to(x->data, vb) && aligned_to(out->data, vb) && aligned_to(mask->data, vb);
    k_dropout<T><<<blocks_for(philox_groups(n)), THREADS, 0, stream_of(be)>>>((const T *)x->data, (T *)out->data,
                                                                    (T *)mask->data, n, r, m1, vec);
    return launched("dropout");
}

} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_dropout(nb_backend *be, const nb_kview *out, const nb_kview *mask, const nb_kview *x,
                                     double p, nb_philox_state rng) {
    const uint64_t seed = rng.seed, offset = rng.offset, *offset_base = rng.offset_base;
    const nb_dtype dt = x->dtype; // checked: backend/check/random.c
    const int64_t n = numel(x);
    if (n == 0) return NB_OK;
    RandArgs r{};
    r.seed = seed, r.offset = offset, r.offset_base = offset_base;
    r.th = nb_bits_threshold(1 - p); // random's bernoulli with probability 1 - p
    const double scale = 1 / (1 - p);        // as ops_dropout.c passes it to mul_scalar
    switch (dt) {
    case NB_F32: return dropout_launch<float>(be, out, mask, x, n, r, (float)scale);
    case NB_F64: return dropout_launch<double>(be, out, mask, x, n, r, scale);
    case NB_BF16: return dropout_launch<__nv_bfloat16>(be, out, mask, x, n, r, __float2bfloat16_rn((float)scale));
    default: return dropout_launch<__half>(be, out, mask, x, n, r, __float2half_rn((float)scale));
    }
}

extern "C" nb_status nb_cuda_random(nb_backend *be, const nb_kview *dst, nb_rng_dist dist, double a, double b,
                                    nb_philox_state rng) {
    const uint64_t seed = rng.seed, offset = rng.offset, *offset_base = rng.offset_base;
    const int64_t n = numel(dst); // checked: backend/check/random.c
    if (n == 0) return NB_OK;
    RandArgs r{};
    r.seed = seed, r.offset = offset, r.offset_base = offset_base;
    if (dist == NB_RNG_BERNOULLI) {
        r.th = nb_bits_threshold(a); // as the CPU: u < p exactly when (bits >> 11) < th
        switch (dst->dtype) {
        case NB_F32: return rng_launch<float, NB_RNG_BERNOULLI>(be, dst, n, r);
        case NB_F64: return rng_launch<double, NB_RNG_BERNOULLI>(be, dst, n, r);
        case NB_I32: return rng_launch<int32_t, NB_RNG_BERNOULLI>(be, dst, n, r);
        case NB_I64: return rng_launch<int64_t, NB_RNG_BERNOULLI>(be, dst, n, r);
        case NB_U8: return rng_launch<uint8_t, NB_RNG_BERNOULLI>(be, dst, n, r);
        case NB_I8: return rng_launch<int8_t, NB_RNG_BERNOULLI>(be, dst, n, r);
        case NB_I16: return rng_launch<int16_t, NB_RNG_BERNOULLI>(be, dst, n, r);
        case NB_BF16: return rng_launch<__nv_bfloat16, NB_RNG_BERNOULLI>(be, dst, n, r);
        case NB_F16: return rng_launch<__half, NB_RNG_BERNOULLI>(be, dst, n, r);
        default: return rng_launch<bool, NB_RNG_BERNOULLI>(be, dst, n, r);
        }
    }
    r.a = a, r.b = b, r.ba = b - a;
    r.clamp = dist == NB_RNG_UNIFORM && b > a;
    r.b_prev = nextafter(b, -INFINITY);
    r.fb = (float)b;
    r.fb_prev = nextafterf(r.fb, -INFINITY);
    if (dist == NB_RNG_UNIFORM)
        return dst->dtype == NB_F32 ? rng_launch<float, NB_RNG_UNIFORM>(be, dst, n, r)
                                    : rng_launch<double, NB_RNG_UNIFORM>(be, dst, n, r);
    return dst->dtype == NB_F32 ? rng_launch<float, NB_RNG_NORMAL>(be, dst, n, r)
                                : rng_launch<double, NB_RNG_NORMAL>(be, dst, n, r);
}
