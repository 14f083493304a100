#!/usr/bin/python3
"""module_interop.py - nabla's torch.nn modules against PyTorch's.

Run by tests/test_nn_io.c as
    /usr/bin/python3 tests/interop/module_interop.py DIR
after it wrote, for each case NAME below, DIR/NAME.safetensors (the nabla
module's state_dict, nb_module_state_dict_save) and DIR/NAME_io.safetensors
(inputs "in0", "in1", ... and nabla's outputs "out0", "out1", ..., the
module in eval mode). For each case this script builds the same module in
PyTorch, loads the state_dict with strict=True (so the keys, shapes and
layouts must be PyTorch's), runs it in eval mode on the inputs and requires
every output within 1e-6 (float64 cases) or 1e-5 (float32) of nabla's.
A module the installed torch lacks (CircularPad2d, ZeroPad1d and LPPool3d
before PyTorch 2.1/2.2) is named and skipped. Exit status: 0 pass, 1
mismatch, 77 torch or numpy missing.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np  # noqa: F401  (torch_interop's reader needs it)
    import torch
    from torch_interop import read_safetensors
except ImportError as e:
    print(f"module_interop: skipped ({e})")
    sys.exit(77)

nn = torch.nn


def lstm_call(m, xs):
    out, (h, c) = m(xs[0], (xs[1], xs[2]))
    return out, h, c


def rnn_call(m, xs):
    out, h = m(*xs)
    return out, h


def lstm_cell_call(m, xs):
    return m(xs[0], (xs[1], xs[2]))


# name: (module builder, call on the input list returning a tuple of outputs)
CASES = {
    "lstm": (lambda: nn.LSTM(5, 4, num_layers=2, bidirectional=True, proj_size=3, batch_first=True).double(),
             lstm_call),
    "gru": (lambda: nn.GRU(5, 4, num_layers=2).double(), rnn_call),
    "rnn_relu": (lambda: nn.RNN(5, 4, nonlinearity="relu", bias=False, bidirectional=True).double(), rnn_call),
    "lstm_cell": (lambda: nn.LSTMCell(5, 4).double(), lstm_cell_call),
    "gru_cell": (lambda: nn.GRUCell(5, 4).double(), lambda m, xs: (m(*xs),)),
    "group_norm": (lambda: nn.GroupNorm(2, 6).double(), lambda m, xs: (m(*xs),)),
    "instance_norm": (lambda: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
                      lambda m, xs: (m(*xs),)),
    "batch_norm3d": (lambda: nn.BatchNorm3d(3), lambda m, xs: (m(*xs),)),
    "bce_logits": (lambda: nn.BCEWithLogitsLoss(weight=torch.ones(4), pos_weight=torch.ones(4)),
                   lambda m, xs: (m(*xs),)),
    "cross_entropy": (lambda: nn.CrossEntropyLoss(weight=torch.ones(4), label_smoothing=0.1),
                      lambda m, xs: (m(*xs),)),
    "multi_margin": (lambda: nn.MultiMarginLoss(p=2, margin=0.7, weight=torch.ones(4)), lambda m, xs: (m(*xs),)),
    "triplet": (lambda: nn.TripletMarginLoss(margin=0.5, p=3, swap=True), lambda m, xs: (m(*xs),)),
    "kl_div": (lambda: nn.KLDivLoss(reduction="batchmean", log_target=True), lambda m, xs: (m(*xs),)),
    "gaussian_nll": (lambda: nn.GaussianNLLLoss(full=True), lambda m, xs: (m(*xs),)),
    "pairwise_distance": (lambda: nn.PairwiseDistance(p=3, keepdim=True), lambda m, xs: (m(*xs),)),
    "prelu": (lambda: nn.PReLU(3), lambda m, xs: (m(*xs),)),
    "conv3d": (lambda: nn.Conv3d(2, 3, 2, stride=(1, 2, 1), padding=(1, 0, 0)), lambda m, xs: (m(*xs),)),
    "conv_transpose1d": (lambda: nn.ConvTranspose1d(2, 3, 3, stride=2, output_padding=1), lambda m, xs: (m(*xs),)),
    "conv_transpose3d": (lambda: nn.ConvTranspose3d(2, 2, 2, stride=2), lambda m, xs: (m(*xs),)),
    "reflection_pad2d": (lambda: nn.ReflectionPad2d((1, 2, 0, 1)), lambda m, xs: (m(*xs),)),
    "replication_pad3d": (lambda: nn.ReplicationPad3d((1, 0, 0, 2, 1, 1)), lambda m, xs: (m(*xs),)),
    "constant_pad1d": (lambda: nn.ConstantPad1d((2, -1), 3.5), lambda m, xs: (m(*xs),)),
    "unflatten": (lambda: nn.Unflatten(1, (2, 3)), lambda m, xs: (m(*xs),)),
    "max_pool3d": (lambda: nn.MaxPool3d(2), lambda m, xs: (m(*xs),)),
    "avg_pool3d": (lambda: nn.AvgPool3d(2, stride=1), lambda m, xs: (m(*xs),)),
    "adaptive_max_pool2d": (lambda: nn.AdaptiveMaxPool2d((2, 3)), lambda m, xs: (m(*xs),)),
    "adaptive_avg_pool3d": (lambda: nn.AdaptiveAvgPool3d((1, 2, 2)), lambda m, xs: (m(*xs),)),
    "local_response_norm": (lambda: nn.LocalResponseNorm(3), lambda m, xs: (m(*xs),)),
    "glu": (lambda: nn.GLU(1), lambda m, xs: (m(*xs),)),
    "adaptive_log_softmax": (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0, head_bias=True).double(),
                             lambda m, xs: tuple(m(*xs))),
    "weight_norm_linear": (lambda: nn.utils.parametrizations.weight_norm(nn.Linear(4, 3).double()),
                           lambda m, xs: (m(*xs),)),
    "weight_norm_conv_whole": (lambda: nn.utils.parametrizations.weight_norm(nn.Conv1d(2, 3, 2), dim=None),
                               lambda m, xs: (m(*xs),)),
    "spectral_norm_conv": (lambda: nn.utils.parametrizations.spectral_norm(nn.Conv2d(2, 3, 2)),
                           lambda m, xs: (m(*xs),)),
    "spectral_norm_conv_transpose": (lambda: nn.utils.parametrizations.spectral_norm(nn.ConvTranspose2d(3, 2, 2)),
                                     lambda m, xs: (m(*xs),)),
    "celu": (lambda: nn.CELU(0.5), lambda m, xs: (m(*xs),)),
    "rrelu": (lambda: nn.RReLU(0.1, 0.3), lambda m, xs: (m(*xs),)),
    "softmax2d": (lambda: nn.Softmax2d(), lambda m, xs: (m(*xs),)),
    "log_softmax": (lambda: nn.LogSoftmax(1), lambda m, xs: (m(*xs),)),
    "softmin": (lambda: nn.Softmin(0), lambda m, xs: (m(*xs),)),
    "threshold": (lambda: nn.Threshold(0.1, -2.0), lambda m, xs: (m(*xs),)),
    "hardshrink": (lambda: nn.Hardshrink(), lambda m, xs: (m(*xs),)),
    "softshrink": (lambda: nn.Softshrink(0.3), lambda m, xs: (m(*xs),)),
    "softsign": (lambda: nn.Softsign(), lambda m, xs: (m(*xs),)),
    "tanhshrink": (lambda: nn.Tanhshrink(), lambda m, xs: (m(*xs),)),
    "relu6": (lambda: nn.ReLU6(), lambda m, xs: (m(*xs),)),
    "identity": (lambda: nn.Identity(), lambda m, xs: (m(*xs),)),
    "circular_pad2d": (lambda: nn.CircularPad2d((1, 2, 2, 0)), lambda m, xs: (m(*xs),)),
    "zero_pad1d": (lambda: nn.ZeroPad1d((2, 1)), lambda m, xs: (m(*xs),)),
    "lp_pool3d": (lambda: nn.LPPool3d(2, 2, stride=(1, 2, 1)), lambda m, xs: (m(*xs),)),
    "pixel_shuffle": (lambda: nn.PixelShuffle(2), lambda m, xs: (m(*xs),)),
    "pixel_unshuffle": (lambda: nn.PixelUnshuffle(2), lambda m, xs: (m(*xs),)),
    "upsample_nearest": (lambda: nn.Upsample(scale_factor=2, mode="nearest"), lambda m, xs: (m(*xs),)),
    "upsample_bilinear": (lambda: nn.Upsample(size=(5, 7), mode="bilinear"), lambda m, xs: (m(*xs),)),
    "upsampling_bilinear2d": (lambda: nn.UpsamplingBilinear2d(scale_factor=2), lambda m, xs: (m(*xs),)),
    "lp_pool2d": (lambda: nn.LPPool2d(2, (2, 3), stride=(1, 2), ceil_mode=True), lambda m, xs: (m(*xs),)),
    "lp_pool1d": (lambda: nn.LPPool1d(3, 3, stride=2), lambda m, xs: (m(*xs),)),
    "bilinear": (lambda: nn.Bilinear(3, 2, 5), lambda m, xs: (m(*xs),)),
    "adaptive_max_pool1d": (lambda: nn.AdaptiveMaxPool1d(3), lambda m, xs: (m(*xs),)),
    "adaptive_max_pool3d": (lambda: nn.AdaptiveMaxPool3d((2, 3, 2)), lambda m, xs: (m(*xs),)),
    "channel_shuffle": (lambda: nn.ChannelShuffle(3), lambda m, xs: (m(*xs),)),
    "max_unpool2d": (lambda: nn.MaxUnpool2d(2), lambda m, xs: (m(*xs),)),
    "transformer_decoder_layer": (lambda: nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                                                     batch_first=True).double(),
                                  lambda m, xs: (m(*xs),)),
    "transformer_decoder_norm_first": (lambda: nn.TransformerDecoder(
        nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu", batch_first=True,
                                   norm_first=True), 2, norm=nn.LayerNorm(8)).double(), lambda m, xs: (m(*xs),)),
    "transformer": (lambda: nn.Transformer(8, 2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16,
                                           dropout=0.0, batch_first=True).double(), lambda m, xs: (m(*xs),)),
    "unfold": (lambda: nn.Unfold((2, 3), dilation=(2, 1), padding=(1, 0), stride=(1, 2)), lambda m, xs: (m(*xs),)),
    "fold": (lambda: nn.Fold((5, 4), (2, 3), padding=(0, 1), stride=(1, 2)), lambda m, xs: (m(*xs),)),
    "embedding_bag": (lambda: nn.EmbeddingBag(6, 3, mode="max", padding_idx=2), lambda m, xs: (m(*xs),)),
    "dropout2d_eval": (lambda: nn.Dropout2d(0.5), lambda m, xs: (m(*xs),)),
    "alpha_dropout_eval": (lambda: nn.AlphaDropout(0.5), lambda m, xs: (m(*xs),)),
}


def main():
    d = sys.argv[1]
    bad = 0
    for name, (build, call) in CASES.items():
        try:
            m = build()
        except AttributeError as e:  # a module this torch does not have yet
            print(f"module_interop: {name}: not in torch {torch.__version__} ({e})")
            continue
        sd, _ = read_safetensors(os.path.join(d, name + ".safetensors"))
        io, _ = read_safetensors(os.path.join(d, name + "_io.safetensors"))
        m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()}, strict=True)
        m.eval()
        xs = [torch.from_numpy(io[f"in{i}"].copy()) for i in range(sum(k.startswith("in") for k in io))]
        with torch.no_grad():
            outs = call(m, xs)
        for i, o in enumerate(outs):
            ref = io[f"out{i}"]
            tol = 1e-6 if o.dtype == torch.float64 else 1e-5
            diff = float((o - torch.from_numpy(ref.copy())).abs().max()) if o.numel() else 0.0
            ok = tuple(o.shape) == ref.shape and diff <= tol
            print(f"module_interop: {name} output {i}: shape {tuple(o.shape)}, max |diff| {diff:.3g} "
                  f"{'ok' if ok else 'MISMATCH'}")
            bad += not ok
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
