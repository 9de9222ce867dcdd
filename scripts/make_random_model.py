#!/usr/bin/python3
"""Write a randomly initialised Hugging Face model folder with a real architecture shape.

Usage:
    /usr/bin/python3 scripts/make_random_model.py --shape qwen3-0.6b|llama-3.2-1b|llama-3-8b --out DIR [--seed N]
        [--torch-cuda] [--bits B [--group-size G]]
    /usr/bin/python3 scripts/make_random_model.py --manifest DIR --out DIR [--seed N]

--manifest takes a folder written by scripts/make_bench_manifests.py (config.json and
manifest.json: the tensor names and shapes transformers builds for that config), for
architectures whose tensor lists are not spelled out here.

Needs only the Python standard library and numpy (Debian: apt-get install -y python3-numpy).

The folder holds config.json, generation_config.json and bf16 safetensors using the
Hugging Face tensor names. Files larger than --max-shard-bytes (default 2e9) are split
into model-0000K-of-0000N.safetensors with a model.safetensors.index.json, like HF does.

Weights: Linear ~ N(0, 1/in_features), embeddings ~ N(0, 1), RMSNorm weights ~ 1 + 0.05*N(0, 1).
--bits writes every linear and embedding matrix (whose width the group size divides) in
MLX's affine format instead, as `mlx_lm.convert -q` would lay it out (fused MoE experts as
MLX's switch layer): U32 codes drawn
uniformly (every bit random) with one bf16 scale and bias per tensor, so the values are
uniform with the same standard deviation; config.json gets the `quantization` block. A
model for measuring speed, made in seconds (quantizing an 8B bf16 folder takes minutes).
Each tensor has its own RNG stream seeded by (seed, tensor index), so the output is
deterministic for a given seed and independent of the chunk size.
The safetensors writer is implemented here (no `safetensors` package needed):
8-byte little-endian header length, JSON header (padded with spaces to 8-byte alignment),
then the raw little-endian data. bf16 = upper 16 bits of f32, round-to-nearest-even.
"""

import argparse
import json
import os
import struct
import sys
import time

import numpy as np

# ---------------------------------------------------------------------------
# Architecture shapes (values from the real Hugging Face configs).
# ---------------------------------------------------------------------------

SHAPES = {
    "qwen3-0.6b": {
        "config": {
            "architectures": ["Qwen3ForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "head_dim": 128,
            "hidden_act": "silu",
            "hidden_size": 1024,
            "initializer_range": 0.02,
            "intermediate_size": 3072,
            "max_position_embeddings": 40960,
            "max_window_layers": 28,
            "model_type": "qwen3",
            "num_attention_heads": 16,
            "num_hidden_layers": 28,
            "num_key_value_heads": 8,
            "rms_norm_eps": 1e-06,
            # legacy (transformers 4.x) rope fields
            "rope_scaling": None,
            "rope_theta": 1000000.0,
            # transformers 5.x style
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
            "sliding_window": None,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "dtype": "bfloat16",
            "transformers_version": "4.51.0",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": 151936,
        },
        "generation_config": {
            "bos_token_id": 151643,
            "do_sample": True,
            "eos_token_id": [151645, 151643],
            "pad_token_id": 151643,
            "temperature": 0.6,
            "top_k": 20,
            "top_p": 0.95,
            "transformers_version": "4.51.0",
        },
        "qk_norm": True,
    },
    "llama-3.2-1b": {
        "config": {
            "architectures": ["LlamaForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 128000,
            "eos_token_id": 128001,
            "head_dim": 64,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "initializer_range": 0.02,
            "intermediate_size": 8192,
            "max_position_embeddings": 131072,
            "mlp_bias": False,
            "model_type": "llama",
            "num_attention_heads": 32,
            "num_hidden_layers": 16,
            "num_key_value_heads": 8,
            "pretraining_tp": 1,
            "rms_norm_eps": 1e-05,
            # legacy (transformers 4.x) rope fields
            "rope_scaling": {
                "factor": 32.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "llama3",
            },
            "rope_theta": 500000.0,
            # transformers 5.x style
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 32.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
            },
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "dtype": "bfloat16",
            "transformers_version": "4.45.0.dev0",
            "use_cache": True,
            "vocab_size": 128256,
        },
        # base (non-instruct) Llama-3.2-1B generation config
        "generation_config": {
            "bos_token_id": 128000,
            "do_sample": True,
            "eos_token_id": 128001,
            "temperature": 0.6,
            "top_p": 0.9,
            "transformers_version": "4.45.0.dev0",
        },
        "qk_norm": False,
    },
}

# Llama-3-8B (Meta-Llama-3-8B's config.json): the 1B entry's layout at 8B's sizes.
SHAPES["llama-3-8b"] = {
    "config": {
        **SHAPES["llama-3.2-1b"]["config"],
        "head_dim": 128,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "max_position_embeddings": 8192,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "rope_scaling": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
        "tie_word_embeddings": False,
    },
    "generation_config": SHAPES["llama-3.2-1b"]["generation_config"],
    "qk_norm": False,
}

# Tensor kinds -> how they are initialised.
EMBED, LINEAR, NORM, SMALL, ONE = "embed", "linear", "norm", "small", "one"
CODES, CONSTANT = "codes", "constant"  # --bits: random packed codes; a tensor of one value


def tensor_list(shape_name):
    """Return [(name, shape, kind)] in HF order."""
    spec = SHAPES[shape_name]
    c = spec["config"]
    h = c["hidden_size"]
    hd = c["head_dim"]
    nq = c["num_attention_heads"] * hd
    nkv = c["num_key_value_heads"] * hd
    inter = c["intermediate_size"]
    out = [("model.embed_tokens.weight", (c["vocab_size"], h), EMBED)]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out.append((p + "input_layernorm.weight", (h,), NORM))
        out.append((p + "self_attn.q_proj.weight", (nq, h), LINEAR))
        out.append((p + "self_attn.k_proj.weight", (nkv, h), LINEAR))
        out.append((p + "self_attn.v_proj.weight", (nkv, h), LINEAR))
        out.append((p + "self_attn.o_proj.weight", (h, nq), LINEAR))
        if spec["qk_norm"]:
            out.append((p + "self_attn.q_norm.weight", (hd,), NORM))
            out.append((p + "self_attn.k_norm.weight", (hd,), NORM))
        out.append((p + "post_attention_layernorm.weight", (h,), NORM))
        out.append((p + "mlp.gate_proj.weight", (inter, h), LINEAR))
        out.append((p + "mlp.up_proj.weight", (inter, h), LINEAR))
        out.append((p + "mlp.down_proj.weight", (h, inter), LINEAR))
    out.append(("model.norm.weight", (h,), NORM))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (c["vocab_size"], h), LINEAR))
    return out


def manifest_tensor_list(manifest):
    """[(name, shape, kind)] from a manifest: embeddings N(0,1), norm vectors ~1,
    Gemma 4's layer_scalar 1, other vectors (DeltaNet A_log / dt_bias, router scales)
    small, every other matrix N(0, 1/last dim) (conv1d [C, 1, K] and fused experts
    [E, out, in] alike)."""
    out = []
    for name, shape in manifest["tensors"]:
        shape = tuple(shape)
        if len(shape) >= 2:
            kind = EMBED if "embed" in name else LINEAR
        elif name.endswith("layer_scalar"):
            kind = ONE
        elif "norm" in name:
            kind = NORM
        else:
            kind = SMALL
        out.append((name, shape, kind))
    return out


def mlx_switch_layout(tensors):
    """transformers 5's fused experts (…mlp.experts.gate_up_proj [E, 2I, H], …down_proj
    [E, H, I]) renamed and split as MLX's switch layer (…mlp.switch_mlp.{gate,up,down}_proj.weight
    [E, out, in]), the form an MLX-quantized MoE folder has."""
    out = []
    for name, shape, kind in tensors:
        if name.endswith(".experts.gate_up_proj") and len(shape) == 3:
            base = name[: -len(".experts.gate_up_proj")] + ".switch_mlp."
            half = (shape[0], shape[1] // 2, shape[2])
            out += [(base + "gate_proj.weight", half, kind), (base + "up_proj.weight", half, kind)]
        elif name.endswith(".experts.down_proj") and len(shape) == 3:
            out.append((name[: -len(".experts.down_proj")] + ".switch_mlp.down_proj.weight", shape, kind))
        else:
            out.append((name, shape, kind))
    return out


def quantize_list(tensors, bits, group):
    """[(name, shape, kind, dtype, value)]: the matrices of `tensors` whose width `group`
    divides as MLX-quantized modules (codes, scales, biases), the rest as bf16."""
    out = []
    for name, shape, kind in tensors:
        if kind not in (EMBED, LINEAR) or len(shape) < 2 or shape[-1] % group:
            out.append((name, shape, kind, "BF16", None))
            continue
        std = 1.0 if kind == EMBED else 1.0 / np.sqrt(shape[-1])
        half_range = std * np.sqrt(3.0)  # uniform on [-a, a] has std a / sqrt(3)
        module = name[: -len(".weight")]
        lead = tuple(shape[:-1])
        out.append((name, lead + (shape[-1] * bits // 32,), CODES, "U32", None))
        out.append((module + ".scales", lead + (shape[-1] // group,), CONSTANT, "BF16", 2 * half_range / (2**bits - 1)))
        out.append((module + ".biases", lead + (shape[-1] // group,), CONSTANT, "BF16", -half_range))
    return out


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def f32_to_bf16_bits(x):
    """float32 array -> uint16 array of bf16 bits, round-to-nearest-even (NaN kept quiet)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((u >> 16) & 1) + np.uint32(0x7FFF)
    r = ((u + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        r[nan] = np.uint16(0x7FC0)
    return r


def gen_chunks(kind, shape, rng, chunk_elems):
    """Yield bf16 (uint16) chunks covering the tensor in row-major order."""
    total = numel(shape)
    if kind == LINEAR:
        std = np.float32(1.0 / np.sqrt(shape[-1]))  # N(0, 1/in_features)
    done = 0
    while done < total:
        n = min(chunk_elems, total - done)
        x = rng.standard_normal(n, dtype=np.float32)
        if kind == LINEAR:
            x *= std
        elif kind == NORM:
            x *= np.float32(0.05)
            x += np.float32(1.0)
        elif kind == SMALL:
            x *= np.float32(0.05)
        elif kind == ONE:
            x[:] = np.float32(1.0)
        yield f32_to_bf16_bits(x)
        done += n


def gen_chunks_torch(kind, shape, seed, chunk_elems):
    """gen_chunks' distributions drawn by torch on the GPU (other numbers than
    numpy's, as deterministic per seed): an 8B-parameter model in seconds, where
    numpy on one core takes minutes."""
    import torch
    gen = torch.Generator(device="cuda").manual_seed(seed)
    total = numel(shape)
    done = 0
    while done < total:
        n = min(chunk_elems, total - done)
        x = torch.randn(n, generator=gen, device="cuda", dtype=torch.float32)
        if kind == LINEAR:
            x *= 1.0 / np.sqrt(shape[-1])
        elif kind == NORM:
            x = x * 0.05 + 1.0
        elif kind == SMALL:
            x *= 0.05
        elif kind == ONE:
            x.fill_(1.0)
        yield x.to(torch.bfloat16).view(torch.int16).cpu().numpy()
        done += n


def gen_codes(shape, rng, seed, torch_cuda, chunk_elems):
    """Yield uint32 chunks of uniformly random bits."""
    total = numel(shape)
    if torch_cuda:
        import torch
        gen = torch.Generator(device="cuda").manual_seed(seed)
    done = 0
    while done < total:
        n = min(chunk_elems, total - done)
        if torch_cuda:
            yield torch.randint(-2**31, 2**31 - 1, (n,), generator=gen, device="cuda", dtype=torch.int32).cpu().numpy()
        else:
            yield rng.integers(0, 2**32, n, dtype=np.uint32)
        done += n


def gen_constant(shape, value):
    yield np.full(numel(shape), f32_to_bf16_bits(np.array([value], dtype=np.float32))[0], dtype=np.uint16)


def tensor_bytes(shape, dtype):
    return numel(shape) * (4 if dtype == "U32" else 2)


def build_header(entries):
    """entries: [(name, shape, dtype, offset_begin, offset_end)] -> padded header bytes."""
    hdr = {"__metadata__": {"format": "pt"}}
    for name, shape, dtype, b, e in entries:
        hdr[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [b, e]}
    js = json.dumps(hdr, separators=(",", ":")).encode("utf-8")
    pad = (-(8 + len(js))) % 8
    js += b" " * pad
    return struct.pack("<Q", len(js)) + js


def plan_shards(tensors, max_shard_bytes):
    shards, cur, cur_bytes = [], [], 0
    for idx, (name, shape, kind, dtype, _) in enumerate(tensors):
        nb = tensor_bytes(shape, dtype)
        if cur and cur_bytes + nb > max_shard_bytes:
            shards.append(cur)
            cur, cur_bytes = [], 0
        cur.append(idx)
        cur_bytes += nb
    if cur:
        shards.append(cur)
    return shards


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--shape", choices=sorted(SHAPES))
    which.add_argument("--manifest", help="folder with config.json + manifest.json (make_bench_manifests.py)")
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-shard-bytes", type=float, default=2e9,
                    help="split into several safetensors files above this size (default 2e9)")
    ap.add_argument("--chunk-elems", type=int, default=1 << 24,
                    help="elements generated per step (memory use ~ 10 bytes each)")
    ap.add_argument("--torch-cuda", action="store_true",
                    help="draw the weights with torch on the GPU (fast; other numbers than numpy's)")
    ap.add_argument("--bits", type=int, choices=[2, 3, 4, 5, 6, 8],
                    help="write the matrices MLX-quantized with random codes of this width")
    ap.add_argument("--group-size", type=int, choices=[32, 64, 128], default=64)
    args = ap.parse_args()

    t0 = time.time()
    if args.manifest:
        with open(os.path.join(args.manifest, "config.json")) as f:
            config = json.load(f)
        with open(os.path.join(args.manifest, "manifest.json")) as f:
            manifest = json.load(f)
        eos = config.get("eos_token_id", config.get("text_config", {}).get("eos_token_id"))
        spec = {"config": config, "generation_config": {"eos_token_id": eos}}
        tensors = manifest_tensor_list(manifest)
        label = os.path.basename(os.path.normpath(args.manifest))
    else:
        spec = SHAPES[args.shape]
        tensors = tensor_list(args.shape)
        label = args.shape
    if args.bits:
        tensors = quantize_list(mlx_switch_layout(tensors), args.bits, args.group_size)
        quant = {"group_size": args.group_size, "bits": args.bits}
        spec = dict(spec, config=dict(spec["config"], quantization=quant, quantization_config=quant))
    else:
        tensors = [(name, shape, kind, "BF16", None) for name, shape, kind in tensors]
    os.makedirs(args.out, exist_ok=True)
    # remove stale outputs from a previous run with a different sharding
    for fn in os.listdir(args.out):
        if fn.endswith(".safetensors") or fn == "model.safetensors.index.json":
            os.remove(os.path.join(args.out, fn))

    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(spec["config"], f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump(spec["generation_config"], f, indent=2)
        f.write("\n")

    shards = plan_shards(tensors, int(args.max_shard_bytes))
    nshard = len(shards)
    weight_map = {}
    total_bytes = 0
    total_params = 0
    for si, idxs in enumerate(shards):
        fname = "model.safetensors" if nshard == 1 else f"model-{si + 1:05d}-of-{nshard:05d}.safetensors"
        entries, off = [], 0
        for idx in idxs:
            name, shape, _, dtype, _ = tensors[idx]
            nb = tensor_bytes(shape, dtype)
            entries.append((name, shape, dtype, off, off + nb))
            off += nb
            weight_map[name] = fname
        header = build_header(entries)
        path = os.path.join(args.out, fname)
        with open(path, "wb") as f:
            f.write(header)
            for idx in idxs:
                name, shape, kind, _, value = tensors[idx]
                seed = args.seed * 1000003 + idx
                if kind == CODES:
                    chunks = gen_codes(shape, np.random.default_rng([args.seed, idx]), seed, args.torch_cuda,
                                       args.chunk_elems)
                elif kind == CONSTANT:
                    chunks = gen_constant(shape, value)
                elif args.torch_cuda:
                    chunks = gen_chunks_torch(kind, shape, seed, args.chunk_elems)
                else:
                    chunks = gen_chunks(kind, shape, np.random.default_rng([args.seed, idx]), args.chunk_elems)
                for chunk in chunks:
                    f.write(chunk.tobytes())  # numpy is little-endian on x86/arm
                total_params += numel(shape)
        total_bytes += off
        print(f"wrote {path} ({off / 1e9:.3f} GB of tensor data, {len(idxs)} tensors)", file=sys.stderr)

    if nshard > 1:
        index = {"metadata": {"total_size": total_bytes, "total_parameters": total_params},
                 "weight_map": dict(sorted(weight_map.items()))}
        with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")

    print(f"{label}: {total_params / 1e6:.1f}M tensor elements, {total_bytes / 1e9:.3f} GB, "
          f"{nshard} shard(s), {time.time() - t0:.1f}s -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
