// One message of the conversation on screen. A message is plain data:
//   {role: "user" | "assistant", content, reasoning, toolCalls: [{name, arguments}],
//    status: "streaming" | "done" | "stopped" | "interrupted" | "error", error, stats}
// and its view is rebuilt from it on every update (at most once a frame
// while streaming). The reasoning <details> element is kept across updates so
// that a reader who opened it keeps it open while the answer streams.

import { renderMarkdown } from "./markdown.js";

const STATUS_TEXT = {
  stopped: "stopped",
  interrupted: "interrupted: the connection to the server was lost",
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function prettyArguments(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text; // partial or not JSON: as the model wrote it
  }
}

function toolCallView(call) {
  const box = el("div", "tool-call");
  const head = el("div", "tool-head");
  head.append(el("span", "tool-label", "tool call"), el("code", "tool-name", call.name || "(unnamed)"));
  const args = el("pre", "tool-args");
  args.textContent = prettyArguments(call.arguments ?? "");
  box.append(head, args);
  return box;
}

function statsText(stats) {
  if (!stats) return "";
  const parts = [];
  if (stats.completionTokens !== undefined) parts.push(`${stats.completionTokens} tokens`);
  if (stats.tokensPerSecond) parts.push(`${stats.tokensPerSecond.toFixed(1)} tok/s`);
  if (stats.firstTokenMs !== undefined) parts.push(`first token ${Math.round(stats.firstTokenMs)} ms`);
  if (stats.promptTokens !== undefined) parts.push(`prompt ${stats.promptTokens} tokens`);
  if (stats.finishReason === "length") parts.push("cut at max tokens");
  return parts.join(" · ");
}

export class MessageView {
  constructor(message, { onRegenerate }) {
    this.message = message;
    this.node = el("li", `message ${message.role}`);
    this.role = el("div", "role", message.role === "user" ? "You" : "Assistant");
    this.reasoning = el("details", "reasoning");
    this.reasoningSummary = el("summary");
    this.reasoningBody = el("div", "reasoning-body");
    this.reasoning.append(this.reasoningSummary, this.reasoningBody);
    this.body = el("div", "body");
    this.tools = el("div", "tools");
    this.footer = el("div", "footer");
    this.stats = el("span", "stats");
    this.regenerate = el("button", "regenerate", "Regenerate");
    this.regenerate.type = "button";
    this.regenerate.addEventListener("click", () => onRegenerate(message));
    this.footer.append(this.stats, this.regenerate);
    this.node.append(this.role, this.reasoning, this.body, this.tools, this.footer);
    this.update({ last: false });
  }

  update({ last }) {
    const m = this.message;
    this.node.dataset.status = m.status ?? "done";
    if (m.role === "user") {
      this.body.textContent = m.content;
    } else {
      this.body.replaceChildren(renderMarkdown(m.content ?? ""));
      if (m.status === "streaming" && !m.content && !m.reasoning && !m.toolCalls?.length)
        this.body.append(el("span", "typing", "…"));
    }
    this.body.hidden = m.role === "assistant" && !m.content && m.status !== "streaming";
    this.reasoning.hidden = !m.reasoning;
    if (m.reasoning) {
      const thinking = m.status === "streaming" && !m.content;
      this.reasoningSummary.textContent = thinking ? "Reasoning…" : `Reasoning (${m.reasoning.length} characters)`;
      this.reasoningBody.replaceChildren(renderMarkdown(m.reasoning));
    }
    this.tools.replaceChildren(...(m.toolCalls ?? []).map(toolCallView));
    this.tools.hidden = !m.toolCalls?.length;

    this.footer.replaceChildren(this.stats);
    this.stats.textContent = m.role === "assistant" ? statsText(m.stats) : "";
    if (m.error) this.footer.append(el("span", "error", m.error));
    else if (STATUS_TEXT[m.status]) this.footer.append(el("span", "note", STATUS_TEXT[m.status]));
    if (m.role === "assistant" && last && m.status !== "streaming") this.footer.append(this.regenerate);
    this.footer.hidden = this.footer.childNodes.length === 1 && !this.stats.textContent;
  }
}
