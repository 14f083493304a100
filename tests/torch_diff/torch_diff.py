#!/usr/bin/python3
"""torch_diff.py - nabla against PyTorch, op by op (issue 13's differential suite).

    /usr/bin/python3 tests/torch_diff/torch_diff.py RUNNER [--ops a,b] [--verbose] [--keep DIR]

RUNNER is build/tests/torch_diff/nabla-torch-diff. For every op of nabla's op
table (the runner's --list), cases.py builds inputs: broadcast shapes, 0-d
and empty tensors, strided views (a transpose, every other element), the
special values 0, -0.0, +-inf, NaN, subnormals, huge and tiny magnitudes,
ties, integer and bool dtypes, and bad arguments. Each case runs forward and
backward in PyTorch (Debian's python3-torch 1.13) and, through one run of
the runner, in nabla; the two must agree on:
  - whether the call fails (and whether its backward fails),
  - each output's shape and dtype, and its values (integers exactly; floats
    within the case's tolerance of PyTorch's result in the input dtype OR
    of PyTorch's result in float64, NaN where NaN, infinities with their
    sign),
  - each input's gradient for the seed gout (the same tolerance).
A case that disagrees fails unless allow.py lists it, with the reason (a
deliberate difference documented in autograd/OPS.md, "Differences from
PyTorch", or PyTorch 1.13 being wrong by the mathematics). An op without a
case fails the run too, as does an allow-list entry that no case uses (a
stale entry). Prints one line per failure and a summary; exit status 0 only
when nothing failed. Runs in about a minute on 2 cores.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time

import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import allow  # noqa: E402
import cases as case_defs  # noqa: E402

torch.set_num_threads(1)
torch.set_flush_denormal(False)

# ---- safetensors (the layout: u64 header length, JSON header, raw data) --------------------------

ST_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32", torch.int64: "I64",
             torch.uint8: "U8", torch.bool: "BOOL", torch.float16: "F16", torch.bfloat16: "BF16", torch.int8: "I8",
             torch.int16: "I16"}
ST_TORCH = {v: k for k, v in ST_DTYPES.items()}


def st_write(path, tensors, meta=None):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def st_read(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        dt = ST_TORCH[e["dtype"]]
        buf = bytearray(data[base + a:base + b])
        if dt == torch.bfloat16:
            t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16) if buf else torch.empty(0, dtype=dt)
        else:
            t = torch.frombuffer(buf, dtype=dt) if buf else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"]).clone()
    return out, meta


# ---- the PyTorch side of a case --------------------------------------------------------------------

def flush_subnormals(t):
    """nabla reads subnormal floats as zero (DAZ, documented): the reference does too."""
    if t is None or not t.dtype.is_floating_point or t.dtype in (torch.float16, torch.bfloat16):
        return t
    tiny = torch.finfo(t.dtype).tiny
    return torch.where(t.abs() < tiny, t * 0, t)  # keeps the sign of zero


def stored_form(x, view):
    """The tensor the file stores for a view: its transpose, or a double-length copy."""
    if view == "T":
        return x.transpose(-1, -2).contiguous()
    if view == "S":
        shape = list(x.shape)
        shape[-1] *= 2
        s = torch.zeros(shape, dtype=x.dtype)
        s[..., ::2] = x
        return s
    return x


def apply_view(s, view):
    if view == "T":
        return s.transpose(-1, -2)
    if view == "S":
        return s[..., ::2]
    return s


def as_tuple(r):
    if isinstance(r, (tuple, list)):
        return tuple(r)
    return (r,)


def has_subnormal(t):
    if t is None or t.dtype not in (torch.float32, torch.float64):
        return False
    a = t.abs()
    return bool(((a > 0) & (a < torch.finfo(t.dtype).tiny)).any())


def run_torch(c, stored, dtype_override=None, flush=True):
    """Forward and backward in PyTorch on the stored tensors. Returns
    (error or None, outputs, grads of stored, bw error or None, gouts)."""
    leaves = []
    xs = []
    for s, view, req in zip(stored, c.views, c.req):
        if s is None:
            leaves.append(None)
            xs.append(None)
            continue
        t = flush_subnormals(s.clone()) if flush else s.clone()
        if dtype_override is not None and t.dtype == torch.float32:
            t = t.to(dtype_override)
        if req:
            t.requires_grad_(True)
        leaves.append(t)
        xs.append(apply_view(t, view))
    try:
        outs = as_tuple(c.fn(xs, c.args))
    except Exception as e:  # PyTorch refuses the call
        return str(e).split("\n")[0], None, None, None, None
    outs = tuple(o for o in outs)
    gouts = []
    loss = None
    for k, o in enumerate(outs):
        g = None
        if isinstance(o, torch.Tensor) and o.requires_grad and k not in c.no_grad_out:
            gen = torch.Generator().manual_seed(1000 + k)
            g = (torch.rand(o.shape, generator=gen, dtype=torch.float64) + 0.5).to(o.dtype)
            term = (o * g).sum()
            loss = term if loss is None else loss + term
        gouts.append(g)
    grads, bw_err = [None] * len(leaves), None
    if loss is not None:
        try:
            loss.backward()
            grads = [None if l is None or not l.requires_grad else l.grad for l in leaves]
        except Exception as e:
            bw_err = str(e).split("\n")[0]
    return None, tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in outs), grads, bw_err, gouts


# ---- comparison ---------------------------------------------------------------------------------------

TORCH_DT_NAME = {torch.float32: "float32", torch.float64: "float64", torch.int32: "int32",
                 torch.int64: "int64", torch.uint8: "uint8", torch.bool: "bool", torch.float16: "float16",
                 torch.bfloat16: "bfloat16"}

TOL = {torch.float32: (2e-5, 1e-6), torch.float64: (1e-9, 1e-12), torch.float16: (1e-3, 1e-4),
       torch.bfloat16: (8e-3, 1e-3)}


def close(got, want, want64, rtol, atol_rel, in_scale=0.0, others=()):
    """got within tolerance of want (or want64, or any of others: per element,
    any candidate will do). Returns None or a description."""
    if got.shape != want.shape:
        return "shape %s, PyTorch %s" % (list(got.shape), list(want.shape))
    if got.dtype != want.dtype:
        return "dtype %s, PyTorch %s" % (TORCH_DT_NAME.get(got.dtype), TORCH_DT_NAME.get(want.dtype))
    if got.numel() == 0:
        return None
    if not want.dtype.is_floating_point:
        bad = got != want
        if bad.any():
            i = int(bad.reshape(-1).nonzero()[0])
            return "element %d: %s, PyTorch %s" % (i, got.reshape(-1)[i].item(), want.reshape(-1)[i].item())
        return None
    g = got.double().reshape(-1)
    cands = [want.double().reshape(-1)]
    if want64 is not None and want64.shape == want.shape:
        cands.append(want64.double().reshape(-1))
    for o in others:
        if isinstance(o, torch.Tensor) and o.shape == want.shape:
            cands.append(o.double().reshape(-1))
    tiny = torch.finfo(want.dtype).tiny
    ok = torch.zeros_like(g, dtype=torch.bool)
    for w in cands:
        finite = torch.isfinite(w)
        scale = max(1.0, in_scale, float(w[finite].abs().max()) if finite.any() else 1.0)
        tol = atol_rel * scale + rtol * w.abs()
        ok |= (g == w) | (torch.isnan(g) & torch.isnan(w)) | (finite & torch.isfinite(g) & ((g - w).abs() <= tol))
        ok |= finite & (w.abs() < tiny) & (g.abs() < tiny * 4)  # a subnormal result flushed to zero
    if not ok.all():
        i = int((~ok).nonzero()[0])
        return "element %d of %d: %.9g, PyTorch %.9g%s" % (
            i, g.numel(), g[i].item(), cands[0][i].item(),
            (" (float64 %.9g)" % cands[1][i].item()) if len(cands) > 1 else "")
    return None


def compare(c, res, stored, got, meta, idx):
    """None if nabla (got/meta for case idx) agrees with PyTorch (res), else why."""
    err, outs, grads, bw_err, _ = res["f"]
    status = meta.get("%d.status" % idx, "missing")
    msg = meta.get("%d.msg" % idx, "")
    if err is not None:
        if status == "ok":
            return "PyTorch fails (%s), nabla does not" % err[:100]
        return None
    if status != "ok" and not status.startswith("backward"):
        return "nabla fails: %s: %s" % (status, msg[:160])
    res64 = res.get("d")
    outs64 = res64[1] if res64 and res64[0] is None else None
    resu = res.get("u")  # unflushed inputs: a library function may see a subnormal's bits
    outsu = resu[1] if resu and resu[0] is None else None
    for k, o in enumerate(outs):
        if k in c.skip_out or not isinstance(o, torch.Tensor):
            continue
        name = "%d.o%d" % (idx, k)
        if name not in got:
            return "output %d missing" % k
        rtol, atol = c.tol.get(o.dtype, TOL.get(o.dtype, (0, 0)))
        if not c.values:  # random samples: their shape and dtype only
            g = got[name]
            why = None if g.shape == o.shape and g.dtype == o.dtype else "shape %s %s, PyTorch %s %s" % (
                list(g.shape), TORCH_DT_NAME.get(g.dtype), list(o.shape), TORCH_DT_NAME.get(o.dtype))
        else:
            why = close(got[name], o, outs64[k] if outs64 else None, rtol, atol, c.scale,
                        (outsu[k],) if outsu is not None else ())
        if why:
            return "output %d: %s" % (k, why)
    if bw_err is not None:
        if not status.startswith("backward"):
            return "PyTorch's backward fails (%s), nabla's does not" % bw_err[:100]
        return None
    if status.startswith("backward"):
        return "nabla's backward fails: %s: %s" % (status, msg[:160])
    grads64 = res64[2] if res64 and res64[0] is None and res64[3] is None else None
    for j, g in enumerate(grads):
        if g is None or not c.req[j]:
            continue
        name = "%d.g%d" % (idx, j)
        want = g.to(stored[j].dtype) if g.dtype != stored[j].dtype else g
        if name not in got:
            if bool((want == 0).all()):
                continue
            return "gradient of input %d missing" % j
        rtol, atol = c.gtol.get(want.dtype, c.tol.get(want.dtype, TOL.get(want.dtype, (0, 0))))
        w64 = grads64[j] if grads64 and grads64[j] is not None else None
        gu = resu[2] if resu and resu[0] is None and resu[3] is None else None
        why = close(got[name], want, w64, rtol * 5, atol * 5, c.scale,
                    (gu[j].to(want.dtype),) if gu is not None and gu[j] is not None else ())
        if why:
            return "gradient of input %d: %s" % (j, why)
    return None


def json_args(args):
    """JSON has no NaN or infinities: they travel as "nan", "inf", "-inf" (the runner's ad() reads them)."""
    def fix(v):
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if v != v else ("inf" if v > 0 else "-inf")
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v
    return {k: fix(v) for k, v in args.items()}


def check_repr(runner, tmp):
    """nb_repr against repr(tensor) on the tensors of cases.repr_tensors()."""
    ts = case_defs.repr_tensors()
    path = os.path.join(tmp, "repr.safetensors")
    st_write(path, ts)
    out = json.loads(subprocess.run([runner, "--repr", path], check=True, capture_output=True, text=True).stdout)
    os.remove(path)
    fails = []
    for name, t in ts.items():
        want = repr(t.clone().requires_grad_(True) if ".rg" in name else t)
        if out.get(name) != want:
            fails.append("FAIL nb_repr of %s:\n%s\nPyTorch:\n%s" % (name, out.get(name), want))
    return fails


# ---- main ----------------------------------------------------------------------------------------------------

def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    runner = args[0]
    only = None
    verbose = "--verbose" in args
    keep = args[args.index("--keep") + 1] if "--keep" in args else None
    if "--ops" in args:
        only = set(args[args.index("--ops") + 1].split(","))
    t0 = time.time()
    table = [l.split() for l in subprocess.run([runner, "--list"], check=True, capture_output=True,
                                                 text=True).stdout.splitlines()]
    ops = {name: int(flags) for name, _, flags in table}
    all_cases = case_defs.build()
    all_cases = [c for c in all_cases if only is None or c.op in only]
    unknown = sorted({c.op for c in all_cases} - set(ops))
    # ops this torch lacks (newer than it) have no cases here; they are named in the summary
    newer = getattr(case_defs, "NOT_IN_THIS_TORCH", {})
    missing = sorted(set(ops) - {c.op for c in all_cases} - set(newer)) if only is None else []
    missing_grad = sorted(n for n, f in ops.items() if f & 1 and only is None and n not in newer and
                          not any(c.op == n and any(c.req) for c in all_cases))
    for n, since in sorted(newer.items()):
        print("not compared: %s (PyTorch %s has it, this torch %s does not)" % (n, since, torch.__version__))

    tensors, manifest, results = {}, [], []
    for i, c in enumerate(all_cases):
        stored = [None if x is None else stored_form(x, v) for x, v in zip(c.inputs, c.views)]
        names = []
        for j, s in enumerate(stored):
            if s is None:
                names.append(None)
            else:
                tensors["c%d.%d" % (i, j)] = s
                names.append("c%d.%d" % (i, j))
        res = {"f": run_torch(c, stored)}
        if any(s is not None and s.dtype == torch.float32 for s in stored) and res["f"][0] is None:
            res["d"] = run_torch(c, stored, torch.float64)
        if any(has_subnormal(s) for s in stored):
            res["u"] = run_torch(c, stored, flush=False)
        if c.ill:  # an ill-conditioned reduction: errors scale with the inputs' magnitudes, not the result's
            c.scale = max(float(s[torch.isfinite(s)].abs().sum()) for s in stored
                          if s is not None and s.dtype.is_floating_point and torch.isfinite(s).any())
        gnames = []
        for k, g in enumerate(res["f"][4] or []):
            if g is None:
                gnames.append(None)
            else:
                tensors["c%d.g%d" % (i, k)] = g
                gnames.append("c%d.g%d" % (i, k))
        manifest.append({"op": c.op, "in": names, "view": c.views, "req": c.req, "gout": gnames,
                         "args": json_args(c.args)})
        results.append((c, res, stored))

    tmp = keep or tempfile.mkdtemp(prefix="nb_torch_diff_")
    os.makedirs(tmp, exist_ok=True)
    inp, man, outp = os.path.join(tmp, "inputs.safetensors"), os.path.join(tmp, "cases.json"), \
        os.path.join(tmp, "outputs.safetensors")
    st_write(inp, tensors)
    with open(man, "w") as f:
        json.dump(manifest, f)
    t1 = time.time()
    r = subprocess.run([runner, man, inp, outp], capture_output=True, text=True)
    if r.returncode != 0:
        print("torch_diff: the runner failed (exit %d): %s" % (r.returncode, r.stderr[-2000:]))
        return 1
    t2 = time.time()
    got, meta = st_read(outp)

    failed, allowed, used_allow = [], 0, set()
    n_repr = len(case_defs.repr_tensors()) if only is None else 0
    if only is None:
        failed += check_repr(runner, tmp)
    for i, (c, res, stored) in enumerate(results):
        why = compare(c, res, stored, got, meta, i)
        if why is None:
            continue
        key = allow.match(c.op, c.tag, why)
        if key is not None:
            allowed += 1
            used_allow.add(key)
            if verbose:
                print("allowed %s[%s] case %d: %s" % (c.op, c.tag, i, why))
            continue
        failed.append("FAIL %s[%s] case %d (args %s, dtypes %s): %s" % (
            c.op, c.tag, i, json.dumps(c.args), [None if x is None else TORCH_DT_NAME[x.dtype] for x in c.inputs],
            why))
    for line in failed:
        print(line)
    stale = [] if only is not None else sorted(k for k in allow.ENTRIES if k not in used_allow)
    for k in stale:
        print("STALE allow-list entry %s: no case needed it" % (k,))
    for n in missing:
        print("NO CASE for op %s" % n)
    for n in missing_grad:
        print("NO GRADIENT CASE for differentiable op %s" % n)
    for n in unknown:
        print("UNKNOWN op %s in cases.py (not in the op table)" % n)
    n_ops = len({c.op for c, _, _ in results})
    print("torch_diff: %d cases over %d ops (of %d in the op table) and %d reprs: %d failed, %d allowed (known "
          "differences, tests/torch_diff/allow.py), the rest agree; PyTorch %.1fs, nabla %.1fs" % (
              len(results), n_ops, len(ops), n_repr, len(failed), allowed, t1 - t0, t2 - t1))
    # the plain closing line test runners print (allowed differences pass; a missing case or a stale
    # allow-list entry counts as a failure)
    n_bad = len(failed) + len(missing) + len(missing_grad) + len(unknown) + len(stale)
    print("torch_diff: %d passed, %d failed" % (len(results) + n_repr - len(failed), n_bad))
    if not keep:
        for p in (inp, man, outp):
            os.remove(p)
        os.rmdir(tmp)
    return 1 if failed or missing or missing_grad or unknown or stale else 0


if __name__ == "__main__":
    sys.exit(main())
