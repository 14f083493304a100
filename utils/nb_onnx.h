/* nb_onnx.h - ONNX export of a module's inference graph (torch.onnx.export),
 * for runtimes outside nabla (onnxruntime, TensorRT, browsers).
 *
 *   nb_tensor *x = nb_zeros(NB_SHAPE(1, 1, 28, 28), NB_F32);   // an example input
 *   if (nb_onnx_export(net, 1, &x, "mnist_cnn.onnx", NULL)) fprintf(stderr, "%s\n", nb_last_error());
 *
 * The module is translated layer by layer into standard ONNX operators
 * (opset 17, IR version 8; ai.onnx domain only) as it computes in eval
 * mode: Dropout is the identity, LayerNorm is LayerNormalization, attention
 * is decomposed into MatMul, Softmax, Reshape and Transpose, and GELU into
 * Erf or Tanh arithmetic. The parameters are the graph's initializers under
 * their state_dict names; a tied weight appears once. Dimension 0 of every
 * input and output is the symbolic "batch", and for token-id inputs
 * (BERT, GPT-2) dimension 1 is "sequence"; the other dimensions are the
 * example's. The file is a ModelProto (onnx/onnx.proto as Debian's
 * libonnx-dev ships it, packed by protobuf-c), written atomically.
 *
 * Translated: Sequential, Linear, Conv2d, MaxPool2d, AvgPool2d, Flatten
 * (start_dim 1, end_dim -1), ReLU, Sigmoid, Tanh, Dropout and Identity;
 * nb_bert (input_ids [B, T] -> MLM logits [B, T, V]; without segment ids
 * or attention mask, as its forward with one input); nb_gpt2
 * (input_ids [B, T] -> logits [B, T, V], causal). Models whose parameters
 * are float32. */
#ifndef NB_ONNX_H
#define NB_ONNX_H

#include "nb_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.onnx.export's naming and shape arguments; zero-initialised means the defaults below. */
typedef struct nb_onnx_options {
    const char *input_names[NB_FORWARD_MAX]; /* NULL: "input" (one input), else "input_<i>" */
    const char *output_name;                 /* NULL: "output" */
    const char *graph_name;                  /* NULL: the module's kind */
    bool static_batch;                       /* keep the example's batch size instead of "batch" */
} nb_onnx_options;

/* Writes m's inference graph for inputs shaped like example_inputs (n_in
 * of them; the example runs once, in eval mode with grad off, to check it
 * and to learn the output's shape; then nb_module_train(m, mode it had)
 * restores the root's mode on the whole tree, as torch.onnx.export does) to
 * path. opt may be NULL. Errors: NB_ERR_INVALID_ARG (NULL arguments, n_in
 * outside [1, NB_FORWARD_MAX]), NB_ERR_UNSUPPORTED (a layer kind or option
 * without a translation, named with its path; a model over 2 GiB, which
 * needs ONNX's external data; a build without onnx.proto), NB_ERR_DTYPE
 * (parameters that are not float32), the forward's errors, NB_ERR_IO,
 * NB_ERR_OOM. */
nb_status nb_onnx_export(nb_module *m, int n_in, nb_tensor *const *example_inputs, const char *path,
                         const nb_onnx_options *opt);

#ifdef __cplusplus
}
#endif

#endif
