// The rest of the API surface clients read: /tokenize and /detokenize (as
// llama.cpp's and vLLM's servers have them), Anthropic's count_tokens, request
// ids on every answer, system_fingerprint / refusal / completion_tokens_details,
// /v1/models with a real created time (and Anthropic's shape when asked), and
// Anthropic's stop_sequence naming the sequence that stopped the answer.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "./helpers.mjs";

// Greedy answers that run to max_tokens in visible text (see batching.test.mjs).
const bias = { 151643: -100, 151645: -100, 198: -100, 271: -100, 220: -100, 197: -100, 256: -100 };
const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Name three rivers in Europe." }];
let server;
before(async () => { server = await startServer(["--dtype", "f32"]); });
after(async () => { await server?.stop(); });

async function post(route, body, headers = {}) {
  const res = await fetch(server.url + route, {
    method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

test("/tokenize and /detokenize round-trip text, in llama.cpp's and vLLM's forms", async () => {
  const text = "Rivers: the Danube, the Rhine and the Loire — 3 of them.";
  const llama = await post("/tokenize", { content: text });
  assert.equal(llama.status, 200);
  assert.ok(llama.body.tokens.length > 5 && llama.body.count === llama.body.tokens.length);
  assert.ok(llama.body.max_model_len > 0);
  const vllm = await post("/tokenize", { prompt: text, add_special_tokens: false });
  assert.deepEqual(vllm.body.tokens, llama.body.tokens);
  const back = await post("/detokenize", { tokens: llama.body.tokens });
  assert.equal(back.status, 200);
  assert.equal(back.body.content, text);
  assert.equal(back.body.prompt, text);
});

test("/tokenize of chat messages counts what a chat completion's prompt holds", async () => {
  const counted = await post("/tokenize", { messages });
  const answer = await post("/v1/chat/completions", { messages, max_tokens: 1, temperature: 0 });
  assert.equal(answer.status, 200);
  assert.equal(counted.body.count, answer.body.usage.prompt_tokens);
});

test("bad token requests are OpenAI-shaped 400s naming the field", async () => {
  for (const [route, body, param] of [["/detokenize", { tokens: [1, -3] }, "tokens"],
    ["/detokenize", { tokens: [1e9] }, "tokens"], ["/detokenize", { tokens: "1 2" }, "tokens"],
    ["/tokenize", { content: "a", prompt: "b" }, "content"], ["/tokenize", {}, "content"],
    ["/tokenize", { content: 7 }, "content"]]) {
    const r = await post(route, body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.param, param, JSON.stringify(body));
    assert.equal(typeof r.body.error.message, "string");
  }
});

test("count_tokens gives the input tokens a Messages request has", async () => {
  const body = { model: "m", system: "Be brief.", messages: [{ role: "user", content: "Name three rivers in Europe." }] };
  const counted = await post("/v1/messages/count_tokens", body, { "anthropic-version": "2023-06-01" });
  assert.equal(counted.status, 200);
  const answer = await post("/v1/messages", { ...body, max_tokens: 1 });
  // Anthropic's input_tokens leaves out what the prefix cache read or wrote.
  const u = answer.body.usage;
  assert.equal(counted.body.input_tokens, u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens);
  const bad = await post("/v1/messages/count_tokens", { model: "m" });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.type, "error");
  assert.equal(bad.body.error.type, "invalid_request_error");
});

test("every answer carries a request id; a client's own x-request-id comes back", async () => {
  const a = await post("/v1/chat/completions", { messages, max_tokens: 1 });
  const b = await post("/v1/chat/completions", { messages, max_tokens: 1 });
  assert.match(a.headers.get("x-request-id"), /^req_/);
  assert.notEqual(a.headers.get("x-request-id"), b.headers.get("x-request-id"));
  const mine = await post("/v1/chat/completions", { messages, max_tokens: 1 }, { "x-request-id": "trace-42" });
  assert.equal(mine.headers.get("x-request-id"), "trace-42");
  const anthropic = await post("/v1/messages", { model: "m", max_tokens: 1, messages: [{ role: "user", content: "hi" }] });
  assert.match(anthropic.headers.get("request-id"), /^req_/);
  const error = await post("/v1/chat/completions", { messages: [] });
  assert.equal(error.status, 400);
  assert.match(error.headers.get("x-request-id"), /^req_/);
});

test("chat completions carry system_fingerprint, refusal and completion_tokens_details", async () => {
  const a = await post("/v1/chat/completions", { messages, max_tokens: 3, temperature: 0 });
  const b = await post("/v1/chat/completions", { messages, max_tokens: 3, temperature: 0 });
  assert.match(a.body.system_fingerprint, /^fp_[0-9a-f]{10}$/);
  assert.equal(a.body.system_fingerprint, b.body.system_fingerprint);
  assert.equal(a.body.choices[0].message.refusal, null);
  assert.equal(a.body.usage.completion_tokens_details.reasoning_tokens, 0);  // the tiny model's template has no <think>
  const res = await fetch(server.url + "/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages, max_tokens: 2, stream: true }),
  });
  const chunks = (await res.text()).split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)));
  assert.ok(chunks.length > 0);
  for (const c of chunks) assert.equal(c.system_fingerprint, a.body.system_fingerprint);
});

test("/v1/models tells when the server started, in Anthropic's shape when asked for it", async () => {
  const now = Math.floor(Date.now() / 1000);
  const openai = await (await fetch(server.url + "/v1/models")).json();
  assert.ok(openai.data[0].created > now - 600 && openai.data[0].created <= now, `created ${openai.data[0].created}`);
  const anthropic = await (await fetch(server.url + "/v1/models", { headers: { "anthropic-version": "2023-06-01" } })).json();
  const m = anthropic.data[0];
  assert.equal(m.type, "model");
  assert.equal(m.id, openai.data[0].id);
  assert.equal(m.display_name, m.id);
  assert.equal(Date.parse(m.created_at) / 1000, openai.data[0].created);
  assert.equal(anthropic.has_more, false);
  assert.equal(anthropic.first_id, m.id);
  assert.equal(anthropic.last_id, m.id);
});

test("Anthropic's stop_sequence names the sequence that stopped the answer", async () => {
  const body = { model: "m", max_tokens: 12, temperature: 0, messages: [{ role: "user", content: "Tell me a story." }] };
  // The greedy answer first, then a stop string cut from it (whatever the
  // random model says, whitespace included).
  const free = await post("/v1/messages", body);
  const text = free.body.content.map((b) => b.text ?? "").join("");
  const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 2);
  assert.ok(stop.length > 0, `answer ${JSON.stringify(text)}`);
  const stopped = await post("/v1/messages", { ...body, stop_sequences: ["never-in-the-answer", stop] });
  assert.equal(stopped.body.stop_reason, "stop_sequence", JSON.stringify(stopped.body));
  assert.equal(stopped.body.stop_sequence, stop);
  const res = await fetch(server.url + "/v1/messages", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stop_sequences: [stop], stream: true }),
  });
  const events = (await res.text()).split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
  const delta = events.find((e) => e.type === "message_delta");
  assert.equal(delta.delta.stop_reason, "stop_sequence");
  assert.equal(delta.delta.stop_sequence, stop);
  const plain = await post("/v1/messages", { ...body, max_tokens: 2 });
  assert.equal(plain.body.stop_sequence, null);
});

test("tools sent to a model whose chat template cannot render them are a 400 that says so", async () => {
  // fathom-chat-small's ChatML template has no tools.
  const small = await startServer(["--model", new URL("../../assets/models/fathom-chat-small", import.meta.url).pathname]);
  try {
    const tools = [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }];
    const send = (body) => fetch(small.url + "/v1/chat/completions", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 1, ...body }),
    });
    const refused = await send({ tools });
    assert.equal(refused.status, 400);
    const error = (await refused.json()).error;
    assert.equal(error.param, "tools");
    assert.equal(error.code, "tools_not_supported");
    assert.match(error.message, /cannot render tools/);
    assert.equal((await send({ tools, tool_choice: "none" })).status, 200);
    assert.equal((await send({})).status, 200);
    const anthropic = await fetch(small.url + "/v1/messages", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "hi" }],
        tools: [{ name: "f", input_schema: { type: "object" } }] }),
    });
    assert.equal(anthropic.status, 400);
    assert.match((await anthropic.json()).error.message, /cannot render tools/);
  } finally {
    await small.stop();
  }
});

test("n > 1: several choices, each from its own seed, sharing the prompt's prefill", async () => {
  const { metric } = await import("./helpers.mjs");
  const long = [{ role: "system", content: "You answer questions about geography in detail. ".repeat(12) },
    { role: "user", content: "Which rivers cross Germany?" }];
  const hits = await metric(server.url, "fathom_prefix_cache_hits_total");
  const saved = await metric(server.url, "fathom_prefix_cache_tokens_saved_total");
  const r = await post("/v1/chat/completions", { messages: long, n: 3, max_tokens: 6, temperature: 1, seed: 7,
    logit_bias: bias });
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.choices.map((c) => c.index), [0, 1, 2]);
  const texts = r.body.choices.map((c) => c.message.content);
  assert.ok(new Set(texts).size > 1, `three seeds gave ${JSON.stringify(texts)}`);
  // The usage counts the prompt once and every choice's tokens.
  const counted = (await post("/tokenize", { messages: long })).body.count;
  assert.equal(r.body.usage.prompt_tokens, counted);
  assert.equal(r.body.usage.completion_tokens, 18);
  // Choices 1 and 2 started from a fork of choice 0's prompt (choice 0 may
  // itself have found a few template tokens of earlier requests).
  assert.ok(await metric(server.url, "fathom_prefix_cache_hits_total") >= hits + 2);
  assert.ok(await metric(server.url, "fathom_prefix_cache_tokens_saved_total") >= saved + 2 * (counted - 1));
  // The same seed gives the same choices; choice 0 is what n = 1 gives with that seed.
  const again = await post("/v1/chat/completions", { messages: long, n: 3, max_tokens: 6, temperature: 1, seed: 7,
    logit_bias: bias });
  assert.deepEqual(again.body.choices.map((c) => c.message.content), texts);
  const one = await post("/v1/chat/completions", { messages: long, max_tokens: 6, temperature: 1, seed: 7, logit_bias: bias });
  assert.equal(one.body.choices[0].message.content, texts[0]);
});

test("n > 1 streamed: each choice's chunks carry its index; one usage chunk and [DONE] end the stream", async () => {
  const body = { messages, n: 3, max_tokens: 5, temperature: 1, seed: 21, logit_bias: bias };
  const whole = await post("/v1/chat/completions", body);
  const res = await fetch(server.url + "/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  const events = (await res.text()).split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => e.slice(6));
  assert.equal(events.at(-1), "[DONE]");
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
  assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
  const texts = ["", "", ""], finish = [];
  for (const c of chunks)
    for (const choice of c.choices) {
      texts[choice.index] += choice.delta.content ?? "";
      if (choice.finish_reason) finish[choice.index] = choice.finish_reason;
    }
  // The same seeds give the same three answers as the non-streamed request.
  assert.deepEqual(texts, whole.body.choices.map((c) => c.message.content));
  assert.deepEqual(finish, ["length", "length", "length"]);
  const usage = chunks.filter((c) => c.usage).at(-1).usage;
  assert.equal(usage.completion_tokens, 15);
  assert.equal(usage.prompt_tokens, whole.body.usage.prompt_tokens);
});

test("n out of range and n on /v1/completions are 400s naming n", async () => {
  for (const body of [{ messages, n: 0 }, { messages, n: 17 }])
    assert.equal((await post("/v1/chat/completions", body)).body.error.param, "n", JSON.stringify(body));
  assert.equal((await post("/v1/completions", { prompt: "hi", n: 2 })).body.error.param, "n");
  assert.equal((await post("/v1/chat/completions", { messages, n: 1, max_tokens: 1 })).status, 200);
});
