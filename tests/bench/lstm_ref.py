#!/usr/bin/env python3
"""lstm_ref.py - PyTorch's side of tests/bench/bench_lstm.c: one full training
step (forward, cross-entropy, backward, Adam lr 1e-3) of a 2-layer LSTM
(input 1024, hidden 1024, [T, B, I] layout) with a Linear(1024, 32) head over
every position, sequence 128, batch 64, random inputs and labels, PyTorch's
default init. On CUDA nn.LSTM runs cuDNN's RNN.

usage: lstm_ref.py [--steps N] [--warmup N] [--threads N] [--device cpu|cuda] [--tf32] [--amp]
prints one line: workload=lstm device=... mode=... threads=... median_ms=... min_ms=... tokens_per_s=...
"""
import argparse, math, os, statistics, time

if "OPENBLAS_CORETYPE" not in os.environ and os.path.exists("/proc/cpuinfo"):
    flags = open("/proc/cpuinfo").read()
    os.environ["OPENBLAS_CORETYPE"] = "SkylakeX" if " avx512f" in flags else "Haswell" if " avx2" in flags else ""

import torch
import torch.nn as nn
import torch.nn.functional as F

T, B, I, H, L, C = 128, 64, 1024, 1024, 2, 32


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.head = nn.LSTM(I, H, L), nn.Linear(H, C)

    def forward(self, x):
        return self.head(self.lstm(x)[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--amp", action="store_true")
    a = ap.parse_args()
    if a.device == "cpu":
        torch.set_flush_denormal(True)
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    g = torch.Generator().manual_seed(0)
    m = Net().to(a.device).train()
    x = torch.randn(T, B, I, generator=g).to(a.device)
    y = torch.randint(0, C, (T, B), generator=g).to(a.device)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    dev_type = "cuda" if a.device.startswith("cuda") else "cpu"
    times = []
    for i in range(a.warmup + a.steps):
        sync(); t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev_type, dtype=torch.bfloat16, enabled=a.amp):
            loss = F.cross_entropy(m(x).reshape(-1, C), y.reshape(-1))
        loss.backward()
        opt.step()
        sync(); dt = (time.perf_counter() - t) * 1e3
        if i >= a.warmup:
            times.append(dt)
    assert math.isfinite(loss.item())
    med = statistics.median(times)
    mode = ("tf32" if a.tf32 else "fp32") + ("+amp" if a.amp else "")
    print(f"workload=lstm device={a.device} mode={mode} threads={torch.get_num_threads()} torch={torch.__version__} "
          f"median_ms={med:.3f} min_ms={min(times):.3f} tokens_per_s={B * T / med * 1e3:.0f}")


if __name__ == "__main__":
    main()
