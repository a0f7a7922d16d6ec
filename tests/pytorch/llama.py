"""A Llama-family causal LM trained with PyTorch itself: the reference for Shardwise's
Llama jobs.

The module has the semantics of Hugging Face transformers' LlamaForCausalLM with dropout
0 and eager attention, and HF's module and state-dict names: RMSNorm (in FP32, the weight
applied after the cast back), rotary position embeddings (default, or llama3-scaled
frequencies) on q and k, grouped-query attention (each key/value head shared by
num_attention_heads / num_key_value_heads consecutive query heads; q k^T / sqrt(D),
causal mask, softmax in FP32, @ v), a SwiGLU MLP, pre-norm decoder layers, a final
RMSNorm and an LM head that may be tied to the token embedding. Written for this project
from HF's formulas (modeling_llama.py, modeling_rope_utils.py); the trainer is
reference_training.py, shared with nano_gpt.py.

Usage: python3 llama.py CONFIG.json   (the keys: reference_training.py; "model" holds HF
config.json keys: vocab_size, hidden_size, intermediate_size, num_hidden_layers,
num_attention_heads, num_key_value_heads, head_dim (optional), max_position_embeddings,
rms_norm_eps, rope_theta, rope_scaling, attention_bias, mlp_bias, tie_word_embeddings,
hidden_act (optional, "silu" only); and block_size, the training sequence length)
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_checkpoint  # noqa: E402
import reference_training  # noqa: E402


REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
            "block_size", "rms_norm_eps", "rope_theta", "rope_scaling", "attention_bias",
            "mlp_bias", "tie_word_embeddings")


def check_config(c):
    """Every key the model reads is present (no HF defaults are filled in); the training
    sequence fits the position range; the activation is SiLU."""
    missing = [k for k in REQUIRED if k not in c]
    assert not missing, f"model config lacks {missing}"
    assert c["block_size"] <= c["max_position_embeddings"], c
    assert c.get("hidden_act", "silu") == "silu", c.get("hidden_act")


def head_dim(c):
    """HF's head_dim: the config's, else hidden_size // num_attention_heads."""
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def llama3_inv_freq(inv_freq, s):
    """HF's llama3 scaling of the rotary frequencies: long wavelengths divided by factor,
    short ones kept, those between interpolated smoothly."""
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_context = s["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def rope_inv_freq(c):
    """The FP32 inverse frequencies of the rotary embedding, one per pair of dimensions."""
    dim = head_dim(c)
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    inv_freq = 1.0 / (c["rope_theta"] ** exponents)
    scaling = c.get("rope_scaling")
    kind = None if scaling is None else scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default"):
        return inv_freq
    if kind == "llama3":
        return llama3_inv_freq(inv_freq, scaling)
    raise ValueError(f"unsupported rope_scaling {scaling}")


class RotaryEmbedding(nn.Module):
    """cos and sin of positions times the inverse frequencies, computed in FP32 and cast to
    the activations' dtype (HF's attention scaling is 1 for default and llama3)."""

    def __init__(self, c):
        super().__init__()
        # A plain attribute, not a buffer: it stays FP32 in the BF16 compute copy, as HF's
        # (computed in FP32, absent from the checkpoint) does under from_pretrained.
        self.inv_freq = rope_inv_freq(c)

    def forward(self, x, position_ids):
        inv_freq = self.inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) over the halves of the last dimension."""
    x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x, cos, sin):
    """Rotates x [b, heads, T, D] by the angles of cos, sin [b, T, D]."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (x * cos) + (rotate_half(x) * sin)


def repeat_kv(x, n_rep):
    """[b, KV, T, D] -> [b, KV * n_rep, T, D], each head repeated n_rep times in place."""
    b, kv, t, d = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, kv, n_rep, t, d).reshape(b, kv * n_rep, t, d)


class RMSNorm(nn.Module):
    """HF's LlamaRMSNorm: normalised in FP32, cast back, then scaled by the weight."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        h = x.to(torch.float32)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.eps)
        return self.weight * h.to(x.dtype)


class Attention(nn.Module):
    """HF's LlamaAttention, eager path, grouped-query, causal, no dropout."""

    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        assert self.heads % self.kv_heads == 0, (self.heads, self.kv_heads)
        self.head_dim = head_dim(c)
        hidden, bias = c["hidden_size"], c["attention_bias"]
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=bias)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        k = repeat_kv(k, self.heads // self.kv_heads)
        v = repeat_kv(v, self.heads // self.kv_heads)
        scores = (q @ k.transpose(2, 3)) * self.head_dim ** -0.5
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        y = (weights @ v).transpose(1, 2).contiguous().reshape(b, t, -1)
        return self.o_proj(y)


class MLP(nn.Module):
    """HF's LlamaMLP with SiLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, c):
        super().__init__()
        hidden, inner, bias = c["hidden_size"], c["intermediate_size"], c["mlp_bias"]
        self.gate_proj = nn.Linear(hidden, inner, bias=bias)
        self.up_proj = nn.Linear(hidden, inner, bias=bias)
        self.down_proj = nn.Linear(inner, hidden, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Pre-norm: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    """HF's LlamaModel: token embedding, decoder layers, final norm."""

    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([DecoderLayer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.rotary_emb = RotaryEmbedding(c)

    def forward(self, idx):
        x = self.embed_tokens(idx)
        positions = torch.arange(idx.shape[1], device=idx.device)[None, :].expand(idx.shape[0], -1)
        cos, sin = self.rotary_emb(x, positions)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    """HF's LlamaForCausalLM; forward returns the mean cross-entropy over all positions."""

    def __init__(self, c):
        super().__init__()
        check_config(c)
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c["tie_word_embeddings"]:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, idx, targets):
        logits = self.lm_head(self.model(idx))
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))


def tied_names(c):
    """The trainer's tied aliases: the LM head is the token embedding when tied."""
    return {"lm_head.weight": "model.embed_tokens.weight"} if c["tie_word_embeddings"] else {}


def model_of_checkpoint(cfg):
    """A config without "model" takes init_hf_dir's config.json, as from_pretrained does
    (with "block_size", the training sequence length, from the config's top level)."""
    config = hf_checkpoint.read_dir(cfg["init_hf_dir"])[0]
    assert config.get("architectures") == ["LlamaForCausalLM"], config.get("architectures")
    assert config.get("model_type") == "llama", config.get("model_type")
    defaults = {"num_key_value_heads": config["num_attention_heads"], "max_position_embeddings": 2048,
                "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": None,
                "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False}
    return {**defaults, **config, "block_size": cfg["block_size"]}


def main():
    """Trains the Llama of the config named on the command line."""
    cfg = json.load(open(sys.argv[1]))
    if "model" not in cfg:
        cfg["model"] = model_of_checkpoint(cfg)
    reference_training.train(cfg, LlamaForCausalLM, tied_names(cfg["model"]))


if __name__ == "__main__":
    main()
