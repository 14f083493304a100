#!/usr/bin/env bash
# cpu_scaling.sh - the CPU scaling table of issue 17 in one command: each
# workload (mlp, cnn, bert) run by nabla (tests/bench/bench_*) and by PyTorch
# (../shared/bench/torch_ref.py) at 2, 4 and all the machine's cores, the two
# runs of a cell back to back in the same session, then one markdown table of
# median ms per step (nabla / torch, and torch's median over nabla's).
#
#   tests/bench/cpu_scaling.sh [build dir=build]
# Environment (all optional):
#   THREADS="2 4 16"     thread counts (default: 2, 4 and nproc, those <= nproc)
#   WORKLOADS="mlp cnn"  workloads (default: mlp cnn bert)
#   STEPS=30 WARMUP=5    timed and warm-up steps of mlp and cnn; bert runs
#   BERT_STEPS=5 BERT_WARMUP=1 (a bert step takes seconds on 2 cores)
#   PYTHON=/usr/bin/python3 (Debian's has torch 1.13; point it at a venv with
#                        torch 2.x to compare against that), TORCH_REF=path
#   REPEAT=1             run every cell REPEAT times (nabla and torch
#                        interleaved) and report the median of the medians
#   NB_CPU_ISA           passed to nabla (baseline|avx2|avx512): the kernels' ISA
# The raw result lines go to stderr as they come.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/../.." && pwd)
ref=${TORCH_REF:-}
if [[ -z "$ref" ]]; then # shared/ beside the checkout (a git worktree may sit one level deeper)
  for d in "$here/.." "$here/../.." "$here/../../.."; do
    if [[ -f "$d/shared/bench/torch_ref.py" ]]; then ref="$d/shared/bench/torch_ref.py"; break; fi
  done
fi
py=${PYTHON:-/usr/bin/python3}
ncpu=$(nproc)
if [[ -z "${THREADS:-}" ]]; then
  THREADS=""
  for t in 2 4 "$ncpu"; do
    if (( t <= ncpu )) && [[ " $THREADS " != *" $t "* ]]; then THREADS+="$t "; fi
  done
  [[ -n "$THREADS" ]] || THREADS=1
fi
WORKLOADS=${WORKLOADS:-mlp cnn bert}
REPEAT=${REPEAT:-1}
[[ -x "$build/tests/bench/bench_mlp" ]] || { echo "cpu_scaling: build $build first (ninja -C $build)" >&2; exit 2; }
[[ -f "$ref" ]] || { echo "cpu_scaling: no shared/bench/torch_ref.py above $here (set TORCH_REF)" >&2; exit 2; }

median_of() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { sed -n "s/.*$1=\\([0-9.]*\\).*/\\1/p"; }

declare -A cell
torch_ver="?"
isa="?"
for w in $WORKLOADS; do
  steps=${STEPS:-30} warm=${WARMUP:-5}
  if [[ $w == bert ]]; then steps=${BERT_STEPS:-5} warm=${BERT_WARMUP:-1}; fi
  for t in $THREADS; do
    ours="" theirs=""
    for ((r = 0; r < REPEAT; r++)); do
      o=$("$build/tests/bench/bench_$w" --threads "$t" --steps "$steps" --warmup "$warm" | tail -1)
      echo "$o" >&2
      p=$(OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t "$py" "$ref" "$w" --threads "$t" --steps "$steps" --warmup "$warm" | tail -1)
      echo "$p" >&2
      ours+="$(field median_ms <<<"$o")"$'\n'
      theirs+="$(field median_ms <<<"$p")"$'\n'
      torch_ver=$(sed -n 's/.*torch=\([^ ]*\).*/\1/p' <<<"$p")
      isa=$(sed -n 's/.*isa=\([^ ;")]*\).*/\1/p' <<<"$o")
    done
    a=$(median_of <<<"${ours%$'\n'}") b=$(median_of <<<"${theirs%$'\n'}")
    cell[$w,$t]=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3g / %.3g (%.2fx)", a, b, b / a }')
  done
done

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo
echo "CPU: $model, $ncpu cores; nabla kernels: ${isa:-?}; torch $torch_ver; median ms per step, nabla / torch (torch / nabla)"
echo
hdr="| workload |" sep="|---|"
for t in $THREADS; do hdr+=" $t threads |"; sep+="---|"; done
echo "$hdr"
echo "$sep"
for w in $WORKLOADS; do
  row="| $w |"
  for t in $THREADS; do row+=" ${cell[$w,$t]} |"; done
  echo "$row"
done
