#!/usr/bin/python3
"""decoder_interop.py - nabla <-> PyTorch interoperability of GPT-2 and Llama
checkpoints in Hugging Face's layout (config.json + model.safetensors with
transformers' state_dict keys).

transformers is not installed here, so the two models are written below in
plain torch, following transformers' modeling_gpt2.py (GPT2LMHeadModel:
Conv1D weights [in, out], "gelu_new", learned positions, head tied to wte)
and modeling_llama.py (LlamaForCausalLM: RMSNorm, rotate-half rotary
embedding with rope_theta and the "llama3" rope_scaling, repeat_kv for
grouped-query attention, SwiGLU MLP, tied or untied lm_head).

Run by tests/test_decoder_io.c as
    /usr/bin/python3 tests/interop/decoder_interop.py DIR
after it wrote DIR/nabla_gpt2/ and DIR/nabla_llama/ (save_pretrained) and
DIR/nabla_io.safetensors ("gpt2_ids", "gpt2_logits", "llama_ids",
"llama_logits": int64 ids [B, T] and nabla's float32 logits [B, T, V]).
The script loads each directory strictly into its torch model and requires
the logits within 1e-4 of nabla's. Then it writes models of its own for
nabla to load: DIR/torch_gpt2/ in the hub's original gpt2 layout (bare
GPT2Model keys "h.0.attn.c_attn.weight" plus the old "attn.bias" mask
buffers), DIR/torch_llama/ in bfloat16 with a tied head, attention biases,
head_dim != hidden_size / heads and llama3 rope scaling, and
DIR/torch_io.safetensors with their ids and float32 logits.
Exit status: 0 pass, 1 mismatch or bad file, 77 torch or numpy missing.
"""
import json
import math
import os
import struct
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the C test reports the skip
    print(f"decoder_interop: skipped ({e})")
    sys.exit(77)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_interop import read_safetensors  # noqa: E402  (checks CRCs too)

ST_DTYPES = {torch.float32: "F32", torch.int64: "I64", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors, metadata=None):
    """safetensors layout with BF16 support (bits written as int16)."""
    header, chunks, at = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
        b = raw.numpy().tobytes()
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        chunks.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))


def load_dir(d):
    cfg = json.load(open(f"{d}/config.json"))
    arrays, meta = read_safetensors(f"{d}/model.safetensors")
    assert meta.get("format") == "pt", meta
    return cfg, {k: torch.from_numpy(v) for k, v in arrays.items()}


def causal_softmax_attention(q, k, v):
    """softmax(q k^T / sqrt(d) + causal mask) v, as transformers' eager attention."""
    T = q.shape[-2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    s = s.masked_fill(mask, torch.finfo(s.dtype).min)
    return torch.softmax(s, dim=-1) @ v


# ---- GPT-2 (modeling_gpt2.py) --------------------------------------------------------------

GPT2_KEYS = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
             "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
             "mlp.c_proj.weight", "mlp.c_proj.bias"]


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gpt2_expected_keys(cfg):
    keys = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"}
    for i in range(cfg["n_layer"]):
        keys |= {f"transformer.h.{i}.{k}" for k in GPT2_KEYS}
    return keys


def gpt2_logits(cfg, sd, ids):
    H, nh, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    B, T = ids.shape
    x = sd["transformer.wte.weight"][ids] + sd["transformer.wpe.weight"][torch.arange(T)]
    for i in range(cfg["n_layer"]):
        p = lambda k: sd[f"transformer.h.{i}.{k}"]  # noqa: E731
        h = F.layer_norm(x, (H,), p("ln_1.weight"), p("ln_1.bias"), eps)
        qkv = h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")  # Conv1D: x W + b, W [in, out]
        q, k, v = (t.reshape(B, T, nh, H // nh).transpose(1, 2) for t in qkv.split(H, dim=2))
        y = causal_softmax_attention(q, k, v).transpose(1, 2).reshape(B, T, H)
        x = x + (y @ p("attn.c_proj.weight") + p("attn.c_proj.bias"))
        h = F.layer_norm(x, (H,), p("ln_2.weight"), p("ln_2.bias"), eps)
        x = x + (gelu_new(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias")) @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias"))
    x = F.layer_norm(x, (H,), sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"], eps)
    return x @ sd["transformer.wte.weight"].T  # lm_head tied to wte


# ---- Llama (modeling_llama.py) ------------------------------------------------------------------


def llama_inv_freq(cfg, hd):
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    rs = cfg.get("rope_scaling")
    if rs and rs.get("rope_type", rs.get("type")) == "llama3":  # _compute_llama3_parameters
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wl, high_wl = old / low, old / high
        wl = 2 * math.pi / inv
        inv_l = torch.where(wl > low_wl, inv / factor, inv)
        smooth = (old / wl - low) / (high - low)
        smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
        medium = ~(wl < high_wl) * ~(wl > low_wl)
        inv = torch.where(medium, smoothed, inv_l)
    return inv


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def llama_hd(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def llama_expected_keys(cfg):
    keys = {"model.embed_tokens.weight", "model.norm.weight"}
    if not cfg.get("tie_word_embeddings", False):
        keys.add("lm_head.weight")
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        for m in ("q", "k", "v", "o"):
            keys.add(f"{pre}self_attn.{m}_proj.weight")
            if cfg.get("attention_bias"):
                keys.add(f"{pre}self_attn.{m}_proj.bias")
        for m in ("gate", "up", "down"):
            keys.add(f"{pre}mlp.{m}_proj.weight")
        keys |= {f"{pre}input_layernorm.weight", f"{pre}post_attention_layernorm.weight"}
    return keys


def llama_logits(cfg, sd, ids):
    nh, eps = cfg["num_attention_heads"], cfg["rms_norm_eps"]
    nkv, hd = cfg.get("num_key_value_heads") or nh, llama_hd(cfg)
    B, T = ids.shape
    freqs = torch.outer(torch.arange(T).float(), llama_inv_freq(cfg, hd))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def lin(x, name):
        y = x @ sd[name + ".weight"].T
        return y + sd[name + ".bias"] if name + ".bias" in sd else y

    x = sd["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        h = rms_norm(x, sd[pre + "input_layernorm.weight"], eps)
        q = lin(h, pre + "self_attn.q_proj").reshape(B, T, nh, hd).transpose(1, 2)
        k = lin(h, pre + "self_attn.k_proj").reshape(B, T, nkv, hd).transpose(1, 2)
        v = lin(h, pre + "self_attn.v_proj").reshape(B, T, nkv, hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(nh // nkv, dim=1), v.repeat_interleave(nh // nkv, dim=1)  # repeat_kv
        y = causal_softmax_attention(q, k, v).transpose(1, 2).reshape(B, T, nh * hd)
        x = x + lin(y, pre + "self_attn.o_proj")
        h = rms_norm(x, sd[pre + "post_attention_layernorm.weight"], eps)
        x = x + lin(F.silu(lin(h, pre + "mlp.gate_proj")) * lin(h, pre + "mlp.up_proj"), pre + "mlp.down_proj")
    x = rms_norm(x, sd["model.norm.weight"], eps)
    head = sd["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else sd["lm_head.weight"]
    return x @ head.T


# ---- the two directions ----------------------------------------------------------------------------


def check_nabla(d, name, expected_keys, logits_fn, io):
    cfg, sd = load_dir(f"{d}/nabla_{name}")
    sd = {k: v.float() for k, v in sd.items()}
    want = expected_keys(cfg)
    if set(sd) != want:  # a strict load_state_dict
        print(f"decoder_interop: nabla {name}: missing {sorted(want - set(sd))}, unexpected {sorted(set(sd) - want)}")
        return False
    ids = torch.from_numpy(io[f"{name}_ids"])
    with torch.no_grad():
        diff = (logits_fn(cfg, sd, ids) - torch.from_numpy(io[f"{name}_logits"])).abs().max().item()
    print(f"decoder_interop: nabla {name} -> PyTorch: max |logits diff| = {diff:.3g}")
    return diff <= 1e-4


def save_dir(path, cfg, sd):
    os.makedirs(path, exist_ok=True)
    json.dump(cfg, open(f"{path}/config.json", "w"), indent=2)
    write_safetensors(f"{path}/model.safetensors", sd, {"format": "pt"})


def torch_models(d):
    g = torch.Generator().manual_seed(4321)
    rnd = lambda *s: torch.randn(*s, generator=g) * 0.3  # noqa: E731
    out = {}
    # GPT-2 as the hub's gpt2 checkpoint stores it: bare GPT2Model keys and the mask buffers
    gc = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 80, "n_positions": 24,
          "n_ctx": 24, "n_embd": 24, "n_layer": 2, "n_head": 3, "n_inner": 40, "activation_function": "gelu_new",
          "layer_norm_epsilon": 1e-5, "bos_token_id": 79, "eos_token_id": 79}
    H, I = gc["n_embd"], gc["n_inner"]
    shapes = {"ln_1.weight": [H], "ln_1.bias": [H], "attn.c_attn.weight": [H, 3 * H], "attn.c_attn.bias": [3 * H],
              "attn.c_proj.weight": [H, H], "attn.c_proj.bias": [H], "ln_2.weight": [H], "ln_2.bias": [H],
              "mlp.c_fc.weight": [H, I], "mlp.c_fc.bias": [I], "mlp.c_proj.weight": [I, H], "mlp.c_proj.bias": [H]}
    sd = {"transformer.wte.weight": rnd(80, H), "transformer.wpe.weight": rnd(24, H),
          "transformer.ln_f.weight": 1 + rnd(H), "transformer.ln_f.bias": rnd(H)}
    for i in range(gc["n_layer"]):
        for k, s in shapes.items():
            sd[f"transformer.h.{i}.{k}"] = (1 + rnd(*s)) if k.endswith("ln_1.weight") or k.endswith("ln_2.weight") else rnd(*s)
    hub = {k[len("transformer."):]: v for k, v in sd.items()}
    for i in range(gc["n_layer"]):
        hub[f"h.{i}.attn.bias"] = torch.tril(torch.ones(24, 24)).view(1, 1, 24, 24)
    save_dir(f"{d}/torch_gpt2", gc, hub)
    ids = torch.randint(0, 80, (2, 9), generator=g)
    out["gpt2_ids"], out["gpt2_logits"] = ids, gpt2_logits(gc, sd, ids)
    # Llama 3 style: bf16 weights, tied head, GQA, biases, head_dim 12 != 32 / 4, llama3 rope scaling
    lc = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 90, "hidden_size": 32,
          "intermediate_size": 56, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
          "head_dim": 12, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 16},
          "attention_bias": True, "mlp_bias": False, "tie_word_embeddings": True, "hidden_act": "silu",
          "bos_token_id": 1, "eos_token_id": [2, 3], "torch_dtype": "bfloat16"}
    H, I, hd, nh, nkv = 32, 56, 12, 4, 1
    sd = {"model.embed_tokens.weight": rnd(90, H), "model.norm.weight": 1 + rnd(H)}
    for i in range(lc["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        for m, (o, n) in {"q": (nh * hd, H), "k": (nkv * hd, H), "v": (nkv * hd, H), "o": (H, nh * hd)}.items():
            sd[f"{pre}self_attn.{m}_proj.weight"] = rnd(o, n)
            sd[f"{pre}self_attn.{m}_proj.bias"] = rnd(o)
        sd[pre + "mlp.gate_proj.weight"], sd[pre + "mlp.up_proj.weight"] = rnd(I, H), rnd(I, H)
        sd[pre + "mlp.down_proj.weight"] = rnd(H, I)
        sd[pre + "input_layernorm.weight"], sd[pre + "post_attention_layernorm.weight"] = 1 + rnd(H), 1 + rnd(H)
    sd = {k: v.to(torch.bfloat16) for k, v in sd.items()}
    save_dir(f"{d}/torch_llama", lc, sd)
    ids = torch.randint(0, 90, (2, 11), generator=g)
    out["llama_ids"] = ids
    out["llama_logits"] = llama_logits(lc, {k: v.float() for k, v in sd.items()}, ids)
    write_safetensors(f"{d}/torch_io.safetensors", out)


def main(d):
    io, _ = read_safetensors(f"{d}/nabla_io.safetensors")
    ok = check_nabla(d, "gpt2", gpt2_expected_keys, gpt2_logits, io)
    ok = check_nabla(d, "llama", llama_expected_keys, llama_logits, io) and ok
    if not ok:
        return 1
    with torch.no_grad():
        torch_models(d)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
