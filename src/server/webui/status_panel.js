// The engine's state beside the conversation, from GET /status: the model,
// the context this conversation uses, the KV scheme and the memory
// contract's terms as a bar; and the speed of the answer being written.

const $ = (id) => document.getElementById(id);

export function formatBytes(n) {
  if (!Number.isFinite(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  // 3 KiB, 23.3 MiB, 1.25 GiB: no trailing zeros
  return `${i === 0 ? n : Number(n.toFixed(n < 10 ? 2 : 1))} ${units[i]}`;
}

// The contract's terms, in the order the bar shows them.
const TERMS = [
  ["weights", "weights_bytes", "weights"],
  ["kv", "kv_bytes", "KV at full context"],
  ["transient", "transient_bytes", "transient (largest step)"],
  ["runtime", "runtime_bytes", "runtime"],
  ["spec", "speculation_bytes", "speculative decoding"],
];

function setText(id, text) {
  const node = $(id);
  if (node) node.textContent = text;
}

function fill(bar, fraction) {
  bar.style.width = `${Math.max(0, Math.min(1, fraction)) * 100}%`;
}

export class StatusPanel {
  constructor() {
    this.contextLength = 0;
    this.contextUsed = 0;
  }

  render(status) {
    const { model, context, kv, memory, engine } = status;
    setText("model-name", model.id);
    setText("st-model", model.id);
    setText("st-arch", `${model.architecture}, ${model.layers} layers`);
    setText("st-compute", `${model.compute_dtype} on ${model.backend}`);
    this.contextLength = context.length;
    this.renderContext();
    setText("st-window", context.window === context.length ? "" : `the model allows ${context.window}; memory allows ${context.length}`);

    setText("st-kv-key", kv.cache_key);
    const codecs = Object.entries(kv.layout?.codecs ?? {}).map(([codec, layers]) => `${codec} × ${layers}`);
    const recurrent = kv.layout?.recurrent_layers ? [`recurrent × ${kv.layout.recurrent_layers}`] : [];
    setText("st-kv-layout", [...codecs, ...recurrent].join(", ") || "–");
    setText("st-kv-token", `${formatBytes(kv.bytes_per_token)} per token`);
    setText("st-kv-context", `${formatBytes(kv.bytes_at_context)} at ${context.length} tokens`);

    const c = memory.contract;
    const bar = $("mem-bar");
    const legend = $("mem-legend");
    legend.replaceChildren();
    for (const [cls, field, label] of TERMS) {
      const bytes = c[field] ?? 0;
      const seg = bar.querySelector(`.seg.${cls}`);
      fill(seg, c.total_bytes > 0 ? bytes / c.total_bytes : 0);
      seg.title = `${label}: ${formatBytes(bytes)}`;
      if (bytes === 0 && cls === "spec") continue;
      const row = document.createElement("li");
      const swatch = document.createElement("span");
      swatch.className = `swatch ${cls}`;
      const name = document.createElement("span");
      name.textContent = label;
      const value = document.createElement("span");
      value.className = "value";
      value.textContent = formatBytes(bytes);
      row.append(swatch, name, value);
      legend.append(row);
    }
    setText("st-total", `${formatBytes(c.total_bytes)} predicted for one ${c.context}-token sequence`);
    fill($("budget-fill"), memory.budget_bytes > 0 ? c.total_bytes / memory.budget_bytes : 0);
    setText("st-budget", `${formatBytes(memory.budget_bytes)} budget`);
    setText("st-held", `held now: ${formatBytes(memory.fixed_bytes + memory.admitted_bytes)} predicted, ${formatBytes(memory.resident_bytes)} resident`);
    setText("st-engine", `${engine.running} running, ${engine.queued} queued, ${engine.generated_tokens_total} tokens generated since start`);
  }

  setContextUsed(tokens) {
    this.contextUsed = tokens;
    this.renderContext();
  }

  renderContext() {
    const length = this.contextLength;
    setText("st-context", length ? `${this.contextUsed} / ${length} tokens` : "–");
    fill($("ctx-fill"), length ? this.contextUsed / length : 0);
  }

  // live: tokens/s of the answer being written (null when idle).
  setSpeed(live, lastText) {
    setText("speed-live", live === null ? "idle" : `${live.toFixed(1)} tok/s`);
    if (lastText !== undefined) setText("speed-last", lastText);
  }
}
