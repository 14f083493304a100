/* bench_lstm.c - times one full training step (forward, cross_entropy,
 * backward, Adam) of tests/bench/lstm_ref.py's workload: a 2-layer LSTM
 * (input 1024, hidden 1024, [T, B, I]) and a Linear(1024, 32) head over
 * every position, sequence 128, batch 64, synthetic inputs.
 *
 *   bench_lstm [--steps N] [--warmup N] [--threads N] [--device cuda] [--tf32] [--amp] [--graph]
 * prints: workload=lstm device=... nabla median_ms=... */
#include "bench_common.h"

int main(int argc, char **argv) {
    nb_bench_args a = nb_bench_parse(argc, argv);
    enum { T = 128, B = 64, I = 1024, H = 1024, L = 2, C = 32 };
    nb_module *net = nb_nn_sequential(nb_nn_lstm(I, H, (nb_rnn_options){.num_layers = L}), nb_nn_linear(H, C));
    nb_optimizer *opt = net ? nb_adam(net, (nb_adam_options){.lr = 1e-3}) : NULL;
    nb_generator g = nb_generator_new(0);
    nb_tensor *x = nb_randn(NB_SHAPE(T, B, I), NB_F32, &g);
    nb_tensor *y = nb_to_dtype(nb_mul_scalar(nb_rand(NB_SHAPE(T, B), NB_F64, &g), C - 0.001), NB_I64);
    if (!opt || !x || !y) return nb_bench_fail("lstm");
    int rc = nb_bench_train_steps("lstm", net, opt, x, y, &a);
    nb_optimizer_free(opt);
    nb_module_free(net);
    return rc;
}
