// The chat page that `fathom serve` serves at /, in headless Chromium against
// the real server and the shipped model (assets/models/fathom-chat-small):
// the engine panel, a streamed answer stopped midway, regenerate, the system
// prompt and the keyboard, model output that must render as text, the API key
// dialog, a server restart under the page, and a narrow window. Screenshots
// are kept in build/test-artifacts/webui (see browser.mjs).
//
// The tests share one page and run in order, as a user's session would.
// Where a test needs an answer that runs to max_tokens it adds a logit_bias
// against the end-of-sequence token to the page's request on its way out,
// and it throttles the browser's network so the stream lasts long enough to
// be stopped; the page's own code is never replaced.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { binary } from "../server/helpers.mjs";
import { artifactsDir, chatModel, launchChromium, noChromium, serve } from "./browser.mjs";

const eosId = JSON.parse(fs.readFileSync(path.join(chatModel, "config.json"), "utf8")).eos_token_id;
const skip = noChromium;

let server, browser, context, page, cdp;
const pageErrors = [];
const sent = []; // the bodies the page POSTs to /v1/chat/completions
let longAnswers = false;

before(async () => {
  if (skip) return;
  [server, browser] = await Promise.all([serve(["--model", chatModel]), launchChromium()]);
  context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  page = await context.newPage();
  page.on("console", (m) => m.type() === "error" && pageErrors.push(m.text()));
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  await page.route("**/v1/chat/completions", async (route) => {
    const body = route.request().postDataJSON();
    sent.push(body);
    if (!longAnswers) return route.continue();
    await route.continue({ postData: JSON.stringify({ ...body, logit_bias: { [eosId]: -100 } }) });
  });
  cdp = await context.newCDPSession(page);
  fs.mkdirSync(artifactsDir, { recursive: true });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

// Bytes per second the page may read (-1: unthrottled).
async function throttle(bytesPerSecond) {
  await cdp.send("Network.emulateNetworkConditions", {
    offline: false,
    latency: 0,
    downloadThroughput: bytesPerSecond,
    uploadThroughput: -1,
  });
}

const lastAnswer = (p = page) => p.locator("li.message.assistant").last();

async function answerStatus(p = page) {
  return p.evaluate(() => [...document.querySelectorAll("li.message.assistant")].at(-1)?.dataset.status);
}

async function waitForAnswer(status, p = page, timeout = 30000) {
  await p.waitForFunction(
    (s) => [...document.querySelectorAll("li.message.assistant")].at(-1)?.dataset.status === s,
    status,
    { timeout },
  );
}

async function send(text, p = page) {
  await p.fill("#input", text);
  await p.press("#input", "Enter");
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

test("the page comes from the binary and shows the engine's state", { skip }, async () => {
  const res = await page.goto(server.url + "/");
  assert.equal(res.status(), 200);
  assert.match(res.headers()["content-security-policy"], /script-src 'self'/);
  await page.waitForFunction(() => document.getElementById("st-kv-key").textContent === "bf16");
  assert.equal(await page.textContent("#model-name"), "fathom-chat-small");
  assert.equal(await page.getAttribute("#connection", "data-state"), "online");
  assert.match(await page.textContent("#st-arch"), /^qwen3, 6 layers$/);
  assert.match(await page.textContent("#st-context"), /^0 \/ 2048 tokens$/);
  assert.match(await page.textContent("#st-kv-layout"), /bf16 × 6/);
  assert.match(await page.textContent("#st-kv-token"), /^3 KiB per token$/);
  const legend = await page.locator("#mem-legend li").allTextContents();
  assert.deepEqual(legend.map((row) => row.replace(/[\d.]+ (B|KiB|MiB|GiB)$/, "").trim()), [
    "weights",
    "KV at full context",
    "transient (largest step)",
    "runtime",
  ]);
  assert.match(await page.textContent("#st-budget"), /GiB budget/);
});

test("an answer streams in, and Stop ends it midway", { skip }, async () => {
  longAnswers = true;
  await throttle(20000);
  await page.click("#settings > summary");
  await page.fill("#max-tokens", "1500");
  await send("What does jargon mean?");
  // Streamed: the text grows in several steps while the answer is still being written.
  const lengths = new Set();
  const deadline = Date.now() + 20000;
  while (lengths.size < 4 && Date.now() < deadline) {
    const text = await lastAnswer().locator(".body").innerText();
    if (text.trim() && text !== "…") lengths.add(text.length);
    assert.equal(await answerStatus(), "streaming");
    await sleep(50);
  }
  assert.ok(lengths.size >= 4, `the answer did not grow in steps: ${[...lengths]}`);
  // The live speed is refreshed every 250 ms, so it may lag the text by one tick.
  await page.waitForFunction(() => /tok\/s$/.test(document.getElementById("speed-live").textContent), null, {
    timeout: 5000,
  });
  assert.equal(await answerStatus(), "streaming");
  await page.click("#stop");
  await waitForAnswer("stopped");
  const stoppedText = await lastAnswer().locator(".body").innerText();
  await sleep(400);
  assert.equal(await lastAnswer().locator(".body").innerText(), stoppedText, "text kept arriving after Stop");
  assert.ok(stoppedText.length > 0);
  assert.match(await lastAnswer().locator(".footer").innerText(), /stopped/);
  assert.ok(await page.isVisible("#send"));
  assert.ok(await page.isHidden("#stop"));
  await throttle(-1);
  longAnswers = false;
});

test("Regenerate asks again for the last answer and replaces it", { skip }, async () => {
  await page.fill("#max-tokens", "200");
  const before = sent.length;
  await lastAnswer().locator("button.regenerate").click();
  await waitForAnswer("done");
  assert.equal(await page.locator("li.message.assistant").count(), 1);
  assert.equal(sent.length, before + 1);
  assert.deepEqual(sent.at(-1).messages, sent.at(-2).messages, "the same conversation is asked again");
  assert.equal(sent.at(-1).max_tokens, 200);
  assert.equal(sent.at(-1).temperature, 0.7);
  assert.equal(sent.at(-1).top_p, 0.95);
  assert.ok((await lastAnswer().locator(".body").innerText()).trim().length > 0);
  assert.match(await lastAnswer().locator(".footer").innerText(), /\d+ tokens · [\d.]+ tok\/s/);
  assert.match(await page.textContent("#st-context"), /^[1-9]\d* \/ 2048 tokens$/);
});

test("Enter sends, Shift+Enter adds a line, and the system prompt can be switched", { skip }, async () => {
  await page.fill("#system-prompt", "You answer in one sentence.");
  await page.click("#input");
  await page.keyboard.type("What does");
  await page.keyboard.press("Shift+Enter");
  await page.keyboard.type("hack mean?");
  assert.equal(await page.inputValue("#input"), "What does\nhack mean?");
  await page.keyboard.press("Enter");
  await waitForAnswer("done");
  assert.equal(await page.inputValue("#input"), "");
  let body = sent.at(-1);
  assert.deepEqual(body.messages[0], { role: "system", content: "You answer in one sentence." });
  assert.deepEqual(body.messages.map((m) => m.role), ["system", "user", "assistant", "user"]);
  assert.equal(body.messages.at(-1).content, "What does\nhack mean?");
  assert.equal(await page.locator("li.message.user").last().innerText().then((t) => t.includes("What does\nhack mean?")), true);

  await page.fill("#system-prompt", "You are a pirate.");
  await send("And kludge?");
  await waitForAnswer("done");
  body = sent.at(-1);
  assert.deepEqual(body.messages[0], { role: "system", content: "You are a pirate." });
  assert.deepEqual(body.messages.map((m) => m.role), ["system", "user", "assistant", "user", "assistant", "user"]);
  assert.equal(await page.locator("li.message").count(), 6);
  await page.screenshot({ path: path.join(artifactsDir, "chat-page.png") });
  assert.deepEqual(pageErrors, [], "the page logged errors (a CSP violation would show here)");
});

test("bad settings get a clear error and send nothing", { skip }, async () => {
  const before = sent.length;
  await page.fill("#temperature", "warm");
  await send("Hello?");
  assert.match(await page.textContent("#input-error"), /Temperature must be a number, got "warm"/);
  assert.equal(sent.length, before);
  // A value the server refuses: its 400 names the field, and the page shows it.
  await page.fill("#temperature", "5");
  await page.press("#input", "Enter");
  await waitForAnswer("error");
  assert.match(await lastAnswer().locator(".footer .error").innerText(), /error 400: .*temperature/);
  await page.fill("#temperature", "0.7");
});

test("model output is rendered as text: no HTML from the model runs", { skip }, async () => {
  const mock = await browser.newContext();
  const p = await mock.newPage();
  const errors = [];
  p.on("pageerror", (e) => errors.push(String(e)));
  const chunk = (delta, finish = null) =>
    `data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const stream =
    chunk({ role: "assistant", content: "" }) +
    chunk({ reasoning_content: "Thinking about <b>tags</b> first." }) +
    chunk({ content: 'Here: <script>window.__pwned = 1</script> and <img src=x onerror="window.__pwned = 2">\n\n' }) +
    chunk({ content: "```html\n<script>alert(1)</script>\n```\n[click](javascript:window.__pwned=3) **bold** `<i>x</i>`" }) +
    chunk({
      tool_calls: [
        { index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "<Paris>"}' } },
      ],
    }) +
    chunk({}, "tool_calls") +
    `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 30, total_tokens: 39 } })}\n\n` +
    "data: [DONE]\n\n";
  await p.route("**/v1/chat/completions", (route) =>
    route.fulfill({ status: 200, headers: { "content-type": "text/event-stream" }, body: stream }),
  );
  await p.goto(server.url + "/");
  await p.waitForFunction(() => document.getElementById("model-name").textContent === "fathom-chat-small");
  await send("hi", p);
  await waitForAnswer("done", p);
  const answer = lastAnswer(p);
  const html = await p.evaluate(() => ({
    elements: document.querySelectorAll("#messages script, #messages img, #messages iframe").length,
    links: [...document.querySelectorAll("#messages a")].map((a) => a.getAttribute("href")),
    pwned: window.__pwned ?? null,
  }));
  assert.deepEqual(html, { elements: 0, links: [], pwned: null });
  const text = await answer.locator(".body").innerText();
  assert.ok(text.includes('Here: <script>window.__pwned = 1</script> and <img src=x onerror="window.__pwned = 2">'), text);
  assert.ok(text.includes("[click](javascript:window.__pwned=3)"), text);
  assert.equal(await answer.locator(".code-block code").innerText(), "<script>alert(1)</script>");
  assert.equal(await answer.locator(".body strong").innerText(), "bold");
  assert.equal(await answer.locator(".body p code").innerText(), "<i>x</i>");
  // Reasoning is folded, and shown as text when opened.
  const reasoning = answer.locator("details.reasoning");
  assert.equal(await reasoning.evaluate((d) => d.open), false);
  assert.match(await reasoning.locator("summary").innerText(), /^Reasoning \(\d+ characters\)$/);
  await reasoning.locator("summary").click();
  assert.equal(await reasoning.locator(".reasoning-body").innerText(), "Thinking about <b>tags</b> first.");
  // A tool call is shown as one.
  assert.equal(await answer.locator(".tool-call .tool-name").innerText(), "get_weather");
  assert.equal(await answer.locator(".tool-call .tool-args").innerText(), '{\n  "city": "<Paris>"\n}');
  assert.deepEqual(errors, []);
  await mock.close();
});

test("with --api-key the page asks for the key once and keeps it for the tab", { skip }, async () => {
  const keyed = await serve(["--model", chatModel, "--api-key", "s3cret"]);
  const ctx = await browser.newContext();
  try {
    const p = await ctx.newPage();
    const res = await p.goto(keyed.url + "/");
    assert.equal(res.status(), 200, "the page itself needs no key");
    await p.waitForSelector("#key-dialog[open]");
    assert.match(await p.textContent("#key-reason"), /needs an API key/);
    // Dismissed, it says what is missing and does not come back on its own (status polls every 2 s).
    await p.click("#key-cancel");
    assert.match(await p.textContent("#banner"), /needs an API key: send a message to enter it/);
    await sleep(2500);
    assert.equal(await p.locator("#key-dialog[open]").count(), 0, "the dialog came back unasked");
    // Sending a message asks again.
    await send("What does foo mean?", p);
    await p.waitForSelector("#key-dialog[open]");
    await p.fill("#key-input", "wrong");
    await p.click("#key-ok");
    await p.waitForFunction(() => document.getElementById("key-reason").textContent.includes("refused"));
    assert.ok(await p.isVisible("#key-dialog"));
    await p.fill("#key-input", "s3cret");
    await p.press("#key-input", "Enter");
    await waitForAnswer("done", p);
    await p.waitForFunction(() => document.getElementById("model-name").textContent === "fathom-chat-small");
    assert.equal(await p.evaluate(() => sessionStorage.getItem("fathom.apiKey")), "s3cret");
    await p.reload();
    await p.waitForFunction(() => document.getElementById("st-kv-key").textContent === "bf16");
    assert.equal(await p.locator("#key-dialog[open]").count(), 0, "asked again after a reload");
    await send("And bar?", p);
    await waitForAnswer("done", p);
  } finally {
    await ctx.close();
    await keyed.stop();
  }
});

test("a server restart under the page: a clear message, then it reconnects", { skip }, async () => {
  const port = server.port;
  await server.stop();
  server = null;
  await page.waitForSelector("#banner:not([hidden])", { timeout: 10000 });
  assert.match(await page.textContent("#banner"), /not answering .*Reconnecting/);
  assert.equal(await page.getAttribute("#connection", "data-state"), "offline");
  // A message typed meanwhile is kept, not lost.
  await send("Are you back?");
  assert.match(await page.textContent("#input-error"), /not answering yet/);
  assert.equal(await page.inputValue("#input"), "Are you back?");

  server = await serve(["--model", chatModel], port);
  await page.waitForFunction(() => document.getElementById("banner").textContent.includes("Reconnected"), null, {
    timeout: 10000,
  });
  assert.equal(await page.getAttribute("#connection", "data-state"), "online");
  await page.press("#input", "Enter");
  await waitForAnswer("done");
  assert.equal(await page.inputValue("#input"), "");
});

test("a narrow window: one column, no sideways scrolling, the engine panel as a drawer", { skip }, async () => {
  await page.setViewportSize({ width: 390, height: 800 });
  if (await page.evaluate(() => document.getElementById("settings").open)) await page.click("#settings > summary");
  const layout = await page.evaluate(() => ({
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    composerBottom: document.getElementById("composer").getBoundingClientRect().bottom,
  }));
  assert.ok(layout.overflow <= 0, `the page scrolls sideways by ${layout.overflow}px`);
  assert.ok(layout.composerBottom <= 800, "the composer is below the window");
  assert.ok(await page.isHidden("#panel"));
  await page.screenshot({ path: path.join(artifactsDir, "chat-page-narrow.png") });
  await page.click("#toggle-panel");
  assert.ok(await page.isVisible("#panel"));
  await page.screenshot({ path: path.join(artifactsDir, "chat-page-narrow-panel.png") });
  await page.click("#toggle-panel");
  assert.ok(await page.isHidden("#panel"));
});

test("serve --no-webui serves no page; GET /status has the contract's terms as fit predicts them", async () => {
  const bare = await serve(["--model", chatModel, "--no-webui", "--memory-budget", "2GiB"]);
  try {
    const res = await fetch(bare.url + "/");
    assert.equal(res.status, 404);
    assert.match((await res.json()).error.message, /no route for GET \//);
    assert.doesNotMatch(bare.output(), /chat page/);

    const status = await (await fetch(bare.url + "/status")).json();
    const fit = JSON.parse(
      execFileSync(binary, ["fit", "--model", chatModel, "--threads", "1", "--memory-budget", "2GiB", "--ctx", "2048", "--json"], {
        encoding: "utf8",
      }),
    );
    const c = status.memory.contract;
    assert.deepEqual(
      [c.context, c.prefill_chunk, c.weights_bytes, c.kv_bytes, c.transient_bytes, c.runtime_bytes, c.total_bytes],
      [fit.ctx, fit.prefill_chunk, fit.weights_bytes, fit.kv_bytes, fit.transient_bytes, fit.runtime_bytes, fit.total_bytes],
    );
    assert.equal(status.memory.budget_bytes, 2 ** 31);
    assert.equal(status.kv.cache_key, fit.kv.cache_key);
    assert.equal(status.kv.bytes_at_context, fit.kv_bytes);
    assert.deepEqual(status.context, { length: 2048, window: 2048 });
    assert.equal(status.model.architecture, "qwen3");
  } finally {
    await bare.stop();
  }
});

test("serve --host 0.0.0.0 without an API key warns; with one it does not", async () => {
  const open = await serve(["--model", chatModel, "--host", "0.0.0.0"]);
  const keyed = await serve(["--model", chatModel, "--host", "0.0.0.0", "--api-key", "k"]);
  try {
    // The warning goes to stderr, which may arrive after the listening line.
    for (let i = 0; i < 40 && !/warning/.test(open.output()); i++) await sleep(50);
    assert.match(open.output(), /warning: --host 0\.0\.0\.0 without --api-key: anyone who can reach this machine/);
    assert.match(open.output(), /chat page: open http:\/\/127\.0\.0\.1:\d+\/ in a browser/);
    assert.doesNotMatch(keyed.output(), /warning/);
    // The page is public; the API behind it is not.
    assert.equal((await fetch(keyed.url + "/")).status, 200);
    assert.equal((await fetch(keyed.url + "/status")).status, 401);
  } finally {
    await Promise.all([open.stop(), keyed.stop()]);
  }
});
