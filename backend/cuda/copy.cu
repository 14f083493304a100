// copy.cu - the cast family on CUDA: copy (any dtype to any dtype, the
// source broadcast to the destination's shape, any strides), fill and
// arange. Conversions follow the CPU backend's (backend/cpu/cast.c): float
// to integer truncates toward zero, integers convert among themselves by C's
// rules (wrapping), to bool is != 0, into float16/bfloat16 rounds to
// nearest even once from the exact value, and a copy within one dtype moves
// the bits (NaN payloads kept).
#include "cuda_common.cuh"
#include "elementwise.cuh"

namespace nbc {

// The source value as an exact wide type: int64 for integers and bool,
// double for floats.
template <typename S> struct Wide { using type = int64_t; };
template <> struct Wide<float> { using type = double; };
template <> struct Wide<double> { using type = double; };
template <> struct Wide<__half> { using type = double; };
template <> struct Wide<__nv_bfloat16> { using type = double; };

template <typename S> __device__ inline typename Wide<S>::type widen(S s) { return (typename Wide<S>::type)s; }
template <> __device__ inline double widen<__half>(__half s) { return (double)__half2float(s); }
template <> __device__ inline double widen<__nv_bfloat16>(__nv_bfloat16 s) { return (double)__bfloat162float(s); }

template <typename D> __device__ inline D narrow_i(int64_t v) { return (D)v; }
template <> __device__ inline bool narrow_i<bool>(int64_t v) { return v != 0; }
template <> __device__ inline float narrow_i<float>(int64_t v) { return (float)(double)v; }
template <> __device__ inline double narrow_i<double>(int64_t v) { return (double)v; }
template <> __device__ inline __half narrow_i<__half>(int64_t v) { return __double2half((double)v); }
template <> __device__ inline __nv_bfloat16 narrow_i<__nv_bfloat16>(int64_t v) { return __double2bfloat16((double)v); }

template <typename D> __device__ inline D narrow_f(double v) { return (D)v; }
template <> __device__ inline bool narrow_f<bool>(double v) { return v != 0; }
template <> __device__ inline uint8_t narrow_f<uint8_t>(double v) { return (uint8_t)(int64_t)v; }
template <> __device__ inline int8_t narrow_f<int8_t>(double v) { return (int8_t)(int64_t)v; } // through int64, as the CPU
template <> __device__ inline int16_t narrow_f<int16_t>(double v) { return (int16_t)(int64_t)v; }
template <> __device__ inline float narrow_f<float>(double v) { return __double2float_rn(v); }
template <> __device__ inline __half narrow_f<__half>(double v) { return __double2half(v); }
template <> __device__ inline __nv_bfloat16 narrow_f<__nv_bfloat16>(double v) { return __double2bfloat16(v); }

template <typename D> __device__ inline D to(int64_t v) { return narrow_i<D>(v); }
template <typename D> __device__ inline D to(double v) { return narrow_f<D>(v); }

// The copy as an elementwise functor (elementwise.cuh's launcher: the
// vectorized rows path for contiguous and broadcast sources, the strided
// iterator otherwise).
template <typename S, typename D> struct CopyF {
    using In = S;
    using Out = D;
    static constexpr int NIN = 1;
    __device__ __forceinline__ D operator()(S s) const { return to<D>(widen<S>(s)); }
};

// float32 to and from the 16-bit floats directly: the same roundings as
// through double (a float is exact in double), without double arithmetic.
#define NBC_COPY16(H)                                                                                 \
    template <> struct CopyF<float, H> {                                                              \
        using In = float;                                                                             \
        using Out = H;                                                                                \
        static constexpr int NIN = 1;                                                                 \
        __device__ __forceinline__ H operator()(float s) const { return Traits<H>::store(s); }        \
    };                                                                                                \
    template <> struct CopyF<H, float> {                                                              \
        using In = H;                                                                                 \
        using Out = float;                                                                            \
        static constexpr int NIN = 1;                                                                 \
        __device__ __forceinline__ float operator()(H s) const { return Traits<H>::load(s); }         \
    };
NBC_COPY16(__nv_bfloat16)
NBC_COPY16(__half)
#undef NBC_COPY16

// Same dtype: elements of U's size moved as raw bits.
template <typename U> struct MoveF {
    using In = U;
    using Out = U;
    static constexpr int NIN = 1;
    __device__ __forceinline__ U operator()(U x) const { return x; }
};

template <typename D> __global__ void k_fill(Iter<1> it, double v) {
    D x = to<D>(v);
    NBC_GRID_STRIDE(i, it.numel) {
        int64_t off[1];
        if (it.contig) off[0] = i;
        else it.offsets(i, off);
        ((D *)it.ptr[0])[off[0]] = x;
    }
}

// start + i * step rounded as the CPU rounds it (no FMA contraction).
template <typename D> __global__ void k_arange(D *out, int64_t n, double start, double step) {
    NBC_GRID_STRIDE(i, n) out[i] = to<D>(__dadd_rn(start, __dmul_rn((double)i, step)));
}

static nb_status move_bits(nb_backend *be, const nb_kview *dst, const nb_kview *src, size_t es) {
    switch (es) {
    case 1: return ew_launch(be, "copy", MoveF<uint8_t>{}, dst, src);
    case 2: return ew_launch(be, "copy", MoveF<uint16_t>{}, dst, src);
    case 4: return ew_launch(be, "copy", MoveF<uint32_t>{}, dst, src);
    default: return ew_launch(be, "copy", MoveF<uint64_t>{}, dst, src);
    }
}

} // namespace nbc

using namespace nbc;

// The copy slot: the profiler's row names the kind of copy.
extern "C" nb_status nb_cuda_copy(nb_backend *be, const nb_kview *dst, const nb_kview *src) {
    bool bcast = false, cast = dst->dtype != src->dtype, dense = contiguous(dst) && contiguous(src);
    for (int d = 0; d < src->ndim; d++) bcast |= src->strides[d] == 0 && src->shape[d] > 1;
    nb_prof_detail(cast ? "copy (cast)" : dense ? "copy (contiguous)" : bcast ? "copy (broadcast)" : "copy (strided)");
    return nb_cuda_copy_into(be, dst, src);
}

// dst and src of one shape (the copy slot's are checked by backend/check/copy.c;
// this backend's own callers pass views of one shape).
extern "C" nb_status nb_cuda_copy_into(nb_backend *be, const nb_kview *dst, const nb_kview *src) {
    const nb_kview *v[2] = {dst, src};
    Iter<2> it = make_iter<2>(v);
    if (it.numel == 0) return NB_OK;
    if (dst->dtype == src->dtype) {
        size_t es = nb_dtype_size(dst->dtype);
        if (it.contig && dst->data != src->data) {
            NBC_TRY("copy", cudaMemcpyAsync(dst->data, src->data, (size_t)it.numel * es, cudaMemcpyDeviceToDevice,
                                            stream_of(be)));
            return NB_OK;
        }
        // rows of contiguous elements at any (non-negative) row strides, as
        // a slice of a wider tensor: the copy engine's 2-D copy (the
        // element-per-thread kernel ran at a quarter of the bandwidth)
        if (it.ndim == 2 && it.st[0][1] == 1 && it.st[1][1] == 1 && it.st[0][0] >= it.shape[1] &&
            it.st[1][0] >= it.shape[1] && dst->data != src->data && (it.st[0][0] | it.st[1][0]) * (int64_t)es < INT32_MAX) {
            NBC_TRY("copy", cudaMemcpy2DAsync(dst->data, (size_t)it.st[0][0] * es, src->data, (size_t)it.st[1][0] * es,
                                              (size_t)it.shape[1] * es, (size_t)it.shape[0], cudaMemcpyDeviceToDevice,
                                              stream_of(be)));
            return NB_OK;
        }
        return move_bits(be, dst, src, es);
    }
    return dispatch_all(src->dtype, [&](auto s) {
        using S = decltype(s);
        return dispatch_all(dst->dtype, [&](auto d) {
            using D = decltype(d);
            return ew_launch(be, "copy", CopyF<S, D>{}, dst, src);
        });
    });
}

extern "C" nb_status nb_cuda_fill(nb_backend *be, const nb_kview *dst, double value) {
    const nb_kview *v[1] = {dst};
    Iter<1> it = make_iter<1>(v);
    if (it.numel == 0) return NB_OK;
    // zeros (every dtype's 0 is all-zero bytes; not -0.0) of dense memory: a memset
    if (value == 0 && !signbit(value) && it.contig) {
        NBC_TRY("fill", cudaMemsetAsync(dst->data, 0, (size_t)it.numel * nb_dtype_size(dst->dtype), stream_of(be)));
        return NB_OK;
    }
    return dispatch_all(dst->dtype, [&](auto d) {
        using D = decltype(d);
        k_fill<D><<<blocks_for(it.numel), THREADS, 0, stream_of(be)>>>(it, value);
        return launched("fill");
    });
}

// dst contiguous and 1-d (checked: backend/check/copy.c).
extern "C" nb_status nb_cuda_arange(nb_backend *be, const nb_kview *dst, double start, double step) {
    int64_t n = dst->shape[0];
    if (n == 0) return NB_OK;
    return dispatch_all(dst->dtype, [&](auto d) {
        using D = decltype(d);
        k_arange<D><<<blocks_for(n), THREADS, 0, stream_of(be)>>>((D *)dst->data, n, start, step);
        return launched("arange");
    });
}
