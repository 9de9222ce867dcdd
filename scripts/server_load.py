#!/usr/bin/python3
"""The server under concurrent load, from Python (the GPU machine has no node):
the workload of bench/server_concurrency.mjs. C clients each send streamed
/v1/completions back to back, 2·C requests in all, with mixed prompt lengths
(32-384 words) and output lengths (32, 64, 96 tokens; the end-of-sequence ids
given by --ban are banned so that every request runs to its length). Prints one
JSON line per round: aggregate output tok/s (completion tokens over the wall
time), p50/p99 time to first token, p50/p99 inter-token latency (each request's
(last - first token time) / (tokens - 1)).

With --plain the requests ask for no logprobs and ban nothing (a greedy request
whose logits no one reads: the engine takes its tokens as the device's picks);
a token's arrival is then a streamed choice with text, and a request may end early at
an end-of-sequence id. --temperature T samples at T (seeded per request) instead
of greedily: with --plain, a request the engine samples on the device.

Usage: python3 scripts/server_load.py URL --concurrency 64 [--rounds 2] [--ban 128001,128009] [--plain]
         [--temperature T]
"""
import argparse
import http.client
import json
import threading
import time
import urllib.parse


def request(i):
    """The i-th request of the workload: deterministic, so every round runs the same mix."""
    words = [32, 384, 96, 192, 64, 256][i % 6]
    max_tokens = [64, 32, 96][i % 3]
    return f"{i} " + " ".join(["word"] * words), max_tokens


TEMPERATURE = 0.0  # --temperature


def stream_one(url, prompt, max_tokens, ban, plain):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = {"model": "m", "prompt": prompt, "max_tokens": max_tokens, "temperature": TEMPERATURE, "stream": True,
            "stream_options": {"include_usage": True}}
    if TEMPERATURE > 0:
        body["seed"] = len(prompt)
    if not plain:
        body.update({"logprobs": 0, "logit_bias": {str(t): -100 for t in ban}})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"content-type": "application/json"})
    res = conn.getresponse()
    if res.status != 200:
        raise RuntimeError(f"status {res.status}: {res.read()[:200]!r}")
    first = last = 0.0
    tokens = 0
    for line in res:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        choices = event.get("choices") or []
        if choices and (choices[0].get("text") if plain else (choices[0].get("logprobs") or {}).get("tokens")):
            now = time.perf_counter() - t0
            first = first or now
            last = now
    conn.close()
    return {"ttft": first, "itl": (last - first) / (tokens - 1) if tokens > 1 else 0.0, "tokens": tokens}


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_round(url, concurrency, ban, plain):
    total = 2 * concurrency
    results, errors, lock = [], [], threading.Lock()
    next_index = [0]

    def client():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= total:
                return
            prompt, max_tokens = request(i)
            try:
                r = stream_one(url, prompt, max_tokens, ban, plain)
                with lock:
                    results.append(r)
            except Exception as e:  # reported, not hidden: the round's line counts them
                with lock:
                    errors.append(str(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    tokens = sum(r["tokens"] for r in results)
    ttft = [r["ttft"] * 1e3 for r in results]
    itl = [r["itl"] * 1e3 for r in results if r["tokens"] > 1]
    return {"concurrency": concurrency, "requests": len(results), "errors": len(errors), "first_error": errors[:1],
            "output_tok_s": tokens / wall, "wall_s": wall,
            "ttft_ms_p50": quantile(ttft, 0.5) if ttft else None, "ttft_ms_p99": quantile(ttft, 0.99) if ttft else None,
            "itl_ms_p50": quantile(itl, 0.5) if itl else None, "itl_ms_p99": quantile(itl, 0.99) if itl else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--ban", default="", help="token ids to ban, comma-separated (the model's end-of-sequence ids)")
    ap.add_argument("--plain", action="store_true", help="no logprobs, no banned ids")
    ap.add_argument("--temperature", type=float, default=0.0, help="sample at this temperature (0: greedy)")
    a = ap.parse_args()
    global TEMPERATURE
    TEMPERATURE = a.temperature
    ban = [int(t) for t in a.ban.split(",") if t]
    prompt, max_tokens = request(0)
    stream_one(a.url, prompt, max_tokens, ban, a.plain)  # warm
    for r in range(1, a.rounds + 1):
        out = run_round(a.url, a.concurrency, ban, a.plain)
        out["round"] = r
        out["plain"] = a.plain
        out["temperature"] = a.temperature
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
