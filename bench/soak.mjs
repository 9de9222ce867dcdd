// The soak test's clients: N concurrent loops against a running `fathom serve`,
// each picking a request kind at random — normal streaming and non-streaming
// chats, streams the client abandons, malformed bodies, headers trickled in
// slowly (some within the header deadline, some past it), and 3.5 MiB prompts
// (which once grew the server's memory through glibc arena retention).
// Prints one JSON object: requests by kind and outcome, latency percentiles of
// the completed chats, and the server's RSS over time.
//
// node bench/soak.mjs --url http://127.0.0.1:8080 --pid PID [--seconds 600] [--clients 64]
import fs from "node:fs";
import net from "node:net";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
const url = args.url ?? "http://127.0.0.1:8080";
const pid = Number(args.pid);
const seconds = Number(args.seconds ?? 600);
const clients = Number(args.clients ?? 64);
const { hostname, port } = new URL(url);

const rss = () => Number(fs.readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]) * 1024;
const counts = {};  // kind → outcome → n
const count = (kind, outcome) => {
  counts[kind] ??= {};
  counts[kind][outcome] = (counts[kind][outcome] ?? 0) + 1;
};
const latencies = [];     // seconds, completed chats (queueing included)
const firstTokens = [];   // seconds to the first streamed content
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const words = ["What does", "Define", "Explain", "the word", "kernel", "daemon", "hack", "cruft", "grok", "bit rot", "the meaning of"];
const question = () => Array.from({ length: 2 + Math.floor(Math.random() * 4) }, () => words[Math.floor(Math.random() * words.length)]).join(" ") + "?";

async function chat(stream, abortAfterMs) {
  const controller = new AbortController();
  const t0 = performance.now();
  if (abortAfterMs) setTimeout(() => controller.abort(), abortAfterMs);
  const body = { messages: [{ role: "user", content: question() }], max_tokens: 16 + Math.floor(Math.random() * 48), temperature: 0.7, stream };
  const r = await fetch(url + "/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: controller.signal });
  if (!stream) {
    const j = await r.json();
    if (r.status !== 200) return `http_${r.status}`;
    if (!j.choices?.[0]?.message || !["stop", "length"].includes(j.choices[0].finish_reason)) return "bad_body";
    latencies.push((performance.now() - t0) / 1000);
    return "ok";
  }
  if (r.status !== 200) return `http_${r.status}`;
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let text = "", first = true, finished = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (first && /"content":"[^"]/.test(text)) {
      firstTokens.push((performance.now() - t0) / 1000);
      first = false;
    }
  }
  finished = /"finish_reason":"(stop|length)"/.test(text) && text.includes("data: [DONE]");
  if (!finished) return "bad_stream";
  latencies.push((performance.now() - t0) / 1000);
  return "ok";
}

const malformed = [
  "{",
  '{"messages": "hi"}',
  '{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}',
  '{"messages": [{"role": "user", "content": "hi"}], "x": ' + "[".repeat(5000) + "]".repeat(5000) + "}",
  '{"messages": [{"role": "user", "content": "hi"}], "seed": 9223372036854775808}',
  '{"messages": [], "max_tokens": -1}',
];

async function bad() {
  const r = await fetch(url + "/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json" }, body: malformed[Math.floor(Math.random() * malformed.length)] });
  const j = await r.json();
  return r.status === 400 && j.error?.message ? "clean_400" : `http_${r.status}`;
}

// Sends a request's header a few bytes at a time; `tooSlow` keeps dripping past the header deadline.
function slow(tooSlow) {
  return new Promise((resolve) => {
    const body = JSON.stringify({ messages: [{ role: "user", content: question() }], max_tokens: 8 });
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n`;
    const s = net.connect(Number(port), hostname);
    let reply = "", sent = 0, timer;
    const finish = (outcome) => {
      clearInterval(timer);
      s.destroy();
      resolve(outcome);
    };
    s.on("data", (d) => (reply += d));
    s.on("error", () => finish(tooSlow ? "dropped" : "error"));
    s.on("close", () => {
      if (reply.startsWith("HTTP/1.1 200")) finish("ok");
      else if (reply.startsWith("HTTP/1.1 503")) finish("http_503");
      else finish(tooSlow && !reply.startsWith("HTTP/1.1 2") ? "dropped" : `bad: ${reply.slice(0, 20)}`);
    });
    s.on("connect", () => {
      const step = tooSlow ? 2 : 40;  // bytes per 250 ms: a ~150-byte header in ~1 s, or in ~19 s (past the 10 s deadline)
      timer = setInterval(() => {
        if (sent >= head.length) {
          clearInterval(timer);
          s.write(body);
          return;
        }
        s.write(head.slice(sent, sent + step));
        sent += step;
      }, 250);
    });
  });
}

async function huge() {
  const prompt = "lorem ipsum dolor sit amet ".repeat((3.5 * 2 ** 20) / 27);  // under the 4 MiB body limit
  const r = await fetch(url + "/v1/completions", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt, max_tokens: 4 }) });
  const j = await r.json();
  return r.status === 400 && j.error?.code === "context_length_exceeded" ? "clean_400" : `http_${r.status}`;
}

const kinds = [
  ["stream", 40, () => chat(true)],
  ["non_stream", 20, () => chat(false)],
  ["cancelled", 15, () => chat(true, 50 + Math.random() * 1500).catch((e) => (e.name === "AbortError" ? "aborted" : "error: " + e.message))],
  ["malformed", 12, bad],
  ["slow_header", 6, () => slow(false)],
  ["too_slow_header", 4, () => slow(true)],
  ["huge_prompt", 3, huge],
];
const totalWeight = kinds.reduce((s, [, w]) => s + w, 0);
function pick() {
  let r = Math.random() * totalWeight;
  for (const k of kinds) if ((r -= k[1]) < 0) return k;
  return kinds[0];
}

const rssSamples = [];
const rssStart = rss();
const started = performance.now();
const sampler = setInterval(() => rssSamples.push([Math.round((performance.now() - started) / 1000), rss()]), 10000);
const deadline = started + seconds * 1000;
await Promise.all(
  Array.from({ length: clients }, async () => {
    while (performance.now() < deadline) {
      const [name, , run] = pick();
      let outcome;
      try {
        outcome = await run();
      } catch (e) {
        outcome = "error: " + (e.cause?.code ?? e.message);
      }
      count(name, outcome);
      if (outcome.startsWith("http_429") || outcome.startsWith("http_503")) await sleep(200);
    }
  }),
);
clearInterval(sampler);
// Let the server settle (idle connections close, arenas trim) before the last reading.
await sleep(6000);
const rssEnd = rss();

const pct = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return Number(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))].toFixed(3));
};
// Memory is judged after warm-up (the first minute, or the first tenth of a short run):
// caches and arenas reach their working size there, and must stay flat after.
const warmAt = Math.min(60, Math.max(10, seconds / 10));
const warm = rssSamples.find(([t]) => t >= warmAt)?.[1] ?? rssStart;
const served = Object.values(counts).reduce((s, o) => s + Object.values(o).reduce((a, b) => a + b, 0), 0);
const unexpected = {};
for (const [kind, outcomes] of Object.entries(counts))
  for (const [o, n] of Object.entries(outcomes))
    if (!["ok", "aborted", "clean_400", "dropped", "http_429", "http_503"].includes(o)) unexpected[`${kind}:${o}`] = n;
console.log(
  JSON.stringify(
    {
      seconds,
      clients,
      requests: served,
      by_kind: counts,
      unexpected,
      latency_s: { p50: pct(latencies, 50), p90: pct(latencies, 90), p99: pct(latencies, 99), n: latencies.length },
      first_token_s: { p50: pct(firstTokens, 50), p99: pct(firstTokens, 99) },
      rss_mib: {
        start: +(rssStart / 2 ** 20).toFixed(1),
        end: +(rssEnd / 2 ** 20).toFixed(1),
        after_warmup: +(warm / 2 ** 20).toFixed(1),
        growth_after_warmup: +((rssEnd - warm) / 2 ** 20).toFixed(1),
        max: +(Math.max(rssStart, rssEnd, ...rssSamples.map(([, b]) => b)) / 2 ** 20).toFixed(1),
        samples: rssSamples.map(([t, b]) => [t, +(b / 2 ** 20).toFixed(1)]),
      },
    },
    null,
    1,
  ),
);
