// `fathom chat` as a user runs it: in a pseudo-terminal (util-linux `script`
// gives the program a real tty, so Ctrl-C is the terminal's SIGINT and the
// prompts and echo are the terminal's), on the shipped model. A question and
// its streamed answer with the speed line, Ctrl-C in the middle of an answer
// (the program stays), multi-line input, /system, /reset, Ctrl-C at the
// prompt, /exit. Then --prompt against `generate --chat`, and bad input.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync, spawnSync } from "node:child_process";
import path from "node:path";
import { binary } from "../server/helpers.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);
const model = path.resolve(here, "../../assets/models/fathom-chat-small");
const hasScript = spawnSync("script", ["--version"]).status === 0;
const skip = hasScript ? false : "no `script` (util-linux) to give the chat a pseudo-terminal";

const CTRL_C = "\x03";
const clean = (text) => text.replace(/\x1b\[[0-9;]*m/g, "").replace(/\r/g, "");

// `fathom chat ARGS` in a pseudo-terminal: type() is the keyboard, and
// waitFor() the screen (everything printed since `from`, colours removed).
class Terminal {
  constructor(args) {
    const quote = (a) => `'${a.replace(/'/g, "'\\''")}'`;
    const command = "exec " + [binary, "chat", ...args].map(quote).join(" ");
    this.child = spawn("script", ["-q", "-f", "-e", "-c", command, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
    this.screen = "";
    this.chunks = []; // [offset in screen, time] of every piece of output
    this.child.stdout.on("data", (d) => {
      this.chunks.push([this.screen.length, Date.now()]);
      this.screen += clean(d.toString());
    });
    this.child.stderr.on("data", (d) => (this.screen += clean(d.toString())));
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
  }
  type(keys) {
    this.child.stdin.write(keys);
  }
  mark() {
    return this.screen.length;
  }
  async waitFor(pattern, from = 0, timeout = 60000) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const m = this.screen.slice(from).match(pattern);
      if (m) return m;
      if (Date.now() > deadline || this.child.exitCode !== null)
        throw new Error(`waited for ${pattern}; the screen since then:\n${this.screen.slice(from)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  // Output pieces that arrived between two screen offsets.
  piecesBetween(start, end) {
    return this.chunks.filter(([offset]) => offset >= start && offset < end).length;
  }
}

const SPEED = /(\d+) tokens?, [\d.]+ tok\/s · prompt (\d+) tokens in [\d.]+ ms · context (\d+)\/2048([^\n]*)\n/;
const PROMPT = /\n>>> $/;

// Answers run to -n (no end-of-sequence) so that one lasts long enough to be
// stopped: about a second and a half here, longer under the sanitizers.
const answerTokens = process.env.FATHOM_SANITIZED ? 400 : 1500;

let term;
before(() => {
  if (skip) return;
  term = new Terminal(["--model", model, "--threads", "1", "--seed", "7", "-n", String(answerTokens), "--ignore-eos"]);
});
after(async () => {
  if (term && term.child.exitCode === null) term.child.kill("SIGKILL");
});

test("chat starts with the model, its context and the commands", { skip }, async () => {
  await term.waitFor(/fathom chat: .*fathom-chat-small \(qwen3, bf16 on [\w-]+\), context 2048 tokens, KV bf16/);
  await term.waitFor(/\/reset.*\n.*\/system TEXT[^]*\n>>> $/);
});

test("a question gets a streamed answer and a speed line", { skip }, async () => {
  const start = term.mark();
  term.type("What does hack mean?\r");
  await term.waitFor(/What does hack mean\?\n/, start);
  const answerStart = term.mark();
  const speed = await term.waitFor(SPEED, start);
  await term.waitFor(PROMPT, start);
  assert.equal(Number(speed[1]), answerTokens);
  assert.match(speed[4], /cut at the length limit/);
  const answerEnd = start + term.screen.slice(start).indexOf(speed[0]);
  assert.ok(term.screen.slice(answerStart, answerEnd).trim().length > 200, "no answer text");
  assert.ok(term.piecesBetween(answerStart, answerEnd) >= 3, "the answer came in one piece, not streamed");
});

test("Ctrl-C stops the answer being written, not the program", { skip }, async () => {
  let start = term.mark();
  term.type("/reset\r");
  await term.waitFor(/\(new conversation\)\n>>> $/, start);
  start = term.mark();
  term.type("What does kludge mean?\r");
  await term.waitFor(/kludge mean\?\n\S/, start); // the answer has begun
  term.type(CTRL_C);
  const speed = await term.waitFor(SPEED, start);
  await term.waitFor(PROMPT, start);
  assert.match(speed[4], /stopped/);
  assert.ok(Number(speed[1]) < answerTokens, `stopped after ${speed[1]} tokens`);
  // The conversation was reset: only this question is in the prompt, and nothing is reused.
  assert.ok(Number(speed[2]) < 30, `the prompt has ${speed[2]} tokens`);
  assert.doesNotMatch(speed[4], /reused/);
  assert.equal(term.child.exitCode, null);
});

test("a line ending in \\ goes on, /system sets the system prompt, Ctrl-C at the prompt only clears it", { skip }, async () => {
  let start = term.mark();
  term.type("/system You answer briefly.\r");
  await term.waitFor(/system prompt set/, start);
  term.type("/system\r");
  await term.waitFor(/system prompt: You answer briefly\.\n>>> $/, start);

  start = term.mark();
  term.type("What does\\\r");
  await term.waitFor(/\n\.\.\. $/, start); // a continuation prompt, no answer yet
  term.type("foo mean?\r");
  await term.waitFor(/foo mean\?\n\S/, start);
  term.type(CTRL_C);
  const speed = await term.waitFor(SPEED, start);
  await term.waitFor(PROMPT, start);
  // One answer to one message that holds both lines (and the system prompt, and the last turn).
  assert.equal(term.screen.slice(start).match(new RegExp(SPEED.source, "g")).length, 1);
  assert.ok(Number(speed[2]) > 30, `the prompt has ${speed[2]} tokens`);

  start = term.mark();
  term.type("this line is dropped");
  term.type(CTRL_C);
  await term.waitFor(/Ctrl-D or \/exit quits\)\n>>> $/, start);
  term.type("/nope\r");
  await term.waitFor(/unknown command \/nope \(\/help lists them\)\n>>> $/, start);
  assert.doesNotMatch(term.screen.slice(start), SPEED, "the dropped line was answered");
});

test("the next turn prefills only what the last turn's cache lacks", { skip }, async () => {
  const start = term.mark();
  term.type("And hack?\r");
  await term.waitFor(/And hack\?\n\S/, start);
  term.type(CTRL_C);
  const speed = await term.waitFor(SPEED, start);
  await term.waitFor(PROMPT, start);
  const reused = speed[4].match(/reused (\d+) prompt tokens/);
  assert.ok(reused, `no reuse in: ${speed[0]}`);
  // At least the last turn's prompt (over 30 tokens) came from the cache.
  assert.ok(Number(reused[1]) > 30 && Number(reused[1]) < Number(speed[2]), speed[0]);
});

test("/exit quits with status 0", { skip }, async () => {
  term.type("/exit\r");
  assert.equal(await term.exited, 0);
});

test("--prompt answers once; at temperature 0 it is generate --chat's answer", () => {
  const args = ["--model", model, "--threads", "1", "--temp", "0", "-n", "40"];
  const chat = spawnSync(binary, ["chat", ...args, "--prompt", "What does hack mean?"], { encoding: "utf8" });
  assert.equal(chat.status, 0, chat.stderr);
  const generated = JSON.parse(execFileSync(binary, ["generate", ...args, "--chat", "What does hack mean?"], { encoding: "utf8" }));
  assert.equal(chat.stdout, generated.text + "\n");
  assert.match(chat.stderr, SPEED);
});

test("bad input: one clear line and a non-zero exit", () => {
  for (const [args, message] of [
    [["--model", "/nonexistent/model", "--prompt", "hi"], /model folder \/nonexistent\/model not found/],
    [["--model", model, "--prompt", "hi", "--temp", "-1"], /temperature/],
    [["--model", model, "--prompt", "hi", "--ctx-size", "999999"], /--ctx-size 999999 is beyond the model's 2048 positions/],
    [["--model", model, "--prompt", "hi", "--spec", "sometimes"], /--spec: unknown mode "sometimes"/],
  ]) {
    const r = spawnSync(binary, ["chat", ...args], { encoding: "utf8" });
    assert.notEqual(r.status, 0, args.join(" "));
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  }
});
