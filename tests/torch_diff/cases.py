"""cases.py - the differential suite's cases: for every op of nabla's op
table (the CNN, linear-algebra and sampling ones in cases_nn.py), inputs
and arguments, and the PyTorch call nabla must match.

A Case holds the op's name (nabla's, as in core/nb_op_table.h), its
inputs (torch tensors, or None for a NULL input), how the runner views each
(""; "T" a transpose of the last two dims; "S" every other element of the
last dim), which require grad, the arguments (PyTorch's keyword names; the
runner reads the same), the PyTorch function fn(xs, args) -> output(s), a
tag naming the kind of case (allow.py matches on it), and tolerances when
the default (float32 rtol 2e-5) does not fit the op's numerics.
"""
import math  # noqa: F401

import torch
import torch.nn.functional as F

from cases_common import *  # noqa: F401,F403
from cases_nn import NOT_IN_THIS_TORCH, cnn, fractional_pools, fused, linalg, packed, sampling  # noqa: F401
from cases_tensor import ctc, grouped_mm, quantize, tensor_ops

# ---- unary ops ---------------------------------------------------------------------------------------------------

# name -> (torch fn of one tensor, domain (lo, hi) for random inputs, promotes ints to float32)
FLOAT_FNS = {
    "exp": (torch.exp, (-3, 3)), "log": (torch.log, (0.1, 4)), "sqrt": (torch.sqrt, (0.1, 4)),
    "sigmoid": (torch.sigmoid, (-4, 4)), "tanh": (torch.tanh, (-3, 3)), "reciprocal": (torch.reciprocal, (0.5, 3)),
    "rsqrt": (torch.rsqrt, (0.2, 4)), "log1p": (torch.log1p, (-0.5, 3)), "expm1": (torch.expm1, (-2, 2)),
    "log2": (torch.log2, (0.1, 4)), "log10": (torch.log10, (0.1, 4)), "sin": (torch.sin, (-4, 4)),
    "cos": (torch.cos, (-4, 4)), "tan": (torch.tan, (-1.2, 1.2)), "asin": (torch.asin, (-0.9, 0.9)),
    "acos": (torch.acos, (-0.9, 0.9)), "atan": (torch.atan, (-3, 3)), "sinh": (torch.sinh, (-2, 2)),
    "cosh": (torch.cosh, (-2, 2)), "asinh": (torch.asinh, (-3, 3)), "acosh": (torch.acosh, (1.1, 4)),
    "atanh": (torch.atanh, (-0.9, 0.9)), "erf": (torch.erf, (-2, 2)), "erfc": (torch.erfc, (-2, 2)),
}
# no integer promotion (PyTorch rejects ints for the activations; neg/abs/... keep them)
PLAIN_FNS = {
    "neg": (torch.neg, (-3, 3)), "relu": (torch.relu, (-3, 3)), "abs": (torch.abs, (-3, 3)),
    "sign": (torch.sign, (-3, 3)), "floor": (torch.floor, (-3, 3)), "ceil": (torch.ceil, (-3, 3)),
    "trunc": (torch.trunc, (-3, 3)), "round": (torch.round, (-3, 3)), "selu": (F.selu, (-3, 3)),
    "silu": (F.silu, (-5, 5)), "mish": (F.mish, (-5, 5)), "relu6": (F.relu6, (-2, 8)),
    "hardsigmoid": (F.hardsigmoid, (-5, 5)), "hardswish": (F.hardswish, (-5, 5)),
    "logsigmoid": (F.logsigmoid, (-5, 5)),
}


def unary_cases(name, fn, dom, promotes, args=None, tol=None):
    args = args or {}
    f = (lambda xs, a: fn(xs[0])) if not args else fn
    out = [
        Case(name, [R((3, 4), F32, *dom)], f, args, tag="f32", tol=tol),
        Case(name, [R((3, 4), F32, *dom)], f, args, views=["T"], tag="f32 view", tol=tol),
        Case(name, [R((2, 5), F64, *dom)], f, args, views=["S"], tag="f64 view", tol=tol),
        Case(name, [special(F32)], f, args, tag="special", tol=tol),
        Case(name, [special(F64)], f, args, tag="special", tol=tol),
        Case(name, [subnormal(F32)], f, args, tag="subnormal", tol=tol),
        Case(name, [subnormal(F64)], f, args, tag="subnormal", tol=tol),
        Case(name, [R((), F32, *dom)], f, args, tag="0-d", tol=tol),
        Case(name, [R((0, 3), F32, *dom)], f, args, tag="empty"),
        Case(name, [R((4,), I32, -3, 4)], f, args, tag="int"),
        Case(name, [R((4,), BOOL)], f, args, tag="bool"),
        Case(name, [R((3,), F16, *dom)], f, args, tag="f16"),
        Case(name, [None], f, args, tag="null"),
    ]
    if promotes:
        out.append(Case(name, [R((5,), I64, 1, 4)], f, args, tag="int64"))
    return out


def unary():
    out = []
    for name, (fn, dom) in FLOAT_FNS.items():
        out += unary_cases(name, fn, dom, True)
    for name, (fn, dom) in PLAIN_FNS.items():
        out += unary_cases(name, fn, dom, False)
    out += unary_cases("leaky_relu", lambda xs, a: F.leaky_relu(xs[0], a["negative_slope"]), (-3, 3), False,
                       {"negative_slope": 0.2})
    out += unary_cases("elu", lambda xs, a: F.elu(xs[0], a["alpha"]), (-3, 3), False, {"alpha": 1.5})
    out += unary_cases("hardtanh", lambda xs, a: F.hardtanh(xs[0], a["min_val"], a["max_val"]), (-3, 3), False,
                       {"min_val": -1.5, "max_val": 0.5})
    for beta, thr in ((1, 20), (2, 20), (0.5, 10), (-1, 20)):
        out += unary_cases("softplus", lambda xs, a: F.softplus(xs[0], a["beta"], a["threshold"]), (-30, 30), False,
                           {"beta": beta, "threshold": thr})
    out += [Case("softplus", [R((3,))], lambda xs, a: F.softplus(xs[0], a["beta"], a["threshold"]),
                 {"beta": 0, "threshold": 20}, tag="bad beta")]
    for approx in ("none", "tanh"):
        out += unary_cases("gelu", lambda xs, a: F.gelu(xs[0], approximate=a["approximate"]), (-4, 4), False,
                           {"approximate": approx}, tol={F32: (1e-5, 2e-7)})
    for other in (2.0, -1.5, 0.5, 1e10, -3.0, 300.0, 0.0):
        fa = lambda xs, a: xs[0] + sv(a["other"], xs[0])
        fm = lambda xs, a: xs[0] * sv(a["other"], xs[0])
        for dt in (F32, F64, I32, I64, U8, BOOL):
            x = R((4,), dt, -5, 6) if dt != U8 else R((4,), dt, 0, 200)
            out.append(Case("add_scalar", [x], fa, {"other": other}, tag="scalar"))
            out.append(Case("mul_scalar", [x], fm, {"other": other}, tag="scalar"))
    out.append(Case("add_scalar", [special(F32)], lambda xs, a: xs[0] + a["other"], {"other": 1.0}, tag="special"))
    out.append(Case("mul_scalar", [special(F64)], lambda xs, a: xs[0] * a["other"], {"other": -2.0}, tag="special"))
    out.append(Case("add_scalar", [R((3, 4))], lambda xs, a: xs[0] + a["other"], {"other": 1.0}, views=["T"],
                    tag="view"))
    for e in (2.0, 0.5, -1.0, 3.0, 0.0, -0.5):
        out.append(Case("pow_scalar", [R((6,), F32, 0.1, 3)], lambda xs, a: xs[0] ** a["exponent"], {"exponent": e},
                        tag="f32"))
        out.append(Case("pow_scalar", [special(F64)], lambda xs, a: xs[0] ** a["exponent"], {"exponent": e},
                        tag="special"))
    out.append(Case("pow_scalar", [R((3,), I32, 1, 4)], lambda xs, a: xs[0] ** a["exponent"], {"exponent": 2.0},
                    tag="int"))
    for d in (0, 1, 2, -1):
        rd = lambda xs, a: torch.round(xs[0], decimals=a["decimals"])
        out.append(Case("round_decimals", [T([1.2345, 0.125, -1250.0, 1234.5, -0.375, 2.5, NAN, INF])], rd,
                        {"decimals": d}, tag="f32"))
        out.append(Case("round_decimals", [R((5,), F64, -100, 100)], rd, {"decimals": d}, tag="f64"))
    out.append(Case("round_decimals", [R((3,), I64, -9, 9)], lambda xs, a: torch.round(xs[0], decimals=1),
                    {"decimals": 1}, tag="int"))
    for dt in ("float32", "float64", "int32", "int64", "uint8", "bool", "float16", "bfloat16"):
        tdt = getattr(torch, dt)
        for src in (special(F32), special(F64), R((3, 4), F32, -300, 300), R((4,), I64, -300, 300),
                    R((3,), BOOL), T([0.1, 65504.0, 70000.0, -1e-5, 3.14159], F16)):
            out.append(Case("to_dtype", [src], lambda xs, a: xs[0].to(getattr(torch, a["dtype"])), {"dtype": dt},
                            tag="cast"))
    # into and out of int8/int16 (in-range floats: out-of-range float-to-int is undefined in C and PyTorch)
    for dt in ("int8", "int16"):
        for src in (RN((3, 4), F64, -120, 120), RN((4,), I64, -300, 300), RN((5,), I16, -32768, 32768),
                    RN((5,), I8, -128, 128), T([True, False, True], BOOL)):
            out.append(Case("to_dtype", [src], lambda xs, a: xs[0].to(getattr(torch, a["dtype"])), {"dtype": dt},
                            tag="cast"))
    for dt in ("float32", "float64", "int32", "int64", "uint8", "float16"):
        out.append(Case("to_dtype", [RN((5,), I8, -128, 128)], lambda xs, a: xs[0].to(getattr(torch, a["dtype"])),
                        {"dtype": dt}, tag="cast from int8"))
    return out


# ---- binary ops ---------------------------------------------------------------------------------------------------

def pair_grid(dt):
    s = special(dt)
    return s.repeat_interleave(len(s)), s.repeat(len(s))


def binary_cases(name, fn, dom_a=(-3, 3), dom_b=(-3, 3), ints=True, bools=True, grad=True, tol=None):
    out = [
        Case(name, [R((3, 4), F32, *dom_a), R((4,), F32, *dom_b)], fn, tag="broadcast", req=None if grad else False,
             tol=tol),
        Case(name, [R((2, 1, 3), F64, *dom_a), R((4, 1), F64, *dom_b)], fn, tag="broadcast",
             req=None if grad else False, tol=tol),
        Case(name, [R((3, 4), F32, *dom_a), R((3, 4), F32, *dom_b)], fn, views=["T", "S"], tag="views",
             req=None if grad else False, tol=tol),
        Case(name, [R((), F64, *dom_a), R((3,), F32, *dom_b)], fn, tag="0-d promotion", req=None if grad else False,
             tol=tol),
        Case(name, [R((3,), F32, *dom_a), R((3,), F64, *dom_b)], fn, tag="promotion", req=None if grad else False,
             tol=tol),
        Case(name, [R((0, 3), F32, *dom_a), R((3,), F32, *dom_b)], fn, tag="empty"),
        Case(name, [R((3,), F32), R((4,), F32)], fn, tag="shape error"),
        Case(name, [None, R((3,), F32)], fn, tag="null"),
        Case(name, [R((3,), F16), R((3,), F16)], fn, tag="f16"),
    ]
    for dt in (F32, F64):
        a, b = pair_grid(dt)
        out.append(Case(name, [a, b], fn, tag="special", req=None if grad else False, tol=tol))
        sn = subnormal(dt)
        out.append(Case(name, [sn.repeat_interleave(len(sn)), sn.repeat(len(sn))], fn, tag="subnormal",
                        req=None if grad else False, tol=tol))
    if ints:
        out += [
            Case(name, [R((4,), I32, -5, 6), R((4,), F32, *dom_b)], fn, tag="int promotion", tol=tol),
            Case(name, [R((4,), I32, -9, 9), R((4,), I32, 1, 5)], fn, tag="int"),
            Case(name, [R((4,), I64, -9, 9), R((), I64, 1, 5)], fn, tag="int"),
            Case(name, [R((4,), U8, 0, 200), R((4,), I64, 1, 9)], fn, tag="int"),
            Case(name, [R((4,), U8, 0, 200), R((), I64, 1, 9)], fn, tag="int 0-d"),
            Case(name, [RN((6,), I8, -128, 128), RN((6,), I8, 1, 9)], fn, tag="int8"),
            Case(name, [RN((6,), I16, -32768, 32768), RN((6,), I16, -9, -1)], fn, tag="int16"),
            Case(name, [RN((6,), U8, 0, 256), RN((6,), I8, 1, 9)], fn, tag="uint8 int8"),
            Case(name, [R((4,), I32, -9, 9), R((), F64, 1, 3)], fn, tag="int 0-d float", tol=tol),
        ]
    if bools:
        out.append(Case(name, [R((4,), BOOL), R((4,), BOOL)], fn, tag="bool"))
        out.append(Case(name, [R((4,), BOOL), R((4,), I32, -3, 3)], fn, tag="bool int"))
    return out


def binary():
    out = []
    b2 = lambda f: (lambda xs, a: f(xs[0], xs[1]))
    out += binary_cases("add", b2(torch.add))
    out += binary_cases("sub", b2(torch.sub), bools=False)
    out += binary_cases("mul", b2(torch.mul))
    out += binary_cases("div", b2(torch.div), dom_b=(0.5, 3))
    out += [Case("div", [R((4,), I32, -9, 9), T([0, 1, 2, 0], I32)], b2(torch.div), tag="int by zero")]
    out += binary_cases("pow", b2(torch.pow), dom_a=(0.2, 3), dom_b=(-2, 2), bools=False)
    for mode in ("trunc", "floor"):
        f = lambda xs, a: torch.div(xs[0], xs[1], rounding_mode=a["rounding_mode"])
        for c in binary_cases("div_mode", f, dom_b=(0.5, 3), bools=False):
            c.args["rounding_mode"] = mode
            out.append(c)
        out.append(Case("div_mode", [R((4,), I32, -9, 9), T([0, 1, 2, 0], I32)], f, {"rounding_mode": mode},
                        tag="int by zero"))
        # INT_MIN / -1 traps (SIGFPE) inside PyTorch 1.13: the reference divides in int64 and wraps
        wrap = lambda xs, a: torch.div(xs[0].long(), xs[1].long(), rounding_mode=a["rounding_mode"]).to(I32)
        out.append(Case("div_mode", [T([-7, 7, -7, 7, -2147483648], I32), T([2, -2, -2, 2, -1], I32)], wrap,
                        {"rounding_mode": mode}, tag="int edges"))
    out += binary_cases("floor_divide", b2(torch.floor_divide), dom_b=(0.5, 3), bools=False, grad=False)
    out += binary_cases("remainder", b2(torch.remainder), dom_b=(0.5, 3), bools=False)
    out += binary_cases("fmod", b2(torch.fmod), dom_b=(0.5, 3), bools=False)
    out += [Case("remainder", [T([-7, 7, -7, 7], I64), T([2, -2, -2, 0], I64)], b2(torch.remainder), tag="int by zero"),
            Case("fmod", [T([-7, 7, -7, 7], I64), T([2, -2, -2, 0], I64)], b2(torch.fmod), tag="int by zero")]
    for name, tf in (("remainder_scalar", torch.remainder), ("fmod_scalar", torch.fmod)):
        for o in (2.0, -1.5, 3.0, 0.0):
            f = lambda xs, a, tf=tf: tf(xs[0], sv(a["other"], xs[0]))
            out += [Case(name, [R((5,), F32, -9, 9)], f, {"other": o}, tag="f32"),
                    Case(name, [special(F64)], f, {"other": o}, tag="special"),
                    Case(name, [R((5,), I32, -9, 9)], f, {"other": o}, tag="int")]
    out += binary_cases("atan2", b2(torch.atan2), bools=False)
    out += binary_cases("maximum", b2(torch.maximum))
    out += binary_cases("minimum", b2(torch.minimum))
    out += [Case("maximum", [T([1.0, 2.0, NAN, 3.0]), T([1.0, 1.0, 1.0, NAN])], b2(torch.maximum), tag="ties")]
    for name in ("eq", "ne", "gt", "ge", "lt", "le"):
        out += binary_cases(name, b2(getattr(torch, name)), grad=False)
        out.append(Case(name, [T([1, 2, 3], I64), T([1.0, 2.5, NAN])], b2(getattr(torch, name)), tag="int float"))
        for o in (1.0, 2.5, -0.0, NAN, INF, 1e10):
            cmp = lambda xs, a, n=name: getattr(torch, n)(xs[0], sv(a["other"], xs[0]))
            out += [Case(name + "_scalar", [special(F32)], cmp, {"other": o}, tag="special"),
                    Case(name + "_scalar", [R((5,), I32, -3, 3)], cmp, {"other": o}, tag="int"),
                    Case(name + "_scalar", [R((5,), I64, -3, 3)], cmp, {"other": o}, tag="int")]
        out.append(Case(name + "_scalar", [T([2 ** 53 + 1, 2 ** 53], I64)],
                        lambda xs, a, n=name: getattr(torch, n)(xs[0], sv(a["other"], xs[0])),
                        {"other": float(2 ** 53)}, tag="int64 exact"))
    for name in ("isnan", "isinf", "isfinite"):
        fn = getattr(torch, name)
        out += [Case(name, [special(F32)], lambda xs, a, fn=fn: fn(xs[0]), tag="special"),
                Case(name, [special(F64)], lambda xs, a, fn=fn: fn(xs[0]), tag="special"),
                Case(name, [R((3,), I32)], lambda xs, a, fn=fn: fn(xs[0]), tag="int"),
                Case(name, [R((3,), BOOL)], lambda xs, a, fn=fn: fn(xs[0]), tag="bool"),
                Case(name, [T([1.0, INF, NAN], F16)], lambda xs, a, fn=fn: fn(xs[0]), tag="f16 ok"),
                Case(name, [R((0,))], lambda xs, a, fn=fn: fn(xs[0]), tag="empty"),
                Case(name, [None], lambda xs, a, fn=fn: fn(xs[0]), tag="null")]
    for name in ("logical_and", "logical_or", "logical_xor"):
        out += binary_cases(name, b2(getattr(torch, name)), grad=False)
    out += [Case("logical_not", [x], lambda xs, a: torch.logical_not(xs[0]), tag=t)
            for x, t in ((special(F32), "special"), (R((4,), I32, -2, 2), "int"), (R((4,), BOOL), "bool"),
                         (R((0,)), "empty"))]
    ints = [(R((5,), I32, -100, 100), R((5,), I32, -100, 100)), (R((5,), I64, -9, 9), R((5,), I64, 0, 70)),
            (R((5,), U8, 0, 255), R((5,), U8, 0, 10)), (R((5,), BOOL), R((5,), BOOL)),
            (R((5,), U8, 0, 255), R((5,), I32, -3, 9)), (R((4,), F32), R((4,), F32))]
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"):
        fn = getattr(torch, name)
        for a, b in ints:
            if "shift" in name and BOOL in (a.dtype, b.dtype):
                continue
            out.append(Case(name, [a, b], lambda xs, a_, fn=fn: fn(xs[0], xs[1]), tag="int"))
        out.append(Case(name, [T([1, -8, 2 ** 30, -2 ** 31], I32), T([0, 1, 31, 40], I32)],
                        lambda xs, a_, fn=fn: fn(xs[0], xs[1]), tag="int edges"))
        for o in (0, 3, -1, 40, 2 ** 40):
            for x in (R((5,), I32, -100, 100), R((5,), U8, 0, 255), R((5,), BOOL), R((5,), I64, -9, 9)):
                if "shift" in name and x.dtype == BOOL:
                    continue
                out.append(Case(name + "_scalar", [x], lambda xs, a_, fn=fn: fn(xs[0], a_["other"]), {"other": o},
                                tag="scalar"))
    out += [Case("bitwise_not", [x], lambda xs, a: torch.bitwise_not(xs[0]), tag="int")
            for x in (R((5,), I32, -100, 100), R((5,), U8, 0, 255), R((5,), BOOL), R((5,), I64, -9, 9), R((3,)))]
    # lerp, clamp, where, masked_fill
    lp = lambda xs, a: torch.lerp(xs[0], xs[1], xs[2])
    out += [Case("lerp", [R((3, 4)), R((4,)), R((3, 1), F32, -0.5, 1.5)], lp, tag="broadcast"),
            Case("lerp", [R((3,), F64), R((3,), F64), R((3,), F64, -1, 2)], lp, tag="f64"),
            Case("lerp", [T([0.0, 0.0, 1.0, NAN]), T([INF, -INF, 3.0, 1.0]), T([0.3, 0.7, 0.25, 0.5])], lp,
                 tag="infinite range"),
            Case("lerp", [R((3,)), R((3,)), R((3,), F64)], lp, tag="dtype error"),
            Case("lerp", [R((3,), I32), R((3,), I32), R((3,), I32)], lp, tag="int error"),
            Case("lerp", [R((3,)), R((4,)), R((3,))], lp, tag="shape error")]
    for w in (0.3, 0.7, -1.0, 2.0):
        out.append(Case("lerp_scalar", [R((3, 4)), R((4,))], lambda xs, a: torch.lerp(xs[0], xs[1], a["weight"]),
                        {"weight": w}, tag="f32"))
    cl = lambda xs, a: torch.clamp(xs[0], xs[1], xs[2])
    out += [Case("clamp", [R((3, 4)), R((4,), F32, -1, 0), R((3, 1), F32, 0, 1)], cl, tag="broadcast"),
            Case("clamp", [special(F64), T(-1.0, F64), T(2.0, F64)], cl, tag="special"),
            Case("clamp", [R((4,)), T(1.0), T(-1.0)], cl, tag="min > max"),
            Case("clamp", [R((4,)), None, T(0.5)], cl, tag="max only"),
            Case("clamp", [R((4,), I32, -5, 5), T(-2, I32), T(3.5)], cl, tag="promotion"),
            Case("clamp", [R((4,)), None, None], lambda xs, a: torch.clamp(xs[0]), tag="no bounds")]
    for lo, hi in ((-0.5, 0.5), (NAN, 0.5), (-1.0, NAN), (1.0, -1.0), (-1.5, 2.5)):
        args = {"min": "nan" if lo != lo else lo, "max": "nan" if hi != hi else hi}
        f = lambda xs, a: torch.clamp(xs[0], None if a["min"] == "nan" else sv(a["min"], xs[0]),
                                      None if a["max"] == "nan" else sv(a["max"], xs[0]))
        out += [Case("clamp_scalar", [R((3, 4))], f, args, tag="f32"),
                Case("clamp_scalar", [special(F64)], f, args, tag="special"),
                Case("clamp_scalar", [R((5,), I32, -5, 5)], f, args, tag="int")]
    wh = lambda xs, a: torch.where(xs[0], xs[1], xs[2])
    out += [Case("where", [R((3, 4), BOOL), R((3, 4)), R((4,))], wh, tag="broadcast"),
            Case("where", [R((3,), BOOL), R((3,), F64), R((3,), F32)], wh, tag="promotion"),
            Case("where", [R((3,), BOOL), R((3,), I32), R((3,), I32)], wh, tag="int"),
            Case("where", [R((3,), BOOL), T([1.0, INF, NAN]), T([NAN, 2.0, -INF])], wh, tag="special"),
            Case("where", [R((3,), F32), R((3,)), R((3,))], wh, tag="cond not bool"),
            Case("where", [R((2, 3), BOOL), R((3, 2)), R((3, 2))], wh, tag="shape error")]
    ic = lambda xs, a: torch.isclose(xs[0], xs[1], a.get("rtol", 1e-5), a.get("atol", 1e-8), a.get("equal_nan", False))
    ac = lambda xs, a: torch.tensor(torch.allclose(xs[0], xs[1], a.get("rtol", 1e-5), a.get("atol", 1e-8),
                                                   a.get("equal_nan", False)))
    for name, f in (("isclose", ic), ("allclose", ac)):
        x = special(F32)
        for args in ({}, {"rtol": 0.1, "atol": 0.5}, {"equal_nan": True}, {"rtol": 0, "atol": 0}):
            out += [Case(name, [x, x], f, args, tag="same"),
                    Case(name, [x, x * (1 + 1e-6)], f, args, tag="special"),
                    Case(name, [R((3, 4)), R((4,))], f, args, tag="broadcast"),
                    Case(name, [R((5,), I32, -3, 3), R((5,), I32, -3, 3)], f, args, tag="int"),
                    Case(name, [R((5,), BOOL), R((5,), BOOL)], f, args, tag="bool")]
        out += [Case(name, [R((3,)), R((3,), F64)], f, {}, tag="dtype error"),
                Case(name, [R((3,)), R((3,))], f, {"rtol": -1.0}, tag="negative rtol"),
                Case(name, [R((3,)), R((4,))], f, {}, tag="shape error")]
    mf = lambda xs, a: xs[0].masked_fill(xs[1], float(a["value"]))
    out += [Case("masked_fill", [R((3, 4)), R((4,), BOOL)], mf, {"value": -1.5}, tag="broadcast"),
            Case("masked_fill", [R((3, 4), I64, -9, 9), R((3, 4), BOOL)], mf, {"value": 7}, tag="int"),
            Case("masked_fill", [R((3, 4)), R((3, 4), BOOL)], mf, {"value": "-inf"}, tag="inf"),
            Case("masked_fill", [R((3, 4)), R((3, 4), I32)], mf, {"value": 0}, tag="mask not bool")]
    return out


# ---- reductions, scans, sorting ---------------------------------------------------------------------------------------

def dims_kw(a):
    d = a.get("dim")
    return tuple(d) if d is not None else None


def check_dims(x, d):
    """PyTorch's dim checks for the reductions the reference writes dim by dim."""
    if d is None:
        return
    n = max(x.dim(), 1)
    w = [dd + n if dd < 0 else dd for dd in d]
    if any(dd < 0 or dd >= n for dd in w) or len(set(w)) != len(w):
        raise IndexError("dim out of range or repeated")


def reduce_fn(name):
    def f(xs, a):
        d, k = dims_kw(a), a.get("keepdim", False)
        x = xs[0]
        check_dims(x, d)
        if name in ("sum", "mean", "prod", "amax", "amin", "logsumexp", "all", "any", "max", "min"):
            tf = {"max": torch.amax, "min": torch.amin, "amax": torch.amax, "amin": torch.amin}.get(name)
            if name == "prod":
                if d is None:
                    r = torch.prod(x)
                    return r.reshape([1] * x.dim()) if k else r
                r = x
                for dd in sorted([dd % max(x.dim(), 1) for dd in d], reverse=True):
                    r = torch.prod(r, dd, keepdim=True)
                return r if k else r.reshape([s for i, s in enumerate(x.shape) if i not in
                                              [dd % max(x.dim(), 1) for dd in d]])
            if name in ("all", "any"):
                tf = getattr(torch, name)
                if d is None:
                    r = tf(x)
                    return r.reshape([1] * x.dim()) if k else r
                r = x
                for dd in sorted([dd % max(x.dim(), 1) for dd in d], reverse=True):
                    r = tf(r, dd, keepdim=True)
                return r if k else r.reshape([s for i, s in enumerate(x.shape) if i not in
                                              [dd % max(x.dim(), 1) for dd in d]])
            if name == "logsumexp":
                return torch.logsumexp(x, d if d is not None else tuple(range(x.dim())), keepdim=k)
            if tf is None:
                tf = getattr(torch, name)
            if d is None:
                return tf(x, dim=tuple(range(x.dim())), keepdim=k) if name not in ("sum", "mean") else \
                    (tf(x, dim=tuple(range(x.dim())), keepdim=k) if x.dim() else tf(x))
            return tf(x, dim=d, keepdim=k)
        raise ValueError(name)
    return f


def reductions():
    out = []
    shapes = [((3, 4), None), ((3, 4), [1]), ((2, 3, 4), [0, 2]), ((2, 3, 4), [-1]), ((), None), ((0, 3), [0]),
              ((0, 3), [1]), ((0, 3), None), ((5,), [0])]
    for name in ("sum", "mean", "prod", "amax", "amin", "max", "min", "logsumexp", "all", "any"):
        f = reduce_fn(name)
        for shape, d in shapes:
            for k in (False, True):
                args = {"keepdim": k}
                if d is not None:
                    args["dim"] = d
                dt = F64 if shape == (2, 3, 4) else F32
                out.append(Case(name, [R(shape, dt, -2, 2)], f, args, tag="shape"))
        out += [Case(name, [R((3, 4))], f, {"dim": [0]}, views=["T"], tag="view"),
                Case(name, [special(F32)], f, {}, tag="special", ill=True),
                Case(name, [special(F64).reshape(5, 6)], f, {"dim": [1]}, tag="special", ill=True),
                Case(name, [T([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]])], f, {"dim": [1]}, tag="ties"),
                Case(name, [R((3, 4), I32, -5, 5)], f, {"dim": [1]}, tag="int"),
                Case(name, [R((3, 4), BOOL)], f, {}, tag="bool"),
                Case(name, [R((3, 4))], f, {"dim": [2]}, tag="bad dim"),
                Case(name, [R((3, 4))], f, {"dim": [1, 1]}, tag="repeated dim"),
                Case(name, [R((3,), F16)], f, {}, tag="f16")]
    out.append(Case("sum", [R((4, 5), U8, 200, 255)], reduce_fn("sum"), {"dim": [0]}, tag="u8 overflow"))
    out.append(Case("prod", [T([[INF, 2.0, 3.0], [NAN, 2.0, 3.0], [0.0, INF, 3.0], [-INF, 0.5, 4.0]], F64)],
                    reduce_fn("prod"), {"dim": [1]}, tag="grad special"))
    out.append(Case("prod", [T([[0.0, 2.0, 3.0], [0.0, 0.0, 3.0], [1.0, 2.0, 3.0]], F64)], reduce_fn("prod"),
                    {"dim": [1]}, tag="zeros"))
    for name, tf in (("max_dim", torch.max), ("min_dim", torch.min)):
        f = lambda xs, a, tf=tf: tuple(tf(xs[0], a["dim"], keepdim=a["keepdim"]))
        for dim, k in ((0, False), (1, True), (-1, False)):
            out += [Case(name, [R((3, 4))], f, {"dim": dim, "keepdim": k}, tag="f32"),
                    Case(name, [R((3, 4), I64, -3, 3)], f, {"dim": dim, "keepdim": k}, tag="ties int")]
        out += [Case(name, [special(F64).reshape(5, 6)], f, {"dim": 1, "keepdim": False}, tag="special"),
                Case(name, [R((0, 3))], f, {"dim": 0, "keepdim": False}, tag="empty dim"),
                Case(name, [R(())], f, {"dim": 0, "keepdim": False}, tag="0-d"),
                Case(name, [R((3, 4))], f, {"dim": 0, "keepdim": False}, views=["T"], tag="view")]
    for name, tf in (("argmax", torch.argmax), ("argmin", torch.argmin)):
        f = lambda xs, a, tf=tf: tf(xs[0], a["dim"], keepdim=a["keepdim"])
        out += [Case(name, [R((3, 4))], f, {"dim": 1, "keepdim": False}, tag="f32"),
                Case(name, [R((3, 4), I32, -2, 2)], f, {"dim": 0, "keepdim": True}, tag="ties"),
                Case(name, [special(F32).reshape(4, 6)], f, {"dim": 1, "keepdim": False}, tag="special"),
                Case(name, [R((3, 4), BOOL)], f, {"dim": 1, "keepdim": False}, tag="bool")]
    def var_ref(x, d, corr, keepdim, sqrt):
        """torch.var's documented formula, sum((x - mean)^2) / max(0, N - correction), for any correction
        (PyTorch 1.13 takes integers only, and divides by N - correction even when it is negative): the
        biased estimate rescaled, so std keeps PyTorch's zero gradient at 0"""
        n = x.numel() // max(1, x.mean(dim=d, keepdim=True).numel())
        k = n / max(0, n - corr) if n - corr > 0 else math.inf
        if sqrt:
            return torch.std(x, dim=d, correction=0, keepdim=keepdim) * math.sqrt(k)
        return torch.var(x, dim=d, correction=0, keepdim=keepdim) * k

    for corr in (1, 0, 2.5, 5):
        for nm, tf in (("var", torch.var), ("std", torch.std)):
            f = lambda xs, a, tf=tf: tf(xs[0], dim=dims_kw(a), correction=a["correction"], keepdim=a["keepdim"]) \
                if isinstance(a["correction"], int) and a["correction"] <= 1 else \
                var_ref(xs[0], dims_kw(a), a["correction"], a["keepdim"], tf is torch.std)
            # where N - correction <= 0 the value is inf or NaN and its gradient has no meaning: not compared
            out += [Case(nm, [R((3, 4))], f, {"dim": [1], "correction": corr, "keepdim": False}, tag="f32",
                         tol={F32: (1e-4, 1e-5)}, req=[corr < 4]),
                    Case(nm, [R((2, 3, 4), F64)], f, {"dim": [0, 2], "correction": corr, "keepdim": True}, tag="f64"),
                    Case(nm, [T([[1.0, 1.0, 1.0], [2.0, 3.0, 4.0]], F64)], f,
                         {"dim": [1], "correction": corr, "keepdim": False}, tag="constant row", req=[corr < 3]),
                    Case(nm, [R((4, 1), F64)], f, {"dim": [1], "correction": corr, "keepdim": False}, tag="one",
                         req=[corr < 1])]
    for p in (2.0, 1.0, 3.0, "inf", "-inf", 0.5):
        f = lambda xs, a: torch.linalg.vector_norm(xs[0], float(a["ord"]), dim=dims_kw(a), keepdim=a["keepdim"])
        out += [Case("norm", [R((3, 4))], f, {"ord": p, "dim": [1], "keepdim": False}, tag="f32",
                     tol={F32: (1e-4, 1e-6)}),
                Case("norm", [R((2, 3), F64)], f, {"ord": p, "keepdim": True}, tag="f64"),
                Case("norm", [T([[0.0, 0.0], [3.0, -4.0]], F64)], f, {"ord": p, "dim": [1], "keepdim": False},
                     tag="zero")]
    for name, tf in (("cumsum", torch.cumsum), ("cumprod", torch.cumprod), ("logcumsumexp", torch.logcumsumexp)):
        f = lambda xs, a, tf=tf: tf(xs[0], a["dim"])
        out += [Case(name, [R((3, 4))], f, {"dim": 1}, tag="f32", tol={F32: (1e-4, 1e-6)}),
                Case(name, [R((3, 4), F64)], f, {"dim": 0}, views=["T"], tag="view"),
                Case(name, [R(())], f, {"dim": -1}, tag="0-d"),
                Case(name, [R((0, 2))], f, {"dim": 0}, tag="empty"),
                Case(name, [R((2, 5), I32, -3, 4)], f, {"dim": 1}, tag="int"),
                Case(name, [R((2, 5), BOOL)], f, {"dim": 1}, tag="bool"),
                Case(name, [special(F64)], f, {"dim": 0}, tag="special"),
                Case(name, [R((3,))], f, {"dim": 1}, tag="bad dim")]
    out.append(Case("cumprod", [T([2.0, 0.0, 3.0, 0.0, 4.0], F64)], lambda xs, a: torch.cumprod(xs[0], 0), {"dim": 0},
                    tag="zeros"))
    for name, tf in (("cummax", torch.cummax), ("cummin", torch.cummin)):
        f = lambda xs, a, tf=tf: tuple(tf(xs[0], a["dim"]))
        out += [Case(name, [R((3, 4))], f, {"dim": 1}, tag="f32"),
                Case(name, [T([1.0, 3.0, 3.0, NAN, 2.0, NAN, 5.0], F64)], f, {"dim": 0}, tag="ties nan"),
                Case(name, [R((3, 4), I64, -2, 2)], f, {"dim": 0}, tag="int ties"),
                Case(name, [R(())], f, {"dim": 0}, tag="0-d")]
    for desc in (False, True):
        sf = lambda xs, a: tuple(torch.sort(xs[0], dim=a["dim"], descending=a["descending"], stable=True))
        af = lambda xs, a: torch.argsort(xs[0], dim=a["dim"], descending=a["descending"], stable=True)
        for x, d, t in ((R((3, 5)), 1, "f32"), (R((3, 5), F64), 0, "f64"), (special(F32), 0, "special"),
                        (R((4, 6), I32, -3, 3), 1, "ties"), (R((4,), BOOL), 0, "bool"), (R(()), -1, "0-d"),
                        (R((0, 3)), 0, "empty")):
            out += [Case("sort", [x], sf, {"dim": d, "descending": desc}, tag=t),
                    Case("argsort", [x], af, {"dim": d, "descending": desc}, tag=t)]
        out.append(Case("sort", [R((3, 4))], sf, {"dim": 0, "descending": desc}, views=["T"], tag="view"))
    for k, largest in ((1, True), (3, False), (0, True), (5, True)):
        tk = lambda xs, a: tuple(torch.topk(xs[0], a["k"], dim=a["dim"], largest=a["largest"]))
        out += [Case("topk", [R((3, 5))], tk, {"k": k, "dim": -1, "largest": largest}, tag="f32"),
                Case("topk", [special(F64)[:9]], tk, {"k": k, "dim": 0, "largest": largest}, tag="special",
                     skip_out={1}),
                Case("topk", [R((6, 3), I32, -2, 2)], tk, {"k": k, "dim": 0, "largest": largest}, tag="ties",
                     skip_out={1})]
    out.append(Case("topk", [R((3,))], lambda xs, a: tuple(torch.topk(xs[0], 4)), {"k": 4, "dim": -1},
                    tag="k too large"))
    out.append(Case("topk", [R(())], lambda xs, a: tuple(torch.topk(xs[0], 1, dim=-1)), {"k": 1, "dim": -1},
                    tag="0-d"))
    for k in (1, 3, 5):
        kv = lambda xs, a: tuple(torch.kthvalue(xs[0], a["k"], dim=a["dim"], keepdim=a["keepdim"]))
        out += [Case("kthvalue", [R((3, 5))], kv, {"k": k, "dim": 1, "keepdim": False}, tag="f32"),
                Case("kthvalue", [R((5, 2), F64)], kv, {"k": k, "dim": 0, "keepdim": True}, tag="f64"),
                Case("kthvalue", [R((5, 2), I64, -2, 2)], kv, {"k": k, "dim": 0, "keepdim": False}, tag="ties",
                     skip_out={1})]
    out += [Case("kthvalue", [R(())], lambda xs, a: tuple(torch.kthvalue(xs[0], 1, dim=-1)),
                 {"k": 1, "dim": -1, "keepdim": False}, tag="0-d"),
            Case("kthvalue", [R((3,))], lambda xs, a: tuple(torch.kthvalue(xs[0], 4)), {"k": 4, "dim": 0},
                 tag="k too large")]
    return out


# ---- views and shape ops ------------------------------------------------------------------------------------------------

def views_and_shapes():
    out = []
    rs = lambda xs, a: xs[0].reshape(a["shape"])
    vw = lambda xs, a: xs[0].view(a["shape"])
    for shape, new in (((3, 4), [4, 3]), ((3, 4), [-1]), ((2, 3, 4), [6, -1]), ((0, 3), [3, 0]), ((), [1]),
                       ((4,), [2, 2]), ((0, 3), [-1, 0]), ((3, 4), [5, -1]), ((3, 4), [-1, -1])):
        out += [Case("reshape", [R(shape)], rs, {"shape": new}, tag="shape"),
                Case("view", [R(shape)], vw, {"shape": new}, tag="shape")]
    out += [Case("reshape", [R((3, 4))], rs, {"shape": [12]}, views=["T"], tag="copy"),
            Case("view", [R((3, 4))], vw, {"shape": [12]}, views=["T"], tag="not viewable"),
            Case("view", [R((3, 4), I32)], vw, {"shape": [2, 6]}, tag="int")]
    out += [Case("permute", [R((2, 3, 4))], lambda xs, a: xs[0].permute(a["dims"]), {"dims": [2, 0, 1]}, tag="f32"),
            Case("permute", [R((2, 3, 4))], lambda xs, a: xs[0].permute(a["dims"]), {"dims": [0, 0, 1]},
                 tag="repeated"),
            Case("permute", [R((2, 3))], lambda xs, a: xs[0].permute(a["dims"]), {"dims": [-1, 0]}, tag="negative")]
    for d0, d1 in ((0, 1), (-1, 0), (1, 1), (0, 2)):
        out.append(Case("transpose", [R((3, 4))], lambda xs, a: xs[0].transpose(a["dim0"], a["dim1"]),
                        {"dim0": d0, "dim1": d1}, tag="dims"))
    out.append(Case("transpose", [R(())], lambda xs, a: xs[0].transpose(0, -1), {"dim0": 0, "dim1": -1}, tag="0-d"))
    for dim, start, length in ((0, 1, 2), (1, -2, 2), (1, 0, 0), (0, 3, 1), (0, 2, 2), (0, 2 ** 62, 2 ** 62)):
        out.append(Case("narrow", [R((3, 4))], lambda xs, a: xs[0].narrow(a["dim"], a["start"], a["length"]),
                        {"dim": dim, "start": start, "length": length}, tag="args"))
    for dim, s, e, st in ((0, 0, 3, 2), (1, -3, -1, 1), (1, 1, 100, 2), (0, 5, 9, 1), (0, -100, 2, 1), (1, 2, 1, 1)):
        out.append(Case("slice", [R((4, 5))], lambda xs, a: xs[0].narrow(a["dim"], 0, xs[0].shape[a["dim"]])[
            (slice(None),) * a["dim"] + (slice(a["start"], a["end"], a["step"]),)],
            {"dim": dim, "start": s, "end": e, "step": st}, tag="args"))
    out.append(Case("slice", [R((4,))], lambda xs, a: xs[0][0:4:0], {"dim": 0, "start": 0, "end": 4, "step": 0},
                    tag="step 0"))
    for shape, new in (((3, 1), [3, 4]), ((1,), [2, 3]), ((3, 1), [-1, 2]), ((3,), [2, 3]), ((2,), [3]),
                       ((1, 1), [0, 4]), ((1,), [2 ** 40, 2 ** 40])):
        for name in ("expand", "broadcast_to"):
            f = (lambda xs, a: xs[0].expand(a["shape"])) if name == "expand" else \
                (lambda xs, a: torch.broadcast_to(xs[0], a["shape"]))
            out.append(Case(name, [R(shape)], f, {"shape": new}, tag="shape"))
    for d in (0, 1, -1, 2, -3, 3):
        out += [Case("unsqueeze", [R((2, 3))], lambda xs, a: xs[0].unsqueeze(a["dim"]), {"dim": d}, tag="dim"),
                Case("squeeze", [R((2, 1, 3))], lambda xs, a: xs[0].squeeze(a["dim"]), {"dim": d}, tag="dim")]
    out += [Case("squeeze", [R(())], lambda xs, a: xs[0].squeeze(0), {"dim": 0}, tag="0-d"),
            Case("unsqueeze", [R(())], lambda xs, a: xs[0].unsqueeze(0), {"dim": 0}, tag="0-d")]
    for s, e in ((0, -1), (1, 2), (0, 0), (2, 1), (-2, -1)):
        out.append(Case("flatten", [R((2, 3, 4))], lambda xs, a: xs[0].flatten(a["start_dim"], a["end_dim"]),
                        {"start_dim": s, "end_dim": e}, tag="dims"))
    out.append(Case("flatten", [R(())], lambda xs, a: xs[0].flatten(), {"start_dim": 0, "end_dim": -1}, tag="0-d"))
    out += [Case("contiguous", [R((3, 4))], lambda xs, a: xs[0].contiguous(), views=["T"], tag="view"),
            Case("contiguous", [R((3, 4), I64)], lambda xs, a: xs[0].contiguous(), views=["T"], tag="int"),
            Case("contiguous", [R((3,), F16)], lambda xs, a: xs[0].contiguous(), tag="f16")]
    for off, d1, d2 in ((0, 0, 1), (1, 0, 1), (-1, 1, 0), (5, 0, 1), (0, -1, -2), (0, 0, 0)):
        out.append(Case("diagonal", [R((3, 4))], lambda xs, a: torch.diagonal(xs[0], a["offset"], a["dim1"],
                                                                               a["dim2"]),
                        {"offset": off, "dim1": d1, "dim2": d2}, tag="args"))
    out.append(Case("diagonal", [R((2, 3, 4))], lambda xs, a: torch.diagonal(xs[0], 1, 2, 0),
                    {"offset": 1, "dim1": 2, "dim2": 0}, tag="3-d"))
    for dim, size, step in ((0, 2, 1), (1, 3, 2), (1, 4, 1), (1, 5, 1), (0, 1, 3), (1, 0, 1), (1, 2, 0)):
        out.append(Case("unfold", [R((3, 4))], lambda xs, a: xs[0].unfold(a["dimension"], a["size"], a["step"]),
                        {"dimension": dim, "size": size, "step": step}, tag="args"))
    out.append(Case("unfold", [R(())], lambda xs, a: xs[0].unfold(0, 1, 1), {"dimension": 0, "size": 1, "step": 1},
                    tag="0-d"))
    for src, dst in (([0], [2]), ([0, 1], [2, 0]), ([-1], [0]), ([0, 0], [1, 2])):
        out.append(Case("movedim", [R((2, 3, 4))], lambda xs, a: torch.movedim(xs[0], a["source"], a["destination"]),
                        {"source": src, "destination": dst}, tag="args"))
    for off, d1, d2 in ((0, -2, -1), (1, 0, 2), (-2, -1, -2), (0, 0, 0)):
        out.append(Case("diag_embed", [R((2, 3))], lambda xs, a: torch.diag_embed(xs[0], a["offset"], a["dim1"],
                                                                                   a["dim2"]),
                        {"offset": off, "dim1": d1, "dim2": d2}, tag="args"))
    out.append(Case("diag_embed", [R((3,), I32, 0, 5)], lambda xs, a: torch.diag_embed(xs[0]),
                    {"offset": 0, "dim1": -2, "dim2": -1}, tag="int"))
    for dims in ([0], [1, 0], [-1], [0, 0], []):
        out.append(Case("flip", [R((3, 4))], lambda xs, a: torch.flip(xs[0], a["dims"]), {"dims": dims}, tag="dims"))
    out.append(Case("flip", [R((3,), I64)], lambda xs, a: torch.flip(xs[0], [0]), {"dims": [0]}, tag="int"))
    for sh, d in (([1], [0]), ([-1, 2], [0, 1]), ([5], []), ([7], [1]), ([1, 2], [0])):
        out.append(Case("roll", [R((3, 4))], lambda xs, a: torch.roll(xs[0], a["shifts"], a["dims"] or None),
                        {"shifts": sh, "dims": d}, tag="args"))
    for reps in ([2, 1], [1, 2, 3], [0, 2], [2], [-1, 2]):
        out += [Case("repeat", [R((2, 3))], lambda xs, a: xs[0].repeat(a["repeats"]), {"repeats": reps}, tag="reps"),
                Case("tile", [R((2, 3))], lambda xs, a: torch.tile(xs[0], a["dims"]), {"dims": reps}, tag="reps")]
    out.append(Case("repeat", [R((2,))], lambda xs, a: xs[0].repeat(a["repeats"]), {"repeats": [2 ** 62, 4]},
                    tag="overflow"))
    for mode in ("constant", "reflect", "replicate", "circular"):
        pf = lambda xs, a: F.pad(xs[0], a["pad"], mode=a["mode"], value=a.get("value", 0.0)) \
            if a["mode"] == "constant" else F.pad(xs[0], a["pad"], mode=a["mode"])
        for p in ([1, 2], [2, 1, 1, 0], [-1, 2], [2, -1], [-1, -1], [0, 0], [3, 3], [-4, 1], [-5, 2],
                  [2 ** 62, 2 ** 62]):
            x = R((1, 2, 4)) if mode != "constant" else R((2, 4))
            out.append(Case("pad", [x], pf, {"pad": p, "mode": mode, "value": 1.5}, tag="pads"))
        out.append(Case("pad", [R((1, 2, 4), F64)], pf, {"pad": [1, 2], "mode": mode}, views=["T"], tag="view"))
    out += [Case("pad", [R((2, 3), I64, -5, 5)], lambda xs, a: F.pad(xs[0], [1, 1], value=7), {"pad": [1, 1],
                                                                                               "value": 7}, tag="int"),
            Case("pad", [R((0,))], lambda xs, a: F.pad(xs[0], [1, 0]), {"pad": [1, 0]}, tag="empty"),
            Case("pad", [R((0,))], lambda xs, a: F.pad(xs[0], [-1, 2]), {"pad": [-1, 2]}, tag="crop empty"),
            Case("pad", [R((3,))], lambda xs, a: F.pad(xs[0], [1]), {"pad": [1]}, tag="odd count")]
    for dg in (0, 1, -1, 5, -5):
        for name, tf in (("tril", torch.tril), ("triu", torch.triu)):
            out += [Case(name, [R((3, 4))], lambda xs, a, tf=tf: tf(xs[0], a["diagonal"]), {"diagonal": dg},
                         tag="f32"),
                    Case(name, [R((2, 3, 3), I32)], lambda xs, a, tf=tf: tf(xs[0], a["diagonal"]), {"diagonal": dg},
                         tag="int")]
    out += [Case("tril", [R((3,))], lambda xs, a: torch.tril(xs[0]), {"diagonal": 0}, tag="1-d")]
    for idx in ("ij", "xy"):
        mg = lambda xs, a: tuple(torch.meshgrid(*xs, indexing=a["indexing"]))
        out += [Case("meshgrid", [R((3,)), R((4,))], mg, {"indexing": idx}, tag="2"),
                Case("meshgrid", [R((2,), F64), R(()), R((3,), F64)], mg, {"indexing": idx}, tag="3"),
                Case("meshgrid", [R((3,), I64), R((2,), I64)], mg, {"indexing": idx}, tag="int")]
    return out


# ---- indexing, joining, gather/scatter -----------------------------------------------------------------------------

def indexing():
    out = []
    emb = lambda xs, a: F.embedding(xs[0], xs[1], padding_idx=a.get("padding_idx"))
    out += [Case("embedding", [T([[0, 2], [4, 2]], I64), R((5, 3))], emb, tag="f32"),
            Case("embedding", [T([1, 1, 3], I64), R((4, 2), F64)], emb, {"padding_idx": 1}, tag="padding"),
            Case("embedding", [T([1, 3, 0], I64), R((4, 2), F64)], emb, {"padding_idx": -1}, tag="padding -1"),
            Case("embedding", [T([0, 5], I64), R((5, 3))], emb, tag="index error"),
            Case("embedding", [T([0, 3], I32), R((5, 3))], emb, tag="int32 ids"),
            Case("embedding", [T(2, I64), R((5, 3))], emb, tag="0-d ids"),
            Case("embedding", [T([0, 1], I64), R((5, 3), I32)], emb, tag="int weight")]
    isel = lambda xs, a: torch.index_select(xs[0], a["dim"], xs[1])
    out += [Case("index_select", [R((4, 3)), T([0, 3, 3], I64)], isel, {"dim": 0}, tag="f32"),
            Case("index_select", [R((4, 3), I32), T([2, 0], I64)], isel, {"dim": 1}, tag="int"),
            Case("index_select", [R((4, 3)), T([4], I64)], isel, {"dim": 0}, tag="index error"),
            Case("index_select", [R((4, 3)), T([1], I32)], isel, {"dim": 0}, tag="int32 index"),
            Case("index_select", [R((4, 3)), T([], I64)], isel, {"dim": 0}, tag="empty index"),
            Case("index_select", [R((4, 3), F16), T([1], I64)], isel, {"dim": 0}, tag="f16 ok")]
    cat = lambda xs, a: torch.cat(xs, a["dim"])
    stk = lambda xs, a: torch.stack(xs, a["dim"])
    out += [Case("cat", [R((2, 3)), R((1, 3)), R((4, 3))], cat, {"dim": 0}, tag="f32"),
            Case("cat", [R((2, 3), F64), R((2, 1), F64)], cat, {"dim": -1}, tag="f64"),
            Case("cat", [R((2, 3)), R((2, 3), F64)], cat, {"dim": 0}, tag="promotion"),
            Case("cat", [R((2, 3)), R((2, 4))], cat, {"dim": 0}, tag="shape error"),
            Case("cat", [R((0,)), R((2, 3))], cat, {"dim": 0}, tag="legacy empty"),
            Case("cat", [R((2, 3), I32), R((1, 3), I32)], cat, {"dim": 0}, tag="int"),
            Case("stack", [R((2, 3)), R((2, 3))], stk, {"dim": 1}, tag="f32"),
            Case("stack", [R((2,), F64), R((2,), F64), R((2,), F64)], stk, {"dim": -1}, tag="f64"),
            Case("stack", [R((2,)), R((3,))], stk, {"dim": 0}, tag="shape error"),
            Case("stack", [R(()), R(())], stk, {"dim": 0}, tag="0-d")]
    sp = lambda xs, a: tuple(torch.split(xs[0], a["split_size"], a["dim"]))
    ch = lambda xs, a: tuple(torch.chunk(xs[0], a["chunks"], a["dim"]))
    out += [Case("split", [R((5, 2))], sp, {"split_size": 2, "dim": 0}, tag="f32"),
            Case("split", [R((2, 6), F64)], sp, {"split_size": 3, "dim": 1}, tag="f64"),
            Case("split", [R((3,))], sp, {"split_size": 5, "dim": 0}, tag="one piece"),
            Case("split", [R((3,))], sp, {"split_size": 0, "dim": 0}, tag="zero size"),
            Case("chunk", [R((5, 2))], ch, {"chunks": 2, "dim": 0}, tag="f32"),
            Case("chunk", [R((2, 6), F64)], ch, {"chunks": 4, "dim": 1}, tag="f64"),
            Case("chunk", [R((6,))], ch, {"chunks": 4, "dim": 0}, tag="uneven"),
            Case("chunk", [R((3,))], ch, {"chunks": 0, "dim": 0}, tag="zero chunks")]
    iadd = lambda xs, a: torch.index_add(xs[0], a["dim"], xs[1], xs[2], alpha=a["alpha"])
    icp = lambda xs, a: torch.index_copy(xs[0], a["dim"], xs[1], xs[2])
    out += [Case("index_add", [R((4, 3)), T([0, 2, 0], I64), R((3, 3))], iadd, {"dim": 0, "alpha": 2.0}, tag="f32"),
            Case("index_add", [R((2, 4), F64), T([3, 1], I64), R((2, 2), F64)], iadd, {"dim": 1, "alpha": 1.0},
                 tag="f64"),
            Case("index_add", [R((4,), I32, 0, 5), T([1, 1], I64), T([2, 3], I32)], iadd, {"dim": 0, "alpha": 1.0},
                 tag="int"),
            Case("index_add", [R((4, 3)), T([4], I64), R((1, 3))], iadd, {"dim": 0, "alpha": 1.0}, tag="index error"),
            Case("index_copy", [R((4, 3)), T([0, 2], I64), R((2, 3))], icp, {"dim": 0}, tag="f32"),
            Case("index_copy", [R((2, 4), F64), T([3], I64), R((2, 1), F64)], icp, {"dim": 1}, tag="f64"),
            Case("index_copy", [R((4,), BOOL), T([1], I64), R((1,), BOOL)], icp, {"dim": 0}, tag="bool")]
    oh = lambda xs, a: F.one_hot(xs[0], a["num_classes"])
    out += [Case("one_hot", [T([0, 2, 1], I64)], oh, {"num_classes": 4}, tag="n"),
            Case("one_hot", [T([[0, 2], [3, 1]], I64)], oh, {"num_classes": -1}, tag="infer"),
            Case("one_hot", [T([0, 4], I64)], oh, {"num_classes": 4}, tag="out of range"),
            Case("one_hot", [T([], I64)], oh, {"num_classes": -1}, tag="empty infer"),
            Case("one_hot", [T([0, 1], I32)], oh, {"num_classes": 3}, tag="int32")]
    out += [Case("nonzero", [x], lambda xs, a: torch.nonzero(xs[0]), tag=t)
            for x, t in ((T([[1.0, 0.0], [-0.0, NAN]]), "special"), (R((3, 4), I32, -1, 2), "int"),
                         (R((2, 3), BOOL), "bool"), (R(()), "0-d"), (R((0, 2)), "empty"))]
    ms = lambda xs, a: torch.masked_select(xs[0], xs[1])
    out += [Case("masked_select", [R((3, 4)), R((4,), BOOL)], ms, tag="broadcast"),
            Case("masked_select", [R((3,), F64), R((2, 3), BOOL)], ms, tag="broadcast input"),
            Case("masked_select", [R((3,)), R((3,), I32)], ms, tag="mask not bool")]
    g = lambda xs, a: torch.gather(xs[0], a["dim"], xs[1])
    out += [Case("gather", [R((3, 4)), T([[0, 3], [1, 1]], I64)], g, {"dim": 1}, tag="f32"),
            Case("gather", [R((3, 4), F64), T([[2, 0, 1, 1]], I64)], g, {"dim": 0}, tag="f64"),
            Case("gather", [R((3, 4), I32), T([[0], [2]], I64)], g, {"dim": 1}, tag="int"),
            Case("gather", [R((3, 4)), T([[4]], I64)], g, {"dim": 1}, tag="index error"),
            Case("gather", [R((3, 4)), T([[1]], I32)], g, {"dim": 1}, tag="int32 index")]
    sc = lambda xs, a: torch.scatter(xs[0], a["dim"], xs[1], xs[2])
    sv = lambda xs, a: torch.scatter(xs[0], a["dim"], xs[1], a["value"])
    sa = lambda xs, a: torch.scatter_add(xs[0], a["dim"], xs[1], xs[2])
    idx = T([[0, 2], [1, 0]], I64)
    out += [Case("scatter", [R((3, 4)), idx, R((2, 2))], sc, {"dim": 0}, tag="f32"),
            Case("scatter", [R((3, 4), F64), T([[3, 1, 1]], I64), R((2, 3), F64)], sc, {"dim": 1}, tag="f64"),
            Case("scatter", [R((3,), I32), T([5], I64), R((1,), I32)], sc, {"dim": 0}, tag="index error"),
            Case("scatter_value", [R((3, 4)), idx], sv, {"dim": 0, "value": 2.5}, tag="f32"),
            Case("scatter_value", [R((3, 4), I64), idx], sv, {"dim": 1, "value": 7}, tag="int"),
            Case("scatter_add", [R((3, 4)), T([[0, 2], [0, 0]], I64), R((2, 2))], sa, {"dim": 0}, tag="f32"),
            Case("scatter_add", [R((3, 4), F64), T([[3, 3, 1]], I64), R((2, 3), F64)], sa, {"dim": 1}, tag="f64"),
            Case("scatter_add", [R((4,), I32), T([1, 1], I64), T([2, 3], I32)], sa, {"dim": 0}, tag="int")]
    sr = lambda xs, a: torch.scatter_reduce(xs[0], a["dim"], xs[1], xs[2], a["reduce"], include_self=a["include_self"])
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            out += [Case("scatter_reduce", [R((3, 4)), T([[0, 2, 2], [0, 0, 1]], I64), R((2, 3))], sr,
                         {"dim": 0, "reduce": red, "include_self": inc}, tag="f32", tol={F32: (1e-4, 1e-6)}),
                    Case("scatter_reduce", [R((5,), F64), T([1, 1, 3, 1], I64), T([2.0, 2.0, 0.0, -1.0], F64)],
                         sr, {"dim": 0, "reduce": red, "include_self": inc}, tag="ties"),
                    Case("scatter_reduce", [R((5,), I64, -5, 5), T([1, 1, 3], I64), T([2, 3, -1], I64)], sr,
                         {"dim": 0, "reduce": red, "include_self": inc}, tag="int")]
    tad = lambda xs, a: torch.take_along_dim(xs[0], xs[1], a.get("dim"))
    out += [Case("take_along_dim", [R((3, 4)), T([[0, 3], [1, 1], [2, 2]], I64)], tad, {"dim": 1}, tag="f32"),
            Case("take_along_dim", [R((3, 4), F64), T([[2, 0, 1, 1]], I64)], tad, {"dim": 0}, tag="broadcast"),
            Case("take_along_dim", [R((3, 4)), T([5, 0, 11], I64)], tad, {}, tag="flat"),
            Case("take_along_dim", [R((3, 4)), T([[4]], I64)], tad, {"dim": 1}, tag="index error")]
    return out


# ---- matrix products, softmax, losses -----------------------------------------------------------------------------

def products_and_losses():
    out = []
    mm = lambda xs, a: torch.matmul(xs[0], xs[1])
    mt = {F32: (1e-4, 1e-6)}
    for sa, sb in (((3, 4), (4, 5)), ((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)), ((2, 3, 4), (4, 5)),
                   ((2, 1, 3, 4), (5, 4, 2)), ((3, 0), (0, 2)), ((3, 4), (5, 6)), ((), (3,)), ((2, 3, 4), (2, 4))):
        out.append(Case("matmul", [R(sa), R(sb)], mm, tag="shapes", tol=mt))
    out += [Case("matmul", [R((3, 4), F64), R((4, 5), F64)], mm, views=["T", "S"], tag="views"),
            Case("matmul", [R((3, 4)), R((4, 2), F64)], mm, tag="dtype error"),
            Case("matmul", [R((3, 4), I32), R((4, 2), I32)], mm, tag="int"),
            Case("matmul", [T([[INF, 1.0], [NAN, 0.0]]), T([[0.0, 1.0], [2.0, 3.0]])], mm, tag="special")]
    lin = lambda xs, a: F.linear(xs[0], xs[1], xs[2] if len(xs) > 2 else None)
    out += [Case("linear", [R((3, 4)), R((5, 4)), R((5,))], lin, tag="bias", tol=mt),
            Case("linear", [R((2, 3, 4), F64), R((5, 4), F64)], lin, tag="no bias"),
            Case("linear", [R((4,)), R((5, 4)), R((5,))], lin, tag="1-d", tol=mt),
            Case("linear", [R((3, 4)), R((5, 3))], lin, tag="shape error"),
            Case("linear", [R((3, 4)), R((5, 4)), R((4,))], lin, tag="bias error"),
            Case("linear", [R((3, 4)), R((5, 4))], lin, views=["T", "S"], tag="views", tol=mt)]
    bm = lambda xs, a: torch.bmm(xs[0], xs[1])
    out += [Case("bmm", [R((2, 3, 4)), R((2, 4, 5))], bm, tag="f32", tol=mt),
            Case("bmm", [R((2, 3, 4), F64), R((1, 4, 5), F64)], bm, tag="no broadcast"),
            Case("bmm", [R((3, 4)), R((4, 5))], bm, tag="2-d")]
    for name, tf in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
        f = lambda xs, a, tf=tf: tf(xs[0], dim=a["dim"])
        out += [Case(name, [R((3, 5), F32, -5, 5)], f, {"dim": -1}, tag="f32"),
                Case(name, [R((3, 5), F64)], f, {"dim": 0}, views=["T"], tag="view"),
                Case(name, [special(F32).reshape(4, 6)], f, {"dim": 1}, tag="special"),
                Case(name, [T([[-INF, -INF], [INF, 1.0], [1e38, -1e38]])], f, {"dim": 1}, tag="infinite rows"),
                Case(name, [R(())], f, {"dim": 0}, tag="0-d"),
                Case(name, [R(())], f, {"dim": -1}, tag="0-d"),
                Case(name, [R((0, 3))], f, {"dim": 1}, tag="empty"),
                Case(name, [R((3,), I32)], f, {"dim": 0}, tag="int"),
                Case(name, [R((3, 4))], f, {"dim": 2}, tag="bad dim")]
    ce = lambda xs, a: F.cross_entropy(xs[0], xs[1])
    cex = lambda xs, a: F.cross_entropy(xs[0], xs[1], weight=xs[2] if len(xs) > 2 else None,
                                        ignore_index=a.get("ignore_index", -100), reduction=a.get("reduction", "mean"),
                                        label_smoothing=a.get("label_smoothing", 0.0))
    nll = lambda xs, a: F.nll_loss(xs[0], xs[1], weight=xs[2] if len(xs) > 2 else None,
                                   ignore_index=a.get("ignore_index", -100), reduction=a.get("reduction", "mean"))
    out += [Case("cross_entropy", [R((4, 5), F32, -3, 3), T([0, 4, 2, 2], I64)], ce, tag="f32"),
            Case("cross_entropy", [R((3, 2), F64), T([1, 0, 1], I64)], ce, tag="f64"),
            Case("cross_entropy", [R((2, 3)), T([3, 0], I64)], ce, tag="target error"),
            Case("cross_entropy", [R((2, 3)), T([1, 0], I32)], ce, tag="int32 target"),
            Case("cross_entropy", [T([[INF, 0.0], [1e30, -1e30]]), T([0, 1], I64)], ce, tag="special"),
            Case("cross_entropy", [R((3,)), T(1, I64)], ce, tag="unbatched"),
            Case("cross_entropy", [R((2, 3, 4)), R((2, 4), I64, 0, 3)], ce, tag="spatial")]
    for red in ("mean", "sum", "none"):
        for ig in (-100, 1):
            out += [Case("cross_entropy_ex", [R((4, 3)), T([1, 1, -100, 2], I64)], cex,
                         {"ignore_index": ig, "reduction": red}, tag="f32"),
                    Case("cross_entropy_ex", [R((2, 3), F64), T([1, 1], I64)], cex,
                         {"ignore_index": ig, "reduction": red}, tag="all ignored")]
    for red in ("mean", "sum", "none"):
        for ls in (0.0, 0.1):
            args = {"reduction": red, "label_smoothing": ls, "ignore_index": 2}
            lt = {F32: (1e-4, 1e-6)}
            out += [Case("cross_entropy_ex", [R((4, 5)), T([0, 4, 2, 1], I64), R((5,), F32, 0.2, 2)], cex, args,
                         tag="weight", req=[True, False, False], tol=lt),
                    Case("cross_entropy_ex", [R((2, 3, 4), F64), R((2, 4), I64, 0, 3)], cex, args, tag="spatial"),
                    Case("cross_entropy_ex", [R((2, 3, 2, 2)), R((2, 2, 2), I64, 0, 3), R((3,), F32, 0.5, 1.5)], cex,
                         args, tag="spatial weight", req=[True, False, False], tol=lt),
                    Case("cross_entropy_ex", [R((3,), F64), T(1, I64)], cex, args, tag="unbatched"),
                    Case("cross_entropy_ex", [R((4, 3)), F.softmax(R((4, 3)), 1)], cex,
                         {"reduction": red, "label_smoothing": ls}, tag="probabilities", tol=lt),
                    Case("cross_entropy_ex", [R((2, 3, 4), F64), F.softmax(R((2, 3, 4), F64), 1), R((3,), F64)], cex,
                         {"reduction": red, "label_smoothing": ls}, tag="probabilities weight",
                         req=[True, True, False]),
                    Case("cross_entropy_ex", [R((4, 3)), F.softmax(R((4, 3)), 1)], cex, args,
                         tag="probabilities ignore_index"),
                    Case("nll_loss", [F.log_softmax(R((4, 5)), 1), T([0, 4, 2, 1], I64), R((5,), F32, 0.2, 2)], nll,
                         {"reduction": red, "ignore_index": 2}, tag="weight", req=[True, False, False], tol=lt),
                    Case("nll_loss", [F.log_softmax(R((2, 3, 4), F64), 1), R((2, 4), I64, 0, 3)], nll,
                         {"reduction": red}, tag="spatial"),
                    Case("nll_loss", [R((3,), F64), T(2, I64)], nll, {"reduction": red}, tag="unbatched")]
    out += [Case("cross_entropy_ex", [R((4, 3)), T([0, 1, 2, 1], I64), R((4,))], cex, {}, tag="weight error"),
            Case("cross_entropy_ex", [R((4, 3)), T([0, 1, 2, 1], I64)], cex, {"label_smoothing": 1.5},
                 tag="bad smoothing"),
            Case("cross_entropy_ex", [R((4, 3)), T([0, 1, 2, 2], I64), R((3,))], cex, {"ignore_index": 2},
                 tag="all but one ignored", req=[True, False, False]),
            Case("cross_entropy_ex", [R((2, 3)), T([[0, 1, 2], [1, 1, 1]], I64)], cex, {}, tag="shape error"),
            Case("nll_loss", [R((4, 3)), T([0, 3, 2, 1], I64)], nll, {}, tag="target error"),
            Case("nll_loss", [R((4, 3)), F.softmax(R((4, 3)), 1)], nll, {}, tag="probabilities error"),
            Case("nll_loss", [R((0, 3)), T([], I64)], nll, {}, tag="empty")]
    mse = lambda xs, a: F.mse_loss(xs[0], xs[1], reduction=a["reduction"])
    for red in ("mean", "sum", "none"):
        out += [Case("mse_loss", [R((3, 4)), R((3, 4))], mse, {"reduction": red}, tag="f32"),
                Case("mse_loss", [R((3, 4), F64), R((4,), F64)], mse, {"reduction": red}, tag="broadcast"),
                Case("mse_loss", [R((0,)), R((0,))], mse, {"reduction": red}, tag="empty"),
                Case("mse_loss", [T([INF, NAN, 1.0]), T([INF, 0.0, 1e20])], mse, {"reduction": red}, tag="special")]
    out.append(Case("mse_loss", [R((3,)), R((4,))], mse, {"reduction": "mean"}, tag="shape error"))
    out += elementwise_losses()
    out += class_and_embedding_losses()
    return out


def elementwise_losses():
    """l1, smooth_l1, huber, binary_cross_entropy (with and without logits) and kl_div."""
    l1 = lambda xs, a: F.l1_loss(xs[0], xs[1], reduction=a["reduction"])
    sl1 = lambda xs, a: F.smooth_l1_loss(xs[0], xs[1], reduction=a["reduction"], beta=a["beta"])
    hub = lambda xs, a: F.huber_loss(xs[0], xs[1], reduction=a["reduction"], delta=a["delta"])
    bce = lambda xs, a: F.binary_cross_entropy(xs[0], xs[1], weight=xs[2] if a.get("weight") else None,
                                               reduction=a["reduction"])

    def bcel(xs, a):
        k, w, pw = 2, None, None
        if a.get("weight"):
            w, k = xs[k], k + 1
        if a.get("pos_weight"):
            pw = xs[k]
        return F.binary_cross_entropy_with_logits(xs[0], xs[1], weight=w, pos_weight=pw, reduction=a["reduction"])

    kl = lambda xs, a: F.kl_div(xs[0], xs[1], reduction=a["reduction"], log_target=a.get("log_target", False))
    out = []
    for red in ("mean", "sum", "none"):
        r = {"reduction": red}
        out += [Case("l1_loss", [R((3, 4)), R((3, 4))], l1, r, tag="f32"),
                Case("l1_loss", [R((3, 4), F64), R((4,), F64)], l1, r, tag="broadcast"),
                Case("smooth_l1_loss", [R((3, 4)), R((3, 4))], sl1, {**r, "beta": 0.5}, tag="f32"),
                Case("smooth_l1_loss", [R((3, 4), F64), R((3, 4), F64)], sl1, {**r, "beta": 1.0}, tag="f64"),
                Case("smooth_l1_loss", [R((3, 4), F64), R((3, 4), F64)], sl1, {**r, "beta": 0.0}, tag="beta 0"),
                Case("huber_loss", [R((3, 4)), R((3, 4))], hub, {**r, "delta": 0.7}, tag="f32"),
                Case("huber_loss", [R((2, 3), F64), R((3,), F64)], hub, {**r, "delta": 1.0}, tag="broadcast"),
                Case("binary_cross_entropy", [R((3, 4), F32, 0.05, 0.95), R((3, 4), F32, 0, 1)], bce, r, tag="f32"),
                Case("binary_cross_entropy", [R((2, 3), F64, 0.05, 0.95), R((2, 3), F64, 0, 1), R((3,), F64, 0.5, 2)],
                     bce, {**r, "weight": True}, tag="weight", req=[True, True, False]),  # PyTorch: no weight grad
                Case("binary_cross_entropy_with_logits", [R((3, 4)), R((3, 4), F32, 0, 1)], bcel, r, tag="f32"),
                Case("binary_cross_entropy_with_logits",
                     [R((2, 3), F64), R((2, 3), F64, 0, 1), R((2, 3), F64, 0.5, 2), R((3,), F64, 0.5, 3)], bcel,
                     {**r, "weight": True, "pos_weight": True}, tag="weights", req=[True, True, False, False]),
                Case("kl_div", [F.log_softmax(R((3, 4)), 1), F.softmax(R((3, 4)), 1)], kl, r, tag="f32"),
                Case("kl_div", [R((3, 4), F64), R((3, 4), F64)], kl, {**r, "log_target": True}, tag="log_target")]
    sm = lambda xs, a: F.soft_margin_loss(xs[0], xs[1], reduction=a["reduction"])
    he = lambda xs, a: F.hinge_embedding_loss(xs[0], xs[1], margin=a["margin"], reduction=a["reduction"])
    mr = lambda xs, a: F.margin_ranking_loss(xs[0], xs[1], xs[2], margin=a["margin"], reduction=a["reduction"])
    labels = lambda shape, dt=F32: (torch.randint(0, 2, shape) * 2 - 1).to(dt)
    for red in ("mean", "sum", "none"):
        r = {"reduction": red}
        # PyTorch has no gradient for soft_margin_loss's target
        out += [Case("soft_margin_loss", [R((3, 4)), labels((3, 4))], sm, r, tag="f32", req=[True, False]),
                Case("soft_margin_loss", [R((3, 4), F64), R((4,), F64)], sm, r, tag="broadcast, real targets",
                     req=[True, False]),
                Case("hinge_embedding_loss", [R((3, 4)), labels((3, 4))], he, {**r, "margin": 1.0}, tag="f32"),
                Case("hinge_embedding_loss", [R((3, 4), F64), labels((3, 4), F64)], he, {**r, "margin": 0.5},
                     tag="margin 0.5"),
                Case("margin_ranking_loss", [R((5,)), R((5,)), labels((5,))], mr, {**r, "margin": 0.0}, tag="f32"),
                Case("margin_ranking_loss", [R((2, 5), F64), R((1, 5), F64), labels((2, 5), F64)], mr,
                     {**r, "margin": 0.3}, tag="broadcast, margin")]
    out += [Case("hinge_embedding_loss", [R((6,), F64), T([1.0, -1.0, 0.5, 2.0, -1.0, 1.0], F64)], he,
                 {"reduction": "none", "margin": 0.0}, tag="other labels, margin 0"),
            Case("margin_ranking_loss", [R((3,)), R((4,)), labels((3,))], mr, {"reduction": "mean", "margin": 0.0},
                 tag="shape error"),
            Case("margin_ranking_loss", [R((2, 5)), R((5,)), labels((2, 5))], mr, {"reduction": "mean", "margin": 0.0},
                 tag="ndim error")]
    out += [Case("kl_div", [F.log_softmax(R((3, 4)), 1), F.softmax(R((3, 4)), 1)], kl, {"reduction": "batchmean"},
                 tag="batchmean"),
            # a zero target's gradient: PyTorch's xlogy gives NaN there, nabla's finite (the log of 1)
            Case("kl_div", [F.log_softmax(R((3,)), 0), T([0.0, 0.5, 0.5])], kl, {"reduction": "sum"},
                 tag="zero target", req=[True, False]),
            Case("binary_cross_entropy_with_logits", [T([100.0, -100.0, 0.0]), T([0.0, 1.0, 0.5])], bcel,
                 {"reduction": "none"}, tag="large logits"),
            Case("binary_cross_entropy", [T([0.0, 1.0, 0.5]), T([1.0, 0.0, 0.5])], bce, {"reduction": "none"},
                 tag="clamped log", req=[False, False]),
            Case("l1_loss", [R((3,)), R((4,))], l1, {"reduction": "mean"}, tag="shape error"),
            Case("huber_loss", [R((3,)), R((3,))], hub, {"reduction": "mean", "delta": 0.0}, tag="delta error")]
    return out


def class_and_embedding_losses():
    """poisson/gaussian NLL, the multi-label and multi-class margins, cosine embedding, triplets, distances."""
    pn = lambda xs, a: F.poisson_nll_loss(xs[0], xs[1], log_input=a["log_input"], full=a["full"], eps=a["eps"],
                                          reduction=a["reduction"])
    gn = lambda xs, a: F.gaussian_nll_loss(xs[0], xs[1], xs[2], full=a["full"], eps=a["eps"],
                                           reduction=a["reduction"])
    mlsm = lambda xs, a: F.multilabel_soft_margin_loss(xs[0], xs[1], weight=xs[2] if a.get("weight") else None,
                                                       reduction=a["reduction"])
    mm = lambda xs, a: F.multi_margin_loss(xs[0], xs[1], p=a["p"], margin=a["margin"],
                                           weight=xs[2] if a.get("weight") else None, reduction=a["reduction"])
    mlm = lambda xs, a: F.multilabel_margin_loss(xs[0], xs[1], reduction=a["reduction"])
    ce = lambda xs, a: F.cosine_embedding_loss(xs[0], xs[1], xs[2], margin=a["margin"], reduction=a["reduction"])
    tm = lambda xs, a: F.triplet_margin_loss(xs[0], xs[1], xs[2], margin=a["margin"], p=a["p"], eps=a["eps"],
                                             swap=a["swap"], reduction=a["reduction"])

    def tmd(xs, a):
        dist = (lambda u, v: 1 - F.cosine_similarity(u, v, dim=-1, eps=1e-8)) if a["distance"] == "cosine" else None
        return F.triplet_margin_with_distance_loss(xs[0], xs[1], xs[2], distance_function=dist, margin=a["margin"],
                                                   swap=a["swap"], reduction=a["reduction"])

    pd = lambda xs, a: F.pairwise_distance(xs[0], xs[1], p=a["p"], eps=a["eps"], keepdim=a["keepdim"])
    cs = lambda xs, a: F.cosine_similarity(xs[0], xs[1], dim=a["dim"], eps=a["eps"])
    labels = lambda shape, dt=F32: (torch.randint(0, 2, shape) * 2 - 1).to(dt)
    out = []
    for red in ("mean", "sum", "none"):
        r = {"reduction": red}
        out += [Case("poisson_nll_loss", [R((3, 4)), R((3, 4), F32, 0, 3)], pn,
                     {**r, "log_input": True, "full": False, "eps": 1e-8}, tag="log input"),
                Case("poisson_nll_loss", [R((3, 4), F64, 0.1, 2), R((3, 4), F64, 0, 4)], pn,
                     {**r, "log_input": False, "full": True, "eps": 1e-8}, tag="rate, full", req=[True, False]),
                Case("gaussian_nll_loss", [R((3, 4)), R((3, 4)), R((3, 4), F32, 0.1, 2)], gn,
                     {**r, "full": False, "eps": 1e-6}, tag="f32"),
                Case("gaussian_nll_loss", [R((3, 4), F64), R((3, 4), F64), R((3,), F64, 0.1, 2)], gn,
                     {**r, "full": True, "eps": 1e-6}, tag="one var per row, full"),
                Case("gaussian_nll_loss", [R((3, 4), F64), R((3, 4), F64), R((3, 1), F64, 0.1, 2)], gn,
                     {**r, "full": False, "eps": 0.5}, tag="var [N, 1], eps clamps"),
                Case("multilabel_soft_margin_loss", [R((3, 5)), R((3, 5), I64, 0, 2).float()], mlsm, r, tag="f32",
                     req=[True, False]),
                Case("multilabel_soft_margin_loss", [R((3, 5), F64), R((3, 5), F64, 0, 1), R((5,), F64, 0.5, 2)],
                     mlsm, {**r, "weight": True}, tag="weight", req=[True, True, False]),
                Case("multi_margin_loss", [R((4, 5)), T([0, 4, 2, 1], I64)], mm, {**r, "p": 1, "margin": 1.0},
                     tag="f32"),
                Case("multi_margin_loss", [R((4, 5), F64), T([3, 0, 0, 4], I64), R((5,), F64, 0.5, 2)], mm,
                     {**r, "p": 2, "margin": 0.7, "weight": True}, tag="p 2, weight", req=[True, False, False]),
                Case("multilabel_margin_loss", [R((3, 4)), T([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 2, 1, 0]], I64)],
                     mlm, r, tag="f32"),
                Case("multilabel_margin_loss", [R((4,), F64), T([2, 2, -1, 0], I64)], mlm, r,
                     tag="unbatched, repeated"),
                Case("cosine_embedding_loss", [R((4, 3)), R((4, 3)), labels((4,))], ce, {**r, "margin": 0.0},
                     tag="f32", req=[True, True, False]),
                Case("cosine_embedding_loss", [R((4, 3), F64), R((4, 3), F64), labels((4,), F64)], ce,
                     {**r, "margin": 0.2}, tag="margin", req=[True, True, False]),
                Case("triplet_margin_loss", [R((4, 3)), R((4, 3)), R((4, 3))], tm,
                     {**r, "margin": 1.0, "p": 2.0, "eps": 1e-6, "swap": False}, tag="f32"),
                Case("triplet_margin_loss", [R((4, 3), F64), R((4, 3), F64), R((1, 3), F64)], tm,
                     {**r, "margin": 0.5, "p": 1.0, "eps": 1e-6, "swap": True}, tag="p 1, swap, broadcast"),
                Case("triplet_margin_with_distance_loss", [R((4, 3), F64), R((4, 3), F64), R((4, 3), F64)], tmd,
                     {**r, "margin": 1.0, "swap": False, "distance": "pairwise"}, tag="default distance"),
                Case("triplet_margin_with_distance_loss", [R((4, 3), F64), R((4, 3), F64), R((4, 3), F64)], tmd,
                     {**r, "margin": 0.5, "swap": True, "distance": "cosine"}, tag="cosine distance, swap")]
    out += [Case("pairwise_distance", [R((4, 3)), R((4, 3))], pd, {"p": 2.0, "eps": 1e-6, "keepdim": False},
                 tag="f32"),
            Case("pairwise_distance", [R((2, 4, 3), F64), R((3,), F64)], pd, {"p": 3.0, "eps": 1e-6, "keepdim": True},
                 tag="p 3, broadcast, keepdim"),
            Case("pairwise_distance", [R((4, 3), F64), R((4, 3), F64)], pd,
                 {"p": float("inf"), "eps": 1e-6, "keepdim": False}, tag="p inf"),
            Case("cosine_similarity", [R((4, 3)), R((4, 3))], cs, {"dim": 1, "eps": 1e-8}, tag="f32"),
            Case("cosine_similarity", [R((2, 3, 4), F64), R((3, 1), F64)], cs, {"dim": 0, "eps": 1e-8},
                 tag="dim 0, broadcast"),
            Case("multi_margin_loss", [R((4, 5)), T([0, 5, 2, 1], I64)], mm,
                 {"reduction": "mean", "p": 1, "margin": 1.0}, tag="target error"),
            Case("multilabel_margin_loss", [R((2, 3)), T([[0, 3, -1], [1, -1, 0]], I64)], mlm,
                 {"reduction": "mean"}, tag="target error"),
            Case("gaussian_nll_loss", [R((3, 4)), R((3, 4)), R((3, 4), F32, -1, 1)], gn,
                 {"reduction": "mean", "full": False, "eps": 1e-6}, tag="negative var"),
            Case("gaussian_nll_loss", [R((3, 4)), R((3, 4)), R((4,), F32, 0.1, 1)], gn,
                 {"reduction": "mean", "full": False, "eps": 1e-6}, tag="var shape error"),
            Case("cosine_embedding_loss", [R((4, 3)), R((4, 3)), labels((4, 1))], ce,
                 {"reduction": "mean", "margin": 0.0}, tag="target ndim error"),
            Case("triplet_margin_loss", [R((4, 3)), R((4, 3)), R((3,))], tm,
                 {"reduction": "mean", "margin": 1.0, "p": 2.0, "eps": 1e-6, "swap": False}, tag="ndim error")]
    return out

def build():
    return unary() + binary() + reductions() + views_and_shapes() + indexing() + products_and_losses() + cnn() + \
        linalg() + sampling() + tensor_ops() + ctc() + packed() + fractional_pools() + \
        grouped_mm() + quantize() + fused()


def repr_tensors():
    """Tensors whose nb_repr must equal PyTorch's repr (".rg": requires grad)."""
    t = {
        "f32": R((2, 3)), "f64.rg": R((3, 2), F64), "int": R((2, 5), I64, -100, 100), "i32": R((4,), I32, -5, 5),
        "u8": R((3,), U8, 0, 255), "bool": R((2, 3), BOOL), "f16": R((4,), F16), "bf16": R((2, 2), BF16),
        "scalar": T(3.0), "scalar_i": T(7, I64), "scalar_nan": T(NAN, F64), "empty": R((0,)), "empty2": R((0, 3)),
        "empty_i": T([], I64), "empty_3d": R((2, 0, 1), F64), "ints_as_floats": T([1.0, -2.0, 30.0]),
        "zeros": torch.zeros(2, 2), "special": special(F32), "special64": special(F64).reshape(5, 6),
        "sci_small": T([1e-5, 0.5]), "sci_range": T([1.0, 2000.0]), "sci_big": T([1e9, 2.0]),
        "int_sci": T([1.0, 1e9]), "only_nonfinite": T([NAN, INF, -INF]), "neg_zero": T([-0.0, 1.0]),
        "long_row": R((30,), F32, -10, 10), "summary_1d": torch.arange(1001.0), "summary_2d": R((40, 30), F64),
        "summary_3d": R((8, 9, 20), F32), "summary_int": torch.arange(2000, dtype=I32).reshape(20, 100),
        "four_d": R((2, 2, 2, 2)), "wide_ints": T([10 ** 12, -3, 5], I64), "tiny": T([1.2e-38, 3e-38]),
        "huge64": T([1e300, -1e-300], F64), "bool1": T([True]), "summary_bool": R((1100,), BOOL),
        "one_each": T([[[1.5]]]), "edge_7": torch.arange(7.0).reshape(7, 1),
    }
    return t
