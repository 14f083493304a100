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
        Scratch part;
        if (!part.alloc(be, sizeof(A) * (size_t)(a.B * nch * a.L * (a.Ev + 2)))) return nb_last_status();
        if (sm > 48 * 1024) {
            nb_status r = set_smem((const void *)k_dec_part<T>, sm, op);
            if (r) return r;
        }
        dim3 grid((unsigned)nch, (unsigned)a.B);
        k_dec_part<T><<<grid, DT, sm, s>>>(a, q, k, v, chunk, nch, part.as<A>());
        nb_status r = launched(op);
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
