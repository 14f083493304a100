/* fuzz_safetensors.c - libFuzzer target for the safetensors loader: any
 * bytes must either load (and then load into a small module non-strictly)
 * or fail with an error, never crash, hang, leak or read out of bounds.
 * Built and run by tests/fuzz/run.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stddef.h>
#include <stdint.h>

#include "nabla.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static nb_module *net;
    if (!net) net = nb_nn_sequential(nb_nn_linear(3, 2), nb_nn_relu(), nb_nn_linear(2, 1)); /* keys 0.weight ... 2.bias */
    nb_safetensors *f = nb_safetensors_load_buffer(data, size, "fuzz");
    if (f) {
        for (int i = 0; i < f->n_tensors; i++) (void)nb_numel(f->tensors[i].tensor);
        (void)nb_safetensors_meta(f, "format");
        nb_load_report r;
        nb_module_load_tensors(net, f->tensors, f->n_tensors, false, &r);
        nb_load_report_free(&r);
    } else if (!nb_last_error()[0]) {
        __builtin_trap(); /* a failure must say why */
    }
    nb_safetensors_free(f);
    nb_clear_error();
    return 0;
}
