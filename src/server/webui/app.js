// The chat page: the conversation, the composer, the settings, the API key
// dialog and the connection watch. It talks to the server only through its
// public API (api.js): GET /v1/models, POST /v1/chat/completions (streamed),
// GET /status, and GET /health to notice when a restarted server is back.

import { Api, ApiError, ConnectionLost } from "./api.js";
import { MessageView } from "./message_view.js";
import { StatusPanel } from "./status_panel.js";

const $ = (id) => document.getElementById(id);
const panel = new StatusPanel();
const conversation = []; // [{message, view}]
let modelId;
let running = null; // {controller, message} while an answer streams
let connectionLost = false;

// ---------------------------------------------------------------- settings
// Kept in localStorage: a reload keeps the system prompt and the sampling.
const SETTINGS = ["system-prompt", "temperature", "top-p", "max-tokens", "tools"];

function loadSettings() {
  for (const id of SETTINGS) {
    const saved = localStorage.getItem(`fathom.${id}`);
    if (saved !== null) $(id).value = saved;
    $(id).addEventListener("input", () => localStorage.setItem(`fathom.${id}`, $(id).value));
  }
}

class InputError extends Error {}

function numberSetting(id, name, integer) {
  const text = $(id).value.trim();
  if (text === "") return undefined;
  const value = Number(text);
  if (!Number.isFinite(value) || (integer && !Number.isInteger(value)))
    throw new InputError(`${name} must be ${integer ? "a whole number" : "a number"}, got "${text}"`);
  return value; // ranges are the server's to check: its 400 names the field
}

// The request's sampling fields and tools from the settings.
function requestSettings() {
  const out = {};
  const temperature = numberSetting("temperature", "Temperature", false);
  const topP = numberSetting("top-p", "Top-p", false);
  const maxTokens = numberSetting("max-tokens", "Max tokens", true);
  if (temperature !== undefined) out.temperature = temperature;
  if (topP !== undefined) out.top_p = topP;
  if (maxTokens !== undefined) out.max_tokens = maxTokens;
  const tools = $("tools").value.trim();
  if (tools) {
    try {
      out.tools = JSON.parse(tools);
    } catch (e) {
      throw new InputError(`Tools must be a JSON array of OpenAI tool definitions: ${e.message}`);
    }
    if (!Array.isArray(out.tools)) throw new InputError("Tools must be a JSON array of OpenAI tool definitions");
  }
  return out;
}

function showInputError(text) {
  $("input-error").textContent = text;
  $("input-error").hidden = !text;
}

// ------------------------------------------------------ banner, connection
let bannerTimer;
function showBanner(text, kind) {
  clearTimeout(bannerTimer);
  const banner = $("banner");
  banner.textContent = text;
  banner.dataset.kind = kind;
  banner.hidden = false;
  if (kind === "ok") bannerTimer = setTimeout(() => (banner.hidden = true), 3000);
}

function setConnection(state, text) {
  $("connection").dataset.state = state;
  $("connection").textContent = text;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Called by the API client when a request got no answer at all: watch
// /health (no key needed) until the server is back, then reload its state.
function onConnectionLost() {
  if (connectionLost) return;
  connectionLost = true;
  setConnection("offline", "offline");
  showBanner("The server is not answering (stopped or restarting). Reconnecting…", "lost");
  (async () => {
    for (;;) {
      await sleep(1000);
      try {
        if ((await fetch("/health", { cache: "no-store" })).ok) break;
      } catch {
        // still down
      }
    }
    connectionLost = false;
    setConnection("online", "online");
    showBanner("Reconnected to the server.", "ok");
    await refreshModel();
    await refreshStatus();
  })();
}

// ------------------------------------------------------------ API key
let keyRequest = null; // one dialog at a time; concurrent 401s share it

function askKey(reason) {
  if (keyRequest) return keyRequest;
  keyRequest = new Promise((resolve) => {
    const dialog = $("key-dialog");
    const form = $("key-form");
    $("key-reason").textContent = reason;
    $("key-input").value = "";
    const done = (value) => {
      form.removeEventListener("submit", onSubmit);
      dialog.removeEventListener("cancel", onCancel);
      $("key-cancel").removeEventListener("click", onCancel);
      if (dialog.open) dialog.close();
      keyRequest = null;
      resolve(value);
    };
    const onSubmit = (e) => {
      e.preventDefault();
      done($("key-input").value.trim() || null);
    };
    const onCancel = (e) => {
      e.preventDefault();
      done(null);
    };
    form.addEventListener("submit", onSubmit);
    dialog.addEventListener("cancel", onCancel);
    $("key-cancel").addEventListener("click", onCancel);
    dialog.showModal();
    $("key-input").focus();
  });
  return keyRequest;
}

// A key entered while sending a message also unlocks the model list and the panel.
const api = new Api({
  askKey,
  onConnectionLost,
  onKeyAccepted: () => {
    $("banner").hidden = true;
    refreshModel();
    refreshStatus();
  },
});

// ------------------------------------------------------- server state
async function refreshModel() {
  try {
    const models = await api.json("/v1/models");
    modelId = models.data?.[0]?.id;
    $("model-name").textContent = modelId ?? "(no model)";
    setConnection("online", "online");
  } catch (e) {
    if (e instanceof ApiError && e.status === 401)
      showBanner("This server needs an API key: send a message to enter it.", "lost");
    else if (e instanceof ApiError) showBanner(`Cannot list the models: ${e.message}`, "lost");
  }
}

async function refreshStatus() {
  if (connectionLost || document.hidden) return;
  try {
    panel.render(await api.json("/status", { askForKey: false }));
    $("status-error").hidden = true;
  } catch (e) {
    if (e instanceof ConnectionLost) return;
    $("status-error").textContent = `status unavailable: ${e.message}`;
    $("status-error").hidden = false;
  }
}

function pollStatus() {
  refreshStatus().finally(() => setTimeout(pollStatus, running ? 1000 : 2000));
}

// -------------------------------------------------------- conversation
let renderQueued = false;

// Keeps the view at the bottom while the reader is there.
function followingBottom(update) {
  const list = $("messages");
  const nearBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 80;
  update();
  if (nearBottom) list.scrollTop = list.scrollHeight;
}

// Every message (which one may regenerate changes when an answer starts or ends).
function renderMessages() {
  const lastAssistant = conversation.findLast((c) => c.message.role === "assistant");
  followingBottom(() => {
    for (const c of conversation) c.view.update({ last: c === lastAssistant && !running });
  });
  $("empty").hidden = conversation.length > 0;
}

// The answer being streamed, at most once a frame.
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    const view = conversation.find((c) => c.message === running?.message)?.view;
    if (view) followingBottom(() => view.update({ last: false }));
  });
}

function addMessage(message) {
  const view = new MessageView(message, { onRegenerate: regenerate });
  conversation.push({ message, view });
  $("messages").append(view.node);
  renderMessages();
  $("messages").scrollTop = $("messages").scrollHeight;
}

// The conversation as the API takes it (answers that failed before saying
// anything are left out).
function apiMessages() {
  const out = [];
  const system = $("system-prompt").value.trim();
  if (system) out.push({ role: "system", content: system });
  for (const { message: m } of conversation) {
    if (m.role === "user") {
      out.push({ role: "user", content: m.content });
    } else if (m.content || m.toolCalls.length) {
      const entry = { role: "assistant", content: m.content };
      if (m.toolCalls.length)
        entry.tool_calls = m.toolCalls.map((c, i) => ({
          id: c.id ?? `call_${i}`,
          type: "function",
          function: { name: c.name, arguments: c.arguments },
        }));
      out.push(entry);
    }
  }
  return out;
}

// Streamed tool calls arrive in pieces keyed by index (OpenAI's format).
function mergeToolCalls(calls, deltas) {
  for (const d of deltas) {
    const i = d.index ?? calls.length;
    calls[i] ??= { name: "", arguments: "" };
    if (d.id) calls[i].id = d.id;
    if (d.function?.name) calls[i].name += d.function.name;
    if (d.function?.arguments) calls[i].arguments += d.function.arguments;
  }
}

function setRunning(on) {
  $("send").hidden = on;
  $("stop").hidden = !on;
  document.body.classList.toggle("running", on);
}

// The settings of a new request, or null (and the reason shown) when one is not valid.
function checkedSettings() {
  try {
    const settings = requestSettings();
    showInputError("");
    return settings;
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    showInputError(e.message);
    return null;
  }
}

async function generate(settings) {
  const messages = apiMessages();
  const message = { role: "assistant", content: "", reasoning: "", toolCalls: [], status: "streaming" };
  addMessage(message);
  const controller = new AbortController();
  running = { controller, message };
  setRunning(true);
  const started = performance.now();
  let first = null;
  let pieces = 0; // streamed deltas: about one per token
  let usage = null;
  let finishReason = null;
  const liveTimer = setInterval(() => {
    if (first !== null && pieces > 1) panel.setSpeed((pieces - 1) / ((performance.now() - first) / 1000));
  }, 250);
  try {
    const body = { messages, ...settings };
    if (modelId) body.model = modelId;
    await api.streamChat(body, controller.signal, (chunk) => {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (!choice) return;
      const delta = choice.delta ?? {};
      if (delta.content || delta.reasoning_content) {
        pieces++;
        first ??= performance.now();
      }
      if (delta.content) message.content += delta.content;
      if (delta.reasoning_content) message.reasoning += delta.reasoning_content;
      if (delta.tool_calls) mergeToolCalls(message.toolCalls, delta.tool_calls);
      if (choice.finish_reason) finishReason = choice.finish_reason;
      scheduleRender();
    });
    message.status = "done";
  } catch (e) {
    if (e.name === "AbortError") message.status = "stopped";
    else if (e instanceof ConnectionLost) message.status = "interrupted";
    else {
      message.status = "error";
      message.error = e instanceof ApiError ? `error ${e.status}: ${e.message}` : `error: ${e.message}`;
    }
  } finally {
    clearInterval(liveTimer);
    const end = performance.now();
    const tokens = usage?.completion_tokens ?? pieces;
    const decodeSeconds = first !== null ? (end - first) / 1000 : 0;
    // An answer refused before its first token has no speed to show.
    if (first !== null || usage) message.stats = {
      completionTokens: tokens,
      promptTokens: usage?.prompt_tokens,
      firstTokenMs: first !== null ? first - started : undefined,
      tokensPerSecond: tokens > 1 && decodeSeconds > 0 ? (tokens - 1) / decodeSeconds : undefined,
      finishReason,
    };
    if (usage) panel.setContextUsed(usage.prompt_tokens + usage.completion_tokens);
    panel.setSpeed(null, message.stats?.tokensPerSecond ? `last answer: ${message.stats.tokensPerSecond.toFixed(1)} tok/s, ${tokens} tokens` : undefined);
    running = null;
    setRunning(false);
    renderMessages();
    refreshStatus();
  }
}

function send() {
  const text = $("input").value;
  if (running || !text.trim()) return;
  if (connectionLost) {
    showInputError("The server is not answering yet; your message is kept here.");
    return;
  }
  const settings = checkedSettings();
  if (!settings) return; // the message stays in the box
  addMessage({ role: "user", content: text, status: "done" });
  $("input").value = "";
  autoGrow();
  generate(settings);
}

function stop() {
  running?.controller.abort();
}

function regenerate(message) {
  if (running) return;
  const i = conversation.findIndex((c) => c.message === message);
  if (i < 0 || i !== conversation.length - 1) return;
  const settings = checkedSettings();
  if (!settings) return;
  conversation.pop().view.node.remove();
  generate(settings);
}

function newChat() {
  stop();
  for (const c of conversation.splice(0)) c.view.node.remove();
  panel.setContextUsed(0);
  renderMessages();
  $("input").focus();
}

function autoGrow() {
  const input = $("input");
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
}

// -------------------------------------------------------------- wiring
function wire() {
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    send();
  });
  $("input").addEventListener("keydown", (e) => {
    // Enter sends, Shift+Enter adds a line; not while an IME is composing.
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    } else if (e.key === "Escape" && running) {
      stop();
    }
  });
  $("input").addEventListener("input", autoGrow);
  $("stop").addEventListener("click", stop);
  $("new-chat").addEventListener("click", newChat);
  $("toggle-panel").addEventListener("click", () => {
    const open = document.body.classList.toggle("panel-open");
    $("toggle-panel").setAttribute("aria-expanded", String(open));
  });
  document.addEventListener("visibilitychange", () => !document.hidden && refreshStatus());
}

loadSettings();
wire();
setRunning(false);
await refreshModel();
pollStatus();
$("input").focus();
