// The memory contract in the server: under --memory-budget the context is what
// fits, a request that cannot fit even alone is a 400 at once while the others
// complete, resident memory stays under the budget, and a --ctx-size that
// cannot fit stops the server before it serves. (The prefix cache is off here:
// its reservation is tested in prefix_cache.test.mjs.)
import test from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { binary, checksMemory, metric, startServer, tinyKvHeavyModel } from "./helpers.mjs";

const model = tinyKvHeavyModel();  // 32 KiB of KV per token: contexts are sized in MBs
const eos = { 151643: -100, 151645: -100 };  // long runs generate every token they ask for

function fit(ctx) {
  const out = execFileSync(binary, ["fit", "--model", model, "--ctx", String(ctx), "--threads", "1", "--json",
    "--memory-budget", "8GiB"], { encoding: "utf8" });
  return JSON.parse(out);
}

async function chat(url, body) {
  const res = await fetch(url + "/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "count to three" }], ...body }),
  });
  return { status: res.status, body: await res.json() };
}

// A budget with room for about `tokens` tokens beside what this server holds
// before any request (read from a first start, since the tokenizer and the
// HTTP threads are measured at start-up, not predicted).
async function budgetFor(tokens) {
  const probe = await startServer(["--model", model, "--prefix-cache", "0", "--memory-budget", "8GiB"]);
  const fixed = await metric(probe.url, "fathom_memory_predicted_bytes");
  await probe.stop();
  const f = fit(tokens);
  return fixed + f.kv_bytes + f.transient_bytes;
}

test("under a memory budget: the context is what fits, a request that cannot fit is a 400 at once, the rest complete, RSS stays under the budget", async () => {
  const budget = await budgetFor(1000);
  const server = await startServer(["--model", model, "--prefix-cache", "0", "--memory-budget", String(budget)]);
  try {
    assert.match(server.output(), /the longest that fits the memory budget/);
    const models = await (await fetch(server.url + "/v1/models")).json();
    const fits = models.data[0].context_length;
    // About 1000 tokens, more when a smaller prefill chunk leaves the KV more room; under the model's 2048.
    assert.ok(fits > 900 && fits < 1600, `context ${fits} for a budget of about 1000 tokens`);
    assert.equal(await metric(server.url, "fathom_memory_budget_bytes"), budget);

    // Requests that fit, queued around one that cannot fit even alone.
    const small = Array.from({ length: 4 }, (_, i) => chat(server.url, { max_tokens: 24, seed: i }));
    const t0 = Date.now();
    const tooBig = await chat(server.url, { max_tokens: fits + 50 });
    const refusedIn = Date.now() - t0;
    assert.equal(tooBig.status, 400);
    assert.equal(tooBig.body.error.code, "memory_budget_exceeded");
    assert.equal(tooBig.body.error.type, "invalid_request_error");
    assert.equal(tooBig.body.error.param, "max_tokens");
    assert.match(tooBig.body.error.message, new RegExp(`memory budget is ${budget} bytes: at most ${fits} tokens`));
    assert.ok(refusedIn < 2000, `refused after ${refusedIn} ms`);
    for (const r of await Promise.all(small)) {
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.usage.completion_tokens, 24);
    }

    // Anthropic's route refuses it in Anthropic's shape.
    const res = await fetch(server.url + "/v1/messages", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ max_tokens: fits + 50, messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(res.status, 400);
    const anthropic = await res.json();
    assert.equal(anthropic.type, "error");
    assert.equal(anthropic.error.type, "invalid_request_error");
    assert.match(anthropic.error.message, /memory budget/);

    // Without max_tokens a request may use the whole fitting context.
    const open = await chat(server.url, { logit_bias: eos, stream: false });
    assert.equal(open.status, 200);
    assert.equal(open.body.usage.prompt_tokens + open.body.usage.completion_tokens, fits);

    // A long run of the largest requests that fit keeps the process under the budget
    // (once where resident memory is not checked: a sanitized binary's is not the release's).
    const prompt = open.body.usage.prompt_tokens;
    for (let i = 0; i < (checksMemory ? 3 : 1); i++) {
      const r = await chat(server.url, { max_tokens: fits - prompt, logit_bias: eos, seed: 100 + i });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.usage.completion_tokens, fits - prompt);
      assert.ok(await metric(server.url, "fathom_memory_predicted_bytes") <= budget);
      if (checksMemory) assert.ok(server.rss() <= budget, `RSS ${server.rss()} over the budget ${budget}`);
    }
    if (checksMemory) {
      const resident = await metric(server.url, "fathom_memory_resident_bytes");
      assert.ok(resident > 0 && resident <= budget, `resident ${resident}, budget ${budget}`);
    }
  } finally {
    await server.stop();
  }
});

test("a budget for two long requests at once: the third waits in the queue, then completes; RSS stays under the budget", async () => {
  // Room for two sequences of n tokens and half of a third (shorter where a
  // sanitized binary runs several times slower: only the queueing is checked there).
  const n = checksMemory ? 700 : 300;
  const f = fit(n);
  const probe = await startServer(["--model", model, "--prefix-cache", "0", "--memory-budget", "8GiB"]);
  const fixed = await metric(probe.url, "fathom_memory_predicted_bytes");
  await probe.stop();
  const budget = Math.floor(fixed + 2.5 * (f.kv_bytes + f.transient_bytes));
  const server = await startServer(["--model", model, "--prefix-cache", "0", "--memory-budget", String(budget), "--max-running", "8"]);
  try {
    const prompt = (await chat(server.url, { max_tokens: 1 })).body.usage.prompt_tokens;
    let mostRunning = 0, mostWaiting = 0, polling = true;
    const poll = (async () => {
      while (polling) {
        mostRunning = Math.max(mostRunning, await metric(server.url, "fathom_requests_running"));
        mostWaiting = Math.max(mostWaiting, await metric(server.url, "fathom_queue_depth"));
        if (checksMemory) assert.ok(server.rss() <= budget, `RSS ${server.rss()} over the budget ${budget}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const three = await Promise.all([0, 1, 2].map((i) =>
      chat(server.url, { max_tokens: n - prompt, logit_bias: eos, seed: i })));
    polling = false;
    await poll;
    for (const r of three) {
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.usage.completion_tokens, n - prompt);
    }
    assert.equal(mostRunning, 2, "two run at once, not three");
    assert.ok(mostWaiting >= 1, "the third waited in the queue");
    assert.ok(await metric(server.url, "fathom_memory_predicted_bytes") <= budget);
  } finally {
    await server.stop();
  }
});

test("a --ctx-size that cannot fit the budget stops the server with the numbers", async () => {
  const budget = await budgetFor(500);
  await assert.rejects(startServer(["--model", model, "--prefix-cache", "0", "--memory-budget", String(budget), "--ctx-size", "2000"]),
    (e) => /--ctx-size 2000 does not fit the memory budget of \d+ bytes: .* at most \d+ tokens fit/.test(e.message));
  await assert.rejects(startServer(["--model", model, "--prefix-cache", "0", "--memory-budget", "1MiB"]),
    (e) => /do not fit the memory budget/.test(e.message));
});
