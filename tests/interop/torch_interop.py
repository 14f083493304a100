#!/usr/bin/python3
"""torch_interop.py - nabla <-> PyTorch checkpoint interoperability.

Run by tests/test_checkpoint.c (interop test) as
    /usr/bin/python3 tests/interop/torch_interop.py DIR
after it wrote, in DIR:
    nabla_ckpt.safetensors  a nabla checkpoint of a 784-512-512-10 ReLU MLP
                            (nb_save_checkpoint: model keys plus optimizer.*)
    nabla_io.safetensors    "x" [16, 784] float32 and nabla's "logits" [16, 10]
This script reads both with a reader of its own (the safetensors layout:
u64 little-endian header length, JSON header, raw little-endian data; no
safetensors package), checks every CRC-32 the file carries, loads the model
keys into the same network in PyTorch (strict) and requires its logits to be
within 1e-5 of nabla's. Then it saves a freshly initialised PyTorch MLP's
state_dict in safetensors layout (torch_mlp.safetensors, no CRCs) and its
logits on the same inputs (torch_logits.safetensors), which the C test loads
into nabla and compares.
Exit status: 0 pass, 1 mismatch or bad file, 77 torch or numpy missing.
"""
import json
import struct
import sys
import zlib

try:
    import numpy as np
    import torch
except ImportError as e:  # the C test reports the skip
    print(f"torch_interop: skipped ({e})")
    sys.exit(77)

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    """Returns ({name: np.ndarray}, metadata) after checking the layout and CRCs."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert 8 + n <= len(raw), f"{path}: header length {n} past the file"
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out, end = {}, 0
    for name, e in header.items():
        b, eoff = e["data_offsets"]
        buf = data[b:eoff]
        dt = np.dtype(DTYPES[e["dtype"]]).newbyteorder("<")
        arr = np.frombuffer(buf, dtype=dt).reshape(e["shape"])
        crc = meta.get("crc32." + name)
        if crc is not None and int(crc, 16) != zlib.crc32(buf) & 0xFFFFFFFF:
            raise ValueError(f"{path}: CRC-32 mismatch for {name}")
        out[name] = arr.copy()
        end = max(end, eoff)
    assert end == len(data), f"{path}: {len(data) - end} stray data bytes"
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    """The safetensors layout: sorted names, contiguous offsets, header padded to 8."""
    header, chunks, at = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name].detach().cpu().numpy())
        rev = {v: k for k, v in DTYPES.items()}
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": rev[a.dtype.type], "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        chunks.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 10))


def main(d):
    ck, meta = read_safetensors(f"{d}/nabla_ckpt.safetensors")
    io, _ = read_safetensors(f"{d}/nabla_io.safetensors")
    assert meta.get("format") == "pt" and meta.get("nabla.checkpoint") == "1", meta
    sd = {k: torch.from_numpy(v) for k, v in ck.items() if not k.startswith("optimizer.")}
    assert any(k.startswith("optimizer.state.") for k in ck), "no optimizer state in the checkpoint"
    net = mlp()
    net.load_state_dict(sd, strict=True)
    x = torch.from_numpy(io["x"])
    with torch.no_grad():
        diff = (net(x) - torch.from_numpy(io["logits"])).abs().max().item()
    print(f"torch_interop: nabla checkpoint -> PyTorch: max |logits diff| = {diff:.3g}")
    if not diff <= 1e-5:
        return 1
    torch.manual_seed(1234)
    ref = mlp()
    write_safetensors(f"{d}/torch_mlp.safetensors", ref.state_dict(), {"format": "pt"})
    with torch.no_grad():
        write_safetensors(f"{d}/torch_logits.safetensors", {"logits": ref(x)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
