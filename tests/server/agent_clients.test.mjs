// The clients people build agents with, unchanged against `fathom serve`: the
// Vercel AI SDK (its default OpenAI provider, which calls the Responses API,
// and the OpenAI-compatible provider, which calls chat completions) and
// LangChain's ChatOpenAI. Each structured or forced-tool call is one that
// failed before constrained decoding: the client validates the answer with
// its own (zod) schema and throws when it does not fit.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { generateObject, streamText, generateText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";
import { startServer } from "./helpers.mjs";

let server;
before(async () => { server = await startServer(); });
after(async () => server && (await server.stop()));

const Recipe = z.object({
  title: z.string().min(1).max(20),
  servings: z.number().int().min(1).max(12),
  vegetarian: z.boolean(),
  steps: z.array(z.string().max(16)).min(1).max(3),
  difficulty: z.enum(["easy", "medium", "hard"]),
});
const weatherArgs = z.object({ city: z.string().max(12), unit: z.enum(["c", "f"]) });

test("AI SDK, default OpenAI provider (Responses API): generateObject and streamText with a required tool", async () => {
  const openai = createOpenAI({ apiKey: "unused", baseURL: server.url + "/v1" });
  for (const seed of [1, 2]) {
    const { object } = await generateObject({
      model: openai("fathom"), schema: Recipe, prompt: "A recipe.", temperature: 1, seed, maxOutputTokens: 400, maxRetries: 0,
    });
    assert.ok(Recipe.safeParse(object).success);
  }
  const result = streamText({
    model: openai("fathom"), prompt: "Weather in Lima?", temperature: 1, maxOutputTokens: 300, maxRetries: 0,
    tools: { weather: tool({ description: "weather", inputSchema: weatherArgs }) }, toolChoice: "required",
  });
  const calls = await result.toolCalls;
  assert.ok(calls.length >= 1);
  for (const c of calls) {
    assert.equal(c.toolName, "weather");
    assert.ok(weatherArgs.safeParse(c.input).success, JSON.stringify(c.input));
  }
});

test("AI SDK, OpenAI-compatible provider (chat completions): generateObject, and generateText with a named tool", async () => {
  const provider = createOpenAICompatible({ name: "fathom", baseURL: server.url + "/v1", supportsStructuredOutputs: true });
  const { object } = await generateObject({
    model: provider("fathom"), schema: Recipe, prompt: "A recipe.", temperature: 1, maxOutputTokens: 400, maxRetries: 0,
  });
  assert.ok(Recipe.safeParse(object).success);
  const { toolCalls } = await generateText({
    model: provider("fathom"), prompt: "Weather in Kyiv?", temperature: 1, maxOutputTokens: 300, maxRetries: 0,
    tools: { weather: tool({ description: "weather", inputSchema: weatherArgs }),
             clock: tool({ description: "time", inputSchema: z.object({ zone: z.string().max(5) }) }) },
    toolChoice: { type: "tool", toolName: "clock" },
  });
  assert.ok(toolCalls.length >= 1);
  for (const c of toolCalls) assert.equal(c.toolName, "clock");
});

test("LangChain ChatOpenAI: withStructuredOutput (JSON schema and function calling), bindTools with a required tool", async () => {
  const chat = new ChatOpenAI({
    model: "fathom", apiKey: "unused", temperature: 1, maxTokens: 400, maxRetries: 0,
    configuration: { baseURL: server.url + "/v1" },
  });
  for (const method of ["jsonSchema", "functionCalling"]) {
    const structured = chat.withStructuredOutput(Recipe, { name: "recipe", method });
    const recipe = await structured.invoke("A recipe, please.");
    assert.ok(Recipe.safeParse(recipe).success, `${method}: ${JSON.stringify(recipe)}`);
  }
  const withTools = chat.bindTools(
    [{ name: "weather", description: "weather", schema: weatherArgs }],
    { tool_choice: "required" },
  );
  const message = await withTools.invoke("Weather in Quito?");
  assert.ok(message.tool_calls.length >= 1);
  for (const c of message.tool_calls) {
    assert.equal(c.name, "weather");
    assert.ok(weatherArgs.safeParse(c.args).success, JSON.stringify(c.args));
  }
});
