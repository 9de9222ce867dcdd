#!/usr/bin/python3
"""Write a Hugging Face dense Qwen3 / Llama folder as a bf16 GGUF, for llama.cpp side by side.

Usage:
    PYTHONPATH=<llama.cpp>/gguf-py /usr/bin/python3 bench/hf_to_gguf.py --model DIR --out F.gguf
        [--tokenizer DIR]

Only for the speed comparisons in bench/compare_llama_cpp.sh: llama.cpp's own converter
needs torch and transformers, which neither Debian 12 nor npm provides. This writes the
same file for the architectures compared here: the hyperparameters llama.cpp reads, the
BPE vocabulary (tokens padded to the config's vocab_size, special added tokens as
control tokens, merges), matrices as bf16 and 1-D tensors as f32, tensor names through
gguf-py's own Hugging Face name map. The quantized GGUFs are then made with llama.cpp's
`llama-quantize`, as its users make them. Weights must be bf16 (or f32) safetensors;
`--tokenizer` names the folder with tokenizer.json when the model folder has none (the
random-weight folders of scripts/make_random_model.py).
"""

import argparse
import json
import os
import struct
import sys

import numpy as np
import gguf

ARCHES = {
    "qwen3": (gguf.MODEL_ARCH.QWEN3, "qwen2"),
    "llama": (gguf.MODEL_ARCH.LLAMA, "llama-bpe"),
}


def read_safetensors(folder):
    """Yield (name, dtype string, shape, numpy view) of every tensor in the folder's shards."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    for name in files:
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(header_len))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
        for tensor, meta in header.items():
            if tensor == "__metadata__":
                continue
            begin, end = meta["data_offsets"]
            dtype = {"BF16": np.uint16, "F32": np.float32}.get(meta["dtype"])
            if dtype is None:
                sys.exit(f"hf_to_gguf: tensor {tensor} has dtype {meta['dtype']}; only BF16 and F32 are converted")
            yield tensor, meta["dtype"], meta["shape"], data[begin:end].view(dtype).reshape(meta["shape"])


def bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def add_vocabulary(writer, tokenizer_dir, vocab_size, pre):
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    if tokenizer["model"]["type"] != "BPE":
        sys.exit(f"hf_to_gguf: tokenizer model {tokenizer['model']['type']} is not BPE")
    by_id = {i: (text, gguf.TokenType.NORMAL) for text, i in tokenizer["model"]["vocab"].items()}
    for added in tokenizer.get("added_tokens", []):
        kind = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
        by_id[added["id"]] = (added["content"], kind)
    if max(by_id) >= vocab_size:
        sys.exit(f"hf_to_gguf: token id {max(by_id)} is outside vocab_size {vocab_size}")
    tokens, types = [], []
    for i in range(vocab_size):
        text, kind = by_id.get(i, (f"[PAD{i}]", gguf.TokenType.UNUSED))
        tokens.append(text)
        types.append(kind)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    gguf.SpecialVocab(tokenizer_dir, load_merges=True, n_vocab=vocab_size).add_to_gguf(writer)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokenizer", help="folder with tokenizer.json (default: --model)")
    args = parser.parse_args()

    with open(os.path.join(args.model, "config.json")) as f:
        config = json.load(f)
    model_type = config.get("model_type")
    if model_type not in ARCHES:
        sys.exit(f"hf_to_gguf: model_type {model_type!r} is not one of {sorted(ARCHES)}")
    arch, pre = ARCHES[model_type]
    layers = config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim", config["hidden_size"] // heads)

    writer = gguf.GGUFWriter(args.out, gguf.MODEL_ARCH_NAMES[arch])
    writer.add_name(os.path.basename(os.path.normpath(args.model)))
    writer.add_block_count(layers)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(config.get("num_key_value_heads", heads))
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    rope = config.get("rope_parameters") or {}
    writer.add_rope_freq_base(float(rope.get("rope_theta", config.get("rope_theta", 10000.0))))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    add_vocabulary(writer, args.tokenizer or args.model, config["vocab_size"], pre)

    names = gguf.get_tensor_name_map(arch, layers)
    for hf_name, dtype, shape, data in read_safetensors(args.model):
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            sys.exit(f"hf_to_gguf: no GGUF name for tensor {hf_name}")
        if len(shape) == 1 or dtype == "F32":
            values = bf16_bits_to_f32(data) if dtype == "BF16" else np.asarray(data)
            writer.add_tensor(name, np.ascontiguousarray(values, dtype=np.float32))
        else:
            writer.add_tensor(name, data, raw_dtype=gguf.GGMLQuantizationType.BF16)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
