#!/usr/bin/env python3
"""transformers_16bit.py DIR - transformers' side of test_decoder_io's
16-bit check (issue 32): random LlamaForCausalLM and GPT2LMHeadModel in
bfloat16 (seeded; initializer_range 0.3 so that greedy decoding has clear
winners), saved with save_pretrained (config torch_dtype bfloat16,
model.safetensors in bf16) under DIR/llama and DIR/gpt2, with their
bfloat16 forward's logits on 8 ids, 32 greedy tokens (generate,
do_sample=False, no eos) and each step's logits (scores) as .npy beside
them, on CUDA when there is one.
Exit 77: no transformers (Debian's python in CI has none; the GPU
machine's has it)."""
import os
import sys

try:
    import numpy as np
    import torch
    import transformers
except ImportError:
    sys.exit(77)


def main(d):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    common = dict(initializer_range=0.3, bos_token_id=0, eos_token_id=None, pad_token_id=0)
    models = {
        "llama": transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5, tie_word_embeddings=False,
            **common)),
        "gpt2": transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=256, n_positions=128, n_embd=128, n_layer=2, n_head=4, **common)),
    }
    ids = torch.tensor([[3, 17, 42, 7, 99, 1, 250, 64]], device=dev)
    for name, m in models.items():
        m = m.to(torch.bfloat16).to(dev).eval()
        m.generation_config.eos_token_id = None
        out = os.path.join(d, name)
        m.save_pretrained(out)
        with torch.no_grad():
            logits = m(ids).logits.float()
            r = m.generate(ids, max_new_tokens=32, do_sample=False, attention_mask=torch.ones_like(ids),
                           output_scores=True, return_dict_in_generate=True)
            gen, scores = r.sequences, torch.stack([x[0].float() for x in r.scores])  # [32, V]
        np.save(os.path.join(out, "ids.npy"), ids[0].cpu().numpy().astype(np.int64))
        np.save(os.path.join(out, "logits.npy"), logits[0].cpu().numpy())
        np.save(os.path.join(out, "generated.npy"), gen[0, ids.shape[1]:].cpu().numpy().astype(np.int64))
        np.save(os.path.join(out, "scores.npy"), scores.cpu().numpy())
        print("transformers_16bit: %s %s on %s, transformers %s" % (name, m.dtype, dev, transformers.__version__))


if __name__ == "__main__":
    main(sys.argv[1])
