"""PyTorch's side of bench/gpu_llama.sh: the Llama of tests/pytorch/llama.py (Hugging Face
LlamaForCausalLM's semantics, eager attention with repeat_kv) at Llama 3.2 1B's shape,
trained on one device with AdamW (the loop: pytorch_gpu_timing.py), eagerly, with
PyTorch's fused attention (scaled_dot_product_attention, grouped natively where this
PyTorch takes enable_gqa: HF's "sdpa" path) and with torch.compile, each where this
PyTorch has it.

Prints one line per variant: "VARIANT tokens_per_second MFU peak_MiB" or
"VARIANT unavailable REASON". MFU: 6 N + 12 L H hd T FLOPs per token (N every parameter,
the tied embedding counted once, as the LM head's product) over --peak_tflops.

Usage: python3 pytorch_gpu_llama.py [--device cuda] [--precision bf16] [--batch 4] ...
"""
import argparse
import inspect
import os
import sys

import torch
import torch.nn.functional as F

import pytorch_gpu_timing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "pytorch"))
import llama  # noqa: E402


def takes_enable_gqa():
    try:
        return "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters
    except (TypeError, ValueError):  # a builtin without a signature: try it
        return False


def fused_attention_forward(self, x, cos, sin):
    """HF's sdpa attention: the same projections and rotary embeddings, then PyTorch's
    fused causal attention (K/V heads shared natively, or repeated where it cannot)."""
    b, t, _ = x.shape
    q = self.q_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
    k = self.k_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
    v = self.v_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
    q, k = llama.apply_rotary(q, cos, sin), llama.apply_rotary(k, cos, sin)
    if self.native_gqa:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    else:
        n_rep = self.heads // self.kv_heads
        y = F.scaled_dot_product_attention(q, llama.repeat_kv(k, n_rep), llama.repeat_kv(v, n_rep),
                                           is_causal=True)
    return self.o_proj(y.transpose(1, 2).contiguous().reshape(b, t, -1))


def flops_per_token(cfg, model):
    n = sum(p.numel() for p in model.parameters())  # a tied weight is listed once
    attention_width = cfg["num_attention_heads"] * llama.head_dim(cfg)
    return 6 * n + 12 * cfg["num_hidden_layers"] * attention_width * cfg["block_size"]


def run(cfg, args, variant):
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = llama.LlamaForCausalLM(cfg).to(device)
    # A plain attribute (llama.RotaryEmbedding), so .to() leaves it where it was made.
    model.model.rotary_emb.inv_freq = model.model.rotary_emb.inv_freq.to(device)
    if variant == "fused-attention":
        if not hasattr(F, "scaled_dot_product_attention"):
            return f"{variant} unavailable (no scaled_dot_product_attention in torch {torch.__version__})"
        for layer in model.model.layers:
            layer.self_attn.native_gqa = takes_enable_gqa()
            layer.self_attn.forward = fused_attention_forward.__get__(layer.self_attn)
    return pytorch_gpu_timing.time_training(model, variant, args, cfg["vocab_size"],
                                            flops_per_token(cfg, model))


def main():
    parser = argparse.ArgumentParser()
    pytorch_gpu_timing.add_arguments(parser, batch=4, block_size=2048)
    # Llama 3.2 1B (its config.json), trained at --block_size.
    parser.add_argument("--vocab_size", type=int, default=128256)
    parser.add_argument("--hidden_size", type=int, default=2048)
    parser.add_argument("--intermediate_size", type=int, default=8192)
    parser.add_argument("--num_hidden_layers", type=int, default=16)
    parser.add_argument("--num_attention_heads", type=int, default=32)
    parser.add_argument("--num_key_value_heads", type=int, default=8)
    parser.add_argument("--variants", default="eager,fused-attention,compile")
    args = parser.parse_args()
    pytorch_gpu_timing.disable_tf32()
    cfg = {"vocab_size": args.vocab_size, "hidden_size": args.hidden_size,
           "intermediate_size": args.intermediate_size,
           "num_hidden_layers": args.num_hidden_layers,
           "num_attention_heads": args.num_attention_heads,
           "num_key_value_heads": args.num_key_value_heads,
           "max_position_embeddings": 131072, "block_size": args.block_size, "rms_norm_eps": 1e-5,
           "rope_theta": 500000.0,
           "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
           "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True}
    for variant in args.variants.split(","):
        print(run(cfg, args, variant), flush=True)


if __name__ == "__main__":
    main()
