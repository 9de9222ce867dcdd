// Time to first token with a shared ~2,000-token system prompt, with the
// prefix cache on and off: the first request prefills everything, later
// ones with other user messages only what follows the system prompt.
// Usage: node bench/prefix_cache_ttft.mjs MODEL_DIR [threads] [requests]
import { startServer } from "./start_server.mjs";

const [model, threads = "2", requests = "5"] = process.argv.slice(2);
const binary = new URL("../build/fathom", import.meta.url).pathname;
const system = "You are a meticulous assistant for a shipping company. Answer briefly and cite the policy section. ".repeat(110);
const users = ["Where is my parcel?", "Can I change the address?", "How do refunds work?", "Do you ship abroad?",
  "What does express cost?", "Can I pick it up myself?", "Is insurance included?", "How heavy may a box be?"];

async function ttft(url, user) {
  const t0 = performance.now();
  const res = await fetch(url + "/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "system", content: system }, { role: "user", content: user }],
      max_tokens: 1, temperature: 0 }),
  });
  const body = await res.json();
  return { ms: performance.now() - t0, prompt: body.usage.prompt_tokens, cached: body.usage.prompt_tokens_details.cached_tokens };
}

for (const cache of ["10%", "0"]) {
  const server = await startServer(binary, ["--model", model, "--threads", threads, "--prefix-cache", cache]);
  const runs = [];
  for (let i = 0; i < Number(requests); i++) runs.push(await ttft(server.url, users[i % users.length]));
  const metrics = await (await fetch(server.url + "/metrics")).text();
  const metric = (name) => Number(metrics.match(new RegExp(`^${name} (\\S+)`, "m"))?.[1] ?? 0);
  const later = runs.slice(1).map((r) => r.ms).sort((a, b) => a - b);
  console.log(JSON.stringify({
    prefix_cache: cache, prompt_tokens: runs[0].prompt, first_ms: Math.round(runs[0].ms),
    later_median_ms: Math.round(later[Math.floor(later.length / 2)]), cached_tokens: runs.slice(1).map((r) => r.cached),
    hit_rate: metric("fathom_prefix_cache_hits_total") / metric("fathom_prefix_cache_lookups_total"),
    tokens_saved: metric("fathom_prefix_cache_tokens_saved_total"),
  }));
  server.stop();
}
