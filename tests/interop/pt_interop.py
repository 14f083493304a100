#!/usr/bin/env python3
"""pt_interop.py write|check DIR - PyTorch's side of tests/test_pt.c.

write: torch.save's files for nabla to load (every dtype nabla has, views
sharing a storage, non-contiguous strides, offsets, 0-d and empty tensors,
nn.Parameter, a nested checkpoint with plain values, a model's state_dict
with an input and the output it gives, the legacy format), and hostile
files built with zipfile and hand-written pickles (no torch needed): a
global outside the allowlist, storages out of range, missing records, a
truncated archive, a refused opcode.

check: torch.load(weights_only=True) of the files nabla wrote (nabla_*.pt):
values, dtypes, strides, offsets and storage sharing.

Values are value(i) of the flat index i, the formula test_pt.c computes.
Exit 77: no torch (hostile files are still written by write).
"""
import io
import os
import struct
import sys
import zipfile


def value(kind, i):
    b = (i * 37) % 101
    if kind == "b":
        return b % 3 == 0
    if kind == "u":
        return b
    if kind == "i":
        return b - 50
    return (b - 50) * 0.25


def fail(what):
    print("pt_interop: FAIL:", what)
    sys.exit(1)


def archive(path, records, prefix="archive/"):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in records:
            z.writestr(prefix + name, data)


def pk_str(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def pk_int(v):
    return b"J" + struct.pack("<i", v)


def tensor_pickle(numel, offset, size, stride, storage_type=b"FloatStorage", key="0"):
    """A dict {'t': _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())} by hand."""
    tup = lambda xs: b"(" + b"".join(pk_int(x) for x in xs) + b"t"
    return (b"\x80\x02}(" + pk_str("t") + b"ctorch._utils\n_rebuild_tensor_v2\n((" + pk_str("storage") +
            b"ctorch\n" + storage_type + b"\n" + pk_str(key) + pk_str("cpu") + pk_int(numel) + b"tQ" +
            pk_int(offset) + tup(size) + tup(stride) + b"\x89ccollections\nOrderedDict\n)RtRu.")


def hostile(d):
    h = os.path.join(d, "hostile")
    os.makedirs(h, exist_ok=True)
    f32 = struct.pack("<6f", *range(6))
    ver = [("version", b"3\n")]
    # os.system('true') via REDUCE: refused at GLOBAL
    archive(os.path.join(h, "os_system.pt"),
            [("data.pkl", b"\x80\x02cos\nsystem\n" + pk_str("true") + b"\x85R.")] + ver)
    archive(os.path.join(h, "builtins_eval.pt"),
            [("data.pkl", b"\x80\x02c__builtin__\neval\n" + pk_str("1") + b"\x85R.")] + ver)
    # a storage of 6 floats viewed past its end, and at a negative stride
    archive(os.path.join(h, "out_of_range.pt"),
            [("data.pkl", tensor_pickle(6, 2, [2, 3], [3, 1])), ("data/0", f32)] + ver)
    archive(os.path.join(h, "negative_stride.pt"),
            [("data.pkl", tensor_pickle(6, 5, [6], [-1])), ("data/0", f32)] + ver)
    # the id says 8 elements, the record holds 6
    archive(os.path.join(h, "short_storage.pt"),
            [("data.pkl", tensor_pickle(8, 0, [8], [1])), ("data/0", f32)] + ver)
    archive(os.path.join(h, "missing_storage.pt"), [("data.pkl", tensor_pickle(6, 0, [6], [1]))] + ver)
    archive(os.path.join(h, "no_pickle.pt"), [("data/0", f32)] + ver)
    # protocol 4's FRAME: not an opcode weights_only runs
    archive(os.path.join(h, "frame.pt"), [("data.pkl", b"\x80\x04\x95" + struct.pack("<Q", 2) + b"N.")] + ver)
    # a list nested 100 deep
    archive(os.path.join(h, "deep.pt"), [("data.pkl", b"\x80\x02" + b"]" * 100 + b"a" * 99 + b".")] + ver)
    # a stack underflow, and a pickle cut off in an opcode
    archive(os.path.join(h, "underflow.pt"), [("data.pkl", b"\x80\x02R.")] + ver)
    archive(os.path.join(h, "cut.pt"), [("data.pkl", b"\x80\x02X\xff\x00\x00\x00ab")] + ver)
    # a complex64 storage: a dtype nabla lacks; an int16 one, which loads as NB_I16
    archive(os.path.join(h, "complex_dtype.pt"),
            [("data.pkl", tensor_pickle(3, 0, [3], [1], b"ComplexFloatStorage")), ("data/0", f32)] + ver)
    archive(os.path.join(h, "short.pt"),
            [("data.pkl", tensor_pickle(6, 0, [6], [1], b"ShortStorage")),
             ("data/0", struct.pack("<6h", -3, -2, -1, 0, 1, 300))] + ver)
    # BUILD on a plain dict (weights_only builds only Tensor, Parameter and OrderedDict)
    archive(os.path.join(h, "build_dict.pt"), [("data.pkl", b"\x80\x02}}b.")] + ver)
    # a shape of 2^80 elements over a zero stride
    big = b"\x8a\x06" + (1 << 40).to_bytes(6, "little")
    archive(os.path.join(h, "huge_shape.pt"),
            [("data.pkl", b"\x80\x02}(" + pk_str("t") + b"ctorch._utils\n_rebuild_tensor_v2\n((" + pk_str("storage") +
              b"ctorch\nFloatStorage\n" + pk_str("0") + pk_str("cpu") + pk_int(6) + b"tQ" + pk_int(0) +
              b"(" + big + big + b"t(" + pk_int(0) + pk_int(0) + b"t\x89ccollections\nOrderedDict\n)RtRu."),
             ("data/0", f32)] + ver)
    # one 1 MiB string referenced 100 times: 100 MiB of entries from a 1 MiB pickle
    archive(os.path.join(h, "blowup.pt"),
            [("data.pkl", b"\x80\x02]q\x00(" + pk_str("x" * (1 << 20)) + b"q\x01" + b"h\x01" * 100 + b"e.")] + ver)
    # valid ones by hand: Counter({'a': 1, 'b': 2}) (REDUCE with a dict), a tensor over an untyped storage (uint8)
    archive(os.path.join(h, "counter.pt"),
            [("data.pkl", b"\x80\x02}(" + pk_str("c") + b"ccollections\nCounter\n}(" + pk_str("a") + b"K\x01" +
              pk_str("b") + b"K\x02u\x85Ru.")] + ver)
    archive(os.path.join(h, "untyped.pt"),
            [("data.pkl", tensor_pickle(24, 4, [4], [1], b"UntypedStorage")), ("data/0", f32)] + ver)
    # a good file truncated in the middle, and with a flipped storage byte (its CRC fails)
    good = os.path.join(h, "good.pt")
    archive(good, [("data.pkl", tensor_pickle(6, 0, [2, 3], [3, 1])), ("data/0", f32)] + ver)
    raw = open(good, "rb").read()
    open(os.path.join(h, "truncated.pt"), "wb").write(raw[: len(raw) // 2])
    i = raw.index(f32)
    open(os.path.join(h, "bad_crc.pt"), "wb").write(raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1:])


def write(d):
    hostile(d)
    try:
        import torch
    except ImportError:
        sys.exit(77)
    from collections import OrderedDict
    kinds = {torch.float32: "f", torch.float64: "f", torch.float16: "f", torch.bfloat16: "f",
             torch.int64: "i", torch.int32: "i", torch.uint8: "u", torch.bool: "b"}
    sd = OrderedDict()
    for dt, k in kinds.items():
        name = str(dt).split(".")[1]
        sd[name] = torch.tensor([value(k, i) for i in range(60)]).to(dt).reshape(3, 4, 5)
    base = torch.tensor([value("f", i) for i in range(40)], dtype=torch.float32)
    sd["base"] = base
    sd["view"] = base[4:16].view(3, 4)      # offset 4, shares base's storage
    sd["strided"] = base[1::3]              # stride 3, offset 1
    sd["transposed"] = base[:12].view(3, 4).t()
    sd["scalar"] = torch.tensor(2.5, dtype=torch.float64)
    sd["empty"] = torch.zeros(0, 3)
    sd["param"] = torch.nn.Parameter(torch.tensor([value("f", i) for i in range(6)]).reshape(2, 3))
    torch.save(sd, os.path.join(d, "torch_all.pt"))
    ckpt = {"model": {"fc.weight": torch.ones(2, 2), "fc.bias": torch.zeros(2)}, "epoch": 7, "lr": 0.125,
            "name": "run-1", "betas": (0.9, 0.999), "flag": True, "nothing": None, "big": 1 << 40,
            "neg": -3, "data": b"\x00\xffab", "dtype": torch.float16, "device": torch.device("cpu"),
            "z": complex(1.5, -2.0), "steps": [1, 2, 3], "size": torch.Size([4, 5])}
    torch.save(ckpt, os.path.join(d, "torch_ckpt.pt"))
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    x = torch.randn(5, 4)
    torch.save(net.state_dict(), os.path.join(d, "torch_net.pt"))
    torch.save({"x": x, "y": net(x).detach()}, os.path.join(d, "torch_net_io.pt"))
    torch.save(sd, os.path.join(d, "torch_legacy.pt"), _use_new_zipfile_serialization=False)


def check(d):
    try:
        import torch
    except ImportError:
        sys.exit(77)
    kinds = {"float32": "f", "float64": "f", "float16": "f", "bfloat16": "f", "int64": "i", "int32": "i",
             "uint8": "u", "bool": "b"}
    sd = torch.load(os.path.join(d, "nabla_all.pt"), weights_only=True)
    if list(sd.keys())[:8] != list(kinds):
        fail("keys %s" % list(sd.keys()))
    for name, k in kinds.items():
        t = sd[name]
        want = torch.tensor([value(k, i) for i in range(60)]).to(getattr(torch, name)).reshape(3, 4, 5)
        if t.dtype != want.dtype or not torch.equal(t, want):
            fail("%s: %s %s" % (name, t.dtype, t.flatten()[:5]))
    base, view, strided, tr = sd["base"], sd["view"], sd["strided"], sd["transposed"]
    if not torch.equal(base, torch.tensor([value("f", i) for i in range(40)], dtype=torch.float32)):
        fail("base")
    if view.storage_offset() != 4 or not torch.equal(view, base[4:16].view(3, 4)):
        fail("view: offset %d" % view.storage_offset())
    if strided.stride() != (3,) or strided.storage_offset() != 1 or not torch.equal(strided, base[1::3]):
        fail("strided: %s %d" % (strided.stride(), strided.storage_offset()))
    if tr.stride() != (1, 4) or not torch.equal(tr, base[:12].view(3, 4).t()):
        fail("transposed: %s" % (tr.stride(),))
    ptr = lambda t: t.storage().data_ptr()
    if not (ptr(base) == ptr(view) == ptr(strided) == ptr(tr)):
        fail("views do not share base's storage")
    if sd["scalar"].shape != () or float(sd["scalar"]) != 2.5 or sd["scalar"].dtype != torch.float64:
        fail("scalar")
    if sd["empty"].shape != (0, 3):
        fail("empty")
    # a model's state_dict saved by nabla loads into the same PyTorch module
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    net.load_state_dict(torch.load(os.path.join(d, "nabla_net.pt"), weights_only=True))
    io_ = torch.load(os.path.join(d, "torch_net_io.pt"), weights_only=True)
    if not torch.allclose(net(io_["x"]), io_["y"], atol=0, rtol=0):
        fail("nabla_net.pt: another output")


if __name__ == "__main__":
    {"write": write, "check": check}[sys.argv[1]](sys.argv[2])
