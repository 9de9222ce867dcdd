// Speculative decoding in the server: with prompt lookup or a draft model,
// greedy answers are the answers without speculation, word for word; seeded
// sampling still reproduces; logprobs, logit_bias and stop strings still
// apply; /metrics counts drafted and accepted tokens; bad flags stop the
// server before it serves.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { binary, metric, startServer, tinyModel } from "./helpers.mjs";

const eos = { 151643: -100, 151645: -100 };  // answers run to max_tokens
// Repetitive text, so prompt lookup finds what to draft.
const repeat = "one two three four five six seven eight. ".repeat(6);
const messages = [{ role: "user", content: repeat }];

let plain, ngram, draft;
before(async () => {
  [plain, ngram, draft] = await Promise.all([
    startServer(),
    startServer(["--spec", "ngram", "--draft-tokens", "5"]),
    startServer(["--draft-model", tinyModel(), "--draft-tokens", "3", "--draft-length", "fixed"]),
  ]);
});
after(async () => Promise.all([plain, ngram, draft].map((s) => s && s.stop())));

async function chat(server, body) {
  const res = await fetch(server.url + "/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages, max_tokens: 40, logit_bias: eos, ...body }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  return res.json();
}

test("the servers say what they speculate with", () => {
  assert.match(ngram.output(), /speculative decoding: prompt lookup, up to 5 draft tokens a step \(adaptive\)/);
  assert.match(draft.output(), /speculative decoding: draft model .*, up to 3 draft tokens a step \(fixed\)/);
  assert.doesNotMatch(plain.output(), /speculative decoding/);
});

test("greedy answers are the same with and without speculation; /metrics counts the drafts", async () => {
  const body = { temperature: 0, logprobs: true, top_logprobs: 2 };
  const [a, b, c] = await Promise.all([chat(plain, body), chat(ngram, body), chat(draft, body)]);
  assert.equal(a.usage.completion_tokens, 40);
  assert.equal(b.choices[0].message.content, a.choices[0].message.content);
  assert.equal(c.choices[0].message.content, a.choices[0].message.content);
  // Logprobs come from the target's rows in the verify step: the same numbers.
  const lp = (r) => r.choices[0].logprobs.content.map((t) => [t.token, t.logprob.toFixed(3)]);
  assert.deepEqual(lp(b), lp(a));
  assert.deepEqual(lp(c), lp(a));
  for (const server of [ngram, draft]) {
    const drafted = await metric(server.url, "fathom_spec_draft_tokens_total");
    const accepted = await metric(server.url, "fathom_spec_accepted_tokens_total");
    assert.ok(drafted > 0, `drafted ${drafted}`);
    assert.ok(accepted >= 0 && accepted <= drafted, `accepted ${accepted} of ${drafted}`);
  }
  // The draft model is the target itself: its greedy drafts are right (but
  // for near-ties its different prefill chunks may round the other way).
  const drafted = await metric(draft.url, "fathom_spec_draft_tokens_total");
  assert.ok(await metric(draft.url, "fathom_spec_accepted_tokens_total") >= 0.9 * drafted);
  assert.equal(await metric(plain.url, "fathom_spec_draft_tokens_total"), 0);
});

test("seeded sampling reproduces with speculation, and other seeds differ", async () => {
  const body = { temperature: 1.0, top_p: 0.95, seed: 1234, max_tokens: 24 };
  for (const server of [ngram, draft]) {
    const a = await chat(server, body), b = await chat(server, body);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    const others = await Promise.all([1, 2, 3].map((s) => chat(server, { ...body, seed: 1234 + s })));
    assert.ok(others.some((o) => o.choices[0].message.content !== a.choices[0].message.content));
  }
});

test("a stop string ends a speculative answer where it ends a plain one", async () => {
  const first = await chat(plain, { temperature: 0, max_tokens: 30 });
  const text = first.choices[0].message.content;
  assert.ok(text.length >= 16, text);
  const stop = text.slice(12, 16);
  const [a, b] = await Promise.all([chat(plain, { temperature: 0, stop: [stop] }), chat(ngram, { temperature: 0, stop: [stop] })]);
  assert.equal(a.choices[0].finish_reason, "stop");
  assert.equal(b.choices[0].finish_reason, "stop");
  assert.equal(b.choices[0].message.content, a.choices[0].message.content);
});

test("bad speculation flags stop the server with a message", () => {
  for (const [args, message] of [
    [["--spec", "bogus"], /--spec: unknown mode "bogus"/],
    [["--spec", "draft"], /--spec draft needs --draft-model/],
    [["--spec", "ngram", "--draft-tokens", "0"], /--draft-tokens must be in 1\.\.64/],
    [["--draft-model", "/nonexistent-draft"], /nonexistent-draft/],
    [["--spec", "ngram", "--draft-length", "sometimes"], /--draft-length: unknown policy/],
  ]) {
    let failed = false;
    try {
      execFileSync(binary, ["serve", "--model", tinyModel(), "--port", "0", ...args], { stdio: "pipe", encoding: "utf8" });
    } catch (e) {
      failed = true;
      assert.notEqual(e.status, 0);
      assert.match(e.stderr, message);
    }
    assert.ok(failed, args.join(" "));
  }
});
