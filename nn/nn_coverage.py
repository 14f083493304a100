#!/usr/bin/env python3
"""nn_coverage.py - nabla's coverage of torch.nn and torch.nn.functional (PyTorch 2.11).

    python3 nn/nn_coverage.py           writes nn/NN.md
    python3 nn/nn_coverage.py --check   fails if nn/NN.md is not what this script writes, or if a nabla name in
                                        the table is not declared in a public header (run by tests/run_all.sh)

The rows are PyTorch 2.11's torch.nn module classes and public torch.nn.functional functions (the lists of
its documentation pages, checked against dir(torch.nn) / dir(torch.nn.functional) of 2.11 on the GPU machine).
Each row is nabla's name, or missing (with what is missing), or not applicable (with why: lazy modules infer
sizes at the first call, which C constructors take as arguments; Python-only machinery). The percentage
counts the applicable rows present.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HEADERS = ["core/nb_core.h", "autograd/nb_ops.h", "autograd/nb_functional.h", "autograd/nb_autograd.h",
           "nn/nb_nn.h", "nn/nb_transformer.h", "nn/nb_decoder.h", "optim/nb_optim.h", "distributed/nb_distributed.h"]

LAZY = "n/a: lazy module (C constructors take the sizes)"

# (section, torch name, nabla name or a "missing: ..." / "n/a: ..." note)
MODULES = [
    ("Containers", "Module", "nb_module_new"),
    ("Containers", "Sequential", "nb_nn_sequential_array"),
    ("Containers", "ModuleList", "nb_nn_module_list"),
    ("Containers", "ModuleDict", "nb_nn_module_dict"),
    ("Containers", "ParameterList", "nb_nn_parameter_list"),
    ("Containers", "ParameterDict", "nb_nn_parameter_dict"),
    ("Convolution", "Conv1d", "nb_nn_conv1d"),
    ("Convolution", "Conv2d", "nb_nn_conv2d"),
    ("Convolution", "Conv3d", "nb_nn_conv3d"),
    ("Convolution", "ConvTranspose1d", "nb_nn_conv_transpose1d"),
    ("Convolution", "ConvTranspose2d", "nb_nn_conv_transpose2d"),
    ("Convolution", "ConvTranspose3d", "nb_nn_conv_transpose3d"),
    ("Convolution", "LazyConv1d", LAZY),
    ("Convolution", "LazyConv2d", LAZY),
    ("Convolution", "LazyConv3d", LAZY),
    ("Convolution", "LazyConvTranspose1d", LAZY),
    ("Convolution", "LazyConvTranspose2d", LAZY),
    ("Convolution", "LazyConvTranspose3d", LAZY),
    ("Convolution", "Unfold", "nb_nn_unfold"),
    ("Convolution", "Fold", "nb_nn_fold"),
    ("Pooling", "MaxPool1d", "nb_nn_max_pool1d"),
    ("Pooling", "MaxPool2d", "nb_nn_max_pool2d"),
    ("Pooling", "MaxPool3d", "nb_nn_max_pool3d"),
    ("Pooling", "MaxUnpool1d", "nb_nn_max_unpool1d"),
    ("Pooling", "MaxUnpool2d", "nb_nn_max_unpool2d"),
    ("Pooling", "MaxUnpool3d", "nb_nn_max_unpool3d"),
    ("Pooling", "AvgPool1d", "nb_nn_avg_pool1d"),
    ("Pooling", "AvgPool2d", "nb_nn_avg_pool2d"),
    ("Pooling", "AvgPool3d", "nb_nn_avg_pool3d"),
    ("Pooling", "FractionalMaxPool2d", "nb_nn_fractional_max_pool2d"),
    ("Pooling", "FractionalMaxPool3d", "nb_nn_fractional_max_pool3d"),
    ("Pooling", "LPPool1d", "nb_nn_lp_pool1d"),
    ("Pooling", "LPPool2d", "nb_nn_lp_pool2d"),
    ("Pooling", "LPPool3d", "nb_nn_lp_pool3d"),
    ("Pooling", "AdaptiveMaxPool1d", "nb_nn_adaptive_max_pool1d"),
    ("Pooling", "AdaptiveMaxPool2d", "nb_nn_adaptive_max_pool2d"),
    ("Pooling", "AdaptiveMaxPool3d", "nb_nn_adaptive_max_pool3d"),
    ("Pooling", "AdaptiveAvgPool1d", "nb_nn_adaptive_avg_pool1d"),
    ("Pooling", "AdaptiveAvgPool2d", "nb_nn_adaptive_avg_pool2d"),
    ("Pooling", "AdaptiveAvgPool3d", "nb_nn_adaptive_avg_pool3d"),
] + [("Padding", f"{k}Pad{d}d", f"nb_nn_{n}_pad") for k, n in (("Reflection", "reflection"), ("Replication", "replication"),
                                                                 ("Zero", "zero"), ("Constant", "constant"),
                                                                 ("Circular", "circular")) for d in (1, 2, 3)] + [
    ("Activations", "ELU", "nb_nn_elu"),
    ("Activations", "Hardshrink", "nb_nn_hardshrink"),
    ("Activations", "Hardsigmoid", "nb_nn_hardsigmoid"),
    ("Activations", "Hardtanh", "nb_nn_hardtanh"),
    ("Activations", "Hardswish", "nb_nn_hardswish"),
    ("Activations", "LeakyReLU", "nb_nn_leaky_relu"),
    ("Activations", "LogSigmoid", "nb_nn_logsigmoid"),
    ("Activations", "MultiheadAttention", "nb_nn_multihead_attention"),
    ("Activations", "PReLU", "nb_nn_prelu"),
    ("Activations", "ReLU", "nb_nn_relu"),
    ("Activations", "ReLU6", "nb_nn_relu6"),
    ("Activations", "RReLU", "nb_nn_rrelu"),
    ("Activations", "SELU", "nb_nn_selu"),
    ("Activations", "CELU", "nb_nn_celu"),
    ("Activations", "GELU", "nb_nn_gelu"),
    ("Activations", "Sigmoid", "nb_nn_sigmoid"),
    ("Activations", "SiLU", "nb_nn_silu"),
    ("Activations", "Mish", "nb_nn_mish"),
    ("Activations", "Softplus", "nb_nn_softplus"),
    ("Activations", "Softshrink", "nb_nn_softshrink"),
    ("Activations", "Softsign", "nb_nn_softsign"),
    ("Activations", "Tanh", "nb_nn_tanh"),
    ("Activations", "Tanhshrink", "nb_nn_tanhshrink"),
    ("Activations", "Threshold", "nb_nn_threshold"),
    ("Activations", "GLU", "nb_nn_glu"),
    ("Activations", "Softmin", "nb_nn_softmin"),
    ("Activations", "Softmax", "nb_nn_softmax"),
    ("Activations", "Softmax2d", "nb_nn_softmax2d"),
    ("Activations", "LogSoftmax", "nb_nn_log_softmax"),
    ("Activations", "AdaptiveLogSoftmaxWithLoss", "nb_nn_adaptive_log_softmax_with_loss"),
    ("Normalization", "BatchNorm1d", "nb_nn_batch_norm1d"),
    ("Normalization", "BatchNorm2d", "nb_nn_batch_norm2d"),
    ("Normalization", "BatchNorm3d", "nb_nn_batch_norm3d"),
    ("Normalization", "LazyBatchNorm1d", LAZY),
    ("Normalization", "LazyBatchNorm2d", LAZY),
    ("Normalization", "LazyBatchNorm3d", LAZY),
    ("Normalization", "GroupNorm", "nb_nn_group_norm"),
    ("Normalization", "SyncBatchNorm", "missing: batch statistics across ranks"),
    ("Normalization", "InstanceNorm1d", "nb_nn_instance_norm1d"),
    ("Normalization", "InstanceNorm2d", "nb_nn_instance_norm2d"),
    ("Normalization", "InstanceNorm3d", "nb_nn_instance_norm3d"),
    ("Normalization", "LazyInstanceNorm1d", LAZY),
    ("Normalization", "LazyInstanceNorm2d", LAZY),
    ("Normalization", "LazyInstanceNorm3d", LAZY),
    ("Normalization", "LayerNorm", "nb_nn_layer_norm"),
    ("Normalization", "LocalResponseNorm", "nb_nn_local_response_norm"),
    ("Normalization", "RMSNorm", "nb_nn_rms_norm"),
    ("Recurrent", "RNNBase", "n/a: an abstract base class (nb_rnn is the shared functional)"),
    ("Recurrent", "RNN", "nb_nn_rnn"),
    ("Recurrent", "LSTM", "nb_nn_lstm"),
    ("Recurrent", "GRU", "nb_nn_gru"),
    ("Recurrent", "RNNCell", "nb_nn_rnn_cell"),
    ("Recurrent", "LSTMCell", "nb_nn_lstm_cell"),
    ("Recurrent", "GRUCell", "nb_nn_gru_cell"),
    ("Transformer", "Transformer", "nb_nn_transformer"),
    ("Transformer", "TransformerEncoder", "nb_nn_transformer_encoder"),
    ("Transformer", "TransformerDecoder", "nb_nn_transformer_decoder"),
    ("Transformer", "TransformerEncoderLayer", "nb_nn_transformer_encoder_layer"),
    ("Transformer", "TransformerDecoderLayer", "nb_nn_transformer_decoder_layer"),
    ("Linear", "Identity", "nb_nn_identity"),
    ("Linear", "Linear", "nb_nn_linear"),
    ("Linear", "Bilinear", "nb_nn_bilinear"),
    ("Linear", "LazyLinear", LAZY),
    ("Dropout", "Dropout", "nb_nn_dropout"),
    ("Dropout", "Dropout1d", "nb_nn_dropout1d"),
    ("Dropout", "Dropout2d", "nb_nn_dropout2d"),
    ("Dropout", "Dropout3d", "nb_nn_dropout3d"),
    ("Dropout", "AlphaDropout", "nb_nn_alpha_dropout"),
    ("Dropout", "FeatureAlphaDropout", "nb_nn_feature_alpha_dropout"),
    ("Sparse", "Embedding", "nb_nn_embedding"),
    ("Sparse", "EmbeddingBag", "nb_nn_embedding_bag"),
    ("Distance", "CosineSimilarity", "nb_nn_cosine_similarity"),
    ("Distance", "PairwiseDistance", "nb_nn_pairwise_distance"),
    ("Loss", "L1Loss", "nb_nn_l1_loss"),
    ("Loss", "MSELoss", "nb_nn_mse_loss"),
    ("Loss", "CrossEntropyLoss", "nb_nn_cross_entropy_loss"),
    ("Loss", "CTCLoss", "nb_nn_ctc_loss"),
    ("Loss", "NLLLoss", "nb_nn_nll_loss"),
    ("Loss", "PoissonNLLLoss", "nb_nn_poisson_nll_loss"),
    ("Loss", "GaussianNLLLoss", "nb_nn_gaussian_nll_loss"),
    ("Loss", "KLDivLoss", "nb_nn_kl_div_loss"),
    ("Loss", "BCELoss", "nb_nn_bce_loss"),
    ("Loss", "BCEWithLogitsLoss", "nb_nn_bce_with_logits_loss"),
    ("Loss", "MarginRankingLoss", "nb_nn_margin_ranking_loss"),
    ("Loss", "HingeEmbeddingLoss", "nb_nn_hinge_embedding_loss"),
    ("Loss", "MultiLabelMarginLoss", "nb_nn_multilabel_margin_loss"),
    ("Loss", "HuberLoss", "nb_nn_huber_loss"),
    ("Loss", "SmoothL1Loss", "nb_nn_smooth_l1_loss"),
    ("Loss", "SoftMarginLoss", "nb_nn_soft_margin_loss"),
    ("Loss", "MultiLabelSoftMarginLoss", "nb_nn_multilabel_soft_margin_loss"),
    ("Loss", "CosineEmbeddingLoss", "nb_nn_cosine_embedding_loss"),
    ("Loss", "MultiMarginLoss", "nb_nn_multi_margin_loss"),
    ("Loss", "TripletMarginLoss", "nb_nn_triplet_margin_loss"),
    ("Loss", "TripletMarginWithDistanceLoss", "nb_nn_triplet_margin_with_distance_loss"),
    ("Vision", "PixelShuffle", "nb_nn_pixel_shuffle"),
    ("Vision", "PixelUnshuffle", "nb_nn_pixel_unshuffle"),
    ("Vision", "Upsample", "nb_nn_upsample"),
    ("Vision", "UpsamplingNearest2d", "nb_nn_upsampling_nearest2d"),
    ("Vision", "UpsamplingBilinear2d", "nb_nn_upsampling_bilinear2d"),
    ("Vision", "ChannelShuffle", "nb_nn_channel_shuffle"),
    ("Data parallel", "DataParallel", "n/a: single-process multi-GPU replication, deprecated by PyTorch for DDP"),
    ("Data parallel", "parallel.DistributedDataParallel", "nb_ddp_new"),
    ("Utilities", "Flatten", "nb_nn_flatten"),
    ("Utilities", "Unflatten", "nb_nn_unflatten"),
]

FUNCTIONAL = [
    ("Convolution", "conv1d", "nb_conv1d"),
    ("Convolution", "conv2d", "nb_conv2d"),
    ("Convolution", "conv3d", "nb_conv3d"),
    ("Convolution", "conv_transpose1d", "nb_conv_transpose1d"),
    ("Convolution", "conv_transpose2d", "nb_conv_transpose2d"),
    ("Convolution", "conv_transpose3d", "nb_conv_transpose3d"),
    ("Convolution", "unfold", "nb_im2col"),
    ("Convolution", "fold", "nb_col2im"),
    ("Pooling", "avg_pool1d", "nb_avg_pool1d"),
    ("Pooling", "avg_pool2d", "nb_avg_pool2d"),
    ("Pooling", "avg_pool3d", "nb_avg_pool3d"),
    ("Pooling", "max_pool1d", "nb_max_pool1d"),
    ("Pooling", "max_pool2d", "nb_max_pool2d"),
    ("Pooling", "max_pool3d", "nb_max_pool3d"),
    ("Pooling", "max_unpool1d", "nb_max_unpool1d"),
    ("Pooling", "max_unpool2d", "nb_max_unpool2d"),
    ("Pooling", "max_unpool3d", "nb_max_unpool3d"),
    ("Pooling", "lp_pool1d", "nb_lp_pool1d"),
    ("Pooling", "lp_pool2d", "nb_lp_pool2d"),
    ("Pooling", "lp_pool3d", "nb_lp_pool3d"),
    ("Pooling", "adaptive_max_pool1d", "nb_adaptive_max_pool1d"),
    ("Pooling", "adaptive_max_pool2d", "nb_adaptive_max_pool2d"),
    ("Pooling", "adaptive_max_pool3d", "nb_adaptive_max_pool3d"),
    ("Pooling", "adaptive_avg_pool1d", "nb_adaptive_avg_pool1d"),
    ("Pooling", "adaptive_avg_pool2d", "nb_adaptive_avg_pool2d"),
    ("Pooling", "adaptive_avg_pool3d", "nb_adaptive_avg_pool3d"),
    ("Pooling", "fractional_max_pool2d", "nb_fractional_max_pool2d"),
    ("Pooling", "fractional_max_pool3d", "nb_fractional_max_pool3d"),
    ("Attention", "scaled_dot_product_attention", "nb_scaled_dot_product_attention"),
    ("Activations", "threshold", "nb_threshold"),
    ("Activations", "threshold_", "nb_threshold_"),
    ("Activations", "relu", "nb_relu"),
    ("Activations", "relu_", "nb_relu_"),
    ("Activations", "hardtanh", "nb_hardtanh"),
    ("Activations", "hardtanh_", "nb_hardtanh_"),
    ("Activations", "hardswish", "nb_hardswish"),
    ("Activations", "relu6", "nb_relu6"),
    ("Activations", "elu", "nb_elu"),
    ("Activations", "elu_", "nb_elu_"),
    ("Activations", "selu", "nb_selu"),
    ("Activations", "selu_", "nb_selu_"),
    ("Activations", "celu", "nb_celu"),
    ("Activations", "celu_", "nb_celu_"),
    ("Activations", "leaky_relu", "nb_leaky_relu"),
    ("Activations", "leaky_relu_", "nb_leaky_relu_"),
    ("Activations", "prelu", "nb_prelu"),
    ("Activations", "rrelu", "nb_rrelu"),
    ("Activations", "rrelu_", "nb_rrelu_"),
    ("Activations", "glu", "nb_glu"),
    ("Activations", "gelu", "nb_gelu"),
    ("Activations", "logsigmoid", "nb_logsigmoid"),
    ("Activations", "hardshrink", "nb_hardshrink"),
    ("Activations", "tanhshrink", "nb_tanhshrink"),
    ("Activations", "softsign", "nb_softsign"),
    ("Activations", "softplus", "nb_softplus"),
    ("Activations", "softmin", "nb_softmin"),
    ("Activations", "softmax", "nb_softmax"),
    ("Activations", "softshrink", "nb_softshrink"),
    ("Activations", "gumbel_softmax", "nb_gumbel_softmax"),
    ("Activations", "log_softmax", "nb_log_softmax"),
    ("Activations", "tanh", "nb_tanh"),
    ("Activations", "sigmoid", "nb_sigmoid"),
    ("Activations", "hardsigmoid", "nb_hardsigmoid"),
    ("Activations", "silu", "nb_silu"),
    ("Activations", "mish", "nb_mish"),
    ("Normalization", "batch_norm", "nb_batch_norm"),
    ("Normalization", "group_norm", "nb_group_norm"),
    ("Normalization", "instance_norm", "nb_instance_norm"),
    ("Normalization", "layer_norm", "nb_layer_norm"),
    ("Normalization", "local_response_norm", "nb_local_response_norm"),
    ("Normalization", "rms_norm", "nb_rms_norm"),
    ("Normalization", "normalize", "nb_normalize"),
    ("Linear", "linear", "nb_linear"),
    ("Linear", "bilinear", "nb_bilinear"),
    ("Linear", "grouped_mm", "nb_grouped_mm"),
    ("Linear", "scaled_mm", "missing: float8 scaled GEMM"),
    ("Linear", "scaled_grouped_mm", "missing: float8 scaled grouped GEMM"),
    ("Dropout", "dropout", "nb_dropout"),
    ("Dropout", "alpha_dropout", "nb_alpha_dropout"),
    ("Dropout", "feature_alpha_dropout", "nb_feature_alpha_dropout"),
    ("Dropout", "dropout1d", "nb_dropout1d"),
    ("Dropout", "dropout2d", "nb_dropout2d"),
    ("Dropout", "dropout3d", "nb_dropout3d"),
    ("Sparse", "embedding", "nb_embedding"),
    ("Sparse", "embedding_bag", "nb_embedding_bag"),
    ("Sparse", "one_hot", "nb_one_hot"),
    ("Distance", "pairwise_distance", "nb_pairwise_distance"),
    ("Distance", "cosine_similarity", "nb_cosine_similarity"),
    ("Distance", "pdist", "nb_pdist"),
    ("Loss", "binary_cross_entropy", "nb_binary_cross_entropy"),
    ("Loss", "binary_cross_entropy_with_logits", "nb_binary_cross_entropy_with_logits"),
    ("Loss", "poisson_nll_loss", "nb_poisson_nll_loss"),
    ("Loss", "cosine_embedding_loss", "nb_cosine_embedding_loss"),
    ("Loss", "cross_entropy", "nb_cross_entropy_ex"),
    ("Loss", "ctc_loss", "nb_ctc_loss"),
    ("Loss", "gaussian_nll_loss", "nb_gaussian_nll_loss"),
    ("Loss", "hinge_embedding_loss", "nb_hinge_embedding_loss"),
    ("Loss", "kl_div", "nb_kl_div"),
    ("Loss", "l1_loss", "nb_l1_loss"),
    ("Loss", "mse_loss", "nb_mse_loss"),
    ("Loss", "margin_ranking_loss", "nb_margin_ranking_loss"),
    ("Loss", "multilabel_margin_loss", "nb_multilabel_margin_loss"),
    ("Loss", "multilabel_soft_margin_loss", "nb_multilabel_soft_margin_loss"),
    ("Loss", "multi_margin_loss", "nb_multi_margin_loss"),
    ("Loss", "nll_loss", "nb_nll_loss"),
    ("Loss", "huber_loss", "nb_huber_loss"),
    ("Loss", "smooth_l1_loss", "nb_smooth_l1_loss"),
    ("Loss", "soft_margin_loss", "nb_soft_margin_loss"),
    ("Loss", "triplet_margin_loss", "nb_triplet_margin_loss"),
    ("Loss", "triplet_margin_with_distance_loss", "nb_triplet_margin_with_distance_loss"),
    ("Vision", "pixel_shuffle", "nb_pixel_shuffle"),
    ("Vision", "pixel_unshuffle", "nb_pixel_unshuffle"),
    ("Vision", "pad", "nb_pad"),
    ("Vision", "interpolate", "nb_interpolate"),
    ("Vision", "upsample", "nb_interpolate"),
    ("Vision", "upsample_nearest", "nb_interpolate"),
    ("Vision", "upsample_bilinear", "nb_interpolate"),
    ("Vision", "channel_shuffle", "nb_channel_shuffle"),
    ("Vision", "grid_sample", "nb_grid_sample"),
    ("Vision", "affine_grid", "nb_affine_grid"),
    ("Data parallel", "parallel.data_parallel", "n/a: DataParallel's functional form (see DataParallel)"),
]


def declared():
    text = ""
    for h in HEADERS:
        p = os.path.join(ROOT, h)
        if os.path.exists(p):
            text += open(p).read()
    return set(re.findall(r"\b(nb_[a-z0-9_]+)\s*\(", text))


def status(v):
    return "missing" if v.startswith("missing") else "n/a" if v.startswith("n/a") else "present"


def render():
    out = ["# torch.nn coverage", "",
           "<!-- generated by nn/nn_coverage.py; do not edit (tests/run_all.sh checks it) -->", "",
           "Every module class of `torch.nn` and every public function of `torch.nn.functional` in PyTorch 2.11",
           "(checked against `dir()` of both there: `python3 nn/nn_coverage.py --against-torch`), with nabla's",
           "name. Not applicable rows say why; missing rows are still to be written."]
    totals = []
    for title, rows, head in (("Modules (torch.nn)", MODULES, "torch.nn"),
                              ("Functions (torch.nn.functional)", FUNCTIONAL, "torch.nn.functional")):
        n = sum(status(v) != "n/a" for _, _, v in rows)
        got = sum(status(v) == "present" for _, _, v in rows)
        totals.append((got, n))
        out += [f"## {title}: {got} of {n} applicable ({100.0 * got / n:.1f}%)", "",
                f"| section | {head} | nabla |", "|---|---|---|"]
        for sec, name, v in rows:
            out.append(f"| {sec} | `{name}` | {'`' + v + '`' if status(v) == 'present' else v} |")
        out.append("")
    got = sum(g for g, _ in totals)
    n = sum(t for _, t in totals)
    out[7:7] = ["", f"**Coverage: {got} of {n} applicable rows ({100.0 * got / n:.1f}%).**", ""]
    return "\n".join(out)


def against_torch():
    """Names the installed torch has that the table lacks, and the other way round (run with PyTorch 2.11)."""
    import inspect
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    mods = {n for n in dir(nn) if not n.startswith("_") and inspect.isclass(getattr(nn, n)) and
            issubclass(getattr(nn, n), nn.Module)}
    funcs = {n for n in dir(F) if not n.startswith("_") and inspect.isfunction(getattr(F, n)) or
             (not n.startswith("_") and type(getattr(F, n)).__name__ == "builtin_function_or_method")}
    have_m = {t for _, t, _ in MODULES}
    have_f = {t for _, t, _ in FUNCTIONAL}
    print(f"torch {torch.__version__}")
    print("modules in torch.nn, not in the table:", sorted(mods - have_m))
    print("modules in the table, not in torch.nn:", sorted(t for t in have_m - mods if "." not in t))
    print("functions in torch.nn.functional, not in the table:", sorted(funcs - have_f))
    print("functions in the table, not in torch.nn.functional:", sorted(t for t in have_f - funcs if "." not in t))
    return 0


def main():
    if "--against-torch" in sys.argv:
        return against_torch()
    text = render()
    path = os.path.join(HERE, "NN.md")
    if "--check" not in sys.argv:
        open(path, "w").write(text)
        print(text.splitlines()[8])
        return 0
    bad = []
    names = declared()
    for _, torch_name, v in MODULES + FUNCTIONAL:
        if status(v) == "present" and v not in names:
            bad.append(f"{torch_name}: {v} is not declared in a public header")
    if not os.path.exists(path) or open(path).read() != text:
        bad.append("nn/NN.md is out of date: run python3 nn/nn_coverage.py")
    for b in bad:
        print("nn_coverage:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
