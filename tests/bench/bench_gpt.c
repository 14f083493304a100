/* bench_gpt.c - times one full training step (forward, cross_entropy over
 * [B*T, V] logits, backward, AdamW lr 1e-3) of a GPT-2-small-shaped model:
 * nb_gpt2 with transformers' GPT2Config() sizes (vocab 50257, 12 layers,
 * hidden 768, 12 heads, feed-forward 3072, 1024 positions, dropout 0.1 in
 * train mode, head tied to the token embedding), sequence 128, batch 4
 * (--seq, --batch; --dropout P sets all three dropouts, 0 for llm.c's
 * setting), random ids and labels: the `gpt2` workload of
 * tests/bench/gpt_ref.py, which runs the same shapes in PyTorch.
 *
 *   bench_gpt [--steps N] [--warmup N] [--threads N] [--device D] [--amp] [--graph]
 *             [--batch N] [--seq N] [--dropout P]
 * prints: workload=gpt2 device=cpu ... median_ms=... min_ms=... and
 * tokens_per_s=... (B*T / median). */
#include <stdio.h>

#include "bench_common.h"

int main(int argc, char **argv) {
    nb_bench_args a = nb_bench_parse(argc, argv);
    nb_set_num_threads(a.threads);
    nb_manual_seed(0);
    const int B = a.batch > 0 ? a.batch : 4, T = a.seq > 0 ? a.seq : 128;
    nb_gpt2_config c = nb_gpt2_config_default();
    if (a.dropout >= 0) c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = a.dropout;
    if (T > c.n_positions) {
        fprintf(stderr, "gpt2: --seq %d is past the %lld positions\n", T, (long long)c.n_positions);
        return 2;
    }
    nb_module *net = nb_gpt2(c);
    nb_optimizer *opt = net ? nb_adamw(net, (nb_adam_options){.lr = 1e-3}) : NULL;
    nb_generator g = nb_generator_new(0);
    double V = (double)c.vocab_size;
    nb_tensor *x = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(B, T), NB_F64, &g), V - 1e-3), NB_I64);
    nb_tensor *y = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(B, T), NB_F64, &g), V - 1e-3), NB_I64);
    if (!opt || !x || !y) return nb_bench_fail("gpt2");
    printf("gpt2: %lld parameters, batch %d x seq %d = %d tokens per step\n", (long long)nb_module_num_params(net), B,
           T, B * T);
    char name[64]; /* workload=gpt2, or gpt2-bBsT for another shape */
    if (B == 4 && T == 128) snprintf(name, sizeof name, "gpt2");
    else snprintf(name, sizeof name, "gpt2-b%ds%d", B, T);
    int rc = nb_bench_train_steps(name, net, opt, x, y, &a);
    nb_optimizer_free(opt);
    nb_module_free(net);
    return rc;
}
