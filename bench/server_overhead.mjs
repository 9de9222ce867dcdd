#!/usr/bin/env node
// The server's overhead: time to first token and decode tok/s of a streamed
// completion over HTTP, against `fathom bench` on the same model, prompt length and
// number of generated tokens, alternating the two, ROUNDS times (medians).
// Usage: node bench/server_overhead.mjs MODEL_DIR [rounds]   (run from the repo root)
import { execFileSync } from "node:child_process";
import { startServer } from "./start_server.mjs";

const model = process.argv[2];
const rounds = Number(process.argv[3] ?? 3);
const binary = process.env.FATHOM_BINARY ?? "build/fathom";
const genTokens = 128;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];


async function streamOnce(url) {
  // /v1/completions: no chat template, so nothing is held back as possible reasoning
  // (a random model answers a chat prompt with newlines, which a thinking template holds).
  const body = {
    model: "m",
    prompt: "word ".repeat(511).trim(),
    max_tokens: genTokens,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  };
  const t0 = performance.now();
  const res = await fetch(url + "/v1/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "", first = null, last = null, usage = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6));
      if (chunk.usage) usage = chunk.usage;
      // The first chunk only announces the role; time the first real text.
      if (chunk.choices?.[0]?.text) {
        const now = performance.now();
        if (first === null) first = now;
        last = now;
      }
    }
  }
  const n = usage.completion_tokens;
  return { ttft_ms: first - t0, decode_tok_s: (n - 1) / ((last - first) / 1000), prompt: usage.prompt_tokens, n };
}

const server = await startServer(binary, ["--model", model]);
const http = [], engine = [];
try {
  await streamOnce(server.url);  // warm-up: page the weights in
  for (let r = 0; r < rounds; ++r) {
    http.push(await streamOnce(server.url));
    const prompt = http.at(-1).prompt;
    const out = execFileSync(binary, ["bench", "--model", model, "--prompt-tokens", String(prompt), "--gen-tokens",
                                      String(genTokens)]).toString();
    const b = JSON.parse(out);
    engine.push({ prefill_ms: (1000 * prompt) / b.prefill_tok_s, decode_tok_s: b.decode_tok_s });
  }
} finally {
  server.stop();
}
const result = {
  prompt_tokens: http[0].prompt,
  completion_tokens: http[0].n,
  rounds,
  http_ttft_ms: median(http.map((x) => x.ttft_ms)),
  engine_prefill_ms: median(engine.map((x) => x.prefill_ms)),
  http_decode_tok_s: median(http.map((x) => x.decode_tok_s)),
  engine_decode_tok_s: median(engine.map((x) => x.decode_tok_s)),
};
result.decode_overhead_pct = 100 * (1 - result.http_decode_tok_s / result.engine_decode_tok_s);
result.ttft_minus_prefill_ms = result.http_ttft_ms - result.engine_prefill_ms;
console.log(JSON.stringify(result, null, 2));
