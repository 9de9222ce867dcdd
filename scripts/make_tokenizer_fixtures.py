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
           encodings that cut multi-byte characters apart.

Every string of the corpus is made here, deterministically (random.Random(seed)).
Usage (needs transformers + tokenizers; run where they are installed):
  python3 scripts/make_tokenizer_fixtures.py --tokenizers .cache/tokenizers --out tests/fixtures/tokenizer

The committed fixtures were made on the GPU machine (transformers 5.17.0, tokenizers
0.23.2, CPU only): .cache/tokenizers was carried there as a tar.xz under .cache/ (an
ignored path), unpacked to /tmp, and this script wrote its output to $OUT.
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

NAMES = ["qwen3", "llama3_1", "gemma3"]

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


def make_one(name, folder, out_dir):
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

    rng = random.Random({"qwen3": 1, "llama3_1": 2, "gemma3": 3}[name])
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
        out_decode.append(d)

    # id_to_token / token_to_id for a sample of ids (ends of the vocabulary, added tokens).
    probe_ids = sorted(set([0, 1, 2, 3, 100, 1000, meta["raw_vocab_size"] - 1, meta["raw_vocab_size"],
                            meta["raw_vocab_size_with_added"] - 1] + meta["all_special_ids"][:20]))
    tokens = {str(i): raw.id_to_token(i) for i in probe_ids if i < meta["raw_vocab_size_with_added"]}

    fixture = {"meta": meta, "cases": cases, "decode_cases": out_decode, "id_to_token": tokens}
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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenizers", default=".cache/tokenizers", help="folder with one subfolder per tokenizer")
    p.add_argument("--out", default="tests/fixtures/tokenizer")
    p.add_argument("--only", nargs="*", default=NAMES)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    for name in args.only:
        try:
            make_one(name, os.path.join(args.tokenizers, name), args.out)
        except Exception as e:  # keep going: one broken tokenizer must not lose the others
            import traceback

            traceback.print_exc()
            print(f"{name}: FAILED: {e}", flush=True)
            failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
