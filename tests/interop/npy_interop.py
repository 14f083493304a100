#!/usr/bin/env python3
"""npy_interop.py DIR - NumPy's side of tests/test_npy.c.

Reads the .npy / .npz files nabla wrote into DIR (nabla_<dtype>.npy,
nabla.npz, nabla_c.npz) with NumPy and checks their values, and that each
.npy is byte for byte what numpy.save writes for the same array; then
writes NumPy's own files into DIR (every type nabla reads, C and Fortran
order, both byte orders, savez and savez_compressed) for the C side to
load. Values are value(i) of the C-order flat index i, the formula
test_npy.c computes too. Exit 77: no NumPy.
"""
import io
import os
import sys

try:
    import numpy as np
except ImportError:
    sys.exit(77)

SHAPE = (3, 4, 5)


def base(n):
    return (np.arange(n, dtype=np.int64) * 37) % 101


def values(dtype, shape=SHAPE):
    n = int(np.prod(shape))
    b = base(n)
    k = np.dtype(dtype).kind
    if k == "b":
        v = b % 3 == 0
    elif k == "u":
        v = b
    elif k == "i":
        v = b - 50
    else:
        v = (b - 50) * 0.25
    return v.astype(dtype).reshape(shape)


def check(cond, what):
    if not cond:
        print("npy_interop: FAIL:", what)
        sys.exit(1)


def main():
    d = sys.argv[1]
    # nabla's files
    for name in ["float32", "float64", "float16", "int32", "int64", "uint8", "bool"]:
        path = os.path.join(d, "nabla_%s.npy" % name)
        a = np.load(path)
        want = values(name)
        check(a.dtype == want.dtype and a.shape == want.shape, "%s: %s %s" % (path, a.dtype, a.shape))
        check(np.array_equal(a, want), "%s: values" % path)
        buf = io.BytesIO()
        np.save(buf, want)
        check(open(path, "rb").read() == buf.getvalue(), "%s: not numpy.save's bytes" % path)
    for name in ["nabla_scalar.npy", "nabla_empty.npy"]:
        a = np.load(os.path.join(d, name))
        buf = io.BytesIO()
        np.save(buf, a)
        check(open(os.path.join(d, name), "rb").read() == buf.getvalue(), name + ": not numpy.save's bytes")
    check(np.load(os.path.join(d, "nabla_scalar.npy")).shape == () and
          float(np.load(os.path.join(d, "nabla_scalar.npy"))) == 2.5, "0-d")
    check(np.load(os.path.join(d, "nabla_empty.npy")).shape == (0, 3), "empty")
    for name in ["nabla.npz", "nabla_c.npz"]:
        with np.load(os.path.join(d, name)) as z:
            check(sorted(z.files) == ["a", "b"], "%s: %s" % (name, z.files))
            check(np.array_equal(z["a"], values("float32")), name + ": a")
            check(np.array_equal(z["b"], values("int64", (7,))), name + ": b")
    # NumPy's files
    os.makedirs(os.path.join(d, "np"), exist_ok=True)
    for t in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64"]:
        for bo in "<>":
            dt = np.dtype(t).newbyteorder(bo) if np.dtype(t).itemsize > 1 else np.dtype(t)
            a = values(t).astype(dt)
            np.save(os.path.join(d, "np", "%s_%s_c.npy" % (t, "le" if bo == "<" else "be")), a)
            np.save(os.path.join(d, "np", "%s_%s_f.npy" % (t, "le" if bo == "<" else "be")), np.asfortranarray(a))
    np.save(os.path.join(d, "np", "scalar.npy"), np.float64(-1.5))
    np.save(os.path.join(d, "np", "empty.npy"), np.zeros((2, 0), np.float32))
    np.savez(os.path.join(d, "np", "plain.npz"), x=values("float64"), y=values("int16", (6,)))
    np.savez_compressed(os.path.join(d, "np", "packed.npz"), x=values("float64"), y=values("int16", (6,)))
    np.save(os.path.join(d, "np", "complex.npy"), np.zeros(3, np.complex64))
    print("npy_interop: ok")


if __name__ == "__main__":
    main()
