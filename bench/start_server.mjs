// Starts `fathom serve` on a free loopback port for a benchmark; resolves to
// {url, stop()} once the server prints where it listens.
import { spawn } from "node:child_process";

export function startServer(binary, args) {
  const child = spawn(binary, ["serve", "--port", "0", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  return new Promise((resolve, reject) => {
    const onData = (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) resolve({ url: m[1], stop: () => child.kill("SIGTERM") });
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", () => reject(new Error("server exited:\n" + out)));
  });
}
