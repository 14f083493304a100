// attention_cudnn.cu - the attention forward for bfloat16 and float16
// through cuDNN's fused flash attention: the scaled-dot-product-attention
// operation graph of cuDNN 9's backend API, built as cudnn-frontend's
// CompositeSDPANode builds it (what PyTorch's cuDNN attention backend runs
// on Hopper; a single SDPA_FWD operation takes no causal mask before cuDNN
// 9.21). The graph, in order:
//   S = Q K^T (K's own memory: dims and strides of its last two axes
//   swapped), S *= scale, [causal: S = row >= col ? S : -inf by two
//   GEN_INDEX ops, CMP_GE and BINARY_SELECT], m = max_j S, E = exp(S - m),
//   l = sum_j E, lse = m + log l, P = E / l (in q's dtype: bmm2 takes its
//   A operand in the io type), O = P V.
// cuDNN finds no engine without the lse branch, with a float32 P or
// without the graph's handle; scalars go by value (host pointers at
// execution). Plans are cached per shape, strides and dtype (cuDNN compiles
// the kernel at finalisation); engines whose numerical notes say
// nondeterministic are skipped. Where this path does not apply (head size
// not a multiple of 8, misaligned views, a mask, dropout) or cuDNN has no
// engine, the caller runs attention.cu's other paths; with
// NB_CUDA_ATTENTION=cudnn, a problem this path takes that cuDNN cannot run
// is an error instead (the tests' way to know cuDNN ran). Plans are never
// evicted (a captured CUDA graph may hold a plan's kernel): past MAX_PLANS
// shapes, new ones run the other paths.
#include <cudnn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attention.cuh"

extern "C" cudnnHandle_t nb_cuda_cudnn(nb_backend *be); // cuda_backend.cu

namespace nbc {
namespace {

constexpr int MAX_PLANS = 1024; // shapes kept
constexpr int MAX_DESC = 80;   // descriptors of one plan (the causal graph with 4 configs: 57)

// What a plan depends on, its handle included (plans are cached per
// handle, as PyTorch caches its cuDNN graphs per thread). All int64: no
// struct padding for memcmp.
struct Key {
    int64_t handle, dev, dt, causal, b1, b2, L, S, E, Ev;
    int64_t st[4][3]; // q, k, v, out: batch, head and row strides
};

struct Plan {
    Key key;
    cudnnBackendDescriptor_t desc[MAX_DESC]; // everything the plan was built from, kept alive with it
    int ndesc;
    cudnnBackendDescriptor_t plan; // NULL: cuDNN has no engine for the key
    int64_t ws;
    cudnnStatus_t why; // no plan: the failing call's status (success: no deterministic config finalised)
    int64_t ncfg;      // the heuristics' configs
};

pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
Plan *plans[MAX_PLANS];
int n_plans;

void plan_free(Plan *p) {
    if (!p) return;
    if (p->plan) cudnnBackendDestroyDescriptor(p->plan);
    for (int i = p->ndesc - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(p->desc[i]);
    free(p);
}

// The tensors' unique ids (the variant pack names the non-virtual ones).
enum : int64_t { UID_Q = 1, UID_K, UID_V, UID_O, UID_LSE, UID_SCALE, UID_NEG_INF, UID_VIRTUAL = 100 };

// Builds descriptors into a Plan; the first failing call leaves ok false
// (and later calls do nothing), the status kept for the message.
struct Builder {
    Plan *p;
    bool ok = true;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    int64_t next_uid = UID_VIRTUAL;

    bool check(cudnnStatus_t s) {
        if (ok && s != CUDNN_STATUS_SUCCESS) ok = false, st = s;
        return ok;
    }
    cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t t) {
        cudnnBackendDescriptor_t d = nullptr;
        if (!ok) return nullptr;
        if (p->ndesc == MAX_DESC) abort(); // the graph below has a fixed size
        if (!check(cudnnBackendCreateDescriptor(t, &d))) return nullptr;
        return p->desc[p->ndesc++] = d;
    }
    void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n,
             const void *v) {
        if (ok) check(cudnnBackendSetAttribute(d, a, t, n, v));
    }
    void set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a, cudnnBackendDescriptor_t v) {
        set(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
    }
    void finalize(cudnnBackendDescriptor_t d) {
        if (ok) check(cudnnBackendFinalize(d));
    }

    // A 4-d tensor; uid 0 takes the next virtual id.
    cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t dt, const int64_t dims[4], const int64_t strides[4],
                                    bool is_virtual = false, bool by_value = false) {
        cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        if (!uid) uid = next_uid++;
        const int64_t align = 16;
        const bool yes = true;
        set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
        set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
        set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
        set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
        set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
        if (is_virtual) set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
        if (by_value) set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
        finalize(d);
        return d;
    }
    // A virtual float32 (or dt) tensor of dims, packed strides.
    cudnnBackendDescriptor_t virt(const int64_t dims[4], cudnnDataType_t dt = CUDNN_DATA_FLOAT) {
        const int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
        return tensor(0, dt, dims, strides, true);
    }
    cudnnBackendDescriptor_t scalar(int64_t uid) {
        const int64_t one[4] = {1, 1, 1, 1};
        return tensor(uid, CUDNN_DATA_FLOAT, one, one, false, true);
    }

    // y = mode(x[, b][, t]) (t: BINARY_SELECT's condition); axis for GEN_INDEX.
    cudnnBackendDescriptor_t pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                                       cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                                       cudnnBackendDescriptor_t y, int64_t axis = -1) {
        cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
        set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
        set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
        if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
        finalize(pw);
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        const float one = 1;
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
        if (b) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
        if (t) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
        set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
        set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
        finalize(op);
        return op;
    }
    cudnnBackendDescriptor_t reduction(cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x,
                                       cudnnBackendDescriptor_t y) {
        cudnnBackendDescriptor_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
        const cudnnDataType_t f = CUDNN_DATA_FLOAT;
        set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how);
        set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
        finalize(r);
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
        finalize(op);
        return op;
    }
    cudnnBackendDescriptor_t matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                                    cudnnBackendDescriptor_t c) {
        cudnnBackendDescriptor_t m = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
        const cudnnDataType_t f = CUDNN_DATA_FLOAT;
        set(m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
        finalize(m);
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, m);
        finalize(op);
        return op;
    }
};

// Whether a config's engine promises the same bits every run.
bool deterministic(Builder &bd, cudnnBackendDescriptor_t cfg) {
    cudnnBackendDescriptor_t eng = bd.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t n = 0;
    if (!eng || cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                         &eng) != CUDNN_STATUS_SUCCESS)
        return false;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) != CUDNN_STATUS_SUCCESS)
        return false;
    for (int64_t i = 0; i < n; i++)
        if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return false;
    return true;
}

// The graph of the file's comment for key k, and the first deterministic
// engine config that finalises into a plan. p->plan stays NULL when none does.
void plan_build(cudnnHandle_t h, Plan *p) {
    const Key &k = p->key;
    Builder bd{p};
    const cudnnDataType_t io = k.dt == NB_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    const int64_t qd[4] = {k.b1, k.b2, k.L, k.E}, qs[4] = {k.st[0][0], k.st[0][1], k.st[0][2], 1};
    const int64_t ktd[4] = {k.b1, k.b2, k.E, k.S}, kts[4] = {k.st[1][0], k.st[1][1], 1, k.st[1][2]};
    const int64_t vd[4] = {k.b1, k.b2, k.S, k.Ev}, vs[4] = {k.st[2][0], k.st[2][1], k.st[2][2], 1};
    const int64_t od[4] = {k.b1, k.b2, k.L, k.Ev}, os[4] = {k.st[3][0], k.st[3][1], k.st[3][2], 1};
    const int64_t sd[4] = {k.b1, k.b2, k.L, k.S}, rd[4] = {k.b1, k.b2, k.L, 1};
    const int64_t rs[4] = {k.b2 * k.L, k.L, 1, 1};
    cudnnBackendDescriptor_t tq = bd.tensor(UID_Q, io, qd, qs), tk = bd.tensor(UID_K, io, ktd, kts);
    cudnnBackendDescriptor_t tv = bd.tensor(UID_V, io, vd, vs), to = bd.tensor(UID_O, io, od, os);
    cudnnBackendDescriptor_t lse = bd.tensor(UID_LSE, f32, rd, rs), scale = bd.scalar(UID_SCALE);
    cudnnBackendDescriptor_t ops[16];
    int n = 0;
    cudnnBackendDescriptor_t s = bd.virt(sd), s1 = bd.virt(sd);
    ops[n++] = bd.matmul(tq, tk, s);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, s, scale, nullptr, s1);
    if (k.causal) { // keep (row >= col) ? S : -inf
        cudnnBackendDescriptor_t row = bd.virt(sd, CUDNN_DATA_INT32), col = bd.virt(sd, CUDNN_DATA_INT32);
        cudnnBackendDescriptor_t keep = bd.virt(sd, CUDNN_DATA_BOOLEAN), s2 = bd.virt(sd);
        cudnnBackendDescriptor_t neg_inf = bd.scalar(UID_NEG_INF);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, s1, nullptr, nullptr, row, 2);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, s1, nullptr, nullptr, col, 3);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, s1, neg_inf, keep, s2);
        s1 = s2;
    }
    cudnnBackendDescriptor_t m = bd.virt(rd), z = bd.virt(sd), e = bd.virt(sd), l = bd.virt(rd), logl = bd.virt(rd);
    cudnnBackendDescriptor_t pr = bd.virt(sd, io);
    ops[n++] = bd.reduction(CUDNN_REDUCE_TENSOR_MAX, s1, m);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_SUB, f32, s1, m, nullptr, z);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_EXP, f32, z, nullptr, nullptr, e);
    ops[n++] = bd.reduction(CUDNN_REDUCE_TENSOR_ADD, e, l);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_LOG, f32, l, nullptr, nullptr, logl);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_ADD, f32, m, logl, nullptr, lse);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_DIV, f32, e, l, nullptr, pr);
    ops[n++] = bd.matmul(pr, tv, to);
    cudnnBackendDescriptor_t graph = bd.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    bd.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, ops);
    bd.set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    bd.finalize(graph);
    cudnnBackendDescriptor_t heur = bd.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    bd.set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    bd.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    bd.finalize(heur);
    int64_t ncfg = 0;
    if (bd.ok)
        bd.check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &ncfg,
                                          nullptr));
    ncfg = ncfg < 4 ? ncfg : 4; // the heuristics' first few, in their order
    cudnnBackendDescriptor_t cfg[4];
    for (int64_t i = 0; i < ncfg; i++) cfg[i] = bd.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (bd.ok && ncfg)
        bd.check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ncfg,
                                          &ncfg, cfg));
    p->why = bd.st, p->ncfg = bd.ok ? ncfg : 0;
    if (!bd.ok) return;
    for (int64_t i = 0; i < ncfg && bd.ok; i++) {
        if (!deterministic(bd, cfg[i])) continue;
        cudnnBackendDescriptor_t plan = nullptr;
        if ((p->why = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan)))
            return;
        int64_t ws = 0;
        if (!(p->why = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i])) &&
            !(p->why = cudnnBackendFinalize(plan)) &&
            !(p->why = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                                nullptr, &ws))) {
            p->plan = plan, p->ws = ws;
            return;
        }
        cudnnBackendDestroyDescriptor(plan);
    }
}

// Whether a failed build says the problem is unsupported (kept: the
// heuristics run once per shape), not a passing condition such as memory.
bool lasting(const Plan *p) {
    int cat = CUDNN_STATUS_CATEGORY((int)p->why);
    return p->why == CUDNN_STATUS_SUCCESS || cat == CUDNN_STATUS_NOT_SUPPORTED || cat == CUDNN_STATUS_BAD_PARAM;
}

// The cached plan of k, built on a miss; *owned when the caller must free
// it (a failure that may pass: the next call builds again). Called under
// plans_lock. NULL with the cache full (*oom false) or NB_ERR_OOM set (*oom).
Plan *plan_get(cudnnHandle_t h, const Key &k, bool *owned, bool *oom) {
    *owned = *oom = false;
    for (int i = 0; i < n_plans; i++)
        if (!memcmp(&plans[i]->key, &k, sizeof k)) return plans[i];
    if (n_plans == MAX_PLANS) return nullptr;
    Plan *p = (Plan *)calloc(1, sizeof(Plan));
    if (!p) {
        *oom = true;
        nb_set_error(NB_ERR_OOM, "attention: out of host memory for a cuDNN plan");
        return nullptr;
    }
    p->key = k;
    plan_build(h, p);
    if (p->plan || lasting(p)) plans[n_plans++] = p;
    else *owned = true;
    return p;
}

// NB_CUDA_ATTENTION=cudnn: a problem this path takes must run here (read once).
bool required() {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("NB_CUDA_ATTENTION");
        v = e && !strcmp(e, "cudnn");
    }
    return v == 1;
}

// A view's strides as cuDNN wants them: a size-1 dim gets the packed
// stride (a 3-d view's missing batch dim says 0); false when a dim of
// size > 1 has stride 0 or a stride is not a multiple of 8 elements (16
// bytes: the alignment the tensors declare).
bool strides_of(const Mat &m, int64_t b1, int64_t R, int64_t C, int64_t out[3]) {
    out[2] = R > 1 ? m.ld : C;
    out[1] = m.b2 > 1 ? m.s2 : R * out[2];
    out[0] = b1 > 1 ? m.s1 : m.b2 * out[1];
    for (int i = 0; i < 3; i++)
        if (out[i] <= 0 || out[i] % 8) return false;
    return ((uintptr_t)m.data & 15) == 0;
}

} // namespace

nb_status cudnn_forward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                        const Mat &v, const Mat &out, void *lse, bool *ran) {
    *ran = false;
    if (!nb_dtype_is_16bit(dt) || a.dropout || a.mask.ptr || a.L <= DEC_L) return NB_OK;
    Key key{};
    key.dev = device_of(be), key.dt = dt, key.causal = a.causal, key.b2 = q.b2, key.b1 = a.B / q.b2;
    key.L = a.L, key.S = a.S, key.E = a.E, key.Ev = a.Ev;
    const Mat *m[4] = {&q, &k, &v, &out};
    const int64_t rows[4] = {a.L, a.S, a.S, a.L}, cols[4] = {a.E, a.E, a.Ev, a.Ev};
    bool fits = a.E % 8 == 0 && a.Ev % 8 == 0 && a.E <= 256 && a.Ev <= 256;
    for (int i = 0; i < 4 && fits; i++) fits = strides_of(*m[i], key.b1, rows[i], cols[i], key.st[i]);
    if (!fits) return NB_OK;
    cudnnHandle_t h = nb_cuda_cudnn(be);
    if (!h) return required() ? nb_set_error(NB_ERR_DEVICE, "%s: cuDNN is unavailable", op) : NB_OK;
    key.handle = (int64_t)(uintptr_t)h;
    // the lse as cuDNN writes it: float32 [B, L], 16-byte aligned (else through scratch)
    Scratch lse_buf, ws;
    const size_t lse_bytes = sizeof(float) * (size_t)(a.B * a.L);
    void *lse_dst = ((uintptr_t)lse & 15) == 0 ? lse : nullptr;
    if (!lse_dst) {
        if (!lse_buf.alloc(be, lse_bytes)) return nb_last_status();
        lse_dst = lse_buf.ptr;
    }
    pthread_mutex_lock(&plans_lock); // one thread builds or runs a plan at a time
    bool owned, oom;
    Plan *p = plan_get(h, key, &owned, &oom);
    if (!p) {
        pthread_mutex_unlock(&plans_lock);
        if (oom) return NB_ERR_OOM;
        return required() ? nb_set_error(NB_ERR_DEVICE, "%s: the cuDNN plan cache is full", op) : NB_OK;
    }
    nb_status st = NB_OK;
    if (!p->plan && required())
        st = nb_set_error(NB_ERR_DEVICE,
                          "%s: cuDNN has no fused attention engine for this problem (%lld configs; last status: %s)",
                          op, (long long)p->ncfg, cudnnGetErrorString(p->why));
    if (!st && p->plan && (p->ws == 0 || ws.alloc(be, (size_t)p->ws))) {
        const float scale = (float)a.scale, neg_inf = -INFINITY;
        void *ptrs[7] = {q.data, k.data, v.data, out.data, lse_dst, (void *)&scale, (void *)&neg_inf};
        const int64_t uids[7] = {UID_Q, UID_K, UID_V, UID_O, UID_LSE, UID_SCALE, UID_NEG_INF};
        const int64_t nptr = a.causal ? 7 : 6;
        cudnnBackendDescriptor_t pack = nullptr;
        cudnnStatus_t cs = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
        void *wsp = ws.ptr;
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, nptr, ptrs);
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, nptr, uids);
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp);
        if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnBackendFinalize(pack);
        if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnBackendExecute(h, p->plan, pack);
        if (pack) cudnnBackendDestroyDescriptor(pack);
        if (cs != CUDNN_STATUS_SUCCESS)
            st = nb_set_error(NB_ERR_DEVICE, "%s: cuDNN's fused attention failed on cuda:%d: %s", op, device_of(be),
                              cudnnGetErrorString(cs));
        else *ran = true;
    } else if (!st && p->plan) st = nb_last_status(); // the workspace allocation
    if (owned) plan_free(p);
    pthread_mutex_unlock(&plans_lock);
    if (!st && *ran && lse_dst != lse)
        NBC_TRY(op, cudaMemcpyAsync(lse, lse_dst, lse_bytes, cudaMemcpyDeviceToDevice, stream_of(be)));
    return st;
}

} // namespace nbc
