#!/usr/bin/env python3
"""gpt_ref.py - PyTorch's side of tests/bench/bench_gpt.c: one full training
step (forward, cross-entropy, backward, AdamW lr 1e-3) of a GPT-2-small-shaped
model written in plain torch after transformers' modeling_gpt2.py (vocab
50257, 12 layers, hidden 768, 12 heads, feed-forward 3072, learned positions,
pre-LayerNorm, GELU tanh, dropout 0.1, lm_head tied to wte; attention through
F.scaled_dot_product_attention when torch has it, else the explicit softmax),
sequence 128, batch 4, random ids and labels, PyTorch's default init.
--batch, --seq and --dropout change the shape and the three dropouts (as
bench_gpt's flags); --tf32, --amp (bfloat16 autocast), --compile
(torch.compile) and --graph (the whole step captured in one CUDA graph,
AdamW capturable) as ../shared/bench/torch_ref.py's.

usage: gpt_ref.py [--steps N] [--warmup N] [--threads N] [--device cpu|cuda]
                  [--batch N] [--seq N] [--dropout P] [--tf32] [--amp] [--compile] [--graph]
prints one line: workload=gpt2 device=... mode=... threads=... median_ms=... min_ms=... tokens_per_s=...
"""
import argparse, math, os, statistics, time

if "OPENBLAS_CORETYPE" not in os.environ and os.path.exists("/proc/cpuinfo"):
    flags = open("/proc/cpuinfo").read()
    os.environ["OPENBLAS_CORETYPE"] = "SkylakeX" if " avx512f" in flags else "Haswell" if " avx2" in flags else ""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, H, nh, p):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(H), nn.LayerNorm(H)
        self.c_attn, self.c_proj = nn.Linear(H, 3 * H), nn.Linear(H, H)
        self.c_fc, self.mlp_proj = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)
        self.nh, self.p = nh, p

    def attn(self, x):
        B, T, H = x.shape
        q, k, v = (t.view(B, T, self.nh, H // self.nh).transpose(1, 2) for t in self.c_attn(x).split(H, dim=2))
        p = self.p if self.training else 0.0
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:  # torch < 2.0
            s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), 1), float("-inf"))
            y = F.dropout(torch.softmax(s, -1), p, self.training) @ v
        return F.dropout(self.c_proj(y.transpose(1, 2).reshape(B, T, H)), self.p, self.training)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + F.dropout(self.mlp_proj(h), self.p, self.training)


class GPT2(nn.Module):
    def __init__(self, V=50257, P=1024, H=768, L=12, nh=12, p=0.1):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, H), nn.Embedding(P, H)
        self.h = nn.ModuleList(Block(H, nh, p) for _ in range(L))
        self.ln_f, self.p = nn.LayerNorm(H), p

    def forward(self, ids):
        x = F.dropout(self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device)), self.p, self.training)
        for b in self.h:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--graph", action="store_true")
    a = ap.parse_args()
    if a.graph and not a.device.startswith("cuda"):
        ap.error("--graph needs a CUDA device")
    a.steps = max(a.steps, 1)
    if a.device.startswith("cuda:"):
        torch.cuda.set_device(a.device)  # the capture's side stream and graph on that device
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    if a.device == "cpu":
        torch.set_flush_denormal(True)
    if a.threads:
        torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    B, T, V = a.batch, a.seq, 50257
    m = GPT2(p=a.dropout).to(a.device).train()
    x = torch.randint(0, V, (B, T), generator=g).to(a.device)
    y = torch.randint(0, V, (B, T), generator=g).to(a.device)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, capturable=a.graph)
    fwd = torch.compile(m) if a.compile else m
    amp = torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16, enabled=a.amp)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)

    def step():
        with amp:
            loss = F.cross_entropy(fwd(x).reshape(-1, V).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    run = None
    if a.graph:  # warm up on a side stream, then capture one whole step
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            loss = step()
        run = graph.replay
    times = []
    for i in range(a.warmup + a.steps):
        sync(); t = time.perf_counter()
        if run:
            run()
        else:
            opt.zero_grad(set_to_none=True)
            loss = step()
        sync(); dt = (time.perf_counter() - t) * 1e3
        if i >= a.warmup:
            times.append(dt)
    assert math.isfinite(loss.item())
    med = statistics.median(times)
    mode = "+".join(k for k in ("tf32", "amp", "compile", "graph") if getattr(a, k)) or "fp32"
    print(f"workload=gpt2 device={a.device} mode={mode} batch={B} seq={T} threads={torch.get_num_threads()} "
          f"torch={torch.__version__} median_ms={med:.3f} min_ms={min(times):.3f} tokens_per_s={B * T / med * 1e3:.0f}")


if __name__ == "__main__":
    main()
