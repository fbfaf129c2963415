// Roleplay formatting of a message's text, as SillyTavern players expect it: *actions*
// in italics, "speech" set apart, and a safe subset of Markdown (**bold**, *italic*,
// `code`, fenced code, line breaks, paragraphs, lists, blockquotes, http(s) links).
//
// Model text never becomes markup: this builds DOM nodes and puts the text in them as
// text (no innerHTML anywhere), so `<script>` or `<img onerror>` in a reply is shown as
// the characters it is. No images, no raw HTML, no link other than http(s) and mailto.
// Linear in the text's length: an unclosed marker is searched for once, then taken as
// a literal character (a 100 KB reply full of lone asterisks formats in milliseconds).

/** How deep blockquotes (and their lists) nest before the rest is shown as text. */
const MAX_DEPTH = 8;
/** The link schemes kept as links; any other link is shown as the text it is. */
const SAFE_LINK = /^(https?:\/\/|mailto:)/i;
const LINK = /\[([^\]\n]{1,500})\]\(([^()\s]{1,2000})\)/y;
const FENCE = /^\s{0,3}(```|~~~)/;
const QUOTE = /^\s{0,3}> ?/;
const BULLET = /^\s{0,3}[-+*]\s+/;
const NUMBERED = /^\s{0,3}(\d{1,9})[.)]\s+/;
/** A character that may begin something to format inside a span (else it is plain text). */
const MARKER = /[\\`*_"“「『\[!\n]/;
/** Speech: each opening quote and its closing one (straight, curly, CJK corner brackets). */
const QUOTES = { '"': '"', "“": "”", "「": "」", "『": "』" };
const ESCAPABLE = new Set("\\`*_[]()#+-.!>\"~".split(""));

/** The text of a message as formatted nodes (a DocumentFragment). */
export function formatText(text) {
  const fragment = document.createDocumentFragment();
  blocks(String(text ?? "").replace(/\r\n?/g, "\n").split("\n"), fragment, 0);
  return fragment;
}

/** Empty `container` and fill it with `text`, formatted. Returns the container. */
export function renderFormatted(container, text) {
  container.replaceChildren(formatText(text));
  container.classList.add("formatted");
  return container;
}

function make(tag, className = "") {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

/** Lines into paragraphs, fenced code, blockquotes and lists, appended to `parent`. */
function blocks(lines, parent, depth) {
  let paragraph = [];
  const endParagraph = () => {
    if (!paragraph.length) return;
    const p = make("p");
    inline(paragraph.join("\n"), p);
    parent.append(p);
    paragraph = [];
  };
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      endParagraph();
      i += 1;
    } else if (FENCE.test(line)) {
      endParagraph();
      const fence = FENCE.exec(line)[1];
      const code = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) code.push(lines[i++]);
      i += 1; // the closing fence (or the end: an unclosed fence runs to the end)
      const pre = make("pre");
      const inner = make("code");
      inner.textContent = code.join("\n");
      pre.append(inner);
      parent.append(pre);
    } else if (depth < MAX_DEPTH && QUOTE.test(line)) {
      endParagraph();
      const quoted = [];
      while (i < lines.length && QUOTE.test(lines[i])) quoted.push(lines[i++].replace(QUOTE, ""));
      const quote = make("blockquote");
      blocks(quoted, quote, depth + 1);
      parent.append(quote);
    } else if (BULLET.test(line) || NUMBERED.test(line)) {
      endParagraph();
      const numbered = NUMBERED.exec(line);
      const marker = numbered ? NUMBERED : BULLET;
      const list = make(numbered ? "ol" : "ul");
      if (numbered && numbered[1] !== "1") list.start = Math.min(Number(numbered[1]), 1e9);
      while (i < lines.length && marker.test(lines[i])) {
        const item = make("li");
        inline(lines[i++].replace(marker, ""), item);
        list.append(item);
      }
      parent.append(list);
    } else {
      paragraph.push(line);
      i += 1;
    }
  }
  endParagraph();
}

/**
 * The inline markers of `text` into `parent`: `code`, **bold**, *italic* or _italic_,
 * "speech" (straight or curly quotes, 「」 and 『』), [links](https://...), backslash escapes;
 * newlines become <br>. A marker without its closing one is a literal character.
 */
function inline(text, parent) {
  // The first closing marker at or after a place does not depend on where its opening
  // one was, so each kind keeps its last answer: [from, at] answers any search from
  // inside it (at -1: none to the end), and the text is read about once per kind.
  const known = new Map();
  const closing = (key, from, find) => {
    const last = known.get(key);
    if (last && from >= last.from && (last.at < 0 || from <= last.at)) return last.at;
    const at = find(from);
    known.set(key, { from, at });
    return at;
  };
  walk(text, 0, text.length, parent, closing, 0);
}

function walk(text, start, end, parent, closing, depth) {
  let plain = "";
  const flush = () => {
    if (!plain) return;
    plain.split("\n").forEach((part, n) => {
      if (n) parent.append(make("br"));
      if (part) parent.append(document.createTextNode(part));
    });
    plain = "";
  };
  /** `text[from..to]` inside a new <tag>, between `open` and `close` kept as text. */
  const wrap = (tag, className, from, to, open = "", close = "") => {
    flush();
    const node = make(tag, className);
    if (open) node.append(open);
    const inner = text.slice(from, to);
    if (depth < MAX_DEPTH && MARKER.test(inner)) walk(text, from, to, node, closing, depth + 1);
    else node.append(inner); // nothing inside to format (or nested too deep): its text
    if (close) node.append(close);
    parent.append(node);
  };
  let i = start;
  while (i < end) {
    const c = text[i];
    const next = text[i + 1];
    let close = -1;
    if (c === "\\" && i + 1 < end && ESCAPABLE.has(next)) {
      plain += next;
      i += 2;
    } else if (c === "`" && (close = closing("`", i + 1, (from) => text.indexOf("`", from))) > i + 1 && close < end) {
      flush();
      const code = make("code");
      code.textContent = text.slice(i + 1, close);
      parent.append(code);
      i = close + 1;
    } else if (c === "*" && next === "*") {
      if (text[i + 2] && !/\s/.test(text[i + 2])) close = closing("**", i + 2, (from) => strongEnd(text, from));
      if (close > i + 2 && close <= end - 2) {
        wrap("strong", "", i + 2, close);
        i = close + 2;
      } else {
        plain += "**";
        i += 2;
      }
    } else if ((c === "*" || (c === "_" && !isWord(text[i - 1]))) && next && !/\s/.test(next) && (close = closing(c, i + 1, (from) => emphasisEnd(text, from, c))) > i + 1 && close < end) {
      wrap("em", c === "*" ? "action" : "", i + 1, close);
      i = close + 1;
    } else if (Object.hasOwn(QUOTES, c) && (close = closing(c, i + 1, (from) => text.indexOf(QUOTES[c], from))) > i + 1 && close < end) {
      wrap("q", "speech", i + 1, close, c, text[close]);
      i = close + 1;
    } else if (c === "[" || (c === "!" && next === "[")) {
      const at = c === "!" ? i + 1 : i;
      LINK.lastIndex = at;
      const link = LINK.exec(text);
      if (link && at + link[0].length <= end) {
        if (c === "[" && SAFE_LINK.test(link[2])) {
          flush();
          const a = make("a");
          a.href = link[2];
          a.rel = "noopener noreferrer nofollow";
          a.target = "_blank";
          a.textContent = link[1];
          parent.append(a);
        } else plain += text.slice(i, at + link[0].length); // an image or another scheme: as text
        i = at + link[0].length;
      } else {
        plain += c;
        i += 1;
      }
    } else {
      plain += c;
      i += 1;
    }
  }
  flush();
}

function isWord(c) {
  return c != null && /[\p{L}\p{N}]/u.test(c);
}

/** The next closing `**` from `from` (after a non-space; the last two of a longer run
 * of asterisks), or -1. */
function strongEnd(text, from) {
  for (let at = text.indexOf("**", from); at >= 0; at = text.indexOf("**", at + 1)) {
    if (/[\s*]/.test(text[at - 1] ?? " ")) continue;
    while (text[at + 2] === "*") at += 1;
    return at;
  }
  return -1;
}

/**
 * The next closing `*` from `from`: alone (not one of `**`) and after a non-space; or
 * the next closing `_`: after a non-space and not inside a word. -1: none.
 */
function emphasisEnd(text, from, mark) {
  for (let at = text.indexOf(mark, from); at >= 0; at = text.indexOf(mark, at + 1)) {
    if (mark === "*" && (text[at - 1] === "*" || text[at + 1] === "*")) {
      while (text[at + 1] === "*") at += 1; // past the run
      continue;
    }
    if (/\s/.test(text[at - 1] ?? " ")) continue;
    if (mark === "_" && isWord(text[at + 1])) continue;
    return at;
  }
  return -1;
}
