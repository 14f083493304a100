// elementwise.cuh - the launcher that unary.cu and binary.cu share
// (internal; random.cu and optim.cu use its Vec and aligned_to):
// out = f(in0[, in1]) over views of one shape, one thread per output
// element (or per vector of V elements), so results are deterministic.
// Two paths, chosen on the host from the merged strided
// iterator (Iter, cuda_common.cuh):
//   rows:    at most two merged dims, out and every input stepping the
//            inner dim by 1 (an input may also broadcast it, step 0), rows
//            at any aligned stride: a flat contiguous op (R = 1), a bias/row
//            broadcast [R, C] op [C], a per-row scale [R, C] op [R, 1], a
//            column block of a wider matrix (a chunk's gradient added into
//            its part of the whole). Each thread loads V = 16 / sizeof(In)
//            elements (float4 for float32) with no index division; taken
//            when every vector access is aligned.
//   generic: any strides: per-element offsets from int64 div/mod (the
//            iterator's `contig` case skips them).
// A functor F gives In, Out, NIN (1 or 2) and `Out operator()(In[, In])`.
#pragma once

#include <math.h>

#include <type_traits>

#include "cuda_common.cuh"

namespace nbc {

// Vector width of an input type: 16 bytes.
template <typename T> constexpr int vec_width() { return sizeof(T) >= 16 ? 1 : (int)(16 / sizeof(T)); }

// A float32 functor F over 16-bit storage H (__nv_bfloat16, __half): each
// element loaded to float, F applied, a float result rounded back to H
// (PyTorch's bf16/f16 elementwise: float math, 16-bit tensors). Other
// outputs (comparisons' bool) pass through.
template <typename F, typename H> struct Half16 {
    using In = H;
    using Out = typename std::conditional<std::is_same<typename F::Out, float>::value, H, typename F::Out>::type;
    static constexpr int NIN = F::NIN;
    F f;
    __device__ __forceinline__ Out cvt(typename F::Out v) const {
        if constexpr (std::is_same<typename F::Out, float>::value) return Traits<H>::store(v);
        else return v;
    }
    __device__ __forceinline__ Out operator()(H x) const { return cvt(f(Traits<H>::load(x))); }
    __device__ __forceinline__ Out operator()(H x, H y) const { return cvt(f(Traits<H>::load(x), Traits<H>::load(y))); }
};

template <typename F> __device__ __forceinline__ typename F::Out ew_apply(const F &f, const typename F::In *x) {
    if constexpr (F::NIN == 1) return f(x[0]);
    else return f(x[0], x[1]);
}

// The rows path's geometry: out at out + r * ors + c; input k at in[k] + r * rs[k] + c * cs[k], cs[k] in {0, 1}.
template <typename F> struct RowArgs {
    int64_t R, C, ors;
    typename F::Out *out;
    const typename F::In *in[F::NIN];
    int64_t rs[F::NIN];
    int cs[F::NIN];
};

// Per row: nv vectors of V elements, then the C - nv * V tail elements one
// by one; work item j < nv is a vector, j >= nv a tail element.
template <typename F, int V> __global__ void k_ew_rows(F f, RowArgs<F> a) {
    using In = typename F::In;
    using Out = typename F::Out;
    const int64_t nv = a.C / V, nw = nv + (a.C - nv * V);
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < a.R; r += (int64_t)gridDim.y * blockDim.y) {
        Out *o = a.out + r * a.ors;
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < nw; j += (int64_t)gridDim.x * blockDim.x) {
            if (j < nv) {
                In x[F::NIN][V];
#pragma unroll
                for (int k = 0; k < F::NIN; k++) {
                    const In *p = a.in[k] + r * a.rs[k];
                    if (a.cs[k]) {
                        Vec<In, V> t = *reinterpret_cast<const Vec<In, V> *>(p + j * V);
#pragma unroll
                        for (int l = 0; l < V; l++) x[k][l] = t.v[l];
                    } else {
                        In s = *p;
#pragma unroll
                        for (int l = 0; l < V; l++) x[k][l] = s;
                    }
                }
                Vec<Out, V> y;
#pragma unroll
                for (int l = 0; l < V; l++) {
                    In e[F::NIN];
#pragma unroll
                    for (int k = 0; k < F::NIN; k++) e[k] = x[k][l];
                    y.v[l] = ew_apply(f, e);
                }
                *reinterpret_cast<Vec<Out, V> *>(o + j * V) = y;
            } else {
                const int64_t c = nv * V + (j - nv);
                In e[F::NIN];
#pragma unroll
                for (int k = 0; k < F::NIN; k++) e[k] = a.in[k][r * a.rs[k] + c * a.cs[k]];
                o[c] = ew_apply(f, e);
            }
        }
    }
}

template <typename F> __global__ void k_ew_iter(F f, Iter<F::NIN + 1> it) {
    using In = typename F::In;
    using Out = typename F::Out;
    NBC_GRID_STRIDE(i, it.numel) {
        int64_t off[F::NIN + 1];
        if (it.contig) {
#pragma unroll
            for (int k = 0; k <= F::NIN; k++) off[k] = i;
        } else {
            it.offsets(i, off);
        }
        In e[F::NIN];
#pragma unroll
        for (int k = 0; k < F::NIN; k++) e[k] = ((const In *)it.ptr[k + 1])[off[k + 1]];
        ((Out *)it.ptr[0])[off[0]] = ew_apply(f, e);
    }
}

inline bool aligned_to(const void *p, size_t bytes) { return (uintptr_t)p % bytes == 0; }

// The rows path's arguments if the merged iterator has that shape and
// every vector access of width V is aligned; false otherwise.
template <typename F, int V> bool ew_rows_args(const Iter<F::NIN + 1> &it, RowArgs<F> *a) {
    using In = typename F::In;
    using Out = typename F::Out;
    if (it.ndim > 2) return false;
    int64_t R = 1, C = 1, ors = 0, ocs = 1;
    if (it.ndim == 1) C = it.shape[0], ocs = it.st[0][0];
    if (it.ndim == 2) R = it.shape[0], C = it.shape[1], ors = it.st[0][0], ocs = it.st[0][1];
    if (ocs != 1 || (R > 1 && ors < C)) return false; /* rows overlapping or reversed: the generic path */
    if (!aligned_to(it.ptr[0], sizeof(Out) * V) || (R > 1 && (C % V != 0 || ors % V != 0))) return false;
    a->R = R, a->C = C, a->ors = R > 1 ? ors : C, a->out = (Out *)it.ptr[0];
    for (int k = 0; k < F::NIN; k++) {
        int64_t rs = 0, cs = 1;
        if (it.ndim == 1) cs = it.st[k + 1][0];
        if (it.ndim == 2) rs = it.st[k + 1][0], cs = it.st[k + 1][1];
        if (cs != 0 && cs != 1) return false;
        if (cs == 1 && (!aligned_to(it.ptr[k + 1], sizeof(In) * V) || (R > 1 && rs % V != 0))) return false;
        a->in[k] = (const In *)it.ptr[k + 1], a->rs[k] = rs, a->cs[k] = (int)cs;
    }
    return true;
}

// Runs f over out and ins (already checked: same shapes, F's dtypes).
// numel 0: nothing is launched.
template <typename F> nb_status ew_launch(nb_backend *be, const char *slot, const F &f, const nb_kview *out,
                                          const nb_kview *in0, const nb_kview *in1 = nullptr) {
    constexpr int N = F::NIN + 1;
    const nb_kview *v[3] = {out, in0, in1};
    Iter<N> it = make_iter<N>(v);
    if (it.numel == 0) return NB_OK;
    cudaStream_t s = stream_of(be);
    constexpr int V = vec_width<typename F::In>();
    RowArgs<F> a;
    if (ew_rows_args<F, V>(it, &a)) {
        // a block of 256 threads: up to 256 work items of a row across x,
        // several short rows across y
        const int64_t nw = a.C / V + a.C % V;
        unsigned bx = nw >= THREADS ? THREADS : (unsigned)((nw + 31) / 32 * 32);
        unsigned by = THREADS / bx;
        int64_t gx = (nw + bx - 1) / bx, gy = (a.R + by - 1) / by;
        if (gx > (1 << 20)) gx = 1 << 20; // grid-stride loops cover the rest
        if (gy > 65535) gy = 65535;
        k_ew_rows<F, V><<<dim3((unsigned)gx, (unsigned)gy), dim3(bx, by), 0, s>>>(f, a);
        return launched(slot);
    }
    k_ew_iter<F><<<blocks_for(it.numel), THREADS, 0, s>>>(f, it);
    return launched(slot);
}

} // namespace nbc
