"""cases_nn.py - the differential suite's cases of the CNN, normalization,
attention, linear-algebra and sampling ops (see cases.py)."""
import math  # noqa: F401

import torch
import torch.nn.functional as F

from cases_common import *  # noqa: F401,F403

# ops the installed torch is too old to have (op -> the PyTorch version that added it)
NOT_IN_THIS_TORCH = {}
if not hasattr(F, "grouped_mm"):
    NOT_IN_THIS_TORCH["grouped_mm"] = "2.8"


# ---- CNN, normalization, attention ---------------------------------------------------------------------------------

CT = {F32: (1e-4, 1e-5)}


def pair_of(v):
    return list(v) if isinstance(v, (list, tuple)) else [v, v]


def cnn():
    out = []

    def c2(xs, a):
        pad = "same" if a.get("padding_mode") == "same" else a.get("padding", 0)
        return F.conv2d(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a.get("stride", 1), pad,
                        a.get("dilation", 1), a.get("groups", 1))

    def c1(xs, a):
        pad = "same" if a.get("padding_mode") == "same" else a.get("padding", 0)
        return F.conv1d(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a.get("stride", 1), pad,
                        a.get("dilation", 1), a.get("groups", 1))

    def ct2(xs, a):
        return F.conv_transpose2d(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a.get("stride", 1),
                                  a.get("padding", 0), a.get("output_padding", 0), a.get("groups", 1),
                                  a.get("dilation", 1))

    for args in ({}, {"stride": [2, 1], "padding": [1, 2]}, {"dilation": [2, 2], "padding": [2, 2]},
                 {"groups": 2}, {"padding_mode": "same"}, {"stride": 2, "padding": 1}):
        out += [Case("conv2d", [R((2, 4, 6, 7)), R((6, 4 // args.get("groups", 1), 3, 3)), R((6,))], c2, args,
                     tag="f32", tol=CT),
                Case("conv2d", [R((1, 4, 5, 5), F64), R((2, 4 // args.get("groups", 1), 2, 3), F64)], c2, args,
                     tag="f64")]
        out += [Case("conv1d", [R((2, 4, 9)), R((6, 4 // args.get("groups", 1), 3)), R((6,))], c1,
                     {k: (v[0] if isinstance(v, list) else v) for k, v in args.items()}, tag="f32", tol=CT)]
    out += [Case("conv2d", [R((2, 16, 8, 8)), R((16, 16, 3, 3)), R((16,))], c2, {"padding": 1}, tag="winograd",
                 tol={F32: (1e-3, 1e-4)}),
            Case("conv2d", [R((2, 3, 6, 6)), R((4, 2, 3, 3))], c2, {}, tag="channel error"),
            Case("conv2d", [R((2, 3, 2, 2)), R((4, 3, 3, 3))], c2, {}, tag="kernel too large"),
            Case("conv2d", [R((3, 6, 6)), R((4, 3, 3, 3))], c2, {}, tag="unbatched"),
            Case("conv2d", [R((2, 2, 5, 5)), R((4, 2, 3, 3))], c2, {"padding_mode": "same", "stride": 2},
                 tag="same stride error")]
    for args in ({}, {"stride": [2, 2], "padding": [1, 0], "output_padding": [1, 0]}, {"groups": 2},
                 {"dilation": [2, 1]}):
        out += [Case("conv_transpose2d", [R((2, 4, 4, 5)), R((4, 6 // args.get("groups", 1), 3, 3)), R((6,))], ct2,
                     args, tag="f32", tol=CT),
                Case("conv_transpose2d", [R((1, 2, 3, 3), F64), R((2, 2, 2, 2), F64)], ct2,
                     {k: v for k, v in args.items() if k != "groups"}, tag="f64")]

    def ct1(xs, a):
        return F.conv_transpose1d(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a.get("stride", 1),
                                  a.get("padding", 0), a.get("output_padding", 0), a.get("groups", 1),
                                  a.get("dilation", 1))

    def c3(xs, a):
        pad = "same" if a.get("padding_mode") == "same" else a.get("padding", 0)
        return F.conv3d(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a.get("stride", 1), pad,
                        a.get("dilation", 1), a.get("groups", 1))

    def ct3(xs, a):
        return F.conv_transpose3d(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a.get("stride", 1),
                                  a.get("padding", 0), a.get("output_padding", 0), a.get("groups", 1),
                                  a.get("dilation", 1))

    for args in ({}, {"stride": 2, "padding": 1, "output_padding": 1}, {"groups": 2}, {"dilation": 2, "padding": 1}):
        out += [Case("conv_transpose1d", [R((2, 4, 5)), R((4, 6 // args.get("groups", 1), 3)), R((6,))], ct1, args,
                     tag="f32", tol=CT),
                Case("conv_transpose1d", [R((4, 5), F64), R((4, 2, 2), F64)], ct1,
                     {k: v for k, v in args.items() if k != "groups"}, tag="f64 unbatched")]
    for args in ({}, {"stride": [2, 1, 2], "padding": [1, 0, 1]}, {"dilation": [2, 1, 1], "padding": [2, 1, 0]},
                 {"groups": 2}, {"padding_mode": "same"}, {"padding_mode": "same", "dilation": [2, 1, 2]}):
        out += [Case("conv3d", [R((2, 4, 5, 6, 5)), R((6, 4 // args.get("groups", 1), 3, 2, 3)), R((6,))], c3, args,
                     tag="f32", tol=CT),
                Case("conv3d", [R((1, 2, 4, 3, 4), F64), R((2, 2 // args.get("groups", 1), 2, 2, 2), F64)], c3, args,
                     tag="f64")]
    out += [Case("conv3d", [R((2, 3, 4, 4, 4)), R((4, 2, 2, 2, 2))], c3, {}, tag="channel error"),
            Case("conv3d", [R((1, 2, 2, 4, 4)), R((4, 2, 3, 2, 2))], c3, {}, tag="kernel too large"),
            Case("conv3d", [R((2, 4, 4, 4)), R((3, 2, 2, 2, 2)), R((3,))], c3, {}, tag="unbatched"),
            Case("conv3d", [R((1, 2, 4, 4, 4)), R((3, 2, 2, 2, 2))], c3, {"padding_mode": "same", "stride": 2},
                 tag="same stride error")]
    for args in ({}, {"stride": [2, 1, 2], "padding": [1, 0, 1], "output_padding": [1, 0, 1]}, {"groups": 2},
                 {"dilation": [2, 1, 2], "stride": [3, 1, 1]}, {"stride": 2, "padding": 2}):
        out += [Case("conv_transpose3d", [R((2, 4, 3, 4, 3)), R((4, 6 // args.get("groups", 1), 3, 2, 3)), R((6,))],
                     ct3, args, tag="f32", tol=CT),
                Case("conv_transpose3d", [R((1, 2, 2, 3, 2), F64), R((2, 2, 2, 2, 2), F64)], ct3,
                     {k: v for k, v in args.items() if k != "groups"}, tag="f64")]
    out += [Case("conv_transpose3d", [R((1, 2, 2, 2, 2)), R((2, 2, 2, 2, 2))], ct3,
                 {"stride": 2, "output_padding": 2}, tag="output_padding error"),
            Case("conv_transpose3d", [R((2, 2, 2, 2)), R((2, 3, 2, 2, 2))], ct3, {"stride": 2}, tag="unbatched")]

    def deform(xs, a):
        """torchvision.ops.deform_conv2d, written independently of nabla's composite: each tap's
        samples by F.grid_sample (bilinear, zeros outside, align_corners=True: pixel = (g + 1) / 2 (size - 1)),
        then the grouped GEMM. torchvision is not packaged for this PyTorch."""
        x, off, w = xs[0], xs[1], xs[2]
        b, m = (xs[3] if len(xs) > 3 else None), (xs[4] if len(xs) > 4 else None)
        st, pd, dl = (pair_of(a.get(k, dflt)) for k, dflt in (("stride", 1), ("padding", 0), ("dilation", 1)))
        B, C, H, W = x.shape
        Co, Cw, kh, kw = w.shape
        K = kh * kw
        go = off.shape[1] // (2 * K)
        Ho = (H + 2 * pd[0] - (dl[0] * (kh - 1) + 1)) // st[0] + 1
        Wo = (W + 2 * pd[1] - (dl[1] * (kw - 1) + 1)) // st[1] + 1
        if C % Cw or Co % (C // Cw) or go == 0 or C % go or tuple(off.shape) != (B, 2 * go * K, Ho, Wo):
            raise RuntimeError("deform_conv2d: shapes do not fit (torchvision's checks)")
        oh = torch.arange(Ho, dtype=x.dtype).view(Ho, 1) * st[0] - pd[0]
        ow = torch.arange(Wo, dtype=x.dtype).view(1, Wo) * st[1] - pd[1]
        cols = []
        for g in range(go):
            for k in range(K):
                i, j = divmod(k, kw)
                py = oh + i * dl[0] + off[:, 2 * (g * K + k)]
                px = ow + j * dl[1] + off[:, 2 * (g * K + k) + 1]
                grid = torch.stack([px / (W - 1) * 2 - 1, py / (H - 1) * 2 - 1], dim=-1)
                v = F.grid_sample(x[:, g * (C // go):(g + 1) * (C // go)], grid, mode="bilinear",
                                  padding_mode="zeros", align_corners=True)
                if m is not None:
                    v = v * m[:, g * K + k].unsqueeze(1)
                cols.append(v)  # [B, C/go, Ho, Wo]
        col = torch.stack(cols, 0).view(go, K, B, C // go, Ho * Wo).permute(2, 0, 3, 1, 4).reshape(B, C * K, Ho * Wo)
        gw = C // Cw
        col = col.view(B, gw, Cw * K, Ho * Wo)
        out = torch.matmul(w.reshape(1, gw, Co // gw, Cw * K), col).reshape(B, Co, Ho, Wo)
        return out + b.view(1, Co, 1, 1) if b is not None else out

    def dcase(x, w, ho, wo, go, args, mask=True, bias=True, dt=F32, tag="", spread=1.5):
        K = w[2] * w[3]
        ins = [R(x, dt), R((x[0], 2 * go * K, ho, wo), dt, -spread, spread), R(w, dt),
               R((w[0],), dt) if bias else None, R((x[0], go * K, ho, wo), dt, 0, 1) if mask else None]
        return Case("deform_conv2d", ins, deform, args, tag=tag or ("f32" if dt == F32 else "f64"), tol=CT)

    out += [dcase((2, 4, 5, 6), (6, 4, 3, 3), 3, 4, 1, {}),
            dcase((1, 4, 6, 5), (4, 2, 3, 2), 3, 3, 2, {"stride": [2, 1], "padding": [1, 0], "dilation": [1, 2]},
                  dt=F64),
            dcase((2, 2, 4, 4), (3, 2, 2, 2), 5, 5, 2, {"padding": 1}, mask=False, bias=False, tag="v1, offsets off the "
                  "edges", spread=4),
            dcase((1, 2, 4, 5), (2, 2, 3, 3), 2, 3, 1, {}, dt=F64, spread=0.45, tag="f64 small offsets"),
            Case("deform_conv2d", [R((1, 4, 5, 5)), R((1, 18, 3, 3)), R((2, 3, 3, 3))], deform, {}, tag="channel error"),
            Case("deform_conv2d", [R((1, 2, 5, 5)), R((1, 18, 4, 3)), R((2, 2, 3, 3))], deform, {}, tag="offset error")]

    def mp2(xs, a):
        return tuple(F.max_pool2d(xs[0], a["kernel_size"], a.get("stride") or None, a.get("padding", 0),
                                  a.get("dilation", 1), a.get("ceil_mode", False), return_indices=True))

    def mp1(xs, a):
        return tuple(F.max_pool1d(xs[0], a["kernel_size"], a.get("stride") or None, a.get("padding", 0),
                                  a.get("dilation", 1), a.get("ceil_mode", False), return_indices=True))

    def ap2(xs, a):
        return F.avg_pool2d(xs[0], a["kernel_size"], a.get("stride") or None, a.get("padding", 0),
                            a.get("ceil_mode", False), a.get("count_include_pad", True),
                            a.get("divisor_override") or None)

    def ap1(xs, a):
        return F.avg_pool1d(xs[0], a["kernel_size"], a.get("stride") or None, a.get("padding", 0),
                            a.get("ceil_mode", False), a.get("count_include_pad", True))

    for args in ({"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1},
                 {"kernel_size": 3, "stride": 2, "ceil_mode": True}, {"kernel_size": 2, "dilation": 2},
                 {"kernel_size": 3, "padding": 1, "count_include_pad": False}, {"kernel_size": 5, "padding": 3}):
        out += [Case("max_pool2d", [R((2, 3, 7, 6))], mp2, args, tag="f32", no_grad_out={1}),
                Case("max_pool1d", [R((2, 3, 9), F64)], mp1, args, tag="f64", no_grad_out={1}),
                Case("avg_pool2d", [R((2, 3, 7, 6))], ap2, {k: v for k, v in args.items() if k != "dilation"},
                     tag="f32"),
                Case("avg_pool1d", [R((3, 9), F64)], ap1, {k: v for k, v in args.items() if k != "dilation"},
                     tag="f64")]
    out += [Case("max_pool2d", [T([[[[1.0, 1.0], [NAN, 0.0]]]])], mp2, {"kernel_size": 2}, tag="ties nan",
                 no_grad_out={1}),
            Case("max_pool2d", [R((1, 1, 4, 4))], mp2, {"kernel_size": 2}, views=["T"], tag="view", no_grad_out={1}),
            Case("avg_pool2d", [R((1, 2, 5, 5))], ap2, {"kernel_size": 2, "divisor_override": 3}, tag="divisor")]
    def mp3(xs, a):
        return tuple(F.max_pool3d(xs[0], a["kernel_size"], a.get("stride") or None, a.get("padding", 0),
                                  a.get("dilation", 1), a.get("ceil_mode", False), return_indices=True))

    def ap3(xs, a):
        return F.avg_pool3d(xs[0], a["kernel_size"], a.get("stride") or None, a.get("padding", 0),
                            a.get("ceil_mode", False), a.get("count_include_pad", True),
                            a.get("divisor_override") or None)

    for args in ({"kernel_size": 2}, {"kernel_size": [3, 2, 3], "stride": 2, "padding": [1, 0, 1]},
                 {"kernel_size": 3, "stride": 2, "ceil_mode": True}, {"kernel_size": 2, "dilation": [2, 1, 2]},
                 {"kernel_size": 3, "padding": 1, "count_include_pad": False},
                 {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
                 {"kernel_size": [2, 3, 2], "divisor_override": 5}):
        out += [Case("max_pool3d", [R((2, 2, 5, 6, 5))], mp3, {k: v for k, v in args.items()
                                                                  if k not in ("count_include_pad", "divisor_override")},
                     tag="f32", no_grad_out={1}),
                Case("avg_pool3d", [R((2, 5, 6, 5), F64)], ap3, {k: v for k, v in args.items() if k != "dilation"},
                     tag="f64 unbatched")]
    # ties across depth and plane: PyTorch's first maximum in (d, h, w) order
    out += [Case("max_pool3d", [T([[[[[1.0, 2.0], [2.0, 0.0]], [[2.0, 1.0], [0.0, 2.0]]]]])], mp3, {"kernel_size": 2},
                 tag="ties", no_grad_out={1}),
            Case("max_pool3d", [T([[[[[1.0, NAN], [2.0, 0.0]], [[NAN, 1.0], [0.0, 2.0]]]]])], mp3, {"kernel_size": 2},
                 tag="nan", no_grad_out={1}),
            Case("max_pool3d", [R((1, 1, 2, 2, 2))], mp3, {"kernel_size": 2, "padding": 2}, tag="padding error",
                 no_grad_out={1}),
            Case("avg_pool3d", [R((1, 1, 2, 2, 2))], ap3, {"kernel_size": 3}, tag="too small")]
    for osz in ([1, 1, 1], [2, 3, 2], [5, 4, 3], [7, 7, 6]):
        out += [Case("adaptive_avg_pool3d", [R((2, 3, 5, 4, 3))], lambda xs, a: F.adaptive_avg_pool3d(xs[0], a[
            "output_size"]), {"output_size": osz}, tag="f32")]
    for osz in ([1, 1], [2, 3], [5, 4], [7, 7]):
        out += [Case("adaptive_avg_pool2d", [R((2, 3, 5, 4))], lambda xs, a: F.adaptive_avg_pool2d(xs[0], a[
            "output_size"]), {"output_size": osz}, tag="f32"),
                Case("adaptive_max_pool2d", [R((2, 3, 5, 4), F64)],
                     lambda xs, a: tuple(F.adaptive_max_pool2d(xs[0], a["output_size"], return_indices=True)),
                     {"output_size": osz}, tag="f64", no_grad_out={1}),
                Case("adaptive_avg_pool1d", [R((2, 3, 7))], lambda xs, a: F.adaptive_avg_pool1d(xs[0], a[
                    "output_size"]), {"output_size": osz[0]}, tag="f32")]

    def bn(xs, a):
        rm, rv = (xs[1].clone(), xs[2].clone()) if xs[1] is not None else (None, None)
        y = F.batch_norm(xs[0], rm, rv, xs[3], xs[4], a["training"], a["momentum"], a["eps"])
        return (y, rm, rv) if rm is not None else (y, None, None)

    for training in (True, False):
        for shape in ((4, 3), (2, 3, 5), (2, 3, 2, 2)):
            out += [Case("batch_norm", [R(shape), R((3,)), R((3,), F32, 0.5, 2), R((3,)), R((3,))], bn,
                         {"training": training, "momentum": 0.1, "eps": 1e-5}, req=[True, False, False, True, True],
                         tag="f32", tol={F32: (1e-4, 1e-5)}, no_grad_out={1, 2}),
                    Case("batch_norm", [R(shape, F64), None, None, None, None], bn,
                         {"training": True, "momentum": 0.1, "eps": 1e-5}, tag="no stats", no_grad_out={1, 2})]
    out.append(Case("batch_norm", [R((1, 3)), R((3,)), R((3,), F32, 0.5, 2), None, None], bn,
                    {"training": True, "momentum": 0.1, "eps": 1e-5}, req=[True, False, False], tag="one sample",
                    no_grad_out={1, 2}))
    for p, training in ((0.0, True), (0.5, False), (1.0, True)):
        out.append(Case("dropout", [R((3, 4))], lambda xs, a: F.dropout(xs[0], a["p"], a["training"]),
                        {"p": p, "training": training}, tag="deterministic"))
    out.append(Case("dropout", [R((3, 4))], lambda xs, a: F.dropout(xs[0], a["p"], True), {"p": 1.5},
                    tag="bad p"))
    for mode, ac in (("nearest", False), ("bilinear", False), ("bilinear", True)):
        for size in ([8, 6], [3, 2], [5, 5], [1, 1]):
            f = lambda xs, a: F.interpolate(xs[0], size=a["size"], mode=a["mode"],
                                            align_corners=a["align_corners"] if a["mode"] != "nearest" else None)
            out.append(Case("interpolate", [R((2, 3, 4, 5))], f, {"size": size, "mode": mode, "align_corners": ac},
                            tag="f32", tol={F32: (1e-4, 1e-6)}))
    ln = lambda xs, a: F.layer_norm(xs[0], a["normalized_shape"], xs[1] if len(xs) > 1 else None,
                                    xs[2] if len(xs) > 2 else None, a["eps"])
    out += [Case("layer_norm", [R((3, 5)), R((5,)), R((5,))], ln, {"normalized_shape": [5], "eps": 1e-5},
                 tag="f32", tol={F32: (1e-4, 1e-5)}),
            Case("layer_norm", [R((2, 3, 4), F64)], ln, {"normalized_shape": [3, 4], "eps": 1e-5}, tag="f64"),
            Case("layer_norm", [T([[1.0, 1.0, 1.0], [1e20, -1e20, 0.0]])], ln, {"normalized_shape": [3], "eps": 1e-5},
                 tag="constant row", tol={F32: (1e-4, 1e-5)}),
            Case("layer_norm", [R((3, 5))], ln, {"normalized_shape": [4], "eps": 1e-5}, tag="shape error")]

    def rms(xs, a):
        """F.rms_norm (PyTorch 2.4; 1.13 has none), written out: x / sqrt(mean(x^2) + eps) * weight over the
        last len(normalized_shape) dims; eps 0 is PyTorch's None, the dtype's machine epsilon."""
        ns = a["normalized_shape"]
        x = xs[0]
        if list(x.shape[len(x.shape) - len(ns):]) != list(ns) or len(ns) > x.dim():
            raise RuntimeError("normalized_shape does not fit")
        eps = a.get("eps", 0) or torch.finfo(x.dtype).eps
        dims = tuple(range(x.dim() - len(ns), x.dim()))
        y = x * torch.rsqrt((x * x).mean(dims, keepdim=True) + eps)
        return y * xs[1] if len(xs) > 1 and xs[1] is not None else y

    out += [Case("rms_norm", [R((3, 5)), R((5,))], rms, {"normalized_shape": [5], "eps": 1e-6}, tag="f32",
                 tol={F32: (1e-4, 1e-5)}),
            Case("rms_norm", [R((2, 3, 4), F64)], rms, {"normalized_shape": [3, 4]}, tag="f64 default eps"),
            Case("rms_norm", [T([[0.0, 0.0, 0.0], [1e20, -1e20, 3.0]])], rms, {"normalized_shape": [3], "eps": 1e-5},
                 tag="zero row", tol={F32: (1e-4, 1e-5)}),
            Case("rms_norm", [R((3, 5)), R((4,))], rms, {"normalized_shape": [4]}, tag="shape error")]

    def rope(xs, a):
        """Hugging Face's apply_rotary_pos_emb for one tensor, with [T, D/2] tables repeated to [T, D]."""
        x, c, s = xs
        if x.shape[-1] % 2 or list(c.shape) != [x.shape[-2], x.shape[-1] // 2] or c.shape != s.shape:
            raise RuntimeError("shapes do not fit")
        c2, s2 = torch.cat([c, c], -1), torch.cat([s, s], -1)
        h = x.shape[-1] // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], -1)
        return x * c2 + rot * s2

    out += [Case("apply_rotary_pos_emb", [R((2, 3, 4, 6)), R((4, 3)), R((4, 3))], rope, {}, tag="f32"),
            Case("apply_rotary_pos_emb", [R((5, 4), F64), R((5, 2), F64), R((5, 2), F64)], rope, {}, tag="f64"),
            Case("apply_rotary_pos_emb", [R((2, 4, 5)), R((4, 2)), R((4, 2))], rope, {}, tag="odd error"),
            Case("apply_rotary_pos_emb", [R((2, 4, 6)), R((3, 3)), R((3, 3))], rope, {}, tag="table error")]

    def sdpa(xs, a):
        """PyTorch 2's F.scaled_dot_product_attention (1.13 has none), written out: softmax(q k^T * scale
        + mask) v; a bool mask keeps the true entries; is_causal masks j > i; a fully masked row is NaN."""
        q, k, v = xs[0], xs[1], xs[2]
        if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
            raise RuntimeError("shapes do not fit")
        s = (q @ k.transpose(-1, -2)) * a.get("scale", 1 / math.sqrt(q.shape[-1]))
        if a.get("is_causal"):
            L, S = s.shape[-2], s.shape[-1]
            s = s.masked_fill(torch.ones(L, S, dtype=BOOL).triu(1), -INF)
        if len(xs) > 3 and xs[3] is not None:
            # a bool mask becomes an additive 0 / -inf mask, as PyTorch's math backend does: a fully masked
            # row is NaN and so are the gradients it reaches (masked_fill would give them 0)
            m = xs[3]
            s = s + (torch.zeros(m.shape, dtype=s.dtype).masked_fill(~m, -INF) if m.dtype == BOOL else m)
        return F.softmax(s, -1) @ v

    at = {F32: (1e-4, 1e-5)}
    out += [Case("scaled_dot_product_attention", [R((2, 3, 4)), R((2, 5, 4)), R((2, 5, 6))], sdpa, tag="f32", tol=at),
            Case("scaled_dot_product_attention", [R((1, 2, 3, 4), F64), R((1, 2, 3, 4), F64), R((1, 2, 3, 4), F64)],
                 sdpa, {"is_causal": True}, tag="causal"),
            Case("scaled_dot_product_attention", [R((2, 3, 4)), R((2, 5, 4)), R((2, 5, 6)), R((3, 5), BOOL, -1, 3)],
                 sdpa, tag="bool mask", tol=at),
            Case("scaled_dot_product_attention", [R((2, 3, 4)), R((2, 5, 4)), R((2, 5, 6)), R((2, 1, 5))],
                 sdpa, tag="float mask", tol=at),
            Case("scaled_dot_product_attention", [R((2, 3, 4)), R((2, 3, 4)), R((2, 3, 4)), T([[False] * 3] * 3)],
                 sdpa, tag="all masked"),
            Case("scaled_dot_product_attention", [R((2, 2, 3, 4)), R((1, 2, 5, 4)), R((1, 2, 5, 4))], sdpa,
                 tag="batch broadcast", tol=at),
            Case("scaled_dot_product_attention", [R((2, 2, 3, 4), F64), R((2, 5, 4), F64), R((1, 1, 5, 3), F64)],
                 sdpa, {"is_causal": True}, tag="batch broadcast"),
            Case("scaled_dot_product_attention", [R((2, 3, 4)), R((3, 5, 4)), R((3, 5, 4))], sdpa,
                 tag="batch error"),
            Case("scaled_dot_product_attention", [R((3, 4)), R((5, 4)), R((5, 6))], sdpa, tag="2-d", tol=at),
            Case("scaled_dot_product_attention", [R((2, 3, 4)), R((2, 5, 4)), R((2, 5, 6))], sdpa, {"scale": 0.7},
                 tag="scale", tol=at),
            Case("scaled_dot_product_attention", [R((2, 3, 4)), R((2, 5, 3)), R((2, 5, 6))], sdpa, tag="shape error")]
    out += group_norms()
    out += recurrent()
    out += activations()
    out += more_layers()
    out += contractions()
    out += folds()
    return out


# ---- linear algebra -------------------------------------------------------------------------------------------------

def group_norms():
    """group_norm, instance_norm (with running statistics as outputs), local_response_norm, normalize."""
    gn = lambda xs, a: F.group_norm(xs[0], a["num_groups"], xs[1] if len(xs) > 1 else None,
                                    xs[2] if len(xs) > 2 else None, a["eps"])

    def inorm(xs, a):
        rm, rv = (xs[3].clone(), xs[4].clone()) if len(xs) > 3 else (None, None)
        y = F.instance_norm(xs[0], rm, rv, xs[1], xs[2], a["use_input_stats"], a["momentum"], a["eps"])
        return (y, rm, rv)

    lrn = lambda xs, a: F.local_response_norm(xs[0], a["size"], a["alpha"], a["beta"], a["k"])
    nz = lambda xs, a: F.normalize(xs[0], a["p"], a["dim"], a["eps"])
    out = [Case("group_norm", [R((2, 6, 5)), R((6,)), R((6,))], gn, {"num_groups": 3, "eps": 1e-5}, tag="f32",
                tol={F32: (1e-4, 1e-5)}),
           Case("group_norm", [R((3, 4, 2, 3), F64)], gn, {"num_groups": 2, "eps": 1e-5}, tag="no affine"),
           Case("group_norm", [R((2, 4), F64), R((4,), F64), R((4,), F64)], gn, {"num_groups": 4, "eps": 1e-3},
                tag="[N, C], groups of one"),
           Case("group_norm", [R((2, 6, 5))], gn, {"num_groups": 4, "eps": 1e-5}, tag="groups error"),
           Case("instance_norm", [R((2, 3, 5)), None, None], inorm,
                {"use_input_stats": True, "momentum": 0.1, "eps": 1e-5}, tag="f32", tol={F32: (1e-4, 1e-5)},
                no_grad_out={1, 2}),
           Case("instance_norm", [R((2, 3, 2, 3), F64), R((3,), F64), R((3,), F64), R((3,), F64),
                                  R((3,), F64, 0.5, 2)], inorm, {"use_input_stats": True, "momentum": 0.2, "eps": 1e-5},
                tag="affine, running stats", req=[True, True, True, False, False], no_grad_out={1, 2}),
           Case("instance_norm", [R((2, 3, 4), F64), None, None, R((3,), F64), R((3,), F64, 0.5, 2)], inorm,
                {"use_input_stats": False, "momentum": 0.1, "eps": 1e-5}, tag="eval", req=[True, False, False, False, False],
                no_grad_out={1, 2}),
           Case("instance_norm", [R((2, 3, 1)), None, None], inorm,
                {"use_input_stats": True, "momentum": 0.1, "eps": 1e-5}, tag="one element error", no_grad_out={1, 2}),
           Case("local_response_norm", [R((2, 5, 3))], lrn, {"size": 2, "alpha": 1e-4, "beta": 0.75, "k": 1.0},
                tag="f32"),
           Case("local_response_norm", [R((2, 6, 3, 2), F64)], lrn, {"size": 3, "alpha": 0.5, "beta": 0.5, "k": 2.0},
                tag="4-d, size 3"),
           Case("local_response_norm", [R((2, 4, 2, 2, 2), F64)], lrn, {"size": 5, "alpha": 0.1, "beta": 1.0, "k": 1.0},
                tag="5-d, size past C"),
           Case("normalize", [R((3, 4))], nz, {"p": 2.0, "dim": 1, "eps": 1e-12}, tag="f32"),
           Case("normalize", [R((3, 4, 2), F64)], nz, {"p": 1.0, "dim": -1, "eps": 1e-12}, tag="p 1"),
           Case("normalize", [T([[0.0, 0.0], [3.0, 4.0]], F64)], nz, {"p": 2.0, "dim": 1, "eps": 0.5},
                tag="zero row clamps")]
    return out


def rnn_module(mode, I, H, a):
    """The torch.nn module a case describes (for its parameters' shapes)."""
    kw = dict(num_layers=a["num_layers"], bias=a["bias"], batch_first=a["batch_first"],
              bidirectional=a["bidirectional"])
    if mode == "LSTM":
        return torch.nn.LSTM(I, H, proj_size=a["proj_size"], **kw)
    if mode == "GRU":
        return torch.nn.GRU(I, H, **kw)
    return torch.nn.RNN(I, H, nonlinearity="relu" if mode == "RNN_RELU" else "tanh", **kw)


def rnn_params(mode, I, H, a, dt):
    """Random parameters of that module, in its _flat_weights order."""
    m = rnn_module(mode, I, H, a).to(dt)
    return [R(tuple(p.shape), dt, -0.5, 0.5) for p in m._flat_weights]


def recurrent():
    """torch._VF.rnn_tanh / rnn_relu / lstm / gru (what nn.RNN, LSTM and GRU call, with their unbatched
    handling), and the cells (with RNNCell's)."""
    def rnn(xs, a):
        x, hx, cx, params = xs[0], xs[1], xs[2], list(xs[3:])
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(1)
            hx = hx.unsqueeze(1) if hx is not None else None
            cx = cx.unsqueeze(1) if cx is not None else None
        B = x.shape[0 if a["batch_first"] else 1]
        D = 2 if a["bidirectional"] else 1
        G = {"LSTM": 4, "GRU": 3}.get(a["mode"], 1)
        H = params[0].shape[0] // G
        Hout = a["proj_size"] or H
        z = lambda sz: torch.zeros(a["num_layers"] * D, B, sz, dtype=x.dtype)
        hx = hx if hx is not None else z(Hout)
        f = {"LSTM": torch._VF.lstm, "GRU": torch._VF.gru, "RNN_RELU": torch._VF.rnn_relu}.get(a["mode"],
                                                                                             torch._VF.rnn_tanh)
        state = [hx, cx if cx is not None else z(H)] if a["mode"] == "LSTM" else hx
        res = f(x, state, params, a["bias"], a["num_layers"], 0.0, False, a["bidirectional"], a["batch_first"])
        if unbatched:
            res = tuple(r.squeeze(1) for r in res)
        return tuple(res)

    def cell(xs, a):
        x, hx, cx, w = xs[0], xs[1], xs[2], xs[3:]
        b = (w[2], w[3]) if len(w) > 2 else (None, None)
        unbatched = x.dim() == 1
        if unbatched:
            x, hx, cx = x.unsqueeze(0), hx.unsqueeze(0), cx.unsqueeze(0) if cx is not None else None
        if a["mode"] == "LSTM":
            res = tuple(torch._VF.lstm_cell(x, (hx, cx), w[0], w[1], *b))
        else:
            f = {"GRU": torch._VF.gru_cell, "RNN_RELU": torch._VF.rnn_relu_cell}.get(a["mode"],
                                                                                   torch._VF.rnn_tanh_cell)
            res = (f(x, hx, w[0], w[1], *b),)
        return tuple(r.squeeze(0) for r in res) if unbatched else res

    def args(mode, L=1, bias=True, bf=False, bi=False, proj=0):
        return {"mode": mode, "num_layers": L, "bias": bias, "batch_first": bf, "bidirectional": bi,
                "proj_size": proj}

    out = []
    T, B, I, H = 4, 3, 5, 4
    for mode in ("RNN_TANH", "RNN_RELU", "GRU", "LSTM"):
        G = {"LSTM": 4, "GRU": 3}.get(mode, 1)
        a = args(mode)
        st = lambda n, sz, dt=F64: R((n, B, sz), dt, -0.5, 0.5)
        out += [Case("rnn", [R((T, B, I)), None, None] + rnn_params(mode, I, H, a, F32), rnn, a, tag=mode + " f32",
                     tol={F32: (1e-4, 1e-5)})]
        a2 = args(mode, L=2, bi=True, bf=True)
        cx = st(4, H) if mode == "LSTM" else None
        out += [Case("rnn", [R((B, T, I), F64), st(4, H), cx] + rnn_params(mode, I, H, a2, F64), rnn, a2,
                     tag=mode + " 2 layers, bidirectional, batch_first, initial states")]
        a3 = args(mode, bias=False)
        out += [Case("rnn", [R((T, I), F64), None, None] + rnn_params(mode, I, H, a3, F64), rnn, a3,
                     tag=mode + " unbatched, no bias")]
        w = [R((G * H, I), F64, -0.5, 0.5), R((G * H, H), F64, -0.5, 0.5), R((G * H,), F64, -0.5, 0.5),
             R((G * H,), F64, -0.5, 0.5)]
        c0 = R((B, H), F64) if mode == "LSTM" else None
        out += [Case("rnn_cell", [R((B, I), F64), R((B, H), F64), c0] + w, cell, {"mode": mode}, tag=mode),
                Case("rnn_cell", [R((I,), F64), R((H,), F64), R((H,), F64) if mode == "LSTM" else None] + w[:2], cell,
                     {"mode": mode}, tag=mode + " unbatched, no bias")]
    ap = args("LSTM", L=2, bi=True, proj=3)
    out += [Case("rnn", [R((T, B, I), F64), R((4, B, 3), F64), R((4, B, H), F64)] + rnn_params("LSTM", I, H, ap, F64),
                 rnn, ap, tag="LSTM proj_size, 2 layers, bidirectional"),
            Case("rnn", [R((T, B, I + 1)), None, None] + rnn_params("GRU", I, H, args("GRU"), F32), rnn, args("GRU"),
                 tag="input size error"),
            Case("rnn", [R((T, B, I)), R((2, B, H)), None] + rnn_params("GRU", I, H, args("GRU"), F32), rnn,
                 args("GRU"), tag="hx shape error")]
    return out


def packed():
    """pack_padded_sequence, pad_packed_sequence, pad_sequence, pack_sequence, and RNN/LSTM/GRU over packed input
    (multi-layer, bidirectional, initial states), as nn.LSTM runs it (states permuted into the sorted order and
    back). Lengths without ties: torch.sort's order of ties is unspecified."""
    from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence

    def parts(p):
        return (p.data, p.batch_sizes) + ((p.sorted_indices, p.unsorted_indices) if p.sorted_indices is not None else ())

    ppk = lambda xs, a: parts(pack_padded_sequence(xs[0], xs[1], a["batch_first"], a["enforce_sorted"]))
    pdp = lambda xs, a: tuple(pad_packed_sequence(pack_padded_sequence(xs[0], xs[1], a["batch_first"], False),
                                                  a["batch_first"], a["padding_value"], a["total_length"] or None))

    def pds(xs, a):
        if a["padding_side"] == "left":  # as pad_sequence(padding_side="left") of 2.11: flip, pad right, flip back
            p = pad_sequence([x.flip(0) for x in xs], a["batch_first"], a["padding_value"])
            return p.flip(1 if a["batch_first"] else 0)
        return pad_sequence(list(xs), a["batch_first"], a["padding_value"])

    psq = lambda xs, a: parts(pack_sequence(list(xs), a["enforce_sorted"]))
    out = []
    for bf in (False, True):
        x = R((2, 5, 3), F64) if bf else R((5, 2, 3), F64)
        out += [Case("pack_padded_sequence", [R((5, 3, 2)), T([5, 3, 1], I64)], ppk,
                     {"batch_first": False, "enforce_sorted": True}, tag="sorted"),
                Case("pack_padded_sequence", [x, T([2, 5], I64)], ppk, {"batch_first": bf, "enforce_sorted": False},
                     tag="unsorted" + (" batch_first" if bf else "")),
                Case("pad_packed_sequence", [x, T([2, 5], I64)], pdp,
                     {"batch_first": bf, "padding_value": -1.5, "total_length": 0}, tag="round trip"),
                Case("pad_packed_sequence", [x, T([3, 4], I64)], pdp,
                     {"batch_first": bf, "padding_value": 0.0, "total_length": 7}, tag="total_length")]
    out += [Case("pack_padded_sequence", [R((5, 3, 2)), T([3, 5, 1], I64)], ppk,
                 {"batch_first": False, "enforce_sorted": True}, tag="not sorted error"),
            Case("pad_packed_sequence", [R((5, 2, 3)), T([2, 5], I64)], pdp,
                 {"batch_first": False, "padding_value": 0.0, "total_length": 3}, tag="total_length error")]
    seqs = [R((3, 2), F64), R((5, 2), F64), R((1, 2), F64)]
    for side in ("right", "left"):
        for bf in (False, True):
            out.append(Case("pad_sequence", seqs, pds, {"batch_first": bf, "padding_value": 0.5, "padding_side": side},
                            tag=side + (" batch_first" if bf else "")))
    out += [Case("pad_sequence", [R((3, 2)), R((2, 3))], pds,
                 {"batch_first": False, "padding_value": 0.0, "padding_side": "right"}, tag="shape error"),
            Case("pack_sequence", seqs, psq, {"enforce_sorted": False}, tag="unsorted"),
            Case("pack_sequence", [seqs[1], seqs[0], seqs[2]], psq, {"enforce_sorted": True}, tag="sorted")]

    def rnn_packed(xs, a):
        x, lengths, hx, cx, params = xs[0], xs[1], xs[2], xs[3], list(xs[4:])
        p = pack_padded_sequence(x, lengths, enforce_sorted=False)
        B, D = x.shape[1], 2 if a["bidirectional"] else 1
        G = {"LSTM": 4, "GRU": 3}.get(a["mode"], 1)
        H = params[0].shape[0] // G
        Hout = a["proj_size"] or H
        z = lambda sz: torch.zeros(a["num_layers"] * D, B, sz, dtype=x.dtype)
        hx = (hx if hx is not None else z(Hout)).index_select(1, p.sorted_indices)
        f = {"LSTM": torch._VF.lstm, "GRU": torch._VF.gru, "RNN_RELU": torch._VF.rnn_relu}.get(a["mode"],
                                                                                             torch._VF.rnn_tanh)
        if a["mode"] == "LSTM":
            cx = (cx if cx is not None else z(H)).index_select(1, p.sorted_indices)
            res = f(p.data, p.batch_sizes, [hx, cx], params, a["bias"], a["num_layers"], 0.0, False, a["bidirectional"])
        else:
            res = f(p.data, p.batch_sizes, hx, params, a["bias"], a["num_layers"], 0.0, False, a["bidirectional"])
        padded, _ = pad_packed_sequence(PackedSequence(res[0], p.batch_sizes, p.sorted_indices, p.unsorted_indices))
        return (padded,) + tuple(s.index_select(1, p.unsorted_indices) for s in res[1:])

    Tn, B, I, H = 5, 3, 3, 4
    lengths = T([3, 5, 2], I64)
    for mode in ("RNN_TANH", "GRU", "LSTM"):
        for L, bi in ((1, False), (2, True)):
            a = {"mode": mode, "num_layers": L, "bias": True, "batch_first": False, "bidirectional": bi, "proj_size": 0}
            D = 2 if bi else 1
            hx = R((L * D, B, H), F64, -0.5, 0.5)
            cx = R((L * D, B, H), F64, -0.5, 0.5) if mode == "LSTM" else None
            out.append(Case("rnn_packed", [R((Tn, B, I), F64), lengths, hx, cx] + rnn_params(mode, I, H, a, F64),
                            rnn_packed, a, tag="%s %d layer%s%s" % (mode, L, "s" if L > 1 else "",
                                                                    ", bidirectional" if bi else "")))
    ap = {"mode": "LSTM", "num_layers": 2, "bias": True, "batch_first": False, "bidirectional": True, "proj_size": 2}
    out += [Case("rnn_packed", [R((Tn, B, I)), lengths, None, None] + rnn_params("LSTM", I, H, ap, F32), rnn_packed, ap,
                 tag="LSTM proj_size f32, zero states", tol={F32: (1e-4, 1e-5)})]
    return out


def fractional_pools():
    """fractional_max_pool2d / 3d with given samples (PyTorch's _random_samples): values, indices, gradients."""
    def fmp(d):
        f = F.fractional_max_pool2d if d == 2 else F.fractional_max_pool3d

        def call(xs, a):
            kw = {"output_size": a["output_size"]} if "output_size" in a else {"output_ratio": a["output_ratio"]}
            return tuple(f(xs[0], a["kernel_size"], return_indices=True, _random_samples=xs[1], **kw))
        return call
    S = lambda *shape: R(shape, F64, 0, 1)
    return [Case("fractional_max_pool2d", [R((2, 3, 7, 6), F64), S(2, 3, 2)], fmp(2),
                 {"kernel_size": [2, 3], "output_size": [4, 3]}, req=[True, False], tag="output_size f64"),
            Case("fractional_max_pool2d", [R((2, 2, 9, 9)), R((2, 2, 2), F32, 0, 1)], fmp(2),
                 {"kernel_size": [3, 3], "output_ratio": [0.5, 0.6]}, req=[True, False], tag="output_ratio f32"),
            Case("fractional_max_pool2d", [R((3, 5, 5), F64), S(1, 3, 2)], fmp(2),
                 {"kernel_size": [2, 2], "output_size": [2, 3]}, req=[True, False], tag="unbatched"),
            Case("fractional_max_pool2d", [R((1, 1, 4, 4)), R((1, 1, 2), F32, 0, 1)], fmp(2),
                 {"kernel_size": [3, 3], "output_size": [3, 3]}, req=[True, False], tag="too large error"),
            Case("fractional_max_pool3d", [R((2, 2, 5, 6, 7), F64), S(2, 2, 3)], fmp(3),
                 {"kernel_size": [2, 2, 3], "output_size": [3, 4, 3]}, req=[True, False], tag="output_size f64"),
            Case("fractional_max_pool3d", [R((1, 2, 6, 6, 6)), R((1, 2, 3), F32, 0, 1)], fmp(3),
                 {"kernel_size": [2, 2, 2], "output_ratio": [0.5, 0.5, 0.7]}, req=[True, False], tag="output_ratio f32")]


def activations():
    """celu, softsign, softshrink, hardshrink, tanhshrink, threshold, glu, prelu, rrelu, softmin."""
    out = []
    for dt in (F32, F64):
        tag = "f32" if dt == F32 else "f64"
        x = R((3, 4), dt, -2, 2)
        out += [Case("celu", [x], lambda xs, a: F.celu(xs[0], a["alpha"]), {"alpha": 1.0}, tag=tag),
                Case("celu", [x], lambda xs, a: F.celu(xs[0], a["alpha"]), {"alpha": 0.5}, tag=tag + " alpha 0.5"),
                Case("softsign", [x], lambda xs, a: F.softsign(xs[0]), tag=tag),
                Case("softshrink", [x], lambda xs, a: F.softshrink(xs[0], a["lambd"]), {"lambd": 0.5}, tag=tag),
                Case("hardshrink", [x], lambda xs, a: F.hardshrink(xs[0], a["lambd"]), {"lambd": 0.7}, tag=tag),
                Case("tanhshrink", [x], lambda xs, a: F.tanhshrink(xs[0]), tag=tag),
                Case("threshold", [x], lambda xs, a: F.threshold(xs[0], a["threshold"], a["value"]),
                     {"threshold": 0.3, "value": -1.5}, tag=tag),
                Case("glu", [R((3, 4, 2), dt)], lambda xs, a: F.glu(xs[0], a["dim"]), {"dim": 1}, tag=tag),
                Case("prelu", [R((2, 3, 4), dt, -2, 2), R((3,), dt)], lambda xs, a: F.prelu(xs[0], xs[1]),
                     tag=tag + " per channel"),
                Case("prelu", [x, R((1,), dt)], lambda xs, a: F.prelu(xs[0], xs[1]), tag=tag + " shared"),
                Case("rrelu", [x], lambda xs, a: F.rrelu(xs[0], a["lower"], a["upper"], a["training"]),
                     {"lower": 0.1, "upper": 0.3, "training": False}, tag=tag + " eval"),
                Case("rrelu", [x], lambda xs, a: F.rrelu(xs[0], a["lower"], a["upper"], a["training"]),
                     {"lower": 0.2, "upper": 0.2, "training": True}, tag=tag + " training, lower = upper"),
                Case("softmin", [x], lambda xs, a: F.softmin(xs[0], a["dim"]), {"dim": 1}, tag=tag)]
    for name, fn, args in (("relu_", lambda xs, a: F.relu_(xs[0].clone()), {}),
                           ("selu_", lambda xs, a: F.selu_(xs[0].clone()), {}),
                           ("leaky_relu_", lambda xs, a: F.leaky_relu_(xs[0].clone(), a["negative_slope"]),
                            {"negative_slope": 0.2}),
                           ("elu_", lambda xs, a: F.elu_(xs[0].clone(), a["alpha"]), {"alpha": 1.5}),
                           ("celu_", lambda xs, a: F.celu_(xs[0].clone(), a["alpha"]), {"alpha": 0.5}),
                           ("hardtanh_", lambda xs, a: F.hardtanh_(xs[0].clone(), a["min_val"], a["max_val"]),
                            {"min_val": -0.5, "max_val": 1.0}),
                           ("threshold_", lambda xs, a: F.threshold_(xs[0].clone(), a["threshold"], a["value"]),
                            {"threshold": 0.3, "value": -1.5}),
                           ("rrelu_", lambda xs, a: F.rrelu_(xs[0].clone(), a["lower"], a["upper"], a["training"]),
                            {"lower": 0.1, "upper": 0.3, "training": False})):
        out += [Case(name, [R((3, 4), F32, -2, 2)], fn, args, tag="f32"),
                Case(name, [R((2, 5), F64, -2, 2)], fn, args, views=["T"], tag="f64 view")]
    out += [Case("glu", [R((3, 5))], lambda xs, a: F.glu(xs[0], a["dim"]), {"dim": 1}, tag="odd error"),
            Case("prelu", [R((2, 3, 4)), R((2,))], lambda xs, a: F.prelu(xs[0], xs[1]), tag="weight error"),
            Case("softshrink", [R((3,))], lambda xs, a: F.softshrink(xs[0], a["lambd"]), {"lambd": -1.0},
                 tag="lambd error")]
    return out


def more_layers():
    """dropout1d/2d/3d and alpha dropouts (deterministic: eval, p 0 and 1), pixel shuffles, lp pools, bilinear."""
    out = []
    dv = lambda f: (lambda xs, a: f(xs[0], a["p"], a["training"]))
    for name, f, shape in (("dropout1d", F.dropout1d, (2, 3, 4)), ("dropout2d", F.dropout2d, (2, 3, 2, 2)),
                           ("dropout3d", F.dropout3d, (2, 3, 2, 2, 2)), ("alpha_dropout", F.alpha_dropout, (3, 4)),
                           ("feature_alpha_dropout", F.feature_alpha_dropout, (2, 3, 4))):
        out += [Case(name, [R(shape)], dv(f), {"p": 0.5, "training": False}, tag="eval"),
                Case(name, [R(shape, F64)], dv(f), {"p": 0.0, "training": True}, tag="p 0"),
                Case(name, [R(shape, F64)], dv(f), {"p": 1.0, "training": True}, tag="p 1"),
                Case(name, [R(shape)], dv(f), {"p": 1.5, "training": True}, tag="p error")]
    out += [Case("dropout2d", [R((3, 2, 2), F64)], dv(F.dropout2d), {"p": 1.0, "training": True}, tag="unbatched")]
    ps = lambda xs, a: F.pixel_shuffle(xs[0], a["r"])
    pu = lambda xs, a: F.pixel_unshuffle(xs[0], a["r"])
    out += [Case("pixel_shuffle", [R((2, 8, 3, 2))], ps, {"r": 2}, tag="f32"),
            Case("pixel_shuffle", [R((2, 3, 9, 2, 1), F64)], ps, {"r": 3}, tag="5-d"),
            Case("pixel_shuffle", [T([[[[1, 2], [3, 4]]] * 4], I64)], ps, {"r": 2}, tag="int64"),
            Case("pixel_shuffle", [R((2, 6, 3, 2))], ps, {"r": 2}, tag="channels error"),
            Case("pixel_unshuffle", [R((2, 2, 4, 6))], pu, {"r": 2}, tag="f32"),
            Case("pixel_unshuffle", [R((3, 6, 3), F64)], pu, {"r": 3}, tag="3-d"),
            Case("pixel_unshuffle", [R((2, 2, 5, 6))], pu, {"r": 2}, tag="size error")]
    lp2 = lambda xs, a: F.lp_pool2d(xs[0], a["norm_type"], a["kernel_size"], a.get("stride"), a["ceil_mode"])
    lp1 = lambda xs, a: F.lp_pool1d(xs[0], a["norm_type"], a["kernel_size"], a.get("stride"), a["ceil_mode"])
    out += [Case("lp_pool2d", [R((2, 3, 5, 4), F32, 0.1, 2)], lp2, {"norm_type": 2.0, "kernel_size": 2,
                                                                     "ceil_mode": False}, tag="p 2"),
            Case("lp_pool2d", [R((2, 3, 5, 5), F64, 0.1, 2)], lp2, {"norm_type": 3.0, "kernel_size": [3, 2],
                                                                     "stride": [2, 1], "ceil_mode": True},
                 tag="p 3, stride, ceil"),
            Case("lp_pool1d", [R((2, 3, 7), F64, 0.1, 2)], lp1, {"norm_type": 1.5, "kernel_size": 3, "stride": 2,
                                                                  "ceil_mode": False}, tag="p 1.5"),
            Case("lp_pool1d", [R((2, 3, 7))], lp1, {"norm_type": 2.0, "kernel_size": 2, "ceil_mode": False},
                 tag="f32")]
    lp3 = lambda xs, a: F.lp_pool3d(xs[0], a["norm_type"], a["kernel_size"], a.get("stride"))
    if not hasattr(F, "lp_pool3d"):
        NOT_IN_THIS_TORCH["lp_pool3d"] = "2.2"
    else:
        out += [Case("lp_pool3d", [R((2, 2, 4, 4, 3), F64, 0.1, 2)], lp3, {"norm_type": 2.0, "kernel_size": 2,
                                                                          "stride": [2, 1, 1]}, tag="p 2")]
    am1 = lambda xs, a: tuple(F.adaptive_max_pool1d(xs[0], a["output_size"], return_indices=True))
    am3 = lambda xs, a: F.adaptive_max_pool3d(xs[0], a["output_size"])
    out += [Case("adaptive_max_pool1d", [R((2, 3, 7))], am1, {"output_size": 3}, tag="f32", no_grad_out={1}),
            Case("adaptive_max_pool1d", [R((3, 8), F64)], am1, {"output_size": 8}, tag="unbatched", no_grad_out={1}),
            Case("adaptive_max_pool3d", [R((2, 2, 5, 4, 3))], am3, {"output_size": [2, 3, 2]}, tag="f32"),
            Case("adaptive_max_pool3d", [R((2, 3, 4, 5), F64)], am3, {"output_size": [3, 3, 5]}, tag="unbatched")]

    def unpool(nd):
        mp = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[nd - 1]
        up = (F.max_unpool1d, F.max_unpool2d, F.max_unpool3d)[nd - 1]

        def f(xs, a):
            y, idx = mp(xs[0], a["kernel_size"], return_indices=True)
            return up(y, idx, a["kernel_size"])
        return f
    out += [Case("max_unpool1d", [R((2, 3, 8))], unpool(1), {"kernel_size": 2}, tag="f32"),
            Case("max_unpool2d", [R((2, 2, 4, 6), F64)], unpool(2), {"kernel_size": 2}, tag="f64"),
            Case("max_unpool3d", [R((1, 2, 4, 4, 4))], unpool(3), {"kernel_size": 2}, tag="f32")]
    cs = lambda xs, a: F.channel_shuffle(xs[0], a["groups"])
    # PyTorch 1.13 has no derivative for channel_shuffle (nabla's is a permutation's)
    out += [Case("channel_shuffle", [R((2, 6, 3))], cs, {"groups": 3}, tag="f32", req=[False]),
            Case("channel_shuffle", [R((2, 4, 2, 2), F64)], cs, {"groups": 2}, tag="4-d", req=[False]),
            Case("channel_shuffle", [R((2, 5, 3))], cs, {"groups": 2}, tag="groups error")]
    pdist = lambda xs, a: F.pdist(xs[0], a["p"])
    out += [Case("pdist", [R((5, 3))], pdist, {"p": 2.0}, tag="f32"),
            Case("pdist", [R((4, 3), F64)], pdist, {"p": 1.0}, tag="p 1"),
            Case("pdist", [R((4, 3), F64)], pdist, {"p": 3.0}, tag="p 3")]
    # the noise cannot match PyTorch's generator: logits whose maximum wins whatever the noise
    gs = lambda xs, a: F.gumbel_softmax(xs[0], a["tau"], a["hard"], dim=a["dim"])
    out += [Case("gumbel_softmax", [T([[200.0, 0.0, -5.0], [1.0, -300.0, 400.0]])], gs,
                 {"tau": 1.0, "hard": True, "dim": -1}, tag="hard, a dominant logit", req=[False]),
            Case("gumbel_softmax", [T([[200.0, 0.0, -5.0], [1.0, -300.0, 400.0]], F64)], gs,
                 {"tau": 0.5, "hard": False, "dim": -1}, tag="soft, a dominant logit")]
    bl = lambda xs, a: F.bilinear(xs[0], xs[1], xs[2], xs[3] if len(xs) > 3 else None)
    out += [Case("bilinear", [R((4, 3)), R((4, 2)), R((5, 3, 2)), R((5,))], bl, tag="f32", tol={F32: (1e-4, 1e-5)}),
            Case("bilinear", [R((2, 3, 3), F64), R((2, 3, 4), F64), R((2, 3, 4), F64)], bl, tag="3-d, no bias"),
            Case("bilinear", [R((4, 3)), R((4, 2)), R((5, 2, 3))], bl, tag="weight error")]
    return out


def contractions():
    """einsum (diagonals, sums, ellipses, broadcasting, several operands), tensordot, outer, kron, trace, cross, cdist."""
    es = lambda xs, a: torch.einsum(a["equation"], *xs)
    out = []
    for eq, shapes in (("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                       ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ij->", [(3, 4)]), ("ij->ji", [(3, 4)]),
                       ("i,j->ij", [(3,), (4,)]), ("...ij,...jk", [(2, 3, 4), (4, 5)]),
                       ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ijk,kl,lm->im", [(2, 3, 4), (4, 5), (5, 2)]),
                       ("a,a,a->", [(5,), (5,), (5,)]), ("iij->ij", [(3, 3, 2)]), ("ij,ij->i", [(3, 4), (3, 4)]),
                       ("i j , j k", [(3, 4), (4, 2)]), ("Ab,bC->AC", [(3, 4), (4, 2)]), ("...i->...", [(2, 3, 4)]),
                       ("ij,kj->ik", [(1, 4), (3, 4)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)])):
        out += [Case("einsum", [R(sh) for sh in shapes], es, {"equation": eq}, tag=eq + " f32", tol={F32: (1e-4, 1e-5)}),
                Case("einsum", [R(sh, F64) for sh in shapes], es, {"equation": eq}, tag=eq + " f64")]
    out += [Case("einsum", [R((3, 4)), R((5, 2))], es, {"equation": "ij,jk->ik"}, tag="size error"),
            Case("einsum", [R((3, 4))], es, {"equation": "ijk->i"}, tag="rank error"),
            Case("einsum", [R((3, 4)), R((4, 2))], es, {"equation": "ij->i"}, tag="operand count error"),
            Case("einsum", [R((3, 4))], es, {"equation": "ij->k"}, tag="output label error")]
    td = lambda xs, a: torch.tensordot(xs[0], xs[1], dims=(a["dims_a"], a["dims_b"]) if "dims_a" in a else a["dims"])
    out += [Case("tensordot", [R((3, 4, 5)), R((4, 5, 2))], td, {"dims": 2}, tag="int dims"),
            Case("tensordot", [R((3, 4, 5), F64), R((5, 2, 3), F64)], td, {"dims_a": [0, 2], "dims_b": [2, 0]},
                 tag="lists"),
            Case("tensordot", [R((3, 4)), R((5, 2))], td, {"dims": 1}, tag="size error")]
    out += [Case("outer", [R((3,)), R((4,))], lambda xs, a: torch.outer(xs[0], xs[1]), tag="f32"),
            Case("kron", [R((2, 3), F64), R((3, 2), F64)], lambda xs, a: torch.kron(xs[0], xs[1]), tag="2-d"),
            Case("kron", [R((2,)), R((2, 3))], lambda xs, a: torch.kron(xs[0], xs[1]), tag="ranks differ"),
            Case("trace", [R((4, 4), F64)], lambda xs, a: torch.trace(xs[0]), tag="square"),
            Case("trace", [R((3, 5))], lambda xs, a: torch.trace(xs[0]), tag="wide"),
            Case("cross", [R((4, 3), F64), R((4, 3), F64)], lambda xs, a: torch.linalg.cross(xs[0], xs[1], dim=a["dim"]),
                 {"dim": -1}, tag="f64"),
            Case("cross", [R((3, 2)), R((3, 1))], lambda xs, a: torch.linalg.cross(xs[0], xs[1], dim=a["dim"]),
                 {"dim": 0}, tag="dim 0, broadcast"),
            Case("cross", [R((4, 2)), R((4, 2))], lambda xs, a: torch.linalg.cross(xs[0], xs[1], dim=a["dim"]),
                 {"dim": -1}, tag="size error")]
    cd = lambda xs, a: torch.cdist(xs[0], xs[1], a["p"])
    out += [Case("cdist", [R((4, 3)), R((5, 3))], cd, {"p": 2.0}, tag="f32", tol={F32: (1e-4, 1e-5)}),
            Case("cdist", [R((2, 4, 3), F64), R((2, 5, 3), F64)], cd, {"p": 1.0}, tag="batched p 1"),
            Case("cdist", [R((4, 3), F64), R((2, 3), F64)], cd, {"p": 3.0}, tag="p 3")]
    return out


def folds():
    """unfold / fold (im2col / col2im), embedding_bag, affine_grid, grid_sample."""
    uf = lambda xs, a: F.unfold(xs[0], a["kernel_size"], a.get("dilation", 1), a.get("padding", 0), a.get("stride", 1))
    fo = lambda xs, a: F.fold(xs[0], a["output_size"], a["kernel_size"], a.get("dilation", 1), a.get("padding", 0),
                              a.get("stride", 1))
    out = [Case("im2col", [R((2, 3, 5, 4))], uf, {"kernel_size": [2, 3]}, tag="f32"),
           Case("im2col", [R((2, 2, 6, 5), F64)], uf, {"kernel_size": [3, 2], "dilation": [2, 1], "padding": [1, 2],
                                                      "stride": [2, 3]}, tag="dilation, padding, stride"),
           Case("im2col", [R((3, 4, 4), F64)], uf, {"kernel_size": 2, "stride": 2}, tag="unbatched"),
           Case("im2col", [R((1, 1, 2, 2))], uf, {"kernel_size": 3}, tag="kernel too large"),
           Case("col2im", [R((2, 3 * 6, 12))], fo, {"output_size": [5, 4], "kernel_size": [2, 3]}, tag="f32"),
           Case("col2im", [R((2, 2 * 6, 6), F64)], fo, {"output_size": [6, 5], "kernel_size": [3, 2],
                                                        "dilation": [2, 1], "padding": [1, 2], "stride": [2, 3]},
                tag="dilation, padding, stride"),
           Case("col2im", [R((2, 3 * 6, 11))], fo, {"output_size": [5, 4], "kernel_size": [2, 3]}, tag="L error")]

    def eb(xs, a):
        off = xs[2] if len(xs) > 2 else None
        psw = xs[3] if len(xs) > 3 else None
        return F.embedding_bag(xs[0], xs[1], off, mode=a["mode"], per_sample_weights=psw,
                               include_last_offset=a.get("include_last_offset", False),
                               padding_idx=a.get("padding_idx"))
    for mode in ("sum", "mean", "max"):
        out += [Case("embedding_bag", [T([[1, 2, 4], [4, 3, 0]], I64), R((6, 3))], eb, {"mode": mode},
                     tag=mode + " 2-d", req=[False, True]),
                Case("embedding_bag", [T([1, 2, 4, 5, 4, 3, 2, 0], I64), R((6, 3), F64), T([0, 2, 2, 5], I64)], eb,
                     {"mode": mode}, tag=mode + " offsets, an empty bag", req=[False, True, False]),
                Case("embedding_bag", [T([1, 2, 4, 5, 4, 3, 2], I64), R((6, 3), F64), T([0, 3, 7], I64)], eb,
                     {"mode": mode, "include_last_offset": True, "padding_idx": 4}, tag=mode + " last offset, padding",
                     req=[False, True, False])]
    out += [Case("embedding_bag", [T([1, 2, 4, 5, 4, 3], I64), R((6, 3), F64), T([0, 2], I64), R((6,), F64)], eb,
                 {"mode": "sum"}, tag="per_sample_weights", req=[False, True, False, True]),
            Case("embedding_bag", [T([1, 7], I64), R((6, 3)), T([0], I64)], eb, {"mode": "sum"}, tag="index error")]
    gs = lambda xs, a: F.grid_sample(xs[0], xs[1], a["mode"], a["padding_mode"], a["align_corners"])
    for mode in ("bilinear", "nearest", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            for ac in (False, True):
                a = {"mode": mode, "padding_mode": pad, "align_corners": ac}
                out.append(Case("grid_sample", [R((2, 3, 4, 5), F64), R((2, 3, 2, 2), F64, -1.4, 1.4)], gs, a,
                                tag="%s %s%s" % (mode, pad, " corners" if ac else "")))
        out.append(Case("grid_sample", [R((1, 2, 3, 4, 5), F64), R((1, 2, 3, 2, 3), F64, -1.2, 1.2)], gs,
                        {"mode": mode, "padding_mode": "border", "align_corners": False},
                        tag=mode + (" 3-d error" if mode == "bicubic" else " 3-d")))
    out += [Case("grid_sample", [R((2, 3, 4, 5)), R((2, 6, 7, 2), F32, -1.1, 1.1)], gs,
                 {"mode": "bilinear", "padding_mode": "zeros", "align_corners": False}, tag="f32",
                 tol={F32: (1e-5, 1e-6)}),
            Case("grid_sample", [R((2, 3, 1, 1), F64), R((2, 2, 2, 2), F64)], gs,
                 {"mode": "bilinear", "padding_mode": "reflection", "align_corners": True}, tag="size 1"),
            Case("grid_sample", [R((2, 3, 4, 5)), R((1, 3, 2, 2))], gs,
                 {"mode": "bilinear", "padding_mode": "zeros", "align_corners": False}, tag="batch error"),
            Case("grid_sample", [R((2, 3, 4, 5)), R((2, 3, 2, 3))], gs,
                 {"mode": "bilinear", "padding_mode": "zeros", "align_corners": False}, tag="grid error"),
            Case("grid_sample", [R((2, 3, 4, 5), F64), R((2, 3, 2, 2))], gs,
                 {"mode": "bilinear", "padding_mode": "zeros", "align_corners": False}, tag="dtype error")]
    ag = lambda xs, a: F.affine_grid(xs[0], a["size"], align_corners=a["align_corners"])
    out += [Case("affine_grid", [R((2, 2, 3))], ag, {"size": [2, 1, 3, 4], "align_corners": False}, tag="f32"),
            Case("affine_grid", [R((1, 2, 3), F64)], ag, {"size": [1, 3, 5, 1], "align_corners": True},
                 tag="align_corners, width 1")]
    return out


def spd(n, batch=(), dt=F64):
    a = R(batch + (n, n), dt)
    return a @ a.transpose(-1, -2) + n * torch.eye(n, dtype=dt)


def well(n, batch=(), dt=F64):
    return R(batch + (n, n), dt) + 3 * torch.eye(n, dtype=dt)


LT = {F32: (2e-4, 1e-5)}


def linalg():
    out = []
    la = torch.linalg
    out += [Case("linalg_solve", [well(3), R((3, 2), F64)], lambda xs, a: la.solve(xs[0], xs[1]), tag="f64"),
            Case("linalg_solve", [well(3, (2,), F32), R((2, 3), F32)], lambda xs, a: la.solve(xs[0], xs[1]),
                 tag="vector", tol=LT),
            Case("linalg_solve", [well(2, (2, 1)), R((3, 2, 1), F64)], lambda xs, a: la.solve(xs[0], xs[1]),
                 tag="broadcast"),
            Case("linalg_solve", [T([[1.0, 2.0], [2.0, 4.0]], F64), R((2, 1), F64)],
                 lambda xs, a: la.solve(xs[0], xs[1]), tag="singular"),
            Case("linalg_solve", [T([[NAN, 1.0], [2.0, 3.0]], F64), R((2, 1), F64)],
                 lambda xs, a: la.solve(xs[0], xs[1]), tag="nan"),
            Case("linalg_solve", [R((2, 3), F64), R((2, 1), F64)], lambda xs, a: la.solve(xs[0], xs[1]),
                 tag="not square")]
    for name, f in (("linalg_inv", lambda xs, a: la.inv(xs[0])), ("linalg_det", lambda xs, a: la.det(xs[0])),
                    ("linalg_slogdet", lambda xs, a: tuple(la.slogdet(xs[0]))),
                    ("linalg_svdvals", lambda xs, a: la.svdvals(xs[0]))):
        out += [Case(name, [well(3)], f, tag="f64"),
                Case(name, [well(3, (2,), F32)], f, tag="f32", tol=LT),
                Case(name, [well(3)], f, views=["T"], tag="view"),
                Case(name, [R((0, 0), F64)], f, tag="empty"),
                Case(name, [T([[NAN, 1.0], [2.0, 3.0]], F64)], f, tag="nan"),
                Case(name, [R((2, 3), F64)], f, tag="not square"),
                Case(name, [R((3, 3), I32)], f, tag="int")]
    out.append(Case("linalg_det", [T([[1.0, 2.0], [2.0, 4.0]], F64)], lambda xs, a: la.det(xs[0]), req=False,
                    tag="singular"))
    out.append(Case("linalg_inv", [T([[1.0, 2.0], [2.0, 4.0]], F64)], lambda xs, a: la.inv(xs[0]), tag="singular"))
    for up in (False, True):
        f = lambda xs, a: la.cholesky(xs[0], upper=a["upper"])
        out += [Case("linalg_cholesky", [spd(3)], f, {"upper": up}, tag="f64"),
                Case("linalg_cholesky", [spd(3, (2,), F32)], f, {"upper": up}, tag="f32", tol=LT),
                Case("linalg_cholesky", [T([[1.0, 2.0], [2.0, 1.0]], F64)], f, {"upper": up}, tag="not pd"),
                Case("linalg_cholesky", [T([[NAN, 0.0], [0.0, 1.0]], F64)], f, {"upper": up}, tag="nan")]
    for mode in ("reduced", "complete"):
        f = lambda xs, a: tuple(la.qr(xs[0], mode=a["mode"]))
        out += [Case("linalg_qr", [R((4, 3), F64)], f, {"mode": mode}, tag="tall"),
                Case("linalg_qr", [R((3, 3), F64)], f, {"mode": mode}, tag="square"),
                Case("linalg_qr", [R((2, 4, 2), F32)], f, {"mode": mode}, tag="f32", tol=LT),
                Case("linalg_qr", [T([[NAN, 1.0], [2.0, 3.0]], F64)], f, {"mode": mode}, tag="nan")]
    for uplo in ("L", "U"):
        f = lambda xs, a: tuple(la.eigh(xs[0], UPLO=a["UPLO"]))
        out += [Case("linalg_eigh", [spd(3)], f, {"UPLO": uplo}, tag="f64", no_grad_out={1}),
                Case("linalg_eigh", [spd(3, (2,), F32)], f, {"UPLO": uplo}, tag="f32", tol=LT, no_grad_out={1},
                     skip_out={1}),
                Case("linalg_eigh", [T([[2.0, NAN], [NAN, 3.0]], F64)], f, {"UPLO": uplo}, tag="nan")]
    for full in (True, False):
        f = lambda xs, a: tuple(la.svd(xs[0], full_matrices=a["full_matrices"]))
        out += [Case("linalg_svd", [R((4, 3), F64)], f, {"full_matrices": full}, tag="f64", skip_out={0, 2},
                     no_grad_out={0, 2}),
                Case("linalg_svd", [T([[NAN, 1.0], [2.0, 3.0]], F64)], f, {"full_matrices": full}, tag="nan")]
    ls = lambda xs, a: (la.lstsq(xs[0], xs[1], driver="gels").solution,)
    out += [Case("linalg_lstsq", [R((5, 3), F64), R((5, 2), F64)], ls, tag="tall"),
            Case("linalg_lstsq", [R((2, 4), F64), R((2, 1), F64)], ls, tag="wide"),
            Case("linalg_lstsq", [R((2, 4, 3), F32), R((2, 4, 2), F32)], ls, tag="f32", tol={F32: (1e-3, 1e-4)}),
            Case("linalg_lstsq", [T([[NAN, 1.0], [2.0, 3.0], [1.0, 1.0]], F64), R((3, 1), F64)], ls, tag="nan")]
    return out


def sampling():
    mn = lambda xs, a: torch.multinomial(xs[0], a["num_samples"], a["replacement"])
    out = []
    for rep in (False, True):
        for n in (1, 3):
            out += [Case("multinomial", [R((5,), F32, 0, 1)], mn, {"num_samples": n, "replacement": rep}, tag="1-d",
                         values=False),
                    Case("multinomial", [R((2, 4), F64, 0, 1)], mn, {"num_samples": n, "replacement": rep},
                         tag="2-d", values=False)]
        out += [Case("multinomial", [T([0.5, -0.1, 0.6])], mn, {"num_samples": 1, "replacement": rep},
                     tag="negative"),
                Case("multinomial", [T([[0.0, 0.0], [1.0, 2.0]])], mn, {"num_samples": 1, "replacement": rep},
                     tag="zero row"),
                Case("multinomial", [T([0.5, NAN])], mn, {"num_samples": 1, "replacement": rep}, tag="nan"),
                Case("multinomial", [R((2, 2, 2))], mn, {"num_samples": 1, "replacement": rep}, tag="3-d")]
    out += [Case("multinomial", [T([0.5, 0.0, 0.5])], mn, {"num_samples": 3, "replacement": False}, tag="too few"),
            Case("multinomial", [T([0.5, 0.0, 0.5])], mn, {"num_samples": 4, "replacement": True}, tag="replacement",
                 values=False),
            Case("multinomial", [R((3,), I64, 1, 3)], mn, {"num_samples": 1, "replacement": True}, tag="int")]
    return out


def fused():
    """The fused inference ops, written out in torch: silu(a) * b, and (rms_norm(x + residual), x + residual).
    Inputs from RN's generator (built last: no other case's draws move)."""
    def add_rms(xs, a):
        h = xs[0] + xs[1]
        eps = a.get("eps", 0) or torch.finfo(h.dtype).eps
        ns = a["normalized_shape"]
        if list(h.shape[h.dim() - len(ns):]) != list(ns):
            raise RuntimeError("normalized_shape does not fit")
        dims = tuple(range(h.dim() - len(ns), h.dim()))
        y = h * torch.rsqrt((h * h).mean(dims, keepdim=True) + eps)
        return (y * xs[2] if len(xs) > 2 else y), h

    silu_mul = lambda xs, a: F.silu(xs[0]) * xs[1]
    return [Case("add_rms_norm", [RN((3, 5), F32, -2, 2), RN((3, 5), F32, -2, 2), RN((5,), F32, -2, 2)], add_rms,
                 {"normalized_shape": [5], "eps": 1e-6}, tag="f32", tol={F32: (1e-4, 1e-5)}),
            Case("add_rms_norm", [RN((2, 3, 4), F64, -2, 2), RN((2, 3, 4), F64, -2, 2)], add_rms,
                 {"normalized_shape": [3, 4]}, tag="f64 default eps, no weight"),
            Case("add_rms_norm", [RN((2, 4), F64, -2, 2), RN((4,), F64, -2, 2), RN((4,), F64, -2, 2)], add_rms,
                 {"normalized_shape": [4], "eps": 1e-5}, tag="broadcast residual"),
            Case("add_rms_norm", [RN((3, 5), F32, -2, 2), RN((3, 5), F32, -2, 2)], add_rms,
                 {"normalized_shape": [4]}, tag="shape error"),
            Case("silu_mul", [RN((3, 4), F32, -5, 5), RN((3, 4), F32, -3, 3)], silu_mul, tag="f32"),
            Case("silu_mul", [RN((2, 3), F64, -5, 5), RN((3,), F64, -3, 3)], silu_mul, tag="f64 broadcast"),
            Case("silu_mul", [RN((2, 3), F32, -5, 5), RN((4,), F32, -3, 3)], silu_mul, tag="shape error")]
