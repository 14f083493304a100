"""cases_tensor.py - the differential suite's cases for the tensor ops of #29's last list: clone, select, unbind,
split_with_sizes, rot90, addmm/addmv/baddbmm/addbmm, searchsorted/bucketize/histc, logit, sinc, xlogy, hypot;
ctc_loss; and the fake-quantization ops."""
import torch
import torch.nn.functional as F

from cases_common import *  # noqa: F401,F403


def tensor_ops():
    out = [Case("clone", [R((3, 4))], lambda xs, a: xs[0].clone(), tag="f32"),
           Case("clone", [R((3, 4), F64)], lambda xs, a: xs[0].clone(), views=["T"], tag="view"),
           Case("clone", [R((5,), I64, -9, 9)], lambda xs, a: xs[0].clone(), tag="int"),
           Case("clone", [R((3,), F16)], lambda xs, a: xs[0].clone(), tag="f16"),
           Case("clone", [None], lambda xs, a: xs[0].clone(), tag="null")]
    sel = lambda xs, a: xs[0].select(a["dim"], a["index"])
    for dim, index in ((0, 1), (1, -1), (-1, 0), (2, 3)):
        out.append(Case("select", [R((3, 4, 5))], sel, {"dim": dim, "index": index}, tag="f32"))
    out += [Case("select", [R((4,), F64)], sel, {"dim": 0, "index": 2}, tag="to 0-d"),
            Case("select", [R((3, 4))], sel, {"dim": 1, "index": 4}, tag="index error"),
            Case("select", [R((3, 4))], sel, {"dim": 2, "index": 0}, tag="dim error")]
    ub = lambda xs, a: tuple(torch.unbind(xs[0], a["dim"]))
    out += [Case("unbind", [R((3, 4))], ub, {"dim": 0}, tag="f32"),
            Case("unbind", [R((2, 3, 4), F64)], ub, {"dim": -1}, tag="f64"),
            Case("unbind", [R((2, 3), I64, -5, 5)], ub, {"dim": 1}, tag="int")]
    sws = lambda xs, a: tuple(torch.split(xs[0], a["split_sizes"], a["dim"]))
    out += [Case("split_with_sizes", [R((5, 2))], sws, {"split_sizes": [2, 3], "dim": 0}, tag="f32"),
            Case("split_with_sizes", [R((2, 6), F64)], sws, {"split_sizes": [1, 0, 4, 1], "dim": 1}, tag="empty piece"),
            Case("split_with_sizes", [R((5,))], sws, {"split_sizes": [2, 2], "dim": 0}, tag="sum error")]
    r90 = lambda xs, a: torch.rot90(xs[0], a["k"], a["dims"])
    for k in (1, 2, 3, 0, -1, 5):
        out.append(Case("rot90", [R((3, 4))], r90, {"k": k, "dims": [0, 1]}, tag="f32"))
    out += [Case("rot90", [R((2, 3, 4), F64)], r90, {"k": 1, "dims": [2, 0]}, tag="3-d"),
            Case("rot90", [R((3, 4), I64, -9, 9)], r90, {"k": 3, "dims": [0, 1]}, tag="int"),
            Case("rot90", [R((3, 4))], r90, {"k": 1, "dims": [1, 1]}, tag="dims error")]
    # The beta-0 reference is alpha * (the product alone), PyTorch's documented result: torch 1.13's
    # baddbmm with beta 0 reads its uninitialised output (seen as a nan on one CI machine).
    for name, fn, prod, shapes in (("addmm", torch.addmm, torch.mm, [(3, 5), (3, 4), (4, 5)]),
                                   ("addmv", torch.addmv, torch.mv, [(3,), (3, 4), (4,)]),
                                   ("baddbmm", torch.baddbmm, torch.bmm, [(2, 3, 5), (2, 3, 4), (2, 4, 5)]),
                                   ("addbmm", torch.addbmm, lambda p, q: torch.bmm(p, q).sum(0),
                                    [(3, 5), (2, 3, 4), (2, 4, 5)])):
        f = lambda xs, a, fn=fn: fn(xs[0], xs[1], xs[2], beta=a["beta"], alpha=a["alpha"])
        f0 = lambda xs, a, prod=prod: a["alpha"] * prod(xs[1], xs[2])  # input broadcast: the product's shape
        bshape = shapes[0][-1:]  # the input broadcast along its leading dims
        out += [Case(name, [R(sh) for sh in shapes], f, {"beta": 1.0, "alpha": 1.0}, tag="f32", tol={F32: (1e-5, 1e-6)}),
                Case(name, [R(sh, F64) for sh in shapes], f, {"beta": 0.5, "alpha": -2.0}, tag="f64"),
                Case(name, [R(bshape, F64)] + [R(sh, F64) for sh in shapes[1:]], f, {"beta": 2.0, "alpha": 1.0},
                     tag="broadcast"),
                Case(name, [T([NAN] * shapes[0][-1], F64)] + [R(sh, F64) for sh in shapes[1:]], f0,
                     {"beta": 0.0, "alpha": 1.0}, req=[False, True, True], tag="beta 0 ignores nan"),
                Case(name, [R(sh) for sh in shapes[:2]] + [R((7, 7, 7)[:len(shapes[2])])], f, {"beta": 1.0, "alpha": 1.0},
                     tag="shape error")]
    ss = lambda xs, a: torch.searchsorted(xs[0], xs[1], out_int32=a["out_int32"], right=a["right"],
                                          sorter=xs[2] if len(xs) > 2 else None)
    bk = lambda xs, a: torch.bucketize(xs[0], xs[1], out_int32=a["out_int32"], right=a["right"])
    bnd = T([-1.0, 0.0, 0.0, 0.5, 2.0])
    vals = T([[-2.0, -1.0, 0.0, 0.25], [0.5, 1.0, 2.0, 3.0]])
    for right in (False, True):
        for i32 in (False, True):
            a = {"out_int32": i32, "right": right}
            out += [Case("searchsorted", [bnd, vals], ss, a, tag="1-d"),
                    Case("bucketize", [vals, bnd], bk, a, tag="f32")]
        out += [Case("searchsorted", [T([[1, 3, 5, 7], [2, 4, 6, 8]], I64), T([[3, 6, 9], [1, 4, 8]], I64)], ss,
                     {"out_int32": False, "right": right}, tag="rows"),
                Case("searchsorted", [T([5.0, 1.0, 3.0], F64), T([0.0, 2.0, 3.0, 6.0], F64), T([1, 2, 0], I64)], ss,
                     {"out_int32": False, "right": right}, tag="sorter"),
                Case("bucketize", [T(7.0), bnd], bk, {"out_int32": False, "right": right}, tag="0-d")]
    out += [Case("searchsorted", [bnd, T([1, 2, -1], I64)], ss, {"out_int32": False, "right": True}, tag="promotes"),
            Case("searchsorted", [R((2, 3)), R((3, 3))], ss, {"out_int32": False, "right": False}, tag="shape error"),
            Case("bucketize", [vals, R((2, 3))], bk, {"out_int32": False, "right": False}, tag="2-d boundaries error")]
    hc = lambda xs, a: torch.histc(xs[0], bins=a["bins"], min=a["min"], max=a["max"])
    out += [Case("histc", [R((50,), F32, -3, 3)], hc, {"bins": 10, "min": -2.0, "max": 2.0}, tag="range"),
            Case("histc", [R((40,), F64, -3, 3)], hc, {"bins": 7, "min": 0.0, "max": 0.0}, tag="data range"),
            Case("histc", [T([1.0, 2.0, 1.0, 4.0, 0.0, 5.0, -1.0])], hc, {"bins": 4, "min": 0.0, "max": 4.0}, tag="edges"),
            Case("histc", [T([3.0, 3.0])], hc, {"bins": 3, "min": 0.0, "max": 0.0}, tag="one value"),
            Case("histc", [R((5,))], hc, {"bins": 0, "min": 0.0, "max": 1.0}, tag="bins error"),
            Case("histc", [R((5,))], hc, {"bins": 3, "min": 2.0, "max": 1.0}, tag="range error")]
    lg = lambda xs, a: torch.logit(xs[0], eps=None if a["eps"] < 0 else a["eps"])
    out += [Case("logit", [R((3, 4), F32, 0.05, 0.95)], lg, {"eps": -1.0}, tag="f32"),
            Case("logit", [R((3, 4), F64, -0.2, 1.2)], lg, {"eps": 0.1}, tag="eps clamps"),
            Case("logit", [T([0.0, 0.5, 1.0, 2.0, NAN], F64)], lg, {"eps": -1.0}, req=False, tag="special"),
            Case("logit", [T([0, 1], I64)], lg, {"eps": 0.25}, tag="int")]
    out += [Case("sinc", [R((3, 4), F32, -3, 3)], lambda xs, a: torch.sinc(xs[0]), tag="f32"),
            Case("sinc", [T([0.0, 0.5, -1.0, 2.5, 1e-3], F64)], lambda xs, a: torch.sinc(xs[0]), tag="zero"),
            Case("sinc", [special(F32)], lambda xs, a: torch.sinc(xs[0]), req=False, tag="special"),
            Case("sinc", [T([0, 1, 2], I32)], lambda xs, a: torch.sinc(xs[0]), tag="int")]
    xl = lambda xs, a: torch.xlogy(xs[0], xs[1])
    out += [Case("xlogy", [R((3, 4), F32, -2, 2), R((4,), F32, 0.1, 3)], xl, tag="broadcast"),
            Case("xlogy", [T([0.0, 0.0, 1.0, 2.0, 0.0, -1.0, 0.0], F64), T([-1.0, 2.0, 0.5, 3.0, NAN, 0.5, 4.0], F64)],
                 xl, tag="zeros and nan"),
            Case("xlogy", [T([0.0, 1.0, 0.0], F64), T([0.0, 0.0, -2.0], F64)], xl, req=False, tag="y 0"),
            Case("xlogy", [T([0, 2, 3], I64), T([5, 0, 1], I64)], xl, tag="int"),
            Case("xlogy", [R((3,)), R((4,))], xl, tag="shape error")]
    hy = lambda xs, a: torch.hypot(xs[0], xs[1])
    out += [Case("hypot", [R((3, 4)), R((4,))], hy, tag="broadcast"),
            Case("hypot", [R((5,), F64), R((5,), F64)], hy, tag="f64"),
            Case("hypot", [T([3, 4], I64), T([4, 3], I64)], hy, tag="int error")]
    return out


def grouped_mm():
    """F.grouped_mm (PyTorch 2.8+) in its four forms; compared where this torch has it."""
    if not hasattr(F, "grouped_mm"):
        return []
    gm = lambda xs, a: F.grouped_mm(xs[0], xs[1], offs=xs[2] if len(xs) > 2 else None)
    offs = T([2, 4], I32)
    return [Case("grouped_mm", [R((2, 3, 4)), R((2, 4, 5))], gm, tag="3-d x 3-d", tol={F32: (1e-5, 1e-6)}),
            Case("grouped_mm", [R((5, 3)), R((2, 3, 2)), offs], gm, tag="2-d x 3-d", tol={F32: (1e-5, 1e-6)}),
            Case("grouped_mm", [R((2, 4)), R((4, 3)), offs], gm, tag="2-d x 2-d", tol={F32: (1e-5, 1e-6)}),
            Case("grouped_mm", [R((2, 3, 2)), R((2, 4)), offs], gm, tag="3-d x 2-d", tol={F32: (1e-5, 1e-6)})]


def ctc():
    fn = lambda xs, a: F.ctc_loss(xs[0], xs[1], xs[2], xs[3], blank=a["blank"], reduction=a["reduction"],
                                  zero_infinity=a["zero_infinity"])
    lp = lambda t, n, c, dt=F32: F.log_softmax(R((t, n, c), dt), 2).detach()
    out = []
    for red in ("mean", "sum", "none"):
        for dt in (F32, F64):
            out.append(Case("ctc_loss", [lp(6, 3, 5, dt), T([[1, 2, 2], [3, 4, 0], [0, 0, 0]], I64), T([6, 5, 4], I64),
                                         T([3, 2, 0], I64)], fn, {"blank": 0, "reduction": red, "zero_infinity": False},
                            tag="padded " + red, tol={F32: (1e-5, 1e-6)}))
        out.append(Case("ctc_loss", [lp(7, 2, 4, F64), T([1, 1, 3, 2], I32), T([7, 6], I32), T([3, 1], I32)], fn,
                        {"blank": 0, "reduction": red, "zero_infinity": False}, tag="concatenated int32 " + red))
    a = {"blank": 4, "reduction": "mean", "zero_infinity": False}
    out += [Case("ctc_loss", [lp(5, 2, 5, F64), T([[0, 1], [2, 2]], I64), T([5, 5], I64), T([2, 2], I64)], fn, a,
                 tag="blank 4"),
            Case("ctc_loss", [lp(6, 1, 4, F64)[:, 0].contiguous(), T([1, 2, 1], I64), T(6, I64), T(3, I64)], fn,
                 {"blank": 0, "reduction": "none", "zero_infinity": False}, tag="unbatched"),
            Case("ctc_loss", [lp(3, 2, 4, F64), T([[1, 1, 1], [2, 0, 0]], I64), T([3, 3], I64), T([3, 1], I64)], fn,
                 {"blank": 0, "reduction": "none", "zero_infinity": True}, tag="zero_infinity"),
            Case("ctc_loss", [lp(3, 2, 4, F64), T([[1, 1, 1], [2, 0, 0]], I64), T([3, 3], I64), T([3, 1], I64)], fn,
                 {"blank": 0, "reduction": "none", "zero_infinity": False}, req=False, tag="infinite loss"),
            Case("ctc_loss", [lp(4, 2, 3), T([[1], [2]], I64), T([5, 4], I64), T([1, 1], I64)], fn,
                 {"blank": 0, "reduction": "mean", "zero_infinity": False}, tag="input length error"),
            Case("ctc_loss", [lp(4, 2, 3), T([[1], [2]], I64), T([4, 4], I64), T([1, 1], I64)], fn,
                 {"blank": 3, "reduction": "mean", "zero_infinity": False}, tag="blank error")]
    return out


def quantize():
    """torch.fake_quantize_per_tensor_affine / per_channel_affine and the learnable variants (nb_quantize.h):
    ties (levels at .5), clamping at both ends, NaN and inf, integer and float zero points, and the
    straight-through and LSQ gradients (the learnable backward is float32-only in PyTorch)."""
    pt = lambda xs, a: torch.fake_quantize_per_tensor_affine(xs[0], a["scale"], a["zero_point"], a["quant_min"],
                                                             a["quant_max"])
    pc = lambda xs, a: torch.fake_quantize_per_channel_affine(xs[0], xs[1], xs[2], a["axis"], a["quant_min"],
                                                              a["quant_max"])
    lpt = lambda xs, a: torch._fake_quantize_learnable_per_tensor_affine(xs[0], xs[1], xs[2], a["quant_min"],
                                                                         a["quant_max"], a["grad_factor"])
    lpc = lambda xs, a: torch._fake_quantize_learnable_per_channel_affine(xs[0], xs[1], xs[2], a["axis"],
                                                                          a["quant_min"], a["quant_max"],
                                                                          a["grad_factor"])
    ties = [-2.25, -1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 1.75, 2.25, 100.0, -100.0, NAN, INF, -INF]
    u8 = {"scale": 0.1, "zero_point": 3, "quant_min": 0, "quant_max": 15}
    out = [Case("fake_quantize_per_tensor_affine", [R((3, 4), F32, -3, 3)], pt, u8, tag="f32"),
           Case("fake_quantize_per_tensor_affine", [R((2, 3, 4), F64, -3, 3)], pt,
                {"scale": 0.25, "zero_point": -2, "quant_min": -8, "quant_max": 7}, tag="f64"),
           Case("fake_quantize_per_tensor_affine", [R((4, 3), F64, -3, 3)], pt, u8, views=["T"], tag="view"),
           Case("fake_quantize_per_tensor_affine", [T(ties)], pt,
                {"scale": 0.5, "zero_point": 0, "quant_min": -4, "quant_max": 3}, tag="ties nan inf"),
           Case("fake_quantize_per_tensor_affine", [R((3,))], pt, dict(u8, zero_point=16), tag="zero point error"),
           Case("fake_quantize_per_tensor_affine", [R((3,))], pt, dict(u8, quant_min=16), tag="range error")]
    qr = {"quant_min": -8, "quant_max": 7}
    out += [Case("fake_quantize_per_channel_affine", [R((2, 3, 4), F32, -2, 2), T([0.1, 0.2, 0.3]), T([0, 2, -1], I32)],
                 pc, dict(qr, axis=1), req=[True, False, False], tag="int zero point"),
            Case("fake_quantize_per_channel_affine", [R((3, 5), F64, -2, 2), T([0.1, 0.2, 0.3]), T([0, 2, -1], I32)],
                 pc, dict(qr, axis=0), req=[True, False, False], tag="f64 axis 0"),
            Case("fake_quantize_per_channel_affine", [R((2, 3), F32, -2, 2), T([0.25, 0.5, 0.125]),
                                                      T([0.5, 1.25, -2.0])],
                 pc, dict(qr, axis=1), req=[True, False, False], tag="float zero point"),
            Case("fake_quantize_per_channel_affine", [T([ties[:7], ties[7:]]), T([0.5, 0.25]), T([0, 1], I32)], pc,
                 dict(qr, axis=0), req=[True, False, False], tag="ties nan inf"),
            Case("fake_quantize_per_channel_affine", [R((2, 3)), T([0.1, 0.2]), T([0, 0], I32)], pc,
                 dict(qr, axis=1), req=[True, False, False], tag="size error"),
            Case("fake_quantize_per_channel_affine", [R((2, 3)), T([0.1, 0.2, 0.3]), T([0, 0, 0], I32)], pc,
                 dict(qr, axis=2), req=[True, False, False], tag="axis error")]
    gt = {F32: (1e-4, 1e-5)}
    out += [Case("fake_quantize_learnable_per_tensor_affine", [R((4, 5), F32, -2, 2), T([0.2]), T([1.4])], lpt,
                 dict(qr, grad_factor=1.0), tag="f32", gtol=gt),
            Case("fake_quantize_learnable_per_tensor_affine", [R((3, 4), F32, -2, 2), T([0.15]), T([-2.5])], lpt,
                 dict(qr, grad_factor=0.5), tag="half zero point", gtol=gt),
            Case("fake_quantize_learnable_per_tensor_affine", [R((3, 4), F32, -2, 2), T([0.25]), T([-1.0])], lpt,
                 dict(qr, grad_factor=1.0), tag="negative zero point", gtol=gt),
            Case("fake_quantize_learnable_per_tensor_affine", [T(ties[:12]), T([0.5]), T([0.0])], lpt,
                 dict(qr, grad_factor=1.0), tag="ties", gtol=gt),
            Case("fake_quantize_learnable_per_channel_affine",
                 [R((3, 4), F32, -2, 2), T([0.1, 0.2, 0.3, 0.4]), T([0.0, 1.5, -2.5, 3.0])], lpc,
                 dict(qr, axis=1, grad_factor=1.0), tag="f32", gtol=gt),
            Case("fake_quantize_learnable_per_channel_affine",
                 [R((2, 3, 2), F32, -1, 1), T([0.05, 0.1, 0.2]), T([0.0, 1.0, -1.0])], lpc,
                 dict(qr, axis=1, grad_factor=0.25), tag="3-d", gtol=gt)]

    def wq(xs, a):
        """BitNet b1.58's weight_quant (its training FAQ's code), with the straight-through gradient"""
        w = xs[0]
        scale = 1.0 / w.abs().mean().clamp(min=1e-5)
        u = (w * scale).round().clamp(-1, 1) / scale
        return w + (u - w).detach()

    def aq(xs, a):
        """BitNet b1.58's activation_quant: per-token absmax to int8"""
        x = xs[0]
        if x.dim() == 0:
            raise RuntimeError("needs a dim")
        scale = 127.0 / x.abs().max(dim=-1, keepdim=True).values.clamp(min=1e-5)
        y = (x * scale).round().clamp(-128, 127) / scale
        return x + (y - x).detach()

    bt = {F32: (1e-6, 1e-6)}  # x + (q - x) rounds where nabla returns q itself
    out += [Case("bitnet_weight_quant", [R((4, 6))], wq, tag="f32", tol=bt),
            Case("bitnet_weight_quant", [R((3, 5), F64)], wq, tag="f64"),
            Case("bitnet_weight_quant", [T([[0.0, 0.0], [0.0, 0.0]])], wq, tag="zeros"),
            Case("bitnet_activation_quant", [R((3, 7))], aq, tag="f32", tol=bt),
            Case("bitnet_activation_quant", [R((2, 3, 5), F64)], aq, tag="f64"),
            Case("bitnet_activation_quant", [T([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])], aq, tag="zero row", tol=bt),
            Case("bitnet_activation_quant", [T(1.5)], aq, tag="0-d error")]

    def pack(xs, a):
        """nb_bitnet_pack's layout written out: codes round(w s).clamp(-1, 1) + 1 padded with 1 to groups of
        128, byte j of a group = codes j, j + 32, j + 64, j + 96 in bits 0-1, 2-3, 4-5, 6-7; and s in float32"""
        w = xs[0]
        if w.dim() != 2:
            raise RuntimeError("needs [N, K]")
        n, k = w.shape
        s = 1.0 / w.abs().mean().clamp(min=1e-5)
        c = ((w * s).round().clamp(-1, 1) + 1).to(torch.int64)
        g = (k + 127) // 128
        c = torch.cat([c, torch.ones(n, g * 128 - k, dtype=torch.int64)], 1).reshape(n, g, 4, 32)
        b = c[:, :, 0] | (c[:, :, 1] << 2) | (c[:, :, 2] << 4) | (c[:, :, 3] << 6)
        return b.reshape(n, g * 32).to(torch.uint8), s.reshape(1).to(F32)

    def blin(xs, a):
        """nb_bitnet_linear's integer formula from the unpacked weights xs[1] (packed by the runner's
        nb_bitnet_pack): per row s_x = 127 / max|x|, int8 levels, exact sums, acc / s_x / s_w + bias"""
        x, w = xs[0], xs[1]
        sw = (1.0 / w.abs().mean().clamp(min=1e-5)).to(F32).to(x.dtype)
        qw = (w * (1.0 / w.abs().mean().clamp(min=1e-5))).round().clamp(-1, 1).double()
        sx = 127.0 / x.abs().max(dim=-1, keepdim=True).values.clamp(min=1e-5)
        qx = (x * sx).round().clamp(-128, 127).double()
        acc = (qx @ qw.T).to(x.dtype)
        y = acc / sx / sw
        return y + xs[2] if len(xs) > 2 else y

    out += [Case("bitnet_pack", [R((3, 130))], pack, req=False, tag="f32"),
            Case("bitnet_pack", [R((2, 256), F64)], pack, req=False, tag="f64"),
            Case("bitnet_pack", [R((5,))], pack, req=False, tag="1-d error"),
            Case("bitnet_linear", [R((4, 300)), R((6, 300)), R((6,))], blin, req=False, tag="f32", tol=bt),
            Case("bitnet_linear", [R((2, 3, 200), F64), R((5, 200), F64)], blin, req=False, tag="f64"),
            Case("bitnet_linear", [R((4, 100)), R((6, 300))], blin, req=False, tag="k error")]
    return out + quantize_int()


QDT = {"uint8": torch.quint8, "int8": torch.qint8, "int32": torch.qint32}


def quantize_int():
    """torch.quantize_per_tensor / quantize_per_channel (.int_repr()) and dequantize (nb_quantize.h): ties,
    clamping at both ends of quint8, qint8 and qint32, NaN, zero points, per-channel axes; int16 has no torch
    quantized dtype (its cases check nabla's own error paths only). Inputs from RN's generator: adding these
    cases moved no other case's draws."""
    qpt = lambda xs, a: torch.quantize_per_tensor(xs[0], a["scale"], a["zero_point"], QDT[a["dtype"]]).int_repr()
    qpc = lambda xs, a: torch.quantize_per_channel(xs[0], xs[1].double(), xs[2].long(), a["axis"],
                                                   QDT[a["dtype"]]).int_repr()
    dpt = lambda xs, a: torch._make_per_tensor_quantized_tensor(xs[0], a["scale"], a["zero_point"]).dequantize()
    dpc = lambda xs, a: torch._make_per_channel_quantized_tensor(xs[0], xs[1].double(), xs[2].long(),
                                                                 a["axis"]).dequantize()
    ties = [-2.25, -1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 1.75, 2.25, 100.0, -100.0, NAN, INF, -INF, 1e10, -1e10]
    g = torch.Generator().manual_seed(21)
    u = lambda shape, lo, hi, dt=F32: (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dt)
    out = [Case("quantize_per_tensor", [u((3, 5), -30, 30)], qpt, {"scale": 0.2, "zero_point": 3, "dtype": "int8"},
                tag="int8"),
           Case("quantize_per_tensor", [u((4, 4), -2, 30)], qpt, {"scale": 0.1, "zero_point": 20, "dtype": "uint8"},
                tag="uint8"),
           Case("quantize_per_tensor", [u((2, 3), -1.6e4, 1.6e4)], qpt,
                {"scale": 1e-3, "zero_point": -7, "dtype": "int32"}, tag="int32"),
           Case("quantize_per_tensor", [T(ties)], qpt, {"scale": 0.5, "zero_point": 0, "dtype": "int8"},
                tag="ties nan inf"),
           Case("quantize_per_tensor", [T(ties)], qpt, {"scale": 0.5, "zero_point": 1, "dtype": "uint8"},
                tag="ties uint8"),
           Case("quantize_per_tensor", [u((4, 3), -3, 3)], qpt, {"scale": 0.05, "zero_point": 0, "dtype": "int8"},
                views=["T"], tag="view"),
           Case("quantize_per_tensor", [u((3,), -1, 1)], qpt, {"scale": 0.1, "zero_point": 300, "dtype": "uint8"},
                tag="zero point error"),
           Case("quantize_per_tensor", [u((3,), -1, 1)], qpt, {"scale": 0.1, "zero_point": 0, "dtype": "float32"},
                tag="dtype error"),
           Case("quantize_per_channel", [u((2, 3, 4), -3, 3), T([0.02, 0.05, 0.1]), T([0, 5, -3], I64)], qpc,
                {"axis": 1, "dtype": "int8"}, tag="int8 axis 1"),
           Case("quantize_per_channel", [u((3, 5), 0, 4), T([0.01, 0.02, 0.03]), T([0, 10, 128], I32)], qpc,
                {"axis": 0, "dtype": "uint8"}, tag="uint8 axis 0"),
           Case("quantize_per_channel", [T([ties[:8], ties[8:]]), T([0.5, 0.25]), T([0, 1], I64)], qpc,
                {"axis": 0, "dtype": "int8"}, tag="ties nan inf"),
           Case("quantize_per_channel", [u((2, 3), -1, 1), T([0.1, 0.2]), T([0, 0], I64)], qpc,
                {"axis": 1, "dtype": "int8"}, tag="size error"),
           Case("dequantize_per_tensor", [RN((3, 4), I8, -128, 128)], dpt, {"scale": 0.125, "zero_point": -3},
                tag="int8"),
           Case("dequantize_per_tensor", [RN((5,), U8, 0, 256)], dpt, {"scale": 0.1, "zero_point": 128}, tag="uint8",
                tol={F32: (0, 1.2e-7)}),
           Case("dequantize_per_tensor", [RN((4,), I32, -100000, 100000)], dpt, {"scale": 3e-4, "zero_point": 7},
                tag="int32", tol={F32: (0, 1.2e-7)}),
           Case("dequantize_per_tensor", [T([1.0, 2.0])], dpt, {"scale": 0.1, "zero_point": 0}, tag="float error"),
           Case("dequantize_per_channel", [RN((2, 3, 4), I8, -128, 128), T([0.02, 0.05, 0.1]), T([0, 5, -3], I64)],
                dpc, {"axis": 1}, tag="int8 axis 1", tol={F32: (0, 1.2e-7)}),
           Case("dequantize_per_channel", [RN((3, 2), U8, 0, 256), T([0.5, 0.25, 0.125]), T([0, 10, 128], I64)],
                dpc, {"axis": 0}, tag="uint8 axis 0")]

    def i8q(xs, a):
        """torchao's int8_weight_only quantization: symmetric per row, scale amax / 127.5 (at least eps)"""
        w = xs[0]
        if w.dim() != 2:
            raise RuntimeError("needs [N, K]")
        w = w.float()
        s = (w.abs().amax(1) / 127.5).clamp(min=2.0 ** -23)
        q = torch.quantize_per_channel(w, s.double(), torch.zeros(len(s), dtype=torch.int64), 0, torch.qint8)
        return q.int_repr(), s

    def li8(xs, a):
        """x (q s)^T + b in float64 from the weights xs[1] quantized as i8q"""
        q, s = i8q(xs[1:2], a)
        y = xs[0].double() @ (q.double() * s.double()[:, None]).T
        y = y + xs[2].double() if len(xs) > 2 else y
        return y.to(xs[0].dtype)

    lt = {F32: (2e-5, 2e-5)}
    out += [Case("int8_weight_quantize", [u((5, 40), -2, 2)], i8q, req=False, tag="f32"),
            Case("int8_weight_quantize", [T([[0.0, 0.0], [1.0, -127.5]])], i8q, req=False, tag="zero row, ties"),
            Case("int8_weight_quantize", [u((3, 7), -1, 1, F64)], i8q, req=False, tag="f64"),
            Case("int8_weight_quantize", [u((5,), -1, 1)], i8q, req=False, tag="1-d error"),
            Case("linear_int8", [u((3, 64), -1, 1), u((6, 64), -1, 1), u((6,), -1, 1)], li8, req=False, tag="f32",
                 tol=lt),
            Case("linear_int8", [u((2, 3, 40), -1, 1, F64), u((5, 40), -1, 1, F64)], li8, req=False, tag="f64"),
            Case("linear_int8", [u((2, 24), -1, 1, F64), u((3, 24), -1, 1, F64), u((3,), -1, 1, F64)], li8,
                 req=[True, False, True], tag="gradients"),
            Case("linear_int8", [u((20, 32), -1, 1), u((4, 32), -1, 1)], li8, req=False, tag="many rows", tol=lt),
            Case("linear_int8", [u((3, 10), -1, 1), u((6, 12), -1, 1)], li8, req=False, tag="k error")]
    return out
