// reduce.cu - the reduction family on CUDA: reduce (sum, prod, max, min
// over the dims where out's size is 1, times a scale), argmax and argmin.
// Semantics are backend/cpu/reduce.c's: float32, float64 and the 16-bit
// floats (read directly, no float32 copy) accumulate in double, integers and bool in int64 (sums and products wrap, as PyTorch);
// max/min propagate NaN; an integer accumulator stored into an integer out
// ignores the scale; argmax/argmin give the first extreme, NaN counting as
// the extreme (the first NaN wins).
//
// Parallelisation. The dims are grouped as the CPU groups them (kept dims
// K, reduced dims R, neighbours merged), then:
// - row mode (the reduced elements of one output are the near ones in
//   memory, or there is one output): a group of g threads (1, 8, 32 or 256)
//   per output; thread t of the group combines elements t, t + g, ... of
//   its range in order, then the group combines its threads in a fixed
//   shuffle tree. Loss sums and means run here.
// - column mode (an output's neighbours are the near ones: a bias gradient
//   [512, 768] -> [1, 768]): a 32 x 8 block takes 32 neighbouring outputs
//   (coalesced); each of the 8 thread rows combines every 8th reduced
//   element in order, then a fixed tree over the 8 rows in shared memory.
// Few outputs with long reductions split the reduced range into fixed
// chunks over grid.y; a second kernel combines each output's chunk results
// left to right. The split depends only on the shape (not on the GPU), so a
// shape always gets the same tree: deterministic, no atomics.
#include <type_traits>

#include "red_util.cuh"

namespace nbc {
namespace red {
namespace { // internal linkage: no clash with other files' kernels

// ---- the plan: kept and reduced dims ------------------------------------------------

struct RedPlan {
    int nk, nr; // kept and reduced dims after merging (nr >= 1)
    int64_t kshape[MAXD], kx[MAXD], ko[MAXD]; // x and out strides of the kept dims
    int64_t rshape[MAXD], rx[MAXD];
    int64_t M, R; // outputs, reduced elements per output
};

// Appends a dim to a group, merged into the group's last dim when every
// stride runs on across both (backend/cpu/reduce.c's group_add).
static void group_add(int *n, int64_t *shape, int64_t *s1, int64_t *s2, int64_t size, int64_t a, int64_t b) {
    int k = *n;
    if (k > 0 && s1[k - 1] == a * size && (!s2 || s2[k - 1] == b * size)) {
        shape[k - 1] *= size;
        s1[k - 1] = a;
        if (s2) s2[k - 1] = b;
        return;
    }
    shape[k] = size, s1[k] = a;
    if (s2) s2[k] = b;
    *n = k + 1;
}

// Groups out's and x's dims (checked: backend/check/reduce.c).
static void plan_init(RedPlan *p, const nb_kview *out, const nb_kview *x) {
    memset(p, 0, sizeof *p);
    for (int d = 0; d < x->ndim; d++) {
        int64_t n = x->shape[d];
        if (n == 1 && out->shape[d] == 1) continue;
        if (out->shape[d] == 1) group_add(&p->nr, p->rshape, p->rx, nullptr, n, x->strides[d], 0);
        else group_add(&p->nk, p->kshape, p->kx, p->ko, n, x->strides[d], out->strides[d]);
    }
    if (p->nr == 0) p->rshape[0] = 1, p->rx[0] = 0, p->nr = 1;
    p->M = p->R = 1;
    for (int d = 0; d < p->nk; d++) p->M *= p->kshape[d];
    for (int d = 0; d < p->nr; d++) p->R *= p->rshape[d];
}

__device__ inline void kept_offsets(const RedPlan &p, int64_t m, int64_t &xo, int64_t &oo) {
    int64_t a = 0, b = 0;
    for (int d = p.nk - 1; d >= 0; d--) {
        int64_t s = p.kshape[d], q = m / s, i = m - q * s;
        m = q;
        a += i * p.kx[d], b += i * p.ko[d];
    }
    xo = a, oo = b;
}

// Offset in x of reduced element r (flat, C order over the reduced dims);
// callers take the nr == 1 path themselves.
__device__ inline int64_t red_offset(const RedPlan &p, int64_t r) {
    int64_t a = 0;
    for (int d = p.nr - 1; d >= 0; d--) {
        int64_t s = p.rshape[d], q = r / s;
        a += (r - q * s) * p.rx[d];
        r = q;
    }
    return a;
}

// ---- the combine rules ----------------------------------------------------------------

template <typename T> struct AccOf { using type = int64_t; };
template <> struct AccOf<float> { using type = double; };
template <> struct AccOf<double> { using type = double; };
template <> struct AccOf<__nv_bfloat16> { using type = double; };
template <> struct AccOf<__half> { using type = double; };

// An element as the accumulator type (16-bit floats through float, exact).
template <typename A, typename T> __device__ inline A ldv(T v) { return (A)v; }
template <> __device__ inline double ldv<double, __nv_bfloat16>(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
template <> __device__ inline double ldv<double, __half>(__half v) { return (double)__half2float(v); }

// a holds the earlier elements, b the later ones. MAX/MIN take b when it is
// NaN or beyond a (the CPU's MAXF(b, a)), so NaN propagates.
template <int OP, typename A> struct RedF {
    __device__ A operator()(A a, A b) const {
        if constexpr (OP == NB_REDUCE_SUM) return wadd(a, b);
        else if constexpr (OP == NB_REDUCE_PROD) return wmul(a, b);
        else if constexpr (OP == NB_REDUCE_MAX) return is_nan(b) || b > a ? b : a;
        else return is_nan(b) || b < a ? b : a;
    }
    // the identity: 0, 1, -inf (the lowest integer), +inf (the highest)
    __device__ static A id() {
        if constexpr (OP == NB_REDUCE_SUM) return (A)0;
        else if constexpr (OP == NB_REDUCE_PROD) return (A)1;
        else if constexpr (OP == NB_REDUCE_MAX) return lowest<A>();
        else return highest<A>();
    }
};

// Stores an accumulator (the CPU's store_f / store_i).
__device__ inline void store_f(void *base, nb_dtype dt, int64_t o, double v) {
    switch (dt) {
    case NB_F32: ((float *)base)[o] = (float)v; break;
    case NB_F64: ((double *)base)[o] = v; break;
    // 16-bit: rounded to float32 first, as the CPU (which reduces float32 copies) rounds
    case NB_BF16: ((__nv_bfloat16 *)base)[o] = __float2bfloat16_rn((float)v); break;
    case NB_F16: ((__half *)base)[o] = __float2half_rn((float)v); break;
    case NB_I32: ((int32_t *)base)[o] = (int32_t)v; break;
    case NB_I64: ((int64_t *)base)[o] = (int64_t)v; break;
    case NB_I8: ((int8_t *)base)[o] = (int8_t)(int64_t)v; break;
    case NB_I16: ((int16_t *)base)[o] = (int16_t)(int64_t)v; break;
    default: ((uint8_t *)base)[o] = (uint8_t)(int64_t)v; break;
    }
}
__device__ inline void store_acc(void *base, nb_dtype dt, int64_t o, double acc, double scale) {
    store_f(base, dt, o, acc * scale);
}
__device__ inline void store_acc(void *base, nb_dtype dt, int64_t o, int64_t acc, double scale) {
    if (dt == NB_F32 || dt == NB_F64 || dt == NB_BF16 || dt == NB_F16) store_f(base, dt, o, (double)acc * scale);
    else if (dt == NB_I32) ((int32_t *)base)[o] = (int32_t)acc;
    else if (dt == NB_I64) ((int64_t *)base)[o] = acc;
    else if (dt == NB_I8) ((int8_t *)base)[o] = (int8_t)acc;
    else if (dt == NB_I16) ((int16_t *)base)[o] = (int16_t)acc;
    else ((uint8_t *)base)[o] = (uint8_t)acc;
}

// ---- kernels ----------------------------------------------------------------------------

// Row mode: groups of g threads per output, blockDim.x / g outputs per
// block; grid.y = the chunks of the reduced range (chunk elements each).
// With nsplit > 1 each (output, chunk) result goes to partial[m * nsplit + chunk].
template <typename T, int OP>
__global__ void __launch_bounds__(THREADS) k_red_rows(RedPlan p, const T *x, void *out, nb_dtype odt, double scale,
                                                      int g, int64_t chunk, int nsplit,
                                                      typename AccOf<T>::type *partial) {
    using A = typename AccOf<T>::type;
    using F = RedF<OP, A>;
    __shared__ A sm[THREADS / 32];
    const int opb = blockDim.x / g, lane = threadIdx.x & (g - 1);
    const int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = r0 + chunk < p.R ? r0 + chunk : p.R;
    for (int64_t base = (int64_t)blockIdx.x * opb; base < p.M; base += (int64_t)gridDim.x * opb) {
        const int64_t m = base + threadIdx.x / g;
        A acc = F::id();
        if (m < p.M) {
            int64_t xo, oo;
            kept_offsets(p, m, xo, oo);
            const T *xp = x + xo;
            int64_t r = r0 + lane;
            if (p.nr == 1) {
                const int64_t s = p.rx[0];
                for (; r + 3 * g < r1; r += 4 * g) { // four loads in flight, combined in order
                    A v0 = ldv<A>(xp[r * s]), v1 = ldv<A>(xp[(r + g) * s]), v2 = ldv<A>(xp[(r + 2 * g) * s]),
                      v3 = ldv<A>(xp[(r + 3 * g) * s]);
                    acc = F()(acc, v0), acc = F()(acc, v1), acc = F()(acc, v2), acc = F()(acc, v3);
                }
                for (; r < r1; r += g) acc = F()(acc, ldv<A>(xp[r * s]));
            } else {
                for (; r < r1; r += g) acc = F()(acc, ldv<A>(xp[red_offset(p, r)]));
            }
        }
        acc = group_reduce(acc, g, F(), sm);
        if (lane == 0 && m < p.M) {
            if (nsplit > 1) {
                partial[m * nsplit + blockIdx.y] = acc;
            } else {
                int64_t xo, oo;
                kept_offsets(p, m, xo, oo);
                store_acc(out, odt, oo, acc, scale);
            }
        }
    }
}

constexpr int COLS_X = 32, COLS_Y = 8; // column mode block: outputs x reduction lanes

template <typename T, int OP>
__global__ void __launch_bounds__(COLS_X *COLS_Y) k_red_cols(RedPlan p, const T *x, void *out, nb_dtype odt,
                                                             double scale, int64_t chunk, int nsplit,
                                                             typename AccOf<T>::type *partial) {
    using A = typename AccOf<T>::type;
    using F = RedF<OP, A>;
    __shared__ A sm[COLS_Y][COLS_X + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = r0 + chunk < p.R ? r0 + chunk : p.R;
    for (int64_t base = (int64_t)blockIdx.x * COLS_X; base < p.M; base += (int64_t)gridDim.x * COLS_X) {
        const int64_t m = base + tx;
        A acc = F::id();
        if (m < p.M) {
            int64_t xo, oo;
            kept_offsets(p, m, xo, oo);
            const T *xp = x + xo;
            int64_t r = r0 + ty;
            if (p.nr == 1) {
                const int64_t s = p.rx[0];
                for (; r + 3 * COLS_Y < r1; r += 4 * COLS_Y) {
                    A v0 = ldv<A>(xp[r * s]), v1 = ldv<A>(xp[(r + COLS_Y) * s]), v2 = ldv<A>(xp[(r + 2 * COLS_Y) * s]),
                      v3 = ldv<A>(xp[(r + 3 * COLS_Y) * s]);
                    acc = F()(acc, v0), acc = F()(acc, v1), acc = F()(acc, v2), acc = F()(acc, v3);
                }
                for (; r < r1; r += COLS_Y) acc = F()(acc, ldv<A>(xp[r * s]));
            } else {
                for (; r < r1; r += COLS_Y) acc = F()(acc, ldv<A>(xp[red_offset(p, r)]));
            }
        }
        sm[ty][tx] = acc;
        __syncthreads();
        for (int w = COLS_Y / 2; w > 0; w >>= 1) { // rows ty and ty + w, fixed pairs
            if (ty < w) sm[ty][tx] = F()(sm[ty][tx], sm[ty + w][tx]);
            __syncthreads();
        }
        if (ty == 0 && m < p.M) {
            A v = sm[0][tx];
            if (nsplit > 1) {
                partial[m * nsplit + blockIdx.y] = v;
            } else {
                int64_t xo, oo;
                kept_offsets(p, m, xo, oo);
                store_acc(out, odt, oo, v, scale);
            }
        }
        __syncthreads(); // sm is rewritten by the next round
    }
}

// Column mode with V neighbouring columns per thread (one aligned vector
// load each, not one element: a warp read 64 bytes of a bf16 bias gradient
// per load): for one kept dim of unit stride (x and out) and one reduced
// dim. Its chunks are cut for its own block count (fewer column blocks,
// more chunks), so its tree differs from k_red_cols's; which kernel runs
// depends on the shape, the strides and x's alignment, all fixed for a
// given program, so the bits still repeat run to run.
template <typename T, int OP, int V>
__global__ void __launch_bounds__(COLS_X *COLS_Y) k_red_cols_vec(RedPlan p, const T *x, void *out, nb_dtype odt,
                                                                 double scale, int64_t chunk, int nsplit,
                                                                 typename AccOf<T>::type *partial) {
    using A = typename AccOf<T>::type;
    using F = RedF<OP, A>;
    __shared__ A sm[COLS_Y][V][COLS_X + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = r0 + chunk < p.R ? r0 + chunk : p.R, s = p.rx[0];
    for (int64_t base = (int64_t)blockIdx.x * COLS_X * V; base < p.M; base += (int64_t)gridDim.x * COLS_X * V) {
        const int64_t m0 = base + (int64_t)tx * V; // this thread's V columns (M is a multiple of V)
        A acc[V];
#pragma unroll
        for (int l = 0; l < V; l++) acc[l] = F::id();
        if (m0 < p.M)
            for (int64_t r = r0 + ty; r < r1; r += COLS_Y) {
                Vec<T, V> t = *reinterpret_cast<const Vec<T, V> *>(x + m0 + r * s);
#pragma unroll
                for (int l = 0; l < V; l++) acc[l] = F()(acc[l], ldv<A>(t.v[l]));
            }
#pragma unroll
        for (int l = 0; l < V; l++) sm[ty][l][tx] = acc[l];
        __syncthreads();
        for (int w = COLS_Y / 2; w > 0; w >>= 1) { // rows ty and ty + w, fixed pairs
            if (ty < w)
#pragma unroll
                for (int l = 0; l < V; l++) sm[ty][l][tx] = F()(sm[ty][l][tx], sm[ty + w][l][tx]);
            __syncthreads();
        }
        if (ty == 0 && m0 < p.M)
#pragma unroll
            for (int l = 0; l < V; l++) {
                if (nsplit > 1) partial[(m0 + l) * nsplit + blockIdx.y] = sm[0][l][tx];
                else store_acc(out, odt, m0 + l, sm[0][l][tx], scale);
            }
        __syncthreads(); // sm is rewritten by the next round
    }
}

// The widest vector (elements) for k_red_cols_vec, or 0: one unit-stride
// kept dim (x and out), one reduced dim, the column count and row stride
// multiples of it, x aligned to it; floats only, at most 16 bytes.
template <typename T> static int cols_vec(const RedPlan &p, const void *x) {
    if (!(std::is_same<T, float>::value || std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value))
        return 0;
    if (p.nk != 1 || p.nr != 1 || p.kx[0] != 1 || p.ko[0] != 1) return 0;
    for (int v = (int)(16 / sizeof(T)); v >= 2; v /= 2)
        if (p.M % v == 0 && p.rx[0] % v == 0 && (uintptr_t)x % (sizeof(T) * v) == 0) return v;
    return 0;
}

// Each output's chunk results, a warp per output: lane l combines chunks
// l, l + 32, ... in order, then the warp's fixed shuffle tree.
template <typename T, int OP>
__global__ void __launch_bounds__(THREADS) k_red_final(RedPlan p, const typename AccOf<T>::type *partial, int nsplit,
                                                       void *out, nb_dtype odt, double scale) {
    using A = typename AccOf<T>::type;
    using F = RedF<OP, A>;
    const int lane = threadIdx.x & 31, wpb = THREADS / 32;
    for (int64_t base = (int64_t)blockIdx.x * wpb; base < p.M; base += (int64_t)gridDim.x * wpb) {
        const int64_t m = base + (threadIdx.x >> 5); // the same for the whole warp
        if (m >= p.M) continue;
        A acc = F::id();
        for (int s = lane; s < nsplit; s += 32) acc = F()(acc, partial[m * nsplit + s]);
        acc = group_reduce(acc, 32, F(), (A *)nullptr); // shuffles only (g = 32)
        if (lane == 0) {
            int64_t xo, oo;
            kept_offsets(p, m, xo, oo);
            store_acc(out, odt, oo, acc, scale);
        }
    }
}

// Blocks we aim for when a reduction is split (about eight per SM of an
// H100, enough loads in flight; a constant, so the tree does not depend on
// the GPU).
constexpr int64_t SPLIT_TARGET = 1056;

static int64_t absl(int64_t v) { return v < 0 ? -v : v; }

template <typename T, int OP> static nb_status run_reduce(nb_backend *be, const RedPlan &p, const nb_kview *out,
                                                          const nb_kview *x, double scale) {
    using A = typename AccOf<T>::type;
    cudaStream_t st = stream_of(be);
    // column mode when the innermost kept dim is nearer in memory than every reduced dim
    bool col = p.nk >= 1 && p.R > 1;
    for (int d = 0; col && d < p.nr; d++)
        if (p.rshape[d] > 1 && absl(p.kx[p.nk - 1]) >= absl(p.rx[d])) col = false;
    int g = 0, vec = col ? cols_vec<T>(p, x->data) : 0;
    int64_t bx, minchunk;
    if (col) {
        bx = (p.M + COLS_X * (vec ? vec : 1) - 1) / (COLS_X * (vec ? vec : 1));
        minchunk = 4 * COLS_Y;
    } else {
        g = p.R <= 8 ? 1 : p.R <= 64 ? 8 : p.R <= 2048 ? 32 : THREADS;
        bx = (p.M + THREADS / g - 1) / (THREADS / g);
        minchunk = g == THREADS ? 16 * THREADS : p.R; // only block-per-output reductions split
    }
    int64_t nsplit = 1;
    if (bx < SPLIT_TARGET && p.R >= 2 * minchunk) {
        nsplit = (SPLIT_TARGET + bx - 1) / bx;
        int64_t most = p.R / minchunk;
        if (nsplit > most) nsplit = most;
        if (nsplit > 1024) nsplit = 1024;
    }
    int64_t chunk = (p.R + nsplit - 1) / nsplit;
    nsplit = (p.R + chunk - 1) / chunk; // every chunk non-empty
    Scratch part;
    if (nsplit > 1 && !part.alloc(be, sizeof(A) * (size_t)(p.M * nsplit)))
        return nb_set_error(NB_ERR_OOM, "reduce: out of memory for %lld partial results", (long long)(p.M * nsplit));
    A *pp = part.as<A>();
    dim3 grid(grid_for(bx, 1, 1 << 20), (unsigned)nsplit);
    dim3 gv = grid; // the vector kernel's bx is already in grid
    if (vec == 8)
        k_red_cols_vec<T, OP, 8><<<gv, dim3(COLS_X, COLS_Y), 0, st>>>(p, (const T *)x->data, out->data, out->dtype,
                                                                     scale, chunk, (int)nsplit, pp);
    else if (vec == 4)
        k_red_cols_vec<T, OP, 4><<<gv, dim3(COLS_X, COLS_Y), 0, st>>>(p, (const T *)x->data, out->data, out->dtype,
                                                                     scale, chunk, (int)nsplit, pp);
    else if (vec == 2)
        k_red_cols_vec<T, OP, 2><<<gv, dim3(COLS_X, COLS_Y), 0, st>>>(p, (const T *)x->data, out->data, out->dtype,
                                                                     scale, chunk, (int)nsplit, pp);
    else if (col)
        k_red_cols<T, OP><<<grid, dim3(COLS_X, COLS_Y), 0, st>>>(p, (const T *)x->data, out->data, out->dtype, scale,
                                                                chunk, (int)nsplit, pp);
    else
        k_red_rows<T, OP><<<grid, THREADS, 0, st>>>(p, (const T *)x->data, out->data, out->dtype, scale, g, chunk,
                                                   (int)nsplit, pp);
    nb_status s = launched("reduce");
    if (s != NB_OK || nsplit == 1) return s;
    k_red_final<T, OP><<<grid_for(p.M, THREADS / 32, 1 << 20), THREADS, 0, st>>>(p, pp, (int)nsplit, out->data,
                                                                                 out->dtype, scale);
    return launched("reduce");
}

template <typename T> static nb_status reduce_t(nb_backend *be, nb_reduce_op op, const RedPlan &p, const nb_kview *out,
                                                const nb_kview *x, double scale) {
    switch (op) {
    case NB_REDUCE_SUM: return run_reduce<T, NB_REDUCE_SUM>(be, p, out, x, scale);
    case NB_REDUCE_MAX: return run_reduce<T, NB_REDUCE_MAX>(be, p, out, x, scale);
    case NB_REDUCE_MIN: return run_reduce<T, NB_REDUCE_MIN>(be, p, out, x, scale);
    default: return run_reduce<T, NB_REDUCE_PROD>(be, p, out, x, scale);
    }
}

// ---- argmax, argmin ------------------------------------------------------------------------

template <typename T> struct ArgV { using type = T; };
template <> struct ArgV<uint8_t> { using type = int32_t; };
template <> struct ArgV<int8_t> { using type = int32_t; };
template <> struct ArgV<int16_t> { using type = int32_t; };

template <typename V> struct ArgPair {
    V v;
    int64_t i;
};
template <typename V> __device__ inline ArgPair<V> shfl_down(ArgPair<V> p, int o, int w) {
    return {__shfl_down_sync(FULL_MASK, p.v, o, w), __shfl_down_sync(FULL_MASK, p.i, o, w)};
}

// b beats a: a NaN beats every number and the earlier of two NaNs wins; else
// the larger (MIN: smaller) value, the earlier index on ties. The winner is
// the first NaN or the first extreme, whatever the order of the combines.
template <typename V, bool MIN> struct ArgF {
    __device__ static bool beats(const ArgPair<V> &a, const ArgPair<V> &b) {
        bool an = is_nan(a.v), bn = is_nan(b.v);
        if (an || bn) return bn && (!an || b.i < a.i);
        if (MIN ? b.v < a.v : b.v > a.v) return true;
        return b.v == a.v && b.i < a.i;
    }
    __device__ ArgPair<V> operator()(ArgPair<V> a, ArgPair<V> b) const { return beats(a, b) ? b : a; }
};

// Lines of x along dim (views 0 x, 1 indices, 2 values or indices again),
// g threads per line.
template <typename T, bool MIN>
__global__ void __launch_bounds__(THREADS) k_argmax(Iter<3> it, int64_t n, int64_t xs, int g, bool has_values) {
    using V = typename ArgV<T>::type;
    using P = ArgPair<V>;
    __shared__ P sm[THREADS / 32];
    const int lpb = blockDim.x / g, lane = threadIdx.x & (g - 1);
    for (int64_t base = (int64_t)blockIdx.x * lpb; base < it.numel; base += (int64_t)gridDim.x * lpb) {
        const int64_t l = base + threadIdx.x / g;
        P acc = {MIN ? highest<V>() : lowest<V>(), (int64_t)9223372036854775807LL};
        int64_t off[3] = {0, 0, 0};
        if (l < it.numel) {
            iter_off(it, l, off);
            const T *xp = (const T *)it.ptr[0] + off[0];
            for (int64_t i = lane; i < n; i += g) {
                P c = {(V)xp[i * xs], i};
                if (ArgF<V, MIN>::beats(acc, c)) acc = c;
            }
        }
        acc = group_reduce(acc, g, ArgF<V, MIN>(), sm);
        if (lane == 0 && l < it.numel) {
            ((int64_t *)it.ptr[1])[off[1]] = acc.i;
            if (has_values) ((T *)it.ptr[2])[off[2]] = (T)acc.v;
        }
    }
}

// Few long lines (a decoder's logits, [B, 128256]): the generic kernel's
// one block per line waited on one load at a time (206 us for one line of
// 128256 on an H200, ncu). Here each line is cut into chunks of
// ARG_CHUNK, a block per chunk loads its ARG_PER elements a thread at once
// and writes the chunk's winner, and a warp per line combines the chunks;
// ArgF's winner does not depend on the order of the combines.
constexpr int ARG_PER = 8, ARG_CHUNK = THREADS * ARG_PER;

template <typename T, bool MIN>
__global__ void __launch_bounds__(THREADS)
    k_argmax_part(Iter<3> it, int64_t n, int64_t xs, int64_t nch, ArgPair<typename ArgV<T>::type> *part) {
    using V = typename ArgV<T>::type;
    using P = ArgPair<V>;
    __shared__ P sm[THREADS / 32];
    const int64_t l = blockIdx.y, i0 = (int64_t)blockIdx.x * ARG_CHUNK + threadIdx.x;
    int64_t off[3] = {0, 0, 0};
    iter_off(it, l, off);
    const T *xp = (const T *)it.ptr[0] + off[0];
    V v[ARG_PER];
#pragma unroll
    for (int u = 0; u < ARG_PER; u++)
        if (i0 + u * THREADS < n) v[u] = (V)xp[(i0 + u * THREADS) * xs];
    P acc = {MIN ? highest<V>() : lowest<V>(), (int64_t)9223372036854775807LL};
#pragma unroll
    for (int u = 0; u < ARG_PER; u++) {
        const P c = {v[u], i0 + u * THREADS};
        if (c.i < n && ArgF<V, MIN>::beats(acc, c)) acc = c;
    }
    acc = group_reduce(acc, THREADS, ArgF<V, MIN>(), sm);
    if (threadIdx.x == 0) part[l * nch + blockIdx.x] = acc;
}

template <typename T, bool MIN>
__global__ void __launch_bounds__(THREADS) k_argmax_fin(Iter<3> it, int64_t nch, const ArgPair<typename ArgV<T>::type> *part,
                                                        bool has_values) {
    using V = typename ArgV<T>::type;
    using P = ArgPair<V>;
    const int64_t l = (int64_t)blockIdx.x * (THREADS / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    P acc = {MIN ? highest<V>() : lowest<V>(), (int64_t)9223372036854775807LL};
    if (l < it.numel)
        for (int64_t c = lane; c < nch; c += 32)
            if (ArgF<V, MIN>::beats(acc, part[l * nch + c])) acc = part[l * nch + c];
    acc = group_reduce(acc, 32, ArgF<V, MIN>(), (P *)nullptr);
    if (lane == 0 && l < it.numel) {
        int64_t off[3] = {0, 0, 0};
        iter_off(it, l, off);
        ((int64_t *)it.ptr[1])[off[1]] = acc.i;
        if (has_values) ((T *)it.ptr[2])[off[2]] = (T)acc.v;
    }
}

// Checked: backend/check/reduce.c.
static nb_status arg_reduce(nb_backend *be, const char *op, bool min, const nb_kview *values, const nb_kview *indices,
                            const nb_kview *x, int dim) {
    int64_t n = x->shape[dim], lines = numel(indices);
    if (lines == 0) return NB_OK;
    nb_kview lv[3] = {lines_of(x, x, dim), lines_of(indices, x, dim), lines_of(values ? values : indices, x, dim)};
    const nb_kview *v[3] = {&lv[0], &lv[1], &lv[2]};
    Iter<3> it = make_iter<3>(v);
    int64_t xs = x->strides[dim];
    // a thread per line when the lines are the near ones in memory; else a group per line
    int g = n <= 4 ? 1 : n <= 64 ? 8 : n <= 2048 ? 32 : THREADS;
    if (xs != 1 && lines >= 1024 && it.ndim >= 1 && absl(it.st[0][it.ndim - 1]) < absl(xs)) g = 1;
    unsigned grid = grid_for(lines, THREADS / g, 1 << 20);
    cudaStream_t st = stream_of(be);
    bool hv = values != nullptr;
    // lines too few to fill the GPU with a block each, and long: split (at most 65535 lines, a grid dim)
    const bool split = n >= 4 * ARG_CHUNK && lines <= 256;
    const int64_t nch = (n + ARG_CHUNK - 1) / ARG_CHUNK;
    auto go = [&](auto tag) {
        using T = decltype(tag);
        if (split) {
            using P = ArgPair<typename ArgV<T>::type>;
            Scratch part;
            if (!part.alloc(be, sizeof(P) * (size_t)(lines * nch))) return nb_last_status();
            dim3 pg((unsigned)nch, (unsigned)lines);
            if (min) k_argmax_part<T, true><<<pg, THREADS, 0, st>>>(it, n, xs, nch, part.as<P>());
            else k_argmax_part<T, false><<<pg, THREADS, 0, st>>>(it, n, xs, nch, part.as<P>());
            nb_status r = launched(op);
            if (r) return r;
            const unsigned fg = (unsigned)((lines + THREADS / 32 - 1) / (THREADS / 32));
            if (min) k_argmax_fin<T, true><<<fg, THREADS, 0, st>>>(it, nch, part.as<P>(), hv);
            else k_argmax_fin<T, false><<<fg, THREADS, 0, st>>>(it, nch, part.as<P>(), hv);
            return launched(op);
        }
        if (min) k_argmax<T, true><<<grid, THREADS, 0, st>>>(it, n, xs, g, hv);
        else k_argmax<T, false><<<grid, THREADS, 0, st>>>(it, n, xs, g, hv);
        return launched(op);
    };
    switch (x->dtype) {
    case NB_F32: return go(float());
    case NB_F64: return go(double());
    case NB_I32: return go(int32_t());
    case NB_I64: return go(int64_t());
    case NB_I8: return go(int8_t());
    case NB_I16: return go(int16_t());
    default: return go(uint8_t()); // uint8 and bool
    }
}

} // namespace
} // namespace red
} // namespace nbc

using namespace nbc;
using namespace nbc::red;

extern "C" nb_status nb_cuda_reduce(nb_backend *be, nb_reduce_op op, const nb_kview *out, const nb_kview *x,
                                    double scale) {
    RedPlan p;
    plan_init(&p, out, x);
    if (p.M == 0) return NB_OK;
    if (p.R == 0) {
        // sum or prod (max/min over nothing fail their check): scale * the empty sum or product; a mean over
        // nothing (scale 1/0) is NaN, as PyTorch's 0/0
        double v = op == NB_REDUCE_PROD ? 1.0 : 0.0;
        return nb_cuda_fill(be, out, nb_dtype_is_float(out->dtype) ? v * scale : v);
    }
    switch (x->dtype) {
    case NB_F32: return reduce_t<float>(be, op, p, out, x, scale);
    case NB_F64: return reduce_t<double>(be, op, p, out, x, scale);
    case NB_BF16: return reduce_t<__nv_bfloat16>(be, op, p, out, x, scale);
    case NB_F16: return reduce_t<__half>(be, op, p, out, x, scale);
    case NB_I32: return reduce_t<int32_t>(be, op, p, out, x, scale);
    case NB_I64: return reduce_t<int64_t>(be, op, p, out, x, scale);
    case NB_I8: return reduce_t<int8_t>(be, op, p, out, x, scale);
    case NB_I16: return reduce_t<int16_t>(be, op, p, out, x, scale);
    default: return reduce_t<uint8_t>(be, op, p, out, x, scale); // uint8 and bool
    }
}

extern "C" nb_status nb_cuda_argmax(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x,
                                    int dim) {
    return arg_reduce(be, "argmax", false, values, indices, x, dim);
}

extern "C" nb_status nb_cuda_argmin(nb_backend *be, const nb_kview *values, const nb_kview *indices, const nb_kview *x,
                                    int dim) {
    return arg_reduce(be, "argmin", true, values, indices, x, dim);
}
