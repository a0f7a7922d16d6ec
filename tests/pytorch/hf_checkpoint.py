"""Hugging Face checkpoint folders as save_pretrained writes and from_pretrained reads them,
for the PyTorch references (written for this project; transformers itself is not
installable here): config.json, and model.safetensors or model.safetensors.index.json
naming shards model-0000K-of-0000N.safetensors. Tensors may be F32, BF16 or F16; they are
read back as F32. The name mappings between a reference's state dict and HF's layout:
LlamaForCausalLM's names are the Llama reference's own; GPT2LMHeadModel's are nanoGPT's
with the Conv1D weights transposed ([in, out]) and a tied lm_head.
"""
import json
import os
import struct

import torch

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
NAMES = {v: k for k, v in DTYPES.items()}


def read_file(path, dtypes=tuple(DTYPES)):
    """The tensors of one safetensors file, widened to F32; each must be of `dtypes`."""
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] in dtypes, (name, entry["dtype"])
        begin, end = entry["data_offsets"]
        buf = bytearray(data[8 + size + begin:8 + size + end])
        raw = torch.frombuffer(buf, dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
        tensors[name] = raw.to(torch.float32).clone()
    return tensors


def read_dir(folder):
    """(config.json as a dict, every tensor of the checkpoint as F32)."""
    config = json.load(open(os.path.join(folder, "config.json")))
    index = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.exists(index):
        return config, read_file(os.path.join(folder, "model.safetensors"))
    weight_map = json.load(open(index))["weight_map"]
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        for name, tensor in read_file(os.path.join(folder, shard)).items():
            if weight_map.get(name) == shard:
                tensors[name] = tensor
    assert set(tensors) == set(weight_map), set(weight_map) ^ set(tensors)
    return config, tensors


def encode(tensors, dtype):
    """One safetensors file's bytes, names sorted, every tensor cast to dtype."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(dtype).contiguous()
        blob = t.view(torch.int16).numpy().tobytes() if t.element_size() == 2 else \
            t.numpy().tobytes()
        header[name] = {"dtype": NAMES[dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_dir(folder, tensors, config, dtype=torch.float32, shards=1):
    """Writes config.json and the tensors in dtype: one model.safetensors, or `shards`
    files (tensors dealt round-robin in name order) and the index naming them."""
    os.makedirs(folder, exist_ok=True)
    json.dump(config, open(os.path.join(folder, "config.json"), "w"), indent=2)
    if shards == 1:
        with open(os.path.join(folder, "model.safetensors"), "wb") as f:
            f.write(encode(tensors, dtype))
        return
    names = sorted(tensors)
    weight_map = {}
    for k in range(shards):
        shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k::shards]}
        weight_map.update({n: shard for n in part})
        with open(os.path.join(folder, shard), "wb") as f:
            f.write(encode(part, dtype))
    index = {"metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())},
             "weight_map": weight_map}
    json.dump(index, open(os.path.join(folder, "model.safetensors.index.json"), "w"), indent=2)


def llama_from_hf(tensors):
    """A LlamaForCausalLM checkpoint's tensors as the Llama reference's state dict: the same
    names, less the rotary buffers from_pretrained ignores."""
    return {k: v for k, v in tensors.items() if not k.endswith("rotary_emb.inv_freq")}


def llama_to_hf(state):
    """The Llama reference's state dict as LlamaForCausalLM's: the same."""
    return dict(state)


GPT2_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def gpt2_to_hf(state, prefix=True):
    """nanoGPT's state dict as GPT2LMHeadModel stores it: Conv1D weights transposed to
    [in, out]; without prefix, GPT2Model's names (no "transformer.")."""
    out = {}
    for name, tensor in state.items():
        key = name if prefix else name.replace("transformer.", "", 1)
        out[key] = tensor.t().contiguous() if name.endswith(GPT2_CONV1D) else tensor
    return out


def gpt2_from_hf(tensors):
    """A GPT-2 checkpoint's tensors (with or without "transformer.") as nanoGPT's names:
    Conv1D weights transposed back; the attention buffers and a tied lm_head dropped."""
    state = {}
    for key, tensor in tensors.items():
        if key.endswith((".attn.bias", ".attn.masked_bias")) or key == "lm_head.weight":
            continue
        name = key if key.startswith("transformer.") else "transformer." + key
        state[name] = tensor.t().contiguous() if name.endswith(GPT2_CONV1D) else tensor
    return state
