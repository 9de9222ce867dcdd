#!/usr/bin/env node
// The server under concurrent load (continuous batching): C clients, each sending
// streamed /v1/completions back to back, 2·C requests in all, with mixed prompt
// lengths (32–384 words) and output lengths (32, 64, 96 tokens, eos banned); for C in
// CONCURRENCY. Prints one JSON line per C and round: aggregate output tok/s (all
// completion tokens over the wall time), p50/p99 time to first token, and p50/p99
// inter-token latency (each request's (last − first token time) / (tokens − 1)).
// Usage: node bench/server_concurrency.mjs MODEL_DIR [rounds]   (from the repo root; a model
// with the Qwen3 vocabulary, whose end-of-sequence ids 151643/151645 are banned)
//   CONCURRENCY="1 4 16" THREADS=2 FATHOM_BINARY=build/fathom
import { startServer } from "./start_server.mjs";

const model = process.argv[2];
const rounds = Number(process.argv[3] ?? 1);
const binary = process.env.FATHOM_BINARY ?? "build/fathom";
const levels = (process.env.CONCURRENCY ?? "1 4 16").split(/\s+/).map(Number);
const threads = process.env.THREADS ?? "2";
const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];


// The i-th request of the workload: deterministic, so every C and round runs the same mix.
function request(i) {
  const words = [32, 384, 96, 192, 64, 256][i % 6];
  const maxTokens = [64, 32, 96][i % 3];
  return { prompt: `${i} ` + "word ".repeat(words).trim(), max_tokens: maxTokens };
}

async function streamOne(url, { prompt, max_tokens }) {
  const t0 = performance.now();
  const res = await fetch(url + "/v1/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", prompt, max_tokens, temperature: 0, stream: true, logprobs: 0,
      logit_bias: { 151643: -100, 151645: -100 }, stream_options: { include_usage: true } }),
  });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  let first = 0, last = 0, tokens = 0, buffer = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let at;
    while ((at = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const j = JSON.parse(event.slice(6));
      if (j.usage) tokens = j.usage.completion_tokens;
      if (j.choices?.[0]?.logprobs?.tokens?.length) {
        const now = performance.now() - t0;
        if (!first) first = now;
        last = now;
      }
    }
  }
  return { ttft: first, itl: tokens > 1 ? (last - first) / (tokens - 1) : 0, tokens };
}

const server = await startServer(binary, ["--model", model, "--threads", threads, "--max-running", "16"]);
try {
  await streamOne(server.url, request(0));  // warm the weights' pages
  for (let round = 1; round <= rounds; ++round)
    for (const c of levels) {
      const total = 2 * c;
      let next = 0;
      const results = [];
      const t0 = performance.now();
      await Promise.all(Array.from({ length: c }, async () => {
        while (next < total) results.push(await streamOne(server.url, request(next++)));
      }));
      const seconds = (performance.now() - t0) / 1000;
      const tokens = results.reduce((s, r) => s + r.tokens, 0);
      const ttft = results.map((r) => r.ttft), itl = results.map((r) => r.itl);
      console.log(JSON.stringify({
        round, concurrency: c, requests: total, output_tokens: tokens, seconds: +seconds.toFixed(2),
        output_tok_s: +(tokens / seconds).toFixed(1),
        ttft_p50_ms: +quantile(ttft, 0.5).toFixed(0), ttft_p99_ms: +quantile(ttft, 0.99).toFixed(0),
        itl_p50_ms: +quantile(itl, 0.5).toFixed(1), itl_p99_ms: +quantile(itl, 0.99).toFixed(1),
      }));
    }
} finally {
  server.stop();
}
