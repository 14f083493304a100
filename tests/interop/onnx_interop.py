#!/usr/bin/env python3
"""onnx_interop.py DIR - the ONNX side of tests/test_onnx.c.

DIR/cases.txt lists, one per line, "MODEL INPUT EXPECTED DTYPE DIM...":
an .onnx file nb_onnx_export wrote, a raw little-endian input of that
dtype (int64 or float32) and shape, and nabla's float32 output for it.
Each model must pass onnx.checker (full_check: shape inference too) with
dimension 0 of its input and output symbolic ("batch"). Each case then
runs in ONNX Runtime: the Python package where it is installed (the GPU
machine), else onnxruntime-web under Node.js
(tests/interop/fetch_onnxruntime_web.sh; NB_ORT_WEB_DIR or the default
cache). Its output must equal nabla's within 1e-4 (absolute).

Prints one line per model and case. Exit 77 when neither onnx nor a
runtime is available; a case that could not run (no runtime) is reported,
not failed.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = 1e-4


def ort_python():
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError:
        return None

    def run(model, inp, dtype, dims, expected):
        x = np.fromfile(inp, dtype=np.int64 if dtype == "int64" else np.float32).reshape(dims)
        s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        y = s.run(None, {s.get_inputs()[0].name: x})[0]
        want = np.fromfile(expected, dtype=np.float32)
        if y.size != want.size:
            return float("inf"), list(y.shape)
        return float(np.max(np.abs(y.reshape(-1) - want))), list(y.shape)

    return run, "onnxruntime " + ort.__version__


def ort_web():
    node = shutil.which("node")
    d = os.environ.get("NB_ORT_WEB_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "nabla", "onnxruntime-web")
    if not node or not os.path.isfile(os.path.join(d, "node_modules", "onnxruntime-web", "package.json")):
        return None

    def run(model, inp, dtype, dims, expected):
        r = subprocess.run([node, os.path.join(HERE, "onnx_run.mjs"), model, inp, expected, dtype] + [str(v) for v in dims],
                           cwd=d, capture_output=True, text=True, check=True)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        m = out["max_abs_diff"]
        return (float("nan") if m is None else m), out["shape"]

    return run, "onnxruntime-web (WebAssembly, Node.js)"


def main():
    d = sys.argv[1]
    cases = [line.split() for line in open(os.path.join(d, "cases.txt")) if line.strip()]
    try:
        import onnx
    except ImportError:
        onnx = None
    runtime = ort_python() or ort_web()
    if onnx is None and runtime is None:
        sys.exit(77)
    checked = set()
    for model, *_ in cases:
        if onnx is None or model in checked:
            continue
        checked.add(model)
        m = onnx.load(os.path.join(d, model))
        onnx.checker.check_model(m, full_check=True)
        for v in list(m.graph.input) + list(m.graph.output):
            dim0 = v.type.tensor_type.shape.dim[0]
            assert dim0.dim_param == "batch", (model, v.name, dim0)
        assert m.opset_import[0].version >= 17 and m.producer_name == "nabla"
        print("onnx_interop: %s passes onnx.checker (%d nodes, %d initializers)" %
              (model, len(m.graph.node), len(m.graph.initializer)))
    if runtime is None:
        print("onnx_interop: no ONNX Runtime here (Python onnxruntime or onnxruntime-web): outputs not compared")
        return
    run, name = runtime
    worst = 0.0
    for model, inp, expected, dtype, *dims in cases:
        dims = [int(v) for v in dims]
        diff, shape = run(os.path.join(d, model), os.path.join(d, inp), dtype, dims, os.path.join(d, expected))
        print("onnx_interop: %s on %s: output %s, max |nabla - ORT| = %.3g" % (model, dims, shape, diff))
        assert diff <= TOL, (model, dims, diff)
        worst = max(worst, diff)
    print("onnx_interop: %d cases in %s, all within %g (worst %.3g)" % (len(cases), name, TOL, worst))


if __name__ == "__main__":
    main()
