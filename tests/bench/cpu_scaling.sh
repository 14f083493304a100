#!/usr/bin/env bash
# cpu_scaling.sh - the CPU scaling table of issue 17 in one command: each
# workload (mlp, cnn, bert) run by nabla (tests/bench/bench_*) and by PyTorch
# (../shared/bench/torch_ref.py) at 2, 4 and all the machine's cores, the two
# runs of a cell back to back in the same session, then one markdown table of
# median ms per step (nabla / torch, and torch's median over nabla's).
#
#   tests/bench/cpu_scaling.sh [build dir=build]
# Environment (all optional):
#   BENCH_DIR=dir        where bench_mlp, bench_cnn and bench_bert are
#                        (default: <build dir>/tests/bench), e.g. prebuilt
#                        binaries staged without their build tree (.dev/bin of
#                        tests/cuda/run.sh; libnabla then through LD_LIBRARY_PATH)
#   THREADS="2 4 16"     thread counts (default: 2, 4 and nproc, those <= nproc)
#   WORKLOADS="mlp cnn"  workloads (default: mlp cnn bert)
#   STEPS=30 WARMUP=5    timed and warm-up steps of mlp and cnn; bert runs
#   BERT_STEPS=5 BERT_WARMUP=1 (a bert step takes seconds on 2 cores)
#   PYTHON=/usr/bin/python3 (Debian's has torch 1.13; point it at a venv with
#                        torch 2.x to compare against that), TORCH_REF=path
#   TORCH_POLICIES="default PASSIVE"  OpenMP wait policies PyTorch runs under,
#                        one column each (on a shared 2-vCPU VM, torch 1.13's
#                        spinning OpenMP threads starve its OpenBLAS threads:
#                        mlp 150-230 ms/step by default, 9.6 ms with
#                        OMP_WAIT_POLICY=PASSIVE)
#   AGG=median           how the REPEAT runs' medians combine (min: the
#                        quietest run of each, on a noisy shared machine)
#   REPEAT=1             run every cell REPEAT times (nabla and torch
#                        interleaved) and report the median of the medians
#   NB_CPU_ISA           passed to nabla (baseline|avx2|avx512): the kernels' ISA
#   NB_CPU_GEMM=onednn   nabla's matmul through oneDNN (libdnnl.so.2) instead of OpenBLAS
#   BEFORE=dir           another build (e.g. of main) run in the same cells: the
#                        table then shows before / after / torch
# The raw result lines go to stderr as they come.
set -euo pipefail
build=${1:-build}
bench=${BENCH_DIR:-$build/tests/bench}
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
[[ -x "$bench/bench_mlp" ]] || { echo "cpu_scaling: no $bench/bench_mlp (ninja -C $build, or set BENCH_DIR)" >&2; exit 2; }
[[ -f "$ref" ]] || { echo "cpu_scaling: no shared/bench/torch_ref.py above $here (set TORCH_REF)" >&2; exit 2; }

median_of() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
min_of() { sort -g | head -1; }
agg() { if [[ ${AGG:-median} == min ]]; then min_of; else median_of; fi; }
field() { sed -n "s/.*$1=\\([0-9.]*\\).*/\\1/p"; }
policies=(${TORCH_POLICIES:-default PASSIVE})

declare -A cell
torch_ver="?"
isa="?"
for w in $WORKLOADS; do
  steps=${STEPS:-30} warm=${WARMUP:-5}
  if [[ $w == bert ]]; then steps=${BERT_STEPS:-5} warm=${BERT_WARMUP:-1}; fi
  for t in $THREADS; do
    declare -A runs=() # runs[before|after|torch<i>] = newline-separated medians
    for ((r = 0; r < REPEAT; r++)); do
      if [[ -n "${BEFORE:-}" ]]; then
        q=$("$BEFORE/tests/bench/bench_$w" --threads "$t" --steps "$steps" --warmup "$warm" | tail -1)
        echo "before: $q" >&2
        runs[before]+="$(field median_ms <<<"$q")"$'\n'
      fi
      o=$("$bench/bench_$w" --threads "$t" --steps "$steps" --warmup "$warm" | tail -1)
      echo "$o" >&2
      runs[after]+="$(field median_ms <<<"$o")"$'\n'
      isa=$(sed -n 's/.*isa=\([^ ;")]*\).*/\1/p' <<<"$o")
      for i in "${!policies[@]}"; do
        env=(OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t)
        [[ ${policies[$i]} == default ]] || env+=(OMP_WAIT_POLICY=${policies[$i]})
        p=$(env "${env[@]}" "$py" "$ref" "$w" --threads "$t" --steps "$steps" --warmup "$warm" | tail -1)
        echo "$p (OMP_WAIT_POLICY=${policies[$i]})" >&2
        runs[torch$i]+="$(field median_ms <<<"$p")"$'\n'
        torch_ver=$(sed -n 's/.*torch=\([^ ]*\).*/\1/p' <<<"$p")
      done
    done
    a=$(agg <<<"${runs[after]%$'\n'}")
    c=""
    if [[ -n "${BEFORE:-}" ]]; then
      b=$(agg <<<"${runs[before]%$'\n'}")
      c=$(awk -v b="$b" 'BEGIN { printf "%.3g / ", b }')
    fi
    c+=$(awk -v a="$a" 'BEGIN { printf "%.3g", a }')
    for i in "${!policies[@]}"; do
      tt=$(agg <<<"${runs[torch$i]%$'\n'}")
      c+=$(awk -v a="$a" -v t="$tt" -v b="${b:-}" 'BEGIN { printf " / %.3g (", t; if (b != "") printf "%.2fx, ", t / b; printf "%.2fx)", t / a }')
    done
    cell[$w,$t]=$c
    unset runs
  done
done

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo
cols="nabla"
[[ -z "${BEFORE:-}" ]] || cols="nabla before ($BEFORE) / nabla"
for pol in "${policies[@]}"; do cols+=" / torch (OMP_WAIT_POLICY=$pol: torch / nabla${BEFORE:+ before, torch / nabla})"; done
echo "CPU: $model, $ncpu cores; nabla kernels: ${isa:-?}; torch $torch_ver; ${AGG:-median} over $REPEAT run(s) of each median ms per step: $cols"
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
