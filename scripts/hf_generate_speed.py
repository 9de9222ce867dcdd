#!/usr/bin/python3
"""Hugging Face transformers' own decode speed on a model folder, for comparison
with `fathom bench` in the same run on the GPU machine: greedy `generate` in
bf16 on the GPU after a prompt of random ids, timed with CUDA events.

Usage: python3 scripts/hf_generate_speed.py MODEL_DIR [--prompt-tokens 512] [--gen-tokens 64] [--repeat 3]
Prints one JSON line: prompt_tokens, gen_tokens, decode_tok_s (median), prefill_tok_s (median).
"""
import argparse
import json
import statistics

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16).cuda().eval()
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (1, a.prompt_tokens), device="cuda")
    decode, prefill = [], []
    with torch.no_grad():
        model.generate(ids, max_new_tokens=4, do_sample=False, min_new_tokens=4)  # warm up
        for _ in range(a.repeat):
            start, mid, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            start.record()
            model(ids)
            mid.record()
            model.generate(ids, max_new_tokens=a.gen_tokens, min_new_tokens=a.gen_tokens, do_sample=False)
            end.record()
            torch.cuda.synchronize()
            prefill_s = start.elapsed_time(mid) / 1000
            # generate = one prefill plus gen_tokens − 1 decode steps.
            decode_s = mid.elapsed_time(end) / 1000 - prefill_s
            prefill.append(a.prompt_tokens / prefill_s)
            decode.append((a.gen_tokens - 1) / decode_s)
    print(json.dumps({"engine": "transformers", "prompt_tokens": a.prompt_tokens, "gen_tokens": a.gen_tokens,
                      "decode_tok_s": statistics.median(decode), "prefill_tok_s": statistics.median(prefill)}))


if __name__ == "__main__":
    main()
