// The prefix cache in the server: a request sharing a long system prompt
// with an earlier one reports the shared tokens as cached (OpenAI
// prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens),
// answers exactly as a server without the cache does, and /metrics counts
// the hits and tokens saved; --prefix-cache 0 turns it off.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { metric, startServer } from "./helpers.mjs";

// Answers run to max_tokens and not in whitespace (see batching.test.mjs).
const bias = { 151643: -100, 151645: -100, 198: -100, 271: -100, 220: -100, 197: -100, 256: -100 };
const system = "You are a careful assistant who answers in full sentences. ".repeat(30);
let cached, plain;
before(async () => {
  cached = await startServer(["--dtype", "f32"]);
  plain = await startServer(["--dtype", "f32", "--prefix-cache", "0"]);
});
after(async () => {
  await cached?.stop();
  await plain?.stop();
});

async function chat(server, user) {
  const res = await fetch(server.url + "/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "system", content: system }, { role: "user", content: user }],
      max_tokens: 8, temperature: 0, logit_bias: bias }),
  });
  assert.equal(res.status, 200);
  return res.json();
}

test("a shared system prompt is prefilled once: later requests report it cached and answer as without the cache", async () => {
  const first = await chat(cached, "Tell me about cats.");
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  for (const user of ["Tell me about dogs.", "What is a prime number?"]) {
    const [withCache, without] = await Promise.all([chat(cached, user), chat(plain, user)]);
    const cachedTokens = withCache.usage.prompt_tokens_details.cached_tokens;
    assert.ok(cachedTokens > 300 && cachedTokens < withCache.usage.prompt_tokens,
      `cached ${cachedTokens} of ${withCache.usage.prompt_tokens} prompt tokens`);
    assert.equal(withCache.choices[0].message.content, without.choices[0].message.content);
    assert.equal(without.usage.prompt_tokens_details.cached_tokens, 0);
  }
  assert.equal(await metric(cached.url, "fathom_prefix_cache_hits_total"), 2);
  assert.ok(await metric(cached.url, "fathom_prefix_cache_tokens_saved_total") > 600);
  assert.ok(await metric(cached.url, "fathom_prefix_cache_bytes") > 0);
  assert.equal(await metric(plain.url, "fathom_prefix_cache_hits_total"), 0);
});

test("a --prefix-cache that is not a size or a share is refused before the model loads", async () => {
  for (const bad of ["lots", "60%", "-1"])
    await assert.rejects(startServer(["--prefix-cache", bad]), /--prefix-cache/);
});

test("the prefix cache's bytes are reserved in the memory budget", async () => {
  const predicted = async (size) => {
    const server = await startServer(["--memory-budget", "2GiB", "--prefix-cache", size]);
    try {
      assert.match(server.output(), /the prefix cache up to /);
      return await metric(server.url, "fathom_memory_predicted_bytes");
    } finally {
      await server.stop();
    }
  };
  const off = await predicted("0"), five = await predicted("5MiB");
  // The servers' own overhead is measured at start-up and moves by a few pages.
  assert.ok(Math.abs(five - off - 5 * 1024 * 1024) < 1024 * 1024, `${five} - ${off}`);
});

test("Anthropic's usage counts cache reads apart from the other input tokens", async () => {
  const ask = async () => {
    const res = await fetch(cached.url + "/v1/messages", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ system, max_tokens: 4, messages: [{ role: "user", content: "Name a river." }] }),
    });
    assert.equal(res.status, 200);
    return (await res.json()).usage;
  };
  const first = await ask(), again = await ask();
  assert.ok(again.cache_read_input_tokens > 300, JSON.stringify(again));
  assert.equal(again.input_tokens + again.cache_read_input_tokens,
    first.input_tokens + first.cache_read_input_tokens, "the same prompt in all");
  assert.equal(again.cache_creation_input_tokens, 0);
});
