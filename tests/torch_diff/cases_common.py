"""cases_common.py - what the differential suite's case files share: the
Case record (see cases.py) and the input makers (seeded uniform/normal
draws, literal tensors, special values, subnormals, strided views)."""
import math

import torch
import torch.nn.functional as F

F32, F64, I32, I64, U8, BOOL, F16, BF16 = (torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8,
                                           torch.bool, torch.float16, torch.bfloat16)
I8, I16 = torch.int8, torch.int16
INF, NAN = math.inf, math.nan

_gen = torch.Generator().manual_seed(13)


class Case:
    def __init__(self, op, inputs, fn, args=None, req=None, views=None, tag="", tol=None, gtol=None,
                 skip_out=(), no_grad_out=(), ill=False, values=True):
        self.op, self.inputs, self.fn, self.args = op, list(inputs), fn, dict(args or {})
        self.views = list(views) if views else [""] * len(self.inputs)
        if req is None:
            req = [x is not None and x.dtype in (F32, F64) for x in self.inputs]
        elif req is False:
            req = [False] * len(self.inputs)
        self.req = [bool(r) and x is not None and x.dtype in (F32, F64) for r, x in zip(req, self.inputs)]
        self.tag, self.tol, self.gtol = tag, dict(tol or {}), dict(gtol or {})
        self.skip_out, self.no_grad_out = set(skip_out), set(no_grad_out)
        self.ill, self.scale = ill, 0.0
        self.values = values  # False: random outputs; only shapes and dtypes are compared


# ---- inputs -------------------------------------------------------------------------------------------------

def R(shape, dt=F32, lo=-2.0, hi=2.0):
    """uniform in [lo, hi)"""
    t = torch.rand(shape, generator=_gen, dtype=torch.float64) * (hi - lo) + lo
    if dt in (I32, I64, U8, I8, I16):
        return t.floor().to(dt)
    if dt == BOOL:
        return t > (lo + hi) / 2
    return t.to(dt)


_gen_narrow = torch.Generator().manual_seed(8)


def RN(shape, dt, lo, hi):
    """R for the int8/int16 cases, from a generator of their own (so adding
    them did not move the other cases' draws)"""
    t = torch.rand(shape, generator=_gen_narrow, dtype=torch.float64) * (hi - lo) + lo
    return t.to(dt) if dt in (F32, F64) else t.floor().to(dt)


def N(shape, dt=F32):
    return torch.randn(shape, generator=_gen, dtype=torch.float64).to(dt)


def T(values, dt=F32):
    return torch.tensor(values, dtype=dt)


SPECIAL32 = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, INF, -INF, NAN, 6e-38, -3e-38, 1e38, -1e38, 1.2e-38,
             88.5, -88.5, 100.0, -100.0, 1e20, -1e20, 7.0, -7.5, 2.5]
SPECIAL64 = SPECIAL32 + [1e308, -1e308, 3e-308, -1e-300, 750.0, -750.0]
# subnormals: nabla runs with flush-to-zero and denormals-are-zero (documented); they get cases of their own
SUBNORMAL32 = [1e-40, -1e-42, 0.0, 1.0, -2.0, 3e-39, -1e-45, 0.5]
SUBNORMAL64 = SUBNORMAL32 + [5e-324, -1e-310, 2e-308, -4e-320]


def special(dt):
    return T(SPECIAL64 if dt == F64 else SPECIAL32, dt)


def subnormal(dt):
    return T(SUBNORMAL64 if dt == F64 else SUBNORMAL32, dt)


def sv(v, x):
    """A C double scalar as nabla reads it (nb_scalar_result_type, documented):
    for an integer or bool tensor, an integral value its dtype holds acts as
    a Python int, anything else as a Python float. (PyTorch tells 2 from 2.0;
    C cannot.)"""
    v = float(v)
    if x is None or x.dtype.is_floating_point or not math.isfinite(v) or v != math.floor(v):
        return v
    info = torch.iinfo(x.dtype) if x.dtype != BOOL else torch.iinfo(I64)
    return int(v) if info.min <= v <= info.max else v


def views_of(n, v):
    return [v] + [""] * (n - 1)
