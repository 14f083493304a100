// optim.cu - in-place Adam/AdamW and SGD updates on CUDA: slots adam_step,
// sgd_step and their multi-tensor forms adam_step_multi, sgd_step_multi
// (one launch for up to MT_MAX tensors, as llm.c's AdamW kernel and
// PyTorch's fused/foreach optimizers). Coefficients and element updates
// are nb_scalar_math.h's, the CPU's (PyTorch's _single_tensor_adam/
// _single_tensor_sgd operation by operation): scalar coefficients computed
// once in double and cast to the dtype, per-element math in the dtype with
// explicitly rounded intrinsics on the device (__fmul_rn, __fadd_rn,
// __fdiv_rn, __fsqrt_rn and their double forms), so no FMA contraction:
// float32 and float64 results equal the CPU's bits, and the single-tensor slots (which
// run the same kernel on a list of one) equal the multi-tensor ones.
// The tensors' (pointers, sizes) travel in a kernel-parameter struct, not
// through a host-to-device copy, so a step can be captured in a CUDA graph
// (the per-step scalars are kernel arguments for now). Each block takes
// fixed chunks of MT_CHUNK elements of one tensor; each element is read and
// written by one thread (float4/double2 accesses where aligned):
// deterministic.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#include "cuda_common.cuh"
#include "elementwise.cuh"
#include "nb_scalar_math.h"

namespace nbc {

constexpr int MT_MAX = 24;          // tensors per launch
constexpr int64_t MT_CHUNK = 8192;  // elements per block task (a multiple of every vector width)

// NP pointers per tensor: adam p, g, m, v, vmax (NULL unless amsgrad), copy (the 16-bit copy, NULL if none);
// sgd p, g, buf (NULL without momentum).
template <int NP> struct MTList {
    void *ptr[MT_MAX][NP];
    int64_t numel[MT_MAX];
    int64_t chunk_end[MT_MAX]; // tensor k owns chunks [chunk_end[k - 1], chunk_end[k])
    uint32_t vec_ok;           // bit k: every pointer of tensor k is 16-byte aligned
    int n;
};

template <typename T, int W> __device__ __forceinline__ Vec<T, W> ld(const T *p) {
    return *reinterpret_cast<const Vec<T, W> *>(p);
}
template <typename T, int W> __device__ __forceinline__ void st(T *p, const Vec<T, W> &v) {
    *reinterpret_cast<Vec<T, W> *>(p) = v;
}

// ---- Adam / AdamW ------------------------------------------------------------------------

// Coefficients and element updates: nb_scalar_math.h's (the CPU's bits).
template <typename T> using AdamC = typename nb_sm_of<T>::adam_coef;
template <typename T> using SgdC = typename nb_sm_of<T>::sgd_coef;

enum Copy16 { COPY_BF16 = 0, COPY_F16 = 1 }; // the dtype of a call's 16-bit copies

// The W updated float32 values p as H at q + i (Traits<H>::store: the copy slot's rounding).
template <typename H, int W> __device__ __forceinline__ void st16(void *q, int64_t i, const Vec<float, W> &p) {
    Vec<H, W> o;
#pragma unroll
    for (int l = 0; l < W; l++) o.v[l] = Traits<H>::store(p.v[l]);
    st((H *)q + i, o);
}

template <typename T> struct AdamOp {
    static constexpr int NP = 6;
    AdamC<T> c;
    int copy16; // Copy16, for tensors with a copy pointer
    // W elements at index i of tensor q (p, g, m, v, vmax, copy)
    template <int W> __device__ __forceinline__ void run(T *const *q, int64_t i) const {
        Vec<T, W> p = ld<T, W>(q[0] + i), g = ld<T, W>(q[1] + i), m = ld<T, W>(q[2] + i), v = ld<T, W>(q[3] + i);
        Vec<T, W> mx;
        if (c.amsgrad) mx = ld<T, W>(q[4] + i);
#pragma unroll
        for (int l = 0; l < W; l++) nb_sm_of<T>::adam(&p.v[l], g.v[l], &m.v[l], &v.v[l], &mx.v[l], &c);
        st(q[0] + i, p), st(q[2] + i, m), st(q[3] + i, v);
        if (c.amsgrad) st(q[4] + i, mx);
        if constexpr (std::is_same<T, float>::value) // copies exist for float32 parameters only (checked)
            if (q[5]) copy16 == COPY_BF16 ? st16<__nv_bfloat16, W>(q[5], i, p) : st16<__half, W>(q[5], i, p);
    }
};

// ---- SGD -----------------------------------------------------------------------------------

template <typename T> struct SgdOp {
    static constexpr int NP = 3;
    SgdC<T> c;
    template <int W> __device__ __forceinline__ void run(T *const *q, int64_t i) const {
        Vec<T, W> p = ld<T, W>(q[0] + i), g = ld<T, W>(q[1] + i), b;
        if (c.has_mom) b = ld<T, W>(q[2] + i);
#pragma unroll
        for (int l = 0; l < W; l++) nb_sm_of<T>::sgd(&p.v[l], g.v[l], &b.v[l], &c);
        st(q[0] + i, p);
        if (c.has_mom) st(q[2] + i, b);
    }
};

// ---- the multi-tensor kernel ------------------------------------------------------------------

// Block task c: chunk c - chunk_end[k - 1] of the tensor k that owns it
// (found by a scan of at most MT_MAX entries, uniform across the block).
template <typename T, typename Op> __global__ void k_multi(MTList<Op::NP> L, int64_t chunks, Op op) {
    constexpr int V = vec_width<T>();
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
        int k = 0;
        while (k < L.n - 1 && c >= L.chunk_end[k]) k++;
        const int64_t start = (c - (k ? L.chunk_end[k - 1] : 0)) * MT_CHUNK;
        const int64_t end = start + MT_CHUNK < L.numel[k] ? start + MT_CHUNK : L.numel[k];
        T *q[Op::NP];
#pragma unroll
        for (int j = 0; j < Op::NP; j++) q[j] = (T *)L.ptr[k][j];
        int64_t i = start;
        if ((L.vec_ok >> k) & 1) {
            const int64_t nvec = (end - start) / V;
            for (int64_t t = threadIdx.x; t < nvec; t += blockDim.x) op.template run<V>(q, start + t * V);
            i = start + nvec * V;
        }
        for (int64_t e = i + threadIdx.x; e < end; e += blockDim.x) op.template run<1>(q, e);
    }
}

// Launches op over n tensors (ptrs[i][j]: pointer j of tensor i, NULL where
// absent), MT_MAX per launch; empty tensors are skipped.
template <typename T, typename Op> static nb_status multi_launch(nb_backend *be, const char *slot, int n,
                                                                void *const (*ptrs)[Op::NP], const int64_t *numels,
                                                                const Op &op) {
    cudaStream_t s = stream_of(be);
    MTList<Op::NP> L;
    int i = 0;
    while (i < n) {
        memset(&L, 0, sizeof L);
        int64_t chunks = 0;
        for (; i < n && L.n < MT_MAX; i++) {
            if (numels[i] == 0) continue;
            const int k = L.n++;
            bool ok = true;
            for (int j = 0; j < Op::NP; j++) {
                L.ptr[k][j] = ptrs[i][j];
                if (ptrs[i][j]) ok &= aligned_to(ptrs[i][j], 16);
            }
            L.numel[k] = numels[i];
            chunks += (numels[i] + MT_CHUNK - 1) / MT_CHUNK;
            L.chunk_end[k] = chunks;
            if (ok) L.vec_ok |= 1u << k;
        }
        if (L.n == 0) break;
        const int64_t grid = chunks < (1 << 20) ? chunks : (1 << 20); // the block loop covers the rest
        k_multi<T, Op><<<(unsigned)grid, THREADS, 0, s>>>(L, chunks, op);
        nb_status st = launched(slot);
        if (st != NB_OK) return st;
    }
    return NB_OK;
}

// ---- host: coefficients, dispatch (the views and h checked: backend/check/optim.c) ----------------

// The per-call coefficients, in double then cast (nb_sm_*_prep): on the
// host, or on the device for the capturable form (lr and step read when the
// graph runs).
template <typename T> static AdamC<T> adam_coef(const nb_adam_hyper *h) {
    return nb_sm_of<T>::adam_prep(h, h->lr, (double)h->step);
}
template <typename T> static SgdC<T> sgd_coef(const nb_sgd_hyper *h) { return nb_sm_of<T>::sgd_prep(h, h->lr); }

// ---- the capturable form: coefficients computed on the device -----------------------------

constexpr int STEP_CHUNK = 32;
struct StepList {
    double *p[STEP_CHUNK];
    int n;
};

// Thread j: *p[j] += 1; with `out`, thread 0 first writes the coefficients
// for the new count (every counter of the call holds the same one).
template <typename T>
__global__ void k_adam_coef(StepList L, nb_adam_hyper h, const double *lr_dev, AdamC<T> *out) {
    const int j = threadIdx.x;
    if (j >= L.n) return;
    const double step = (L.p[j] ? *L.p[j] : (double)h.step - 1) + 1;
    if (out && j == 0) *out = nb_sm_of<T>::adam_prep(&h, lr_dev ? *lr_dev : h.lr, step);
    if (L.p[j]) *L.p[j] = step;
}

template <typename T> __global__ void k_sgd_coef(nb_sgd_hyper h, const double *lr_dev, SgdC<T> *out) {
    *out = nb_sm_of<T>::sgd_prep(&h, *lr_dev);
}

// Ops reading their coefficients from device memory when the kernel runs.
template <typename T> struct AdamOpDev {
    static constexpr int NP = 6;
    const AdamC<T> *cp;
    int copy16;
    template <int W> __device__ __forceinline__ void run(T *const *q, int64_t i) const {
        AdamOp<T> op{*cp, copy16};
        op.template run<W>(q, i);
    }
};
template <typename T> struct SgdOpDev {
    static constexpr int NP = 3;
    const SgdC<T> *cp;
    template <int W> __device__ __forceinline__ void run(T *const *q, int64_t i) const {
        SgdOp<T> op{*cp};
        op.template run<W>(q, i);
    }
};

// The step counters advanced and the coefficients written to scratch.
template <typename T>
static nb_status adam_coef_dev(nb_backend *be, const char *slot, int n, const nb_adam_hyper *h, Scratch &coef) {
    if (!coef.alloc(be, sizeof(AdamC<T>))) return nb_last_status();
    cudaStream_t s = stream_of(be);
    for (int i0 = 0; i0 < n || i0 == 0; i0 += STEP_CHUNK) {
        StepList L{};
        L.n = n - i0 < STEP_CHUNK ? n - i0 : STEP_CHUNK;
        if (L.n < 1) L.n = 1;
        for (int j = 0; j < L.n; j++) L.p[j] = h->step_dev ? h->step_dev[i0 + j] : nullptr;
        k_adam_coef<T><<<1, STEP_CHUNK, 0, s>>>(L, *h, h->lr_dev, i0 == 0 ? coef.as<AdamC<T>>() : nullptr);
        nb_status st = launched(slot);
        if (st) return st;
        if (!h->step_dev) break;
    }
    return NB_OK;
}

// The host list of every tensor's pointers and size.
template <int NP> struct PtrList {
    void *(*p)[NP] = nullptr;
    int64_t *numel = nullptr;
    PtrList() = default;
    PtrList(const PtrList &) = delete;
    PtrList &operator=(const PtrList &) = delete;
    ~PtrList() { free(p), free(numel); }
    bool alloc(int n) {
        p = (void *(*)[NP])calloc((size_t)n, sizeof *p);
        numel = (int64_t *)calloc((size_t)n, sizeof *numel);
        return p && numel;
    }
};

static nb_status adam_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                            const nb_kview *exp_avgs, const nb_kview *exp_avg_sqs, const nb_kview *max_exp_avg_sqs,
                            const nb_kview *copies, const nb_adam_hyper *h) {
    const char *name = h->decoupled ? "adamw" : "adam";
    if (n == 0) return NB_OK;
    const nb_dtype dt = params[0].dtype;
    PtrList<6> b;
    if (!b.alloc(n)) return nb_set_error(NB_ERR_OOM, "%s: no host memory for %d tensors", name, n);
    int copy16 = -1; // the copies' dtype, one per launch
    for (int i = 0; i < n; i++) {
        const nb_kview *v[6] = {&params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i],
                                h->amsgrad ? &max_exp_avg_sqs[i] : nullptr,
                                copies && copies[i].data ? &copies[i] : nullptr};
        for (int j = 0; j < 6; j++) b.p[i][j] = v[j] ? v[j]->data : nullptr;
        b.numel[i] = numel(&params[i]);
        if (!v[5]) continue;
        const int c16 = copies[i].dtype == NB_BF16 ? COPY_BF16 : COPY_F16;
        if (copy16 >= 0 && c16 != copy16)
            return nb_set_error(NB_ERR_DTYPE, "%s: the copies of one call must share a dtype", name);
        copy16 = c16;
    }
    if (copy16 < 0) copy16 = COPY_BF16;
    if (h->lr_dev || h->step_dev) { /* capturable: lr and step read on the device */
        Scratch coef;
        if (dt == NB_F32) {
            nb_status st = adam_coef_dev<float>(be, name, n, h, coef);
            return st ? st
                      : multi_launch<float>(be, name, n, b.p, b.numel,
                                            AdamOpDev<float>{coef.as<AdamC<float>>(), copy16});
        }
        nb_status st = adam_coef_dev<double>(be, name, n, h, coef);
        return st ? st
                  : multi_launch<double>(be, name, n, b.p, b.numel,
                                         AdamOpDev<double>{coef.as<AdamC<double>>(), copy16});
    }
    if (dt == NB_F32)
        return multi_launch<float>(be, name, n, b.p, b.numel, AdamOp<float>{adam_coef<float>(h), copy16});
    return multi_launch<double>(be, name, n, b.p, b.numel, AdamOp<double>{adam_coef<double>(h), copy16});
}

static nb_status sgd_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                           const nb_kview *momentum_bufs, const nb_sgd_hyper *h) {
    if (n == 0) return NB_OK;
    const nb_dtype dt = params[0].dtype;
    PtrList<3> b;
    if (!b.alloc(n)) return nb_set_error(NB_ERR_OOM, "sgd: no host memory for %d tensors", n);
    for (int i = 0; i < n; i++) {
        const nb_kview *v[3] = {&params[i], &grads[i], h->momentum != 0 ? &momentum_bufs[i] : nullptr};
        for (int j = 0; j < 3; j++) b.p[i][j] = v[j] ? v[j]->data : nullptr;
        b.numel[i] = numel(&params[i]);
    }
    if (h->lr_dev) { /* capturable: lr read on the device */
        Scratch coef;
        cudaStream_t s = stream_of(be);
        if (dt == NB_F32) {
            if (!coef.alloc(be, sizeof(SgdC<float>))) return nb_last_status();
            k_sgd_coef<float><<<1, 1, 0, s>>>(*h, h->lr_dev, coef.as<SgdC<float>>());
            nb_status st = launched("sgd");
            return st ? st : multi_launch<float>(be, "sgd", n, b.p, b.numel, SgdOpDev<float>{coef.as<SgdC<float>>()});
        }
        if (!coef.alloc(be, sizeof(SgdC<double>))) return nb_last_status();
        k_sgd_coef<double><<<1, 1, 0, s>>>(*h, h->lr_dev, coef.as<SgdC<double>>());
        nb_status st = launched("sgd");
        return st ? st : multi_launch<double>(be, "sgd", n, b.p, b.numel, SgdOpDev<double>{coef.as<SgdC<double>>()});
    }
    if (dt == NB_F32) return multi_launch<float>(be, "sgd", n, b.p, b.numel, SgdOp<float>{sgd_coef<float>(h)});
    return multi_launch<double>(be, "sgd", n, b.p, b.numel, SgdOp<double>{sgd_coef<double>(h)});
}

} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_adam_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                                       const nb_kview *exp_avg, const nb_kview *exp_avg_sq,
                                       const nb_kview *max_exp_avg_sq, const nb_adam_hyper *h) {
    return adam_multi(be, 1, param, grad, exp_avg, exp_avg_sq, h->amsgrad ? max_exp_avg_sq : nullptr, nullptr, h);
}

extern "C" nb_status nb_cuda_sgd_step(nb_backend *be, const nb_kview *param, const nb_kview *grad,
                                      const nb_kview *momentum_buf, const nb_sgd_hyper *h) {
    return sgd_multi(be, 1, param, grad, h->momentum != 0 ? momentum_buf : nullptr, h);
}

extern "C" nb_status nb_cuda_adam_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                             const nb_kview *exp_avgs, const nb_kview *exp_avg_sqs,
                                             const nb_kview *max_exp_avg_sqs, const nb_kview *copies,
                                             const nb_adam_hyper *h) {
    return adam_multi(be, n, params, grads, exp_avgs, exp_avg_sqs, h->amsgrad ? max_exp_avg_sqs : nullptr, copies, h);
}

extern "C" nb_status nb_cuda_sgd_step_multi(nb_backend *be, int n, const nb_kview *params, const nb_kview *grads,
                                            const nb_kview *momentum_bufs, const nb_sgd_hyper *h) {
    return sgd_multi(be, n, params, grads, h->momentum != 0 ? momentum_bufs : nullptr, h);
}
