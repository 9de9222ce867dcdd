// The OpenAI and Anthropic clients, used unchanged against `fathom serve`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startServer, metric } from "./helpers.mjs";

let server, openai, anthropic;
before(async () => {
  server = await startServer();
  openai = new OpenAI({ apiKey: "unused", baseURL: server.url + "/v1", maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: "unused", baseURL: server.url, maxRetries: 0 });
});
after(async () => server && (await server.stop()));

const hi = [{ role: "user", content: "Hello!" }];

test("GET /health and /v1/models", async () => {
  const health = await (await fetch(server.url + "/health")).json();
  assert.equal(health.status, "ok");
  const models = [];
  for await (const m of openai.models.list()) models.push(m);
  assert.equal(models.length, 1);
  assert.equal(models[0].object, "model");
  const one = await openai.models.retrieve(models[0].id);
  assert.equal(one.id, models[0].id);
});

test("chat completion, non-streaming, with usage and max_tokens", async () => {
  const r = await openai.chat.completions.create({ model: "m", messages: hi, max_tokens: 5, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 5);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 5);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  const long = await openai.chat.completions.create({
    model: "m", messages: hi, max_completion_tokens: 6, temperature: 0, logit_bias: { "151645": -100 },
  });
  assert.equal(long.usage.completion_tokens, 6);
  assert.equal(long.choices[0].finish_reason, "length");
});

test("chat completion streaming matches non-streaming (greedy), include_usage", async () => {
  const body = { model: "m", messages: hi, max_tokens: 8, temperature: 0 };
  const whole = await openai.chat.completions.create(body);
  const stream = await openai.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 3);
  assert.equal(text, whole.choices[0].message.content + (whole.choices[0].message.reasoning_content ? "" : ""));
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);
});

test("array-of-parts content, system/developer messages, unknown fields ignored", async () => {
  const r = await openai.chat.completions.create({
    model: "m", max_tokens: 2,
    messages: [{ role: "developer", content: "Be brief." },
               { role: "user", content: [{ type: "text", text: "Hi " }, { type: "text", text: "there" }] }],
    some_future_field: { x: 1 }, user: "abc", metadata: { a: "b" },
  });
  assert.equal(r.choices.length, 1);
});

test("seed makes sampling reproducible", async () => {
  const body = { model: "m", messages: hi, max_tokens: 8, temperature: 1.0, top_p: 0.95, top_k: 50, seed: 1234 };
  const a = await openai.chat.completions.create(body);
  const b = await openai.chat.completions.create(body);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const c = await openai.completions.create({ model: "m", prompt: "Once upon", max_tokens: 8, seed: 7, temperature: 1 });
  const d = await openai.completions.create({ model: "m", prompt: "Once upon", max_tokens: 8, seed: 7, temperature: 1 });
  assert.equal(c.choices[0].text, d.choices[0].text);
  // With logprobs the rows come to the host and are drawn from there; without, the
  // tokens are picked where the logits are: the same seeded draws either way.
  const e = await openai.completions.create({ model: "m", prompt: "Once upon", max_tokens: 8, seed: 7, temperature: 1,
                                              logprobs: 0 });
  assert.equal(e.choices[0].text, c.choices[0].text);
  assert.equal(e.choices[0].logprobs.tokens.length, e.usage.completion_tokens);
});

test("stop strings cut the text before the stop string", async () => {
  const body = { model: "m", messages: hi, max_tokens: 12, temperature: 0, logit_bias: { "151645": -100 } };
  const full = (await openai.chat.completions.create(body)).choices[0].message.content;
  assert.ok(full.length > 4, full);
  const stopAt = full.slice(2, 4);
  const cut = await openai.chat.completions.create({ ...body, stop: [stopAt] });
  assert.equal(cut.choices[0].message.content, full.slice(0, full.indexOf(stopAt)));
  assert.equal(cut.choices[0].finish_reason, "stop");
  const stream = await openai.chat.completions.create({ ...body, stop: stopAt, stream: true });
  let text = "", finish;
  for await (const chunk of stream) for (const c of chunk.choices) { text += c.delta.content ?? ""; finish = c.finish_reason ?? finish; }
  assert.equal(text, cut.choices[0].message.content);
  assert.equal(finish, "stop");
});

test("logit_bias forces a token; logprobs and top_logprobs", async () => {
  // Token 9707 is "Hello" in the Qwen3 vocabulary.
  const r = await openai.chat.completions.create({
    model: "m", messages: hi, max_tokens: 3, temperature: 0, logit_bias: { "9707": 100 }, logprobs: true, top_logprobs: 2,
  });
  assert.equal(r.choices[0].message.content, "HelloHelloHello");
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 3);
  for (const t of lp) {
    assert.equal(t.token, "Hello");
    assert.ok(t.logprob <= 0 && t.logprob > -1e-3);
    assert.equal(t.top_logprobs.length, 2);
    assert.deepEqual(t.bytes, [...Buffer.from("Hello")]);
  }
});

test("penalties and min_p are accepted", async () => {
  const r = await openai.chat.completions.create({
    model: "m", messages: hi, max_tokens: 4, presence_penalty: 1.5, frequency_penalty: 1.0, min_p: 0.1,
    repetition_penalty: 1.2, seed: 3,
  });
  assert.ok(r.usage.completion_tokens >= 1);
});

test("tools and tool_choice are accepted and rendered by the chat template", async () => {
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
  const plain = await openai.chat.completions.create({ model: "m", messages: hi, max_tokens: 2 });
  const r = await openai.chat.completions.create({ model: "m", messages: hi, max_tokens: 2, tools, tool_choice: "auto" });
  assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens + 20, "the tool schema is in the prompt");
  assert.ok(["stop", "length", "tool_calls"].includes(r.choices[0].finish_reason));
  // A conversation that already holds a call and its result.
  const r2 = await openai.chat.completions.create({
    model: "m", max_tokens: 2, tools, stream: true,
    messages: [...hi, { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
      function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }] },
      { role: "tool", tool_call_id: "call_1", content: "sunny" }],
  });
  let finish;
  for await (const chunk of r2) for (const c of chunk.choices) finish = c.finish_reason ?? finish;
  assert.ok(["stop", "length", "tool_calls"].includes(finish));
});

test("chat_template_kwargs reach the template (enable_thinking=false adds an empty think block)", async () => {
  const on = await openai.chat.completions.create({ model: "m", messages: hi, max_tokens: 1 });
  const off = await openai.chat.completions.create({
    model: "m", messages: hi, max_tokens: 1, chat_template_kwargs: { enable_thinking: false },
  });
  assert.ok(off.usage.prompt_tokens > on.usage.prompt_tokens);
});

test("completions, non-streaming and streaming", async () => {
  const r = await openai.completions.create({ model: "m", prompt: "The capital of France is", max_tokens: 4, temperature: 0, logprobs: 2 });
  assert.equal(r.object, "text_completion");
  assert.equal(typeof r.choices[0].text, "string");
  assert.equal(r.choices[0].logprobs.tokens.length, r.usage.completion_tokens);
  const stream = await openai.completions.create({ model: "m", prompt: "The capital of France is", max_tokens: 4, temperature: 0, stream: true });
  let text = "", finish;
  for await (const chunk of stream) { text += chunk.choices[0]?.text ?? ""; finish = chunk.choices[0]?.finish_reason ?? finish; }
  assert.equal(text, r.choices[0].text);
  assert.equal(finish, r.choices[0].finish_reason);
});

test("anthropic messages, non-streaming", async () => {
  const m = await anthropic.messages.create({ model: "m", max_tokens: 5, system: "Be brief.", messages: hi, temperature: 0 });
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.ok(m.content.length >= 1);
  assert.equal(m.content.at(-1).type, "text");
  assert.ok(["end_turn", "max_tokens"].includes(m.stop_reason));
  assert.ok(m.usage.input_tokens > 5 && m.usage.output_tokens >= 1 && m.usage.output_tokens <= 5);
});

test("anthropic messages streaming: the event grammar, and the SDK's accumulated message", async () => {
  const body = { model: "m", max_tokens: 6, messages: hi, temperature: 0 };
  const whole = await anthropic.messages.create(body);
  const events = [];
  let text = "";
  for await (const e of await anthropic.messages.create({ ...body, stream: true })) {
    events.push(e.type);
    if (e.type === "content_block_delta" && e.delta.type === "text_delta") text += e.delta.text;
    if (e.type === "message_delta") {
      assert.equal(e.delta.stop_reason, whole.stop_reason);
      assert.equal(e.usage.output_tokens, whole.usage.output_tokens);
    }
  }
  assert.equal(events[0], "message_start");
  assert.equal(events.at(-1), "message_stop");
  assert.equal(events.at(-2), "message_delta");
  const blocks = events.filter((t) => t.startsWith("content_block"));
  assert.equal(blocks[0], "content_block_start");
  assert.equal(blocks.at(-1), "content_block_stop");
  assert.equal(text, whole.content.filter((b) => b.type === "text").map((b) => b.text).join(""));
  const final = await anthropic.messages.stream(body).finalMessage();
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.deepEqual(final.content.map((b) => b.type), whole.content.map((b) => b.type));
});

test("anthropic stop_sequences, tools and tool results are accepted", async () => {
  const m = await anthropic.messages.create({
    model: "m", max_tokens: 3,
    tools: [{ name: "get_weather", description: "Weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
    messages: [hi[0], { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "sunny" }] }],
    stop_sequences: ["\n\nHuman:"],
  });
  assert.ok(["end_turn", "max_tokens", "stop_sequence", "tool_use"].includes(m.stop_reason));
});

test("metrics are Prometheus text with the expected series", async () => {
  const text = await (await fetch(server.url + "/metrics")).text();
  for (const name of ["fathom_requests_total{", "fathom_prompt_tokens_total ", "fathom_generation_tokens_total ",
    "fathom_queue_depth ", "fathom_kv_cache_bytes_in_use ", "fathom_time_to_first_token_seconds_bucket{le=",
    "fathom_inter_token_latency_seconds_bucket{le=", "fathom_time_to_first_token_seconds_count "])
    assert.ok(text.includes(name), name);
  assert.ok((await metric(server.url, "fathom_generation_tokens_total")) > 10);
});
