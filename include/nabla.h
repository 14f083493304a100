/* nabla.h - the umbrella header: everything a training program needs.
 *
 *   #include <nabla.h>      // with: pkg-config --cflags --libs nabla
 *
 * Components: nb_core.h (tensors, scopes, RNG, memory), nb_autograd.h
 * (backward, no_grad, gradcheck), nb_ops.h and nb_functional.h
 * (differentiable ops), nb_nn.h (modules), nb_transformer.h and
 * nb_decoder.h (BERT, GPT-2, Llama), nb_compile.h (compiled training steps), nb_optim.h (optimizers), nb_data.h
 * (datasets, loader, MNIST), nb_text.h and nb_bpe.h (tokenizers),
 * nb_distributed.h (data-parallel training), nb_backend.h (devices and
 * their backends), nb_tensorboard.h (TensorBoard logs),
 * nb_progress.h (progress bars), nb_module_summary.h (model summaries),
 * nb_onnx.h (ONNX export),
 * nb_version.h; nb_deprecated.h keeps renamed functions' old names.
 */
#ifndef NABLA_H
#define NABLA_H

#include "nb_core.h"
#include "nb_extension.h"
#include "nb_safetensors.h"
#include "nb_autograd.h"
#include "nb_ops.h"
#include "nb_foreach.h"
#include "nb_functional.h"
#include "nb_linalg.h"
#include "nb_quantize.h"
#include "nb_op_table.h"
#include "nb_nn.h"
#include "nb_transformer.h"
#include "nb_decoder.h"
#include "nb_compile.h"
#include "nb_optim.h"
#include "nb_data.h"
#include "nb_text.h"
#include "nb_bpe.h"
#include "nb_checkpoint.h"
#include "nb_distributed.h"
#include "nb_backend.h"
#include "nb_tensorboard.h"
#include "nb_progress.h"
#include "nb_module_summary.h"
#include "nb_onnx.h"
#include "nb_deprecated.h"

#endif
