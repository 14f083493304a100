#!/usr/bin/env python3
"""gemm_floor.py - what cuBLAS (through PyTorch) takes for the GEMMs of one
bench_bert training step, shape by shape: each linear's forward
(Y = X W^T), input gradient (dX = dY W) and weight gradient (dW = dY^T X),
timed with CUDA events over 20 calls replayed from a CUDA graph (median
of --reps replays), summed with their multiplicity per step. Prints one line per shape and a total: the
time the step's GEMMs take in cuBLAS on this GPU, to compare with nabla's
matmul/addmm/matmul_bgrad slot time (bench_bert --profile). Not a strict
floor: the operands stay in L2 across the 20 calls where they fit (the
small bert shapes), the bias epilogue and bias-gradient sums are left out,
and the 30522-wide decoder runs unpadded, as PyTorch does (in 16 bits and
TF32 nabla pads it and can beat these figures).

  python3 tests/bench/gemm_floor.py [--config bert|bert-base] [--mode fp32|tf32|bf16]
"""
import argparse
import torch

CONFIGS = {  # as torch_ref.py / bench_bert: hidden 768, vocab 30522, seq 128
    "bert": dict(layers=6, batch=4),
    "bert-base": dict(layers=12, batch=32),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="bert", choices=CONFIGS)
    p.add_argument("--mode", default="tf32", choices=["fp32", "tf32", "bf16"])
    p.add_argument("--reps", type=int, default=30)
    a = p.parse_args()
    cfg = CONFIGS[a.config]
    H, V, S = 768, 30522, 128
    T = cfg["batch"] * S
    torch.backends.cuda.matmul.allow_tf32 = a.mode == "tf32"
    dt = torch.bfloat16 if a.mode == "bf16" else torch.float32
    # (in, out, count per step): in_proj, out_proj, linear1, linear2 per layer; the MLM transform and decoder once
    linears = [(H, 3 * H, cfg["layers"]), (H, H, cfg["layers"]), (H, 4 * H, cfg["layers"]),
               (4 * H, H, cfg["layers"]), (H, H, 1), (H, V, 1)]
    dev = "cuda"
    total_ms, total_flop = 0.0, 0.0
    for (i, o, cnt) in linears:
        x = torch.randn(T, i, device=dev, dtype=dt)
        w = torch.randn(o, i, device=dev, dtype=dt)
        dy = torch.randn(T, o, device=dev, dtype=dt)
        for name, fn in (("fwd", lambda: x @ w.t()), ("dX", lambda: dy @ w), ("dW", lambda: dy.t() @ x)):
            # 20 calls captured in one CUDA graph and replayed: the GPU's
            # time for them, without the host's dispatch between them
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(20):
                    fn()
            g.replay()
            ts = []
            for _ in range(a.reps):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                g.replay()
                e.record()
                e.synchronize()
                ts.append(s.elapsed_time(e) / 20)
            ms = sorted(ts)[len(ts) // 2]
            flop = 2.0 * T * i * o
            total_ms += cnt * ms
            total_flop += cnt * flop
            print(f"{a.config} {a.mode} {name} T={T} in={i} out={o} x{cnt}: {ms * 1e3:8.1f} us  "
                  f"{flop / ms / 1e9:7.1f} TFLOP/s")
    print(f"floor config={a.config} mode={a.mode} gemm_ms_per_step={total_ms:.3f} "
          f"gflop_per_step={total_flop / 1e9:.1f} tflops={total_flop / total_ms / 1e9:.1f} torch={torch.__version__}")


if __name__ == "__main__":
    main()
