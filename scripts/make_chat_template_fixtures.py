#!/usr/bin/env python3
"""Generate chat-template fixtures for fathom's Jinja interpreter tests.

Every fixture is a folder tests/fixtures/chat_template/<template>/ holding
  tokenizer_config.json     the chat template (verbatim) and the special tokens
                            passed to it; ChatTemplate::from_model_dir reads it
  cases/<NN_name>.request.json    what `fathom chat-template --request` takes:
                            messages, tools, add_generation_prompt, chat_template_kwargs
  cases/<NN_name>.expected.txt    the exact rendering by transformers'
                            apply_chat_template(..., tokenize=False)
  cases/<NN_name>.expected_error.json   instead of .expected.txt when transformers
                            raised (type and message)
and tests/fixtures/chat_template/fixtures.json records versions and provenance.

Two steps:

  prepare  (no transformers needed) writes each <template>/tokenizer_config.json:
           qwen3 and gemma3 from the real tokenizer folders that
           scripts/fetch_tokenizers.sh puts in .cache/tokenizers; llama3_1 is the
           real Meta-Llama-3.1-8B-Instruct template (the npm tokenizer folder
           carries the older Llama 3 template), taken from a folder of verbatim
           Hugging Face templates such as llama.cpp's models/templates, which also
           supplies the "same kind" templates listed in EXTRA_TEMPLATES.
             python3 scripts/make_chat_template_fixtures.py prepare \\
                 --hf-templates ~/llama.cpp/models/templates

  render   (where transformers is installed: the GPU machine) renders every case.
           The three primary templates go through AutoTokenizer.from_pretrained on
           the real tokenizer folder and apply_chat_template(chat_template=...),
           so the special tokens are exactly what transformers passes; the others
           through transformers' own template rendering function with the special
           tokens of their tokenizer_config.json. strftime_now is pinned to
           2024-07-26 12:34:56 (TZ=UTC) so templates that print the date are stable.
             TZ=UTC python3 scripts/make_chat_template_fixtures.py render \\
                 --tokenizers .cache/tokenizers
"""

import argparse
import datetime
import inspect
import json
import os
import shutil
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "tests", "fixtures", "chat_template")
FIXED_NOW = datetime.datetime(2024, 7, 26, 12, 34, 56)
FIXED_EPOCH = 1721997296  # FIXED_NOW in UTC

PRIMARY = ["qwen3", "llama3_1", "gemma3"]

# "Templates of the same kind": name -> (file in the HF template folder, special tokens)
EXTRA_TEMPLATES = {
    "llama3_2": ("meta-llama-Llama-3.2-3B-Instruct.jinja",
                 {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "llama3_3": ("meta-llama-Llama-3.3-70B-Instruct.jinja",
                 {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "qwen2_5": ("Qwen-Qwen2.5-7B-Instruct.jinja", {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "qwq": ("Qwen-QwQ-32B.jinja", {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "qwen3_coder": ("Qwen3-Coder.jinja", {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "mistral_nemo": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", {"bos_token": "<s>", "eos_token": "</s>"}),
    "hermes3_tool_use": ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
                         {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"}),
    "deepseek_r1_qwen": ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
                         {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}),
    "gemma2": ("google-gemma-2-2b-it.jinja", {"bos_token": "<bos>", "eos_token": "<eos>"}),
    "phi3_5": ("microsoft-Phi-3.5-mini-instruct.jinja", {"bos_token": "<s>", "eos_token": "<|endoftext|>"}),
    "smollm3": ("HuggingFaceTB-SmolLM3-3B.jinja", {"eos_token": "<|im_end|>"}),
    "gpt_oss": ("openai-gpt-oss-120b.jinja", {"eos_token": "<|return|>"}),
    "functionary_v3_1": ("meetkai-functionary-medium-v3.1.jinja",
                         {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "granite3_3": ("ibm-granite-granite-3.3-2B-Instruct.jinja", {"eos_token": "<|end_of_text|>"}),
}

# --------------------------------------------------------------------------
# Conversations
# --------------------------------------------------------------------------
WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather in a city. Temperatures in °C.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search",
    "description": "Search the web.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "default": 5}},
        "required": ["query"]}}}
CALL_WEATHER = {"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}}
CALL_SEARCH = {"id": "call_2", "type": "function",
               "function": {"name": "search", "arguments": {"query": "weather \"today\"", "limit": 3}}}
CALL_STRING_ARGS = {"id": "call_3", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}


def user(c):
    return {"role": "user", "content": c}


def assistant(c, **kw):
    return dict({"role": "assistant", "content": c}, **kw)


def system(c):
    return {"role": "system", "content": c}


def tool(c, **kw):
    return dict({"role": "tool", "content": c}, **kw)


def case(name, messages, tools=None, add_generation_prompt=True, **kwargs):
    req = {"messages": messages}
    if tools is not None:
        req["tools"] = tools
    req["add_generation_prompt"] = add_generation_prompt
    if kwargs:
        req["chat_template_kwargs"] = kwargs
    return name, req


def qwen3_cases():
    return [
        case("user_only", [user("Hello!")]),
        case("system_user", [system("You are a helpful assistant."), user("What is 2+2?")]),
        case("multi_turn", [system("Be brief."), user("Hi"), assistant("Hello! How can I help?"),
                            user("Tell me a joke.")]),
        case("no_generation_prompt", [user("Hi"), assistant("Hello there.")], add_generation_prompt=False),
        case("thinking_off", [user("What is the capital of France?")], enable_thinking=False),
        case("thinking_on", [system("Think step by step."), user("What is 17*3?")], enable_thinking=True),
        case("tools_definitions", [system("You are a weather bot."), user("Weather in Zürich?")],
             tools=[WEATHER, SEARCH]),
        case("tool_call_and_result", [user("Weather in Zürich?"), assistant("", tool_calls=[CALL_WEATHER]),
                                      tool("{\"temp\": 21, \"sky\": \"sunny\"}"), assistant("It is 21 °C and sunny."),
                                      user("Thanks!")], tools=[WEATHER]),
        case("parallel_tool_calls", [user("Weather and news?"), assistant("Checking both.",
                                     tool_calls=[CALL_WEATHER, CALL_SEARCH]), tool("21C"), tool("[]")],
             tools=[WEATHER, SEARCH]),
        case("tool_call_string_arguments", [user("Paris?"), assistant("", tool_calls=[CALL_STRING_ARGS]),
                                            tool("18C")], tools=[WEATHER], enable_thinking=False),
        case("reasoning_content_history", [user("What is 17*3?"), assistant("51", reasoning_content="17*3 = 51."),
                                           user("And 18*3?")]),
        case("reasoning_after_last_query", [user("Weather in Zürich?"),
                                            assistant("", reasoning_content="I should call the tool.",
                                                      tool_calls=[CALL_WEATHER]),
                                            tool("21C")], tools=[WEATHER]),
        case("inline_think_content", [user("What is 17*3?"), assistant("<think>\nMultiply 17 by 3.\n</think>\n\n51"),
                                      user("ok")]),
        case("inline_think_last_no_prompt", [user("What is 17*3?"),
                                             assistant("<think>\nMultiply.\n</think>\n\n51")],
             add_generation_prompt=False),
        case("tool_response_in_user_message", [user("Hi"), assistant("Calling.", tool_calls=[CALL_WEATHER]),
                                               user("<tool_response>\n21C\n</tool_response>")], tools=[WEATHER]),
        case("unicode_whitespace", [system("  Système : répondez en français.  \n"), user("  Ça va ? 😀\n\n"),
                                    assistant("  Oui.  "), user("你好")]),
        case("error_array_content", [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                                     assistant("Hello."), user("x")]),
    ]


def llama3_1_cases():
    return [
        case("user_only", [user("Hello!")]),
        case("system_user", [system("You are a helpful assistant."), user("What is 2+2?")]),
        case("multi_turn", [system("Be brief."), user("Hi"), assistant("Hello! How can I help?"),
                            user("Tell me a joke.")]),
        case("no_generation_prompt", [user("Hi"), assistant("Hello there.")], add_generation_prompt=False),
        case("tools_in_user_message", [system("You are a weather bot."), user("Weather in Zürich?")],
             tools=[WEATHER, SEARCH]),
        case("tools_in_system_message", [system("You are a weather bot."), user("Weather in Zürich?")],
             tools=[WEATHER], tools_in_user_message=False),
        case("tool_call_and_result", [user("Weather in Zürich?"), assistant(None, tool_calls=[CALL_WEATHER]),
                                      tool("{\"temp\": 21}"), assistant("It is 21 °C."), user("Thanks!")],
             tools=[WEATHER]),
        case("tool_result_mapping", [user("Weather?"), assistant(None, tool_calls=[CALL_WEATHER]),
                                     tool({"temp": 21, "sky": "sunny"})], tools=[WEATHER]),
        case("date_string", [system("Today matters."), user("What day is it?")], date_string="01 Jan 2025"),
        case("builtin_tools", [system("You are helpful."), user("Search the news."),
                               assistant(None, tool_calls=[{"type": "function", "function": {
                                   "name": "brave_search", "arguments": {"query": "news"}}}]),
                               {"role": "ipython", "content": "No news."}],
             builtin_tools=["brave_search", "wolfram_alpha", "code_interpreter"]),
        case("custom_tools", [user("Weather?")], custom_tools=[SEARCH]),
        case("unicode_whitespace", [system("  Système : répondez en français.  \n"), user("  Ça va ? 😀\n\n"),
                                    assistant("  Oui.  "), user("你好")]),
        case("error_two_tool_calls", [user("Weather and news?"),
                                      assistant(None, tool_calls=[CALL_WEATHER, CALL_SEARCH])], tools=[WEATHER, SEARCH]),
        case("error_tools_without_user", [system("sys")], tools=[WEATHER]),
    ]


def gemma3_cases():
    parts = lambda *texts: [{"type": "text", "text": t} for t in texts]
    return [
        case("user_only", [user("Hello!")]),
        case("system_user", [system("You are a helpful assistant."), user("What is 2+2?")]),
        case("multi_turn", [system("Be brief."), user("Hi"), assistant("Hello! How can I help?"),
                            user("Tell me a joke.")]),
        case("no_generation_prompt", [user("Hi"), assistant("Hello there.")], add_generation_prompt=False),
        case("content_parts", [{"role": "user", "content": parts("Describe ", " this picture. ")}]),
        case("content_parts_with_image", [{"role": "user", "content": [{"type": "image", "url": "cat.png"},
                                                                      {"type": "text", "text": "What is this?"}]}]),
        case("system_parts", [{"role": "system", "content": parts("System in parts.")},
                              {"role": "user", "content": parts("Hi")}]),
        case("assistant_parts", [user("Hi"), {"role": "assistant", "content": parts("Hello", " there")}, user("Bye")]),
        case("long_conversation", [user("One"), assistant("1"), user("Two"), assistant("2"), user("Three"),
                                   assistant("3"), user("Four")]),
        case("unicode_whitespace", [system("  Système : répondez en français.  \n"), user("  Ça va ? 😀\n\n"),
                                    assistant("  Oui.  "), user("你好")]),
        case("error_roles_not_alternating", [user("a"), user("b")]),
        case("error_assistant_first", [system("sys"), assistant("hi")]),
    ]


def generic_cases():
    """The same conversations for every extra template; errors are kept as expected errors."""
    return [
        case("user_only", [user("Hello!")]),
        case("system_user", [system("You are a helpful assistant."), user("What is 2+2?")]),
        case("multi_turn", [system("Be brief."), user("Hi"), assistant("Hello! How can I help?"),
                            user("Tell me a joke.")]),
        case("no_generation_prompt", [user("Hi"), assistant("Hello there.")], add_generation_prompt=False),
        case("tools_user", [user("Weather in Zürich?")], tools=[WEATHER, SEARCH]),
        case("tool_call_flow", [user("Weather in Zürich?"), assistant("", tool_calls=[CALL_WEATHER]),
                                tool("{\"temp\": 21}", tool_call_id="call_1", name="get_weather"),
                                assistant("It is 21 °C."), user("Thanks!")], tools=[WEATHER]),
        case("parallel_tool_calls", [user("Weather and news?"), assistant(None, tool_calls=[CALL_WEATHER, CALL_SEARCH]),
                                     tool("21C", tool_call_id="call_1"), tool("[]", tool_call_id="call_2")],
             tools=[WEATHER, SEARCH]),
        case("reasoning_content", [user("What is 17*3?"), assistant("51", reasoning_content="17*3 = 51."),
                                   user("And 18*3?")]),
        case("thinking_off", [user("Hi")], enable_thinking=False),
        case("content_parts", [{"role": "user", "content": [{"type": "text", "text": "Describe this."}]}]),
        case("unicode_whitespace", [system("  Système : répondez en français.  \n"), user("  Ça va ? 😀\n\n"),
                                    assistant("  Oui.  "), user("你好")]),
    ]


CASES = {"qwen3": qwen3_cases, "llama3_1": llama3_1_cases, "gemma3": gemma3_cases}

# --------------------------------------------------------------------------
# prepare
# --------------------------------------------------------------------------
SPECIAL_KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


def token_text(v):
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]
    return None


def special_tokens_of(cfg):
    """The tokens transformers 5 passes to templates: the named ones, the entries of an
    extra_special_tokens dict, and any other top-level *_token string (model-specific tokens)."""
    specials = {k: token_text(cfg.get(k)) for k in SPECIAL_KEYS}
    extra = cfg.get("extra_special_tokens")
    if isinstance(extra, dict):
        specials.update({k: token_text(v) for k, v in extra.items()})
    for k, v in cfg.items():
        if k.endswith("_token") and k not in specials and token_text(v) is not None:
            specials[k] = token_text(v)
    return specials


def write_config(out, name, template, specials, provenance):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    cfg = {"chat_template": template}
    cfg.update({k: v for k, v in specials.items() if v is not None})
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    return {"name": name, "source": provenance, "special_tokens": {k: v for k, v in specials.items() if v is not None}}


def prepare(args):
    out = args.out
    index = []
    for name in ["qwen3", "gemma3", "llama3_1"]:
        with open(os.path.join(args.tokenizers, name, "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        specials = special_tokens_of(cfg)
        if name == "llama3_1":
            path = os.path.join(args.hf_templates, "meta-llama-Llama-3.1-8B-Instruct.jinja")
            with open(path, encoding="utf-8") as f:
                template = f.read()
            prov = "meta-llama/Llama-3.1-8B-Instruct chat template (verbatim copy: " + os.path.basename(path) + ")"
        else:
            template = cfg["chat_template"]
            with open(os.path.join(args.tokenizers, name, ".npm-version"), encoding="utf-8") as f:
                prov = "tokenizer_config.json of " + f.read().strip()
        index.append(write_config(out, name, template, specials, prov))
    for name, (fname, specials) in EXTRA_TEMPLATES.items():
        with open(os.path.join(args.hf_templates, fname), encoding="utf-8") as f:
            template = f.read()
        index.append(write_config(out, name, template, specials, "Hugging Face chat template (verbatim copy: " + fname + ")"))
    with open(os.path.join(out, "templates.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print("prepare: wrote", len(index), "templates to", out)


# --------------------------------------------------------------------------
# render
# --------------------------------------------------------------------------
def fixed_strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


def pin_clock(ctu):
    """Make transformers' strftime_now return FIXED_NOW."""
    class FixedDatetime(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED_NOW

    if getattr(ctu, "datetime", None) is datetime.datetime:
        ctu.datetime = FixedDatetime
    elif getattr(ctu, "datetime", None) is datetime:
        class Module:
            pass
        m = Module()
        for k in dir(datetime):
            if not k.startswith("__"):
                setattr(m, k, getattr(datetime, k))
        m.datetime = FixedDatetime
        ctu.datetime = m


def compile_template(ctu, source):
    tmpl = ctu._compile_jinja_template(source)
    tmpl.environment.globals["strftime_now"] = fixed_strftime_now
    return tmpl


def render_with_function(ctu, source, specials, req):
    """transformers' render_jinja_template, or its compiled template as render_jinja_template calls it."""
    tmpl = compile_template(ctu, source)
    kwargs = dict(specials)
    kwargs.update(req.get("chat_template_kwargs", {}))
    if hasattr(ctu, "render_jinja_template"):
        rendered, _ = ctu.render_jinja_template(
            conversations=[req["messages"]], tools=req.get("tools"), chat_template=source,
            add_generation_prompt=req["add_generation_prompt"], **kwargs)
        return rendered[0]
    return tmpl.render(messages=req["messages"], tools=req.get("tools"), documents=None,
                       add_generation_prompt=req["add_generation_prompt"], **kwargs)


def apply_chat_template(tok, ctu, source, req):
    compile_template(ctu, source)  # pins strftime_now in the cached environment
    text = tok.apply_chat_template(
        req["messages"], tools=req.get("tools"), tokenize=False,
        add_generation_prompt=req["add_generation_prompt"], chat_template=source,
        **req.get("chat_template_kwargs", {}))
    if isinstance(text, list) and len(text) == 1:
        text = text[0]
    if not isinstance(text, str):
        raise RuntimeError(f"apply_chat_template returned {type(text).__name__}, not str")
    return text


def render(args):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if os.environ.get("TZ") != "UTC":
        print("render: run with TZ=UTC (strftime_now is pinned to", FIXED_NOW, "local time)", file=sys.stderr)
    import jinja2
    import transformers
    from transformers import AutoTokenizer
    import transformers.utils.chat_template_utils as ctu

    pin_clock(ctu)
    probe = render_with_function(ctu, "{{ strftime_now('%Y-%m-%d %H:%M:%S') }}", {},
                                 {"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": False})
    clock_pinned = probe == FIXED_NOW.strftime("%Y-%m-%d %H:%M:%S")
    if not clock_pinned:
        print(f"render: strftime_now could not be pinned ({probe!r}); skipping templates that call it", file=sys.stderr)

    out = args.out
    with open(os.path.join(out, "templates.json"), encoding="utf-8") as f:
        index = json.load(f)
    info = {
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "python": sys.version.split()[0],
        "strftime_now": FIXED_NOW.isoformat(sep=" "),
        "strftime_now_epoch_utc": FIXED_EPOCH,
        "strftime_now_pinned": clock_pinned,
        "templates": {},
    }
    for entry in index:
        name = entry["name"]
        folder = os.path.join(out, name)
        with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        source = cfg["chat_template"]
        if not clock_pinned and "strftime_now" in source:
            info["templates"][name] = {"skipped": "calls strftime_now, which could not be pinned"}
            continue
        specials = {k: v for k, v in special_tokens_of(cfg).items() if v is not None}
        cases = CASES.get(name, generic_cases)()
        tok = None
        how = "transformers.utils.chat_template_utils render function, special tokens of tokenizer_config.json"
        if name in PRIMARY and args.tokenizers:
            try:
                tok = AutoTokenizer.from_pretrained(os.path.join(args.tokenizers, name))
                how = "AutoTokenizer.from_pretrained(real tokenizer folder).apply_chat_template(chat_template=...)"
            except Exception as e:  # noqa: BLE001
                print(f"render: {name}: AutoTokenizer failed ({e}); using the render function", file=sys.stderr)
        tinfo = {"renderer": how, "cases": 0, "errors": 0}
        if tok is not None:
            try:
                stm = {k: v for k, v in tok.special_tokens_map.items()}
            except Exception as e:  # noqa: BLE001
                stm = {"<error>": repr(e)}
            tinfo["special_tokens_map"] = stm
            mismatch = {k: v for k, v in stm.items() if isinstance(v, str) and specials.get(k) != v}
            missing = {k: v for k, v in specials.items() if stm.get(k) != v}
            if mismatch or missing:
                tinfo["special_tokens_differ_from_config"] = {"tokenizer_only": mismatch, "config_only": missing}
        case_dir = os.path.join(folder, "cases")
        shutil.rmtree(case_dir, ignore_errors=True)
        os.makedirs(case_dir)
        for i, (cname, req) in enumerate(cases):
            stem = os.path.join(case_dir, f"{i:02d}_{cname}")
            with open(stem + ".request.json", "w", encoding="utf-8") as f:
                json.dump(req, f, ensure_ascii=False, indent=2)
                f.write("\n")
            try:
                if tok is not None:
                    text = apply_chat_template(tok, ctu, source, req)
                    check = None
                    try:
                        check = render_with_function(ctu, source, specials, req)
                    except Exception as e:  # noqa: BLE001
                        check = f"<render function raised {type(e).__name__}: {e}>"
                    if check != text:
                        tinfo.setdefault("render_function_differs", []).append(cname)
                else:
                    text = render_with_function(ctu, source, specials, req)
                with open(stem + ".expected.txt", "w", encoding="utf-8", newline="") as f:
                    f.write(text)
                tinfo["cases"] += 1
            except Exception as e:  # noqa: BLE001
                with open(stem + ".expected_error.json", "w", encoding="utf-8") as f:
                    json.dump({"type": type(e).__name__, "message": str(e)}, f, ensure_ascii=False, indent=2)
                    f.write("\n")
                tinfo["errors"] += 1
        info["templates"][name] = tinfo
        print(f"render: {name}: {tinfo['cases']} renderings, {tinfo['errors']} expected errors ({how})")
    with open(os.path.join(out, "fixtures.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, ensure_ascii=False, indent=2)
        f.write("\n")
    if args.dump_sources:  # for reviewing what transformers passes to templates
        os.makedirs(args.dump_sources, exist_ok=True)
        try:
            from transformers import PreTrainedTokenizerBase
            for mod in (ctu, sys.modules[PreTrainedTokenizerBase.__module__]):
                with open(os.path.join(args.dump_sources, mod.__name__.split(".")[-1] + ".py"), "w") as f:
                    f.write(inspect.getsource(mod))
        except Exception:  # noqa: BLE001
            traceback.print_exc()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="step", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--tokenizers", default=os.path.join(HERE, "..", ".cache", "tokenizers"))
    pp.add_argument("--hf-templates", required=True, help="folder of verbatim HF templates (llama.cpp models/templates)")
    pp.add_argument("--out", default=DEFAULT_OUT)
    pr = sub.add_parser("render")
    pr.add_argument("--tokenizers", default=os.path.join(HERE, "..", ".cache", "tokenizers"),
                    help="real tokenizer folders qwen3/ llama3_1/ gemma3/ (scripts/fetch_tokenizers.sh)")
    pr.add_argument("--out", default=DEFAULT_OUT)
    pr.add_argument("--dump-sources", help="also write transformers' chat template code here")
    args = p.parse_args()
    try:
        prepare(args) if args.step == "prepare" else render(args)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
