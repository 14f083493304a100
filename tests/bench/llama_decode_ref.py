#!/usr/bin/env python3
"""llama_decode_ref.py - PyTorch's best decode for issue 32's targets: the
Llama-3.2-1B-shaped model of llama_infer_ref.py (same random weights, same
formulas) decoded the way gpt-fast does it, not in an eager loop:

- a static KV cache [B, kv_heads, context + decode, head_dim] per layer,
  written at a position held in a device tensor, with attention over the
  whole cache under a mask of the positions written so far (so every step
  has the same shapes);
- greedy sampling on the device;
- the step captured once as a CUDA graph (torch.cuda.CUDAGraph) that also
  advances the position and feeds its token back, so N tokens are N graph
  replays with no host work between them; with --compile, the step is
  torch.compile(mode="reduce-overhead") instead (Inductor's kernels; with
  torch 2.11 Inductor skips its own CUDA graphs here, since the step writes
  the cache in place, so the manual graph is the faster of the two).
The first 8 tokens of a batch-1 case are compared with llama_infer_ref.py's
eager loop (eager_tokens_agree).

Prefill is one batched forward with F.scaled_dot_product_attention
(is_causal). Batch B decodes B sequences of the same length.

usage: llama_decode_ref.py [--config 3.2-1b|tiny] [--cases 1x128,1x4096,32x512]
                           [--decode N] [--dtype bfloat16|float32] [--compile]
prints per case: workload=llama_decode ... batch=B context=C mode=graph|compile
                 prefill_tokens_per_s=... decode_tokens_per_s=... (B * N / time)
                 step_ms=... bound_tokens_per_s=... peak_gib=...
bound: batch 1's weight-read limit, B * (H200's 4.8 TB/s) / (parameter bytes),
ignoring the KV cache reads (small at these contexts).
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_infer_ref import CONFIGS, Llama  # noqa: E402  (the same weights and formulas)

HBM_BYTES_PER_S = 4.8e12


class Static:
    def __init__(self, c, dtype, B, max_len):
        m = Llama(c, "cuda", dtype, 1)  # its weights; its own batch-1 cache stays tiny
        self.m, self.c, self.B, self.S = m, c, B, max_len
        nkv, hd = c["nkv"], c["hd"]
        self.kc = [torch.zeros(B, nkv, max_len, hd, device="cuda", dtype=dtype) for _ in range(c["L"])]
        self.vc = [torch.zeros(B, nkv, max_len, hd, device="cuda", dtype=dtype) for _ in range(c["L"])]
        self.params = sum(t.numel() for w in m.layers for t in w.values()) + m.emb.numel() + m.norm.numel()

    def rope(self, pos):  # pos: int64 [T] on the device
        f = torch.outer(pos.float(), self.m.inv)
        e = torch.cat((f, f), -1)
        return e.cos().to(self.m.dtype), e.sin().to(self.m.dtype)

    def prefill(self, ids):  # [B, C]: fills the cache at 0..C-1, returns the next tokens [B, 1]
        c, m, (B, T) = self.c, self.m, ids.shape
        nh, nkv, hd = c["nh"], c["nkv"], c["hd"]
        cos, sin = self.rope(torch.arange(T, device="cuda"))
        x = m.emb[ids]
        for i, w in enumerate(m.layers):
            h = m.rms(x, w["n1"])
            q = m.rot((h @ w["q"].T).view(B, T, nh, hd).transpose(1, 2), cos, sin)
            k = m.rot((h @ w["k"].T).view(B, T, nkv, hd).transpose(1, 2), cos, sin)
            v = (h @ w["v"].T).view(B, T, nkv, hd).transpose(1, 2)
            self.kc[i][:, :, :T] = k
            self.vc[i][:, :, :T] = v
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + y.transpose(1, 2).reshape(B, T, nh * hd) @ w["o"].T
            h = m.rms(x, w["n2"])
            x = x + (F.silu(h @ w["g"].T) * (h @ w["u"].T)) @ w["d"].T
        return (m.rms(x[:, -1:], m.norm) @ m.emb.T).argmax(-1)

    def step(self, tok, pos):  # tok [B, 1], pos int64 [1] on the device: fixed shapes
        c, m, B = self.c, self.m, self.B
        nh, nkv, hd = c["nh"], c["nkv"], c["hd"]
        cos, sin = self.rope(pos)
        mask = (torch.arange(self.S, device="cuda") <= pos).view(1, 1, 1, self.S)
        x = m.emb[tok]
        for i, w in enumerate(m.layers):
            h = m.rms(x, w["n1"])
            q = m.rot((h @ w["q"].T).view(B, 1, nh, hd).transpose(1, 2), cos, sin)
            k = m.rot((h @ w["k"].T).view(B, 1, nkv, hd).transpose(1, 2), cos, sin)
            v = (h @ w["v"].T).view(B, 1, nkv, hd).transpose(1, 2)
            self.kc[i].index_copy_(2, pos, k)
            self.vc[i].index_copy_(2, pos, v)
            y = F.scaled_dot_product_attention(q, self.kc[i], self.vc[i], attn_mask=mask, enable_gqa=True)
            x = x + y.transpose(1, 2).reshape(B, 1, nh * hd) @ w["o"].T
            h = m.rms(x, w["n2"])
            x = x + (F.silu(h @ w["g"].T) * (h @ w["u"].T)) @ w["d"].T
        return (m.rms(x, m.norm) @ m.emb.T).argmax(-1)


def run_case(cfg, dtype, B, C, N, compile_step):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    s = Static(CONFIGS[cfg], dtype, B, C + N + 1)
    ids = torch.randint(0, CONFIGS[cfg]["V"], (B, C), generator=torch.Generator().manual_seed(1)).cuda()
    with torch.no_grad():
        torch.cuda.synchronize(); t0 = time.perf_counter()
        first = s.prefill(ids)
        torch.cuda.synchronize(); t1 = time.perf_counter()
        tok = first.clone()
        pos = torch.tensor([C], device="cuda")
        if compile_step:
            fn = torch.compile(s.step, mode="reduce-overhead", fullgraph=True)
            for _ in range(3):  # compile and record (positions C.. C+2; rewritten below)
                fn(tok, pos)
            def run():
                tok.copy_(fn(tok, pos))
                pos.add_(1)
        else:
            def body():
                tok.copy_(s.step(tok, pos))
                pos.add_(1)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture stream, as torch.cuda.graphs requires
                for _ in range(3):
                    body()
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                body()
            run = g.replay
        tok.copy_(first)
        pos.fill_(C)
        torch.cuda.synchronize(); t2 = time.perf_counter()
        got = []
        for k in range(N):
            run()
            if k < 8 and B == 1:
                got.append(tok.clone())  # a device copy, no host sync
        torch.cuda.synchronize(); t3 = time.perf_counter()
        peak = torch.cuda.max_memory_allocated() / 2**30  # before the comparison's second model
        agree = ""
        if B == 1:  # the first tokens against llama_infer_ref's eager loop (its own exact-length cache)
            e = Llama(CONFIGS[cfg], "cuda", dtype, C + 9)
            t = e.step(ids)
            want = []
            for _ in range(8):
                t = e.step(t)
                want.append(t)
            same = sum(int(torch.equal(a, b)) for a, b in zip(got, want))
            agree = f" eager_tokens_agree={same}/8"
            del e
    bound = B * HBM_BYTES_PER_S / (s.params * torch.finfo(dtype).bits / 8)
    print(f"workload=llama_decode config={cfg} dtype={str(dtype)[6:]} batch={B} context={C} "
          f"mode={'compile' if compile_step else 'graph'} prefill_tokens_per_s={B * C / (t1 - t0):.0f} "
          f"decode_tokens={N} decode_tokens_per_s={B * N / (t3 - t2):.1f} step_ms={(t3 - t2) / N * 1e3:.3f} "
          f"bound_tokens_per_s={bound:.0f} params={s.params} peak_gib={peak:.2f}{agree}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="3.2-1b", choices=sorted(CONFIGS))
    ap.add_argument("--cases", default="1x128,1x4096,32x512")
    ap.add_argument("--decode", type=int, default=256)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--compile", action="store_true", help="torch.compile(mode='reduce-overhead') instead of a CUDA graph")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("llama_decode_ref: needs a CUDA device")
    dtype = getattr(torch, a.dtype)
    print(f"llama_decode_ref: torch {torch.__version__}, {torch.cuda.get_device_name()}, {a.dtype}")
    for case in a.cases.split(","):
        B, C = (int(v) for v in case.split("x"))
        run_case(a.config, dtype, B, C, a.decode, a.compile)


if __name__ == "__main__":
    main()
