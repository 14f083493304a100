#!/usr/bin/env python3
"""llama_infer_ref.py - PyTorch's side of tests/bench/bench_llama_infer.c: a
Llama-3.2-1B-shaped model (its config.json: vocab 128256, hidden 2048,
intermediate 8192, 16 layers, 32 heads over 8 kv heads of 64, rope_theta
500000 with llama3 scaling, tied head) with random weights, written in plain
torch after transformers' modeling_llama.py with a preallocated KV cache and
F.scaled_dot_product_attention (enable_gqa where torch has it, else
repeat_interleave; before torch 2.0, the explicit softmax). Prefill: one forward over a context of C random tokens
(is_causal) filling the cache; decode: greedy tokens one at a time at batch 1.

usage: llama_infer_ref.py [--config 3.2-1b|tiny] [--contexts 128,4096,100000]
                          [--decode N] [--device cpu|cuda] [--dtype float32|bfloat16] [--threads N]
prints per context: workload=llama ... context=C prefill_ms=... prefill_tokens_per_s=...
                    decode_tokens=N decode_tokens_per_s=... peak_gib=...
"""
import argparse, math, os, time

if "OPENBLAS_CORETYPE" not in os.environ and os.path.exists("/proc/cpuinfo"):
    flags = open("/proc/cpuinfo").read()
    os.environ["OPENBLAS_CORETYPE"] = "SkylakeX" if " avx512f" in flags else "Haswell" if " avx2" in flags else ""

import torch
import torch.nn.functional as F

CONFIGS = {
    "3.2-1b": dict(V=128256, H=2048, I=8192, L=16, nh=32, nkv=8, hd=64, theta=500000.0),
    "tiny": dict(V=4096, H=256, I=1024, L=2, nh=8, nkv=2, hd=32, theta=500000.0),
}


def inv_freq_llama3(hd, theta, factor=32.0, low=1.0, high=4.0, old=8192):
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    wl = 2 * math.pi / inv
    inv_l = torch.where(wl > old / low, inv / factor, inv)
    smooth = (old / wl - low) / (high - low)
    smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
    medium = ~(wl < old / high) * ~(wl > old / low)
    return torch.where(medium, smoothed, inv_l)


class Llama:
    def __init__(self, c, dev, dtype, max_len):
        g = torch.Generator(device="cpu").manual_seed(0)
        r = lambda *s: (torch.randn(*s, generator=g) * 0.02).to(dev, dtype)  # noqa: E731
        self.c, self.dev, self.dtype = c, dev, dtype
        H, I, nh, nkv, hd = c["H"], c["I"], c["nh"], c["nkv"], c["hd"]
        self.emb = r(c["V"], H)
        self.layers = [dict(q=r(nh * hd, H), k=r(nkv * hd, H), v=r(nkv * hd, H), o=r(H, nh * hd), g=r(I, H),
                            u=r(I, H), d=r(H, I), n1=torch.ones(H, device=dev, dtype=dtype),
                            n2=torch.ones(H, device=dev, dtype=dtype)) for _ in range(c["L"])]
        self.norm = torch.ones(H, device=dev, dtype=dtype)
        self.inv = inv_freq_llama3(hd, c["theta"]).to(dev)
        self.kc = [torch.zeros(1, nkv, max_len, hd, device=dev, dtype=dtype) for _ in range(c["L"])]
        self.vc = [torch.zeros(1, nkv, max_len, hd, device=dev, dtype=dtype) for _ in range(c["L"])]
        self.len = 0

    @staticmethod
    def rms(x, w, eps=1e-5):
        xf = x.float()
        return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)

    @staticmethod
    def rot(x, cos, sin):
        h = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., h:], x[..., :h]), -1) * sin

    def step(self, ids):
        c, T, P = self.c, ids.shape[1], self.len
        nh, nkv, hd = c["nh"], c["nkv"], c["hd"]
        f = torch.outer(torch.arange(P, P + T, device=self.dev).float(), self.inv)
        emb = torch.cat((f, f), -1)
        cos, sin = emb.cos().to(self.dtype), emb.sin().to(self.dtype)
        x = self.emb[ids]
        for i, w in enumerate(self.layers):
            h = self.rms(x, w["n1"])
            q = self.rot((h @ w["q"].T).view(1, T, nh, hd).transpose(1, 2), cos, sin)
            k = self.rot((h @ w["k"].T).view(1, T, nkv, hd).transpose(1, 2), cos, sin)
            v = (h @ w["v"].T).view(1, T, nkv, hd).transpose(1, 2)
            self.kc[i][:, :, P:P + T] = k
            self.vc[i][:, :, P:P + T] = v
            k, v = self.kc[i][:, :, :P + T], self.vc[i][:, :, :P + T]
            causal = P == 0 and T > 1
            if not hasattr(F, "scaled_dot_product_attention"):  # torch < 2.0: the explicit softmax
                k, v = k.repeat_interleave(nh // nkv, 1), v.repeat_interleave(nh // nkv, 1)
                s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
                if causal:
                    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool, device=s.device), 1), float("-inf"))
                y = torch.softmax(s.float(), -1).to(q.dtype) @ v
            else:
                try:
                    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                except TypeError:  # torch < 2.5
                    y = F.scaled_dot_product_attention(q, k.repeat_interleave(nh // nkv, 1),
                                                       v.repeat_interleave(nh // nkv, 1), is_causal=causal)
            x = x + y.transpose(1, 2).reshape(1, T, nh * hd) @ w["o"].T
            h = self.rms(x, w["n2"])
            x = x + (F.silu(h @ w["g"].T) * (h @ w["u"].T)) @ w["d"].T
        self.len += T
        return (self.rms(x[:, -1:], self.norm) @ self.emb.T).argmax(-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="3.2-1b", choices=sorted(CONFIGS))
    ap.add_argument("--contexts", default="128,4096")
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=1, help="untimed prefills before the timed one")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    cuda = a.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    dtype = getattr(torch, a.dtype)
    print(f"llama {a.config}: torch {torch.__version__}, {a.dtype}, device {a.device}, threads {torch.get_num_threads()}")
    for C in [int(s) for s in a.contexts.split(",") if s]:
        m = Llama(CONFIGS[a.config], a.device, dtype, C + a.decode)
        ids = torch.randint(0, CONFIGS[a.config]["V"], (1, C), generator=torch.Generator().manual_seed(1)).to(a.device)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():
            for _ in range(a.warmup):  # kernels compiled and plans chosen before the timed prefill
                m.step(ids)
                m.len = 0
            sync(); t0 = time.perf_counter()
            tok = m.step(ids)
            sync(); t1 = time.perf_counter()
            for _ in range(a.decode):
                tok = m.step(tok)
            sync(); t2 = time.perf_counter()
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
        print(f"workload=llama config={a.config} device={a.device} dtype={a.dtype} context={C} warmup={a.warmup} "
              f"prefill_ms={(t1 - t0) * 1e3:.1f} prefill_tokens_per_s={C / (t1 - t0):.0f} decode_tokens={a.decode} "
              f"decode_tokens_per_s={a.decode / (t2 - t1):.2f} peak_gib={peak:.2f}", flush=True)
        del m


if __name__ == "__main__":
    main()
