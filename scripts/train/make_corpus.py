#!/usr/bin/env python3
"""Build the training corpus for fathom's small chat + draft model pair.

Stdlib only. Reads text that Debian packages install under permissive or
public-domain terms (see scripts/train/CORPUS.md for the licences):

  * wordnet-base  (/usr/share/wordnet/{index,data}.{noun,verb,adj,adv}),
    WordNet 3.0 licence (permissive, notice must be kept);
  * jargon-text   (/usr/share/doc/jargon-text/jargon.txt.gz), the Jargon File
    4.4.7, public domain.

Writes one gzip'd JSON-lines file; each line is one of
  {"kind": "chat", "split": "train"|"val", "q": ..., "a": ..., "src": ..., "term": ...}
  {"kind": "text", "split": "train"|"val", "text": ..., "src": ...}

The packages need not be installed: `--root DIR` reads them from a folder
where the .deb files were unpacked, e.g.

  apt-get download wordnet-base jargon-text
  for f in *.deb; do dpkg -x "$f" /tmp/debroot; done
  python3 scripts/train/make_corpus.py --root /tmp/debroot --out .corpus/corpus.jsonl.gz

The output is deterministic (fixed seed, sorted inputs).
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import re
import sys

POS_FILES = [("noun", "n"), ("verb", "v"), ("adj", "a"), ("adv", "r")]
POS_NAME = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}

QUESTION_TEMPLATES = [
    ("What does {w} mean?", 8),
    ("What is the meaning of {w}?", 2),
    ("Define {w}.", 2),
    ("What's the definition of {w}?", 1),
    ("Can you explain the word \"{w}\"?", 1),
    ("What does the word {w} mean?", 2),
]


def is_val(term):
    """Deterministic held-out split: 2% of terms."""
    h = hashlib.sha1(term.lower().encode("utf-8")).digest()
    return h[0] % 50 == 0


def parse_gloss(gloss):
    """Split a WordNet gloss into (definitions, examples)."""
    defs, exs = [], []
    for part in gloss.split(";"):
        part = part.strip()
        if not part:
            continue
        quoted = re.findall(r'"([^"]+)"', part)
        if quoted and part.startswith('"'):
            exs.extend(q.strip() for q in quoted)
        else:
            rest = re.sub(r'"[^"]*"', "", part).strip(" ,-")
            if rest:
                defs.append(rest)
            exs.extend(q.strip() for q in quoted)
    return defs, exs


def load_wordnet(wn_dir):
    synsets = {}  # (pos, offset) -> (words, defs, exs, ss_type)
    for name, pos in POS_FILES:
        with open(os.path.join(wn_dir, "data." + name), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue  # licence header
                head, _, gloss = line.partition(" | ")
                fields = head.split()
                offset, ss_type = fields[0], fields[2]
                w_cnt = int(fields[3], 16)
                words = []
                for i in range(w_cnt):
                    w = fields[4 + 2 * i]
                    w = re.sub(r"\([a-z]+\)$", "", w).replace("_", " ")
                    words.append(w)
                defs, exs = parse_gloss(gloss.strip())
                synsets[(pos, offset)] = (words, defs, exs, ss_type)
    index = []  # (lemma, pos, [offsets in sense order])
    for name, pos in POS_FILES:
        with open(os.path.join(wn_dir, "index." + name), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                fields = line.split()
                lemma = fields[0].replace("_", " ")
                synset_cnt = int(fields[2])
                offsets = fields[-synset_cnt:]
                index.append((lemma, pos, offsets))
    return synsets, index


def fmt_def(d):
    d = d.strip()
    return d[:1].lower() + d[1:] if d[:2] != d[:2].upper() else d


def wordnet_records(wn_dir, rng):
    synsets, index = load_wordnet(wn_dir)
    # group senses per lemma across parts of speech, keep WordNet's sense order
    by_lemma = {}
    for lemma, pos, offsets in index:
        by_lemma.setdefault(lemma, []).append((pos, offsets))
    qs, ws = zip(*QUESTION_TEMPLATES)
    out = []
    for lemma in sorted(by_lemma):
        if len(lemma) < 2 or not re.search(r"[a-z]", lemma):
            continue
        senses = []
        for pos, offsets in by_lemma[lemma]:
            for off in offsets[:2]:
                words, defs, exs, ss_type = synsets[(pos, off)]
                if defs:
                    senses.append((POS_NAME[ss_type], defs, exs, words))
        if not senses:
            continue
        # order: the part of speech with most senses first (noun usually)
        senses = senses[:3]
        pos0, defs0, exs0, words0 = senses[0]
        # WordNet's index is lower case; take the synset's own spelling (proper nouns)
        w = next((x for x in words0 if x.lower() == lemma), lemma)
        if pos0 == "verb":
            first = f"To {w} means to {fmt_def(defs0[0]).removeprefix('to ')}."
        else:
            first = f"{w[:1].upper() + w[1:]} is {'an' if pos0[0] in 'aeiou' else 'a'} {pos0} meaning {fmt_def(defs0[0])}."
        parts = [first]
        ex = next((e for e in exs0 if lemma.split()[0].lower() in e.lower()), exs0[0] if exs0 else None)
        if ex:
            parts.append(f"For example: \"{ex}\".")
        syn = [x for x in words0 if x.lower() != lemma.lower()][:3]
        if syn:
            parts.append("Similar words: " + ", ".join(syn) + ".")
        for pos1, defs1, exs1, _ in senses[1:]:
            parts.append(f"As {'an' if pos1[0] in 'aeiou' else 'a'} {pos1}, it can also mean {fmt_def(defs1[0])}.")
        answer = " ".join(parts)
        split = "val" if is_val(lemma) else "train"
        q = rng.choices(qs, weights=ws)[0].format(w=w)
        out.append({"kind": "chat", "split": split, "q": q, "a": answer, "src": "wordnet", "term": lemma})
        # a plain-text, dictionary-style line for the same lemma
        text = f"{w} ({pos0}): " + "; ".join(defs0)
        if exs0:
            text += ". " + " ".join(f"\"{e}\"" for e in exs0[:2])
        out.append({"kind": "text", "split": split, "text": text, "src": "wordnet", "term": lemma})
    return out


def jargon_records(path, rng):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    entries = []
    cur = None
    head_re = re.compile(r"^   :([^:]+):\s*(.*)$")
    for line in lines:
        m = head_re.match(line)
        if m:
            if cur:
                entries.append(cur)
            cur = [m.group(1).strip(), m.group(2).strip(), []]
        elif cur is not None:
            cur[2].append(line.strip())
    if cur:
        entries.append(cur)
    out = []
    for term, info, body in entries:
        text = "\n".join(body).strip()
        if not text:
            continue
        paras = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text)]
        paras = [p.replace("{", "").replace("}", "") for p in paras if p]
        # drop leading etymology "[...]" paragraph for the chat answer
        body_paras = [p for p in paras if not (p.startswith("[") and p.endswith("]"))] or paras
        split = "val" if is_val("jargon:" + term) else "train"
        answer = body_paras[0]
        for p in body_paras[1:]:
            if len(answer) + len(p) > 700:
                break
            answer += " " + p
        if len(answer) > 900:
            cut = answer[:900].rsplit(". ", 1)[0]
            answer = cut + "."
        q = f"What does {term} mean in hacker jargon?"
        out.append({"kind": "chat", "split": split, "q": q, "a": answer, "src": "jargon", "term": term})
        out.append({"kind": "text", "split": split,
                    "text": f"{term}: {info}\n" + "\n".join(paras), "src": "jargon", "term": term})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/", help="where the Debian packages' files are (default /)")
    ap.add_argument("--out", default=".corpus/corpus.jsonl.gz")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    wn_dir = os.path.join(args.root, "usr/share/wordnet")
    jargon = os.path.join(args.root, "usr/share/doc/jargon-text/jargon.txt.gz")
    recs = wordnet_records(wn_dir, rng)
    recs += jargon_records(jargon, rng)
    rng.shuffle(recs)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with gzip.GzipFile(args.out, "wb", mtime=0, compresslevel=9) as f:
        for r in recs:
            f.write((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8"))
    stats = {}
    for r in recs:
        k = (r["src"], r["kind"], r["split"])
        stats[k] = stats.get(k, 0) + 1
    for k in sorted(stats):
        print(*k, stats[k], file=sys.stderr)
    print("chars", sum(len(r.get("text", "")) + len(r.get("q", "")) + len(r.get("a", "")) for r in recs),
          "bytes", os.path.getsize(args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
