/* test_pointwise.c - the pointwise slot (a fused elementwise program,
 * nb_pw_program; backend/cpu/pointwise.c, backend/cuda/pointwise.cu and
 * jit.cu): on every device, each program's outputs have the bits of its
 * nodes run one slot call at a time (the reference below calls the copy,
 * fill, unary, unary_backward, binary and where slots on whole tensors);
 * programs over every float dtype, every unary op forward and backward,
 * every float binary op, casts among the float dtypes and bool, where,
 * dropout's mask (the random, unary and binary slots' bits),
 * broadcast, transposed and in-place views, 0-d and empty tensors, rows
 * longer than the CPU's chunk; the contract's errors; and on CUDA the
 * kernel caches: one NVRTC compile per program per process, the cubin
 * loaded from NB_KERNEL_CACHE by a second process, a corrupt cache file
 * recompiled and replaced, and NB_COMPILE_DUMP's sources. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_impl.h"
#include "nb_test.h"
#include "suites.h"

/* A call that must fail with status st and leave a message. */
#define CK_STATUS(expr, st)                                                              \
    do {                                                                                 \
        nb_clear_error();                                                                \
        ck_assert_int_eq((expr), (st));                                                  \
        ck_assert_msg(nb_last_error()[0] != 0, "no message for %s", #expr);              \
    } while (0)

/* ---- programs and the slot-by-slot reference ---------------------------------------- */

typedef struct prog {
    nb_pw_node nodes[64];
    int n_nodes, outputs[4], n_out, n_in;
} prog;

static int node(prog *p, nb_pw_kind kind, int op, nb_dtype dt, int a, int b, int c, double value) {
    p->nodes[p->n_nodes] = (nb_pw_node){kind, op, dt, a, b, c, value};
    return p->n_nodes++;
}
static int input(prog *p, int k, nb_dtype dt) {
    if (k >= p->n_in) p->n_in = k + 1;
    return node(p, NB_PW_INPUT, 0, dt, k, -1, -1, 0);
}
static int unary(prog *p, nb_unary_op op, int a, double alpha) {
    return node(p, NB_PW_UNARY, op, p->nodes[a].dtype, a, -1, -1, alpha);
}
static int binary(prog *p, nb_binary_op op, int a, int b) {
    bool cmp = op >= NB_BINARY_EQ && op <= NB_BINARY_LE;
    return node(p, NB_PW_BINARY, op, cmp ? NB_BOOL : p->nodes[a].dtype, a, b, -1, 0);
}
static void output(prog *p, int v) { p->outputs[p->n_out++] = v; }
static nb_pw_program program_of(const prog *p) {
    return (nb_pw_program){p->n_nodes, p->nodes, p->n_out, p->outputs, p->n_in, 0, NULL};
}

static nb_backend *backend_of(nb_device dev) {
    nb_backend *be = nb_backend_get(dev);
    NB_CK_NOTNULL(be);
    return be;
}

/* Runs p node by node through the slots into fresh dense tensors, then
 * copies each output node into views[k] (outputs first, then inputs). */
static void reference(nb_device dev, const prog *p, const nb_kview *views) {
    nb_backend *be = backend_of(dev);
    nb_tensor *val[64] = {0};
    nb_kview kv[64];
    const nb_kview *shape = &views[0];
    for (int i = 0; i < p->n_nodes; i++) {
        const nb_pw_node *nd = &p->nodes[i];
        if (nd->kind == NB_PW_INPUT) {
            kv[i] = views[p->n_out + nd->a];
            continue;
        }
        val[i] = nb_empty_on(shape->ndim, shape->shape, nd->dtype, dev);
        NB_CK_NOTNULL(val[i]);
        kv[i] = nb_kview_of(val[i]);
        switch (nd->kind) {
        case NB_PW_CONST: NB_CK_OK(nb_kernel_fill(be, &kv[i], nd->value)); break;
        case NB_PW_CAST: NB_CK_OK(nb_kernel_copy(be, &kv[i], &kv[nd->a])); break;
        case NB_PW_UNARY: NB_CK_OK(nb_kernel_unary(be, nd->op, &kv[i], &kv[nd->a], nd->value)); break;
        case NB_PW_UNARY_BACKWARD: {
            const nb_kview *v = nd->b >= 0 ? &kv[nd->b] : &kv[nd->a];
            NB_CK_OK(nb_kernel_unary_backward(be, nd->op, &kv[i], &kv[nd->a], v, v, nd->value));
            break;
        }
        case NB_PW_BINARY: NB_CK_OK(nb_kernel_binary(be, nd->op, &kv[i], &kv[nd->a], &kv[nd->b])); break;
        case NB_PW_WHERE: NB_CK_OK(nb_kernel_where(be, &kv[i], &kv[nd->a], &kv[nd->b], &kv[nd->c])); break;
        default: ck_abort_msg("bad kind");
        }
    }
    for (int k = 0; k < p->n_out; k++) NB_CK_OK(nb_kernel_copy(be, &views[k], &kv[p->outputs[k]]));
}

static void ck_same_bits(const char *what, const nb_tensor *a, const nb_tensor *b) {
    int64_t n = nb_numel(a);
    size_t es = nb_dtype_size(nb_dtype_of(a)), bytes = (size_t)n * es;
    char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
    NB_CK_OK(nb_to_host(a, x, bytes));
    NB_CK_OK(nb_to_host(b, y, bytes));
    for (int64_t i = 0; i < n; i++)
        if (memcmp(x + (size_t)i * es, y + (size_t)i * es, es)) {
            double *u = nb_test_values_of(a), *v = nb_test_values_of(b);
            ck_abort_msg("%s: element %lld of %lld differs: fused %.17g, slot by slot %.17g", what, (long long)i,
                         (long long)n, u[i], v[i]);
        }
    free(x), free(y);
}

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static double unit(void) {
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) * 0x1p-53;
}

/* A tensor of shape on dev with values in [lo, hi) (bool: about half true). */
static nb_tensor *filled(nb_device dev, int ndim, const int64_t *shape, nb_dtype dt, double lo, double hi) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = dt == NB_BOOL ? unit() < 0.5 : lo + (hi - lo) * unit();
    nb_tensor *t = nb_to_device(nb_to_dtype(nb_from_data_on(v, ndim, shape, NB_F64, NB_CPU), dt), dev);
    free(v);
    NB_CK_NOTNULL(t);
    return t;
}

/* Runs p slot by slot into copies of outs, then fused into outs (an
 * output may be an input's own view: the reference reads it first), then
 * compares the bits.
 * ins are the inputs' views (any geometry); outs are tensors whose views
 * are the outputs. */
static void check_program(const char *what, nb_device dev, const prog *p, nb_tensor *const *outs,
                          const nb_kview *ins) {
    nb_backend *be = backend_of(dev);
    nb_kview v[NB_PW_MAX_VIEWS], r[NB_PW_MAX_VIEWS];
    nb_tensor *ref[4];
    for (int k = 0; k < p->n_out; k++) {
        ref[k] = nb_clone(outs[k]);
        NB_CK_NOTNULL(ref[k]);
        v[k] = nb_kview_of(outs[k]), r[k] = nb_kview_of(ref[k]);
    }
    for (int k = 0; k < p->n_in; k++) v[p->n_out + k] = r[p->n_out + k] = ins[k];
    nb_pw_program pp = program_of(p);
    reference(dev, p, r); /* first: an output may be an input's own view */
    NB_CK_OK(nb_kernel_pointwise(be, p->n_out + p->n_in, v, &pp));
    NB_CK_OK(nb_device_synchronize(dev));
    char buf[160];
    for (int k = 0; k < p->n_out; k++) {
        snprintf(buf, sizeof buf, "%s on %s, output %d", what, dev.type == NB_DEVICE_CPU ? "cpu" : "cuda", k);
        ck_same_bits(buf, outs[k], ref[k]);
    }
}

/* Every device: the CPU and each accelerator. */
static int devices(nb_device *devs) {
    devs[0] = NB_CPU;
    return 1 + nb_test_accelerators(devs + 1, 7);
}

static const nb_dtype floats[] = {NB_F32, NB_F64, NB_BF16, NB_F16};

/* ---- values ------------------------------------------------------------------------------ */

/* A training step's fused groups: bias + GELU + dropout's mask and scale
 * (two outputs: the pre-activation kept for the backward), and the
 * backward's GELU rule times the mask, cast to float32 for a master
 * gradient; [R, C] with the bias broadcast along rows. */
START_TEST(test_pointwise_step_groups) {
    nb_device devs[8];
    int nd = devices(devs);
    const int64_t shapes[][2] = {{3, 5}, {37, 129}, {2, 9000}, {1, 1}};
    for (int di = 0; di < nd; di++)
        for (int f = 0; f < 4; f++)
            for (int s = 0; s < 4; s++) {
                nb_scope *sc = nb_scope_begin();
                nb_device dev = devs[di];
                nb_dtype dt = floats[f];
                const int64_t *sh = shapes[s];
                nb_tensor *x = filled(dev, 2, sh, dt, -3, 3), *bias = filled(dev, 1, sh + 1, dt, -1, 1);
                nb_tensor *mask = filled(dev, 2, sh, NB_BOOL, 0, 1), *g = filled(dev, 2, sh, dt, -2, 2);
                nb_kview in[3] = {nb_kview_of(x), nb_kview_of(bias), nb_kview_of(mask)};
                in[1].ndim = 2, in[1].shape[0] = sh[0], in[1].shape[1] = sh[1], in[1].strides[0] = 0, in[1].strides[1] = 1;
                prog p = {0};
                int xi = input(&p, 0, dt), bi = input(&p, 1, dt), mi = input(&p, 2, NB_BOOL);
                int h = binary(&p, NB_BINARY_ADD, xi, bi);
                int a = unary(&p, NB_UNARY_GELU_TANH, h, 0);
                int sc_ = unary(&p, NB_UNARY_MUL_SCALAR, a, 1 / 0.9);
                int z = node(&p, NB_PW_CONST, 0, dt, -1, -1, -1, 0);
                int y = node(&p, NB_PW_WHERE, 0, dt, mi, sc_, z, 0);
                output(&p, y), output(&p, h);
                nb_tensor *outs[2] = {nb_empty_on(2, sh, dt, dev), nb_empty_on(2, sh, dt, dev)};
                check_program("bias+gelu+dropout", dev, &p, outs, in);

                prog q = {0};
                int gi = input(&q, 0, dt), hi = input(&q, 1, dt), mq = input(&q, 2, NB_BOOL);
                int gm = node(&q, NB_PW_WHERE, 0, dt, mq, gi, node(&q, NB_PW_CONST, 0, dt, -1, -1, -1, 0), 0);
                int gs = unary(&q, NB_UNARY_MUL_SCALAR, gm, 1 / 0.9);
                int gx = node(&q, NB_PW_UNARY_BACKWARD, NB_UNARY_GELU_TANH, dt, gs, hi, -1, 0);
                output(&q, node(&q, NB_PW_CAST, 0, NB_F32, gx, -1, -1, 0));
                nb_kview qin[3] = {nb_kview_of(g), nb_kview_of(outs[1]), nb_kview_of(mask)};
                nb_tensor *qout[1] = {nb_empty_on(2, sh, NB_F32, dev)};
                check_program("gelu backward+dropout, cast", dev, &q, qout, qin);
                nb_scope_end(sc);
            }
}
END_TEST

/* Every unary op forward (with an alpha where it takes one) followed by a
 * scalar add, and its backward rule, in every float dtype, over values
 * that cross each op's kinks and domains. */
START_TEST(test_pointwise_unary_ops) {
    nb_device devs[8];
    int nd = devices(devs);
    for (int di = 0; di < nd; di++)
        for (int f = 0; f < 4; f++) {
            nb_scope *sc = nb_scope_begin();
            nb_device dev = devs[di];
            nb_dtype dt = floats[f];
            /* rows of 32: CUDA's vector walk (float32, bfloat16); of 33: one element per thread */
            const int64_t sh[2] = {7, f % 2 ? 33 : 32};
            nb_tensor *x = filled(dev, 2, sh, dt, -4, 4), *g = filled(dev, 2, sh, dt, -1, 1);
            for (int op = 0; op < NB_UNARY_OP_COUNT; op++) {
                double alpha = op == NB_UNARY_ROUND ? 1 : op == NB_UNARY_POW_SCALAR ? 2.5 : op == NB_UNARY_SOFTPLUS ? 1.5
                               : op == NB_UNARY_HARDTANH_MIN ? -0.5 : op == NB_UNARY_HARDTANH_MAX ? 0.5 : 0.3;
                prog p = {0};
                int xi = input(&p, 0, dt);
                int y = unary(&p, (nb_unary_op)op, xi, alpha);
                output(&p, unary(&p, NB_UNARY_ADD_SCALAR, y, 0.125));
                nb_kview in[2] = {nb_kview_of(x), nb_kview_of(g)};
                nb_tensor *out[1] = {nb_empty_on(2, sh, dt, dev)};
                char what[64];
                snprintf(what, sizeof what, "%s %s", nb_unary_name((nb_unary_op)op), nb_dtype_name(dt));
                check_program(what, dev, &p, out, in);

                prog q = {0};
                int qx = input(&q, 0, dt), qg = input(&q, 1, dt);
                nb_unary_saved sv = nb_unary_saved_of((nb_unary_op)op);
                int saved = sv == NB_UNARY_SAVED_NONE ? -1 : sv == NB_UNARY_SAVED_OUT ? unary(&q, (nb_unary_op)op, qx, alpha) : qx;
                output(&q, node(&q, NB_PW_UNARY_BACKWARD, op, dt, qg, saved, -1, alpha));
                snprintf(what, sizeof what, "%s backward %s", nb_unary_name((nb_unary_op)op), nb_dtype_name(dt));
                check_program(what, dev, &q, out, in);
            }
            nb_scope_end(sc);
        }
}
END_TEST

/* Every float binary op (comparisons feeding where), the bool logic ops,
 * and casts between every pair of float dtypes and bool. */
START_TEST(test_pointwise_binary_and_casts) {
    nb_device devs[8];
    int nd = devices(devs);
    const int64_t sh[1] = {301};
    for (int di = 0; di < nd; di++)
        for (int f = 0; f < 4; f++) {
            nb_scope *sc = nb_scope_begin();
            nb_device dev = devs[di];
            nb_dtype dt = floats[f];
            nb_tensor *a = filled(dev, 1, sh, dt, -3, 3), *b = filled(dev, 1, sh, dt, 0.25, 2);
            nb_kview in[2] = {nb_kview_of(a), nb_kview_of(b)};
            nb_tensor *out[1] = {nb_empty_on(1, sh, dt, dev)};
            for (int op = 0; op < NB_BINARY_BITWISE_AND; op++) {
                prog p = {0};
                int ai = input(&p, 0, dt), bi = input(&p, 1, dt);
                int r = binary(&p, (nb_binary_op)op, ai, bi);
                if (p.nodes[r].dtype == NB_BOOL) r = node(&p, NB_PW_WHERE, 0, dt, r, ai, bi, 0);
                output(&p, binary(&p, NB_BINARY_MUL, r, ai));
                char what[64];
                snprintf(what, sizeof what, "%s %s", nb_binary_name((nb_binary_op)op), nb_dtype_name(dt));
                check_program(what, dev, &p, out, in);
            }
            const nb_dtype all[] = {NB_F32, NB_F64, NB_BF16, NB_F16, NB_BOOL};
            for (int t = 0; t < 5; t++)
                for (int u = 0; u < 5; u++) { /* dt -> all[t] -> all[u] -> dt */
                    prog p = {0};
                    int c1 = node(&p, NB_PW_CAST, 0, all[t], input(&p, 0, dt), -1, -1, 0);
                    int c2 = node(&p, NB_PW_CAST, 0, all[u], c1, -1, -1, 0);
                    output(&p, node(&p, NB_PW_CAST, 0, dt, c2, -1, -1, 0));
                    char what[64];
                    snprintf(what, sizeof what, "cast %s %s %s", nb_dtype_name(dt), nb_dtype_name(all[t]),
                             nb_dtype_name(all[u]));
                    check_program(what, dev, &p, out, in);
                }
            prog p = {0}; /* bool logic */
            int lt = binary(&p, NB_BINARY_LT, input(&p, 0, dt), input(&p, 1, dt));
            int gt = binary(&p, NB_BINARY_GT, 0, node(&p, NB_PW_CONST, 0, dt, -1, -1, -1, 0.5));
            int x = binary(&p, NB_BINARY_BITWISE_XOR, lt, gt), o = binary(&p, NB_BINARY_ADD, x, lt);
            output(&p, node(&p, NB_PW_CAST, 0, dt, binary(&p, NB_BINARY_MUL, o, gt), -1, -1, 0));
            check_program("bool logic", dev, &p, out, in);
            nb_scope_end(sc);
        }
}
END_TEST

/* Geometry: a transposed input and output, an output that is an input's
 * own view (in place, as grad += g), 0-d, empty, and 4-d views that merge. */
START_TEST(test_pointwise_views) {
    nb_device devs[8];
    int nd = devices(devs);
    for (int di = 0; di < nd; di++)
        for (int f = 0; f < 4; f++) {
            nb_scope *sc = nb_scope_begin();
            nb_device dev = devs[di];
            nb_dtype dt = floats[f];
            prog p = {0};
            int ai = input(&p, 0, dt), bi = input(&p, 1, dt);
            output(&p, binary(&p, NB_BINARY_ADD, unary(&p, NB_UNARY_TANH, ai, 0), binary(&p, NB_BINARY_MUL, bi, bi)));
            const int64_t sh[2] = {19, 23}, sht[2] = {23, 19};
            nb_tensor *a = filled(dev, 2, sh, dt, -2, 2), *b = filled(dev, 2, sht, dt, -2, 2);
            nb_kview in[2] = {nb_kview_of(a), nb_kview_of(b)};
            in[1].shape[0] = 19, in[1].shape[1] = 23, in[1].strides[0] = 1, in[1].strides[1] = 19; /* b^T */
            nb_tensor *ot = nb_empty_on(2, sht, dt, dev);
            nb_tensor *o = nb_transpose(ot, 0, 1);
            check_program("transposed", dev, &p, &o, in);
            nb_tensor *acc = nb_clone(a); /* in place: out = tanh(acc) + b^T b^T */
            nb_kview ip[2] = {nb_kview_of(acc), in[1]};
            check_program("in place", dev, &p, &acc, ip);
            const int64_t s4[4] = {2, 3, 4, 5};
            nb_tensor *a4 = filled(dev, 4, s4, dt, -1, 1), *b4 = filled(dev, 4, s4, dt, -1, 1);
            nb_kview in4[2] = {nb_kview_of(a4), nb_kview_of(b4)};
            nb_tensor *o4 = nb_empty_on(4, s4, dt, dev);
            check_program("4-d", dev, &p, &o4, in4);
            nb_tensor *a0 = filled(dev, 0, NULL, dt, -1, 1), *b0 = filled(dev, 0, NULL, dt, -1, 1);
            nb_kview in0[2] = {nb_kview_of(a0), nb_kview_of(b0)};
            nb_tensor *o0 = nb_empty_on(0, NULL, dt, dev);
            check_program("0-d", dev, &p, &o0, in0);
            const int64_t se[2] = {0, 4};
            nb_tensor *ae = nb_empty_on(2, se, dt, dev), *oe = nb_empty_on(2, se, dt, dev);
            nb_kview ine[2] = {nb_kview_of(ae), nb_kview_of(ae)};
            nb_pw_program pp = program_of(&p);
            nb_kview ve[3] = {nb_kview_of(oe), ine[0], ine[1]};
            NB_CK_OK(nb_kernel_pointwise(backend_of(dev), 3, ve, &pp));
            nb_scope_end(sc);
        }
}
END_TEST

/* A DROPOUT node (the dropout slot's mask, as a graph captured with fusion
 * records it): on every device and float dtype, the mask and x * mask + y
 * of one program have the bits of random's bernoulli, unary mul_scalar
 * and binary mul run slot by slot (and, where the backend has it, of the
 * dropout slot), over rows whose CPU chunks start at odd elements (61 per
 * row, 67 rows a chunk) and rows of 64 (CUDA's vector walk, a Philox
 * block per element pair), with an odd first counter block; p = 0 keeps
 * every element; the contract's errors. */
START_TEST(test_pointwise_dropout) {
    nb_device devs[8];
    int nd = devices(devs);
    for (int di = 0; di < nd; di++)
        for (int f = 0; f < 4; f++)
            for (int z = 0; z < 3; z++) {
                nb_scope *sc = nb_scope_begin();
                nb_device dev = devs[di];
                nb_backend *be = backend_of(dev);
                const nb_dtype dt = floats[f];
                const double pd = z == 1 ? 0.0 : 0.3;
                const int64_t sh[2] = {z == 2 ? 37 : 150, z == 2 ? 64 : 61}; /* 64: CUDA's 16-byte vectors */
                const nb_philox_state rng = {0x9e3779b97f4a7c15ull, 5, NULL};
                nb_tensor *x = filled(dev, 2, sh, dt, -2, 2), *y = filled(dev, 2, sh, dt, -2, 2);
                nb_tensor *mask = nb_empty_on(2, sh, dt, dev), *out = nb_empty_on(2, sh, dt, dev);
                prog p = {0};
                int xi = input(&p, 0, dt), yi = input(&p, 1, dt);
                int m = node(&p, NB_PW_DROPOUT, 0, dt, 0, -1, -1, pd);
                output(&p, m);
                output(&p, binary(&p, NB_BINARY_ADD, binary(&p, NB_BINARY_MUL, xi, m), yi));
                nb_pw_program pp = program_of(&p);
                pp.n_rng = 1, pp.rng = &rng;
                nb_kview v[4] = {nb_kview_of(mask), nb_kview_of(out), nb_kview_of(x), nb_kview_of(y)};
                NB_CK_OK(nb_kernel_pointwise(be, 4, v, &pp));
                /* slot by slot: the bernoulli draw, the scale, the multiply, the add */
                nb_tensor *rm = nb_empty_on(2, sh, dt, dev), *rx = nb_empty_on(2, sh, dt, dev);
                nb_tensor *ro = nb_empty_on(2, sh, dt, dev);
                nb_kview vm = nb_kview_of(rm), vx = nb_kview_of(rx), vo = nb_kview_of(ro);
                NB_CK_OK(nb_kernel_random(be, &vm, NB_RNG_BERNOULLI, 1 - pd, 0, rng));
                NB_CK_OK(nb_kernel_unary(be, NB_UNARY_MUL_SCALAR, &vm, &vm, 1 / (1 - pd)));
                NB_CK_OK(nb_kernel_binary(be, NB_BINARY_MUL, &vx, &v[2], &vm));
                NB_CK_OK(nb_kernel_binary(be, NB_BINARY_ADD, &vo, &vx, &v[3]));
                char what[96];
                snprintf(what, sizeof what, "dropout p %g %s on %s", pd, nb_dtype_name(dt),
                         dev.type == NB_DEVICE_CPU ? "cpu" : "cuda");
                ck_same_bits(what, mask, rm);
                ck_same_bits(what, out, ro);
                if (nb_kernel_has(be, dropout)) { /* and the dropout slot's own mask */
                    NB_CK_OK(nb_kernel_dropout(be, &vx, &vm, &v[2], pd, rng));
                    ck_same_bits(what, mask, rm);
                }
                if (!z && !f) { /* the contract */
                    nb_pw_program none = program_of(&p);
                    CK_STATUS(nb_kernel_pointwise(be, 4, v, &none), NB_ERR_INVALID_ARG); /* no stream */
                    p.nodes[m].value = 1;
                    pp = program_of(&p);
                    pp.n_rng = 1, pp.rng = &rng;
                    CK_STATUS(nb_kernel_pointwise(be, 4, v, &pp), NB_ERR_INVALID_ARG); /* p = 1 */
                    pp.n_rng = NB_PW_MAX_RNG + 1;
                    CK_STATUS(nb_kernel_pointwise(be, 4, v, &pp), NB_ERR_INVALID_ARG);
                }
                nb_scope_end(sc);
            }
}
END_TEST

/* Outputs that are column blocks of one matrix (a chunk's gradient
 * copied into its part of the whole) do not overlap although their byte
 * ranges interleave (nb_view_ranges_meet's periodic test): a program
 * writing exp(x) to columns [0, 3) and -x to columns [3, 6) of a [4, 6]
 * matrix runs, on every device, and blocks sharing a column are refused. */
START_TEST(test_pointwise_column_blocks) {
    nb_device devs[8];
    int nd = devices(devs);
    for (int di = 0; di < nd; di++) {
        nb_scope *sc = nb_scope_begin();
        nb_device dev = devs[di];
        const int64_t sh[2] = {4, 3}, wide[2] = {4, 6};
        nb_tensor *x = filled(dev, 2, sh, NB_F32, -1, 1), *m = nb_full_on(2, wide, 0, NB_F32, dev);
        prog p = {0};
        int xi = input(&p, 0, NB_F32);
        output(&p, unary(&p, NB_UNARY_EXP, xi, 0));
        output(&p, unary(&p, NB_UNARY_NEG, xi, 0));
        nb_pw_program pp = program_of(&p);
        nb_kview v[3] = {nb_kview_of(m), nb_kview_of(m), nb_kview_of(x)};
        for (int k = 0; k < 2; k++) v[k].shape[1] = 3, v[k].data = (float *)v[k].data + 3 * k;
        NB_CK_OK(nb_kernel_pointwise(backend_of(dev), 3, v, &pp));
        nb_tensor *want = nb_cat((nb_tensor *[]){nb_exp(x), nb_neg(x)}, 2, 1);
        bool same = false;
        NB_CK_OK(nb_allclose(m, want, 0, 0, false, &same));
        ck_assert_msg(same, "column blocks written by one program differ from exp and neg");
        v[1].data = (float *)v[0].data + 2; /* columns [2, 5): shares column 2 with the first */
        CK_STATUS(nb_kernel_pointwise(backend_of(dev), 3, v, &pp), NB_ERR_INVALID_ARG);
        nb_scope_end(sc);
    }
}
END_TEST

/* The contract: a malformed program or views fail with a message before
 * any backend runs. */
START_TEST(test_pointwise_errors) {
    nb_scope *sc = nb_scope_begin();
    nb_backend *be = backend_of(NB_CPU);
    const int64_t sh[1] = {8};
    nb_tensor *a = filled(NB_CPU, 1, sh, NB_F32, -1, 1), *o = nb_empty_on(1, sh, NB_F32, NB_CPU);
    nb_tensor *i32 = nb_zeros(1, sh, NB_I32), *o2 = nb_empty_on(1, sh, NB_F32, NB_CPU);
    nb_kview v[3] = {nb_kview_of(o), nb_kview_of(a), nb_kview_of(a)};
    prog p = {0};
    output(&p, unary(&p, NB_UNARY_EXP, input(&p, 0, NB_F32), 0));
    nb_pw_program pp = program_of(&p);
    CK_STATUS(nb_kernel_pointwise(be, 2, v, NULL), NB_ERR_INVALID_ARG);
    CK_STATUS(nb_kernel_pointwise(be, 3, v, &pp), NB_ERR_INVALID_ARG); /* 3 views for 1 + 1 */
    prog q = p;
    q.nodes[1].a = 1; /* its own operand */
    pp = program_of(&q);
    CK_STATUS(nb_kernel_pointwise(be, 2, v, &pp), NB_ERR_INVALID_ARG);
    q = p, q.nodes[0].a = 1; /* no such input */
    pp = program_of(&q);
    CK_STATUS(nb_kernel_pointwise(be, 2, v, &pp), NB_ERR_INVALID_ARG);
    q = p, q.outputs[0] = 5;
    pp = program_of(&q);
    CK_STATUS(nb_kernel_pointwise(be, 2, v, &pp), NB_ERR_INVALID_ARG);
    q = p, q.nodes[1].op = NB_UNARY_OP_COUNT;
    pp = program_of(&q);
    CK_STATUS(nb_kernel_pointwise(be, 2, v, &pp), NB_ERR_INVALID_ARG);
    q = p, q.nodes[1].kind = NB_PW_BINARY, q.nodes[1].op = NB_BINARY_LSHIFT, q.nodes[1].b = 0;
    pp = program_of(&q);
    CK_STATUS(nb_kernel_pointwise(be, 2, v, &pp), NB_ERR_DTYPE); /* shifts are for integers */
    nb_kview vi[2] = {nb_kview_of(o), nb_kview_of(i32)};
    q = p, q.nodes[0].dtype = NB_I32;
    pp = program_of(&q);
    CK_STATUS(nb_kernel_pointwise(be, 2, vi, &pp), NB_ERR_DTYPE); /* integers are not fused */
    pp = program_of(&p);
    CK_STATUS(nb_kernel_pointwise(be, 2, vi, &pp), NB_ERR_INVALID_ARG); /* the input view is int32 */
    nb_kview shifted[2] = {nb_kview_of(o), nb_kview_of(a)};
    shifted[0].data = (float *)shifted[1].data + 1; /* overlaps its input, not as the same view */
    CK_STATUS(nb_kernel_pointwise(be, 2, shifted, &pp), NB_ERR_INVALID_ARG);
    nb_kview bc[2] = {nb_kview_of(o), nb_kview_of(a)};
    bc[0].strides[0] = 0;
    CK_STATUS(nb_kernel_pointwise(be, 2, bc, &pp), NB_ERR_INVALID_ARG); /* a broadcast output */
    const int64_t sh9[1] = {9};
    nb_tensor *a9 = nb_zeros(1, sh9, NB_F32);
    nb_kview sv[2] = {nb_kview_of(o2), nb_kview_of(a9)};
    CK_STATUS(nb_kernel_pointwise(be, 2, sv, &pp), NB_ERR_SHAPE);
    nb_scope_end(sc);
}
END_TEST

/* A program first compiled while a CUDA graph is captured (loading the
 * module must not break the capture), then replayed on new input values. */
START_TEST(test_pointwise_graph_capture) {
    nb_device devs[8];
    int na = nb_test_accelerators(devs, 8);
    for (int di = 0; di < na; di++) {
        nb_scope *sc = nb_scope_begin();
        nb_device dev = devs[di];
        const int64_t sh[2] = {33, 65};
        nb_tensor *x = filled(dev, 2, sh, NB_BF16, -2, 2), *o = nb_empty_on(2, sh, NB_F32, dev);
        nb_tensor *r = nb_empty_on(2, sh, NB_F32, dev), *x2 = filled(dev, 2, sh, NB_BF16, -2, 2);
        prog p = {0};
        int xi = input(&p, 0, NB_BF16);
        int e = unary(&p, NB_UNARY_SIGMOID, binary(&p, NB_BINARY_MUL, xi, xi), 0);
        output(&p, node(&p, NB_PW_CAST, 0, NB_F32, unary(&p, NB_UNARY_ADD_SCALAR, e, 0.375), -1, -1, 0));
        nb_pw_program pp = program_of(&p);
        nb_kview v[2] = {nb_kview_of(o), nb_kview_of(x)}, rv[2] = {nb_kview_of(r), nb_kview_of(x)};
        NB_CK_OK(nb_device_synchronize(dev));
        NB_CK_OK(nb_graph_capture_begin(dev));
        nb_status st = nb_kernel_pointwise(backend_of(dev), 2, v, &pp);
        nb_graph *g = nb_graph_capture_end(dev);
        NB_CK_OK(st);
        NB_CK_NOTNULL(g);
        NB_CK_OK(nb_copy_(x, x2));
        NB_CK_OK(nb_graph_replay(g));
        reference(dev, &p, rv);
        NB_CK_OK(nb_device_synchronize(dev));
        ck_same_bits("captured program", o, r);
        nb_graph_free(g);
        nb_scope_end(sc);
    }
}
END_TEST

/* Capture with fusion (nb_graph_options.fuse): values whose tensors are
 * freed before the next other op, but that a later recorded call reads
 * from memory (a permuted copy, a cast to int32, another shape), are still
 * stored; the replay equals the eager run bit for bit. */
static void dead_reads_body(nb_tensor *x, nb_tensor *c_out, nb_tensor *z_out, nb_tensor *s_out) {
    nb_scope *inner = nb_scope_begin();
    nb_tensor *t = nb_mul_scalar(x, 0.5);
    nb_tensor *c = nb_contiguous(nb_transpose(t, 0, 1));
    nb_tensor *z = nb_to_dtype(nb_mul_scalar(nb_exp(x), 3), NB_I32);
    NB_CK_NOTNULL(c);
    NB_CK_NOTNULL(z);
    nb_retain(c), nb_retain(z);
    NB_CK_OK(nb_scope_end(inner)); /* t and exp(x) are freed while their calls are still recorded */
    nb_scope *s2 = nb_scope_begin();
    nb_tensor *sum = nb_sum(c, NULL, 0, false); /* not elementwise: runs what was recorded */
    NB_CK_NOTNULL(sum);
    NB_CK_OK(nb_copy_(c_out, c));
    NB_CK_OK(nb_copy_(z_out, z));
    NB_CK_OK(nb_copy_(s_out, sum));
    NB_CK_OK(nb_scope_end(s2));
    nb_release(c), nb_release(z);
}

START_TEST(test_pointwise_fused_capture_dead_reads) {
    nb_device devs[8];
    int na = nb_test_accelerators(devs, 8);
    for (int di = 0; di < na; di++) {
        nb_scope *sc = nb_scope_begin();
        nb_device dev = devs[di];
        const int64_t sh[3] = {4, 6, 8}, sht[3] = {6, 4, 8};
        nb_tensor *x = filled(dev, 3, sh, NB_F32, -2, 2);
        nb_tensor *c[2] = {nb_empty_on(3, sht, NB_F32, dev), nb_empty_on(3, sht, NB_F32, dev)};
        nb_tensor *z[2] = {nb_empty_on(3, sh, NB_I32, dev), nb_empty_on(3, sh, NB_I32, dev)};
        nb_tensor *sm[2] = {nb_empty_on(0, NULL, NB_F32, dev), nb_empty_on(0, NULL, NB_F32, dev)};
        dead_reads_body(x, c[0], z[0], sm[0]); /* eager */
        dead_reads_body(x, c[1], z[1], sm[1]); /* warm-up */
        NB_CK_OK(nb_device_synchronize(dev));
        NB_CK_OK(nb_graph_capture_begin_with(dev, &(nb_graph_options){.fuse = true}));
        dead_reads_body(x, c[1], z[1], sm[1]);
        nb_graph *g = nb_graph_capture_end(dev);
        NB_CK_NOTNULL(g);
        NB_CK_OK(nb_fill_(c[1], 0));
        NB_CK_OK(nb_fill_(z[1], 0));
        NB_CK_OK(nb_graph_replay(g));
        NB_CK_OK(nb_device_synchronize(dev));
        ck_same_bits("permuted copy of a freed value", c[1], c[0]);
        ck_same_bits("int32 cast of a freed value", z[1], z[0]);
        ck_same_bits("sum", sm[1], sm[0]);
        nb_graph_free(g);
        nb_scope_end(sc);
    }
}
END_TEST

/* ---- CUDA's kernel caches -------------------------------------------------------------- */

/* A program whose source no other test generates (alpha in the source). */
static void cache_program(prog *p, double alpha) {
    *p = (prog){0};
    output(p, unary(p, NB_UNARY_MUL_SCALAR, unary(p, NB_UNARY_SILU, input(p, 0, NB_F32), 0), alpha));
}

/* In a child process (a fresh CUDA context): runs cache_program(alpha)
 * twice and checks its result; exits with 10 * compiled + disk loads, 99 on
 * a failure, 77 without a CUDA device. */
static int child_run(double alpha) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (nb_device_count(NB_DEVICE_CUDA) < 1) _exit(77);
        nb_device dev = NB_CUDA(0);
        nb_device_counters c0 = nb_device_counters_get(dev);
        const int64_t sh[1] = {1000};
        nb_tensor *x = filled(dev, 1, sh, NB_F32, -2, 2), *o = nb_empty_on(1, sh, NB_F32, dev);
        nb_tensor *r = nb_empty_on(1, sh, NB_F32, dev);
        prog p;
        cache_program(&p, alpha);
        nb_pw_program pp = program_of(&p);
        nb_kview v[2] = {nb_kview_of(o), nb_kview_of(x)}, rv[2] = {nb_kview_of(r), nb_kview_of(x)};
        for (int rep = 0; rep < 2; rep++)
            if (nb_kernel_pointwise(nb_backend_get(dev), 2, v, &pp)) _exit(99);
        reference(dev, &p, rv);
        double *a = nb_test_values_of(o), *b = nb_test_values_of(r);
        bool same = !memcmp(a, b, sizeof(double) * 1000);
        nb_device_counters c1 = nb_device_counters_get(dev);
        _exit(!same ? 99 : (int)(10 * (c1.kernels_compiled - c0.kernels_compiled) +
                                 (c1.kernel_cache_loads - c0.kernel_cache_loads)));
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "the child process did not exit");
    return WEXITSTATUS(status);
}

/* The .cubin files in dir: their count, and the first one's path in path. */
static int cubins(const char *dir, char *path, size_t len) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 6 && !strcmp(e->d_name + l - 6, ".cubin") && n++ == 0) snprintf(path, len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    return n;
}

/* One compile per program per process; a second process loads the cubin
 * from NB_KERNEL_CACHE; a corrupt file is recompiled and replaced; "off"
 * compiles every process; NB_COMPILE_DUMP writes the source. The work runs
 * in child processes so that each has a fresh CUDA context (this process
 * must not have used CUDA: not under CK_FORK=no). */
START_TEST(test_pointwise_kernel_cache) {
    const char *fork_mode = getenv("CK_FORK");
    if (fork_mode && !strcmp(fork_mode, "no")) return;
    char dir[] = "/tmp/nb_jit_cacheXXXXXX", dump[] = "/tmp/nb_jit_dumpXXXXXX", file[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_ptr_nonnull(mkdtemp(dump));
    setenv("NB_KERNEL_CACHE", dir, 1);
    setenv("NB_COMPILE_DUMP", dump, 1);
    const double alpha = 1.0 + (double)getpid() / 1e9; /* a source no earlier run cached */
    int r = child_run(alpha);
    if (r == 77) goto done; /* no GPU: nothing to cache */
    ck_assert_msg(r == 10, "first process: %d (want 1 compile, 0 disk loads; 99 = wrong values)", r);
    ck_assert_int_eq(cubins(dir, file, sizeof file), 1);
    DIR *dd = opendir(dump);
    int dumped = 0;
    for (struct dirent *e; dd && (e = readdir(dd));) dumped += strstr(e->d_name, ".cu") != NULL;
    if (dd) closedir(dd);
    ck_assert_msg(dumped >= 1, "NB_COMPILE_DUMP wrote no source");
    r = child_run(alpha);
    ck_assert_msg(r == 1, "second process: %d (want 0 compiles, 1 disk load)", r);
    FILE *f = fopen(file, "r+b"); /* corrupt the cubin's length field */
    ck_assert_ptr_nonnull(f);
    fseek(f, 24, SEEK_SET);
    fputc(0x7f, f), fputc(0x7f, f);
    fclose(f);
    r = child_run(alpha);
    ck_assert_msg(r == 10, "corrupt file: %d (want a compile)", r);
    r = child_run(alpha);
    ck_assert_msg(r == 1, "rewritten file: %d (want a disk load)", r);
    setenv("NB_KERNEL_CACHE", "off", 1);
    r = child_run(alpha);
    ck_assert_msg(r == 10, "cache off: %d (want a compile)", r);
done:
    unsetenv("NB_KERNEL_CACHE");
    unsetenv("NB_COMPILE_DUMP");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, dump);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* In one process: the second run of a program compiles nothing. */
START_TEST(test_pointwise_compiles_once) {
    nb_device devs[8];
    int na = nb_test_accelerators(devs, 8);
    for (int di = 0; di < na; di++) {
        nb_scope *sc = nb_scope_begin();
        nb_device dev = devs[di];
        const int64_t sh[1] = {77};
        nb_tensor *x = filled(dev, 1, sh, NB_BF16, -2, 2), *o = nb_empty_on(1, sh, NB_BF16, dev);
        const int64_t sh2[2] = {5, 300}; /* another size, the same source */
        nb_tensor *x2 = filled(dev, 2, sh2, NB_BF16, -2, 2), *o2 = nb_empty_on(2, sh2, NB_BF16, dev);
        prog p = {0};
        output(&p, unary(&p, NB_UNARY_RELU, unary(&p, NB_UNARY_NEG, input(&p, 0, NB_BF16), 0), 0));
        nb_pw_program pp = program_of(&p);
        nb_kview v[2] = {nb_kview_of(o), nb_kview_of(x)}, v2[2] = {nb_kview_of(o2), nb_kview_of(x2)};
        NB_CK_OK(nb_kernel_pointwise(backend_of(dev), 2, v, &pp));
        NB_CK_OK(nb_device_synchronize(dev));
        nb_device_counters c0 = nb_device_counters_get(dev);
        for (int rep = 0; rep < 3; rep++) NB_CK_OK(nb_kernel_pointwise(backend_of(dev), 2, v, &pp));
        NB_CK_OK(nb_kernel_pointwise(backend_of(dev), 2, v2, &pp));
        nb_device_counters c1 = nb_device_counters_get(dev);
        ck_assert_int_eq(c1.kernels_compiled, c0.kernels_compiled);
        ck_assert_int_eq(c1.kernel_launches - c0.kernel_launches, 4);
        nb_scope_end(sc);
    }
}
END_TEST

Suite *nb_suite_pointwise(void) {
    Suite *s = suite_create("pointwise");
    TCase *tc = tcase_create("pointwise");
    tcase_add_test(tc, test_pointwise_step_groups);
    tcase_add_test(tc, test_pointwise_unary_ops);
    tcase_add_test(tc, test_pointwise_binary_and_casts);
    tcase_add_test(tc, test_pointwise_views);
    tcase_add_test(tc, test_pointwise_dropout);
    tcase_add_test(tc, test_pointwise_column_blocks);
    tcase_add_test(tc, test_pointwise_errors);
    tcase_add_test(tc, test_pointwise_compiles_once);
    tcase_add_test(tc, test_pointwise_graph_capture);
    tcase_add_test(tc, test_pointwise_fused_capture_dead_reads);
    tcase_add_test(tc, test_pointwise_kernel_cache);
    tcase_set_timeout(tc, 600);
    suite_add_tcase(s, tc);
    return s;
}
