#!/usr/bin/env bash
# tests/cuda/run.sh - the CUDA backend's tests, examples and benchmarks on a
# GPU machine, in two halves:
#
#   tests/cuda/run.sh stage            on a machine with the CUDA toolkit and
#                                      Check (no GPU needed): builds build-cuda
#                                      (meson -Dcuda=enabled, release) and copies
#                                      what the GPU machine needs into .dev/:
#                                      the test runner, the library, the examples
#                                      and benchmarks, the libraries the GPU
#                                      machine lacks, MNIST (.gz), the WordNet
#                                      corpus and its cached vocabulary, and
#                                      torch_ref.py (gpt_ref.py and
#                                      llama_infer_ref.py travel in the tree)
#   tests/cuda/run.sh STEP...          on the GPU machine, from the repository
#                                      root holding .dev/ (all steps: `all`)
#
# Steps (each writes $OUT/<step>.log when $OUT is set, else .dev/out/):
#   info        nvidia-smi and the device nabla sees
#   harness     the op test harness on every device and dtype (suite
#               op_harness; its summary lines) and the CUDA suites
#   suite       the whole test suite (CPU and CUDA cases)
#   memcheck    compute-sanitizer memcheck over the harness and CUDA suites
#   racecheck   compute-sanitizer racecheck over the slot checkers and
#               the elementwise suite
#   parity      the examples' networks stepped on the CPU and the GPU from
#               the same weights, inputs and dropout masks (device_parity)
#   slots       the slot checkers (cuda_cnn_slots, cuda_reduce_slots): each
#               slot against the CPU's at the hot shapes, with timings
#   examples    mnist_mlp, mnist_cnn and bert_mlm with --device cuda
#   amp         the same under bfloat16 autocast (--amp), mnist_cnn also
#               with --cuda-graph; then mnist_mlp --compile and bert_mlm
#               --amp 1 --compile 1
#   profile     the kernel-slot profile (nb_profiler_report) of the
#               benchmarks' steps: where the device time goes
#   bench       the benchmarks with --device cuda (fp32, --tf32, and bf16
#               with --graph and with --compile) beside
#               torch_ref.py's (gpt_ref.py's for gpt2, gpt2-1024) eager,
#               graph and compiled + graph figures from the same run
#               (BENCH_WORKLOADS="bert bert-base" runs those alone: the
#               whole list, with six torch.compile runs, is past one device
#               call's 10 minutes, so split it across calls)
#   cpu         the CPU scaling table of issue 17 (tests/bench/cpu_scaling.sh
#               on the staged bench_mlp, bench_cnn and bench_bert against
#               torch_ref.py under python3's PyTorch, 2, 4 and 16 threads),
#               then their kernel-slot profiles at 16 threads (cpu_profile)
#               and the workloads' GEMM shapes through the BLAS beside its
#               square-GEMM peak at 2 and 16 threads (cpu_gemm)
#   decoder     the decoder figures of issue 16 (tests/bench/decoder_gpu_bench.sh
#               on the staged bench_gpt and bench_llama_infer): GPT-2 small
#               training on the CPU at 16 threads against gpt_ref.py, Llama
#               3.2 1B inference on the GPU against llama_infer_ref.py
#   ddp         data-parallel (issue 18): dist_check over NCCL on one GPU and
#               on all of them, and over MPI on 2 CPU processes; then
#               bench_bert --distributed under mpirun against PyTorch DDP
#               under torchrun (tests/bench/ddp_ref.py) at 1, 2, 4, 8 GPUs
# `all` is info harness suite memcheck racecheck examples bench; the others
# (amp, profile, parity, slots, ddp, and the long cpu and decoder) by name.
# Prints a summary table last. The device tool (/work/.library/device)
# runs it as:  tests/cuda/run.sh harness bench   with .dev carried.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
dev=$root/.dev

stage() {
    set -e
    cd "$root"
    [ -d build-cuda ] || meson setup build-cuda -Dbuildtype=release --werror -Dcuda=enabled
    ninja -C build-cuda
    rm -rf "$dev"
    mkdir -p "$dev/bin" "$dev/examples" "$dev/lib" "$dev/data/mnist" "$dev/data/wordnet"
    # the examples beside bin/ as in the build tree (test_examples runs ../examples/*)
    cp build-cuda/examples/mnist_mlp build-cuda/examples/mnist_cnn build-cuda/examples/bert_mlm \
        build-cuda/examples/char_lstm "$dev/examples/"
    cp build-cuda/tests/nabla-tests build-cuda/tests/device_parity build-cuda/tests/bench/bench_mlp build-cuda/tests/bench/bench_cnn \
        build-cuda/tests/bench/bench_bert build-cuda/tests/bench/bench_lstm build-cuda/tests/bench/bench_loader "$dev/bin/"
    cp build-cuda/tests/bench/cuda_cnn_slots build-cuda/tests/bench/cuda_reduce_slots build-cuda/tests/dist_check \
        build-cuda/tests/bench/gemm_shapes "$dev/bin/"
    # the decoder benchmarks (linked with the static library, each a fat binary; no data files)
    cp build-cuda/tests/bench/bench_gpt build-cuda/tests/bench/bench_llama_infer build-cuda/tests/bench/bench_pointwise \
        "$dev/bin/"
    # the library and its CUDA backend, loaded beside it on first use
    cp -L build-cuda/libnabla.so.0 build-cuda/libnabla_cuda.so.0 "$dev/lib/"
    # symbols stay here, and the large files (CUDA fat binaries) travel
    # compressed: the device tool carries at most 64 MiB
    strip --strip-unneeded "$dev"/bin/* "$dev"/examples/* "$dev/lib/libnabla.so.0" "$dev/lib/libnabla_cuda.so.0"
    gzip -1 "$dev/bin/nabla-tests" "$dev/bin/bench_gpt" "$dev/bin/bench_llama_infer" "$dev/bin/bench_pointwise" \
        "$dev/lib/libnabla_cuda.so.0"
    # Check is linked statically; its subunit, libpng, libjpeg and protobuf-c may not be on the GPU machine
    for l in libsubunit.so.0 libpng16.so.16 libjpeg.so.62 libprotobuf-c.so.1; do cp -L "$(ldconfig -p | awk -v l=$l '$1 == l {print $NF; exit}')" "$dev/lib/"; done
    local mn=${NB_MNIST_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nabla/mnist}
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        if [ -f "$mn/$f.gz" ]; then cp "$mn/$f.gz" "$dev/data/mnist/"; else gzip -c "$mn/$f" >"$dev/data/mnist/$f.gz"; fi
    done
    local wn=${XDG_CACHE_HOME:-$HOME/.cache}/nabla/wordnet
    cp "$wn/train.txt" "$wn/eval.txt" "$dev/data/wordnet/"
    cp "$wn"/vocab-8192.txt "$dev/data/wordnet/" 2>/dev/null || echo "run.sh: no cached vocab-8192.txt (bert_mlm will train it there)"
    local ref=${NB_TORCH_REF:-$root/../shared/bench/torch_ref.py}
    cp "$ref" tests/bench/lstm_ref.py tests/bench/loader_ref.py "$dev/"
    du -sh "$dev"
}

out=${OUT:-$dev/out}
summary=()

log() { echo "$@" | tee -a "$out/summary.txt"; }

# runs a step's command, keeping its output in $out/<name>.log
step() {
    local name=$1
    shift
    local t0=$SECONDS
    "$@" >"$out/$name.log" 2>&1
    local rc=$?
    summary+=("$(printf '%-12s rc=%-3d %4ds' "$name" "$rc" $((SECONDS - t0)))")
    return $rc
}

# the test binary on a suite list (Check's CK_RUN_SUITE takes one; loop)
suites() {
    local rc=0
    for s in "$@"; do
        CK_RUN_SUITE=$s "$dev/bin/nabla-tests" || rc=1
    done
    return $rc
}

cuda_suites="op_harness cuda_elementwise graph cuda_runtime autocast flat_params ops_attention ops_attention_cuda ops_matmul"

# racecheck (shared-memory hazards) over the slot checkers, which run every
# kernel path at the hot shapes once, and the elementwise suite: the whole
# harness under racecheck outlasts a device call
racecheck_all() {
    local rc=0
    for b in cuda_cnn_slots cuda_reduce_slots; do
        compute-sanitizer --tool racecheck --error-exitcode 9 "$dev/bin/$b" --reps 1 || rc=1
    done
    CK_FORK=no CK_RUN_SUITE=cuda_elementwise compute-sanitizer --tool racecheck --error-exitcode 9 \
        "$dev/bin/nabla-tests" || rc=1
    return $rc
}

# compute-sanitizer --tool $1 over the CUDA suites, one process each
# (CK_FORK=no: Check's forks would hide the tests from the tool)
sanitize() {
    local tool=$1 rc=0
    shift
    for s in $cuda_suites; do
        NB_OP_HARNESS_DEVICE=cuda:0 CK_FORK=no CK_RUN_SUITE=$s compute-sanitizer --tool "$tool" "$@" --error-exitcode 9 "$dev/bin/nabla-tests" || rc=1
    done
    return $rc
}

# the CPU scaling table (issue 17): nabla's staged benchmarks against
# torch_ref.py under the python3 on PATH, the cells back to back
cpu_scaling() {
    THREADS="2 4 16" TORCH_POLICIES=default TORCH_REF=$dev/torch_ref.py PYTHON=$(command -v python3) \
        BENCH_DIR=$dev/bin bash "$root/tests/bench/cpu_scaling.sh"
}

# where the CPU's time goes at 16 threads (nb_profiler_report, on stderr)
cpu_profile() {
    local rc=0
    for w in mlp cnn; do
        "$dev/bin/bench_$w" --threads 16 --steps 20 --warmup 3 --profile || rc=1
    done
    "$dev/bin/bench_bert" --threads 16 --steps 3 --warmup 1 --profile || rc=1
    return $rc
}

# data-parallel (issue 18): dist_check over NCCL with 1 GPU and with every
# visible GPU, then the weak-scaling table: bench_bert --distributed under
# mpirun (one process per GPU, each on cuda:LOCAL_RANK with every GPU
# visible, so NCCL can use NVLink) beside PyTorch DDP under torchrun, at 1,
# 2, 4 and 8 GPUs (those present), the two back to back per cell
ddp_runs() {
    # NVLink multicast stays off (the machines' rule: it can take shared GPUs down)
    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    local ngpu rc=0 mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
    ngpu=$(nvidia-smi -L | wc -l)
    "$dev/bin/dist_check" --device cuda || rc=1
    "${mpi[@]}" -np "$ngpu" "$dev/bin/dist_check" --device cuda || rc=1
    "${mpi[@]}" -np 2 "$dev/bin/dist_check" || rc=1 # MPI on the CPUs of this machine too
    "${mpi[@]}" -np "$ngpu" -x NB_MNIST_DIR "$dev/examples/mnist_mlp" --distributed --device cuda --epochs 2 || rc=1
    rm -f /tmp/nb_nccl.id # torchrun's variables, the NCCL id through a file
    NB_DIST_INIT_FILE=/tmp/nb_nccl.id torchrun --standalone --nproc_per_node 2 --no-python \
        "$dev/bin/dist_check" --device cuda 2>&1 | grep -v '^W\|^\*\*\*\|OMP_NUM_THREADS' || rc=1
    for n in 1 2 4 8; do
        [ "$n" -le "$ngpu" ] || continue
        for w in bert bert-base; do
            local cfg=(--config "$w") st=(--steps 30 --warmup 5)
            for m in "--tf32" "--tf32 --amp"; do
                # shellcheck disable=SC2086
                "${mpi[@]}" -np "$n" "$dev/bin/bench_bert" "${cfg[@]}" "${st[@]}" --device cuda --distributed $m || rc=1
                # shellcheck disable=SC2086
                TORCH_REF=$dev/torch_ref.py torchrun --standalone --nproc_per_node "$n" \
                    "$root/tests/bench/ddp_ref.py" "$w" "${st[@]}" $m 2>&1 | grep -v '^W\|^\*\*\*\|OMP_NUM_THREADS' || rc=1
            done
        done
    done
    return $rc
}

run_bench() {
    local torch=$dev/torch_ref.py
    for w in ${BENCH_WORKLOADS:-mlp cnn bert bert-base gpt2 gpt2-1024}; do
        local bin=bench_${w%-base} ref=("$torch" "$w")
        local cfg=() pycfg=()
        [ "$w" = bert-base ] && cfg=(--config bert-base)
        # GPT-2 small (bench_gpt beside tests/bench/gpt_ref.py, which takes the same flags):
        # batch 4 x seq 128, and gpt2-1024 batch 16 x seq 1024
        case $w in gpt2*) bin=bench_gpt ref=("$root/tests/bench/gpt_ref.py") ;; esac
        [ "$w" = gpt2-1024 ] && cfg=(--batch 16 --seq 1024) pycfg=(--batch 16 --seq 1024)
        local steps=(--steps 50 --warmup 10)
        [ "${w#bert}" != "$w" ] || [ "${w#gpt2}" != "$w" ] && steps=(--steps 20 --warmup 5)
        local big=0
        [ "$w" = bert-base ] || [ "${w#gpt2}" != "$w" ] && big=1
        [ $big = 0 ] && "$dev/bin/$bin" "${cfg[@]}" "${steps[@]}" --device cuda
        "$dev/bin/$bin" "${cfg[@]}" "${steps[@]}" --device cuda --tf32
        "$dev/bin/$bin" "${cfg[@]}" "${steps[@]}" --device cuda --tf32 --graph
        "$dev/bin/$bin" "${cfg[@]}" "${steps[@]}" --device cuda --tf32 --amp
        "$dev/bin/$bin" "${cfg[@]}" "${steps[@]}" --device cuda --tf32 --amp --graph
        "$dev/bin/$bin" "${cfg[@]}" "${steps[@]}" --device cuda --tf32 --amp --compile
        [ $big = 0 ] && python3 "${ref[@]}" "${pycfg[@]}" "${steps[@]}" --device cuda
        python3 "${ref[@]}" "${pycfg[@]}" "${steps[@]}" --device cuda --tf32
        python3 "${ref[@]}" "${pycfg[@]}" "${steps[@]}" --device cuda --tf32 --graph
        python3 "${ref[@]}" "${pycfg[@]}" "${steps[@]}" --device cuda --tf32 --amp --graph
        # PyTorch's best: torch.compile and the CUDA graph
        python3 "${ref[@]}" "${pycfg[@]}" "${steps[@]}" --device cuda --tf32 --amp --graph --compile
    done
}

gpu() {
    mkdir -p "$out"
    for f in "$dev/bin/nabla-tests" "$dev/bin/bench_gpt" "$dev/bin/bench_llama_infer" "$dev/bin/bench_pointwise" \
        "$dev/lib/libnabla.so.0" \
        "$dev/lib/libnabla_cuda.so.0"; do
        [ -f "$f.gz" ] && gunzip -f "$f.gz"
    done
    : >"$out/summary.txt"
    export LD_LIBRARY_PATH=$dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export NB_MNIST_DIR=$dev/data/mnist
    local steps=("$@")
    [ "${steps[0]}" = all ] && steps=(info harness suite memcheck racecheck examples bench)
    for s in "${steps[@]}"; do
        case $s in
        info) step info bash -c "nvidia-smi; CK_RUN_SUITE=core CK_VERBOSITY=silent '$dev/bin/nabla-tests'" ;;
        harness)
            step harness suites $cuda_suites
            # the 16-bit attention tests again where cuDNN's fused attention must take them
            step cudnn_attention env NB_CUDA_ATTENTION=cudnn CK_RUN_SUITE=ops_attention_cuda "$dev/bin/nabla-tests" ;;
        suite) step suite "$dev/bin/nabla-tests" ;;
        memcheck) step memcheck sanitize memcheck --leak-check no ;;
        racecheck) step racecheck racecheck_all ;;
        examples)
            step mnist_mlp "$dev/examples/mnist_mlp" --device cuda
            step mnist_mlp_graph "$dev/examples/mnist_mlp" --device cuda --cuda-graph
            step mnist_cnn "$dev/examples/mnist_cnn" --device cuda
            step bert_mlm "$dev/examples/bert_mlm" --device cuda --data "$dev/data/wordnet" ;;
        amp)
            step mnist_mlp_amp "$dev/examples/mnist_mlp" --device cuda --amp
            step mnist_cnn_amp "$dev/examples/mnist_cnn" --device cuda --amp
            step mnist_cnn_graph "$dev/examples/mnist_cnn" --device cuda --cuda-graph --amp
            step bert_mlm_amp "$dev/examples/bert_mlm" --device cuda --data "$dev/data/wordnet" --amp 1
            # through nb_compile (a fused graph a trace, replayed)
            step mnist_mlp_compile "$dev/examples/mnist_mlp" --device cuda --compile
            step bert_mlm_compile "$dev/examples/bert_mlm" --device cuda --data "$dev/data/wordnet" --amp 1 --compile 1 ;;
        bench) step bench run_bench ;;
        cpu)
            step cpu cpu_scaling
            step cpu_profile cpu_profile
            step cpu_gemm bash -c "for t in 2 16; do '$dev/bin/gemm_shapes' --threads \$t --reps 5; done" ;;
        ddp) step ddp ddp_runs ;;
        decoder) step decoder env THREADS=16 PYTHON=python3 BENCH_DIR="$dev/bin" bash "$root/tests/bench/decoder_gpu_bench.sh" ;;
        profile) step profile bash -c "for w in mlp cnn; do $dev/bin/bench_\$w --device cuda --steps 20 --profile; done;
            for m in '' --amp; do $dev/bin/bench_bert --device cuda --tf32 \$m --steps 10 --profile;
            $dev/bin/bench_bert --config bert-base --device cuda --tf32 \$m --steps 5 --profile; done" ;;
        parity) step parity "$dev/bin/device_parity" --device cuda --steps 3 ;;
        slots)
            step cnn_slots "$dev/bin/cuda_cnn_slots"
            step reduce_slots "$dev/bin/cuda_reduce_slots" ;;
        *) echo "run.sh: unknown step $s" >&2 ;;
        esac
    done
    # the short table the device tool's reply ends with
    echo "== summary"
    for l in "${summary[@]}"; do echo "$l"; done
    grep -h '^op harness on\|^[0-9]*%: Checks' "$out"/harness.log "$out"/suite.log 2>/dev/null | head -20
    grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$out"/memcheck.log "$out"/racecheck.log 2>/dev/null
    grep -H '^final:' "$out"/mnist_*.log "$out"/bert_mlm*.log 2>/dev/null | sed 's|.*/||' 
    grep -h '^workload=' "$out"/bench.log 2>/dev/null | sed 's/ info=.*//; s/ torch=[^ ]*//'
    grep -h '^CPU: \|^|' "$out"/cpu.log 2>/dev/null
    grep -h '^workload=\|^nabla: no result' "$out"/decoder.log 2>/dev/null | sed 's/ info=.*//'
    grep -h '^dist_check: \|^workload=\|^final:' "$out"/ddp.log 2>/dev/null | sed 's/ info=.*//; s/ torch=[^ ]*//'
}

case ${1:-} in
stage) stage ;;
"") sed -n '2,/^set -uo/{/^set -uo/!p}' "$0" ;;
*) gpu "$@" ;;
esac
