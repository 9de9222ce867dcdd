// A hostile client's probes: each once crashed, hung or misled the server.
// Every case must end in a clean error while the server keeps answering.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { checksMemory, startServer, tinyModel } from "./helpers.mjs";

let server;
before(async () => {
  server = await startServer(["--max-connections", "8", "--header-timeout", "2", "--idle-timeout", "1", "--api-key", "k"]);
});
after(async () => server && (await server.stop()));

const auth = { authorization: "Bearer k", "content-type": "application/json" };
const hi = [{ role: "user", content: "Hello!" }];

async function post(url, route, body, headers = auth) {
  const r = await fetch(url + route, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body), headers });
  const text = await r.text();
  return { status: r.status, body: JSON.parse(text) };
}

async function healthy(url = server.url) {
  const r = await fetch(url + "/health", { signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 200);
  assert.equal((await r.json()).status, "ok");
}

// Opens a raw connection; resolves once connected.
function connect(port) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () => resolve(s));
    s.once("error", reject);
  });
}

// Everything the server sends until it closes the connection (or `ms` pass).
function readAll(socket, ms = 5000) {
  return new Promise((resolve) => {
    let data = "";
    const timer = setTimeout(() => resolve({ data, closed: false }), ms);
    socket.on("data", (d) => (data += d));
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ data, closed: true });
    });
    socket.on("error", () => {});
  });
}

const deep = (n) => "[".repeat(n) + "]".repeat(n);

test("deeply nested JSON anywhere in a request is a 400, not a stack overflow", async () => {
  const nest = deep(100000);
  const bodies = [
    ["/v1/chat/completions", `{"x": ${nest}, "messages": [{"role": "user", "content": "hi"}]}`],
    ["/v1/completions", `{"prompt": "hi", "y": ${nest}}`],
    ["/v1/messages", `{"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}], "z": ${nest}}`],
    ["/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi", "extra": ${nest}}]}`],
    ["/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tools": ${nest}}`],
    ["/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"a": ${nest}}}`],
  ];
  for (const [route, body] of bodies) {
    const r = await post(server.url, route, body);
    assert.equal(r.status, 400, route);
    assert.match(JSON.stringify(r.body), /nesting deeper than 64/);
  }
  // 64 levels are still fine.
  const ok = await post(server.url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "x": ${deep(63)}}`);
  assert.equal(ok.status, 200);
  // Tool-call arguments inside a message are parsed too: a deep string is left as text, not recursed into.
  const args = await post(server.url, "/v1/chat/completions", {
    messages: [{ role: "user", content: "hi" }, { role: "assistant", tool_calls: [{ id: "1", type: "function", function: { name: "f", arguments: deep(300) } }] }, { role: "user", content: "go" }],
    max_tokens: 1,
  });
  assert.equal(args.status, 200);
  await healthy();
});

test("an object with 80k keys is refused quickly (no quadratic parse)", async () => {
  const keys = Array.from({ length: 80000 }, (_, i) => `"k${i}": 0`).join(",");
  const t0 = performance.now();
  const r = await post(server.url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "x": {${keys}}}`);
  const ms = performance.now() - t0;
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /more than 1024 keys/);
  assert.ok(ms < 2000, `took ${ms} ms`);
});

test("client-controlled counts are bounded, each a 400 naming the field", async () => {
  const many = (n, f) => Array.from({ length: n }, (_, i) => f(i));
  const cases = [
    [{ messages: many(4097, () => hi[0]) }, "messages"],
    [{ messages: hi, tools: many(129, (i) => ({ type: "function", function: { name: `f${i}` } })) }, "tools"],
    [{ messages: hi, stop: many(17, (i) => `s${i}`) }, "stop"],
    [{ messages: hi, stop: ["x".repeat(1025)] }, "stop"],
    [{ messages: hi, logit_bias: Object.fromEntries(many(1001, (i) => [String(i), 1])) }, "logit_bias"],
    [{ messages: hi, logprobs: true, top_logprobs: 21 }, "top_logprobs"],
    [{ messages: hi, n: 17 }, "n"],
    [{ messages: hi, seed: 9223372036854775808 }, "seed"],
    [{ messages: hi, seed: 1e300 }, "seed"],
    [{ messages: hi, seed: 1.5 }, "seed"],
    [{ messages: hi, max_tokens: -1 }, "max_tokens"],
  ];
  for (const [body, param] of cases) {
    const r = await post(server.url, "/v1/chat/completions", body);
    assert.equal(r.status, 400, param + ": " + JSON.stringify(r.body));
    assert.equal(r.body.error.param, param);
  }
  // The largest seed that fits is fine.
  const ok = await post(server.url, "/v1/chat/completions", { messages: hi, max_tokens: 2, seed: -9223372036854775808 });
  assert.equal(ok.status, 200);
});

test("Anthropic fields of the wrong type are 400s, not 500s", async () => {
  const msg = (content) => ({ max_tokens: 4, messages: [{ role: "user", content: "hi" }, { role: "assistant", content }, { role: "user", content: "ok" }] });
  const cases = [
    { max_tokens: 4, messages: hi, tools: [{ name: "f", description: 5 }] },
    { max_tokens: 4, messages: hi, tools: [{ name: "f", input_schema: 5 }] },
    msg([{ type: "tool_use", id: 5, name: "f", input: {} }]),
    msg([{ type: "tool_use", id: "a", name: 5, input: {} }]),
    msg([{ type: "tool_use", id: "a", name: "f", input: 5 }]),
    { max_tokens: 4, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: 7, content: "x" }] }] },
    { max_tokens: 4, messages: hi, tool_choice: { type: 5 } },
    { max_tokens: 4, messages: hi, tool_choice: "auto" },
    { max_tokens: 4, messages: hi, thinking: { type: 1 } },
  ];
  for (const body of cases) {
    const r = await post(server.url, "/v1/messages", body);
    assert.equal(r.status, 400, JSON.stringify(body) + " → " + JSON.stringify(r.body));
    assert.equal(r.body.type, "error");
    assert.equal(r.body.error.type, "invalid_request_error");
  }
});

test("a subnormal temperature samples greedily instead of picking the last id", async () => {
  const base = { messages: hi, max_tokens: 8, seed: 3 };
  const greedy = await post(server.url, "/v1/chat/completions", { ...base, temperature: 0 });
  const tiny = await post(server.url, "/v1/chat/completions", { ...base, temperature: 1e-40, logprobs: true });
  assert.equal(tiny.status, 200);
  assert.equal(tiny.body.choices[0].message.content, greedy.body.choices[0].message.content);
  for (const t of tiny.body.choices[0].logprobs.content) assert.ok(Number.isFinite(t.logprob));
});

test("a 401 does not leave its body to be read as the next request", async () => {
  const inner = "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n\r\n";
  const s = await connect(server.port);
  const got = readAll(s);
  s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`);
  const { data, closed } = await got;
  assert.ok(closed, "the connection is closed after the 401");
  assert.equal((data.match(/^HTTP\/1\.1 /gm) ?? []).length, 1, data);
  assert.match(data, /^HTTP\/1\.1 401/);
  assert.doesNotMatch(data, /"object":"list"/);
});

test("slow and idle connections cannot starve others; beyond the cap a 503 comes at once", { timeout: 30000 }, async () => {
  // Eight clients (the cap) trickle a header line each second, which no single read timeout catches.
  const slow = [];
  for (let i = 0; i < 8; ++i) {
    const s = await connect(server.port);
    s.on("error", () => {});
    s.write("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n");
    slow.push({ s, closed: readAll(s, 10000) });
  }
  const drip = setInterval(() => slow.forEach(({ s }) => s.writable && s.write(`X-Drip: ${Date.now()}\r\n`)), 500);
  try {
    await new Promise((r) => setTimeout(r, 300));
    // Every thread is taken: the next connection gets a clean, immediate refusal.
    const t0 = performance.now();
    const refused = await fetch(server.url + "/health", { signal: AbortSignal.timeout(5000) });
    assert.equal(refused.status, 503);
    assert.equal((await refused.json()).error.code, "too_many_connections");
    assert.ok(performance.now() - t0 < 1000);
    // The header deadline (2 s) drops the tricklers, whatever they still send.
    for (const { closed } of slow) assert.ok((await closed).closed, "a trickling connection was closed");
  } finally {
    clearInterval(drip);
  }
  await healthy();
  // Idle connections are closed after --idle-timeout (1 s) and free their threads.
  // (The readers are attached at connect: a connection may be closed before the last one connects.)
  const idleClosed = await Promise.all(Array.from({ length: 8 }, () => connect(server.port).then((s) => readAll(s, 5000))));
  const state = await (await fetch(server.url + "/health")).text();
  for (const c of idleClosed) assert.ok(c.closed, "an idle connection was closed: " + JSON.stringify(idleClosed) + state);
  await healthy();
  const status = await (await fetch(server.url + "/health")).json();
  assert.ok(status.refused_connections >= 1);
});

// Writes `piece` over and over until the server closes the connection; resolves to the bytes sent and its reply.
function flood(port, head, piece, maxBytes) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    let sent = 0, reply = "", done = false;
    const finish = () => {
      if (done) return;
      done = true;
      s.destroy();
      resolve({ sent, reply });
    };
    s.on("data", (d) => (reply += d));
    s.on("close", finish);
    s.on("error", finish);
    s.on("connect", () => {
      s.write(head);
      const pump = () => {
        while (!done && sent < maxBytes) {
          sent += piece.length;
          if (!s.write(piece)) return s.once("drain", pump);
        }
        if (sent >= maxBytes) setTimeout(finish, 3000);
      };
      pump();
    });
  });
}

test("endless headers or an endless chunked body are cut off, not buffered", { timeout: 60000 }, async () => {
  const before = server.rss();
  const headers = await flood(server.port, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", "X-Filler: " + "a".repeat(1000) + "\r\n", 64 << 20);
  assert.ok(headers.sent < 16 << 20, `the server read ${headers.sent} bytes of headers`);
  // (The 400 may be lost to the reset that closing with unread input causes.)
  assert.ok(headers.reply === "" || /^HTTP\/1\.1 4\d\d/.test(headers.reply), headers.reply.slice(0, 40));
  const chunk = (4096).toString(16) + "\r\n" + "x".repeat(4096) + "\r\n";
  const head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nTransfer-Encoding: chunked\r\n\r\n";
  const body = await flood(server.port, head, chunk, 256 << 20);
  assert.ok(body.sent < 64 << 20, `the server read ${body.sent} bytes of a chunked body`);
  assert.ok(body.reply === "" || /^HTTP\/1\.1 4\d\d/.test(body.reply), body.reply.slice(0, 40));
  if (checksMemory) assert.ok(server.rss() - before < 64 << 20, "no buffering of the flood");
  // A body announced too large or malformed is refused at once, not waited for.
  for (const length of ["-5", "99999999999999999999999", String(100 << 20)]) {
    const s = await connect(server.port);
    const got = readAll(s, 5000);
    const t0 = performance.now();
    s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Length: ${length}\r\n\r\n`);
    const { data, closed } = await got;
    assert.match(data, /^HTTP\/1\.1 413/, length);
    assert.ok(closed && performance.now() - t0 < 2000, length);
  }
  await healthy();
});

test("large prompts one after another do not grow memory (malloc arenas are capped and trimmed)", { timeout: 120000 }, async () => {
  const prompt = "lorem ipsum dolor sit amet ".repeat((3.5 * 2 ** 20) / 27);
  const rss = [];
  for (let i = 0; i < 8; ++i) {
    const r = await post(server.url, "/v1/completions", { prompt, max_tokens: 1 });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, "context_length_exceeded");
    rss.push(server.rss());
  }
  // One request's working memory may stay; twelve of them used to pile up to ~750 MB.
  if (checksMemory) assert.ok(rss[7] - rss[1] < 96 << 20, `RSS after each request (MiB): ${rss.map((b) => (b / 2 ** 20).toFixed(0))}`);
});

test("a request past --request-timeout is a 504 (or an error event), not finish_reason length", { timeout: 60000 }, async () => {
  const s = await startServer(["--request-timeout", "1"]);
  try {
    const body = { prompt: "Once upon a time", max_tokens: 2000, temperature: 1, seed: 1 };
    const r = await post(s.url, "/v1/completions", body, { "content-type": "application/json" });
    assert.equal(r.status, 504, JSON.stringify(r.body));
    assert.equal(r.body.error.code, "timeout");
    // Greedy: the Messages API takes no seed, and a random draw may end early on a stop token.
    const a = await post(s.url, "/v1/messages", { max_tokens: 2000, messages: hi, temperature: 0 }, { "content-type": "application/json" });
    assert.equal(a.status, 504, JSON.stringify(a.body));
    assert.equal(a.body.error.type, "timeout_error");
    const streamed = await fetch(s.url + "/v1/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...body, stream: true }),
    });
    const text = await streamed.text();
    assert.match(text, /"code":"timeout"/);
    assert.doesNotMatch(text, /"finish_reason":"length"/);
    assert.match(text, /data: \[DONE\]/);
  } finally {
    await s.stop();
  }
});

// A model folder that is the tiny model with another chat template.
function withTemplate(template) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fathom-e2e-template-"));
  for (const f of fs.readdirSync(tinyModel())) fs.symlinkSync(path.join(tinyModel(), f), path.join(dir, f));
  fs.writeFileSync(path.join(dir, "chat_template.jinja"), template);
  process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test("a chat template that loops forever or allocates without bound is a 400, and SIGTERM still stops the server", { timeout: 60000 }, async () => {
  const looping = withTemplate("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}");
  const s = await startServer(["--model", looping]);
  try {
    const t0 = performance.now();
    const r = await post(s.url, "/v1/chat/completions", { messages: hi }, { "content-type": "application/json" });
    assert.equal(r.status, 400);
    assert.match(r.body.error.message, /chat template/);
    assert.ok(performance.now() - t0 < 20000);
    await healthy(s.url);
  } finally {
    const t0 = performance.now();
    await s.stop();
    assert.ok(performance.now() - t0 < 4000, "the server stopped on SIGTERM");
  }
  const hungry = withTemplate("{{ 'a' * 10**12 }}");
  const h = await startServer(["--model", hungry]);
  try {
    const before = h.rss();
    const r = await post(h.url, "/v1/chat/completions", { messages: hi }, { "content-type": "application/json" });
    assert.equal(r.status, 400);
    if (checksMemory) assert.ok(h.rss() - before < 64 << 20, "no huge allocation");
  } finally {
    await h.stop();
  }
});
