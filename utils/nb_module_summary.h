/* nb_module_summary.h - a model's summary for a given input (torchinfo's
 * summary): each layer's output shape, parameter count and
 * multiply-accumulates, and the totals with memory estimates.
 *
 *   nb_tensor *x = nb_zeros(NB_SHAPE(64, 1, 28, 28), NB_F32);
 *   nb_module_summary(net, 1, &x, NULL, NULL);     // prints the table on stdout
 *
 *   =====================================================================
 *   Layer (type:depth-idx)           Output Shape          Param #    Mult-Adds
 *   =====================================================================
 *   Sequential                       [64, 10]              --         --
 *   ├─Conv2d: 1-1                    [64, 32, 26, 26]      320        12,460,032
 *   ...
 *
 * The forward runs once in eval mode with grad off (then nb_module_train(m,
 * mode it had) restores the root's mode on the whole tree, as torchinfo's
 * model.train(mode) does), with a forward hook on every module of the tree recording the
 * first output's shape and the layer's multiply-accumulates. A module the
 * forward did not call through nb_forward shows "--".
 *
 * Mult-adds count the multiply-accumulates of the matrix products a layer
 * computes itself (fvcore's and torchinfo's convention: elementwise work,
 * norms and activations count 0; a bias add is not a MAC):
 *   Linear, Conv1D (GPT-2's)   numel(output) * in_features
 *   Bilinear                   numel(output) * in1_features * in2_features
 *   Conv1d/2d/3d               numel(output) * (in_channels / groups) * prod(kernel_size)
 *   ConvTranspose1d/2d/3d      numel(input) * (out_channels / groups) * prod(kernel_size)
 *   RNN, LSTM, GRU (+Cell)     (B * T) * numel(every weight_ih_*, weight_hh_*), T = 1 for a cell
 *   MultiheadAttention,        the Q, K, V projections (MultiheadAttention's
 *   GPT2Attention,             in_proj_weight: B * (L + 2 S) * E * E) and
 *   LlamaAttention             QK^T and the weighted sum of V: 2 * B * L * S * E
 *                              (query [B, L, E], key [B, S, .]; S = L without a
 *                              key); their Linear children count their own.
 * The table shows for each layer what it holds and computes itself, and for
 * a layer at the depth limit its whole subtree; a row of `out` always has
 * the subtree's sums. Parameters shared by two layers count once in the
 * totals. Memory: the input's bytes, the parameters' bytes, and
 * the forward pass's: the outputs of every leaf layer (those a backward pass
 * keeps, at most), in their dtypes. */
#ifndef NB_MODULE_SUMMARY_H
#define NB_MODULE_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "nb_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torchinfo.summary's display arguments; zero-initialised means its defaults. */
typedef struct nb_summary_options {
    int depth;   /* rows down to this nesting depth (the root is 0); 0: 3, as torchinfo */
    FILE *file;  /* where the table goes; NULL: stdout */
    bool quiet;  /* print nothing (the numbers still come back) */
} nb_summary_options;

/* One layer: its dotted path ("" for the root; the summary's, freed by
 * nb_summary_free), kind (borrowed from the module) and depth; the first
 * output's shape (ndim -1: not called); parameters and mult-adds of its
 * subtree (shared parameters once); calls: how often its forward ran. */
typedef struct nb_summary_row {
    const char *name;                /* dotted path, "" for the root (owned by the summary) */
    const char *kind;                /* the module's kind, e.g. "Linear" (borrowed) */
    int depth;                       /* nesting depth, the root 0 */
    int calls;                       /* times its forward ran during the summary's forward */
    int ndim;                        /* the first output's dimensions; -1: never called */
    int64_t shape[NB_MAX_DIMS];      /* the first output's shape (the last call's) */
    int64_t params;                  /* parameter elements in its subtree, shared ones once */
    int64_t trainable_params;        /* those of params that require grad */
    int64_t mult_adds;               /* multiply-accumulates of its subtree over all calls */
} nb_summary_row;

/* What nb_module_summary measured: the rows and the totals. */
typedef struct nb_summary {
    nb_summary_row *rows;     /* every module, depth first (the root first), malloc'd */
    int n_rows;               /* entries in rows */
    int64_t total_params;     /* parameter elements of the model, shared ones once */
    int64_t trainable_params; /* those that require grad */
    int64_t mult_adds;        /* multiply-accumulates of one forward (the table's formulas) */
    int64_t input_bytes;      /* bytes of the inputs */
    int64_t forward_bytes;    /* bytes of every leaf layer's outputs */
    int64_t param_bytes;      /* bytes of the parameters */
} nb_summary;

/* Runs m on the n_in inputs (as nb_forward_n; a NULL entry where the module
 * takes an optional input) and prints the table (unless opt->quiet); with
 * out non-NULL, fills it (free with nb_summary_free). opt may be NULL.
 * Errors: NB_ERR_INVALID_ARG (NULL m or inputs, n_in outside [1,
 * NB_FORWARD_MAX], depth < 0), the forward's own, NB_ERR_OOM. */
nb_status nb_module_summary(nb_module *m, int n_in, nb_tensor *const *inputs, const nb_summary_options *opt,
                            nb_summary *out);
/* Frees what nb_module_summary put in s (NULL: no-op) and zeroes it. */
void nb_summary_free(nb_summary *s);

#ifdef __cplusplus
}
#endif

#endif
