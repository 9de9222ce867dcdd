// Bad requests get clean 4xx answers in each API's error shape; the server keeps serving.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startServer } from "./helpers.mjs";

let server, openai;
before(async () => {
  server = await startServer(["--max-body-mib", "1"]);
  openai = new OpenAI({ apiKey: "unused", baseURL: server.url + "/v1", maxRetries: 0 });
});
after(async () => server && (await server.stop()));

const hi = [{ role: "user", content: "Hello!" }];

async function post(path, body, headers = {}) {
  const r = await fetch(server.url + path, { method: "POST", body, headers: { "content-type": "application/json", ...headers } });
  return { status: r.status, body: await r.json() };
}

function assertOpenAIError(body, param) {
  assert.equal(typeof body.error.message, "string");
  assert.equal(body.error.type, "invalid_request_error");
  assert.ok("param" in body.error && "code" in body.error);
  if (param !== undefined) assert.equal(body.error.param, param);
}

test("wrong types and out-of-range values are 400s naming the field (via the SDK)", async () => {
  const cases = [
    [{ temperature: "hot" }, "temperature"], [{ temperature: 5 }, "temperature"], [{ top_p: -1 }, "top_p"],
    [{ max_tokens: -3 }, "max_tokens"], [{ n: 30 }, "n"], [{ stop: 5 }, "stop"], [{ logit_bias: { x: 1 } }, "logit_bias"],
    [{ top_logprobs: 50, logprobs: true }, "top_logprobs"], [{ presence_penalty: 9 }, "presence_penalty"],
    [{ messages: [] }, "messages"], [{ messages: [{ role: "alien", content: "x" }] }, "messages[0].role"],
  ];
  for (const [extra, param] of cases) {
    await assert.rejects(openai.chat.completions.create({ model: "m", messages: hi, max_tokens: 1, ...extra }), (e) => {
      assert.equal(e.status, 400, JSON.stringify(extra));
      assert.equal(e.error?.param ?? e.param, param);
      assert.equal(e.type ?? e.error?.type, "invalid_request_error");
      return true;
    });
  }
});

test("malformed JSON, a non-object body and invalid UTF-8 are 400s", async () => {
  let r = await post("/v1/chat/completions", "{\"messages\": [");
  assert.equal(r.status, 400);
  assertOpenAIError(r.body);
  r = await post("/v1/chat/completions", "[1,2,3]");
  assert.equal(r.status, 400);
  r = await post("/v1/chat/completions", Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'),
    Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}]}')]));
  assert.equal(r.status, 400);
  assertOpenAIError(r.body);
  r = await post("/v1/messages", "not json");
  assert.equal(r.status, 400);
  assert.equal(r.body.type, "error");
  assert.equal(r.body.error.type, "invalid_request_error");
});

test("a prompt longer than the context is a 400 (context_length_exceeded)", async () => {
  const r = await post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hello ".repeat(3000) }] }));
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, "context_length_exceeded");
});

test("404 for an unknown route or model, in JSON", async () => {
  const r = await fetch(server.url + "/v1/nothing");
  assert.equal(r.status, 404);
  assertOpenAIError(await r.json());
  await assert.rejects(openai.models.retrieve("no-such-model"), (e) => e.status === 404);
});

test("413 for a body over --max-body-mib", async () => {
  const r = await post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "x".repeat(1200 * 1024) }] }));
  assert.equal(r.status, 413);
  assertOpenAIError(r.body);
});

test("anthropic errors have Anthropic's shape", async () => {
  const anthropic = new Anthropic({ apiKey: "unused", baseURL: server.url, maxRetries: 0 });
  await assert.rejects(anthropic.messages.create({ model: "m", messages: hi }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.error.type, "error");
    assert.equal(e.error.error.type, "invalid_request_error");
    assert.match(e.error.error.message, /max_tokens/);
    return true;
  });
});

test("the server still answers after all of that", async () => {
  const r = await openai.chat.completions.create({ model: "m", messages: hi, max_tokens: 1 });
  assert.equal(r.choices.length, 1);
});

test("--api-key (or FATHOM_API_KEY) guards every route but /health", async () => {
  const guarded = await startServer([], { FATHOM_API_KEY: "sekret" });
  try {
    assert.equal((await fetch(guarded.url + "/health")).status, 200);
    for (const path of ["/v1/models", "/metrics"]) assert.equal((await fetch(guarded.url + path)).status, 401);
    const wrong = new OpenAI({ apiKey: "nope", baseURL: guarded.url + "/v1", maxRetries: 0 });
    await assert.rejects(wrong.chat.completions.create({ model: "m", messages: hi, max_tokens: 1 }), (e) => {
      assert.equal(e.status, 401);
      return true;
    });
    const right = new OpenAI({ apiKey: "sekret", baseURL: guarded.url + "/v1", maxRetries: 0 });
    assert.equal((await right.chat.completions.create({ model: "m", messages: hi, max_tokens: 1 })).choices.length, 1);
    const wrongA = new Anthropic({ apiKey: "nope", baseURL: guarded.url, maxRetries: 0 });
    await assert.rejects(wrongA.messages.create({ model: "m", max_tokens: 1, messages: hi }), (e) => {
      assert.equal(e.status, 401);
      assert.equal(e.error.error.type, "authentication_error");
      return true;
    });
    const rightA = new Anthropic({ apiKey: "sekret", baseURL: guarded.url, maxRetries: 0 });
    assert.equal((await rightA.messages.create({ model: "m", max_tokens: 1, messages: hi })).type, "message");
  } finally {
    await guarded.stop();
  }
});

test("429 when the queue is full", async () => {
  // One running and two waiting: the first two are always taken, whether or
  // not the engine has picked up the first when the second arrives.
  const small = await startServer(["--max-running", "1", "--max-queue", "2"]);
  try {
    const client = new OpenAI({ apiKey: "unused", baseURL: small.url + "/v1", maxRetries: 0 });
    // Long generations (eos banned) so that requests pile up behind the engine.
    const body = { model: "m", messages: hi, max_tokens: 150, logit_bias: { "151645": -100 } };
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => client.chat.completions.create(body)));
    const ok = results.filter((r) => r.status === "fulfilled").length;
    const limited = results.filter((r) => r.status === "rejected" && r.reason.status === 429).length;
    assert.equal(ok + limited, 8, JSON.stringify(results.filter((r) => r.status === "rejected").map((r) => String(r.reason))));
    assert.ok(ok >= 2 && limited >= 1, `ok ${ok}, 429 ${limited}`);
  } finally {
    await small.stop();
  }
});
