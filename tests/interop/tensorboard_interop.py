#!/usr/bin/env python3
"""tensorboard_interop.py DIR - reads back the event file that
tests/test_tensorboard.c wrote into DIR, without nabla's code:

- the TFRecord framing, each length and data CRC checked with a bitwise
  CRC-32C written here (nabla's C uses a table);
- the Event protobufs parsed by Python's protobuf: with TensorBoard's own
  message classes when the tensorboard package is installed, else with
  classes built from utils/proto/tensorboard.proto (compiled to a
  descriptor set by protoc-c);
- the values against what the C side logged (the same formulas below),
  the histograms against PyTorch's make_histogram algorithm on NumPy;
- with tensorboard installed, its EventAccumulator reads the scalars,
  histograms and text back too.

Exit 77 when neither tensorboard nor protoc-c and Python's protobuf are
available. Prints what it checked.
"""
import glob
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    data = open(path, "rb").read()
    out, i = [], 0
    while i < len(data):
        assert i + 12 <= len(data), "truncated record header at %d" % i
        (n,) = struct.unpack_from("<Q", data, i)
        (lcrc,) = struct.unpack_from("<I", data, i + 8)
        assert lcrc == masked(crc32c(data[i : i + 8])), "length CRC at %d" % i
        body = data[i + 12 : i + 12 + n]
        (dcrc,) = struct.unpack_from("<I", data, i + 12 + n)
        assert dcrc == masked(crc32c(body)), "data CRC at %d" % i
        out.append(body)
        i += 16 + n
    return out


def event_class():
    try:
        from tensorboard.compat.proto import event_pb2

        return event_pb2.Event, "tensorboard's event_pb2"
    except ImportError:
        pass
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        sys.exit(77)
    proto_dir = os.path.join(ROOT, "utils", "proto")
    with tempfile.TemporaryDirectory() as tmp:
        desc = os.path.join(tmp, "tb.desc")
        try:
            subprocess.run(["protoc-c", "--proto_path=" + proto_dir, "--descriptor_set_out=" + desc,
                            os.path.join(proto_dir, "tensorboard.proto")], check=True)
        except (OSError, subprocess.CalledProcessError):
            sys.exit(77)
        fds = descriptor_pb2.FileDescriptorSet()
        fds.ParseFromString(open(desc, "rb").read())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    d = pool.FindMessageTypeByName("tensorboard.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(d), "utils/proto/tensorboard.proto"
    return message_factory.MessageFactory(pool).GetPrototype(d), "utils/proto/tensorboard.proto"


# What test_tensorboard.c logs (keep in step with it).
def loss(step):
    return 1.0 / (step + 1)


def hist_values():
    i = np.arange(1000, dtype=np.int64)
    return ((((i * 37) % 101) - 50) * 0.013).astype(np.float32).astype(np.float64)


def int_values():
    return ((np.arange(50) % 7) - 3).astype(np.float64)


TEXT = "hello **nabla** \u2713"


def tf_bins():
    v, pos, neg = 1e-12, [], []
    while v < 1e20:
        pos.append(v)
        neg.append(-v)
        v *= 1.1
    return neg[::-1] + [0] + pos


def make_histogram(values):
    """torch.utils.tensorboard.summary.make_histogram (bins="tensorflow")."""
    counts, limits = np.histogram(values, bins=tf_bins())
    cum = np.cumsum(np.greater(counts, 0))
    start, end = np.searchsorted(cum, [0, cum[-1] - 1], side="right")
    start, end = int(start), int(end) + 1
    counts = counts[start - 1 : end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start : end + 1]
    return dict(min=values.min(), max=values.max(), num=len(values), sum=values.sum(),
                sum_squares=values.dot(values), bucket_limit=limits.tolist(), bucket=counts.tolist())


def check_histo(h, values, what):
    want = make_histogram(values)
    assert h.min == want["min"] and h.max == want["max"] and h.num == want["num"], what
    assert abs(h.sum - want["sum"]) <= 1e-9 * max(1.0, abs(want["sum"])), (what, h.sum, want["sum"])
    assert abs(h.sum_squares - want["sum_squares"]) <= 1e-9 * want["sum_squares"], what
    assert list(h.bucket_limit) == want["bucket_limit"], (what, "bucket_limit")
    assert list(h.bucket) == [float(c) for c in want["bucket"]], (what, "bucket")


def main():
    files = glob.glob(os.path.join(sys.argv[1], "events.out.tfevents.*"))
    assert len(files) == 1, files
    Event, source = event_class()
    evs = []
    for body in records(files[0]):
        e = Event()
        e.ParseFromString(body)
        evs.append(e)
    assert evs[0].file_version == "brain.Event:2"
    scalars, histos, texts = {}, {}, {}
    for e in evs[1:]:
        assert e.wall_time > 1.6e9
        for v in e.summary.value:
            kind = v.WhichOneof("value")
            if kind == "simple_value":
                scalars.setdefault(v.tag, []).append((e.step, v.simple_value))
            elif kind == "histo":
                histos[v.tag] = (e.step, v.histo)
            elif kind == "tensor":
                texts[v.tag] = (e.step, v)
    f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
    assert scalars["train/loss"] == [(s, f32(loss(s))) for s in range(25)], scalars["train/loss"]
    assert scalars["train/lr"] == [(s, f32(0.1 * s)) for s in range(25)]
    assert histos["weights"][0] == 3 and histos["ints"][0] == 4
    check_histo(histos["weights"][1], hist_values(), "weights")
    check_histo(histos["ints"][1], int_values(), "ints")
    step, v = texts["notes/text_summary"]
    assert step == 7 and v.metadata.plugin_data.plugin_name == "text"
    assert v.tensor.dtype == 7 and [d.size for d in v.tensor.tensor_shape.dim] == [1]
    assert v.tensor.string_val[0].decode("utf-8") == TEXT
    print("tensorboard_interop: %d records, CRCs, scalars, histograms, text checked (%s)" % (len(evs), source))
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        return
    acc = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    got = [(s.step, s.value) for s in acc.Scalars("train/loss")]
    assert got == [(s, f32(loss(s))) for s in range(25)], got
    h = acc.Histograms("weights")[0]
    assert h.step == 3 and h.histogram_value.num == 1000
    t = acc.Tensors("notes/text_summary")[0]
    assert t.step == 7 and t.tensor_proto.string_val[0].decode("utf-8") == TEXT
    print("tensorboard_interop: TensorBoard's EventAccumulator read the same scalars, histogram and text")


if __name__ == "__main__":
    main()
