#!/usr/bin/env bash
# run_all.sh - the README's test command: installs what is missing (Debian
# 12, as root), fetches MNIST, builds nabla with -Werror and runs every
# test suite. Ends with Check's summary and a "N passed, N failed" line.
#   tests/run_all.sh [--sanitize]   (--sanitize: AddressSanitizer + UBSan build)
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps.sh
bash data/fetch_mnist.sh >/dev/null
bash data/fetch_gpt2_tokenizer.sh >/dev/null || echo "run_all: GPT-2's tokenizer files not fetched; tests/test_bpe.c skips that part"
bash tests/interop/fetch_onnxruntime_web.sh >/dev/null || echo "run_all: onnxruntime-web not fetched; tests/test_onnx.c only runs onnx.checker"
if [[ "${1:-}" == "--sanitize" ]]; then
  dir=build-asan
  # the CUDA backend cannot run without a GPU, and its runtime is not built for ASan:
  # the sanitizer build is the CPU build (CUDA is built and its tests skip in the release build).
  # oneDNN (loaded for bf16 GEMMs where libdnnl2 is installed, as python3-torch pulls it in)
  # brings libgomp's threads, under which LeakSanitizer dies at exit: the release build runs it.
  opts=(-Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled -Donednn=disabled)
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  export CFLAGS="-fno-sanitize-recover=undefined"
else
  dir=build
  opts=(-Dbuildtype=release)
fi
[[ -f "$dir/build.ninja" ]] || meson setup "$dir" "${opts[@]}" --werror >/dev/null
ninja -C "$dir" >/dev/null
# A user's view: install, then build the README's loop with pkg-config alone.
if [[ "$dir" == build ]]; then
  rm -rf "$dir/stage"
  DESTDIR="$PWD/$dir/stage" meson install -C "$dir" --quiet >/dev/null
  prefix=$(meson introspect "$dir" --buildoptions | python3 -c \
    'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
  libdir=$(meson introspect "$dir" --buildoptions | python3 -c \
    'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "libdir"))')
  stage="$PWD/$dir/stage$prefix"
  PKG_CONFIG_PATH="$stage/$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$PWD/$dir/stage" \
    cc -std=c11 -Wall -Werror examples/readme_loop.c -o "$dir/readme_loop" \
    $(PKG_CONFIG_PATH="$stage/$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$PWD/$dir/stage" pkg-config --cflags --libs nabla)
  echo "pkg-config: the README's training loop builds against the installed libnabla"
  # the API reference: Doxygen fails on any undocumented public symbol
  ninja -C "$dir" docs > "$dir/docs.log" 2>&1 || { cat "$dir/docs.log"; exit 1; }
  echo "docs: $(tail -1 "$dir/docs.log")"
fi
# nn/NN.md is what nn/nn_coverage.py writes, and every nabla name in it is declared
python3 nn/nn_coverage.py --check
# Check's per-test timeouts (4 s unless a suite sets more) are there to stop
# hangs; a busy machine (the ASan suite beside a build) must not fail a test.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4}
"$dir/tests/nabla-tests"
