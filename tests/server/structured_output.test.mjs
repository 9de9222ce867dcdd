// Structured output through the official clients: answers that validate
// against the caller's JSON Schema (checked with ajv), forced tool calls that
// are always well-formed (streamed deltas reassembled by the client), over
// the OpenAI and Anthropic APIs, sampled at temperature 1 from a random model
// — the hardest case: nothing but the grammar keeps it on track.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { startServer } from "./helpers.mjs";

const ajv = new Ajv2020({ strict: false });
addFormats(ajv);

let server, openai, anthropic;
before(async () => {
  server = await startServer();
  openai = new OpenAI({ apiKey: "unused", baseURL: server.url + "/v1", maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: "unused", baseURL: server.url, maxRetries: 0 });
});
after(async () => server && (await server.stop()));

const person = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 12 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    email: { type: "string", format: "email" },
    role: { enum: ["admin", "editor", "viewer"] },
    tags: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 3 },
    address: {
      type: "object",
      properties: { city: { type: "string", maxLength: 10 }, zip: { type: "string", pattern: "^[0-9]{5}$" } },
      required: ["city", "zip"],
      additionalProperties: false,
    },
    manager: { anyOf: [{ type: "null" }, { $ref: "#/$defs/ref" }] },
  },
  required: ["name", "age", "role", "address", "manager"],
  additionalProperties: false,
  $defs: { ref: { type: "object", properties: { id: { type: "integer", minimum: 1, maximum: 99 } }, required: ["id"], additionalProperties: false } },
};
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 16 }, unit: { enum: ["celsius", "fahrenheit"] } },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
};
const clock = {
  type: "function",
  function: {
    name: "get_time",
    parameters: { type: "object", properties: { zone: { type: "string", pattern: "^[A-Z]{3}$" } }, required: ["zone"] },
  },
};
const ask = [{ role: "user", content: "Describe a person as JSON." }];

test("response_format json_schema: every answer validates against the schema (n = 4, temperature 1)", async () => {
  const validate = ajv.compile(person);
  const r = await openai.chat.completions.create({
    model: "m", messages: ask, temperature: 1, seed: 11, n: 4, max_tokens: 600,
    response_format: { type: "json_schema", json_schema: { name: "person", schema: person, strict: true } },
  });
  assert.equal(r.choices.length, 4);
  for (const c of r.choices) {
    assert.equal(c.finish_reason, "stop", c.message.content);
    const value = JSON.parse(c.message.content);
    assert.ok(validate(value), JSON.stringify(validate.errors) + "\n" + c.message.content);
  }
});

test("response_format json_object: an object; streamed text parses the same way", async () => {
  const r = await openai.chat.completions.create({
    model: "m", messages: ask, temperature: 1, seed: 3, max_tokens: 400, response_format: { type: "json_object" },
  });
  if (r.choices[0].finish_reason === "stop") assert.equal(typeof JSON.parse(r.choices[0].message.content), "object");
  const stream = await openai.chat.completions.create({
    model: "m", messages: ask, temperature: 1, seed: 5, max_tokens: 600, stream: true,
    response_format: { type: "json_schema", json_schema: { name: "person", schema: person } },
  });
  let text = "", finish;
  for await (const chunk of stream) for (const c of chunk.choices) { text += c.delta.content ?? ""; finish = c.finish_reason ?? finish; }
  assert.equal(finish, "stop");
  assert.ok(ajv.validate(person, JSON.parse(text)), text);
});

test("a schema feature the grammar cannot enforce is a 400 that names it", async () => {
  await assert.rejects(
    openai.chat.completions.create({
      model: "m", messages: ask, max_tokens: 10,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "array", items: { type: "integer" }, uniqueItems: true } } },
    }),
    (e) => e.status === 400 && /uniqueItems/.test(e.message) && e.param === "response_format.json_schema.schema",
  );
  await assert.rejects(
    openai.chat.completions.create({
      model: "m", messages: ask, max_tokens: 10,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "(a)\\1" } } },
    }),
    (e) => e.status === 400 && /backreferences/.test(e.message),
  );
  await assert.rejects(
    openai.chat.completions.create({ model: "m", messages: ask, max_tokens: 10, tools: [weather],
                                     tool_choice: { type: "function", function: { name: "nope" } } }),
    (e) => e.status === 400 && /nope/.test(e.message),
  );
});

test("tool_choice required: a well-formed call every time; streamed calls reassemble", async () => {
  for (const seed of [1, 2, 3]) {
    const r = await openai.chat.completions.create({
      model: "m", messages: [{ role: "user", content: "Weather in Oslo?" }], temperature: 1, seed, max_tokens: 400,
      tools: [weather, clock], tool_choice: "required",
    });
    const calls = r.choices[0].message.tool_calls;
    assert.ok(calls?.length >= 1, JSON.stringify(r.choices[0].message));
    for (const call of calls) {
      const tool = [weather, clock].find((t) => t.function.name === call.function.name);
      assert.ok(tool, call.function.name);
      assert.ok(ajv.validate(tool.function.parameters, JSON.parse(call.function.arguments)), call.function.arguments);
    }
  }
  const stream = openai.chat.completions.stream({
    model: "m", messages: [{ role: "user", content: "What time is it?" }], temperature: 1, seed: 9, max_tokens: 400,
    tools: [weather, clock], tool_choice: { type: "function", function: { name: "get_time" } },
  });
  // The forced call's arguments arrive as deltas, several chunks per call.
  const pieces = new Map();
  stream.on("chunk", (chunk) => {
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? [])
      if (tc.function?.arguments) pieces.set(tc.index, (pieces.get(tc.index) ?? 0) + 1);
  });
  const done = await stream.finalChatCompletion();
  assert.ok(pieces.get(0) > 1, `argument chunks: ${JSON.stringify([...pieces])}`);
  const calls = done.choices[0].message.tool_calls;
  assert.ok(calls.length >= 1);
  for (const call of calls) {
    assert.equal(call.function.name, "get_time");
    assert.match(JSON.parse(call.function.arguments).zone, /^[A-Z]{3}$/);
  }
});

test("Anthropic: tool_choice tool and any give tool_use blocks whose input validates; output_format gives JSON", async () => {
  const tools = [weather, clock].map((t) => ({ name: t.function.name, description: "tool", input_schema: t.function.parameters }));
  const named = await anthropic.messages.create({
    model: "m", max_tokens: 400, temperature: 1, tools, tool_choice: { type: "tool", name: "get_weather" },
    messages: [{ role: "user", content: "Weather in Rome?" }],
  });
  const uses = named.content.filter((b) => b.type === "tool_use");
  assert.ok(uses.length >= 1, JSON.stringify(named.content));
  for (const u of uses) {
    assert.equal(u.name, "get_weather");
    assert.ok(ajv.validate(weather.function.parameters, u.input), JSON.stringify(u.input));
  }
  assert.equal(named.stop_reason, "tool_use");
  // Streamed, the tool_use input arrives as input_json_delta pieces the client joins.
  const stream = anthropic.messages.stream({
    model: "m", max_tokens: 400, temperature: 1, tools, tool_choice: { type: "tool", name: "get_weather" },
    messages: [{ role: "user", content: "Weather in Lima?" }],
  });
  let deltas = 0;
  stream.on("streamEvent", (e) => { if (e.type === "content_block_delta" && e.delta.type === "input_json_delta") ++deltas; });
  const final = await stream.finalMessage();
  const streamedUses = final.content.filter((b) => b.type === "tool_use");
  assert.ok(streamedUses.length >= 1 && deltas > streamedUses.length, `${deltas} input_json_delta events`);
  for (const u of streamedUses) assert.ok(ajv.validate(weather.function.parameters, u.input), JSON.stringify(u.input));
  assert.equal(final.stop_reason, "tool_use");
  const any = await anthropic.messages.create({
    model: "m", max_tokens: 400, temperature: 1, tools, tool_choice: { type: "any" },
    messages: [{ role: "user", content: "Anything." }],
  });
  assert.ok(any.content.some((b) => b.type === "tool_use"));
  const structured = await anthropic.messages.create({
    model: "m", max_tokens: 600, temperature: 1, messages: ask,
    output_format: { type: "json_schema", schema: person },
  });
  const text = structured.content.filter((b) => b.type === "text").map((b) => b.text).join("");
  assert.ok(ajv.validate(person, JSON.parse(text)), text);
});

test("/v1/completions takes response_format too", async () => {
  const r = await openai.completions.create({
    model: "m", prompt: "A person:", max_tokens: 600, temperature: 1, seed: 4,
    response_format: { type: "json_schema", json_schema: { name: "person", schema: person } },
  });
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.ok(ajv.validate(person, JSON.parse(r.choices[0].text)), r.choices[0].text);
});

test("with speculative decoding, drafts the grammar rejects are cut and the answer still validates", async () => {
  const spec = await startServer(["--spec", "ngram", "--draft-tokens", "4"]);
  try {
    const client = new OpenAI({ apiKey: "unused", baseURL: spec.url + "/v1", maxRetries: 0 });
    // The prompt repeats JSON, so prompt lookup drafts plenty (some of it off the schema).
    const example = JSON.stringify({ name: "Ann", age: 31, role: "admin", address: { city: "Oslo", zip: "12345" }, manager: null });
    for (const seed of [1, 2]) {
      const r = await client.chat.completions.create({
        model: "m", temperature: 1, seed, max_tokens: 600,
        messages: [{ role: "user", content: `Like ${example} ${example} ${example}` }],
        response_format: { type: "json_schema", json_schema: { name: "person", schema: person } },
      });
      assert.equal(r.choices[0].finish_reason, "stop");
      assert.ok(ajv.validate(person, JSON.parse(r.choices[0].message.content)), r.choices[0].message.content);
    }
  } finally {
    await spec.stop();
  }
});
