#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ from the repository's
fixtures, the real tokenizers in .cache/tokenizers (scripts/fetch_tokenizers.sh)
and a few hand-written edge cases. Run from anywhere; rerun after changing it.
Files named crash-* (found crashes, kept as regressions) are left alone."""
import glob
import json
import os
import struct

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
FIX = os.path.join(ROOT, "tests", "fixtures")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def clear(target):
    d = os.path.join(CORPUS, target)
    for f in glob.glob(os.path.join(d, "*")):
        if not os.path.basename(f).startswith("crash-"):
            os.remove(f)


# --- fuzz_safetensors_header ---------------------------------------------------
def safetensors(header, data=b"", pad_to=8):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % pad_to)
    return struct.pack("<Q", len(h)) + h + data


clear("fuzz_safetensors_header")
put("fuzz_safetensors_header", "two_tensors", safetensors(
    {"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
     "b": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [8, 16]}}, bytes(16)))
put("fuzz_safetensors_header", "empty_shape", safetensors(
    {"z": {"dtype": "F16", "shape": [0, 3], "data_offsets": [0, 0]},
     "s": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}}, bytes(8)))
put("fuzz_safetensors_header", "all_dtypes", safetensors(
    {d: {"dtype": d, "shape": [1], "data_offsets": [0, n]} for d, n in
     [("F64", 8), ("F32", 4), ("F16", 2), ("BF16", 2), ("I64", 8), ("I32", 4), ("I16", 2), ("I8", 1),
      ("U8", 1), ("BOOL", 1), ("F8_E4M3", 1), ("F8_E5M2", 1), ("U32", 4)]}, bytes(8)))
put("fuzz_safetensors_header", "wrapping_offsets", safetensors(
    {"w": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551612, 0]}}))
put("fuzz_safetensors_header", "huge_length_prefix", struct.pack("<Q", 1 << 62) + b"{}")
put("fuzz_safetensors_header", "truncated_header", struct.pack("<Q", 64) + b'{"a":{"dtype":"F32"')
put("fuzz_safetensors_header", "nested_metadata",
    safetensors({"__metadata__": {"x": [[[[{"y": "z"}]]]]}}))
for f in sorted(glob.glob(os.path.join(FIX, "parity", "*", "model.safetensors")))[:2]:
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        fh.seek(0)
        put("fuzz_safetensors_header", "real_header_" + os.path.basename(os.path.dirname(f)), fh.read(8 + n))

# --- fuzz_model_config -------------------------------------------------------------
clear("fuzz_model_config")
seen = set()
for f in sorted(glob.glob(os.path.join(FIX, "*", "*", "config.json")) +
                glob.glob(os.path.join(FIX, "*", "*", "generation_config.json"))):
    text = open(f, "rb").read()
    if text in seen:
        continue
    seen.add(text)
    parts = f.split(os.sep)
    put("fuzz_model_config", parts[-2] + "_" + parts[-1].replace(".json", ""), text)
put("fuzz_model_config", "edge_nested_text_config",
    '{"model_type":"gemma3","text_config":{"hidden_size":-1,"num_hidden_layers":1e308,"rope_scaling":{"rope_type":"yarn","factor":0}}}')
put("fuzz_model_config", "edge_eos_list", '{"eos_token_id":[1,2,-3,4294967296],"temperature":"hot","top_k":1.5}')
put("fuzz_model_config", "edge_layer_types",
    '{"model_type":"qwen3_next","layer_types":["full_attention","linear_attention",null],"num_hidden_layers":3}')

# --- fuzz_tokenizer / fuzz_tokenizer_encode ---------------------------------------
TEXTS = {
    "english": "Hello, world! It's a test of the tokenizer's BPE.\n",
    "code": "def f(x):\n    return x ** 2  # square\r\n\tprint(f(3))\n",
    "cjk_emoji": "你好，世界！こんにちは 🙂👍🏽 한국어",
    "combining": "e\u0301 A\u030a \ufb01 \u212b Ω ﬀ",
    "specials": "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "whitespace": "  \n\n\n   \t\t \u00a0\u3000 x   ",
    "digits": "1234567890 3.14159 -42 1e10",
}
clear("fuzz_tokenizer_encode")
for name, t in TEXTS.items():
    put("fuzz_tokenizer_encode", name, t)


def small_tokenizer(name, n_merges=120, n_added=8):
    path = os.path.join(ROOT, ".cache", "tokenizers", name, "tokenizer.json")
    if not os.path.exists(path):
        return None
    tok = json.load(open(path, encoding="utf-8"))
    model = tok["model"]
    vocab = model["vocab"]
    keep = {}
    for token, i in vocab.items():
        if (len(token) == 1 and (ord(token) < 0x180 or name != "gemma3")) or (token.startswith("<0x") and len(token) == 6) or token in ("<unk>", "<pad>"):
            keep[token] = i
    merges = []
    for m in model["merges"][:n_merges * 4]:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in keep and b in keep and a + b in vocab:
            keep[a + b] = vocab[a + b]
            merges.append(m)
            if len(merges) >= n_merges:
                break
    model["vocab"] = keep
    model["merges"] = merges
    special = set()
    post = json.dumps(tok.get("post_processor"))
    tok["added_tokens"] = [t for t in tok["added_tokens"]
                           if t["content"] in post or t["content"] in TEXTS["specials"]][:n_added] + \
        [t for t in tok["added_tokens"] if t["content"] not in post][:n_added]
    return json.dumps(tok, ensure_ascii=False, separators=(",", ":"))


clear("fuzz_tokenizer")
for name in ("qwen3", "llama3_1", "gemma3"):
    tj = small_tokenizer(name)
    if tj is None:
        continue
    cfg_path = os.path.join(ROOT, ".cache", "tokenizers", name, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8"))
    cfg = {k: v for k, v in cfg.items() if k not in ("added_tokens_decoder", "chat_template")}
    put("fuzz_tokenizer", name + "_english", tj + "\0" + TEXTS["english"])
    put("fuzz_tokenizer", name + "_mixed_cfg", tj + "\0" + TEXTS["cjk_emoji"] + TEXTS["specials"] + "\0" +
        json.dumps(cfg, ensure_ascii=False))
MINI = {
    "bpe_minimal": {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}},
    "bpe_unk_fuse": {"model": {"type": "BPE", "vocab": {"<unk>": 0, "a": 1, "b": 2, "ab": 3},
                               "merges": [["a", "b"]], "unk_token": "<unk>", "fuse_unk": True}},
    "normalizer_sequence": {
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": "▁"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
        "added_tokens": [{"id": 5, "content": "<s>", "special": True, "normalized": False, "lstrip": False,
                          "rstrip": False, "single_word": False}],
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}},
        "model": {"type": "BPE", "vocab": {"▁": 0, "a": 1, "b": 2, "▁a": 3, "<unk>": 4}, "merges": ["▁ a"],
                  "unk_token": "<unk>", "byte_fallback": False}},
    "split_digits_bytelevel": {
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]},
        "decoder": {"type": "Sequence", "decoders": [{"type": "ByteLevel"}, {"type": "Strip", "content": " ",
                                                                            "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "vocab": {"Ġ": 0, "a": 1, "1": 2, "Ġa": 3}, "merges": ["Ġ a"],
                  "ignore_merges": True}},
}
for name, tj in MINI.items():
    put("fuzz_tokenizer", name, json.dumps(tj, ensure_ascii=False) + "\0" + "ab a1 2 ÀB\u00a0\n")

# --- fuzz_jinja -------------------------------------------------------------------------
clear("fuzz_jinja")
for d in sorted(glob.glob(os.path.join(FIX, "chat_template", "*", "tokenizer_config.json"))):
    name = os.path.basename(os.path.dirname(d))
    src = json.load(open(d, encoding="utf-8"))["chat_template"]
    cases = sorted(glob.glob(os.path.join(os.path.dirname(d), "cases", "*.request.json")))
    # the richest case (tools, reasoning) is usually the largest request
    req = max(cases, key=os.path.getsize) if cases else None
    put("fuzz_jinja", name, src + ("\0" + open(req, encoding="utf-8").read() if req else ""))
SMALL_TEMPLATES = {
    "loop_filters": "{% for m in messages %}{{ loop.index }}:{{ m.role|upper }}={{ m.content|trim|replace('a','b')|length }}"
                    "{% if not loop.last %}, {% endif %}{% endfor %}{{ messages|map(attribute='role')|join('|') }}",
    "macro_call": "{% macro render(m, sep='\\n') %}<{{ m.role }}>{{ m.content }}{{ sep }}{% endmacro %}"
                  "{% for m in messages %}{{ render(m) }}{% endfor %}{% call render(messages[0]) %}x{% endcall %}",
    "namespace_set": "{% set ns = namespace(n=0, last='') %}{% for m in messages|reverse %}{% set ns.n = ns.n + 1 %}"
                     "{% if m.role == 'user' and ns.last == '' %}{% set ns.last = m.content %}{% endif %}{% endfor %}"
                     "{{ ns.n }} {{ ns.last }}{{ raise_exception('x') if ns.n > 99 }}",
    "tojson_dict": "{{ tools|tojson(indent=2) }}{% for k, v in {'a': 1, 'b': [1, 2]}.items()|sort %}{{ k }}{{ v|string }}"
                   "{% endfor %}{{ '%s-%d'|format('x', 3) }}{{ strftime_now('%Y-%m-%d') }}",
    "slices_tests": "{{ messages[-1].content[::-1] }}{{ messages[1:]|length }}{% if messages is defined and "
                    "messages[0].content is string %}{{ 'y' ~ 3 * 'ab' }}{% endif %}{{ (1, 2) + (3,) }}{{ range(5)|list }}",
    "whitespace_ctrl": "{%- for m in messages -%}\n  {{- m.content -}}\n{%- endfor %}\n{# comment #}{% raw %}{{ x }}{% endraw %}",
    "generation_block": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}"
                        "{% else %}{{ m.content }}{% endif %}{% break %}{% endfor %}",
    "deep_recursion": "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(100000) }}",
    "string_blowup": "{% set s = namespace(v='ab') %}{% for i in range(100) %}{% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v|length }}",
}
for name, src in SMALL_TEMPLATES.items():
    put("fuzz_jinja", name, src + "\0" + json.dumps({
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello a"},
                     {"role": "assistant", "content": "ok", "tool_calls": [
                         {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
                     {"role": "tool", "content": "{\"r\": 2}"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "add_generation_prompt": True, "enable_thinking": False}))

# --- fuzz_openai_request / fuzz_anthropic_request -------------------------------------------
clear("fuzz_openai_request")
OPENAI = {
    "chat_minimal": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "chat_full": {"model": "m", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
        "tools": [{"type": "function", "function": {"name": "get", "description": "d",
                                                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
        "tool_choice": "auto", "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 42,
        "max_tokens": 16, "max_completion_tokens": 32, "stop": ["\n\n", "END"], "presence_penalty": 0.5,
        "frequency_penalty": -0.5, "logit_bias": {"15": -100, "99": 5.5}, "logprobs": True, "top_logprobs": 5,
        "stream": True, "stream_options": {"include_usage": True}, "n": 1,
        "chat_template_kwargs": {"enable_thinking": False}, "reasoning_effort": "low"},
    "completion_text": {"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "stop": "\n", "echo": False},
    "completion_ids": {"model": "m", "prompt": [1, 2, 3, 151643], "temperature": 0, "logprobs": 3},
    "edge_types": {"messages": [{"role": "user", "content": "x"}], "temperature": "hot", "max_tokens": -1,
                   "stop": [""], "logit_bias": {"-1": 1e309}, "top_logprobs": 21},
}
for name, body in OPENAI.items():
    put("fuzz_openai_request", name, json.dumps(body, ensure_ascii=False))
put("fuzz_openai_request", "edge_deep", "{\"messages\":" + "[" * 70 + "]" * 70 + "}")
put("fuzz_openai_request", "edge_bad_utf8", b'{"messages":[{"role":"user","content":"\xff\xfe"}]}')

clear("fuzz_anthropic_request")
ANTHROPIC = {
    "minimal": {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
    "full": {"model": "m", "max_tokens": 64, "system": [{"type": "text", "text": "be nice"}],
             "messages": [{"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                          {"role": "assistant", "content": [{"type": "text", "text": "checking"},
                                                            {"type": "tool_use", "id": "t1", "name": "get", "input": {"city": "Oslo"}}]},
                          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                        "content": [{"type": "text", "text": "rain"}]}]}],
             "tools": [{"name": "get", "description": "d", "input_schema": {"type": "object"}}],
             "tool_choice": {"type": "auto"}, "stop_sequences": ["STOP"], "temperature": 1.0, "top_p": 0.95,
             "top_k": 10, "stream": True, "thinking": {"type": "enabled", "budget_tokens": 1024},
             "metadata": {"user_id": "u"}},
    "edge_types": {"max_tokens": "1", "messages": [{"role": "robot", "content": 5}], "system": 7,
                   "stop_sequences": "x"},
}
for name, body in ANTHROPIC.items():
    put("fuzz_anthropic_request", name, json.dumps(body, ensure_ascii=False))

# --- fuzz_tool_calls ------------------------------------------------------------------------------
clear("fuzz_tool_calls")
TOOL_OUT = {
    "qwen_one": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    "qwen_two_text": 'Let me check.\n<tool_call>\n{"name": "a", "arguments": "{\\"x\\": 1}"}\n</tool_call>\n'
                     '<tool_call>{"name": "b"}</tool_call>',
    "qwen_unclosed": '<tool_call>{"name": "a", "arguments": {"k": [1, {"z": null}]}}',
    "llama_python_tag": '<|python_tag|>{"name": "search", "parameters": {"q": "x;y"}}; {"name": "b", "parameters": {}}',
    "llama_bare": '  {"name": "f", "parameters": {"s": "}{\\"", "n": 1.5e3}}  ',
    "think_then_answer": "<think>\nplan: call </thin k>tool\n</think>\n\n  The answer is 4.",
    "think_unclosed": "  \n<think>still thinking <think> nested </",
    "no_tags": "plain answer with <b>html</b> and < think > lookalikes",
}
for name, t in TOOL_OUT.items():
    put("fuzz_tool_calls", name, t)

# --- fuzz_sse ---------------------------------------------------------------------------------------
clear("fuzz_sse")
put("fuzz_sse", "json_delta", '{"choices":[{"delta":{"content":"a\\n\\nb"},"index":0}]}')
put("fuzz_sse", "bad_utf8_newlines", b"data: x\n\n\xff\xc3(\r\n\xe2\x82")
put("fuzz_sse", "stops_overlap", "abcde\0cd\0\0xxabcdeyy")
put("fuzz_sse", "stops_prefix", "END\0</s>\0Hello </ world E EN END more")
put("fuzz_sse", "default_stops", "one\n two<|im_end|>three\n\n")
