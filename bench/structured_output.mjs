// Structured output end to end: every schema in bench/schemas, sampled at
// temperature 1 through /v1/chat/completions with response_format json_schema,
// each answer checked against its schema with ajv. Answers cut by max_tokens
// are counted apart (they are not complete JSON); every complete one must
// validate.
//
//   node bench/structured_output.mjs MODEL_DIR [samples=2] [max_tokens=1024] [concurrency=8]
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { startServer } from "./start_server.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);
const require = createRequire(path.join(here, "../tests/server/package.json"));
const Ajv2020 = require("ajv/dist/2020.js").default;
const addFormats = require("ajv-formats").default;

const [model, samples = "2", maxTokens = "1024", concurrency = "8"] = process.argv.slice(2);
if (!model) throw new Error("usage: structured_output.mjs MODEL_DIR [samples] [max_tokens] [concurrency]");
const binary = process.env.FATHOM_BINARY ?? path.join(here, "../build/fathom");
const schemaDir = path.join(here, "schemas");
const schemas = fs.readdirSync(schemaDir).filter((f) => f.endsWith(".json")).sort()
  .map((f) => ({ name: f, schema: JSON.parse(fs.readFileSync(path.join(schemaDir, f), "utf8")) }));

const ajv = new Ajv2020({ strict: false });
addFormats(ajv);
const server = await startServer(binary, ["--model", model, "--max-running", concurrency]);
const jobs = [];
for (const s of schemas) for (let i = 0; i < Number(samples); ++i) jobs.push({ ...s, seed: 1000 + i });

const results = [];
const started = Date.now();
async function worker() {
  while (jobs.length) {
    const job = jobs.shift();
    const res = await fetch(server.url + "/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: `Reply with a JSON value for the schema "${job.name}".` }],
        temperature: 1, seed: job.seed, max_tokens: Number(maxTokens),
        response_format: { type: "json_schema", json_schema: { name: "answer", schema: job.schema, strict: true } },
      }),
    });
    const body = await res.json();
    if (res.status !== 200) {
      results.push({ name: job.name, status: res.status, error: body.error?.message });
      continue;
    }
    const choice = body.choices[0];
    let valid = false, error = "";
    if (choice.finish_reason === "stop") {
      try {
        valid = ajv.validate(job.schema, JSON.parse(choice.message.content));
        if (!valid) error = ajv.errorsText();
      } catch (e) {
        error = e.message;
      }
    }
    results.push({ name: job.name, finish: choice.finish_reason, valid, error, tokens: body.usage.completion_tokens,
                   text: valid ? undefined : choice.message.content.slice(0, 300) });
  }
}
await Promise.all(Array.from({ length: Number(concurrency) }, worker));
server.stop();

const seconds = (Date.now() - started) / 1000;
const refused = results.filter((r) => r.status);
const complete = results.filter((r) => r.finish === "stop");
const valid = complete.filter((r) => r.valid);
const tokens = results.reduce((a, r) => a + (r.tokens ?? 0), 0);
for (const r of refused) console.log(`refused ${r.name}: ${r.status} ${r.error}`);
for (const r of complete.filter((r) => !r.valid)) console.log(`INVALID ${r.name}: ${r.error}\n  ${r.text}`);
console.log(JSON.stringify({
  model: path.basename(model), schemas: schemas.length, answers: results.length, refused: refused.length,
  complete: complete.length, valid: valid.length, cut_by_max_tokens: results.filter((r) => r.finish === "length").length,
  valid_of_complete: complete.length ? valid.length / complete.length : null, tokens, seconds,
}));
