/* startup_cpu.c - what a CPU-only program pays for a CUDA-enabled nabla
 * (issue 28 item 4): sums a 4-element CPU tensor and prints the process's
 * peak resident memory (VmHWM) and whether any CUDA context exists (the
 * driver's primary-context state of every GPU, read through libcuda so the
 * program needs no CUDA at build time; --no-driver skips that, which loads
 * the driver and costs cuInit's time). Time it from outside:
 *   time build/tests/bench/startup_cpu --no-driver */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nabla.h"

static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) sscanf(line + 6, "%ld", &kib);
    if (f) fclose(f);
    return kib;
}

/* Contexts alive on the machine's GPUs (-1: no driver). */
static int contexts(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
    int (*init)(unsigned), (*count)(int *), (*get)(int *, int), (*state)(int, unsigned *, int *);
    *(void **)&init = dlsym(lib, "cuInit");
    *(void **)&count = dlsym(lib, "cuDeviceGetCount");
    *(void **)&get = dlsym(lib, "cuDeviceGet");
    *(void **)&state = dlsym(lib, "cuDevicePrimaryCtxGetState");
    int n = 0, alive = 0;
    if (!init || !count || !get || !state || init(0) || count(&n)) return -1;
    for (int d = 0; d < n; d++) {
        int dev = 0, active = 0;
        unsigned flags = 0;
        if (!get(&dev, d) && !state(dev, &flags, &active)) alive += active != 0;
    }
    return alive;
}

int main(int argc, char **argv) {
    bool probe = !(argc > 1 && !strcmp(argv[1], "--no-driver"));
    nb_scope *s = nb_scope_begin();
    double sum = nb_item(nb_sum(nb_from_data((float[]){1, 2, 3, 4}, NB_SHAPE(4), NB_F32), NULL, 0, false));
    nb_scope_end(s);
    long rss = peak_rss_kib(); /* before the driver is loaded below */
    printf("sum %g, peak RSS %.1f MiB, CUDA contexts %d\n", sum, rss / 1024.0, probe ? contexts() : -1);
    return sum == 10 ? 0 : 1;
}
