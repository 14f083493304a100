#!/usr/bin/env bash
# run.sh - builds the fuzz targets with clang's libFuzzer and AddressSanitizer
# + UBSan, then fuzzes each for a bounded time: fuzz_safetensors (the
# safetensors loader), fuzz_data_files (.npy, .npz, PNG/JPEG, token
# shards, CSV, IDX) and fuzz_pt (PyTorch checkpoints: the zip reader and
# the restricted unpickler).
#   tests/fuzz/run.sh [SECONDS]   (per target; default 60; CI runs it from .ci/run; NB_JOBS=N limits ninja)
# Builds libnabla.a with clang in build-fuzz/ (instrumented for coverage),
# seeds the corpora with valid files written here, and fails if libFuzzer
# finds a crash, leak, timeout or sanitizer report (the input is saved in
# build-fuzz/ as crash-*, leak-* or timeout-*).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
dir=build-fuzz
if [[ ! -f "$dir/build.ninja" ]]; then
  # -Dcuda=disabled: the fuzz target links libnabla.a alone, without the CUDA runtime
  CC=clang meson setup "$dir" -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled \
    -Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined" >/dev/null
fi
ninja -C "$dir" ${NB_JOBS:+-j"$NB_JOBS"} libnabla.a >/dev/null
for t in fuzz_safetensors fuzz_data_files fuzz_pt; do
  clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -Iinclude -Icore -I"$dir/core" -Iautograd -Inn -Ioptim -Idata -Idistributed -Iutils -Ibackend -Ibackend/cpu \
    "tests/fuzz/$t.c" "$dir/libnabla.a" -lz -ljansson -lpng16 -ljpeg -lm -lpthread -ldl -o "$dir/$t"
done
# Seeds: valid files (with and without CRCs and metadata) to mutate from.
corpus="$dir/fuzz_corpus"
mkdir -p "$corpus"
python3 - "$corpus" <<'PY'
import json, struct, sys, zlib
def f(name, tensors, meta=None, crc=True):
    h, data, at = {}, b"", 0
    md = dict(meta or {})
    for n, (dt, shape, b) in tensors.items():
        h[n] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + len(b)]}
        data += b; at += len(b)
        if crc: md["crc32." + n] = "%08x" % (zlib.crc32(b) & 0xffffffff)
    if md: h = {"__metadata__": md, **h}
    j = json.dumps(h, separators=(",", ":")).encode(); j += b" " * (-len(j) % 8)
    open(f"{sys.argv[1]}/{name}", "wb").write(struct.pack("<Q", len(j)) + j + data)
mlp = {"0.weight": ("F32", [2, 3], bytes(range(24))), "0.bias": ("F32", [2], bytes(8)),
       "2.weight": ("F32", [1, 2], bytes(8)), "2.bias": ("F32", [1], bytes(4))}
f("mlp", mlp, {"format": "pt"})
f("mlp_nocrc", mlp, crc=False)
f("dtypes", {"a": ("F64", [1], bytes(8)), "b": ("I64", [], bytes(8)), "c": ("BOOL", [3], b"\x00\x01\x02"),
             "d": ("U8", [0, 5], b""), "e": ("I32", [1, 1, 1, 1, 1, 1, 1, 1], bytes(4))})
f("empty", {})
PY
# Seeds of the data readers: the first byte picks the reader (fuzz_data_files.c).
dcorpus="$dir/fuzz_corpus_data"
mkdir -p "$dcorpus"
python3 - "$dcorpus" <<'PY'
import io, struct, sys, zipfile, zlib
out = sys.argv[1]
def put(name, kind, b): open(f"{out}/{name}", "wb").write(bytes([kind]) + b)
def npy(descr, shape, data, fortran=False):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, repr(tuple(shape)))
    h += " " * (-(10 + len(h) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data
put("npy_f4", 0, npy("<f4", [2, 3], struct.pack("<6f", *range(6))))
put("npy_i8_fortran", 0, npy("<i8", [2, 2], struct.pack("<4q", 1, 2, 3, 4), True))
put("npy_be_u2", 0, npy(">u2", [3], struct.pack(">3H", 1, 2, 65535)))
z = io.BytesIO()
with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as f:
    f.writestr("a.npy", npy("<f8", [2], struct.pack("<2d", 1.5, -2)))
    f.writestr("b.npy", npy("|u1", [4], bytes(4)))
put("npz", 1, z.getvalue())
def png(w, h, ctype, depth, rows):
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    raw = b"".join(b"\x00" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
put("png_gray", 2, png(3, 2, 0, 8, [bytes([1, 2, 3]), bytes([4, 5, 6])]))
put("png_rgba", 2, png(2, 2, 6, 8, [bytes(range(8)), bytes(range(8, 16))]))
try:
    from PIL import Image
    b = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 90)).save(b, "JPEG", quality=80)
    put("jpeg", 2, b.getvalue())
except ImportError:
    pass
hdr = lambda magic, version, n: struct.pack("<256i", magic, version, n, *([0] * 253))
put("shard16", 3, hdr(20240520, 1, 5) + struct.pack("<5H", 50256, 1, 2, 3, 4))
put("shard32", 3, hdr(20240801, 7, 3) + struct.pack("<3I", 128000, 5, 6))
put("csv", 4, b"x,y\n1.5,2\n# c\n3, 4e2\n")
put("csv_ws", 4, b" 1 2 3\n4 5 6\n")
put("idx", 5, struct.pack(">BBBBII", 0, 0, 8, 2, 2, 3) + bytes(range(6)))
PY
# Seeds of the checkpoint reader: whole files (first byte even) and
# pickles that fuzz_pt.c wraps in an archive of four 64-byte storages (odd).
pcorpus="$dir/fuzz_corpus_pt"
mkdir -p "$pcorpus"
python3 - "$pcorpus" <<'PY'
import io, struct, sys, zipfile
out = sys.argv[1]
def put(name, kind, b): open(f"{out}/{name}", "wb").write(bytes([kind]) + b)
s = lambda x: b"X" + struct.pack("<I", len(x)) + x.encode()
i = lambda v: b"J" + struct.pack("<i", v)
tup = lambda xs: b"(" + b"".join(i(x) for x in xs) + b"t"
def tensor(key, typ, numel, off, size, stride):
    return (b"ctorch._utils\n_rebuild_tensor_v2\n((" + s("storage") + b"ctorch\n" + typ + b"\n" + s(key) +
            s("cpu") + i(numel) + b"tQ" + i(off) + tup(size) + tup(stride) + b"\x89ccollections\nOrderedDict\n)RtR")
sd = (b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01(" + s("w") + tensor("0", b"FloatStorage", 16, 0, [4, 4], [4, 1]) +
      s("v") + tensor("0", b"FloatStorage", 16, 2, [3], [5]) + s("h") + tensor("1", b"HalfStorage", 32, 0, [2, 16], [16, 1]) +
      s("l") + tensor("2", b"LongStorage", 8, 1, [], []) + s("b") + tensor("3", b"BoolStorage", 64, 0, [8, 8], [1, 8]) + b"u.")
put("state_dict", 1, sd)
put("nested", 1, b"\x80\x02}(" + s("epoch") + i(3) + s("betas") + b"G?\xec\xcc\xcc\xcc\xcc\xcc\xcdK\x02\x86" +
    s("steps") + b"](K\x01K\x02e" + s("x") + b"\x8a\x08" + bytes(8) + s("n") + b"N\x88\x89\x87u.")
put("memo", 1, b"\x80\x02]q\x00(h\x00" + s("a") + b"q\x01h\x01e.")
z = io.BytesIO()
with zipfile.ZipFile(z, "w") as f:
    f.writestr("m/data.pkl", sd); f.writestr("m/byteorder", "little")
    for k in range(4): f.writestr(f"m/data/{k}", bytes(64))
    f.writestr("m/version", "3\n")
put("file", 0, z.getvalue())
PY
run() { # target corpus [extra libFuzzer flags]
  local t=$1 c=$2; shift 2
  local log="$dir/$t.log"
  if ! "$dir/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
      -artifact_prefix="$dir/" -print_final_stats=1 "$@" "$c" >"$log" 2>&1; then
    tail -n 80 "$log"
    echo "$t: FAILED (reproduce: $dir/$t $dir/crash-...)"
    exit 1
  fi
  grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$log" || true
  echo "$t: ran ${secs}s clean"
}
run fuzz_safetensors "$corpus" -dict=tests/fuzz/safetensors.dict
run fuzz_data_files "$dcorpus"
run fuzz_pt "$pcorpus"
