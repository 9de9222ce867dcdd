// Writes a tiny random-weight model of the Qwen3 architecture with the real
// Qwen3 vocabulary, tokenizer and chat template, for fast end-to-end tests.
// Usage: node make_tiny_model.mjs OUT_DIR [TOKENIZER_DIR] [--kv-heavy]
// --kv-heavy: 8 layers of 8 KV heads of 128 (32 KiB of bf16 KV per token, the
// weights still a few MB), so memory-budget tests can size contexts in MBs.
import fs from "node:fs";
import path from "node:path";

const here = path.dirname(new URL(import.meta.url).pathname);
const kvHeavy = process.argv.includes("--kv-heavy");
const positional = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const out = positional[0];
const tokenizerDir = positional[1] ?? path.join(here, "../../.cache/tokenizers/qwen3");
if (!out) throw new Error("usage: make_tiny_model.mjs OUT_DIR [TOKENIZER_DIR]");
fs.mkdirSync(out, { recursive: true });
for (const f of ["tokenizer.json", "tokenizer_config.json"])
  fs.copyFileSync(path.join(tokenizerDir, f), path.join(out, f));

const vocab = 151936, hidden = 32, inter = 64;
const [heads, kvHeads, headDim, layers] = kvHeavy ? [8, 8, 128, 8] : [2, 1, 16, 2];
fs.writeFileSync(path.join(out, "config.json"), JSON.stringify({
  model_type: "qwen3", architectures: ["Qwen3ForCausalLM"], vocab_size: vocab, hidden_size: hidden,
  intermediate_size: inter, num_hidden_layers: layers, num_attention_heads: heads, num_key_value_heads: kvHeads,
  head_dim: headDim, tie_word_embeddings: true, rope_theta: 1e6, rms_norm_eps: 1e-6, max_position_embeddings: 2048,
  bos_token_id: 151643, eos_token_id: 151645, torch_dtype: "bfloat16", dtype: "bfloat16",
}));

// A fixed-seed generator, so every run writes the same weights.
let state = 0x2545f491n;
function uniform() {
  state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
  return Number(state >> 40n) / 2 ** 24;
}
function bf16(shape, scale) {
  const n = shape.reduce((a, b) => a * b, 1);
  const buf = Buffer.alloc(n * 2);
  const f = new Float32Array(1), u = new Uint32Array(f.buffer);
  for (let i = 0; i < n; i++) {
    f[0] = (uniform() * 2 - 1) * scale;
    buf.writeUInt16LE(u[0] >>> 16, i * 2);
  }
  return { shape, buf };
}
const ones = (n) => bf16([n], 0).buf.fill(0).map((_, i) => (i % 2 ? 0x3f : 0x80));  // 1.0 in bf16 is 0x3f80

const tensors = { "model.embed_tokens.weight": bf16([vocab, hidden], 1.0), "model.norm.weight": { shape: [hidden], buf: ones(hidden) } };
for (let l = 0; l < layers; l++) {
  const p = `model.layers.${l}`;
  tensors[`${p}.input_layernorm.weight`] = { shape: [hidden], buf: ones(hidden) };
  tensors[`${p}.post_attention_layernorm.weight`] = { shape: [hidden], buf: ones(hidden) };
  tensors[`${p}.self_attn.q_proj.weight`] = bf16([heads * headDim, hidden], 0.2);
  tensors[`${p}.self_attn.k_proj.weight`] = bf16([kvHeads * headDim, hidden], 0.2);
  tensors[`${p}.self_attn.v_proj.weight`] = bf16([kvHeads * headDim, hidden], 0.2);
  tensors[`${p}.self_attn.o_proj.weight`] = bf16([hidden, heads * headDim], 0.2);
  tensors[`${p}.self_attn.q_norm.weight`] = { shape: [headDim], buf: ones(headDim) };
  tensors[`${p}.self_attn.k_norm.weight`] = { shape: [headDim], buf: ones(headDim) };
  tensors[`${p}.mlp.gate_proj.weight`] = bf16([inter, hidden], 0.2);
  tensors[`${p}.mlp.up_proj.weight`] = bf16([inter, hidden], 0.2);
  tensors[`${p}.mlp.down_proj.weight`] = bf16([hidden, inter], 0.2);
}

// safetensors: 8-byte little-endian header length, JSON header, raw data.
const header = {};
let offset = 0;
for (const [name, t] of Object.entries(tensors)) {
  header[name] = { dtype: "BF16", shape: t.shape, data_offsets: [offset, offset + t.buf.length] };
  offset += t.buf.length;
}
let headerText = JSON.stringify(header);
headerText += " ".repeat((8 - (headerText.length % 8)) % 8);
const len = Buffer.alloc(8);
len.writeBigUInt64LE(BigInt(headerText.length));
fs.writeFileSync(path.join(out, "model.safetensors"),
  Buffer.concat([len, Buffer.from(headerText), ...Object.values(tensors).map((t) => t.buf)]));
