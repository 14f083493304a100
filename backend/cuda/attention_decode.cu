// attention_decode.cu - the attention forward for a few query rows against
// many keys (decoding with a KV cache: L <= DEC_L rows, no dropout), split
// over the keys as flash-decoding does (Dao et al., "Flash-Decoding for
// long-context inference", 2023): each block takes one matrix and one
// chunk of keys, keeps the chunk's softmax statistics (max, sum) and its
// weighted value sum per row in scratch, and a second kernel combines the
// chunks in chunk order (no atomics: deterministic). It reads q, k, v in
// their dtype (16-bit ones widened as they are loaded: no float32 copy of a
// cache) and accumulates in float32 (double for float64), with the
// semantics of attention.cu's other paths (masks, top-left causality, NaN
// rows where every key is masked, lse in float32 for 16-bit q).
#include <type_traits>

#include "attention.cuh"

namespace nbc {
namespace {

constexpr int DT = 128; // threads per block

// Accumulation type: double for double, float otherwise.
template <typename T> struct DecAcc { using A = float; };
template <> struct DecAcc<double> { using A = double; };

// One (matrix b, chunk c) block: scores of rows 0..L-1 against keys
// [j0, j1) in shared memory, then per row the chunk's max m, sum l and
// acc[e] = sum_j exp(s_j - m) v_je, written to part[((b * nch + c) * L + i) * (Ev + 2)].
template <typename T>
__global__ void k_dec_part(Att a, Mat q, Mat k, Mat v, int64_t chunk, int64_t nch, typename DecAcc<T>::A *part) {
    using A = typename DecAcc<T>::A;
    extern __shared__ unsigned char smem[];
    A *qs = (A *)smem;         // [L][E]
    A *sc = qs + a.L * a.E;    // [L][chunk]
    __shared__ A stat[DEC_L][2];
    const int64_t b = blockIdx.y, c = blockIdx.x, j0 = c * chunk, j1 = min(a.S, j0 + chunk), n = j1 - j0;
    const T *qb = (const T *)q.data + mat_off(q, b), *kb = (const T *)k.data + mat_off(k, b);
    const T *vb = (const T *)v.data + mat_off(v, b);
    for (int64_t x = threadIdx.x; x < a.L * a.E; x += blockDim.x)
        qs[x] = (A)dv(qb[(x / a.E) * q.ld + x % a.E]);
    __syncthreads();
    const int64_t mb = a.mask.ptr ? mask_base(a.mask, b) : 0;
    for (int64_t x = threadIdx.x; x < a.L * n; x += blockDim.x) { // thread per (row, key)
        const int64_t i = x / n, j = j0 + x % n;
        const T *kj = kb + j * k.ld;
        A s = 0;
        for (int64_t e = 0; e < a.E; e++) s += qs[i * a.E + e] * (A)dv(kj[e]);
        sc[i * chunk + (j - j0)] = masked<A, T>(a, mb, i, j, s * (A)a.scale);
    }
    __syncthreads();
    // per row: max and sum over the chunk by one warp each (rows beyond the warps: looped)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int64_t i = warp; i < a.L; i += DT / 32) {
        A m = -INFINITY;
        for (int64_t j = lane; j < n; j += 32) m = fmax(m, sc[i * chunk + j]);
        m = warp_max(m);
        A l = 0;
        for (int64_t j = lane; j < n; j += 32) {
            A p = m == -INFINITY ? 0 : exp(sc[i * chunk + j] - m);
            sc[i * chunk + j] = p;
            l += p;
        }
        for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
        if (lane == 0) stat[i][0] = m, stat[i][1] = l;
    }
    __syncthreads();
    for (int64_t x = threadIdx.x; x < a.L * a.Ev; x += blockDim.x) { // thread per (row, value column)
        const int64_t i = x / a.Ev, e = x % a.Ev;
        A acc = 0;
        for (int64_t j = 0; j < n; j++) acc += sc[i * chunk + j] * (A)dv(vb[(j0 + j) * v.ld + e]);
        A *p = part + ((b * nch + c) * a.L + i) * (a.Ev + 2);
        p[2 + e] = acc;
        if (e == 0) p[0] = stat[i][0], p[1] = stat[i][1];
    }
}

// Thread per (b, i, e): the chunks combined in order; lse by the e == 0 thread.
template <typename T, typename Lse>
__global__ void k_dec_combine(Att a, Mat out, int64_t nch, const typename DecAcc<T>::A *part, Lse *lse) {
    using A = typename DecAcc<T>::A;
    NBC_GRID_STRIDE(x, a.B * a.L * a.Ev) {
        const int64_t e = x % a.Ev, bi = x / a.Ev, b = bi / a.L, i = bi % a.L;
        const A *p0 = part + (b * nch * a.L + i) * (a.Ev + 2);
        const int64_t step = a.L * (a.Ev + 2);
        A M = -INFINITY;
        for (int64_t c = 0; c < nch; c++) M = fmax(M, p0[c * step]);
        A l = 0, acc = 0;
        if (M != -INFINITY)
            for (int64_t c = 0; c < nch; c++) {
                const A *p = p0 + c * step;
                if (p[0] == -INFINITY) continue;
                const A w = exp(p[0] - M);
                l += p[1] * w, acc += p[2 + e] * w;
            }
        T *o = (T *)out.data + mat_off(out, b) + i * out.ld;
        o[e] = cv<T>(M == -INFINITY ? (double)NAN : (double)(acc / l)); // every key masked: NaN, as the other paths
        if (e == 0) lse[bi] = (Lse)(M == -INFINITY ? (A)-INFINITY : M + log(l));
    }
}

// ---- 16-bit rows of 64, 128 or 256: vector loads ------------------------------------------
//
// The same block and scratch layout as k_dec_part, for bfloat16/float16
// with E == Ev == D and 16-byte aligned rows: a group of D/8 lanes takes
// DEC_U keys at once, each lane one 16-byte vector of each (a warp reads
// whole key rows per instruction, coalesced, every load issued before the
// first is used), the dot products reduced across the group by shuffles;
// the weighted value sum likewise, groups taking keys in turn and their
// partial sums added in group order in shared memory (deterministic). A key
// masked in every row is not read, nor is a value whose weight is 0 in
// every row: a static KV cache's unused tail costs its mask bytes and its
// chunks' partial sums. At batch 1 chunks are short (one pass of the
// block's groups: dec16_plan), so a step waits on about two memory
// latencies; k_dec_combine16 merges the chunks with a block per row.

constexpr int DEC_ROWS = 4; // rows per pass of the value sum (its accumulators live in registers)
constexpr int DEC_U = 4;    // keys per group per pass, loaded together

template <typename T, int D>
__global__ void __launch_bounds__(DT) k_dec_part16(Att a, Mat q, Mat k, Mat v, int64_t chunk, int64_t nch,
                                                   float *part) {
    constexpr int G = D / 8, NG = DT / G; // lanes per key, key groups per block
    extern __shared__ unsigned char smem[];
    float *qs = (float *)smem;   // [L][D]
    float *sc = qs + a.L * D;    // [L][chunk]
    __shared__ float stat[DEC_L][2];
    __shared__ float red[NG * DEC_ROWS * D]; // the groups' value sums of one pass
    const int64_t b = blockIdx.y, c = blockIdx.x, j0 = c * chunk, j1 = min(a.S, j0 + chunk), n = j1 - j0;
    const T *qb = (const T *)q.data + mat_off(q, b), *kb = (const T *)k.data + mat_off(k, b);
    const T *vb = (const T *)v.data + mat_off(v, b);
    for (int64_t x = threadIdx.x; x < a.L * D; x += DT) qs[x] = (float)dv(qb[(x / D) * q.ld + x % D]);
    __syncthreads();
    const int64_t mb = a.mask.ptr ? mask_base(a.mask, b) : 0;
    const int grp = threadIdx.x / G, gl = threadIdx.x % G;
    const unsigned gmask = G == 32 ? 0xffffffffu : ((1u << G) - 1) << (threadIdx.x % 32 / G * G);
    for (int64_t jb = grp * DEC_U; jb < n; jb += NG * DEC_U) { // scores: DEC_U keys a group
        bool open[DEC_U];
        float kf[DEC_U][8];
#pragma unroll
        for (int u = 0; u < DEC_U; u++) {
            open[u] = false;
            for (int64_t i = 0; i < a.L && jb + u < n && !open[u]; i++)
                open[u] = masked<float, T>(a, mb, i, j0 + jb + u, 0.f) != -INFINITY;
            if (open[u]) load8(kb + (j0 + jb + u) * k.ld + gl * 8, kf[u]);
        }
#pragma unroll
        for (int u = 0; u < DEC_U; u++) {
            const int64_t jj = jb + u;
            if (jj >= n) break;
            if (!open[u]) {
                if (gl == 0)
                    for (int64_t i = 0; i < a.L; i++) sc[i * chunk + jj] = -INFINITY;
                continue;
            }
            for (int64_t i = 0; i < a.L; i++) {
                const float *qi = qs + i * D + gl * 8;
                float s = 0;
#pragma unroll
                for (int e = 0; e < 8; e++) s += qi[e] * kf[u][e];
#pragma unroll
                for (int o = G / 2; o > 0; o >>= 1) s += __shfl_xor_sync(gmask, s, o);
                if (gl == 0) sc[i * chunk + jj] = masked<float, T>(a, mb, i, j0 + jj, s * (float)a.scale);
            }
        }
    }
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int64_t i = warp; i < a.L; i += DT / 32) { // per row, by a warp: the chunk's max and sum
        float m = -INFINITY;
        for (int64_t j = lane; j < n; j += 32) m = fmaxf(m, sc[i * chunk + j]);
        m = warp_max(m);
        float l = 0;
        for (int64_t j = lane; j < n; j += 32) {
            float p = m == -INFINITY ? 0.f : expf(sc[i * chunk + j] - m);
            sc[i * chunk + j] = p;
            l += p;
        }
        for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
        if (lane == 0) stat[i][0] = m, stat[i][1] = l;
    }
    __syncthreads();
    for (int64_t r0 = 0; r0 < a.L; r0 += DEC_ROWS) { // the value sums, DEC_ROWS rows a pass
        const int R = (int)min((int64_t)DEC_ROWS, a.L - r0);
        float acc[DEC_ROWS][8] = {};
        for (int64_t jb = grp * DEC_U; jb < n; jb += NG * DEC_U) {
            float p[DEC_U][DEC_ROWS], vf[DEC_U][8];
            bool any[DEC_U];
#pragma unroll
            for (int u = 0; u < DEC_U; u++) {
                any[u] = false;
#pragma unroll
                for (int r = 0; r < DEC_ROWS; r++) {
                    p[u][r] = r < R && jb + u < n ? sc[(r0 + r) * chunk + jb + u] : 0.f;
                    any[u] |= p[u][r] != 0;
                }
                if (any[u]) load8(vb + (j0 + jb + u) * v.ld + gl * 8, vf[u]);
            }
#pragma unroll
            for (int u = 0; u < DEC_U; u++)
                if (any[u])
#pragma unroll
                    for (int r = 0; r < DEC_ROWS; r++)
#pragma unroll
                        for (int e = 0; e < 8; e++) acc[r][e] += p[u][r] * vf[u][e];
        }
#pragma unroll
        for (int r = 0; r < DEC_ROWS; r++)
#pragma unroll
            for (int e = 0; e < 8; e++) red[(grp * DEC_ROWS + r) * D + gl * 8 + e] = acc[r][e];
        __syncthreads();
        for (int x = threadIdx.x; x < R * D; x += DT) {
            const int r = x / D, e = x % D;
            float s = 0;
            for (int g = 0; g < NG; g++) s += red[(g * DEC_ROWS + r) * D + e];
            const int64_t i = r0 + r;
            float *pp = part + ((b * nch + c) * a.L + i) * (D + 2);
            pp[2 + e] = s;
            if (e == 0) pp[0] = stat[i][0], pp[1] = stat[i][1];
        }
        __syncthreads();
    }
}

// A block per row (b, i): the chunks' maxima reduced to M, each chunk's
// weight exp(m_c - M) and weighted sum l_c w_c in shared memory, l summed
// in chunk order by every thread, and thread e's output sum over the
// chunks (loads independent of one another, unrolled); lse in float32.
// Chunks whose keys are all masked weigh 0 and hold a sum of 0 (their
// values are never read), so they add nothing, as k_dec_combine skips them.
constexpr int DEC_CT = 128, DEC_CB = 16;
template <typename T>
__global__ void __launch_bounds__(DEC_CT) k_dec_combine16(Att a, Mat out, int64_t nch, const float *part, float *lse) {
    extern __shared__ float cw[]; // [2][nch]: weights, weighted sums
    __shared__ float red[32];
    const int64_t bi = blockIdx.x, b = bi / a.L, i = bi % a.L, step = a.L * (a.Ev + 2);
    const float *p0 = part + (b * nch * a.L + i) * (a.Ev + 2);
    float M = -INFINITY;
    for (int64_t c = threadIdx.x; c < nch; c += DEC_CT) M = fmaxf(M, p0[c * step]);
    M = warp_max(M);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = M;
    __syncthreads();
    M = red[0];
    for (int w = 1; w < DEC_CT / 32; w++) M = fmaxf(M, red[w]);
    for (int64_t c = threadIdx.x; c < nch; c += DEC_CT) {
        const float m = p0[c * step];
        const float w = M == -INFINITY || m == -INFINITY ? 0.f : expf(m - M);
        cw[c] = w, cw[nch + c] = w != 0 ? p0[c * step + 1] * w : 0.f;
    }
    __syncthreads();
    float l = 0;
    for (int64_t c = 0; c < nch; c++) l += cw[nch + c];
    T *o = (T *)out.data + mat_off(out, b) + i * out.ld;
    for (int64_t e = threadIdx.x; e < a.Ev; e += DEC_CT) {
        float acc = 0;
        for (int64_t c0 = 0; c0 < nch; c0 += DEC_CB) { // DEC_CB loads in flight, then their sums in chunk order
            float pv[DEC_CB];
#pragma unroll
            for (int u = 0; u < DEC_CB; u++) pv[u] = c0 + u < nch ? p0[(c0 + u) * step + 2 + e] : 0.f;
#pragma unroll
            for (int u = 0; u < DEC_CB; u++)
                if (c0 + u < nch) acc += pv[u] * cw[c0 + u]; // a masked chunk's sum is 0
        }
        o[e] = cv<T>(M == -INFINITY ? (double)NAN : (double)(acc / l)); // every key masked: NaN, as the other paths
    }
    if (threadIdx.x == 0) lse[bi] = M == -INFINITY ? -INFINITY : M + logf(l);
}

// Whether a view's rows start 16-byte aligned (data, matrix and row strides in whole vectors).
static bool vec8(const Mat &m) {
    return ((uintptr_t)m.data & 15) == 0 && m.ld % 8 == 0 && m.s1 % 8 == 0 && m.s2 % 8 == 0;
}

// The 16-bit kernels' split: chunks of whole passes of the block's key
// groups (DT / (D / 8) groups of DEC_U keys), one pass each where about
// 1056 blocks (8 an SM of an H100/H200) need it, longer where many
// matrices fill the GPU anyway (the scratch, L (Ev + 2) floats a chunk,
// stays a small part of the cache read), and at most DEC_MAX_CH a row
// (the combine's shared memory). The shared memory a block needs.
constexpr int64_t DEC_MAX_CH = 4096, DEC_WANT_BLOCKS = 1056;
static void dec16_plan(const Att &a, int64_t *nch, int64_t *chunk, size_t *smem) {
    const int64_t pass = DT / (a.E / 8) * DEC_U, passes = (a.S + pass - 1) / pass;
    const int64_t want = (DEC_WANT_BLOCKS + a.B - 1) / a.B; // chunks a row
    int64_t c = pass * ((passes + want - 1) / want);
    while ((a.S + c - 1) / c > DEC_MAX_CH) c += pass;
    *chunk = c, *nch = (a.S + c - 1) / c;
    *smem = sizeof(float) * (size_t)(a.L * a.E + a.L * c);
}

// Runs the 16-bit kernels where they apply (T bfloat16/float16, E == Ev in
// {64, 128, 256}, aligned views) and says whether they did; *r the status.
template <typename T>
static bool dec16_forward(nb_backend *be, const char *op, const Att &a, const Mat &q, const Mat &k, const Mat &v,
                          const Mat &out, void *lse, nb_status *r) {
    if constexpr (std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value) {
        if (a.E != a.Ev || (a.E != 64 && a.E != 128 && a.E != 256) || !vec8(q) || !vec8(k) || !vec8(v)) return false;
        int64_t nch, chunk;
        size_t sm;
        dec16_plan(a, &nch, &chunk, &sm);
        // the kernel's static shared memory (stat, red) counts against the same limit as sm
        const size_t fixed = sizeof(float) * (size_t)(2 * DEC_L + DT / (a.E / 8) * DEC_ROWS * a.E);
        if (sm + fixed > 160 * 1024) return false; // the generic kernel's split
        cudaStream_t s = stream_of(be);
        Scratch part;
        if (!part.alloc(be, sizeof(float) * (size_t)(a.B * nch * a.L * (a.Ev + 2)))) return *r = nb_last_status(), true;
        auto go = [&](auto kern) -> nb_status {
            if (sm + fixed > 48 * 1024) // the opt-in that set_smem makes from 48 KiB of dynamic memory alone
                NBC_TRY(op, cudaFuncSetAttribute((const void *)kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
            kern<<<dim3((unsigned)nch, (unsigned)a.B), DT, sm, s>>>(a, q, k, v, chunk, nch, part.as<float>());
            nb_status st = launched(op);
            if (st) return st;
            k_dec_combine16<T><<<(unsigned)(a.B * a.L), DEC_CT, 2 * sizeof(float) * (size_t)nch, s>>>(
                a, out, nch, part.as<float>(), (float *)lse);
            return launched(op);
        };
        *r = a.E == 64 ? go(k_dec_part16<T, 64>) : a.E == 128 ? go(k_dec_part16<T, 128>) : go(k_dec_part16<T, 256>);
        return true;
    }
    return false;
}

} // namespace

// The split: chunks of at least 64 keys, enough of them to give about two
// blocks per SM, at most 2048 keys each; the shared memory a block needs.
static void decode_plan(const Att &a, size_t acc_size, int64_t *nch, int64_t *chunk, size_t *smem) {
    int64_t n = (a.S + 63) / 64, want = (264 + a.B - 1) / a.B;
    if (n > want) n = want > 0 ? want : 1;
    int64_t c = (a.S + n - 1) / n;
    if (c > 2048) c = 2048;
    *chunk = c, *nch = (a.S + c - 1) / c;
    *smem = acc_size * (size_t)(a.L * a.E + a.L * c);
}

bool decode_fits(const Att &a, nb_dtype dt) {
    int64_t nch, chunk;
    size_t sm;
    if (a.L > DEC_L || a.dropout || a.E > 512 || a.Ev > 512 || a.S <= 0 || a.B > 65535) return false;
    decode_plan(a, dt == NB_F64 ? 8 : 4, &nch, &chunk, &sm);
    return sm <= 160 * 1024; // within every supported GPU's opt-in shared memory
}

nb_status decode_forward(nb_backend *be, const char *op, nb_dtype dt, const Att &a, const Mat &q, const Mat &k,
                         const Mat &v, const Mat &out, void *lse) {
    int64_t nch, chunk;
    size_t sm;
    decode_plan(a, dt == NB_F64 ? 8 : 4, &nch, &chunk, &sm);
    cudaStream_t s = stream_of(be);
    return dispatch_floating(op, dt, [&](auto tag) -> nb_status {
        using T = decltype(tag);
        using A = typename DecAcc<T>::A;
        nb_status r = NB_OK;
        if (dec16_forward<T>(be, op, a, q, k, v, out, lse, &r)) return r;
        Scratch part;
        if (!part.alloc(be, sizeof(A) * (size_t)(a.B * nch * a.L * (a.Ev + 2)))) return nb_last_status();
        dim3 grid((unsigned)nch, (unsigned)a.B);
        if (sm > 48 * 1024 && (r = set_smem((const void *)k_dec_part<T>, sm, op))) return r;
        k_dec_part<T><<<grid, DT, sm, s>>>(a, q, k, v, chunk, nch, part.as<A>());
        r = launched(op);
        if (r) return r;
        const int64_t n = a.B * a.L * a.Ev;
        if (nb_dtype_is_16bit(dt))
            k_dec_combine<T, float><<<blocks_for(n), THREADS, 0, s>>>(a, out, nch, part.as<A>(), (float *)lse);
        else
            k_dec_combine<T, T><<<blocks_for(n), THREADS, 0, s>>>(a, out, nch, part.as<A>(), (T *)lse);
        return launched(op);
    });
}

} // namespace nbc
