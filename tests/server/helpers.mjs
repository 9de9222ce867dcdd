// Starts the real `fathom serve` on a free loopback port with a tiny random
// Qwen3 model (real vocabulary, tokenizer and chat template) and stops it.
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const here = path.dirname(new URL(import.meta.url).pathname);
export const binary = process.env.FATHOM_BINARY ?? path.resolve(here, "../../build/fathom");

// Sanitized binaries (scripts/sanitize.sh sets FATHOM_SANITIZED) keep freed memory
// in quarantine, so resident-memory checks only hold for the release binary.
export const checksMemory = !process.env.FATHOM_SANITIZED;

let modelDir;
export function tinyModel() {
  if (modelDir) return modelDir;
  modelDir = fs.mkdtempSync(path.join(os.tmpdir(), "fathom-e2e-qwen3-"));
  execFileSync(process.execPath, [path.join(here, "make_tiny_model.mjs"), modelDir], { stdio: "inherit" });
  process.on("exit", () => fs.rmSync(modelDir, { recursive: true, force: true }));
  return modelDir;
}

let kvHeavyDir;
// The same with 32 KiB of KV per token (make_tiny_model.mjs --kv-heavy).
export function tinyKvHeavyModel() {
  if (kvHeavyDir) return kvHeavyDir;
  kvHeavyDir = fs.mkdtempSync(path.join(os.tmpdir(), "fathom-e2e-kvheavy-"));
  execFileSync(process.execPath, [path.join(here, "make_tiny_model.mjs"), kvHeavyDir, "--kv-heavy"], { stdio: "inherit" });
  process.on("exit", () => fs.rmSync(kvHeavyDir, { recursive: true, force: true }));
  return kvHeavyDir;
}

// Resolves to {url, port, stop(), output()} once the server prints its URL.
export function startServer(extraArgs = [], env = {}) {
  const model = extraArgs.includes("--model") ? [] : ["--model", tinyModel()];
  const args = ["serve", ...model, "--port", "0", "--threads", "1", ...extraArgs];
  const child = spawn(binary, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not start:\n" + output)), 30000);
    const onData = (data) => {
      output += data;
      const m = output.match(/listening on (http:\/\/127\.0\.0\.1:(\d+))/);
      if (m) {
        clearTimeout(timer);
        resolve({
          url: m[1],
          port: Number(m[2]),
          output: () => output,
          stop: () =>
            new Promise((done) => {
              if (child.exitCode !== null) return done(child.exitCode);
              child.once("exit", (code, signal) => done(code ?? signal));
              child.kill("SIGTERM");
              setTimeout(() => child.kill("SIGKILL"), 5000).unref();
            }),
          alive: () => child.exitCode === null && child.signalCode === null,
          // Resident memory of the server process, in bytes (Linux).
          rss: () => Number(fs.readFileSync(`/proc/${child.pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]) * 1024,
        });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${output}`));
    });
  });
}

export async function metric(url, name) {
  const text = await (await fetch(url + "/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line === undefined ? undefined : Number(line.split(" ")[1]);
}
