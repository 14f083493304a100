// rnn.cu - the recurrent slots (rnn_reserve_size, rnn_forward,
// rnn_backward) through cuDNN's RNN API (cudnnRNNForward,
// cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8), as PyTorch's
// _cudnn_rnn runs nn.RNN / LSTM / GRU on CUDA.
//
// Weights. The slots take PyTorch's parameters flattened in their order
// (nb_slots.def); cuDNN wants them in its weight space, whose layout
// cudnnGetRNNWeightParams tells per layer and gate. A plan keeps that map
// as copy segments (runs that are contiguous on both sides merged, so
// PyTorch's layout, which matches cuDNN's gate order, copies in a few
// runs), and each call copies w into scratch weight space (and the
// weight gradient back out) with cudaMemcpyAsync: copies a CUDA graph can
// capture, no host round trip. The copies cost a pass over the weights,
// small beside the recurrence.
//
// Precision: float32 runs with CUDNN_FMA_MATH (no TF32) under nabla's
// default matmul precision "highest", and CUDNN_DEFAULT_MATH (TF32
// permitted) under "high" / "medium" (p->tf32, PyTorch's
// cudnn.allow_tf32), float64 in double. Data descriptors are sequence-major and padded
// (CUDNN_RNN_PADDED_IO_ENABLED), so per-sequence lengths need no repacking.
// Dropout between layers is not cuDNN's: the op runs layers separately
// where dropout applies, with nabla's own generator (deterministic,
// explicit RNG state).
#include <cudnn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"

extern "C" cudnnHandle_t nb_cuda_cudnn(nb_backend *be); // cuda_backend.cu

#define NB_RNN_MAX_PLANS 256

namespace nbc {
namespace {

struct Key {
    int dev, mode, dt, prec, bidir, bias;
    int64_t in, hid, proj, layers;
};

// One run of bytes: weight space offset dst, flat-parameter offset src.
struct Seg {
    size_t dst, src, bytes;
};

struct Plan {
    Key key;
    pthread_mutex_t lock; // held around the cuDNN calls that use rnn (descriptors are not shared concurrently)
    bool cached;
    cudnnRNNDescriptor_t rnn;
    cudnnDropoutDescriptor_t drop;
    size_t wbytes; // the weight space
    bool covers;   // the segments cover all of it (else it is zeroed before the copies)
    Seg *segs;
    int nseg;
    nb_status status; // NB_OK, or why cuDNN cannot run this geometry (NB_ERR_UNSUPPORTED)
    char why[200];
};

pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
Plan *plans[NB_RNN_MAX_PLANS];
int n_plans;

int gates(int mode) { return mode == 2 ? 4 : mode == 3 ? 3 : 1; }

cudnnDataType_t cudnn_dtype(int dt) { return dt == NB_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }

Key make_key(nb_backend *be, const nb_rnn_params *p) {
    Key k;
    memset(&k, 0, sizeof k);
    k.dev = device_of(be), k.mode = p->mode, k.dt = (int)p->dtype;
    k.prec = p->dtype == NB_F32 && p->tf32;
    k.bidir = p->bidirectional, k.bias = p->bias;
    k.in = p->input_size, k.hid = p->hidden_size, k.proj = p->proj_size, k.layers = p->num_layers;
    return k;
}

// What cuDNN does not take (NB_ERR_UNSUPPORTED, kept with the cached plan:
// the geometry then runs as ops) or a failure (NB_ERR_OOM, NB_ERR_DEVICE:
// the plan is not cached, a later call tries again).
void plan_fail(Plan *pl, const char *call, cudnnStatus_t s) {
    int cat = CUDNN_STATUS_CATEGORY((int)s);
    pl->status = s == CUDNN_STATUS_ALLOC_FAILED                                      ? NB_ERR_OOM
                 : cat == CUDNN_STATUS_NOT_SUPPORTED || cat == CUDNN_STATUS_BAD_PARAM ? NB_ERR_UNSUPPORTED
                                                                                     : NB_ERR_DEVICE;
    snprintf(pl->why, sizeof pl->why, "%s: %s", call, cudnnGetErrorString(s));
}

void plan_free(Plan *pl) {
    if (!pl) return;
    if (pl->rnn) cudnnDestroyRNNDescriptor(pl->rnn);
    if (pl->drop) cudnnDestroyDropoutDescriptor(pl->drop);
    pthread_mutex_destroy(&pl->lock);
    free(pl->segs);
    free(pl);
}

// Appends a run, merged with the previous one where both sides continue it.
bool add_seg(Plan *pl, int *cap, size_t dst, size_t src, size_t bytes) {
    if (pl->nseg) {
        Seg &b = pl->segs[pl->nseg - 1];
        if (b.dst + b.bytes == dst && b.src + b.bytes == src) {
            b.bytes += bytes;
            return true;
        }
    }
    if (pl->nseg == *cap) {
        int nc = *cap ? 2 * *cap : 16;
        Seg *ns = (Seg *)realloc(pl->segs, sizeof(Seg) * (size_t)nc);
        if (!ns) return false;
        pl->segs = ns, *cap = nc;
    }
    pl->segs[pl->nseg++] = Seg{dst, src, bytes};
    return true;
}

// The weight space map: for each layer and direction, each gate's matrix
// and bias (linLayerID j < G: the input side, rows j H.. of weight_ih;
// j >= G: the recurrent side) and LSTM's projection (linLayerID 8).
void map_weights(cudnnHandle_t h, Plan *pl) {
    const Key &k = pl->key;
    const int G = gates(k.mode);
    const int64_t D = k.bidir ? 2 : 1, H = k.hid, Ho = k.proj ? k.proj : H;
    const size_t es = nb_dtype_size((nb_dtype)k.dt);
    // cudnnGetRNNWeightParams only does address arithmetic on the weight space: a stand-in base, never read
    char *const base = (char *)(uintptr_t)((size_t)1 << 20);
    cudnnTensorDescriptor_t md = nullptr, bd = nullptr;
    if (cudnnCreateTensorDescriptor(&md) != CUDNN_STATUS_SUCCESS || cudnnCreateTensorDescriptor(&bd) != CUDNN_STATUS_SUCCESS) {
        pl->status = NB_ERR_OOM;
        snprintf(pl->why, sizeof pl->why, "cudnnCreateTensorDescriptor failed");
        if (md) cudnnDestroyTensorDescriptor(md);
        return;
    }
    int cap = 0;
    size_t src = 0, covered = 0;
    for (int64_t pl_i = 0; pl_i < k.layers * D && pl->status == NB_OK; pl_i++) {
        const int64_t in = pl_i / D ? D * Ho : k.in;
        const size_t o_ih = src, o_hh = o_ih + (size_t)(G * H * in) * es, o_bih = o_hh + (size_t)(G * H * Ho) * es;
        const size_t o_bhh = o_bih + (k.bias ? (size_t)(G * H) * es : 0), o_hr = o_bhh + (k.bias ? (size_t)(G * H) * es : 0);
        src = o_hr + (k.proj ? (size_t)(Ho * H) * es : 0);
        // in the order of the flat parameters: the matrices (ids 0 .. 2G-1), the biases, LSTM's projection (id 8)
        const int n_items = 2 * G * (k.bias ? 2 : 1) + (k.proj ? 1 : 0);
        for (int it = 0; it < n_items && pl->status == NB_OK; it++) {
            const bool proj = k.proj && it == n_items - 1, mat = proj || it < 2 * G;
            const int j = proj ? 0 : it % (2 * G), id = proj ? 8 : j;
            void *addr = nullptr;
            cudnnStatus_t s = cudnnGetRNNWeightParams(h, pl->rnn, (int32_t)pl_i, pl->wbytes, base, id,
                                                      mat ? md : nullptr, mat ? &addr : nullptr,
                                                      mat ? nullptr : bd, mat ? nullptr : &addr);
            if (s != CUDNN_STATUS_SUCCESS) {
                plan_fail(pl, "cudnnGetRNNWeightParams", s);
                break;
            }
            int nd = 0, dims[8] = {0}, strides[8] = {0};
            cudnnDataType_t dt;
            s = cudnnGetTensorNdDescriptor(mat ? md : bd, 8, &dt, &nd, dims, strides);
            int64_t numel = 1;
            for (int i = 0; i < nd; i++) numel *= dims[i];
            const int64_t want = proj ? Ho * H : !mat ? H : j < G ? H * in : H * Ho;
            if (s != CUDNN_STATUS_SUCCESS || !addr || numel != want) {
                pl->status = NB_ERR_UNSUPPORTED;
                snprintf(pl->why, sizeof pl->why, "cuDNN's weight %d of layer %lld has %lld elements, %lld expected",
                         id, (long long)pl_i, (long long)numel, (long long)want);
                break;
            }
            const size_t from = proj  ? o_hr
                                : mat ? (j < G ? o_ih + (size_t)(j * H * in) * es : o_hh + (size_t)((j - G) * H * Ho) * es)
                                      : (j < G ? o_bih : o_bhh) + (size_t)((j % G) * H) * es;
            const size_t bytes = (size_t)want * es;
            if (!add_seg(pl, &cap, (size_t)((char *)addr - base), from, bytes)) {
                pl->status = NB_ERR_OOM;
                snprintf(pl->why, sizeof pl->why, "out of host memory");
            }
            covered += bytes;
        }
    }
    cudnnDestroyTensorDescriptor(md);
    cudnnDestroyTensorDescriptor(bd);
    pl->covers = covered == pl->wbytes;
    if (pl->status == NB_OK && covered > pl->wbytes) {
        pl->status = NB_ERR_UNSUPPORTED;
        snprintf(pl->why, sizeof pl->why, "cuDNN's weight space (%zu bytes) is smaller than the parameters (%zu)",
                 pl->wbytes, covered);
    }
}

Plan *plan_build(cudnnHandle_t h, const Key &k) {
    Plan *pl = (Plan *)calloc(1, sizeof(Plan));
    if (!pl) return nullptr;
    pthread_mutex_init(&pl->lock, nullptr);
    pl->key = k;
    const bool f32 = k.dt == NB_F32;
    const cudnnMathType_t math = f32 && k.prec == 0 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
    static const cudnnRNNMode_t modes[4] = {CUDNN_RNN_TANH, CUDNN_RNN_RELU, CUDNN_LSTM, CUDNN_GRU};
    cudnnStatus_t s = cudnnCreateDropoutDescriptor(&pl->drop);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetDropoutDescriptor(pl->drop, h, 0.0f, nullptr, 0, 0);
    if (s != CUDNN_STATUS_SUCCESS) return plan_fail(pl, "cudnnSetDropoutDescriptor", s), pl;
    s = cudnnCreateRNNDescriptor(&pl->rnn);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetRNNDescriptor_v8(pl->rnn, CUDNN_RNN_ALGO_STANDARD, modes[k.mode],
                                     k.bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
                                     k.bidir ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                     cudnn_dtype(k.dt), cudnn_dtype(k.dt), math, (int32_t)k.in, (int32_t)k.hid,
                                     (int32_t)(k.proj ? k.proj : k.hid), (int32_t)k.layers, pl->drop,
                                     CUDNN_RNN_PADDED_IO_ENABLED);
    if (s != CUDNN_STATUS_SUCCESS) return plan_fail(pl, "cudnnSetRNNDescriptor_v8", s), pl;
    s = cudnnGetRNNWeightSpaceSize(h, pl->rnn, &pl->wbytes);
    if (s != CUDNN_STATUS_SUCCESS) return plan_fail(pl, "cudnnGetRNNWeightSpaceSize", s), pl;
    map_weights(h, pl);
    return pl;
}

// The plan for p, or NULL with the error set: cached once per geometry
// (with what cuDNN does not take), built for the call alone past the
// cache's size or after a transient failure. plan_release after use.
Plan *plan_get(nb_backend *be, cudnnHandle_t h, const nb_rnn_params *p, const char *slot) {
    const int64_t lim = INT32_MAX;
    if (p->input_size > lim || p->hidden_size > lim || p->num_layers > lim || p->batch > lim || p->seq_len > lim) {
        nb_set_error(NB_ERR_UNSUPPORTED, "%s: sizes beyond cuDNN's int32", slot);
        return nullptr;
    }
    Key k = make_key(be, p);
    pthread_mutex_lock(&plans_lock);
    Plan *pl = nullptr;
    for (int i = 0; i < n_plans && !pl; i++)
        if (!memcmp(&plans[i]->key, &k, sizeof k)) pl = plans[i];
    if (!pl && (pl = plan_build(h, k)) && n_plans < NB_RNN_MAX_PLANS &&
        (pl->status == NB_OK || pl->status == NB_ERR_UNSUPPORTED))
        pl->cached = true, plans[n_plans++] = pl;
    pthread_mutex_unlock(&plans_lock);
    if (!pl) {
        nb_set_error(NB_ERR_OOM, "%s: out of host memory for a cuDNN RNN plan", slot);
        return nullptr;
    }
    if (pl->status != NB_OK) {
        nb_set_error(pl->status, "%s: cuDNN cannot run this RNN (%s)", slot, pl->why);
        if (!pl->cached) plan_free(pl);
        return nullptr;
    }
    return pl;
}

void plan_release(Plan *pl) {
    if (pl && !pl->cached) plan_free(pl);
}

// A plan held for one call: its lock taken (cuDNN's calls on its descriptors), released at the end.
struct Held {
    Plan *pl;
    explicit Held(Plan *p) : pl(p) {
        if (pl) pthread_mutex_lock(&pl->lock);
    }
    ~Held() {
        if (pl) pthread_mutex_unlock(&pl->lock), plan_release(pl);
    }
    Held(const Held &) = delete;
    Held &operator=(const Held &) = delete;
};

// The per-call descriptors: x, y (sequence-major, padded, the lengths) and the states.
struct Descs {
    cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
    cudnnTensorDescriptor_t h = nullptr, c = nullptr;
    size_t ws = 0, rs = 0;
    ~Descs() {
        if (x) cudnnDestroyRNNDataDescriptor(x);
        if (y) cudnnDestroyRNNDataDescriptor(y);
        if (h) cudnnDestroyTensorDescriptor(h);
        if (c) cudnnDestroyTensorDescriptor(c);
    }
};

// NB_ERR_UNSUPPORTED for what cuDNN does not take (a caller may then run the layers as ops).
nb_status cudnn_fail(const char *slot, const char *call, cudnnStatus_t s) {
    int cat = CUDNN_STATUS_CATEGORY((int)s);
    nb_status st = s == CUDNN_STATUS_ALLOC_FAILED                                      ? NB_ERR_OOM
                   : cat == CUDNN_STATUS_NOT_SUPPORTED || cat == CUDNN_STATUS_BAD_PARAM ? NB_ERR_UNSUPPORTED
                                                                                       : NB_ERR_DEVICE;
    return nb_set_error(st, "%s: %s failed on cuda: %s", slot, call, cudnnGetErrorString(s));
}

nb_status make_descs(cudnnHandle_t h, const Plan *pl, const nb_rnn_params *p, bool training, Descs *d,
                     const char *slot) {
    const int64_t D = p->bidirectional ? 2 : 1, H = p->hidden_size, Ho = p->proj_size ? p->proj_size : H;
    const int B = (int)p->batch, T = (int)p->seq_len;
    const cudnnDataType_t dt = cudnn_dtype(p->dtype);
    int stack_len[256];
    int *len = B <= 256 ? stack_len : (int *)malloc(sizeof(int) * (size_t)B);
    if (!len) return nb_set_error(NB_ERR_OOM, "%s: out of host memory", slot);
    for (int b = 0; b < B; b++) len[b] = p->lengths ? p->lengths[b] : T;
    double zero = 0; // paddingFill: a value of the data's type (0.0 reads the same as float or double)
    float zero_f = 0;
    void *fill = p->dtype == NB_F64 ? (void *)&zero : (void *)&zero_f;
    cudnnStatus_t s = cudnnCreateRNNDataDescriptor(&d->x);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnCreateRNNDataDescriptor(&d->y);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetRNNDataDescriptor(d->x, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, B, (int)p->input_size, len, fill);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetRNNDataDescriptor(d->y, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, B, (int)(D * Ho), len, fill);
    if (len != stack_len) free(len);
    if (s != CUDNN_STATUS_SUCCESS) return cudnn_fail(slot, "cudnnSetRNNDataDescriptor", s);
    const int LD = (int)(p->num_layers * D);
    int hd[3] = {LD, B, (int)Ho}, hs[3] = {B * (int)Ho, (int)Ho, 1}, cd[3] = {LD, B, (int)H}, cs[3] = {B * (int)H, (int)H, 1};
    s = cudnnCreateTensorDescriptor(&d->h);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetTensorNdDescriptor(d->h, dt, 3, hd, hs);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnCreateTensorDescriptor(&d->c);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetTensorNdDescriptor(d->c, dt, 3, cd, cs);
    if (s != CUDNN_STATUS_SUCCESS) return cudnn_fail(slot, "cudnnSetTensorNdDescriptor", s);
    s = cudnnGetRNNTempSpaceSizes(h, pl->rnn, training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, d->x,
                                  &d->ws, &d->rs);
    return s == CUDNN_STATUS_SUCCESS ? NB_OK : cudnn_fail(slot, "cudnnGetRNNTempSpaceSizes", s);
}

// Weight space <-> flat parameters (to_space: w into ws; else ws into w).
nb_status copy_weights(nb_backend *be, const Plan *pl, char *ws, char *w, bool to_space, const char *slot) {
    cudaStream_t st = stream_of(be);
    if (to_space && !pl->covers) NBC_TRY(slot, cudaMemsetAsync(ws, 0, pl->wbytes, st));
    for (int i = 0; i < pl->nseg; i++) {
        const Seg &g = pl->segs[i];
        void *dst = to_space ? (void *)(ws + g.dst) : (void *)(w + g.src);
        const void *src = to_space ? (const void *)(w + g.src) : (const void *)(ws + g.dst);
        NBC_TRY(slot, cudaMemcpyAsync(dst, src, g.bytes, cudaMemcpyDeviceToDevice, st));
    }
    return NB_OK;
}

// The handle and plan of a call, or NULL with the error set.
Plan *begin(nb_backend *be, const nb_rnn_params *p, const char *slot, cudnnHandle_t *h) {
    *h = nb_cuda_cudnn(be);
    if (!*h) {
        nb_set_error(NB_ERR_DEVICE, "%s: no cuDNN handle on cuda:%d", slot, device_of(be));
        return nullptr;
    }
    return plan_get(be, *h, p, slot);
}

// What every slot call sets up: the handle, the plan (held for the call)
// and the data descriptors for training or inference; st says whether they
// are ready (else the error is set). Members are built in this order and
// torn down in reverse: the descriptors before the plan is let go.
struct Call {
    cudnnHandle_t h = nullptr;
    Plan *pl;
    Held held;
    Descs d;
    nb_status st;
    Call(nb_backend *be, const nb_rnn_params *p, const char *slot, bool training)
        : pl(begin(be, p, slot, &h)), held(pl),
          st(pl ? make_descs(h, pl, p, training, &d, slot) : nb_last_status()) {}
    // The reserve space must be the size cuDNN asked for.
    nb_status check_reserve(const char *slot, const nb_kview *reserve) const {
        if ((size_t)reserve->shape[0] == d.rs) return NB_OK;
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: the reserve space has %lld bytes, cuDNN wants %zu", slot,
                            (long long)reserve->shape[0], d.rs);
    }
};

} // namespace
} // namespace nbc

using namespace nbc;

extern "C" nb_status nb_cuda_rnn_reserve_size(nb_backend *be, const nb_rnn_params *p, int64_t *bytes) {
    const char *slot = "rnn_reserve_size";
    if (!p || !bytes) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL parameters", slot);
    Call c(be, p, slot, true);
    if (c.st == NB_OK) *bytes = (int64_t)c.d.rs;
    return c.st;
}

extern "C" nb_status nb_cuda_rnn_forward(nb_backend *be, const nb_kview *y, const nb_kview *hy, const nb_kview *cy,
                                         const nb_kview *reserve, const nb_kview *x, const nb_kview *hx,
                                         const nb_kview *cx, const nb_kview *w, const nb_rnn_params *p) {
    const char *slot = "rnn_forward";
    Call c(be, p, slot, p->training);
    nb_status st = c.st;
    if (st == NB_OK && p->training) st = c.check_reserve(slot, reserve);
    if (st != NB_OK) return st;
    cudnnHandle_t h = c.h;
    const Plan *pl = c.pl;
    const Descs &d = c.d;
    Scratch wsp, work;
    if (!wsp.alloc(be, pl->wbytes) || !work.alloc(be, d.ws)) return nb_last_status();
    if ((st = copy_weights(be, pl, wsp.as<char>(), (char *)w->data, true, slot)) != NB_OK) return st;
    const bool lstm = p->mode == 2;
    cudnnStatus_t s = cudnnRNNForward(h, pl->rnn, p->training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                      nullptr, d.x, x->data, d.y, y->data, d.h, hx->data,
                                      hy->data, d.c, lstm ? cx->data : nullptr, lstm ? cy->data : nullptr, pl->wbytes,
                                      wsp.ptr, d.ws, work.ptr, p->training ? d.rs : 0,
                                      p->training ? reserve->data : nullptr);
    count_launch();
    return s == CUDNN_STATUS_SUCCESS ? NB_OK : cudnn_fail(slot, "cudnnRNNForward", s);
}

extern "C" nb_status nb_cuda_rnn_backward(nb_backend *be, const nb_kview *dx, const nb_kview *dhx,
                                          const nb_kview *dcx, const nb_kview *dw, const nb_kview *x,
                                          const nb_kview *hx, const nb_kview *cx, const nb_kview *w,
                                          const nb_kview *y, const nb_kview *dy, const nb_kview *dhy,
                                          const nb_kview *dcy, const nb_kview *reserve, const nb_rnn_params *p) {
    const char *slot = "rnn_backward";
    Call c(be, p, slot, true);
    nb_status st = c.st;
    if (st == NB_OK) st = c.check_reserve(slot, reserve);
    if (st != NB_OK) return st;
    cudnnHandle_t h = c.h;
    const Plan *pl = c.pl;
    const Descs &d = c.d;
    Scratch wsp, dwsp, work;
    if (!wsp.alloc(be, pl->wbytes) || (dw && !dwsp.alloc(be, pl->wbytes)) || !work.alloc(be, d.ws)) return nb_last_status();
    if ((st = copy_weights(be, pl, wsp.as<char>(), (char *)w->data, true, slot)) != NB_OK) return st;
    const bool lstm = p->mode == 2;
    // devSeqLengths: NULL, as PyTorch passes it (cuDNN reads the lengths of the data descriptors since 8.9.1)
    const int32_t *lens = nullptr;
    // the data gradients first: they update the reserve space that the weight gradients then read
    cudnnStatus_t s = cudnnRNNBackwardData_v8(h, pl->rnn, lens, d.y, y->data, dy->data, d.x, dx->data, d.h, hx->data,
                                              dhy ? dhy->data : nullptr, dhx ? dhx->data : nullptr, d.c,
                                              lstm ? cx->data : nullptr, lstm && dcy ? dcy->data : nullptr,
                                              lstm && dcx ? dcx->data : nullptr, pl->wbytes, wsp.ptr, d.ws, work.ptr,
                                              d.rs, reserve->data);
    count_launch();
    if (s != CUDNN_STATUS_SUCCESS) return cudnn_fail(slot, "cudnnRNNBackwardData_v8", s);
    if (!dw) return NB_OK;
    // cuDNN accumulates weight gradients (CUDNN_WGRAD_MODE_ADD, its only mode): into zeros
    NBC_TRY(slot, cudaMemsetAsync(dwsp.ptr, 0, pl->wbytes, stream_of(be)));
    s = cudnnRNNBackwardWeights_v8(h, pl->rnn, CUDNN_WGRAD_MODE_ADD, lens, d.x, x->data, d.h, hx->data, d.y, y->data,
                                   pl->wbytes, dwsp.ptr, d.ws, work.ptr, d.rs, reserve->data);
    count_launch();
    if (s != CUDNN_STATUS_SUCCESS) return cudnn_fail(slot, "cudnnRNNBackwardWeights_v8", s);
    return copy_weights(be, pl, dwsp.as<char>(), (char *)dw->data, false, slot);
}
