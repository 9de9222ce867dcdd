// What the chat page's browser tests share: Debian's Chromium driven by
// playwright-core (tests/server/package.json pins it; it never downloads a
// browser), `fathom serve` on a port the test may choose again after a
// restart, and where screenshots are kept.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { binary } from "../server/helpers.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);
export const repoRoot = path.resolve(here, "../..");
export const chatModel = path.join(repoRoot, "assets/models/fathom-chat-small");

export const chromiumPath = process.env.FATHOM_CHROMIUM ?? "/usr/bin/chromium";
// A reason to skip (named in the test report), or false when Chromium is here.
export const noChromium = fs.existsSync(chromiumPath)
  ? false
  : `no Chromium at ${chromiumPath} (scripts/test.sh installs Debian's chromium; it could not here)`;

// Screenshots go beside the binary under test: build/test-artifacts/webui for CI.
export const artifactsDir =
  process.env.FATHOM_TEST_ARTIFACTS ?? path.join(path.dirname(binary), "test-artifacts", "webui");

export async function launchChromium() {
  const require = createRequire(path.join(repoRoot, "tests/server/package.json"));
  const { chromium } = require("playwright-core");
  // The machine's network is closed: without the background-networking
  // flags Chromium keeps trying (and failing) to reach Google's hosts.
  // Playwright gives each launch a fresh, empty profile (user data dir).
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

// Starts `fathom serve` (port 0: any free port) and resolves to
// {url, port, output(), stop()} once it listens.
export function serve(args, port = 0) {
  const child = spawn(binary, ["serve", "--port", String(port), "--threads", "1", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  let started = false;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not start:\n" + output)), 30000);
    const onData = (data) => {
      output += data;
      // Whatever address it binds, the test reaches it through loopback.
      const m = output.match(/listening on http:\/\/\S+?:(\d+)/);
      if (!m || started) return;
      started = true;
      clearTimeout(timer);
      child.removeListener("exit", onEarlyExit);
      resolve({
        url: `http://127.0.0.1:${m[1]}`,
        port: Number(m[1]),
        output: () => output,
        stop: () =>
          new Promise((done) => {
            if (child.exitCode !== null || child.signalCode !== null) return done();
            child.once("exit", () => done());
            child.kill("SIGTERM");
            setTimeout(() => child.kill("SIGKILL"), 5000).unref();
          }),
      });
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    const onEarlyExit = (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${output}`));
    };
    child.once("exit", onEarlyExit);
  });
}
