// A small markdown renderer for model output. It builds DOM nodes and puts
// every piece of model text in a text node: nothing the model writes is ever
// parsed as HTML, so `<script>` or `<img onerror=…>` in an answer shows up as
// those characters. Only what chat models commonly write is understood:
// fenced code blocks, headings, lists, quotes, rules, paragraphs, inline code,
// bold, italics and http(s) links. An unclosed fence (an answer still
// streaming) renders as code so far.

const FENCE = /^\s*(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^(#{1,6})\s+(.*)$/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s*>\s?(.*)$/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;

function el(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

// Links only to the web: a javascript: or data: address from the model must
// not become something a click runs.
function safeHref(url) {
  try {
    const parsed = new URL(url, "http://invalid.invalid/");
    if ((parsed.protocol === "http:" || parsed.protocol === "https:") && /^https?:\/\//i.test(url)) return parsed.href;
  } catch {
    // not a URL: shown as text
  }
  return null;
}

// Inline spans, earliest match first; unmatched markers stay as text.
// Underscores count only at word edges (snake_case and __dunder__ names stay as written).
const INLINE = /`([^`\n]+)`|\*\*(?=\S)([^*\n]*\S)\*\*|(?<!\w)__(?=\S)([^_\n]*\S)__(?!\w)|\*(?=[^\s*])([^*\n]*[^\s*])\*|(?<![\w])_(?=[^\s_])([^_\n]*[^\s_])_(?![\w])|\[([^\]\n]+)\]\(([^()\s]+)\)/;

export function renderInline(text, parent) {
  let rest = text;
  while (rest.length > 0) {
    const m = INLINE.exec(rest);
    if (!m) break;
    if (m.index > 0) parent.append(document.createTextNode(rest.slice(0, m.index)));
    if (m[1] !== undefined) {
      const code = el("code");
      code.textContent = m[1];
      parent.append(code);
    } else if (m[2] !== undefined || m[3] !== undefined) {
      const strong = el("strong");
      renderInline(m[2] ?? m[3], strong);
      parent.append(strong);
    } else if (m[4] !== undefined || m[5] !== undefined) {
      const em = el("em");
      renderInline(m[4] ?? m[5], em);
      parent.append(em);
    } else {
      const href = safeHref(m[7]);
      if (href) {
        const a = el("a");
        a.href = href;
        a.target = "_blank";
        a.rel = "noopener noreferrer nofollow";
        renderInline(m[6], a);
        parent.append(a);
      } else {
        parent.append(document.createTextNode(m[0]));
      }
    }
    rest = rest.slice(m.index + m[0].length);
  }
  if (rest.length > 0) parent.append(document.createTextNode(rest));
}

function codeBlock(lang, lines) {
  const wrap = el("div", "code-block");
  const bar = el("div", "code-bar");
  const label = el("span", "code-lang");
  label.textContent = lang || "code";
  const copy = el("button", "copy");
  copy.type = "button";
  copy.textContent = "Copy";
  const pre = el("pre");
  const code = el("code");
  code.textContent = lines.join("\n");
  copy.addEventListener("click", () => {
    navigator.clipboard?.writeText(code.textContent).then(
      () => (copy.textContent = "Copied"),
      () => (copy.textContent = "Copy failed"),
    );
    setTimeout(() => (copy.textContent = "Copy"), 1500);
  });
  bar.append(label, copy);
  pre.append(code);
  wrap.append(bar, pre);
  return wrap;
}

// Renders `text` into a new DocumentFragment.
export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let paragraph = [];
  let list = null; // {node, ordered}

  const flushParagraph = () => {
    if (paragraph.length === 0) return;
    const p = el("p");
    renderInline(paragraph.join("\n"), p);
    out.append(p);
    paragraph = [];
  };
  const closeList = () => {
    list = null;
  };

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      flushParagraph();
      closeList();
      const marker = fence[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(marker)) body.push(lines[i++]);
      out.append(codeBlock(fence[2], body));
      continue;
    }
    if (line.trim() === "") {
      flushParagraph();
      closeList();
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      flushParagraph();
      closeList();
      const h = el("h" + Math.min(6, heading[1].length + 2)); // h3..h6: the page keeps h1/h2
      renderInline(heading[2], h);
      out.append(h);
      continue;
    }
    if (RULE.test(line)) {
      flushParagraph();
      closeList();
      out.append(el("hr"));
      continue;
    }
    const quote = QUOTE.exec(line);
    if (quote) {
      flushParagraph();
      closeList();
      const body = [quote[1]];
      while (i + 1 < lines.length && QUOTE.test(lines[i + 1])) body.push(QUOTE.exec(lines[++i])[1]);
      const q = el("blockquote");
      q.append(renderMarkdown(body.join("\n")));
      out.append(q);
      continue;
    }
    const item = LIST_ITEM.exec(line);
    if (item) {
      flushParagraph();
      const ordered = /\d/.test(item[2]);
      if (!list || list.ordered !== ordered) {
        list = { node: el(ordered ? "ol" : "ul"), ordered };
        if (ordered && parseInt(item[2], 10) !== 1) list.node.start = parseInt(item[2], 10);
        out.append(list.node);
      }
      const li = el("li");
      renderInline(item[3], li);
      list.node.append(li);
      continue;
    }
    if (list && /^\s+\S/.test(line)) {
      // a continuation line of the last item
      const last = list.node.lastElementChild;
      last.append(document.createTextNode("\n"));
      renderInline(line.trim(), last);
      continue;
    }
    closeList();
    paragraph.push(line);
  }
  flushParagraph();
  return out;
}
