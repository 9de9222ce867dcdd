#!/usr/bin/env python3
"""Write config.json + manifest.json (tensor names and shapes) for the
benchmark-shape models of the hybrid and sparse families, as transformers
builds them (on the meta device: no weights are made here).

Runs where torch + transformers are installed (the GPU machine):
  python3 scripts/make_bench_manifests.py --out DIR
then, on any machine, random bf16 weights for one of them:
  python3 scripts/make_random_model.py --manifest DIR/<name> --out MODEL_DIR

Shapes are the real configs' per-layer geometry. Models too large for the
2-core, 24 GiB benchmark machine keep their real layer shapes but fewer layers
(`slice` below); RESULTS.md says so next to every number.
"""

import argparse
import json
import os

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import torch  # noqa: E402
import transformers  # noqa: E402

BENCH = [
    # Gemma 3 1B (google/gemma-3-1b-pt geometry), all 26 layers.
    dict(name="gemma3-1b", cls="Gemma3ForCausalLM", cfg="Gemma3TextConfig", slice=None,
         kw=dict(vocab_size=262144, hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
                 num_attention_heads=4, num_key_value_heads=1, head_dim=256, sliding_window=512,
                 query_pre_attn_scalar=256, max_position_embeddings=32768, tie_word_embeddings=True,
                 layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(26)],
                 rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})),
    # Gemma 4: Gemma4TextConfig's defaults (the e2b checkpoint it documents), 12 of 30 layers.
    dict(name="gemma4-default-12l", cls="Gemma4ForCausalLM", cfg="Gemma4TextConfig", slice="12 of 30 layers",
         kw=dict(num_hidden_layers=12,
                 layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(12)])),
    # Qwen3.5: Qwen3_5TextConfig's defaults (hidden 4096, 16 heads of 256, DeltaNet 16 key / 32 value heads
    # of 128), 4 of 32 layers (3 linear + 1 full, the real 3:1 pattern).
    dict(name="qwen3.5-default-4l", cls="Qwen3_5ForCausalLM", cfg="Qwen3_5TextConfig", slice="4 of 32 layers",
         kw=dict(num_hidden_layers=4,
                 layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"])),
    # Qwen3-Next-80B-A3B (Qwen3NextConfig defaults: 512 experts, top-10, shared expert), 4 of 48 layers.
    dict(name="qwen3-next-80b-a3b-4l", cls="Qwen3NextForCausalLM", cfg="Qwen3NextConfig", slice="4 of 48 layers",
         kw=dict(num_hidden_layers=4,
                 layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"])),
    # Qwen3-30B-A3B geometry (128 experts, top-8, moe 768, 32 q / 4 kv heads of 128), 4 of 48 layers.
    *[dict(name=f"qwen3-30b-a3b-{n}l", cls="Qwen3MoeForCausalLM", cfg="Qwen3MoeConfig", slice=f"{n} of 48 layers",
           kw=dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
                   num_hidden_layers=n, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                   num_experts=128, num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1,
                   max_position_embeddings=40960, tie_word_embeddings=False,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}))
      # 4 layers for the CPU machine; 12 (15 GB) for the GPU's decode, a quarter of the model's depth.
      for n in (4, 12)],
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    for b in BENCH:
        cfg = getattr(transformers, b["cfg"])(**b["kw"])
        with torch.device("meta"):
            model = getattr(transformers, b["cls"])(cfg)
        d = os.path.join(a.out, b["name"])
        os.makedirs(d, exist_ok=True)
        cfg.save_pretrained(d)
        tensors = [[k, list(v.shape)] for k, v in model.state_dict().items()]
        tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
        if tied:
            tensors = [t for t in tensors if t[0] != "lm_head.weight"]
        params = sum(torch.Size(s).numel() for _, s in tensors)
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump({"slice": b["slice"], "parameters": params, "tensors": tensors}, f, indent=0)
        print(f"{b['name']}: {params / 1e9:.2f}B parameters, {len(tensors)} tensors, slice: {b['slice']}", flush=True)


if __name__ == "__main__":
    main()
