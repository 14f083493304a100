/* nb_compile.h - compiled training steps (torch.compile with
 * mode="reduce-overhead"): a step function, run through nb_compiled_step,
 * is guarded, warmed up eagerly, captured once per guard set as a CUDA graph
 * whose elementwise ops are fused into kernels generated at run time, and
 * replayed from then on.
 *
 *   static nb_status train_step(void *ctx, nb_tensor *const *in, nb_tensor **out) {
 *       nb_scope *s = nb_scope_begin();
 *       nb_optimizer_zero_grad(opt);
 *       nb_tensor *loss = nb_cross_entropy(nb_forward(net, in[0]), in[1]);
 *       nb_status st = loss ? nb_backward(loss) : nb_last_status();
 *       if (!st) st = nb_optimizer_step(opt);
 *       if (!st) out[0] = nb_detach(loss), nb_retain(out[0]);   // handed over
 *       nb_scope_end(s);
 *       return st;
 *   }
 *   nb_compiled *c = nb_compile(train_step, NULL, 2, 1, &(nb_compile_options){.module = net});
 *   for (...) {
 *       nb_tensor *loss;
 *       nb_compiled_step(c, (nb_tensor *[]){x, y}, &loss);     // loss: borrowed
 *   }
 *   nb_compiled_free(c);
 *
 * What a call does, for the guard set of its inputs and state (below):
 *   - its first `warmup` calls run the step eagerly (optimizer state, the
 *     autocast cache, cuDNN plans and the kernel caches get made);
 *   - the next call copies the inputs into static tensors of the trace,
 *     captures the step on them (nb_graph_capture_begin_with, with fusion
 *     unless no_fusion) and replays the graph;
 *   - later calls copy the inputs in and replay.
 * A replay gives the bits of the eager step it stands for (the fused
 * kernels round as the eager ones do; random ops draw at replay time, lr
 * and step counts are read from the device: see nb_core.h's CUDA graphs),
 * so a run mixing eager, captured and replayed calls gives the same
 * parameters as an eager run, and checkpoints move freely between them.
 *
 * Guards (torch.compile's): the inputs' dtypes, devices and shapes, the
 * grad mode, the autocast region open for the inputs' device type (none,
 * or its dtype; a step with no inputs: the default device's), and, with
 * options.module, the module's parameter set (a parameter added, removed,
 * replaced by another tensor or re-allocated, compared by address; or its
 * requires_grad flipped). A call whose guards match no trace makes a new
 * one (a "recompile"): a last batch of another size is a trace of its own.
 * Past cache_limit traces the call fails with NB_ERR_STATE naming the first
 * guard in which it differs from the first trace.
 *
 * Graph breaks: a step that cannot be captured (a host read such as
 * nb_item or nb_to_host inside it, an upload from host memory, a device
 * without graphs) runs eagerly for that trace from then on, the reason kept
 * in nb_compiled_get_stats().reason; with fullgraph the call fails instead
 * with the capture's error, which names the op. A capture that fails
 * otherwise (NB_ERR_OOM; a capture that cannot begin because another is
 * under way) fails its call, and the next call captures again.
 * The CPU has no graphs: its traces run eagerly, fullgraph or not (reason
 * "cpu has no graphs (its steps run eagerly)"), guards and outputs as on a
 * GPU.
 *
 * Outputs: the step hands over n_outputs references (retained past its
 * scope); the caller borrows them until the next nb_compiled_step or
 * nb_compiled_free, and may pass them back as inputs to the next call (a
 * recurrent state; outputs may be the inputs' own array). A call that
 * fails leaves the last call's outputs valid, for a retry. After a replay
 * an output is the captured step's tensor, which the next replay
 * overwrites: nb_clone it to keep it. Likewise the
 * tensors the captured step left behind (a parameter's .grad) are the
 * capture's and are rewritten by each replay. */
#ifndef NB_COMPILE_H
#define NB_COMPILE_H

#include <stdbool.h>
#include <stdint.h>

#include "nb_core.h"
#include "nb_nn.h"

/* A compiled step (torch.compile's OptimizedModule around a step); opaque. */
typedef struct nb_compiled nb_compiled;

/* The step: reads inputs[0..n_inputs) and stores n_outputs references it
 * hands over in outputs (NULL is allowed for an output it has none for);
 * returns NB_OK or the first error. Called with the caller's inputs on
 * eager calls and with the trace's static copies when captured. */
typedef nb_status (*nb_step_fn)(void *ctx, nb_tensor *const *inputs, nb_tensor **outputs);

/* How nb_compile runs the step; zero is the defaults. */
typedef struct nb_compile_options {
    nb_module *module; /* guard its parameter set (NULL: no parameter guard) */
    int warmup;        /* eager calls of a new trace before it is captured (0: 2; the examples' optimizers make their state on the first) */
    int cache_limit;   /* traces at most (0: 8, torch._dynamo.config.recompile_limit); the call needing one more fails */
    bool fullgraph;    /* a step that cannot be captured fails the call (torch.compile(fullgraph=True)); false: it runs eagerly */
    bool no_fusion;    /* capture without fusing elementwise ops (nb_graph_options.fuse false) */
} nb_compile_options;

/* What a compiled step has done so far. */
typedef struct nb_compiled_stats {
    int traces;             /* guard sets seen (each traced on its own) */
    int graphs;             /* of them, those captured as graphs */
    int64_t calls;          /* nb_compiled_step calls that ran the step */
    int64_t eager_calls;    /* of them, run eagerly (warm-up and graph breaks) */
    int64_t replays;        /* of them, graph replays (the capturing call's included) */
    uint64_t graph_kernels; /* kernels launched on the device during the captures (all streams), summed over graphs */
    const char *reason;     /* why the last trace that runs eagerly was not captured ("" if none); borrowed */
} nb_compiled_stats;

/* A compiled step over fn(ctx, ...) with n_inputs inputs and n_outputs
 * outputs (each in [0, 16]); opts NULL: the defaults. Nothing runs until
 * the first nb_compiled_step. NULL with NB_ERR_INVALID_ARG (NULL fn, counts
 * or options out of range) or NB_ERR_OOM. */
nb_compiled *nb_compile(nb_step_fn fn, void *ctx, int n_inputs, int n_outputs, const nb_compile_options *opts);
/* Runs the step once on inputs (n_inputs tensors, none requiring grad; on
 * one device) and stores its n_outputs borrowed outputs in outputs (may be
 * NULL when n_outputs is 0). Errors (outputs left as they were; the last
 * call's outputs stay valid): NB_ERR_INVALID_ARG (NULL arguments, an input
 * that requires grad), NB_ERR_DEVICE (inputs on several devices),
 * NB_ERR_STATE (past cache_limit traces; called while a graph is being
 * captured on the inputs' device; a capture that cannot begin), NB_ERR_OOM
 * (host or device memory for the guards, the static inputs or the capture), with fullgraph a capture's error, the
 * errors of copying the inputs in (nb_copy_) and of nb_graph_replay, and
 * the step's own. */
nb_status nb_compiled_step(nb_compiled *c, nb_tensor *const *inputs, nb_tensor **outputs);
/* The counters above (zeros for NULL). */
nb_compiled_stats nb_compiled_get_stats(const nb_compiled *c);
/* Frees the traces, their graphs and static inputs, and the outputs last
 * returned (not while a graph is being captured: it synchronizes). NULL is
 * ignored. */
void nb_compiled_free(nb_compiled *c);

#endif
