/* bench_bert.c - times one full training step (forward, cross_entropy over
 * [B*T, V] logits, backward, AdamW lr 1e-3) of the `bert` workload of
 * shared/bench/torch_ref.py: its Bert (vocab 30522, hidden 768, 6 post-LN
 * GELU layers of 12 heads, feed-forward 3072, learned positions, LayerNorm
 * after the embedding sum, head Linear+GELU+LayerNorm, decoder tied to the
 * token embedding), seq 128, batch 4, random ids and labels, train mode with
 * dropout 0.1, PyTorch's module initialisation. --config bert-base is
 * torch_ref.py's `bert-base`: the same with 12 layers and batch 32.
 * --padding N: every second sequence ends in N padding positions, which an
 * attention_mask (bool [B, T], false = padding) hides from every attention
 * (the [B, 1, 1, T] key-padding mask of a real batch; torch_ref.py has no
 * such workload).
 *
 *   bench_bert [--config bert|bert-base] [--padding N] [--steps N] [--warmup N] [--threads N] [--device cuda]
 *              [--tf32]
 * prints: workload=bert device=cpu mode=fp32 ... median_ms=... min_ms=... */
#include <stdio.h>
#include <string.h>

#include "bench_common.h"

static nb_tensor *forward_masked(nb_module *net, nb_tensor *ids, void *mask) {
    return nb_bert_forward(net, ids, NULL, mask);
}

int main(int argc, char **argv) {
    nb_bench_args a = nb_bench_parse(argc, argv);
    bool base = a.variant && !strcmp(a.variant, "bert-base");
    if (a.variant && !base && strcmp(a.variant, "bert")) {
        fprintf(stderr, "bench_bert: --config %s: must be bert or bert-base\n", a.variant);
        return 2;
    }
    const char *name = base ? "bert-base" : "bert";
    enum { V = 30522, H = 768, HEADS = 12, T = 128 };
    const int LAYERS = base ? 12 : 6, B = base ? 32 : 4;
    nb_bert_config c = nb_bert_config_base(V);
    c.hidden_size = H, c.num_layers = LAYERS, c.num_heads = HEADS, c.intermediate_size = 4 * H;
    c.max_position = T;
    /* torch_ref.py's Bert: no segments, no padding_idx, no dropout on the
     * embeddings, LayerNorm eps 1e-5, the modules' own initialisation */
    c.type_vocab_size = 0, c.pad_token_id = NB_NO_PADDING_IDX, c.embedding_dropout = 0;
    c.layer_norm_eps = 1e-5, c.initializer_range = 0;
    nb_module *net = nb_bert(c);
    nb_optimizer *opt = net ? nb_adamw(net, (nb_adam_options){.lr = 1e-3}) : NULL;
    nb_generator g = nb_generator_new(0);
    nb_tensor *x = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(B, T), NB_F64, &g), V - 1e-3), NB_I64);
    nb_tensor *y = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(B, T), NB_F64, &g), V - 1e-3), NB_I64);
    if (!opt || !x || !y) return nb_bench_fail(name);
    nb_tensor *mask = NULL;
    if (a.padding > 0) { /* attend everywhere but the last `padding` positions of odd rows */
        int64_t pad = a.padding < T ? a.padding : T - 1;
        nb_tensor *pos = nb_reshape(nb_arange(0, T, 1, NB_I64), NB_SHAPE(1, T));
        nb_tensor *odd = nb_reshape(nb_remainder_scalar(nb_arange(0, B, 1, NB_I64), 2), NB_SHAPE(B, 1));
        mask = nb_logical_or(nb_lt_scalar(pos, (double)(T - pad)), nb_eq_scalar(odd, 0));
        if (!mask) return nb_bench_fail(name);
        a.forward = forward_masked, a.forward_ctx = mask;
        name = base ? "bert-base-padded" : "bert-padded";
    }
    int rc = nb_bench_train_steps(name, net, opt, x, y, &a);
    nb_optimizer_free(opt);
    nb_module_free(net);
    return rc;
}
