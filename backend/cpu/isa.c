/* isa.c - chooses the CPU kernels' instruction-set level once (isa.h):
 * the widest level that cpuid and the OS's saved register state allow
 * (__builtin_cpu_supports checks both), lowered to NB_CPU_ISA's level when
 * that variable names one; a level the CPU lacks, or a bad name, is
 * ignored with the reason kept in nb_cpu_isa_info(). Compiled once, for
 * the baseline target. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "nb_impl.h"

static const char *const isa_names[NB_CPU_ISA_COUNT] = {"baseline", "avx2", "avx512"};

static const nb_cpu_isa_kernels *const isa_tables[NB_CPU_ISA_COUNT] = {
    &nb_cpu_isa_kernels_baseline,
#if defined(NB_CPU_ISA_X86)
    &nb_cpu_isa_kernels_avx2,
    &nb_cpu_isa_kernels_avx512,
#endif
};

static struct {
    nb_cpu_isa max;
    atomic_int cur;
    char note[160];  /* what NB_CPU_ISA did */
    char extras[96]; /* features of note beyond the level (bf16, AMX) */
    char info[320];
    pthread_mutex_t lock; /* guards info against a concurrent select */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

const char *nb_cpu_isa_name(nb_cpu_isa isa) {
    return (unsigned)isa < NB_CPU_ISA_COUNT ? isa_names[isa] : "?";
}

#if defined(NB_CPU_ISA_X86)
#include <cpuid.h>
/* A cpuid feature bit (reg: 0 eax, 1 ebx, 2 ecx, 3 edx) for the features
 * clang's __builtin_cpu_supports does not name (f16c, movbe, amx-bf16);
 * none of them needs register state beyond what the level's others check. */
static bool cpuid_bit(unsigned leaf, unsigned sub, int reg, int bit) {
    unsigned r[4];
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
    return (r[reg] >> bit) & 1u;
}
#endif

static nb_cpu_isa detect(void) {
#if defined(NB_CPU_ISA_X86)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"))
        return NB_CPU_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
        __builtin_cpu_supports("bmi2") && cpuid_bit(1, 0, 2, 29) /* f16c */ && cpuid_bit(1, 0, 2, 22) /* movbe */)
        return NB_CPU_ISA_AVX2;
#endif
    return NB_CPU_ISA_BASELINE;
}

/* Reported only (the kernels do not use them yet): AVX512-BF16 and AMX
 * would serve bfloat16 casts and GEMMs. */
static void detect_extras(void) {
    size_t used = 0;
    S.extras[0] = 0;
#if defined(NB_CPU_ISA_X86)
    if (__builtin_cpu_supports("avx512bf16"))
        used += (size_t)snprintf(S.extras + used, sizeof S.extras - used, " avx512_bf16");
    if (cpuid_bit(7, 0, 3, 22) /* amx-bf16 */ && used < sizeof S.extras)
        used += (size_t)snprintf(S.extras + used, sizeof S.extras - used, " amx_bf16");
    if (__builtin_cpu_supports("avx512vnni") && used < sizeof S.extras)
        snprintf(S.extras + used, sizeof S.extras - used, " avx512_vnni");
#endif
}

static void build_info(void) {
    nb_cpu_isa cur = (nb_cpu_isa)atomic_load(&S.cur);
    snprintf(S.info, sizeof S.info, "isa=%s (widest %s;%s%s%s%s)", nb_cpu_isa_name(cur), nb_cpu_isa_name(S.max),
             S.extras[0] ? " cpu" : "", S.extras, S.note[0] ? " " : "", S.note);
}

static void isa_init(void) {
    S.max = detect();
    detect_extras();
    nb_cpu_isa use = S.max;
    const char *env = getenv("NB_CPU_ISA");
    if (env && *env) {
        int want = -1;
        for (int i = 0; i < NB_CPU_ISA_COUNT; i++)
            if (!strcmp(env, isa_names[i])) want = i;
        if (want < 0)
            snprintf(S.note, sizeof S.note, "NB_CPU_ISA=%.40s ignored: not baseline, avx2 or avx512", env);
        else if (want > (int)S.max)
            snprintf(S.note, sizeof S.note, "NB_CPU_ISA=%s ignored: this CPU (or build) has up to %s", env,
                     nb_cpu_isa_name(S.max));
        else
            use = (nb_cpu_isa)want, snprintf(S.note, sizeof S.note, "NB_CPU_ISA=%s", env);
    }
    atomic_store(&S.cur, (int)use);
    build_info();
}

nb_cpu_isa nb_cpu_isa_get(void) {
    pthread_once(&isa_once, isa_init);
    return (nb_cpu_isa)atomic_load(&S.cur);
}

nb_cpu_isa nb_cpu_isa_max(void) {
    pthread_once(&isa_once, isa_init);
    return S.max;
}

const nb_cpu_isa_kernels *nb_cpu_isa_kernels_get(void) { return isa_tables[nb_cpu_isa_get()]; }

nb_status nb_cpu_isa_select(nb_cpu_isa isa) {
    pthread_once(&isa_once, isa_init);
    if ((unsigned)isa >= NB_CPU_ISA_COUNT)
        return nb_set_error(NB_ERR_INVALID_ARG, "cpu isa: bad level %d", (int)isa);
    if (isa > S.max)
        return nb_set_error(NB_ERR_UNSUPPORTED, "cpu isa: %s needs a CPU (and build) with it; this one has up to %s",
                            nb_cpu_isa_name(isa), nb_cpu_isa_name(S.max));
    pthread_mutex_lock(&S.lock);
    atomic_store(&S.cur, (int)isa);
    build_info();
    pthread_mutex_unlock(&S.lock);
    nb_cpu_backend_use_kernels(isa_tables[isa]);
    return NB_OK;
}

const char *nb_cpu_isa_info(void) {
    pthread_once(&isa_once, isa_init);
    return S.info;
}
