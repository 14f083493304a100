/* test_op_harness.c - runs every case of the op harness (op_harness.h) on
 * every registered device and every dtype that the case, the op's row and
 * the device's backend take: forward against a float64 CPU reference,
 * gradients (float64 gradcheck; other float dtypes against the CPU's
 * float64 gradients), and the same bits twice. One Check loop test per case
 * (forked, so a crash names its case), plus the coverage test: every row of
 * the op table has a case. A new backend is exercised by this file
 * unchanged: it only has to register its devices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd_impl.h"
#include "nb_test.h"
#include "op_harness.h"
#include "suites.h"

static const nb_case_table *const tables[] = {&nb_cases_elementwise, &nb_cases_reduce, &nb_cases_shape, &nb_cases_nn,
                                              &nb_cases_linalg};
#define N_TABLES ((int)(sizeof tables / sizeof tables[0]))

static int total_cases(void) {
    int n = 0;
    for (int t = 0; t < N_TABLES; t++) n += tables[t]->n;
    return n;
}

static const nb_op_case *case_at(int i) {
    for (int t = 0; t < N_TABLES; t++) {
        if (i < tables[t]->n) return &tables[t]->cases[i];
        i -= tables[t]->n;
    }
    return NULL;
}

/* ---- inputs ------------------------------------------------------------------------- */

static bool is_float(nb_dtype dt) { return nb_dtype_is_float(dt); }

/* The host values of input k of case c for a run in dtype dt (already
 * representable in the dtype the input gets). */
static double *draw(const nb_op_case *c, int k, nb_dtype dt, int64_t *n_out) {
    const nb_in_spec *s = &c->in[k];
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->shape[i];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    ck_assert_ptr_nonnull(v);
    nb_generator g = nb_generator_new(0x1000u + (uint64_t)k * 977u + (uint64_t)c->op * 131u);
    nb_scope *sc = nb_scope_begin();
    nb_tensor *u = nb_rand_on(1, &n, NB_F64, &g, NB_CPU), *z = nb_randn_on(1, &n, NB_F64, &g, NB_CPU);
    double *uu = nb_test_values_of(u), *zz = nb_test_values_of(z);
    nb_scope_end(sc);
    for (int64_t i = 0; i < n; i++) {
        double r = uu[i], x;
        if (s->kind == K_INDEX) x = (double)(s->lo + (int64_t)(r * (double)(s->hi - s->lo)));
        else if (s->kind == K_BOOL || dt == NB_BOOL) x = r < 0.5;
        else if (!is_float(dt)) { /* kinds that avoid 0 stay nonzero (divisors) */
            bool nz = s->kind == K_POS || s->kind == K_AWAY0 || s->kind == K_GT1;
            x = dt == NB_U8 ? (nz ? 1 + floor(r * 9) : floor(r * 10))
                : nz ? (zz[i] < 0 && s->kind == K_AWAY0 ? -1 : 1) * (1 + floor(r * 5)) : floor(r * 11) - 5;
        }
        else switch (s->kind) {
            case K_POS: x = 0.5 + 1.5 * r; break;
            case K_UNIT: x = -0.9 + 1.8 * r; break;
            case K_AWAY0: x = (zz[i] < 0 ? -1 : 1) * (0.5 + 1.5 * r); break;
            case K_GT1: x = 1.2 + 1.8 * r; break;
            default: x = zz[i]; break;
            }
        v[i] = x;
    }
    free(uu), free(zz);
    *n_out = n;
    return v;
}

static nb_dtype input_dtype(const nb_in_spec *s, nb_dtype dt) {
    return s->kind == K_INDEX ? NB_I64 : s->kind == K_BOOL ? NB_BOOL : dt;
}

/* The case's inputs in dtype dt on dev (scoped); those that the gradient
 * check covers require grad. Values round-trip through dt first, so a
 * float64 reference sees exactly the run's values. */
static void make_inputs(const nb_op_case *c, nb_dtype dt, nb_device dev, bool grad, nb_tensor **x) {
    for (int k = 0; k < c->n_in; k++) {
        const nb_in_spec *s = &c->in[k];
        int64_t n;
        double *v = draw(c, k, dt, &n);
        nb_dtype idt = input_dtype(s, dt);
        nb_tensor *h = nb_from_data_on(v, s->ndim, s->shape, NB_F64, NB_CPU);
        NB_CK_NOTNULL(h);
        nb_tensor *t = nb_to_device(nb_to_dtype(h, idt), dev);
        NB_CK_NOTNULL(t);
        t = nb_detach(t); /* a leaf */
        NB_CK_NOTNULL(t);
        if (grad && is_float(idt) && s->kind != K_INDEX && s->kind != K_BOOL) NB_CK_OK(nb_set_requires_grad(t, true));
        x[k] = t;
        free(v);
    }
}

static nb_tensor *run(const nb_op_case *c, nb_tensor *const *x) {
    if (c->fn) return c->fn(x, c);
    if (c->f1) return c->f1(x[0]);
    return c->f2(x[0], x[1]);
}

/* ---- comparisons -------------------------------------------------------------------- */

static bool close_to(double got, double want, double tol) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= tol * (1 + fabs(want));
}

static void ck_values(const char *what, const nb_op_case *c, const char *where, nb_tensor *got, nb_tensor *want,
                      double tol) {
    ck_assert_msg(got != NULL, "%s %s %s: %s", nb_op_name(c->op), c->label, where, nb_last_error());
    ck_assert_msg(nb_numel(got) == nb_numel(want) && nb_dim(got) == nb_dim(want), "%s %s %s: %s has %lld elements, "
                  "the reference %lld", nb_op_name(c->op), c->label, where, what, (long long)nb_numel(got),
                  (long long)nb_numel(want));
    double *a = nb_test_values_of(got), *b = nb_test_values_of(want);
    for (int64_t i = 0; i < nb_numel(got); i++)
        ck_assert_msg(close_to(a[i], b[i], tol), "%s %s %s: %s element %lld is %.10g, the float64 CPU reference %.10g",
                      nb_op_name(c->op), c->label, where, what, (long long)i, a[i], b[i]);
    free(a), free(b);
}

static void ck_same_bits(const nb_op_case *c, const char *where, const char *what, nb_tensor *a, nb_tensor *b) {
    size_t n = (size_t)nb_numel(a) * nb_dtype_size(nb_dtype_of(a));
    char *x = malloc(n + 1), *y = malloc(n + 1);
    NB_CK_OK(nb_to_host(a, x, n));
    NB_CK_OK(nb_to_host(b, y, n));
    ck_assert_msg(!memcmp(x, y, n), "%s %s %s: %s differs between two identical runs", nb_op_name(c->op), c->label,
                  where, what);
    free(x), free(y);
}

/* ---- one run ------------------------------------------------------------------------- */

static bool differentiable(const nb_op_case *c) {
    return (nb_op_get(c->op)->flags & NB_OPF_DIFF) && !(c->flags & C_NOGRAD);
}

static bool twice_differentiable(const nb_op_case *c) {
    return differentiable(c) && (nb_op_get(c->op)->flags & NB_OPF_DIFF2) && !(c->flags & (C_NOGC | C_NOGG));
}

/* Forward and, for a differentiable case, the gradient of sum(out * v)
 * (v from a fixed generator) for each input that requires grad: the
 * backward from out with the gradient v (rounded to out's dtype, as the
 * backward of sum(float64(out) * v) would hand it to out). The kernel slots
 * the op's forward and backward call are traced into used[]. */
typedef struct {
    nb_tensor *out, *grad[4];
} run_result;

static run_result forward_backward(const nb_op_case *c, nb_tensor *const *x, bool grads, bool *used) {
    run_result r = {0};
    nb_slot_trace_begin(used);
    r.out = run(c, x);
    nb_slot_trace_end();
    if (!r.out || !grads || !nb_requires_grad(r.out)) return r;
    nb_generator g = nb_generator_new(0xbeef);
    nb_tensor *v = nb_rand_on(nb_dim(r.out), nb_shape(r.out), NB_F64, &g, NB_CPU);
    nb_tensor *gout = nb_to_dtype(nb_to_device(v, nb_device_of(r.out)), nb_dtype_of(r.out));
    NB_CK_NOTNULL(gout);
    nb_slot_trace_begin(used);
    nb_status st = nb_backward_with(r.out, gout);
    nb_slot_trace_end();
    NB_CK_OK(st);
    for (int k = 0; k < c->n_in; k++)
        if (nb_requires_grad(x[k])) r.grad[k] = nb_tensor_grad(x[k]);
    return r;
}

/* Every REQ slot the case called (used[]) is in its row's slots column,
 * so a backend without one of them is never asked to run the op
 * (nb_backend_supports). */
static void ck_slots(const nb_op_case *c, const char *where, const bool *used) {
    const bool *row = nb_op_slots(c->op);
    if (getenv("NB_OP_SLOTS_PRINT")) { /* what a new row's slots column should list */
        printf("slots %s:", nb_op_name(c->op));
        for (int s = 0; s < NB_SLOT_COUNT; s++)
            if (used[s] && nb_slot_required((nb_slot_id)s)) printf(" K(%s)", nb_slot_name((nb_slot_id)s));
        printf("\n");
        fflush(stdout);
    }
    for (int s = 0; s < NB_SLOT_COUNT; s++)
        ck_assert_msg(!used[s] || row[s] || !nb_slot_required((nb_slot_id)s),
                      "%s %s %s: calls the %s slot, which its op table row does not list", nb_op_name(c->op),
                      c->label, where, nb_slot_name((nb_slot_id)s));
}

typedef struct {
    const nb_op_case *c;
} gc_ctx;

static nb_tensor *gc_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return run(((gc_ctx *)ctx)->c, in);
}

/* Whether a case's gradients are checked in dt on dev: where the device
 * computes in dt, and for float16/bfloat16 only for the ops that compute in
 * them (NB_OPF_LP; the others move 16-bit data, and their backward's
 * scatter kernels take no 16-bit sums). */
static bool grads_in(const nb_op_case *c, nb_device dev, nb_dtype dt) {
    bool h = dt == NB_F16 || dt == NB_BF16;
    return differentiable(c) && is_float(dt) && nb_backend_supports(dev, NB_OP_ADD, dt) &&
           (!h || (nb_op_get(c->op)->flags & NB_OPF_LP));
}

/* Relative tolerance of a result in dtype dt against the float64 reference
 * (0: exact, for integers and bool). */
static double tol_for(const nb_op_case *c, nb_dtype dt) {
    return dt == NB_F64 ? 1e-12 : dt == NB_F32 ? (c->tol > 0 ? c->tol : 2e-5)
         : dt == NB_F16 ? 2e-3 : dt == NB_BF16 ? 1.6e-2 : 0;
}

static void run_case(const nb_op_case *c, nb_device dev, nb_dtype dt) {
    char where[64], d[32];
    snprintf(where, sizeof where, "on %s in %s", nb_device_str(dev, d, sizeof d), nb_dtype_name(dt));
    /* gradients where the device computes in the dtype (the CPU's float16
     * and bfloat16 are storage only: data movement, no arithmetic) */
    bool grads = grads_in(c, dev, dt);
    double tol = tol_for(c, dt);
    nb_scope *s = nb_scope_begin();
    /* the reference: float64 inputs (integer and bool runs: the same dtype) on the CPU */
    nb_dtype rdt = is_float(dt) ? NB_F64 : dt;
    nb_tensor *rx[4] = {0}, *x[4] = {0}, *x2[4] = {0};
    make_inputs(c, rdt, NB_CPU, grads, rx);
    if (rdt == NB_F64 && dt != NB_F64) { /* the run's rounding, then back to float64 */
        nb_tensor *tmp[4] = {0};
        make_inputs(c, dt, NB_CPU, false, tmp);
        for (int k = 0; k < c->n_in; k++)
            if (is_float(nb_dtype_of(tmp[k]))) {
                bool g = nb_requires_grad(rx[k]);
                rx[k] = nb_contiguous(nb_detach(nb_to_dtype(tmp[k], NB_F64)));
                if (g) NB_CK_OK(nb_set_requires_grad(rx[k], true));
            }
    }
    bool used[NB_SLOT_COUNT] = {0};
    run_result ref = forward_backward(c, rx, grads, used);
    ck_slots(c, "on cpu in float64 (the reference)", used);
    ck_assert_msg(ref.out != NULL, "%s %s: the CPU reference failed: %s", nb_op_name(c->op), c->label, nb_last_error());

    make_inputs(c, dt, dev, grads, x);
    memset(used, 0, sizeof used);
    run_result got = forward_backward(c, x, grads, used);
    ck_slots(c, where, used);
    /* integer inputs promoted to a float output (torch.sin of int32 is
     * float32): the output's dtype sets the tolerance */
    double otol = got.out && !is_float(dt) && is_float(nb_dtype_of(got.out)) ? tol_for(c, nb_dtype_of(got.out)) : tol;
    ck_values("output", c, where, got.out, ref.out, otol);
    for (int k = 0; grads && k < c->n_in; k++)
        if (ref.grad[k] || got.grad[k]) {
            char what[32];
            snprintf(what, sizeof what, "gradient of input %d", k);
            ck_assert_msg(got.grad[k] && ref.grad[k], "%s %s %s: %s missing", nb_op_name(c->op), c->label, where, what);
            ck_values(what, c, where, got.grad[k], ref.grad[k], dt == NB_F64 ? 1e-10 : 10 * tol);
        }

    /* determinism: the same bits from a second run on fresh, equal inputs */
    make_inputs(c, dt, dev, grads, x2);
    run_result again = forward_backward(c, x2, grads, used);
    NB_CK_NOTNULL(again.out);
    ck_same_bits(c, where, "output", got.out, again.out);
    for (int k = 0; k < c->n_in; k++)
        if (got.grad[k] && again.grad[k]) ck_same_bits(c, where, "a gradient", got.grad[k], again.grad[k]);

    /* float64: finite differences on this device */
    if (grads && dt == NB_F64 && !(c->flags & C_NOGC)) {
        for (int k = 0; k < c->n_in; k++) nb_tensor_zero_grad(x[k]);
        gc_ctx ctx = {c};
        nb_status st = nb_gradcheck(gc_fn, x, c->n_in, &ctx, NULL);
        ck_assert_msg(st == NB_OK, "%s %s %s: %s", nb_op_name(c->op), c->label, where, nb_last_error());
        if (twice_differentiable(c)) { /* the double backward (create_graph) against finite differences */
            /* with the layers as ops: cuDNN's RNN backward is not differentiable again (as PyTorch's) */
            bool prev = nb_set_cudnn_enabled(false);
            st = nb_gradgradcheck(gc_fn, x, c->n_in, &ctx, NULL);
            nb_set_cudnn_enabled(prev);
            ck_assert_msg(st == NB_OK, "%s %s %s: gradgradcheck: %s", nb_op_name(c->op), c->label, where,
                          nb_last_error());
        }
    }
    nb_scope_end(s);
}

/* The dtypes a case runs in on dev. */
static unsigned case_dtypes(const nb_op_case *c, nb_device dev) {
    unsigned m = c->dtypes ? c->dtypes & nb_op_get(c->op)->dtypes : nb_op_get(c->op)->dtypes;
    if (c->flags & C_NOINT) m &= NB_DTM_F | NB_DTM(NB_F16) | NB_DTM(NB_BF16);
    if (c->flags & C_NO16) m &= ~(NB_DTM(NB_F16) | NB_DTM(NB_BF16));
    unsigned ok = 0;
    for (int d = 0; d < NB_DTYPE_COUNT; d++)
        if ((m & NB_DTM(d)) && nb_backend_supports(dev, c->op, (nb_dtype)d)) ok |= NB_DTM(d);
    return ok;
}

/* NB_OP_HARNESS_DEVICE=cuda:0 runs the cases on that device only (the CPU
 * reference is still computed): for sanitizer runs, where time is short. */
static bool device_selected(nb_device dev) {
    const char *want = getenv("NB_OP_HARNESS_DEVICE");
    nb_device w;
    if (!want || !*want || nb_device_parse(want, &w) != NB_OK) return true;
    return w.type == dev.type && w.index == dev.index;
}

/* NB_OP_HARNESS_OPS=rnn,rnn_packed runs those ops' cases only (a quick
 * look at one family on a GPU machine). */
static bool op_selected(nb_op_id op) {
    const char *want = getenv("NB_OP_HARNESS_OPS");
    if (!want || !*want) return true;
    size_t n = strlen(nb_op_name(op));
    for (const char *p = want; (p = strstr(p, nb_op_name(op))); p += n)
        if ((p == want || p[-1] == ',') && (p[n] == ',' || !p[n])) return true;
    return false;
}

START_TEST(test_op_case) {
    const nb_op_case *c = case_at(_i);
    ck_assert_ptr_nonnull(c);
    if (!op_selected(c->op)) return;
    int runs = 0, skipped = 0;
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++)
        for (int i = 0; i < nb_device_count((nb_device_type)t); i++) {
            nb_device dev = {(nb_device_type)t, i};
            if (!device_selected(dev)) {
                skipped++;
                continue;
            }
            unsigned m = case_dtypes(c, dev);
            for (int d = 0; d < NB_DTYPE_COUNT; d++)
                if (m & NB_DTM(d)) run_case(c, dev, (nb_dtype)d), runs++;
        }
    ck_assert_msg(runs > 0 || skipped, "%s %s: no device runs it in any of its dtypes", nb_op_name(c->op), c->label);
}
END_TEST

/* ---- a backend with two kernels --------------------------------------------------------- */

/* A backend that has the CPU's runtime (memory, streams) and only its copy
 * and fill kernels, registered as the next free cuda:N for one test: what
 * an op needs is derived from the slots its row lists, so every case the
 * backend cannot run is skipped (nb_backend_supports), an op called anyway
 * fails with NB_ERR_UNSUPPORTED naming the missing kernel, and the cases
 * it can run pass as on the CPU. */
static struct nb_backend_i two_kernels_iface;
static nb_backend two_kernels = {.iface = &two_kernels_iface, .name = "two_kernels",
                                 .version = NB_BACKEND_INTERFACE_VERSION};

static void two_kernels_setup(void) {
    const nb_backend *cpu = nb_backend_get(NB_CPU);
    ck_assert_ptr_nonnull(cpu);
    two_kernels_iface = *cpu->iface;
#define NB_SLOT(slot, kind, cpu, cuda, check, fuse) two_kernels_iface.slot = NULL;
#include "nb_slots.def"
#undef NB_SLOT
    two_kernels_iface.copy = cpu->iface->copy;
    two_kernels_iface.fill = cpu->iface->fill;
    two_kernels.device = (nb_device){NB_DEVICE_CUDA, nb_device_count(NB_DEVICE_CUDA)};
    NB_CK_OK(nb_backend_register(&two_kernels));
}

static void two_kernels_teardown(void) {
    nb_memory_empty_cache(two_kernels.device);
    nb_backend_unregister(&two_kernels);
}

START_TEST(test_op_two_kernel_backend) {
    nb_device dev = two_kernels.device;
    int runs = 0, skipped = 0;
    for (int i = 0; i < total_cases(); i++) {
        const nb_op_case *c = case_at(i);
        const bool *slots = nb_op_slots(c->op);
        bool runnable = true;
        for (int k = 0; k < NB_SLOT_COUNT; k++)
            if (slots[k] && k != NB_SLOT_copy && k != NB_SLOT_fill) runnable = false;
        unsigned m = case_dtypes(c, dev);
        ck_assert_msg(runnable || !m, "%s %s: supported on a backend without its kernels", nb_op_name(c->op), c->label);
        for (int d = 0; d < NB_DTYPE_COUNT; d++)
            if (m & NB_DTM(d)) run_case(c, dev, (nb_dtype)d), runs++;
        skipped += !m;
    }
    ck_assert_msg(runs > 0 && skipped > 0, "%d runs, %d cases skipped", runs, skipped);
    printf("op harness on a backend with copy and fill only: %d (case, dtype) runs, %d of %d cases skipped\n", runs,
           skipped, total_cases());
    /* an op called anyway: the capability check names what is missing */
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_to_device(nb_ones(NB_SHAPE(3), NB_F32), dev);
    NB_CK_NOTNULL(a);
    ck_assert_ptr_null(nb_exp(a));
    ck_assert_int_eq(nb_last_status(), NB_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(nb_last_error(), "no unary kernel"), "%s", nb_last_error());
    nb_scope_end(s);
}
END_TEST

/* Every row of the op table has at least one case; every case names a row. */
START_TEST(test_op_coverage) {
    int covered[NB_OP_COUNT] = {0};
    for (int i = 0; i < total_cases(); i++) {
        const nb_op_case *c = case_at(i);
        ck_assert_msg((unsigned)c->op < NB_OP_COUNT, "case %d (%s) names no op", i, c->label);
        ck_assert_msg(c->fn || c->f1 || c->f2, "case %s %s has no function", nb_op_name(c->op), c->label);
        ck_assert_msg(c->n_in >= 1 && c->n_in <= 4, "case %s %s: %d inputs", nb_op_name(c->op), c->label, c->n_in);
        covered[c->op]++;
    }
    int missing = 0;
    char list[2048] = "";
    for (int op = 0; op < NB_OP_COUNT; op++)
        if (!covered[op]) {
            missing++;
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, " %s", nb_op_name((nb_op_id)op));
        }
    ck_assert_msg(!missing, "%d ops of the op table have no harness case:%s", missing, list);
}
END_TEST

/* A line per device: how many (case, dtype) runs the cases above make there,
 * and how many of them check gradients (the harness's summary). */
START_TEST(test_op_summary) {
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++)
        for (int i = 0; i < nb_device_count((nb_device_type)t); i++) {
            nb_device dev = {(nb_device_type)t, i};
            int runs = 0, grad_runs = 0, gradchecks = 0, gradgradchecks = 0, ops_seen = 0;
            bool seen[NB_OP_COUNT] = {0};
            for (int k = 0; k < total_cases(); k++) {
                const nb_op_case *c = case_at(k);
                unsigned m = case_dtypes(c, dev);
                for (int d = 0; d < NB_DTYPE_COUNT; d++) {
                    if (!(m & NB_DTM(d))) continue;
                    runs++;
                    bool g = grads_in(c, dev, (nb_dtype)d);
                    grad_runs += g;
                    gradchecks += g && d == NB_F64 && !(c->flags & C_NOGC);
                    gradgradchecks += g && d == NB_F64 && twice_differentiable(c);
                    if (!seen[c->op]) seen[c->op] = true, ops_seen++;
                }
            }
            char name[32];
            printf("op harness on %s: %d ops of %d, %d cases, %d (case, dtype) runs, %d with gradients, %d float64 "
                   "gradchecks, %d gradgradchecks\n", nb_device_str(dev, name, sizeof name), ops_seen, (int)NB_OP_COUNT,
                   total_cases(), runs, grad_runs, gradchecks, gradgradchecks);
        }
}
END_TEST

Suite *nb_suite_op_harness(void) {
    Suite *s = suite_create("op_harness");
    TCase *cov = tcase_create("coverage");
    tcase_add_test(cov, test_op_coverage);
    tcase_add_test(cov, test_op_summary);
    suite_add_tcase(s, cov);
    TCase *two = tcase_create("two_kernels");
    tcase_add_checked_fixture(two, two_kernels_setup, two_kernels_teardown);
    tcase_add_test(two, test_op_two_kernel_backend);
    tcase_set_timeout(two, 300);
    suite_add_tcase(s, two);
    TCase *tc = tcase_create("cases");
    tcase_add_loop_test(tc, test_op_case, 0, total_cases());
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return s;
}
