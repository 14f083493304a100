/* nb_checkpoint.h - resumable training checkpoints: everything a training
 * run needs to continue bit for bit as if it had never stopped, in one
 * safetensors file (nb_safetensors.h) that PyTorch users can open.
 *
 *   nb_checkpoint ck = {.module = net, .optimizer = opt, .scheduler = sch,
 *                       .loader = loader, .global_step = step};
 *   if (nb_save_checkpoint("run.safetensors", &ck)) puts(nb_last_error());
 *   ...                                       // later, in a fresh process:
 *   build net, opt, sch, loader exactly as before (same constructors), then
 *   if (nb_load_checkpoint("run.safetensors", &ck, NULL)) puts(nb_last_error());
 *   step = ck.global_step;                    // loader positioned, RNG restored
 *
 * What the file holds (tensor names are PyTorch's state_dict names; all
 * scalar state is metadata, as strings; floats printed with "%.17g", which
 * round-trips every double exactly) - PyTorch's optimizer.state_dict()
 * layout, param_groups with their params index lists and per-parameter
 * state, flattened to keys:
 *   tensors   <module state_dict>            "fc1.weight", "bn1.running_mean", ...
 *             optimizer.state.<i>.<name>     the optimizer's state tensors by
 *                                            PyTorch's names (exp_avg, exp_avg_sq,
 *                                            momentum_buffer, square_avg, ...; nb_optim.h
 *                                            lists each kind's); i: the parameter's
 *                                            index, as the keys of PyTorch's
 *                                            optimizer.state_dict()["state"]
 *   metadata  format = "pt", nabla.checkpoint = "1"
 *             global_step
 *             rng.seed, rng.offset           the generator (Philox key and counter)
 *             loader.epoch, loader.position, loader.seed, loader.num_batches
 *             optimizer.kind                 PyTorch's class name: "SGD", "AdamW", ...
 *             optimizer.num_params, optimizer.num_param_groups
 *             optimizer.param_groups.<g>.params     "[0, 1, 2]": its parameters' indices
 *             optimizer.param_groups.<g>.<key>      every hyperparameter by its PyTorch
 *                                            key (lr, betas.0, betas.1, eps, weight_decay,
 *                                            amsgrad, momentum, ...; true/false for
 *                                            flags, None for Adafactor's eps.0 default)
 *             optimizer.param_groups.<g>.initial_lr (once a scheduler set it)
 *             optimizer.state.<i>.step       updates applied to parameter i
 *             optimizer.state.<i>.param      its name in the module ("" if none)
 *             optimizer.state.<i>.<name>     scalar state (NAdam's mu_product, ASGD's
 *                                            eta and mu, LBFGS's n_iter, t, ...)
 *             scheduler.kind, scheduler.num_values
 *             scheduler.<key>                nb_scheduler_state_dict's pairs:
 *                                            scheduler.last_epoch, scheduler.base_lrs.0,
 *                                            scheduler._last_lr.0, scheduler._schedulers.1.T_cur ...
 *             user.<key>                     the caller's own pairs (nb_checkpoint.user)
 *             crc32.<tensor>                 per-tensor CRC-32 (nb_safetensors.h)
 * Files written before parameter groups (one group, no params list;
 * scheduler records scheduler.<j>.last_epoch / .base_lr / .last_lr) load too.
 * Only the parts given are saved; loading restores the parts given and
 * requires the file to have them. Module state_dict names may not start
 * with "optimizer." (reserved).
 */
#ifndef NB_CHECKPOINT_H
#define NB_CHECKPOINT_H

#include "nb_core.h"
#include "nb_data.h"
#include "nb_nn.h"
#include "nb_optim.h"
#include "nb_safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What to save or restore. Pointers are borrowed; NULL parts are skipped. */
typedef struct nb_checkpoint {
    nb_module *module;       /* required: its state_dict */
    nb_optimizer *optimizer; /* optional: hyperparameters, per-parameter state and steps */
    nb_scheduler *scheduler; /* optional: nb_scheduler_state_dict's pairs */
    nb_loader *loader;       /* optional: epoch and position (nb_loader_seek on load) */
    nb_dataloader *dataloader; /* optional: the same for a DataLoader (nb_dataloader_seek on load, last;
                                  its seed and batches per epoch are checked, a sampler of its own must be
                                  built as when saving (its seed is not saved); the batch it gave last is
                                  released) */
    nb_generator *generator; /* the RNG to save/restore; NULL = nb_default_generator() */
    int64_t global_step;     /* saved; set by nb_load_checkpoint */
    const nb_st_pair *user;  /* save only: n_user extra pairs, stored as "user.<key>"
                                (read them back through nb_load_checkpoint's file) */
    int n_user;              /* save only: number of pairs in user, >= 0 */
    bool non_strict;         /* load: tolerate missing/unexpected module keys
                                (shape mismatches still fail), as strict=False */
    nb_load_report *report;  /* load, optional: the module's key report (free it with
                                nb_load_report_free) */
} nb_checkpoint;

/* Writes ck's parts to path atomically (nb_safetensors_save: temporary file,
 * fsync, rename), so an interrupted save leaves the previous checkpoint
 * intact. Deterministic: equal states give byte-identical files.
 * Errors: NB_ERR_INVALID_ARG (NULL path, ck or module; a module key under
 * "optimizer."; n_user < 0, a NULL user key or value), NB_ERR_IO, NB_ERR_OOM. */
nb_status nb_save_checkpoint(const char *path, const nb_checkpoint *ck);

/* Restores ck's parts from path and sets ck->global_step. The parts must be
 * built as when saving (same module structure, optimizer kind and parameter
 * count, scheduler constructor, loader batch size and seed). Everything is
 * validated before anything changes, so a failed load leaves every part as
 * it was. The optimizer's hyperparameters (every group's lr, betas, ...,
 * including momenta a scheduler cycled) are restored from the file, as
 * PyTorch's optimizer.load_state_dict.
 * file (may be NULL) receives the loaded file, for the caller's "user.*"
 * metadata (nb_safetensors_meta); free it with nb_safetensors_free.
 * Errors (the message names the key or tensor): NB_ERR_INVALID_ARG (NULL
 * path, ck or module), the errors of nb_safetensors_load (NB_ERR_IO,
 * NB_ERR_FORMAT for a corrupt file), NB_ERR_FORMAT (not a nabla checkpoint,
 * a missing or malformed key, a part the file lacks, strict key mismatches;
 * values an optimizer or scheduler could not have written: an integer that
 * overflows int64/uint64 or is not plain decimal digits, a step count above
 * 2^53, optimizer state holding inf or NaN or a negative second moment, a
 * hyperparameter or scheduler lr that overflows the parameters' dtype, such
 * as lr 1e308 with float32 parameters),
 * NB_ERR_SHAPE (a module or optimizer tensor of the wrong shape),
 * NB_ERR_DTYPE (optimizer state of another dtype than its parameter),
 * NB_ERR_STATE (another optimizer kind, parameter count, param groups,
 * scheduler kind, loader seed or batches per epoch than saved), NB_ERR_OOM,
 * and the DataLoader's seek errors (its custom sampler's, batch sampler's
 * or stream's, or a position past the batches its epoch turns out to
 * have: iterable and batch-sampler loaders save no fixed batch count). The
 * DataLoader is positioned first and put back if a later part fails. */
nb_status nb_load_checkpoint(const char *path, nb_checkpoint *ck, nb_safetensors **file);

#ifdef __cplusplus
}
#endif
#endif
