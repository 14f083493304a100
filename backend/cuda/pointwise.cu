// pointwise.cu - the pointwise slot on CUDA: a fused elementwise program
// (nb_pw_program, nb_backend.h) becomes one kernel, generated as CUDA C++
// and compiled at run time (jit.cu). One thread per element, grid-stride:
// deterministic. Every node is evaluated as the slot it stands for
// evaluates it, so the bits are the slot-by-slot ones:
//   - the formulas are nb_scalar_math.h's, the functions unary.cu and
//     binary.cu call, in the same types (16-bit values in float32);
//   - a 16-bit node's value is rounded to its dtype (the store and load
//     between two slot calls), with the instructions Traits uses
//     (cvt.rn.bf16.f32, cvt.rn.f16.f32); casts are copy.cu's conversions;
//   - a float32/float64 node's value is XORed with a kernel parameter that
//     is always 0: exact for every bit pattern, NaN payloads included, and
//     opaque to the compilers, so ptxas cannot contract a multiplication of
//     one node with an addition of the next into an FMA (a separate kernel
//     could not either; PTX's mul.f32 and add.f32 may be fused by ptxas, and
//     an empty asm statement does not reach the PTX);
//   - the unary ops' parameters are prepared on the host as unary.cu
//     prepares them, and passed as literal bits.
// The source depends on the program, the views' dtypes and the geometry's
// kind (contiguous, or the merged rank with 32- or 64-bit index math; V
// elements per thread as 16-byte vectors where every view allows it), not
// on sizes or addresses, so one compiled kernel serves many calls.
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "jit.cuh"
#include "nb_scalar_math.h"
#include "philox.h"

namespace nbc {

// ---- the source buffer ------------------------------------------------------------------

struct Src {
    char *p = nullptr;
    size_t n = 0, cap = 0;
    bool oom = false;
    Src() = default;
    Src(const Src &) = delete;
    Src &operator=(const Src &) = delete;
    ~Src() { free(p); }
    void add(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        if (oom) return;
        for (;;) {
            va_list ap;
            va_start(ap, fmt);
            int w = vsnprintf(p ? p + n : nullptr, p ? cap - n : 0, fmt, ap);
            va_end(ap);
            if (w < 0) {
                oom = true;
                return;
            }
            if (p && n + (size_t)w < cap) {
                n += (size_t)w;
                return;
            }
            size_t c = cap ? cap : 4096;
            while (c <= n + (size_t)w) c *= 2;
            char *q = (char *)realloc(p, c);
            if (!q) {
                oom = true;
                return;
            }
            p = q, cap = c;
        }
    }
};

// ---- geometry: the views merged as the strided iterator merges them ----------------------

struct Geom {
    int ndim;
    int64_t numel;
    bool contig, small;
    int64_t shape[MAXD];
    int64_t st[NB_PW_MAX_VIEWS][MAXD];
};

static void make_geom(int nv, const nb_kview *v, Geom *g) {
    g->numel = numel(&v[0]);
    const int nd = nb_view_merge_dims(nv, v, &g->ndim, g->shape, g->st);
    g->contig = nd == 0;
    if (nd == 1) {
        g->contig = true;
        for (int k = 0; k < nv; k++) g->contig &= g->st[k][0] == 1;
    }
    g->small = g->numel < ((int64_t)1 << 31);
    for (int k = 0; k < nv && g->small; k++) {
        int64_t span = 0;
        for (int d = 0; d < nd; d++) span += (g->shape[d] - 1) * (g->st[k][d] < 0 ? -g->st[k][d] : g->st[k][d]);
        g->small = span < ((int64_t)1 << 31);
    }
}

// ---- code generation ----------------------------------------------------------------------

// The prelude: the integer types nb_kernel_ops.h expects of an NVRTC
// includer, the formulas, and the 16-bit conversions as Traits (cuda_bf16.h,
// cuda_fp16.h; bfloat16 needs sm_80) and copy.cu's narrow_f do them.
static const char PRELUDE[] =
    "typedef signed char int8_t;\ntypedef short int16_t;\ntypedef int int32_t;\ntypedef long long int64_t;\n"
    "typedef unsigned char uint8_t;\ntypedef unsigned short uint16_t;\ntypedef unsigned int uint32_t;\n"
    "typedef unsigned long long uint64_t;\n"
    "#include \"nb_scalar_math.h\"\n"
    "#define NBJ __device__ __forceinline__\n"
    "NBJ float ld_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }\n"
    "NBJ float ld_f16(uint16_t h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
    "NBJ uint16_t st_bf16(float f) { uint16_t h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
    "NBJ uint16_t st_f16(float f) { uint16_t h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
    // double to bfloat16, rounded once: sm_90's instruction; before it, to
    // float rounded to odd (toward zero, then the last bit set if inexact),
    // which a float-to-bfloat16 rounding then makes correctly rounded
    "NBJ uint16_t st_bf16_d(double d) {\n"
    "#if __CUDA_ARCH__ >= 900\n"
    "    uint16_t h; asm(\"cvt.rn.bf16.f64 %0, %1;\" : \"=h\"(h) : \"d\"(d)); return h;\n"
    "#else\n"
    "    float f = __double2float_rz(d);\n"
    "    if ((double)f != d && d == d) f = __uint_as_float(__float_as_uint(f) | 1u);\n"
    "    return st_bf16(f);\n"
    "#endif\n"
    "}\n"
    "NBJ uint16_t st_f16_d(double d) { uint16_t h; asm(\"cvt.rn.f16.f64 %0, %1;\" : \"=h\"(h) : \"d\"(d)); return h; }\n"
    "NBJ float keep(float v, long long z) { return __int_as_float(__float_as_int(v) ^ (int)z); }\n"
    "NBJ double keep(double v, long long z) { return __longlong_as_double(__double_as_longlong(v) ^ z); }\n";

static bool is16(nb_dtype dt) { return dt == NB_BF16 || dt == NB_F16; }
static const char *ctype(nb_dtype dt) { return dt == NB_F64 ? "double" : dt == NB_BOOL ? "bool" : "float"; }
static const char *sfx(nb_dtype dt) { return dt == NB_F64 ? "f64" : "f32"; } // 16-bit runs float32's formulas
static const char *bits16(nb_dtype dt) { return dt == NB_BF16 ? "bf16" : "f16"; }
static unsigned long long dbits(double v) {
    unsigned long long u;
    memcpy(&u, &v, sizeof u);
    return u;
}
static unsigned fbits(float v) {
    unsigned u;
    memcpy(&u, &v, sizeof u);
    return u;
}

// "x" of dtype from: the copy slot's conversion of value v_a (node a of dtype from).
static void emit_cast(Src &s, int i, nb_dtype to, nb_dtype from, int a) {
    const char *T = ctype(to);
    if (to == from || (to == NB_F32 && is16(from))) s.add("    %s v%d = v%d;\n", T, i, a);
    else if (to == NB_BOOL) s.add("    bool v%d = v%d != 0;\n", i, a);
    else if (from == NB_BOOL) s.add("    %s v%d = v%d ? 1 : 0;\n", T, i, a);
    else if (to == NB_F64) s.add("    double v%d = (double)v%d;\n", i, a);
    else if (to == NB_F32) s.add("    float v%d = __double2float_rn(v%d);\n", i, a); // from float64
    else if (from == NB_F64) s.add("    float v%d = ld_%s(st_%s_d(v%d));\n", i, bits16(to), bits16(to), a);
    else s.add("    float v%d = ld_%s(st_%s(v%d));\n", i, bits16(to), bits16(to), a); // from a float32 value
}

// The element type of a view's storage in the generated code.
static const char *stype(nb_dtype dt) { return is16(dt) ? "uint16_t" : dt == NB_F64 ? "double" : dt == NB_BOOL ? "bool" : "float"; }

// How the kernel walks the elements: V = 1, one element per thread; V > 1,
// V consecutive elements of the innermost dim per thread, loaded and stored
// as one aligned vector for the views that step that dim by 1 (vec[k]) and
// read once for those that broadcast it.
struct Walk {
    int V = 1;
    bool vec[NB_PW_MAX_VIEWS] = {};
};

// The value of node i (as `v<i>` of ctype(dtype)), then its rounding to the dtype.
static void emit_node(Src &s, const nb_pw_program *p, const Walk &w, int i) {
    const nb_pw_node *nd = &p->nodes[i];
    const nb_dtype dt = nd->dtype;
    const char *T = ctype(dt);
    switch (nd->kind) {
    case NB_PW_INPUT: {
        int k = p->n_out + nd->a;
        char raw[64];
        if (w.V == 1) snprintf(raw, sizeof raw, "((const %s *)p.ptr[%d])[o%d]", stype(dt), k, k);
        else if (w.vec[k]) snprintf(raw, sizeof raw, "x%d.v[t]", k);
        else snprintf(raw, sizeof raw, "x%d", k);
        if (is16(dt)) s.add("    float v%d = ld_%s(%s);\n", i, bits16(dt), raw);
        else s.add("    %s v%d = %s;\n", T, i, raw);
        return; // exact already
    }
    case NB_PW_CONST:
        if (dt == NB_BOOL) s.add("    bool v%d = %d;\n", i, nd->value != 0);
        else if (dt == NB_F64) s.add("    double v%d = __longlong_as_double(0x%llxll);\n", i, dbits(nd->value));
        else if (dt == NB_F32) s.add("    float v%d = __int_as_float(0x%x);\n", i, fbits((float)nd->value));
        else s.add("    float v%d = ld_%s(st_%s_d(__longlong_as_double(0x%llxll)));\n", i, bits16(dt), bits16(dt),
                   dbits(nd->value));
        return;
    case NB_PW_CAST: emit_cast(s, i, dt, p->nodes[nd->a].dtype, nd->a); return;
    case NB_PW_UNARY: s.add("    %s v%d = nb_sm_unary_%s(%d, v%d, &u%d);\n", T, i, sfx(dt), nd->op, nd->a, i); break;
    case NB_PW_UNARY_BACKWARD:
        if (dt == NB_F64)
            s.add("    double v%d = nb_sm_unary_backward_f64(%d, v%d, v%d, __longlong_as_double(0x%llxll));\n", i,
                  nd->op, nd->a, nd->b >= 0 ? nd->b : nd->a, dbits(nd->value));
        else
            s.add("    float v%d = nb_sm_unary_backward_f32(%d, v%d, v%d, __int_as_float(0x%x));\n", i, nd->op,
                  nd->a, nd->b >= 0 ? nd->b : nd->a, fbits((float)nd->value));
        break;
    case NB_PW_BINARY: {
        const nb_dtype in = p->nodes[nd->a].dtype;
        if (nd->op >= NB_BINARY_EQ && nd->op <= NB_BINARY_LE)
            s.add("    bool v%d = NB_SM_COMPARE(%d, v%d, v%d);\n", i, nd->op, nd->a, nd->b);
        else if (in == NB_BOOL) s.add("    bool v%d = nb_sm_binary_b8(%d, v%d, v%d);\n", i, nd->op, nd->a, nd->b);
        else s.add("    %s v%d = nb_sm_binary_%s(%d, v%d, v%d);\n", T, i, sfx(dt), nd->op, nd->a, nd->b);
        break;
    }
    case NB_PW_WHERE: s.add("    %s v%d = v%d ? v%d : v%d;\n", T, i, nd->a, nd->b, nd->c); return; // moves values
    case NB_PW_DROPOUT: { // random.cu's k_dropout mask: bernoulli(1 - p) of element i (+ t), times 1/(1-p)
        const double p_drop = nd->value, scale = 1 / (1 - p_drop);
        const unsigned long long th = nb_bits_threshold(1 - p_drop);
        char m1[96];
        if (dt == NB_F64) snprintf(m1, sizeof m1, "__longlong_as_double(0x%llxll)", dbits(scale));
        else if (dt == NB_F32) snprintf(m1, sizeof m1, "__int_as_float(0x%x)", fbits((float)scale));
        else snprintf(m1, sizeof m1, "ld_%s(st_%s(__int_as_float(0x%x)))", bits16(dt), bits16(dt), fbits((float)scale));
        if (w.V > 1) // element i + t: words (t % 2) * 2, + 1 of the pair's block, drawn before the loop over t
            s.add("    %s v%d = ((((unsigned long long)pw%d[t / 2].v[(t %% 2) * 2] << 32) | pw%d[t / 2].v[(t %% 2) * 2 + 1])"
                  " >> 11) < 0x%llxull ? %s : (%s)0;\n", T, i, i, i, th, m1, T);
        else
            s.add("    %s v%d = (nb_philox_bits(p.rng[%d][0], ro%d, (unsigned long long)i) >> 11) < 0x%llxull ? %s : "
                  "(%s)0;\n", T, i, nd->a, nd->a, th, m1, T);
        return; // in the dtype already
    }
    default: return; // the check refused other kinds
    }
    if (is16(dt)) s.add("    v%d = ld_%s(st_%s(v%d));\n", i, bits16(dt), bits16(dt), i);
    else if (dt != NB_BOOL) s.add("    v%d = keep(v%d, p.zero);\n", i, i);
}

// V for the views: every view steps the innermost merged dim by 1 or 0
// (outputs by 1), that dim's size and the outer strides of the stepping
// views are multiples of V, and their pointers are aligned to V elements;
// V elements of the widest stepping view make 16 bytes (at most 8). Else 1.
static Walk walk_of(int nv, int n_out, const nb_kview *views, const Geom &g) {
    Walk w;
    if (g.ndim == 0) return w;
    const int in = g.ndim - 1;
    size_t widest = 0;
    for (int k = 0; k < nv; k++) {
        int64_t st = g.st[k][in];
        if ((st != 0 && st != 1) || (k < n_out && st != 1)) return w;
        if (st == 1 && nb_dtype_size(views[k].dtype) > widest) widest = nb_dtype_size(views[k].dtype);
    }
    int V = widest ? (int)(16 / widest) : 1;
    if (V > 8) V = 8;
    if (V < 2 || g.shape[in] % V) return w;
    for (int k = 0; k < nv; k++) {
        if (g.st[k][in] != 1) continue;
        if ((uintptr_t)views[k].data % ((size_t)V * nb_dtype_size(views[k].dtype))) return w;
        for (int d = 0; d < in; d++)
            if (g.st[k][d] % V) return w;
    }
    w.V = V;
    for (int k = 0; k < nv; k++) w.vec[k] = g.st[k][in] == 1;
    return w;
}

// The kernel `nb_pw` for program p over views with geometry g, walked as w says.
static void generate(Src &s, const nb_pw_program *p, const nb_kview *views, const Geom &g, const Walk &w) {
    const int nv = p->n_out + p->n_in, D = g.ndim > 0 ? g.ndim : 1, V = w.V;
    s.add("%s", PRELUDE);
    if (p->n_rng) s.add("#include \"philox.h\"\n"); // the Philox of random.cu (core/philox.h)
    s.add("struct P {\n    long long n, zero;\n    char *ptr[%d];\n    long long shape[%d];\n    long long st[%d][%d];\n",
          nv, D, nv, D);
    if (p->n_rng) s.add("    unsigned long long rng[%d][3];\n", p->n_rng); // seed, offset, offset_base
    s.add("};\n");
    if (V > 1) { // the vectors: V elements of each storage type, aligned as one access
        const nb_dtype kinds[4] = {NB_BF16, NB_F32, NB_F64, NB_BOOL};
        for (int t = 0; t < 4; t++)
            s.add("struct __align__(%zu) vec_%s { %s v[%d]; };\n", (size_t)V * nb_dtype_size(kinds[t]) > 16 ? 16
                  : (size_t)V * nb_dtype_size(kinds[t]), stype(kinds[t]), stype(kinds[t]), V);
    }
    s.add("extern \"C\" __global__ void __launch_bounds__(%d) nb_pw(P p) {\n", THREADS);
    for (int i = 0; i < p->n_nodes; i++) { // the unary ops' parameters, prepared as unary.cu prepares them
        const nb_pw_node *nd = &p->nodes[i];
        if (nd->kind != NB_PW_UNARY) continue;
        if (nd->dtype == NB_F64) {
            nb_sm_unary_args_f64 u = nb_sm_unary_prep_f64(nd->op, nd->value);
            s.add("    const nb_sm_unary_args_f64 u%d = {__longlong_as_double(0x%llxll), __longlong_as_double(0x%llxll), "
                  "%d};\n", i, dbits(u.a), dbits(u.p10), (int)u.round_neg);
        } else {
            nb_sm_unary_args_f32 u = nb_sm_unary_prep_f32(nd->op, nd->value);
            s.add("    const nb_sm_unary_args_f32 u%d = {__int_as_float(0x%x), __int_as_float(0x%x), %d};\n", i,
                  fbits(u.a), fbits(u.p10), (int)u.round_neg);
        }
    }
    for (int r = 0; r < p->n_rng; r++) // each stream's first counter block, offset_base read once
        s.add("    const unsigned long long ro%d = p.rng[%d][1] + (p.rng[%d][2] ? *(const unsigned long long *)"
              "p.rng[%d][2] : 0ull);\n", r, r, r, r);
    s.add("    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < p.n / %d;"
          " j += (long long)gridDim.x * blockDim.x) {\n    const long long i = j * %d;\n", V, V);
    if (g.contig) {
        for (int k = 0; k < nv; k++) s.add("    const long long o%d = i;\n", k);
    } else {
        const char *I = g.small ? "int" : "long long", *U = g.small ? "unsigned" : "long long";
        s.add("    %s o[%d] = {0};\n    %s u = (%s)i;\n", I, nv, U, U);
        s.add("#pragma unroll\n    for (int d = %d; d >= 0; d--) {\n", g.ndim - 1);
        s.add("        %s sz = (%s)p.shape[d], q = u / sz, r = u - q * sz;\n        u = q;\n", U, U);
        s.add("#pragma unroll\n        for (int k = 0; k < %d; k++) o[k] += (%s)r * (%s)p.st[k][d];\n    }\n", nv, I, I);
        for (int k = 0; k < nv; k++) s.add("    const long long o%d = o[%d];\n", k, k);
    }
    if (V > 1) { // inputs read once per thread (a broadcast view: its one element), outputs gathered
        for (int k = p->n_out; k < nv; k++) {
            const char *ty = stype(views[k].dtype);
            if (w.vec[k]) s.add("    const vec_%s x%d = *(const vec_%s *)((const %s *)p.ptr[%d] + o%d);\n", ty, k, ty, ty, k, k);
            else s.add("    const %s x%d = ((const %s *)p.ptr[%d])[o%d];\n", ty, k, ty, k, k);
        }
        for (int k = 0; k < p->n_out; k++) s.add("    vec_%s y%d;\n", stype(views[k].dtype), k);
        for (int i = 0; i < p->n_nodes; i++) { // a DROPOUT node's V / 2 Philox blocks (i is even: V is)
            const nb_pw_node *nd = &p->nodes[i];
            if (nd->kind != NB_PW_DROPOUT) continue;
            s.add("    nb_philox_u4 pw%d[%d];\n#pragma unroll\n    for (int q = 0; q < %d; q++) pw%d[q] = "
                  "nb_philox4x32_10(ro%d + (unsigned long long)(i / 2 + q), 0, p.rng[%d][0]);\n",
                  i, V / 2, V / 2, i, nd->a, nd->a);
        }
        s.add("#pragma unroll\n    for (int t = 0; t < %d; t++) {\n", V);
    }
    for (int i = 0; i < p->n_nodes; i++) emit_node(s, p, w, i);
    for (int k = 0; k < p->n_out; k++) {
        const nb_dtype dt = views[k].dtype;
        int v = p->outputs[k];
        char dst[64];
        if (V == 1) snprintf(dst, sizeof dst, "((%s *)p.ptr[%d])[o%d]", stype(dt), k, k);
        else snprintf(dst, sizeof dst, "y%d.v[t]", k);
        if (is16(dt)) s.add("    %s = st_%s(v%d);\n", dst, bits16(dt), v);
        else s.add("    %s = v%d;\n", dst, v);
    }
    if (V > 1) {
        s.add("    }\n");
        for (int k = 0; k < p->n_out; k++) {
            const char *ty = stype(views[k].dtype);
            s.add("    *(vec_%s *)((%s *)p.ptr[%d] + o%d) = y%d;\n", ty, ty, k, k, k);
        }
    }
    s.add("    }\n}\n");
}

} // namespace nbc

using namespace nbc;

// The program, views and dtypes checked: backend/check/pointwise.c.
extern "C" nb_status nb_cuda_pointwise(nb_backend *be, int n, const nb_kview *views, const nb_pw_program *prog) {
    Geom g;
    make_geom(n, views, &g);
    if (g.numel == 0) return NB_OK;
    Src s;
    const Walk w = walk_of(n, prog->n_out, views, g);
    generate(s, prog, views, g, w);
    if (s.oom) return nb_set_error(NB_ERR_OOM, "pointwise: no memory for the kernel's source");
    cudaKernel_t k;
    nb_status st = jit_kernel(be, "pointwise", s.p, "nb_pw", &k);
    if (st) return st;
    // the kernel's parameter: P of the generated source, all 8-byte fields
    const int D = g.ndim > 0 ? g.ndim : 1;
    uint64_t param[2 + NB_PW_MAX_VIEWS + MAXD + NB_PW_MAX_VIEWS * MAXD + 3 * NB_PW_MAX_RNG] = {0};
    uint64_t *f = param;
    *f++ = (uint64_t)g.numel;
    *f++ = 0; // zero: the barrier's operand, unknown to the compiler
    for (int k = 0; k < n; k++) *f++ = (uint64_t)(uintptr_t)views[k].data;
    for (int d = 0; d < D; d++) *f++ = (uint64_t)(d < g.ndim ? g.shape[d] : 1);
    for (int k = 0; k < n; k++)
        for (int d = 0; d < D; d++) *f++ = (uint64_t)(d < g.ndim ? g.st[k][d] : 0);
    for (int r = 0; r < prog->n_rng; r++)
        *f++ = prog->rng[r].seed, *f++ = prog->rng[r].offset, *f++ = (uint64_t)(uintptr_t)prog->rng[r].offset_base;
    return jit_launch(be, "pointwise", k, blocks_for(g.numel / w.V), THREADS, param);
}
