#!/usr/bin/env bash
# decoder_gpu_bench.sh - the decoder benchmarks that need the GPU machine, in
# one command from the repository root:
#   bash tests/bench/decoder_gpu_bench.sh
# 1. a GPT-2-small training step (seq 128, batch 4) on the CPU with $THREADS
#    threads (16 by default): nabla (bench_gpt) against PyTorch
#    (tests/bench/gpt_ref.py) in the same run (tests/bench/compare.sh);
# 2. Llama-3.2-1B-shaped inference (random weights) on the GPU: prefill at
#    128, 4096 and 100000 tokens of context and decode at batch 1, nabla
#    (bench_llama_infer --device cuda, float32: it reports the missing CUDA
#    backend until that lands) beside PyTorch's SDPA in bfloat16 and float32
#    (tests/bench/llama_infer_ref.py), with peak GPU memory.
# $PYTHON picks the interpreter with PyTorch (default python3). BENCH_DIR=dir
# takes bench_gpt and bench_llama_infer prebuilt from dir instead of building
# build-bench (tests/cuda/run.sh's decoder step: its staged .dev/bin).
# CONTEXTS=128,4096,100000 the prefill lengths; NABLA_CONTEXTS nabla's own
# (default: the same); SKIP_GPT=1 runs the Llama part only.
set -uo pipefail
bin=${BENCH_DIR:+$(cd "$BENCH_DIR" && pwd)}
cd "$(dirname "$0")/../.."
T=${THREADS:-16}
PY=${PYTHON:-python3}
build=build-bench
if [[ -n "$bin" ]]; then # compare.sh wants a build tree: one of links to $bin
  build=$(mktemp -d)
  trap 'rm -rf "$build"' EXIT
  mkdir -p "$build/tests/bench"
  ln -s "$bin/bench_gpt" "$bin/bench_llama_infer" "$build/tests/bench/"
else
  [[ -f build-bench/build.ninja ]] || meson setup build-bench -Dbuildtype=release >/dev/null
  ninja -C build-bench tests/bench/bench_gpt tests/bench/bench_llama_infer >/dev/null || exit 1
fi
CTX=${CONTEXTS:-128,4096,100000}
if [[ -z "${SKIP_GPT:-}" ]]; then
  echo "== GPT-2 small training step (seq 128, batch 4), CPU, $T threads"
  PYTHON=$PY bash tests/bench/compare.sh gpt2 "$T" "$build"
fi
echo "== Llama-3.2-1B inference, GPU: nabla (float32)"
"$build/tests/bench/bench_llama_infer" --device cuda --contexts "${NABLA_CONTEXTS:-$CTX}" --decode 64 ||
  echo "nabla: no result (CUDA backend missing?)"
for dt in bfloat16 float32; do
  echo "== Llama-3.2-1B inference, GPU: PyTorch SDPA ($dt)"
  $PY tests/bench/llama_infer_ref.py --device cuda --dtype $dt --contexts "$CTX" --decode 64
done
