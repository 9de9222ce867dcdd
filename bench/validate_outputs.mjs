// Checks the answers bench/grammar_masks wrote (JSON lines of {schema,
// tokenizer, finished, text}) against their schemas with ajv: every finished
// answer must validate.
//
//   node bench/validate_outputs.mjs OUT.jsonl
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const here = path.dirname(new URL(import.meta.url).pathname);
const require = createRequire(path.join(here, "../tests/server/package.json"));
const Ajv2020 = require("ajv/dist/2020.js").default;
const addFormats = require("ajv-formats").default;
const ajv = new Ajv2020({ strict: false });
addFormats(ajv);

const lines = fs.readFileSync(process.argv[2], "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
const counts = {};
for (const l of lines) {
  const c = (counts[l.tokenizer] ??= { answers: 0, finished: 0, valid: 0 });
  ++c.answers;
  if (!l.finished) continue;
  ++c.finished;
  const schema = JSON.parse(fs.readFileSync(path.join(here, "schemas", l.schema), "utf8"));
  let ok = false;
  try {
    ok = ajv.validate(schema, JSON.parse(l.text));
  } catch (e) {
    console.log(`${l.tokenizer} ${l.schema}: not JSON (${e.message})`);
  }
  if (ok) ++c.valid;
  else console.log(`INVALID ${l.tokenizer} ${l.schema}: ${ajv.errorsText()}\n  ${l.text.slice(0, 300)}`);
}
console.log(JSON.stringify(counts));
