#!/usr/bin/env bash
# compare.sh - runs a nabla benchmark and PyTorch's reference for the same
# workload in the same session, same thread count, and prints the ratio.
#   tests/bench/compare.sh [workload=mlp] [threads=2] [build dir=build]
# PyTorch: Debian's python3-torch (apt-get install python3-torch); the
# reference script is ../shared/bench/torch_ref.py (or $TORCH_REF).
set -euo pipefail
w=${1:-mlp}; t=${2:-2}; build=${3:-build}
here=$(cd "$(dirname "$0")/../.." && pwd)
ref=${TORCH_REF:-$here/../shared/bench/torch_ref.py}
ours=$("$build/tests/bench/bench_$w" --threads "$t" --steps 30 --warmup 5)
theirs=$(OMP_NUM_THREADS=$t /usr/bin/python3 "$ref" "$w" --threads "$t" --steps 30 --warmup 5)
echo "$ours"
echo "$theirs"
a=$(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' <<<"$ours")
b=$(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' <<<"$theirs")
awk -v a="$a" -v b="$b" -v w="$w" -v t="$t" \
  'BEGIN { printf "workload=%s threads=%d nabla_ms=%.3f torch_ms=%.3f speedup=%.2fx\n", w, t, a, b, b / a }'
