// The OpenAI Responses API through the official client: client.responses.create
// with and without streaming, instructions, function tools (forced), text.format
// json_schema, previous_response_id from the store, and its errors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Ajv2020 from "ajv/dist/2020.js";
import { startServer } from "./helpers.mjs";

const ajv = new Ajv2020({ strict: false });
let server, openai;
before(async () => {
  server = await startServer();
  openai = new OpenAI({ apiKey: "unused", baseURL: server.url + "/v1", maxRetries: 0 });
});
after(async () => server && (await server.stop()));

const lookup = {
  type: "function",
  name: "lookup",
  description: "Look a word up",
  parameters: { type: "object", properties: { word: { type: "string", maxLength: 10 } }, required: ["word"], additionalProperties: false },
};
const verdict = {
  type: "object",
  properties: { ok: { type: "boolean" }, score: { type: "integer", minimum: 1, maximum: 5 } },
  required: ["ok", "score"],
  additionalProperties: false,
};

test("responses.create: a message item, usage, and the fields echoed back", async () => {
  const r = await openai.responses.create({ model: "m", input: "Hello!", instructions: "Be brief.", max_output_tokens: 6, temperature: 0 });
  assert.equal(r.object, "response");
  assert.match(r.id, /^resp_/);
  assert.ok(["completed", "incomplete"].includes(r.status));
  if (r.status === "incomplete") assert.equal(r.incomplete_details.reason, "max_output_tokens");
  assert.equal(r.instructions, "Be brief.");
  const message = r.output.find((i) => i.type === "message");
  assert.equal(message.role, "assistant");
  assert.equal(message.content[0].type, "output_text");
  assert.equal(typeof r.output_text, "string");  // the client's convenience, from the items
  assert.equal(r.output_text, message.content[0].text);
  assert.ok(r.usage.input_tokens > 5 && r.usage.output_tokens >= 1 && r.usage.output_tokens <= 6);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
});

test("streaming events assemble into the same response as the final event", async () => {
  const stream = await openai.responses.create({ model: "m", input: "Count to three.", max_output_tokens: 8, temperature: 0, stream: true });
  const types = [];
  let text = "", final, sequence = -1;
  for await (const event of stream) {
    types.push(event.type);
    assert.equal(event.sequence_number, sequence + 1);
    sequence = event.sequence_number;
    if (event.type === "response.output_text.delta") text += event.delta;
    if (event.type === "response.completed" || event.type === "response.incomplete") final = event.response;
  }
  assert.equal(types[0], "response.created");
  assert.equal(types[1], "response.in_progress");
  assert.ok(types.includes("response.output_item.added") && types.includes("response.output_text.done"));
  assert.ok(final);
  const whole = await openai.responses.create({ model: "m", input: "Count to three.", max_output_tokens: 8, temperature: 0 });
  assert.equal(text, whole.output_text);
  assert.equal(final.output.find((i) => i.type === "message").content[0].text, text);
});

test("a required function call, streamed and not; its output goes back through previous_response_id", async () => {
  const first = await openai.responses.create({
    model: "m", input: "Look up 'gnu'.", tools: [lookup], tool_choice: "required", temperature: 1, max_output_tokens: 300,
  });
  const call = first.output.find((i) => i.type === "function_call");
  assert.ok(call, JSON.stringify(first.output));
  assert.equal(call.name, "lookup");
  assert.ok(ajv.validate(lookup.parameters, JSON.parse(call.arguments)), call.arguments);
  assert.match(call.call_id, /^call_/);
  const second = await openai.responses.create({
    model: "m", previous_response_id: first.id, max_output_tokens: 5, temperature: 0, tools: [lookup],
    input: [{ type: "function_call_output", call_id: call.call_id, output: "an antelope" }],
  });
  assert.equal(second.previous_response_id, first.id);
  // The stored conversation (the question, the call and its output) is in the prompt.
  assert.ok(second.usage.input_tokens > first.usage.input_tokens, `${second.usage.input_tokens} vs ${first.usage.input_tokens}`);

  const stream = await openai.responses.create({
    model: "m", input: "Look up 'yak'.", tools: [lookup], tool_choice: { type: "function", name: "lookup" },
    temperature: 1, max_output_tokens: 300, stream: true,
  });
  // Each call's deltas, by item, reassemble into its arguments.
  const args = new Map(), done = new Map();
  for await (const event of stream) {
    if (event.type === "response.function_call_arguments.delta") args.set(event.item_id, (args.get(event.item_id) ?? "") + event.delta);
    if (event.type === "response.function_call_arguments.done") done.set(event.item_id, event.arguments);
  }
  assert.ok(done.size >= 1);
  assert.ok([...args.values()].some((a) => a.length > 0));
  for (const [id, whole] of done) {
    assert.equal(args.get(id), whole);
    assert.ok(ajv.validate(lookup.parameters, JSON.parse(whole)), whole);
  }
});

test("text.format json_schema gives output_text that validates", async () => {
  for (const seed of [1, 2, 3]) {
    const r = await openai.responses.create({
      model: "m", input: "Judge this.", temperature: 1, max_output_tokens: 200, seed,
      text: { format: { type: "json_schema", name: "verdict", schema: verdict, strict: true } },
    });
    assert.equal(r.status, "completed");
    assert.ok(ajv.validate(verdict, JSON.parse(r.output_text)), r.output_text);
  }
});

test("errors: an unknown previous_response_id is a 404; store: false is not kept; bad items are 400s", async () => {
  await assert.rejects(openai.responses.create({ model: "m", input: "x", previous_response_id: "resp_nope" }),
                       (e) => e.status === 404 && e.param === "previous_response_id");
  const unstored = await openai.responses.create({ model: "m", input: "x", max_output_tokens: 2, store: false });
  await assert.rejects(openai.responses.create({ model: "m", input: "y", previous_response_id: unstored.id }),
                       (e) => e.status === 404);
  await assert.rejects(openai.responses.create({ model: "m", input: [{ type: "computer_call" }] }),
                       (e) => e.status === 400 && /computer_call/.test(e.message));
  await assert.rejects(openai.responses.create({ model: "m", input: "x", tools: [{ type: "web_search" }] }),
                       (e) => e.status === 400 && e.param === "tools[0].type");
});
