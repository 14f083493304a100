// attention_cudnn.cu - attention for bfloat16 and float16 through cuDNN's
// fused flash attention, forward and backward: the scaled-dot-product-
// attention operation graphs of cuDNN 9's backend API, built as
// cudnn-frontend's CompositeSDPANode and CompositeSDPABackwardNode build
// them (what PyTorch's cuDNN attention backend runs on Hopper; a single
// SDPA_FWD operation takes no causal mask before cuDNN 9.21).
// The forward, in order:
//   S = Q K^T (K's own memory: dims and strides of its last two axes
//   swapped), S *= scale, [causal: S = row >= col ? S : -inf by two
//   GEN_INDEX ops, CMP_GE and BINARY_SELECT], m = max_j S, E = exp(S - m),
//   l = sum_j E, lse = m + log l, P = E / l, [dropout: P = P * Z * 1/(1-p)],
//   P in q's dtype (bmm2 takes its A operand in the io type), O = P V.
// The backward (the frontend's deterministic, dP-workspace form: dQ is one
// product, no float32 accumulation by atomics):
//   D = rowsum(dO o O') (a float32 [B, L] in scratch; O' = O, or with
//   nabla's dropout mask a copy of O times 1 - p: cudnn_backward says
//   why; with cuDNN's generator O times a graph factor 1 - p),
//   P = exp(scale Q K^T - lse) [causal as above], P' = P [* Z * 1/(1-p)],
//   dV = P'^T dO, dS = ((dO V^T) [* Z] - D) o P [* 1/(1-p)] * scale,
//   dK = dS^T Q, dQ = dS K.
// Dropout, by default where the caller allows it (the slot's own_rng_out)
// and cuDNN has a plan: Z from cuDNN's own generator, an RNG operation in the graph (Bernoulli with
// probability 1 - p; Philox, from int64 seed and offset tensors that
// k_rng_args writes on the stream, so a CUDA graph's replay reads the
// generator's offset at replay): no mask in memory. Its bits are cuDNN's,
// so the forward says it drew them (*own_rng_out) and the backward then
// runs here, allocating the gradients the caller does not want; a
// backward cuDNN cannot run is an error. Otherwise, or with
// NB_CUDA_ATTENTION_DROPOUT=philox: Z is nabla's own keep mask (the
// Philox bits of element (b*L + i)*S + j, as every other path and the
// CPU), written in q's dtype to scratch by k_keep_mask before each graph
// runs, as the frontend's custom dropout mask; so the cuDNN and the other
// paths pair forward and backward freely. The mask costs memory traffic
// and slower engines: GPT-2 at batch 16 x seq 1024 took 69.8 ms a step
// with it against 45.0 with cuDNN's generator (one H200 run).
// cuDNN finds no engine without the lse branch, with a float32 P or
// without the graph's handle; scalars go by value (host pointers at
// execution). Plans are cached per shape, strides and dtype (cuDNN compiles
// the kernel at finalisation); engines whose numerical notes say
// nondeterministic are skipped. Where this path does not apply (head size
// not a multiple of 8, misaligned views, a mask, nabla's dropout mask past
// MASK_MAX) or cuDNN has no engine, the caller runs attention.cu's other
// paths; with NB_CUDA_ATTENTION=cudnn, a problem this path takes that
// cuDNN cannot run is an error instead (the tests' way to know cuDNN ran).
// Plans are never evicted (a captured CUDA graph may hold a plan's kernel):
// past MAX_PLANS shapes, new ones run the other paths.
#include <cudnn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attention.cuh"

extern "C" cudnnHandle_t nb_cuda_cudnn(nb_backend *be); // cuda_backend.cu

namespace nbc {
namespace {

constexpr int MAX_PLANS = 1024; // shapes kept
constexpr int MAX_DESC = 160;  // descriptors of one plan (the causal backward with dropout and 4 configs: about 110)
constexpr int64_t MASK_MAX = (int64_t)1 << 26; // dropout: the keep mask's B*L*S elements at most

// What a plan depends on, its handle included (plans are cached per
// handle, as PyTorch caches its cuDNN graphs per thread). All int64: no
// struct padding for memcmp.
struct Key {
    int64_t handle, dev, dt, bwd, causal, drop, b1, b2, L, S, E, Ev;
    int64_t rng, keep; // dropout from cuDNN's generator; 1 - p's bits (the RNG operation's probability)
    int64_t st[8][3]; // q, k, v, out[, gout, gq, gk, gv]: batch, head and row strides
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
enum : int64_t {
    UID_Q = 1, UID_K, UID_V, UID_O, UID_LSE, UID_SCALE, UID_NEG_INF,
    UID_DO, UID_DQ, UID_DK, UID_DV, UID_DSUM, UID_D_FACTOR, UID_ZMASK, UID_DROP_SCALE, UID_SEED, UID_OFFSET,
    UID_VIRTUAL = 100
};

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
    // y = x with y's own dims and strides (the frontend's transposes).
    cudnnBackendDescriptor_t reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
        set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
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

// The operands' descriptors shared by both graphs (the file's comment).
struct Operands {
    cudnnDataType_t io;
    int64_t sd[4], rd[4], rs[4]; // scores [b1, b2, L, S]; rows [b1, b2, L, 1] packed
    cudnnBackendDescriptor_t q, kt, v, o, lse, scale;
};
Operands operands(Builder &bd, const Key &k) {
    Operands x;
    x.io = k.dt == NB_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    const int64_t qd[4] = {k.b1, k.b2, k.L, k.E}, qs[4] = {k.st[0][0], k.st[0][1], k.st[0][2], 1};
    const int64_t ktd[4] = {k.b1, k.b2, k.E, k.S}, kts[4] = {k.st[1][0], k.st[1][1], 1, k.st[1][2]};
    const int64_t vd[4] = {k.b1, k.b2, k.S, k.Ev}, vs[4] = {k.st[2][0], k.st[2][1], k.st[2][2], 1};
    const int64_t od[4] = {k.b1, k.b2, k.L, k.Ev}, os[4] = {k.st[3][0], k.st[3][1], k.st[3][2], 1};
    const int64_t sd[4] = {k.b1, k.b2, k.L, k.S}, rd[4] = {k.b1, k.b2, k.L, 1}, rs[4] = {k.b2 * k.L, k.L, 1, 1};
    memcpy(x.sd, sd, sizeof sd), memcpy(x.rd, rd, sizeof rd), memcpy(x.rs, rs, sizeof rs);
    x.q = bd.tensor(UID_Q, x.io, qd, qs), x.kt = bd.tensor(UID_K, x.io, ktd, kts);
    // the backward reads V only as V^T (its own descriptor, graph_bwd)
    x.v = k.bwd ? nullptr : bd.tensor(UID_V, x.io, vd, vs);
    x.o = bd.tensor(UID_O, x.io, od, os);
    x.lse = bd.tensor(UID_LSE, CUDNN_DATA_FLOAT, rd, rs), x.scale = bd.scalar(UID_SCALE);
    return x;
}

// s kept where row >= col, else -inf (the causal mask); returns the result.
cudnnBackendDescriptor_t causal(Builder &bd, const Operands &x, cudnnBackendDescriptor_t s,
                                cudnnBackendDescriptor_t *ops, int *n) {
    cudnnBackendDescriptor_t row = bd.virt(x.sd, CUDNN_DATA_INT32), col = bd.virt(x.sd, CUDNN_DATA_INT32);
    cudnnBackendDescriptor_t keep = bd.virt(x.sd, CUDNN_DATA_BOOLEAN), y = bd.virt(x.sd);
    cudnnBackendDescriptor_t neg_inf = bd.scalar(UID_NEG_INF);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    ops[(*n)++] = bd.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, s, nullptr, nullptr, row, 2);
    ops[(*n)++] = bd.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, s, nullptr, nullptr, col, 3);
    ops[(*n)++] = bd.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
    ops[(*n)++] = bd.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, s, neg_inf, keep, y);
    return y;
}

// The keep mask's row stride: S rounded up to 8 elements (rows 16-byte
// aligned, as the other operands').
int64_t mask_ld(int64_t S) { return (S + 7) / 8 * 8; }

// The keep mask Z [b1, b2, L, S] in q's dtype, rows mask_ld(S) apart.
cudnnBackendDescriptor_t keep_mask(Builder &bd, const Operands &x) {
    const int64_t ld = mask_ld(x.sd[3]), zs[4] = {x.sd[1] * x.sd[2] * ld, x.sd[2] * ld, ld, 1};
    return bd.tensor(UID_ZMASK, x.io, x.sd, zs);
}

// Z [b1, b2, L, S] from cuDNN's generator (float32, virtual): an RNG
// operation into ops, Bernoulli with k's keep probability, seeded by the
// int64 seed and offset tensors.
cudnnBackendDescriptor_t rng_mask(Builder &bd, const Operands &x, const Key &k, cudnnBackendDescriptor_t *ops,
                                  int *n) {
    const int64_t one[4] = {1, 1, 1, 1};
    cudnnBackendDescriptor_t seed = bd.tensor(UID_SEED, CUDNN_DATA_INT64, one, one);
    cudnnBackendDescriptor_t offset = bd.tensor(UID_OFFSET, CUDNN_DATA_INT64, one, one);
    cudnnBackendDescriptor_t z = bd.virt(x.sd);
    cudnnBackendDescriptor_t rng = bd.make(CUDNN_BACKEND_RNG_DESCRIPTOR);
    const cudnnRngDistribution_t dist = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
    double keep;
    memcpy(&keep, &k.keep, sizeof keep);
    bd.set(rng, CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1, &dist);
    bd.set(rng, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, 1, &keep);
    bd.finalize(rng);
    cudnnBackendDescriptor_t op = bd.make(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR);
    bd.set_desc(op, CUDNN_ATTR_OPERATION_RNG_YDESC, z);
    bd.set_desc(op, CUDNN_ATTR_OPERATION_RNG_DESC, rng);
    bd.set_desc(op, CUDNN_ATTR_OPERATION_RNG_SEED, seed);
    bd.set_desc(op, CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, offset);
    bd.finalize(op);
    ops[(*n)++] = op;
    return z;
}

// The forward graph of the file's comment into ops.
void graph_fwd(Builder &bd, const Key &k, cudnnBackendDescriptor_t *ops, int *np) {
    const Operands x = operands(bd, k);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    int n = 0;
    cudnnBackendDescriptor_t s = bd.virt(x.sd), s1 = bd.virt(x.sd);
    ops[n++] = bd.matmul(x.q, x.kt, s);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, s, x.scale, nullptr, s1);
    if (k.causal) s1 = causal(bd, x, s1, ops, &n);
    cudnnBackendDescriptor_t m = bd.virt(x.rd), z = bd.virt(x.sd), e = bd.virt(x.sd), l = bd.virt(x.rd);
    cudnnBackendDescriptor_t logl = bd.virt(x.rd), pr = bd.virt(x.sd, x.io);
    ops[n++] = bd.reduction(CUDNN_REDUCE_TENSOR_MAX, s1, m);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_SUB, f32, s1, m, nullptr, z);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_EXP, f32, z, nullptr, nullptr, e);
    ops[n++] = bd.reduction(CUDNN_REDUCE_TENSOR_ADD, e, l);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_LOG, f32, l, nullptr, nullptr, logl);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_ADD, f32, m, logl, nullptr, x.lse);
    if (k.drop && k.rng) { // P * Z, then * 1/(1-p) (the frontend's order with its RNG)
        cudnnBackendDescriptor_t p = bd.virt(x.sd), p1 = bd.virt(x.sd), z = rng_mask(bd, x, k, ops, &n);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_DIV, f32, e, l, nullptr, p);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, p, z, nullptr, p1);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, p1, bd.scalar(UID_DROP_SCALE), nullptr, pr);
    } else if (k.drop) { // P * 1/(1-p), then * Z (the frontend's custom-mask order)
        cudnnBackendDescriptor_t p = bd.virt(x.sd), p1 = bd.virt(x.sd);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_DIV, f32, e, l, nullptr, p);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, p, bd.scalar(UID_DROP_SCALE), nullptr, p1);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, p1, keep_mask(bd, x), nullptr, pr);
    } else {
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_DIV, f32, e, l, nullptr, pr);
    }
    ops[n++] = bd.matmul(pr, x.v, x.o);
    *np = n;
}

// The backward graph of the file's comment into ops.
void graph_bwd(Builder &bd, const Key &k, cudnnBackendDescriptor_t *ops, int *np) {
    const Operands x = operands(bd, k);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    int n = 0;
    const int64_t od[4] = {k.b1, k.b2, k.L, k.Ev}, dos[4] = {k.st[4][0], k.st[4][1], k.st[4][2], 1};
    const int64_t qd[4] = {k.b1, k.b2, k.L, k.E}, dqs[4] = {k.st[5][0], k.st[5][1], k.st[5][2], 1};
    const int64_t kd[4] = {k.b1, k.b2, k.S, k.E}, dks[4] = {k.st[6][0], k.st[6][1], k.st[6][2], 1};
    const int64_t vd[4] = {k.b1, k.b2, k.S, k.Ev}, dvs[4] = {k.st[7][0], k.st[7][1], k.st[7][2], 1};
    const int64_t vtd[4] = {k.b1, k.b2, k.Ev, k.S}, vts[4] = {k.st[2][0], k.st[2][1], 1, k.st[2][2]};
    const int64_t ks[4] = {k.st[1][0], k.st[1][1], k.st[1][2], 1};
    // [.., S, L] of a packed [.., L, S]
    const int64_t td[4] = {k.b1, k.b2, k.S, k.L}, ts[4] = {k.b2 * k.L * k.S, k.L * k.S, 1, k.S};
    cudnnBackendDescriptor_t dO = bd.tensor(UID_DO, x.io, od, dos), dQ = bd.tensor(UID_DQ, x.io, qd, dqs);
    cudnnBackendDescriptor_t dK = bd.tensor(UID_DK, x.io, kd, dks), dV = bd.tensor(UID_DV, x.io, vd, dvs);
    cudnnBackendDescriptor_t vt = bd.tensor(UID_V, x.io, vtd, vts); // V as V^T for dO V^T
    cudnnBackendDescriptor_t dsum = bd.tensor(UID_DSUM, f32, x.rd, x.rs);
    cudnnBackendDescriptor_t zmask = !k.drop ? nullptr : k.rng ? rng_mask(bd, x, k, ops, &n) : keep_mask(bd, x);
    cudnnBackendDescriptor_t dscale = k.drop ? bd.scalar(UID_DROP_SCALE) : nullptr;
    // D = rowsum(dO o O) * f: f = 1 with nabla's mask (O comes in scaled by
    // 1 - p: cudnn_backward), 1 - p with cuDNN's generator (the frontend's
    // Dropout_scale_inv; O as it is)
    cudnnBackendDescriptor_t dd = bd.virt(od), r = bd.virt(x.rd);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, dO, x.o, nullptr, dd);
    ops[n++] = bd.reduction(CUDNN_REDUCE_TENSOR_ADD, dd, r);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, r, bd.scalar(UID_D_FACTOR), nullptr, dsum);
    // P = exp(scale Q K^T - lse), P' = P Z / (1-p), dV = P'^T dO
    cudnnBackendDescriptor_t s = bd.virt(x.sd), s1 = bd.virt(x.sd), s2 = bd.virt(x.sd), e = bd.virt(x.sd);
    ops[n++] = bd.matmul(x.q, x.kt, s);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, s, x.scale, nullptr, s1);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_SUB, f32, s1, x.lse, nullptr, s2);
    if (k.causal) s2 = causal(bd, x, s2, ops, &n);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_EXP, f32, s2, nullptr, nullptr, e);
    cudnnBackendDescriptor_t pd = e;
    if (k.drop) {
        cudnnBackendDescriptor_t p1 = bd.virt(x.sd), p2 = bd.virt(x.sd);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, e, zmask, nullptr, p1);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, p1, dscale, nullptr, p2);
        pd = p2;
    }
    cudnnBackendDescriptor_t pt = bd.tensor(0, x.io, td, ts, true);
    ops[n++] = bd.reshape(pd, pt);
    ops[n++] = bd.matmul(pt, dO, dV);
    // dS = ((dO V^T) Z - D) o P / (1-p) * scale
    cudnnBackendDescriptor_t dp = bd.virt(x.sd);
    ops[n++] = bd.matmul(dO, vt, dp);
    if (k.drop) {
        cudnnBackendDescriptor_t dp1 = bd.virt(x.sd);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, dp, zmask, nullptr, dp1);
        dp = dp1;
    }
    cudnnBackendDescriptor_t dp2 = bd.virt(x.sd), ds = bd.virt(x.sd);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_SUB, f32, dp, dsum, nullptr, dp2);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, dp2, e, nullptr, ds);
    if (k.drop) {
        cudnnBackendDescriptor_t ds1 = bd.virt(x.sd);
        ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, ds, dscale, nullptr, ds1);
        ds = ds1;
    }
    cudnnBackendDescriptor_t ds2 = bd.virt(x.sd);
    ops[n++] = bd.pointwise(CUDNN_POINTWISE_MUL, f32, ds, x.scale, nullptr, ds2);
    // dK = dS^T Q, dQ = dS K
    cudnnBackendDescriptor_t dst = bd.tensor(0, x.io, td, ts, true);
    ops[n++] = bd.reshape(ds2, dst);
    ops[n++] = bd.matmul(dst, x.q, dK);
    cudnnBackendDescriptor_t kk = bd.tensor(0, x.io, kd, ks, true);
    ops[n++] = bd.reshape(x.kt, kk);
    ops[n++] = bd.matmul(ds2, kk, dQ);
    *np = n;
}

// The graph of key k, and the first deterministic engine config that
// finalises into a plan. p->plan stays NULL when none does.
void plan_build(cudnnHandle_t h, Plan *p) {
    const Key &k = p->key;
    Builder bd{p};
    cudnnBackendDescriptor_t ops[40];
    int n = 0;
    (k.bwd ? graph_bwd : graph_fwd)(bd, k, ops, &n);
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
    ncfg = ncfg < 8 ? ncfg : 8; // the heuristics' first few, in their order
    cudnnBackendDescriptor_t cfg[8];
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

// k_keep_mask: z[(b L + i) ld + j] = 1 where Philox keeps element
// (b0 + b, i, j) of the weights, else 0 (the slot's layout, keep2's bits),
// in q's dtype, for the nmat matrices from b0.
template <typename T> __global__ void k_keep_mask(Att a, T *z, int64_t ld, int64_t b0, int64_t nmat) {
    const int64_t pairs = (a.S + 1) / 2, total = nmat * a.L * pairs;
    NBC_GRID_STRIDE(t, total) {
        const int64_t r = idiv(t, pairs), j = 2 * (t - r * pairs), b = idiv(r, a.L), i = r - b * a.L;
        double w[2];
        keep2(a, b0 + b, i, j, w);
        if (j + 1 < a.S) { // one 4-byte store (ld and j even)
            Vec<T, 2> y;
            y.v[0] = cv<T>(w[0] != 0), y.v[1] = cv<T>(w[1] != 0);
            *(Vec<T, 2> *)(z + r * ld + j) = y;
        } else z[r * ld + j] = cv<T>(w[0] != 0);
    }
}

// k_keep_mask where S is a multiple of 8 (rows unpadded: ld == S): the
// pairs of the chunk are consecutive counter blocks from that of element
// e0 = b0 L S, so no index division; 4 blocks (8 elements, one 16-byte
// store) a thread, their Philox chains independent. The same bits.
template <typename T> __global__ void k_keep_mask_dense(Att a, T *z, int64_t e0, int64_t total8) {
    const uint64_t base = a.offset + (a.offset_base ? *a.offset_base : 0) + (uint64_t)(e0 / 2);
    NBC_GRID_STRIDE(t, total8) {
        Vec<T, 8> y;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const nb_philox_u4 w = nb_philox4x32_10(base + (uint64_t)(4 * t + k), 0, a.seed);
            y.v[2 * k] = cv<T>(((((uint64_t)w.v[0] << 32) | w.v[1]) >> 11) >= a.thresh);
            y.v[2 * k + 1] = cv<T>(((((uint64_t)w.v[2] << 32) | w.v[3]) >> 11) >= a.thresh);
        }
        *(Vec<T, 8> *)(z + 8 * t) = y;
    }
}

nb_status keep_mask_fill(nb_backend *be, const char *op, nb_dtype dt, const Att &a, int64_t b0, int64_t nmat,
                         void *z) {
    const int64_t ld = mask_ld(a.S);
    if (ld == a.S && ((uintptr_t)z & 15) == 0) {
        const int64_t total8 = nmat * a.L * a.S / 8;
        if (dt == NB_BF16)
            k_keep_mask_dense<__nv_bfloat16>
                <<<blocks_for(total8), THREADS, 0, stream_of(be)>>>(a, (__nv_bfloat16 *)z, b0 * a.L * a.S, total8);
        else
            k_keep_mask_dense<__half><<<blocks_for(total8), THREADS, 0, stream_of(be)>>>(a, (__half *)z, b0 * a.L * a.S,
                                                                                       total8);
        return launched(op);
    }
    const unsigned blocks = blocks_for(nmat * a.L * ((a.S + 1) / 2));
    if (dt == NB_BF16)
        k_keep_mask<__nv_bfloat16><<<blocks, THREADS, 0, stream_of(be)>>>(a, (__nv_bfloat16 *)z, ld, b0, nmat);
    else k_keep_mask<__half><<<blocks, THREADS, 0, stream_of(be)>>>(a, (__half *)z, ld, b0, nmat);
    return launched(op);
}

// o * f (rounded to T once) into dst at o's own offsets (the same
// strides), 8 elements (16 bytes) a thread: Ev and o's strides are
// multiples of 8 and o 16-byte aligned (key_of's conditions).
template <typename T> __global__ void k_scaled_copy(Mat o, T *dst, int64_t L, int64_t Ev, int64_t total8, float f) {
    const int64_t per_row = Ev / 8;
    NBC_GRID_STRIDE(t, total8) {
        const int64_t r = idiv(t, per_row), e = 8 * (t - r * per_row), b = idiv(r, L), i = r - b * L;
        const int64_t off = mat_off(o, b) + i * o.ld + e;
        Vec<T, 8> x = *(const Vec<T, 8> *)((const T *)o.data + off);
        for (int u = 0; u < 8; u++) x.v[u] = Traits<T>::store(Traits<T>::load(x.v[u]) * f);
        *(Vec<T, 8> *)(dst + off) = x;
    }
}

// The batch items run per plan call: all of them, or with nabla's dropout
// mask as many as keep the mask within MASK_MAX, a divisor of b1 (one plan
// serves every chunk) whose rows (cb*b2*L) keep each chunk's lse 16-byte aligned; 0
// where there is none (the path declines).
int64_t chunk_of(const Key &k) {
    if (!k.drop || k.rng) return k.b1;
    const int64_t most = MASK_MAX / (k.b2 * k.L * mask_ld(k.S));
    for (int64_t c = most < k.b1 ? most : k.b1; c > 0; c--)
        if (k.b1 % c == 0 && (c == k.b1 || c * k.b2 * k.L % 4 == 0)) return c;
    return 0;
}

// The problem of q, k, v, out as a key (dropout from cuDNN's generator
// where rng), or false where this path declines (the other paths take it).
bool key_of(nb_backend *be, nb_dtype dt, const Att &a, const Mat &q, const Mat &k, const Mat &v, const Mat &out,
            bool rng, Key *key) {
    if (!nb_dtype_is_16bit(dt) || a.mask.ptr || a.L <= DEC_L) return false;
    *key = Key{};
    key->dev = device_of(be), key->dt = dt, key->causal = a.causal, key->drop = a.dropout;
    key->rng = a.dropout && rng;
    const double keep = 1 - a.p;
    if (key->rng) memcpy(&key->keep, &keep, sizeof keep);
    key->b2 = q.b2, key->b1 = a.B / q.b2;
    key->L = a.L, key->S = a.S, key->E = a.E, key->Ev = a.Ev;
    const Mat *m[4] = {&q, &k, &v, &out};
    const int64_t rows[4] = {a.L, a.S, a.S, a.L}, cols[4] = {a.E, a.E, a.Ev, a.Ev};
    bool fits = a.E % 8 == 0 && a.Ev % 8 == 0 && a.E <= 256 && a.Ev <= 256;
    for (int i = 0; i < 4 && fits; i++) fits = strides_of(*m[i], key->b1, rows[i], cols[i], key->st[i]);
    return fits && chunk_of(*key) > 0;
}

// A tensor of the variant pack: its uid, base pointer, and the bytes
// between batch items (dim 0 of the 4-d views).
struct Arg {
    int64_t uid;
    void *ptr;
    int64_t step;
};

// k_rng_args: the RNG operation's seed and offset tensors, the offset read
// on the stream (a captured graph's replay adds the generator's offset then).
__global__ void k_rng_args(int64_t *dst, uint64_t seed, uint64_t offset, const uint64_t *offset_base) {
    dst[0] = (int64_t)seed, dst[2] = (int64_t)(offset + (offset_base ? *offset_base : 0));
}

// Runs key's plan over the tensors, in chunks of the batch (chunk_of); the
// dropout keep mask of each chunk (or the generator's seed and offset) and
// the scalars are added here. *ran false where cuDNN has no engine (an
// error instead under NB_CUDA_ATTENTION=cudnn).
nb_status execute(nb_backend *be, cudnnHandle_t h, const char *op, const Key &full, const Att &a, const Arg *args,
                  int nargs, bool *ran) {
    Key key = full;
    key.handle = (int64_t)(uintptr_t)h;
    const int64_t cb = chunk_of(full);
    key.b1 = cb;
    Scratch ws, zmask, rng_args;
    const bool zm = key.drop && !key.rng; // nabla's keep mask in memory
    // the backward's D factor: 1 - p with cuDNN's generator, else 1 (graph_bwd)
    const float scale = (float)a.scale, neg_inf = -INFINITY, d_factor = key.rng ? (float)(1 - a.p) : 1.0f;
    const float drop_scale = (float)a.keep_scale;
    void *ptrs[20];
    int64_t uids[20];
    int n = nargs;
    for (int i = 0; i < nargs; i++) uids[i] = args[i].uid;
    // by value: host pointers read at execution
    ptrs[n] = (void *)&scale, uids[n++] = UID_SCALE;
    if (a.causal) ptrs[n] = (void *)&neg_inf, uids[n++] = UID_NEG_INF;
    if (key.bwd) ptrs[n] = (void *)&d_factor, uids[n++] = UID_D_FACTOR;
    if (a.dropout) ptrs[n] = (void *)&drop_scale, uids[n++] = UID_DROP_SCALE;
    const int zslot = n;
    if (zm) uids[n++] = UID_ZMASK;
    const int rslot = n;
    if (key.rng) uids[n++] = UID_SEED, uids[n++] = UID_OFFSET;
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
    const int64_t nmat = cb * key.b2; // matrices per chunk
    if (!st && p->plan && zm &&
        !zmask.alloc(be, nb_dtype_size((nb_dtype)key.dt) * (size_t)(nmat * a.L * mask_ld(a.S))))
        st = nb_last_status();
    if (!st && p->plan && p->ws && !ws.alloc(be, (size_t)p->ws)) st = nb_last_status();
    if (!st && p->plan && key.rng) {
        // seed at 0 and offset at 16 bytes: each tensor 16-byte aligned, as declared
        if (!rng_args.alloc(be, 4 * sizeof(int64_t))) st = nb_last_status();
        else {
            k_rng_args<<<1, 1, 0, stream_of(be)>>>(rng_args.as<int64_t>(), a.seed, a.offset, a.offset_base);
            st = launched(op);
            ptrs[rslot] = rng_args.ptr, ptrs[rslot + 1] = rng_args.as<int64_t>() + 2;
        }
    }
    for (int64_t c0 = 0; !st && p->plan && c0 < full.b1; c0 += cb) {
        for (int i = 0; i < nargs; i++) ptrs[i] = (char *)args[i].ptr + c0 * args[i].step;
        if (zm) { // Z of this chunk, written on this stream before the graph reads it
            if ((st = keep_mask_fill(be, op, (nb_dtype)key.dt, a, c0 * key.b2, nmat, zmask.ptr))) break;
            ptrs[zslot] = zmask.ptr;
        }
        cudnnBackendDescriptor_t pack = nullptr;
        cudnnStatus_t cs = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
        void *wsp = ws.ptr;
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
        if (cs == CUDNN_STATUS_SUCCESS)
            cs = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp);
        if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnBackendFinalize(pack);
        if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnBackendExecute(h, p->plan, pack);
        if (pack) cudnnBackendDestroyDescriptor(pack);
        if (cs != CUDNN_STATUS_SUCCESS)
            st = nb_set_error(NB_ERR_DEVICE, "%s: cuDNN's fused attention failed on cuda:%d: %s", op, device_of(be),
                              cudnnGetErrorString(cs));
    }
    *ran = !st && p->plan;
    if (owned) plan_free(p);
    pthread_mutex_unlock(&plans_lock);
    return st;
}

// Whether key's plan (built on a miss) can run: the backward asks before
// its preparations, which a decline would waste.
bool plan_runs(cudnnHandle_t h, const Key &full) {
    Key key = full;
    key.handle = (int64_t)(uintptr_t)h, key.b1 = chunk_of(full);
    pthread_mutex_lock(&plans_lock);
    bool owned, oom;
    Plan *p = plan_get(h, key, &owned, &oom);
    const bool runs = p && p->plan;
    if (p && owned) plan_free(p);
    pthread_mutex_unlock(&plans_lock);
    return runs;
}

// Whether the backward of key's forward can run with cuDNN's generator,
// its gradients laid out as the forward's operands (dO as out, dq as q...:
// what autograd passes in training): asked before the forward draws from
// that generator, whose mask no other path has, so a backward cuDNN cannot
// run falls back to nabla's mask in the forward rather than failing. The
// check builds (and caches) that backward plan.
// key's gradient strides (st[4..7]) from dO, dq, dk, dv's matrices m;
// false where one's rows are not 16-byte aligned.
bool grad_strides(Key *key, const Att &a, const Mat *const m[4]) {
    const int64_t rows[4] = {a.L, a.L, a.S, a.S}, cols[4] = {a.Ev, a.E, a.E, a.Ev};
    for (int i = 0; i < 4; i++)
        if (!strides_of(*m[i], key->b1, rows[i], cols[i], key->st[4 + i])) return false;
    return true;
}

bool rng_backward_runs(cudnnHandle_t h, const Key &fwd, const Att &a, const Mat &q, const Mat &k, const Mat &v,
                       const Mat &out) {
    Key b = fwd;
    b.bwd = 1;
    const Mat *m[4] = {&out, &q, &k, &v};
    return grad_strides(&b, a, m) && plan_runs(h, b);
}

// cuDNN's generator where the caller allows it, unless
// NB_CUDA_ATTENTION_DROPOUT=philox (read at each forward, so a test can
// switch it).
bool rng_wanted() {
    const char *e = getenv("NB_CUDA_ATTENTION_DROPOUT");
    return !e || strcmp(e, "philox") != 0; // (any other value: the default)
}

// The backward's error where the forward drew from cuDNN's generator and
// cuDNN cannot run the backward.
nb_status rng_declined(const char *op, const char *what) {
    return nb_set_error(NB_ERR_DEVICE,
                        "%s: the forward's dropout came from cuDNN's generator, and cuDNN cannot run this backward "
                        "(%s); with NB_CUDA_ATTENTION_DROPOUT=philox the forward draws nabla's mask, which every "
                        "path regenerates",
                        op, what);
}

// lse as cuDNN reads and writes it: float32 [B, L], 16-byte aligned; else
// through scratch (*buf) holding a copy.
void *lse_view(nb_backend *be, const char *op, const Att &a, void *lse, Scratch *buf, bool copy_in, nb_status *st) {
    if (((uintptr_t)lse & 15) == 0) return lse;
    const size_t bytes = sizeof(float) * (size_t)(a.B * a.L);
    if (!buf->alloc(be, bytes)) return *st = nb_last_status(), nullptr;
    if (copy_in) {
        cudaError_t e = cudaMemcpyAsync(buf->ptr, lse, bytes, cudaMemcpyDeviceToDevice, stream_of(be));
        if (e != cudaSuccess) return *st = cuda_fail(op, "cudaMemcpyAsync", e), nullptr;
    }
    return buf->ptr;
}

} // namespace

nb_status cudnn_forward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                        const Mat &v, const Mat &out, void *lse, bool *own_rng, bool *ran) {
    *ran = false;
    Key key;
    if (!key_of(be, dt, a, q, k, v, out, own_rng && rng_wanted(), &key)) return NB_OK;
    cudnnHandle_t h = nb_cuda_cudnn(be);
    if (!h) return required() ? nb_set_error(NB_ERR_DEVICE, "%s: cuDNN is unavailable", op) : NB_OK;
    if (key.rng && (!plan_runs(h, key) || !rng_backward_runs(h, key, a, q, k, v, out))) { // nabla's keep mask instead
        key.rng = key.keep = 0;
        if (!chunk_of(key)) return NB_OK;
    }
    Scratch lse_buf;
    nb_status st = NB_OK;
    void *lse_dst = lse_view(be, op, a, lse, &lse_buf, false, &st);
    if (!lse_dst) return st;
    const int64_t es = nb_dtype_size(dt), rows = key.b2 * a.L * (int64_t)sizeof(float);
    const Arg args[5] = {{UID_Q, q.data, key.st[0][0] * es},
                         {UID_K, k.data, key.st[1][0] * es},
                         {UID_V, v.data, key.st[2][0] * es},
                         {UID_O, out.data, key.st[3][0] * es},
                         {UID_LSE, lse_dst, rows}};
    if ((st = execute(be, h, op, key, a, args, 5, ran))) return st;
    if (*ran && key.rng) *own_rng = true;
    if (*ran && lse_dst != lse)
        NBC_TRY(op, cudaMemcpyAsync(lse, lse_dst, sizeof(float) * (size_t)(a.B * a.L), cudaMemcpyDeviceToDevice,
                                    stream_of(be)));
    return NB_OK;
}

nb_status cudnn_backward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                         const Mat &v, const Mat &out, const Mat &gout, const Mat *gq, const Mat *gk, const Mat *gv,
                         const void *lse, bool own_rng, bool *ran) {
    *ran = false;
    // Where the forward drew from cuDNN's generator, no other path has its
    // mask: gradients the caller does not want go to scratch, and a
    // decline is an error (rng_declined).
    Key key;
    if (!key_of(be, dt, a, q, k, v, out, own_rng, &key))
        return own_rng ? rng_declined(op, "the forward's operands changed") : NB_OK;
    if (!key.rng && (!gq || !gk || !gv)) return NB_OK;
    key.bwd = 1;
    const int64_t es = nb_dtype_size(dt);
    const int64_t rows[4] = {a.L, a.L, a.S, a.S}, cols[4] = {a.Ev, a.E, a.E, a.Ev};
    const Mat *m[4] = {&gout, gq, gk, gv};
    Scratch unwanted[3];
    Mat own[3];
    for (int i = 1; i < 4; i++) {
        if (m[i]) continue;
        const int64_t rc = rows[i] * cols[i];
        if (!unwanted[i - 1].alloc(be, (size_t)(es * a.B * rc))) return nb_last_status();
        own[i - 1] = Mat{unwanted[i - 1].ptr, key.b2, key.b2 * rc, rc, cols[i]};
        m[i] = &own[i - 1];
    }
    if (!grad_strides(&key, a, m)) return key.rng ? rng_declined(op, "a gradient's rows not 16-byte aligned") : NB_OK;
    cudnnHandle_t h = nb_cuda_cudnn(be);
    if (!h)
        return key.rng || required() ? nb_set_error(NB_ERR_DEVICE, "%s: cuDNN is unavailable", op) : NB_OK;
    if (!required() && !plan_runs(h, key)) // (required: execute says why)
        return key.rng ? rng_declined(op, "no engine") : NB_OK;
    Scratch lse_buf, dsum;
    nb_status st = NB_OK;
    void *lse_src = lse_view(be, op, a, (void *)lse, &lse_buf, true, &st);
    if (!lse_src) return st;
    if (!dsum.alloc(be, sizeof(float) * (size_t)(a.B * a.L))) return nb_last_status();
    // With dropout, D = rowsum(dO o O) * (1 - p) (the frontend's
    // softmax_sum times Dropout_scale_inv). cuDNN 9.14's engine computes
    // rowsum(dO o O) in a kernel of its own and ignores that factor (dQ and
    // dK off by D p/(1-p) P, measured on the H200); so O goes in as a copy
    // scaled by 1 - p (at O's own strides: the same plan) and the graph's
    // factor is 1, which is right whether or not an engine reads it.
    // (With cuDNN's generator, O goes in as it is and the graph's factor is
    // 1 - p, as the frontend builds it: an engine that scales D itself there
    // would otherwise scale it twice; test_cuda_16bit_cudnn_dropout checks
    // every gradient of that path against float32.)
    Scratch oscaled;
    void *o_ptr = out.data;
    if (a.dropout && !key.rng) {
        const int64_t extent =
            (key.b1 - 1) * key.st[3][0] + (key.b2 - 1) * key.st[3][1] + (a.L - 1) * key.st[3][2] + a.Ev;
        const int64_t total8 = a.B * a.L * a.Ev / 8;
        if (!oscaled.alloc(be, (size_t)(es * extent))) return nb_last_status();
        const float f = (float)(1 / a.keep_scale);
        const unsigned blocks = blocks_for(total8);
        if (dt == NB_BF16)
            k_scaled_copy<__nv_bfloat16>
                <<<blocks, THREADS, 0, stream_of(be)>>>(out, (__nv_bfloat16 *)oscaled.ptr, a.L, a.Ev, total8, f);
        else
            k_scaled_copy<__half>
                <<<blocks, THREADS, 0, stream_of(be)>>>(out, (__half *)oscaled.ptr, a.L, a.Ev, total8, f);
        if ((st = launched(op))) return st;
        o_ptr = oscaled.ptr;
    }
    const int64_t lse_step = key.b2 * a.L * (int64_t)sizeof(float);
    const Arg args[10] = {{UID_Q, q.data, key.st[0][0] * es},       {UID_K, k.data, key.st[1][0] * es},
                          {UID_V, v.data, key.st[2][0] * es},       {UID_O, o_ptr, key.st[3][0] * es},
                          {UID_LSE, lse_src, lse_step},             {UID_DO, gout.data, key.st[4][0] * es},
                          {UID_DQ, m[1]->data, key.st[5][0] * es},  {UID_DK, m[2]->data, key.st[6][0] * es},
                          {UID_DV, m[3]->data, key.st[7][0] * es},  {UID_DSUM, dsum.ptr, lse_step}};
    if ((st = execute(be, h, op, key, a, args, 10, ran))) return st;
    if (key.rng && !*ran) return rng_declined(op, "no engine");
    return NB_OK;
}

} // namespace nbc
