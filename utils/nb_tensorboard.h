/* nb_tensorboard.h - TensorBoard event files (torch.utils.tensorboard's
 * SummaryWriter): scalars, histograms and text that TensorBoard, or
 * tools/nabla-plot, reads from a log directory.
 *
 *   nb_summary_writer *w = nb_summary_writer_open("runs/mlp", NULL);
 *   for (int64_t step = 0; ...; step++) {
 *       nb_summary_writer_add_scalar(w, "train/loss", nb_item(loss), step);
 *       if (step % 100 == 0) nb_summary_writer_add_histogram(w, "fc1/weight", weight, step);
 *   }
 *   nb_summary_writer_close(w);              // flushes; then: tensorboard --logdir runs
 *
 * The file, log_dir/events.out.tfevents.<unix time>.<host>.<pid>.<n><suffix>,
 * is TensorBoard's record format (TFRecord): each record is its length
 * (uint64, little-endian), the length's masked CRC-32C (uint32), an Event
 * protobuf (tensorboard/compat/proto/event.proto, summary.proto) and the
 * data's masked CRC-32C; the first event is file_version "brain.Event:2".
 * The protobufs are packed by protobuf-c from utils/proto/tensorboard.proto.
 *
 * Events are queued in memory and written, whole records only, when
 * max_queue events are waiting, when flush_secs have passed since the last
 * write (checked as events are added), on nb_summary_writer_flush and on
 * close; each write is followed by fdatasync. A crash loses at most the
 * events since the last write, and a failed write is cut back to the last
 * complete record, so the file always parses. A writer may be used from
 * several threads (one lock). */
#ifndef NB_TENSORBOARD_H
#define NB_TENSORBOARD_H

#include <stdint.h>

#include "nb_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An open event file (opaque): nb_summary_writer_open makes one, nb_summary_writer_close frees it. */
typedef struct nb_summary_writer nb_summary_writer;

/* SummaryWriter's arguments; zero-initialised means PyTorch's defaults. */
typedef struct nb_summary_writer_options {
    int max_queue;               /* events queued before a write; 0: 10 */
    double flush_secs;           /* seconds between writes; 0: 120 */
    const char *filename_suffix; /* appended to the file's name; NULL: none */
    const char *comment;         /* appended to the default log_dir; NULL: none */
} nb_summary_writer_options;

/* Opens a new event file in log_dir, creating the directory (and its
 * parents) if needed. log_dir NULL means PyTorch's default,
 * "runs/<Mon>DD_HH-MM-SS_<hostname><comment>". opt may be NULL. Returns
 * NULL on failure. Errors: NB_ERR_INVALID_ARG (negative max_queue or
 * flush_secs, too long a path), NB_ERR_IO (the directory or file cannot
 * be made), NB_ERR_OOM. */
nb_summary_writer *nb_summary_writer_open(const char *log_dir, const nb_summary_writer_options *opt);

/* The event file's path (borrowed, valid until close). NULL for NULL
 * (NB_ERR_INVALID_ARG). */
const char *nb_summary_writer_path(const nb_summary_writer *w);

/* add_scalar: one value of the curve `tag` at global step `step`, stored as
 * float32 (Summary.Value.simple_value, as PyTorch's default). Errors:
 * NB_ERR_INVALID_ARG (NULL or empty tag), NB_ERR_IO (the event was queued
 * but the write it triggered failed: the queue, this event included, is
 * written by the next flush that succeeds; do not add it again). */
nb_status nb_summary_writer_add_scalar(nb_summary_writer *w, const char *tag, double value, int64_t step);

/* add_histogram with bins="tensorflow": the values of a tensor of any
 * float or integer dtype, on any device, counted in PyTorch's default
 * buckets (edges 0, +-1e-12 * 1.1^k below 1e20; a bucket [e_i, e_i+1), the
 * last one closed, as numpy.histogram) and stored as HistogramProto (min,
 * max, num, sum, sum_squares; empty buckets before the first and after the
 * last used one dropped, one empty bucket kept in front, as
 * torch.utils.tensorboard.summary.make_histogram). Errors:
 * NB_ERR_INVALID_ARG (NULL, an empty tensor, a NaN or infinite value, no
 * value inside the buckets), NB_ERR_DTYPE (bool), NB_ERR_OOM, NB_ERR_IO
 * (as add_scalar's). */
nb_status nb_summary_writer_add_histogram(nb_summary_writer *w, const char *tag, nb_tensor *values, int64_t step);

/* add_text: a UTF-8 string (Markdown in TensorBoard's text tab), stored as
 * PyTorch does: tag "<tag>/text_summary", plugin "text", a DT_STRING
 * tensor of shape [1]. Errors: NB_ERR_INVALID_ARG, NB_ERR_IO (as
 * add_scalar's). */
nb_status nb_summary_writer_add_text(nb_summary_writer *w, const char *tag, const char *text, int64_t step);

/* Writes the queued events now (and fdatasync). Errors: NB_ERR_INVALID_ARG
 * (NULL), NB_ERR_IO (the events stay queued for the next try). */
nb_status nb_summary_writer_flush(nb_summary_writer *w);

/* Flushes and frees the writer (NULL: no-op). Returns the flush's status;
 * the writer is freed either way. */
nb_status nb_summary_writer_close(nb_summary_writer *w);

#ifdef __cplusplus
}
#endif

#endif
