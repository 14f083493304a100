#!/usr/bin/env bash
# run.sh - builds the safetensors fuzz target with clang's libFuzzer and
# AddressSanitizer + UBSan, then fuzzes for a bounded time.
#   tests/fuzz/run.sh [SECONDS]   (default 60; CI runs it from .ci/run; NB_JOBS=N limits ninja)
# Builds libnabla.a with clang in build-fuzz/ (instrumented for coverage),
# seeds the corpus with valid files written here, and fails if libFuzzer
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
clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Iinclude -Icore -Iautograd -Inn -Ioptim -Idata -Idistributed -Ibackend -Ibackend/cpu \
  tests/fuzz/fuzz_safetensors.c "$dir/libnabla.a" -lz -ljansson -lm -lpthread -ldl -o "$dir/fuzz_safetensors"
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
log="$dir/fuzz.log"
if ! "$dir/fuzz_safetensors" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -dict=tests/fuzz/safetensors.dict -artifact_prefix="$dir/" -print_final_stats=1 "$corpus" >"$log" 2>&1; then
  tail -n 80 "$log"
  echo "fuzz_safetensors: FAILED (reproduce: $dir/fuzz_safetensors $dir/crash-...)"
  exit 1
fi
grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$log" || true
echo "fuzz_safetensors: ran ${secs}s clean"
