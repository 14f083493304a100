#!/usr/bin/env bash
# compare.sh - runs a nabla benchmark and PyTorch's reference for the same
# workload in the same session, same thread count, and prints the ratio.
#   tests/bench/compare.sh [workload=mlp|cnn|bert|gpt2] [threads=2] [build dir=build]
# PyTorch: Debian's python3-torch (apt-get install python3-torch); the
# reference script is ../shared/bench/torch_ref.py (or $TORCH_REF).
set -euo pipefail
w=${1:-mlp}; t=${2:-2}; build=${3:-build}
here=$(cd "$(dirname "$0")/../.." && pwd)
ref=${TORCH_REF:-$here/../shared/bench/torch_ref.py}
steps=30
if [[ "$w" == gpt2 ]]; then # GPT-2 small: its own reference script beside bench_gpt.c
  ours=$("$build/tests/bench/bench_gpt" --threads "$t" --steps 10 --warmup 2 | tail -1)
  theirs=$(OMP_NUM_THREADS=$t ${PYTHON:-/usr/bin/python3} "$here/tests/bench/gpt_ref.py" --threads "$t" --steps 10 --warmup 2)
else
  ours=$("$build/tests/bench/bench_$w" --threads "$t" --steps $steps --warmup 5)
  theirs=$(OMP_NUM_THREADS=$t ${PYTHON:-/usr/bin/python3} "$ref" "$w" --threads "$t" --steps $steps --warmup 5)
fi
echo "$ours"
echo "$theirs"
a=$(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' <<<"$ours")
b=$(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' <<<"$theirs")
awk -v a="$a" -v b="$b" -v w="$w" -v t="$t" \
  'BEGIN { printf "workload=%s threads=%d nabla_ms=%.3f torch_ms=%.3f speedup=%.2fx\n", w, t, a, b, b / a }'
