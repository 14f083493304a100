/* test_onnx.c - nb_onnx_export (utils/onnx_export.c): the examples' nets
 * (mnist_mlp, mnist_cnn), a small BERT and a small GPT-2 exported with an
 * example batch of 2, then nabla's outputs at other batch sizes (and
 * sequence lengths) compared with ONNX Runtime's on the same inputs by
 * tests/interop/onnx_interop.py, after onnx.checker; and the errors.
 * NB_ONNX_KEEP=DIR keeps the files there (to rerun the script elsewhere). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_decoder.h"
#include "nb_onnx.h"
#include "nb_test.h"
#include "nb_transformer.h"

static char dir[512];
static FILE *cases;

static void write_raw(const char *name, nb_tensor *t) {
    char path[700];
    size_t bytes = (size_t)nb_numel(t) * nb_dtype_size(nb_dtype_of(t));
    void *buf = malloc(bytes);
    ck_assert_ptr_nonnull(buf);
    NB_CK_OK(nb_to_host(t, buf, bytes));
    snprintf(path, sizeof path, "%s/%s", dir, name);
    nb_test_write_file(path, buf, bytes);
    free(buf);
}

/* A case: model on input x; nabla's output (eval mode) is what ORT must give. */
static void add_case(const char *model, nb_module *m, nb_tensor *x, int k) {
    char in[128], out[128];
    snprintf(in, sizeof in, "%s.%d.in", model, k);
    snprintf(out, sizeof out, "%s.%d.out", model, k);
    nb_module_train(m, false);
    write_raw(in, x);
    write_raw(out, nb_forward(m, x));
    fprintf(cases, "%s.onnx %s %s %s", model, in, out, nb_dtype_of(x) == NB_I64 ? "int64" : "float32");
    for (int d = 0; d < nb_dim(x); d++) fprintf(cases, " %lld", (long long)nb_shape(x)[d]);
    fprintf(cases, "\n");
}

static void export(const char *model, nb_module *m, nb_tensor *example) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, model);
    NB_CK_OK(nb_onnx_export(m, 1, &example, path, NULL));
}

static nb_tensor *token_ids(int64_t B, int64_t T, int64_t V) { return nb_randint(0, V, NB_SHAPE(B, T), NB_I64, NULL); }

START_TEST(test_onnx_against_onnxruntime) {
    nb_scope *s = nb_scope_begin();
    const char *keep = getenv("NB_ONNX_KEEP");
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
        mkdir(dir, 0777); /* may exist */
    } else {
        snprintf(dir, sizeof dir, "/tmp/nb_onnx_XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
    }
    char path[700], script[1400], cmd[3000];
    snprintf(path, sizeof path, "%s/cases.txt", dir);
    ck_assert_ptr_nonnull(cases = fopen(path, "w"));
    nb_manual_seed(7);

    nb_module *mlp = nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 512), nb_nn_relu(),
                                      nb_nn_linear(512, 10));
    export("mlp", mlp, nb_randn(NB_SHAPE(2, 784), NB_F32, NULL));
    add_case("mlp", mlp, nb_randn(NB_SHAPE(3, 784), NB_F32, NULL), 0);
    add_case("mlp", mlp, nb_randn(NB_SHAPE(1, 784), NB_F32, NULL), 1);

    nb_module *cnn = nb_nn_sequential(
        nb_nn_conv2d(1, 32, 3, (nb_conv2d_options){0}, true), nb_nn_relu(),
        nb_nn_conv2d(32, 64, 3, (nb_conv2d_options){.padding = {1, 1}, .stride = {1, 1}}, true), nb_nn_relu(),
        nb_nn_max_pool2d((nb_pool2d_options){.kernel = {2, 2}}), nb_nn_dropout(0.25),
        nb_nn_avg_pool2d((nb_pool2d_options){.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}),
        nb_nn_flatten(1, -1), nb_nn_linear(64 * 13 * 13, 128), nb_nn_tanh(), nb_nn_dropout(0.5), nb_nn_linear(128, 10),
        nb_nn_sigmoid());
    nb_module_train(cnn, true); /* exported as in eval mode all the same */
    export("cnn", cnn, nb_randn(NB_SHAPE(2, 1, 28, 28), NB_F32, NULL));
    add_case("cnn", cnn, nb_randn(NB_SHAPE(3, 1, 28, 28), NB_F32, NULL), 0);

    nb_bert_config bc = nb_bert_config_base(60);
    bc.hidden_size = 32, bc.num_layers = 2, bc.num_heads = 4, bc.intermediate_size = 64, bc.max_position = 16;
    nb_module *bert = nb_bert(bc);
    export("bert", bert, token_ids(2, 8, 60));
    add_case("bert", bert, token_ids(3, 5, 60), 0);
    add_case("bert", bert, token_ids(1, 16, 60), 1);
    bc.norm_first = true, bc.activation = NB_ACTIVATION_RELU, bc.type_vocab_size = 0;
    nb_module *bert_pre = nb_bert(bc); /* pre-LN with ReLU, no segments */
    export("bert_pre_ln", bert_pre, token_ids(2, 8, 60));
    add_case("bert_pre_ln", bert_pre, token_ids(2, 7, 60), 0);

    nb_gpt2_config gc = nb_gpt2_config_default();
    gc.vocab_size = 70, gc.n_positions = 16, gc.n_embd = 32, gc.n_layer = 2, gc.n_head = 4;
    nb_module *gpt2 = nb_gpt2(gc);
    export("gpt2", gpt2, token_ids(2, 8, 70));
    add_case("gpt2", gpt2, token_ids(3, 5, 70), 0);
    add_case("gpt2", gpt2, token_ids(1, 16, 70), 1);
    fclose(cases);

    ck_assert_msg(nb_test_find_script("onnx_interop.py", script, sizeof script), "onnx_interop.py not found");
    snprintf(cmd, sizeof cmd, "%s '%s' '%s'", nb_test_python(), script, dir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) printf("onnx_interop: skipped: no onnx and no ONNX Runtime\n");
    else ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "onnx_interop.py failed (status %d)", rc);
    if (!keep) nb_test_rmtree(dir);
    nb_module_free(mlp), nb_module_free(cnn), nb_module_free(bert), nb_module_free(bert_pre), nb_module_free(gpt2);
    nb_scope_end(s);
}
END_TEST

START_TEST(test_onnx_errors) {
    nb_scope *s = nb_scope_begin();
    char d[] = "/tmp/nb_onnx_XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(d));
    snprintf(path, sizeof path, "%s/m.onnx", d);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 4), NB_F32, NULL);
    nb_module *lin = nb_nn_linear(4, 3);
    NB_CK_FAILS(nb_onnx_export(NULL, 1, &x, path, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_onnx_export(lin, 0, &x, path, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_onnx_export(lin, 1, (nb_tensor *[]){NULL}, path, NULL) == NB_OK, NB_ERR_INVALID_ARG);
    NB_CK_FAILS(nb_onnx_export(lin, 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 5), NB_F32, NULL)}, path, NULL) == NB_OK,
                NB_ERR_SHAPE); /* the example's forward fails */
    /* a layer without a translation is named with its path */
    nb_module *seq = nb_nn_sequential(nb_nn_linear(4, 4), nb_nn_elu(1.0));
    nb_status st = nb_onnx_export(seq, 1, &x, path, NULL);
    ck_assert_int_eq(st, NB_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(nb_last_error(), "ELU") && strstr(nb_last_error(), "'1'"), "%s", nb_last_error());
    nb_module *f64 = nb_nn_linear_ex(4, 3, true, NB_F64);
    NB_CK_FAILS(nb_onnx_export(f64, 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 4), NB_F64, NULL)}, path, NULL) == NB_OK,
                NB_ERR_DTYPE);
    nb_module *flat = nb_nn_flatten(2, -1);
    NB_CK_FAILS(nb_onnx_export(flat, 1, (nb_tensor *[]){nb_randn(NB_SHAPE(2, 3, 4, 5), NB_F32, NULL)}, path, NULL) == NB_OK,
                NB_ERR_UNSUPPORTED);
    ck_assert_int_ne(access(path, F_OK), 0); /* nothing written by the failures */
    /* a good export, then a failed one over it keeps the file */
    NB_CK_OK(nb_onnx_export(lin, 1, &x, path, NULL));
    size_t before, after;
    free(nb_test_slurp(path, &before));
    NB_CK_FAILS(nb_onnx_export(seq, 1, &x, path, NULL) == NB_OK, NB_ERR_UNSUPPORTED);
    free(nb_test_slurp(path, &after));
    ck_assert_uint_eq(before, after);
    nb_module_free(lin), nb_module_free(seq), nb_module_free(f64), nb_module_free(flat);
    nb_test_rmtree(d);
    nb_scope_end(s);
}
END_TEST

Suite *nb_suite_onnx(void) {
    Suite *s = suite_create("onnx");
    TCase *t = tcase_create("onnx");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_onnx_against_onnxruntime);
    tcase_add_test(t, test_onnx_errors);
    suite_add_tcase(s, t);
    return s;
}
