/* test_checkpoint.c - state_dict save/load (strict key reports) and
 * resumable checkpoints: a run interrupted, saved, rebuilt and resumed must
 * give bit-identical losses and a byte-identical final checkpoint; a bad
 * or foreign file must change nothing; a process killed in the middle of a
 * save must leave the previous checkpoint loadable; and the PyTorch
 * interoperability test (tests/interop/torch_interop.py) must pass. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nb_test.h"

static char dir[64];
static nb_scope *scope;

static void tmp_setup(void) {
    strcpy(dir, "/tmp/nb_ck_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    scope = nb_scope_begin();
}

static void tmp_teardown(void) {
    nb_scope_end(scope);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.') unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static const char *path_in(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 1);
    ck_assert_uint_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static bool same_file(const char *a, const char *b) {
    size_t la, lb;
    unsigned char *x = read_all(a, &la), *y = read_all(b, &lb);
    bool same = la == lb && !memcmp(x, y, la);
    free(x), free(y);
    return same;
}

static nb_module *mlp(int64_t in, int64_t hidden, int64_t out) {
    nb_module *m = nb_nn_sequential(nb_nn_linear(in, hidden), nb_nn_relu(), nb_nn_linear(hidden, out));
    NB_CK_NOTNULL(m);
    return m;
}

/* Asserts every parameter of a equals b's bit for bit (or differs, want false). */
static bool params_equal(nb_module *a, nb_module *b) {
    nb_named_tensor pa[8], pb[8];
    int n = nb_module_parameters(a, pa, 8);
    ck_assert_int_eq(n, nb_module_parameters(b, pb, 8));
    for (int i = 0; i < n; i++) {
        int64_t k = nb_numel(pa[i].tensor);
        if (k != nb_numel(pb[i].tensor)) return false;
        float *x = malloc(sizeof(float) * (size_t)k), *y = malloc(sizeof(float) * (size_t)k);
        NB_CK_OK(nb_to_host(pa[i].tensor, x, sizeof(float) * (size_t)k));
        NB_CK_OK(nb_to_host(pb[i].tensor, y, sizeof(float) * (size_t)k));
        bool same = !memcmp(x, y, sizeof(float) * (size_t)k);
        free(x), free(y);
        if (!same) return false;
    }
    return true;
}

/* ---- state_dict ------------------------------------------------------------ */

START_TEST(sd_roundtrip) {
    nb_manual_seed(1);
    nb_module *a = mlp(4, 3, 2);
    nb_manual_seed(2);
    nb_module *b = mlp(4, 3, 2);
    ck_assert(!params_equal(a, b));
    NB_CK_OK(nb_module_state_dict_save(a, path_in("a.st")));
    nb_safetensors *f = nb_safetensors_load(path_in("a.st"));
    NB_CK_NOTNULL(f);
    ck_assert_int_eq(f->n_tensors, 4);
    const char *keys[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    for (int i = 0; i < 4; i++) ck_assert_str_eq(f->tensors[i].name, keys[i]);
    nb_ck_shape(nb_safetensors_get(f, "2.weight"), NB_SHAPE(2, 3));
    ck_assert_str_eq(nb_safetensors_meta(f, "format"), "pt");
    nb_safetensors_free(f);
    nb_load_report r;
    NB_CK_OK(nb_module_load_state_dict(b, path_in("a.st"), true, &r));
    ck_assert_int_eq(r.n_missing + r.n_unexpected + r.n_mismatched, 0);
    nb_load_report_free(&r);
    ck_assert(params_equal(a, b));
    nb_module_free(a), nb_module_free(b);
}
END_TEST

START_TEST(sd_strict_errors_name_keys) {
    nb_manual_seed(1);
    nb_module *a = mlp(4, 3, 2), *wide = mlp(4, 3, 5), *first = nb_nn_sequential(nb_nn_linear(4, 3));
    nb_module *deep = nb_nn_sequential(nb_nn_linear(4, 3), nb_nn_relu(), nb_nn_linear(3, 2), nb_nn_relu(), nb_nn_linear(2, 2));
    NB_CK_OK(nb_module_state_dict_save(a, path_in("a.st")));
    nb_load_report r;
    /* a shape mismatch fails even when not strict, and changes nothing */
    NB_CK_OK(nb_module_state_dict_save(wide, path_in("wide_before.st")));
    NB_CK_FAILS(nb_module_load_state_dict(wide, path_in("a.st"), false, &r) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "2.weight: file [2, 3] float32, model [5, 3] float32"));
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "2.bias: file [2] float32, model [5] float32"));
    ck_assert_int_eq(r.n_mismatched, 2);
    nb_load_report_free(&r);
    NB_CK_OK(nb_module_state_dict_save(wide, path_in("wide_after.st")));
    ck_assert(same_file(path_in("wide_before.st"), path_in("wide_after.st")));
    /* unexpected keys */
    NB_CK_FAILS(nb_module_load_state_dict(first, path_in("a.st"), true, &r) == NB_OK, NB_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "2 unexpected keys (2.weight, 2.bias)"));
    ck_assert_int_eq(r.n_unexpected, 2);
    ck_assert_str_eq(r.unexpected[0], "2.weight");
    nb_load_report_free(&r);
    NB_CK_OK(nb_module_load_state_dict(first, path_in("a.st"), false, &r));
    ck_assert_int_eq(r.n_unexpected, 2);
    nb_load_report_free(&r);
    nb_tensor *w1 = nb_module_get(nb_module_child(first, "0"), "weight"), *w0 = nb_module_get(nb_module_child(a, "0"), "weight");
    double x[12], y[12];
    nb_test_values(w0, x, 12);
    nb_ck_close(w1, x, 12, 0, 0);
    /* missing keys */
    NB_CK_FAILS(nb_module_load_state_dict(deep, path_in("a.st"), true, NULL) == NB_OK, NB_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "2 missing keys (4.weight, 4.bias)"));
    nb_test_values(nb_module_get(nb_module_child(deep, "0"), "weight"), y, 12);
    ck_assert(memcmp(x, y, sizeof x) != 0); /* not loaded */
    NB_CK_OK(nb_module_load_state_dict(deep, path_in("a.st"), false, &r));
    ck_assert_int_eq(r.n_missing, 2);
    ck_assert_str_eq(r.missing[1], "4.bias");
    nb_load_report_free(&r);
    NB_CK_FAILS(nb_module_load_state_dict(deep, path_in("none.st"), false, NULL) == NB_OK, NB_ERR_IO);
    nb_module_free(a), nb_module_free(wide), nb_module_free(first), nb_module_free(deep);
}
END_TEST

/* ---- resumable training ------------------------------------------------------ */

enum { N_SAMPLES = 64, N_IN = 8, N_CLASSES = 4, BATCH = 10, EPOCHS = 3 };
#define STEPS_PER_EPOCH 7 /* ceil(64 / 10) */
#define TOTAL_STEPS (EPOCHS * STEPS_PER_EPOCH)

typedef struct run {
    nb_dataset *ds;
    nb_module *net;
    nb_optimizer *opt;
    nb_scheduler *sch;
    nb_loader *loader;
    int64_t step;
    double losses[TOTAL_STEPS];
} run;

/* Builds everything from fixed seeds, as a fresh process would; `sgd`
 * picks SGD+nesterov with StepLR instead of AdamW(amsgrad) with cosine. */
static void run_init(run *r, bool sgd, uint64_t init_seed) {
    memset(r, 0, sizeof *r);
    nb_generator g = nb_generator_new(99);
    nb_tensor *x = nb_randn(NB_SHAPE(N_SAMPLES, N_IN), NB_F32, &g);
    nb_tensor *y = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(N_SAMPLES), NB_F64, &g), N_CLASSES), NB_I64);
    r->ds = nb_dataset_from_tensors(x, y);
    nb_manual_seed(init_seed);
    r->net = mlp(N_IN, 16, N_CLASSES);
    if (sgd) {
        r->opt = nb_sgd(r->net, (nb_sgd_options){.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-4});
        r->sch = nb_step_lr(r->opt, 5, 0.5);
    } else {
        r->opt = nb_adamw(r->net, (nb_adam_options){.lr = 0.01, .amsgrad = true});
        r->sch = nb_cosine_annealing_lr(r->opt, TOTAL_STEPS, 1e-4);
    }
    r->loader = nb_loader_new(r->ds, (nb_loader_options){.batch_size = BATCH, .shuffle = true, .seed = 7});
    NB_CK_NOTNULL(r->loader);
    NB_CK_NOTNULL(r->sch);
}

static void run_free(run *r) {
    nb_loader_free(r->loader);
    nb_scheduler_free(r->sch);
    nb_optimizer_free(r->opt);
    nb_module_free(r->net);
    nb_dataset_free(r->ds);
}

/* Trains until global step `until`; inputs get noise from the default
 * generator, so its state is part of what a resume must restore. */
static void run_until(run *r, int64_t until) {
    while (r->step < until) {
        nb_batch b;
        if (!nb_loader_next(r->loader, &b)) {
            NB_CK_OK(nb_loader_status(r->loader));
            nb_loader_reset(r->loader);
            continue;
        }
        nb_scope *s = nb_scope_begin();
        nb_tensor *noise = nb_randn(nb_dim(b.x), nb_shape(b.x), NB_F32, NULL);
        nb_tensor *loss = nb_cross_entropy(nb_forward(r->net, nb_add(b.x, nb_mul_scalar(noise, 0.05))), b.y);
        NB_CK_NOTNULL(loss);
        nb_optimizer_zero_grad(r->opt);
        NB_CK_OK(nb_backward(loss));
        NB_CK_OK(nb_optimizer_step(r->opt));
        r->losses[r->step] = nb_item(loss);
        nb_scope_end(s);
        NB_CK_OK(nb_scheduler_step(r->sch));
        r->step++;
    }
}

static nb_checkpoint ck_of(run *r) {
    return (nb_checkpoint){.module = r->net, .optimizer = r->opt, .scheduler = r->sch, .loader = r->loader, .global_step = r->step};
}

static void check_resume(bool sgd, int64_t stop) {
    run a, b;
    run_init(&a, sgd, 1);
    run_until(&a, TOTAL_STEPS);
    nb_checkpoint ck = ck_of(&a);
    NB_CK_OK(nb_save_checkpoint(path_in("straight.st"), &ck));

    run_init(&b, sgd, 1);
    run_until(&b, stop);
    ck = ck_of(&b);
    NB_CK_OK(nb_save_checkpoint(path_in("mid.st"), &ck));
    double first[TOTAL_STEPS];
    memcpy(first, b.losses, sizeof first);
    run_free(&b);
    nb_manual_seed(12345); /* disturb the RNG: the checkpoint must restore it */
    nb_randn(NB_SHAPE(3), NB_F32, NULL);
    run_init(&b, sgd, 77); /* other initial weights: the checkpoint must overwrite them */
    ck = ck_of(&b);
    NB_CK_OK(nb_load_checkpoint(path_in("mid.st"), &ck, NULL));
    ck_assert_int_eq(ck.global_step, stop);
    b.step = ck.global_step;
    ck_assert_int_eq(nb_loader_epoch(b.loader), stop / STEPS_PER_EPOCH - (stop % STEPS_PER_EPOCH == 0));
    run_until(&b, TOTAL_STEPS);
    memcpy(b.losses, first, sizeof(double) * (size_t)stop);
    for (int i = 0; i < TOTAL_STEPS; i++)
        ck_assert_msg(a.losses[i] == b.losses[i], "step %d: loss %.17g straight, %.17g resumed", i, a.losses[i],
                      b.losses[i]);
    ck = ck_of(&b);
    NB_CK_OK(nb_save_checkpoint(path_in("resumed.st"), &ck));
    ck_assert_msg(same_file(path_in("straight.st"), path_in("resumed.st")), "final checkpoints differ");
    ck_assert(a.losses[TOTAL_STEPS - 1] < a.losses[0]); /* it did train */
    run_free(&a), run_free(&b);
}

START_TEST(ckpt_resume_adamw_mid_epoch) { check_resume(false, STEPS_PER_EPOCH + 3); }
END_TEST

START_TEST(ckpt_resume_sgd_epoch_end) { check_resume(true, STEPS_PER_EPOCH); }
END_TEST

/* The file's keys: PyTorch names for the model, optimizer.state.<i>.* and the metadata. */
START_TEST(ckpt_file_contents) {
    run r;
    run_init(&r, false, 1);
    run_until(&r, 3);
    nb_st_pair user[] = {{"loss_sum", "1.25"}};
    nb_checkpoint ck = ck_of(&r);
    ck.user = user, ck.n_user = 1;
    NB_CK_OK(nb_save_checkpoint(path_in("c.st"), &ck));
    nb_safetensors *f = NULL;
    ck = ck_of(&r);
    NB_CK_OK(nb_load_checkpoint(path_in("c.st"), &ck, &f));
    NB_CK_NOTNULL(f);
    ck_assert_int_eq(ck.global_step, 3);
    ck_assert_str_eq(nb_safetensors_meta(f, "user.loss_sum"), "1.25");
    ck_assert_str_eq(nb_safetensors_meta(f, "optimizer.kind"), "AdamW");
    ck_assert_str_eq(nb_safetensors_meta(f, "optimizer.param_groups.0.amsgrad"), "true");
    ck_assert_str_eq(nb_safetensors_meta(f, "optimizer.param_groups.0.weight_decay"), "0.01");
    ck_assert_str_eq(nb_safetensors_meta(f, "optimizer.state.2.step"), "3");
    ck_assert_str_eq(nb_safetensors_meta(f, "optimizer.state.2.param"), "2.weight");
    ck_assert_str_eq(nb_safetensors_meta(f, "loader.position"), "3");
    ck_assert_str_eq(nb_safetensors_meta(f, "scheduler.kind"), "CosineAnnealingLR");
    ck_assert_str_eq(nb_safetensors_meta(f, "scheduler.last_epoch"), "3");
    ck_assert_str_eq(nb_safetensors_meta(f, "optimizer.param_groups.0.params"), "[0, 1, 2, 3]");
    nb_ck_shape(nb_safetensors_get(f, "optimizer.state.2.max_exp_avg_sq"), NB_SHAPE(N_CLASSES, 16));
    nb_tensor *m = nb_safetensors_get(f, "optimizer.state.0.exp_avg");
    nb_ck_shape(m, NB_SHAPE(16, N_IN));
    double got[16 * N_IN], want[16 * N_IN];
    nb_test_values(m, got, 16 * N_IN);
    nb_test_values(nb_optimizer_state(r.opt, 0, "exp_avg"), want, 16 * N_IN);
    ck_assert(memcmp(got, want, sizeof got) == 0);
    ck_assert(got[0] != 0);
    nb_ck_shape(nb_safetensors_get(f, "0.weight"), NB_SHAPE(16, N_IN));
    ck_assert_ptr_null(nb_safetensors_get(f, "optimizer.state.0.momentum_buffer"));
    nb_safetensors_free(f);
    run_free(&r);
}
END_TEST

/* Copies a checkpoint with one metadata value replaced. */
static void tamper(const char *from, const char *to, const char *key, const char *value) {
    nb_safetensors *f = nb_safetensors_load(from);
    NB_CK_NOTNULL(f);
    nb_st_pair *meta = malloc(sizeof *meta * (size_t)f->n_meta);
    int n = 0;
    for (int i = 0; i < f->n_meta; i++) {
        if (!strncmp(f->meta[i].key, "crc32.", 6)) continue;
        meta[n] = f->meta[i];
        if (!strcmp(meta[n].key, key)) meta[n].value = value;
        n++;
    }
    NB_CK_OK(nb_safetensors_save(to, f->tensors, f->n_tensors, meta, n));
    free(meta);
    nb_safetensors_free(f);
}

/* A failed load must leave every part as it was. */
static void expect_load_fails(run *r, const char *path, nb_status st, const char *why) {
    nb_checkpoint ck = ck_of(r);
    NB_CK_OK(nb_save_checkpoint(path_in("before.st"), &ck));
    nb_generator g0 = *nb_default_generator();
    double lr0 = nb_optimizer_get_lr(r->opt);
    NB_CK_FAILS(nb_load_checkpoint(path, &ck, NULL) == NB_OK, st);
    ck_assert_msg(strstr(nb_last_error(), why), "'%s' lacks '%s'", nb_last_error(), why);
    ck_assert_int_eq(ck.global_step, r->step);
    ck_assert_uint_eq(nb_default_generator()->offset, g0.offset);
    ck_assert(nb_optimizer_get_lr(r->opt) == lr0);
    NB_CK_OK(nb_save_checkpoint(path_in("after.st"), &ck));
    ck_assert_msg(same_file(path_in("before.st"), path_in("after.st")), "a failed load (%s) changed the state", why);
}

START_TEST(ckpt_bad_loads_change_nothing) {
    run r, other;
    run_init(&r, false, 1);
    run_until(&r, 4);
    nb_checkpoint ck = ck_of(&r);
    NB_CK_OK(nb_save_checkpoint(path_in("good.st"), &ck));
    run_until(&r, 9); /* move on, so that a load would visibly change things */
    tamper(path_in("good.st"), path_in("t1.st"), "global_step", "abc");
    expect_load_fails(&r, path_in("t1.st"), NB_ERR_FORMAT, "'global_step' is 'abc'");
    tamper(path_in("good.st"), path_in("t2.st"), "loader.seed", "8");
    expect_load_fails(&r, path_in("t2.st"), NB_ERR_STATE, "loader seed 8 saved, the loader has 7");
    tamper(path_in("good.st"), path_in("t3.st"), "optimizer.param_groups.0.betas.1", "1.5");
    expect_load_fails(&r, path_in("t3.st"), NB_ERR_FORMAT, "betas");
    tamper(path_in("good.st"), path_in("t4.st"), "optimizer.state.1.param", "2.bias");
    expect_load_fails(&r, path_in("t4.st"), NB_ERR_STATE, "optimizer parameter 1 is '2.bias' in the file but '0.bias'");
    tamper(path_in("good.st"), path_in("t5.st"), "scheduler._last_lr.0", "nan");
    expect_load_fails(&r, path_in("t5.st"), NB_ERR_FORMAT, "scheduler._last_lr.0");
    tamper(path_in("good.st"), path_in("t6.st"), "nabla.checkpoint", "2");
    expect_load_fails(&r, path_in("t6.st"), NB_ERR_FORMAT, "not a nabla checkpoint");
    NB_CK_OK(nb_module_state_dict_save(r.net, path_in("sd.st")));
    expect_load_fails(&r, path_in("sd.st"), NB_ERR_FORMAT, "not a nabla checkpoint");
    /* an SGD checkpoint into AdamW; another model; a file without the optimizer */
    run_init(&other, true, 1);
    run_until(&other, 2);
    ck = ck_of(&other);
    NB_CK_OK(nb_save_checkpoint(path_in("sgd.st"), &ck));
    expect_load_fails(&r, path_in("sgd.st"), NB_ERR_STATE, "holds SGD state, the optimizer is AdamW");
    nb_module *wide = mlp(N_IN, 17, N_CLASSES);
    ck = (nb_checkpoint){.module = wide};
    NB_CK_OK(nb_save_checkpoint(path_in("wide.st"), &ck));
    expect_load_fails(&r, path_in("wide.st"), NB_ERR_FORMAT, "has no 'loader.epoch'");
    nb_checkpoint ck2 = ck_of(&r);
    ck2.module = wide, ck2.optimizer = NULL, ck2.loader = NULL;
    NB_CK_OK(nb_save_checkpoint(path_in("wide2.st"), &ck2)); /* module and scheduler only */
    run_until(&r, 11); /* the scheduler moves on: the failed load must roll it back */
    ck2 = ck_of(&r);
    ck2.optimizer = NULL, ck2.loader = NULL;
    NB_CK_OK(nb_save_checkpoint(path_in("before.st"), &ck2));
    NB_CK_FAILS(nb_load_checkpoint(path_in("wide2.st"), &ck2, NULL) == NB_OK, NB_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(nb_last_error(), "0.weight: file [17, 8] float32, model [16, 8] float32"));
    NB_CK_OK(nb_save_checkpoint(path_in("after.st"), &ck2)); /* scheduler rolled back too */
    ck_assert(same_file(path_in("before.st"), path_in("after.st")));
    ck2 = ck_of(&r);
    ck2.optimizer = NULL;
    NB_CK_OK(nb_save_checkpoint(path_in("noopt.st"), &ck2));
    expect_load_fails(&r, path_in("noopt.st"), NB_ERR_FORMAT, "has no 'optimizer.kind'");
    ck = ck_of(&r);
    ck.non_strict = true;
    NB_CK_FAILS(nb_load_checkpoint(path_in("missing.st"), &ck, NULL) == NB_OK, NB_ERR_IO);
    nb_module_free(wide);
    run_free(&other), run_free(&r);
}
END_TEST

/* Rewrites a checkpoint into the format before parameter groups: one
 * optimizer group without a params list or the newer Adam key, and the
 * scheduler as records scheduler.<j>.{last_epoch, base_lr, last_lr}. */
static void to_legacy(const char *from, const char *to) {
    nb_safetensors *f = nb_safetensors_load(from);
    NB_CK_NOTNULL(f);
    nb_st_pair *meta = malloc(sizeof *meta * ((size_t)f->n_meta + 1));
    int n = 0;
    static const char *const drop[] = {"optimizer.num_param_groups", "optimizer.param_groups.0.params",
                                       "optimizer.param_groups.0.decoupled_weight_decay", "scheduler.num_values"};
    static const char *const from_key[] = {"scheduler.last_epoch", "scheduler.base_lrs.0", "scheduler._last_lr.0"};
    static const char *const to_key[] = {"scheduler.0.last_epoch", "scheduler.0.base_lr", "scheduler.0.last_lr"};
    for (int i = 0; i < f->n_meta; i++) {
        bool skip = !strncmp(f->meta[i].key, "crc32.", 6);
        for (size_t k = 0; k < sizeof drop / sizeof *drop; k++) skip |= !strcmp(f->meta[i].key, drop[k]);
        if (skip) continue;
        meta[n] = f->meta[i];
        for (size_t k = 0; k < 3; k++)
            if (!strcmp(meta[n].key, from_key[k])) meta[n].key = to_key[k];
        n++;
    }
    meta[n++] = (nb_st_pair){"scheduler.num_states", "1"};
    NB_CK_OK(nb_safetensors_save(to, f->tensors, f->n_tensors, meta, n));
    free(meta);
    nb_safetensors_free(f);
}

START_TEST(ckpt_legacy_format) {
    run a, b;
    run_init(&a, false, 1);
    run_until(&a, TOTAL_STEPS);
    run_init(&b, false, 1);
    run_until(&b, 10);
    nb_checkpoint ck = ck_of(&b);
    NB_CK_OK(nb_save_checkpoint(path_in("new.st"), &ck));
    to_legacy(path_in("new.st"), path_in("old.st"));
    double first[TOTAL_STEPS];
    memcpy(first, b.losses, sizeof first);
    run_free(&b);
    run_init(&b, false, 77);
    ck = ck_of(&b);
    NB_CK_OK(nb_load_checkpoint(path_in("old.st"), &ck, NULL));
    b.step = ck.global_step;
    run_until(&b, TOTAL_STEPS);
    for (int i = 10; i < TOTAL_STEPS; i++) ck_assert_msg(a.losses[i] == b.losses[i], "step %d differs", i);
    run_free(&a), run_free(&b);
}
END_TEST

/* SIGKILL during nb_save_checkpoint (a 64 MiB model, saved over and over)
 * leaves the previous checkpoint loadable and unchanged. */
START_TEST(ckpt_kill_during_save) {
    nb_manual_seed(3);
    nb_module *net = mlp(2048, 4096, 8);
    nb_checkpoint ck = {.module = net, .global_step = 5};
    const char *path = path_in("big.st");
    NB_CK_OK(nb_save_checkpoint(path, &ck));
    NB_CK_OK(nb_save_checkpoint(path_in("copy.st"), &ck));
    int killed_mid_write = 0;
    for (int attempt = 0; attempt < 10 && killed_mid_write < 2; attempt++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            for (;;) nb_save_checkpoint(path, &ck);
        }
        char prefix[300];
        snprintf(prefix, sizeof prefix, "big.st.tmp.%ld.", (long)pid);
        /* wait until the child's temporary file has some data in it */
        bool seen = false;
        for (int i = 0; i < 20000 && !seen; i++) {
            DIR *d = opendir(dir);
            for (struct dirent *e; d && (e = readdir(d)) && !seen;) {
                struct stat sb;
                char p[512];
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                seen = !strncmp(e->d_name, prefix, strlen(prefix)) && !stat(p, &sb) && sb.st_size > (1 << 20);
            }
            closedir(d);
            if (!seen) nanosleep(&(struct timespec){0, 100000}, NULL);
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        /* a leftover temporary file means the kill landed inside a write */
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (strncmp(e->d_name, prefix, strlen(prefix))) continue;
            char p[512];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
            killed_mid_write++;
        }
        closedir(d);
        nb_safetensors *f = nb_safetensors_load(path);
        ck_assert_msg(f != NULL, "checkpoint unreadable after a kill: %s", nb_last_error());
        nb_safetensors_free(f);
        ck_assert(same_file(path, path_in("copy.st")));
    }
    ck_assert_int_ge(killed_mid_write, 1);
    nb_checkpoint back = {.module = net};
    NB_CK_OK(nb_load_checkpoint(path, &back, NULL));
    ck_assert_int_eq(back.global_step, 5);
    nb_module_free(net);
}
END_TEST

/* ---- PyTorch interoperability -------------------------------------------------- */


static nb_module *mnist_mlp(void) {
    nb_module *m = nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 512), nb_nn_relu(),
                                 nb_nn_linear(512, 10));
    NB_CK_NOTNULL(m);
    return m;
}

static double max_abs_diff(nb_tensor *a, nb_tensor *b) {
    NB_CK_NOTNULL(a), NB_CK_NOTNULL(b);
    ck_assert_int_eq(nb_numel(a), nb_numel(b));
    int64_t n = nb_numel(a);
    double *x = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n), d = 0;
    nb_test_values(a, x, n);
    nb_test_values(b, y, n);
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs(x[i] - y[i]));
    free(x), free(y);
    return d;
}

START_TEST(ckpt_torch_interop) {
    char script[1400], cmd[3000];
    ck_assert_msg(nb_test_find_script("torch_interop.py", script, sizeof script), "tests/interop/torch_interop.py not found");
    nb_manual_seed(11);
    nb_module *net = mnist_mlp();
    nb_optimizer *opt = nb_adam(net, (nb_adam_options){.lr = 1e-3});
    nb_generator g = nb_generator_new(5);
    nb_tensor *x = nb_randn(NB_SHAPE(16, 784), NB_F32, &g);
    nb_tensor *y = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(16), NB_F64, &g), 10), NB_I64);
    for (int i = 0; i < 2; i++) { /* so that the checkpoint holds optimizer state too */
        nb_scope *s = nb_scope_begin();
        nb_optimizer_zero_grad(opt);
        NB_CK_OK(nb_backward(nb_cross_entropy(nb_forward(net, x), y)));
        NB_CK_OK(nb_optimizer_step(opt));
        nb_scope_end(s);
    }
    nb_checkpoint ck = {.module = net, .optimizer = opt, .global_step = 2};
    NB_CK_OK(nb_save_checkpoint(path_in("nabla_ckpt.safetensors"), &ck));
    nb_tensor *logits = nb_forward(net, x);
    nb_named_tensor io[] = {{"x", x}, {"logits", logits}};
    NB_CK_OK(nb_safetensors_save(path_in("nabla_io.safetensors"), io, 2, NULL, 0));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s'", script, dir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
        printf("ckpt_torch_interop: skipped: /usr/bin/python3 lacks torch or numpy\n");
        nb_optimizer_free(opt), nb_module_free(net);
        return;
    }
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s failed (status %d)", cmd, rc);
    /* PyTorch's state_dict, in its safetensors layout, into nabla */
    nb_module *back = mnist_mlp();
    NB_CK_OK(nb_module_load_state_dict(back, path_in("torch_mlp.safetensors"), true, NULL));
    nb_safetensors *tl = nb_safetensors_load(path_in("torch_logits.safetensors"));
    NB_CK_NOTNULL(tl);
    double d = max_abs_diff(nb_forward(back, x), nb_safetensors_get(tl, "logits"));
    ck_assert_msg(d <= 1e-5, "PyTorch state_dict -> nabla: max |logits diff| = %g", d);
    nb_safetensors_free(tl);
    nb_module_free(back), nb_optimizer_free(opt), nb_module_free(net);
}
END_TEST

/* from with tensor `name`'s first element set to v (CRCs recomputed). */
static void tamper_tensor(const char *from, const char *to, const char *name, double v) {
    nb_safetensors *f = nb_safetensors_load(from);
    NB_CK_NOTNULL(f);
    nb_tensor *t = nb_safetensors_get(f, name);
    NB_CK_NOTNULL(t);
    nb_tensor *first = nb_reshape(t, NB_SHAPE(-1));
    NB_CK_OK(nb_fill_(nb_narrow(first, 0, 0, 1), v));
    nb_st_pair *meta = malloc(sizeof *meta * (size_t)f->n_meta);
    int n = 0;
    for (int i = 0; i < f->n_meta; i++)
        if (strncmp(f->meta[i].key, "crc32.", 6)) meta[n++] = f->meta[i];
    NB_CK_OK(nb_safetensors_save(to, f->tensors, f->n_tensors, meta, n));
    free(meta);
    nb_safetensors_free(f);
}

/* Regressions (issue 13): the loader validates optimizer and scheduler
 * state as it does tensors: integers that overflow int64/uint64 (strtoll
 * saturated them), steps past 2^53, NaN/inf/negative second moments, and
 * hyperparameters that overflow the parameters' float32 (lr 1e308). */
START_TEST(ckpt_validates_state_values) {
    run r;
    run_init(&r, false, 1);
    run_until(&r, 4);
    nb_checkpoint ck = ck_of(&r);
    NB_CK_OK(nb_save_checkpoint(path_in("good.st"), &ck));
    run_until(&r, 6);
    const struct { const char *key, *value, *why; } metas[] = {
        {"global_step", "99999999999999999999", "'global_step' is '99999999999999999999'"},
        {"rng.offset", "18446744073709551616", "'rng.offset'"},
        {"rng.seed", "-1", "'rng.seed'"},
        {"rng.offset", " 12", "'rng.offset'"},
        {"optimizer.state.0.step", "9007199254740993", "above 2^53"},
        {"optimizer.state.0.step", "+3", "'optimizer.state.0.step'"},
        {"optimizer.param_groups.0.lr", "1e308", "overflows the parameters' float32"},
        {"optimizer.param_groups.0.eps", "1e39", "overflows the parameters' float32"},
        {"scheduler.base_lrs.0", "1e300", "overflows the parameters' float32"},
    };
    for (size_t i = 0; i < sizeof metas / sizeof metas[0]; i++) {
        tamper(path_in("good.st"), path_in("t.st"), metas[i].key, metas[i].value);
        expect_load_fails(&r, path_in("t.st"), NB_ERR_FORMAT, metas[i].why);
    }
    const struct { const char *name; double v; } tensors[] = {
        {"optimizer.state.0.exp_avg_sq", -1e-8}, {"optimizer.state.0.exp_avg_sq", NAN},
        {"optimizer.state.1.max_exp_avg_sq", -1}, {"optimizer.state.2.exp_avg", INFINITY},
    };
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        tamper_tensor(path_in("good.st"), path_in("t.st"), tensors[i].name, tensors[i].v);
        expect_load_fails(&r, path_in("t.st"), NB_ERR_FORMAT, tensors[i].name);
    }
    /* an untouched copy still loads */
    tamper(path_in("good.st"), path_in("t.st"), "global_step", "4");
    NB_CK_OK(nb_load_checkpoint(path_in("t.st"), &ck, NULL));
    run_free(&r);
}
END_TEST

Suite *nb_suite_checkpoint(void) {
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, sd_roundtrip);
    tcase_add_test(tc, ckpt_validates_state_values);
    tcase_add_test(tc, sd_strict_errors_name_keys);
    tcase_add_test(tc, ckpt_resume_adamw_mid_epoch);
    tcase_add_test(tc, ckpt_resume_sgd_epoch_end);
    tcase_add_test(tc, ckpt_file_contents);
    tcase_add_test(tc, ckpt_bad_loads_change_nothing);
    tcase_add_test(tc, ckpt_legacy_format);
    tcase_add_test(tc, ckpt_kill_during_save);
    tcase_add_test(tc, ckpt_torch_interop);
    suite_add_tcase(s, tc);
    return s;
}
