// The page's only way to the server: its public HTTP API, as any client
// would use it. Adds the API key (asked for once, kept in sessionStorage so
// it lasts as long as the tab), turns error bodies into ApiError, a failed
// connection into ConnectionLost, and reads streamed chat completions.

const KEY_STORAGE = "fathom.apiKey";

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// The server did not answer at all (stopped, restarting, network gone).
export class ConnectionLost extends Error {}

async function errorFrom(res) {
  let message = `${res.status} ${res.statusText}`;
  let code;
  try {
    const body = await res.json();
    // OpenAI's {"error": {...}}, or Anthropic's {"type": "error", "error": {...}}
    if (body?.error?.message) message = body.error.message;
    code = body?.error?.code ?? body?.error?.type;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(res.status, message, code);
}

function isAbort(e) {
  return e?.name === "AbortError";
}

export class Api {
  // askKey(reason) resolves to a key, or to null when the user declines;
  // onKeyAccepted() runs when a newly entered key has just been accepted.
  constructor({ askKey, onConnectionLost, onKeyAccepted }) {
    this.askKey = askKey;
    this.onConnectionLost = onConnectionLost;
    this.onKeyAccepted = onKeyAccepted;
  }

  get key() {
    return sessionStorage.getItem(KEY_STORAGE);
  }

  // askForKey: false for background requests (status polling), which must
  // not pop the dialog up again after the user dismissed it.
  async request(path, init = {}, { askForKey = true } = {}) {
    let newKey = false;
    for (;;) {
      const headers = { ...(init.headers ?? {}) };
      const sentKey = this.key;
      if (sentKey) headers.Authorization = `Bearer ${sentKey}`;
      let res;
      try {
        res = await fetch(path, { ...init, headers, cache: "no-store" });
      } catch (e) {
        if (isAbort(e)) throw e;
        this.onConnectionLost?.();
        throw new ConnectionLost(`no answer from the server (${e.message})`);
      }
      if (res.status !== 401) {
        if (newKey) this.onKeyAccepted?.();
        if (!res.ok) throw await errorFrom(res);
        return res;
      }
      const refused = await errorFrom(res);
      if (!askForKey) throw refused;
      const key = await this.askKey(sentKey ? "The server refused that key." : "This server needs an API key.");
      if (!key) throw refused;
      sessionStorage.setItem(KEY_STORAGE, key);
      newKey = true;
    }
  }

  async json(path, options) {
    return (await this.request(path, {}, options)).json();
  }

  // Streams a chat completion: onChunk(chunk) for every parsed event until
  // `data: [DONE]`. An error event in the stream is thrown as ApiError.
  async streamChat(body, signal, onChunk) {
    const res = await this.request("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
      signal,
    });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      let part;
      try {
        part = await reader.read();
      } catch (e) {
        if (isAbort(e)) throw e;
        this.onConnectionLost?.();
        throw new ConnectionLost("the connection to the server was lost mid-answer");
      }
      if (part.done) throw new ConnectionLost("the server closed the stream before it finished");
      buffer += part.value.replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        // data: lines only; ": keep-alive" comments and other fields are skipped
        const data = event
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        if (data === "") continue;
        if (data === "[DONE]") {
          reader.cancel().catch(() => {});
          return;
        }
        const chunk = JSON.parse(data);
        if (chunk.error) throw new ApiError(chunk.error.status ?? 500, chunk.error.message, chunk.error.code);
        onChunk(chunk);
      }
    }
  }
}
