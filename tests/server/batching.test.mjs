// Continuous batching in the server: concurrent requests run in the same
// steps (one's tokens arrive while another's are still coming), each answer
// is the answer the request gets alone (f32 compute, greedy: seeded samples
// from a random model's flat tail move with the last bits of the logits,
// which a step's row count changes), a client that leaves
// frees its place at once, and /metrics shows the running count come back to 0.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { metric, startServer } from "./helpers.mjs";

// Answers run to max_tokens, and not in whitespace: a random model's greedy
// text is otherwise a run of newlines, which the server holds back until the
// end while it could still open a reasoning block.
const bias = { 151643: -100, 151645: -100, 198: -100, 271: -100, 220: -100, 197: -100, 256: -100 };
let server;
before(async () => {
  server = await startServer(["--dtype", "f32", "--max-running", "4"]);
});
after(async () => server && (await server.stop()));

// Streams one chat answer; resolves to its text and when its first and last tokens came.
async function stream(content, maxTokens, signal) {
  const res = await fetch(server.url + "/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" }, signal,
    body: JSON.stringify({ messages: [{ role: "user", content }], max_tokens: maxTokens, temperature: 0,
      logit_bias: bias, stream: true }),
  });
  assert.equal(res.status, 200);
  let text = "", first = 0, buffer = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let at;
    while ((at = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const d = JSON.parse(event.slice(6)).choices[0]?.delta ?? {};
      const delta = (d.reasoning_content ?? "") + (d.content ?? "");
      if (delta) {
        if (!first) first = performance.now();
        text += delta;
      }
    }
  }
  return { text, first, last: performance.now() };
}

const prompts = ["Tell me about the sea.", "What is a prime number?", "Name three colours.", "Why is the sky blue?"];

test("concurrent requests share steps, and each gets the answer it gets alone", async () => {
  const alone = [];
  for (const p of prompts) alone.push((await stream(p, 160)).text);
  const together = await Promise.all(prompts.map((p) => stream(p, 160)));
  for (let i = 0; i < prompts.length; ++i) assert.equal(together[i].text, alone[i], `prompt ${i}`);
  // Run one at a time, every answer's first token would come after the previous answer's last.
  const overlapped = together.some((a) => together.some((b) => a !== b && a.first < b.last && b.first < a.last));
  assert.ok(overlapped, "no two answers were written at the same time");
  assert.equal(await metric(server.url, "fathom_requests_running"), 0);
});

test("a client that leaves mid-answer frees its place; the others finish", async () => {
  const leaving = new AbortController();
  const gone = stream("Count to one hundred.", 400, leaving.signal).catch((e) => e.name);
  const staying = Promise.all(prompts.slice(0, 3).map((p) => stream(p, 16)));
  setTimeout(() => leaving.abort(), 200);
  assert.equal(await gone, "AbortError");
  for (const r of await staying) assert.ok(r.text.length > 0);
  // The abandoned sequence stops at its next step, not after 400 tokens.
  for (let i = 0; i < 50 && (await metric(server.url, "fathom_requests_running")) > 0; ++i)
    await new Promise((r) => setTimeout(r, 100));
  assert.equal(await metric(server.url, "fathom_requests_running"), 0);
  assert.ok(await metric(server.url, "fathom_requests_cancelled_total") >= 1);
});
