/* nb_test.h - helpers shared by the Check suites. */
#ifndef NB_TEST_H
#define NB_TEST_H

#include <check.h>
#include <math.h>

#include "nabla.h"

#define NB_CK_OK(expr) \
    do { nb_status s_ = (expr); ck_assert_msg(s_ == NB_OK, "%s: %s", #expr, nb_last_error()); } while (0)
#define NB_CK_NOTNULL(p) ck_assert_msg((p) != NULL, "%s is NULL: %s", #p, nb_last_error())
/* An expression that must fail with status st and leave a message. */
#define NB_CK_FAILS(expr, st)                                                                   \
    do {                                                                                         \
        nb_clear_error();                                                                        \
        ck_assert_msg(!(expr), "%s should fail", #expr);                                        \
        ck_assert_int_eq(nb_last_status(), (st));                                                \
        ck_assert_msg(nb_last_error()[0] != 0, "no message for %s", #expr);                     \
    } while (0)

/* A tensor of the given dtype from double values (C order). */
nb_tensor *nb_test_tensor(int ndim, const int64_t *shape, nb_dtype dt, const double *values);
/* Copies up to n elements of t (any dtype) to doubles; returns numel. */
/* v(i) of the flat index i as tests/interop/npy_interop.py and
 * pt_interop.py make it, by kind: "b" bool, "u" unsigned, "i" signed,
 * anything else float. */
double nb_test_value(const char *kind, int64_t i);
int64_t nb_test_values(const nb_tensor *t, double *out, int64_t n);
/* All of t's values as doubles in a malloc'd array (the caller frees it). */
double *nb_test_values_of(const nb_tensor *t);
/* The devices other than the CPU (each type's, in order) in devs[0..max): their count. */
int nb_test_accelerators(nb_device *devs, int max);
/* tests/interop/<name>: found from the cwd (the repository root) or from
 * the test binary (build/tests/, with __FILE__ relative to build/); false
 * when neither has it. */
bool nb_test_find_script(const char *name, char *out, size_t len);
/* The Python that interop scripts run under: $NB_PYTHON, else /usr/bin/python3
 * (Debian's, with numpy, torch, onnx and protobuf in CI). */
const char *nb_test_python(void);
/* A file's bytes, malloc'd and NUL-terminated (the caller frees them); *len
 * (may be NULL) gets their count. Asserts the file is read whole. */
char *nb_test_slurp(const char *path, size_t *len);
/* Writes n bytes to path (created or truncated), asserting they were written. */
void nb_test_write_file(const char *path, const void *data, size_t n);
/* For a forked child: limits the process's address space (RLIMIT_AS) to
 * its present size (/proc/self/statm) plus extra bytes. Returns 0, 1 when
 * statm cannot be read, 2 when setrlimit fails (the child _exits with its
 * own codes: no Check assertions there). */
int nb_test_limit_address_space(size_t extra);
/* Removes the directory tree dir (rm -rf), asserting it went. */
void nb_test_rmtree(const char *dir);
/* Asserts every element of t is within atol + rtol*|expected| of expected. */
void nb_ck_close(const nb_tensor *t, const double *expected, int64_t n, double atol, double rtol);
/* Asserts got and want (any devices and dtypes) are non-NULL, of one
 * element count, and within atol of each other element by element. */
void nb_ck_close_to(const nb_tensor *got, const nb_tensor *want, double atol);
/* max |got - want| over max |want| for got's n values against want (host
 * doubles): an error relative to the largest reference value (infinite
 * when want is all zeros and got is not). */
double nb_test_rel_err(const nb_tensor *got, const double *want, int64_t n);
/* Asserts shape equality. */
void nb_ck_shape(const nb_tensor *t, int ndim, const int64_t *shape);
/* An N(0,1) tensor of dt from a generator seeded with seed, scoped. */
nb_tensor *nb_test_randn(int ndim, const int64_t *shape, nb_dtype dt, uint64_t seed);
/* A float64 N(0,1) tensor that requires grad, scoped. */
nb_tensor *nb_test_randn_grad(int ndim, const int64_t *shape, uint64_t seed);
/* Asserts a and b (any devices) have one dtype, one element count and the
 * same bytes. */
void nb_ck_bitwise(const nb_tensor *a, const nb_tensor *b);
/* A bool [L, S] attention mask, random from seed (about 5 in 8 true),
 * with column i % S true in row i so no row is empty; additive, when not
 * NULL, gets its L*S additive form (0 or -inf). */
nb_tensor *nb_test_bool_mask(int64_t L, int64_t S, uint64_t seed, double *additive);
/* Runs nb_gradcheck and asserts success. */
void nb_ck_gradcheck(nb_gradcheck_fn f, nb_tensor *const *in, int n, void *ctx);


/* Host allocation failure injection (tests/nb_fault.c): the n-th
 * malloc/calloc/realloc/aligned_alloc/strdup from now (0 = the next) in
 * nabla or the tests returns NULL, once. nb_fault_hit says whether it did. */
void nb_fault_arm(long n);
void nb_fault_disarm(void);
bool nb_fault_hit(void);
/* The largest single allocation asked for since the last reset (bytes). */
void nb_alloc_largest_reset(void);
size_t nb_alloc_largest(void);

#endif
