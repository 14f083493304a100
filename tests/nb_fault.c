/* nb_fault.c - host allocation failure injection for the test runner.
 * tests/meson.build links nabla-tests with -Wl,--wrap for malloc, calloc,
 * realloc, aligned_alloc and strdup, so every such call in the test binary
 * and in the static libnabla it links comes here first (calls inside shared
 * libraries, such as jansson's, zlib's and libc's own, do not). Unarmed, each
 * wrapper forwards to the real function; armed with nb_fault_arm(n), the
 * allocation n calls later (0 = the next) returns NULL once, as an
 * exhausted heap would. The count is process-wide (atomic), so the tests
 * that arm it run nabla on one thread. The wrappers also keep the largest
 * size asked for, so a test can bound what a hostile file makes nabla
 * allocate. */
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "nb_test.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
char *__wrap_strdup(const char *s);

static atomic_long countdown = -1; /* -1: unarmed */
static atomic_bool hit;
static atomic_size_t largest; /* the largest size asked for since nb_alloc_largest_reset */

static void track(size_t n) {
    size_t l = atomic_load(&largest);
    while (n > l && !atomic_compare_exchange_weak(&largest, &l, n)) {}
}

/* True when this call is the one to fail. */
static bool fail_now(void) {
    long c = atomic_load(&countdown);
    while (c >= 0) {
        if (atomic_compare_exchange_weak(&countdown, &c, c - 1)) {
            if (c == 0) {
                atomic_store(&hit, true);
                return true;
            }
            return false;
        }
    }
    return false;
}

void nb_fault_arm(long n) {
    atomic_store(&hit, false);
    atomic_store(&countdown, n);
}
void nb_fault_disarm(void) { atomic_store(&countdown, -1); }
bool nb_fault_hit(void) { return atomic_load(&hit); }
void nb_alloc_largest_reset(void) { atomic_store(&largest, 0); }
size_t nb_alloc_largest(void) { return atomic_load(&largest); }

void *__wrap_malloc(size_t n) { return track(n), fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return track(n * size), fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return track(n), fail_now() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t align, size_t n) {
    return track(n), fail_now() ? NULL : __real_aligned_alloc(align, n);
}
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
