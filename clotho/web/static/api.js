// The HTTP API as the page uses it: the token on every request, the session's version
// (ETag) read from every answer and sent back as If-Match on writes, problem documents
// turned into errors, and turns' server-sent events read as they come.

import { t } from "./i18n.js";

/** An error answered by the API (RFC 9457 problem document), or a transport failure. */
export class Problem extends Error {
  constructor(status, doc) {
    super(doc.detail || doc.title || t("app.http_status", { status }));
    this.status = status;
    this.doc = doc;
    this.code = doc.code || null;
    this.title = doc.title || t("app.http_status", { status });
    this.detail = doc.detail || "";
  }
}

/** How long a write whose connection failed waits before it is sent once more. */
const RETRY_MS = 300;

/** A new Idempotency-Key: a random UUID (or 32 random hex digits outside a secure context). */
export function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The version in an ETag header (`"12"`), or null. */
export function versionOf(response) {
  const tag = response.headers.get("ETag");
  const match = tag && /"(\d+)"/.exec(tag);
  return match ? Number(match[1]) : null;
}

async function problemOf(response) {
  const text = await response.text();
  let doc;
  try {
    doc = JSON.parse(text);
  } catch {
    doc = { title: response.statusText || t("app.http_status", { status: response.status }), detail: text.slice(0, 500) };
  }
  if (typeof doc !== "object" || doc === null) doc = { title: String(doc) };
  return new Problem(response.status, doc);
}

function unreachable(error) {
  return new Problem(0, {
    title: t("app.unreachable"),
    detail: t("app.unreachable_detail", { error: error.message || error }),
    code: "unreachable",
  });
}

export class Api {
  constructor(token) {
    this.token = token;
  }

  headers(extra = {}) {
    return { Authorization: `Bearer ${this.token}`, ...extra };
  }

  /**
   * One request. Returns {data, version, response}; throws a Problem.
   * Options: json (a body to send as JSON), body + contentType (a raw body),
   * ifMatch (the version the write is based on), idempotencyKey (see newKey: a write sent
   * with one is sent once more if the connection fails before its answer came: if the
   * first one was applied, the server answers it again without applying it twice),
   * signal, as ("blob": the body as a Blob; else JSON or text, as its type says).
   */
  async request(method, path, options = {}) {
    const headers = this.headers(options.headers);
    let body;
    if (options.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(options.json);
    } else if (options.body !== undefined) {
      body = options.body;
      if (options.contentType) headers["Content-Type"] = options.contentType;
    }
    if (options.ifMatch != null) headers["If-Match"] = `"${options.ifMatch}"`;
    if (options.idempotencyKey) headers["Idempotency-Key"] = options.idempotencyKey;
    let response;
    for (let attempt = 0; ; attempt += 1) {
      try {
        response = await fetch(path, { method, headers, body, signal: options.signal });
        break;
      } catch (error) {
        if (error.name === "AbortError") throw error;
        if (!options.idempotencyKey || attempt > 0) throw unreachable(error);
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }
    if (!response.ok) throw await problemOf(response);
    const type = response.headers.get("Content-Type") || "";
    let data = null;
    if (response.status !== 204) {
      if (options.as === "blob") data = await response.blob();
      else data = type.includes("json") ? await response.json() : await response.text();
    }
    return { data, version: versionOf(response), response };
  }

  async get(path) {
    return (await this.request("GET", path)).data;
  }

  /**
   * Every item of a list read a page at a time (`{<key>: [...], next}`), following
   * `next` to the end. Returns {items, first, last}: the items, and the first and last
   * pages' answers (as request() gives them).
   */
  async pages(path, key) {
    let answer = await this.request("GET", path);
    const first = answer;
    const items = [...answer.data[key]];
    while (answer.data.next) {
      answer = await this.request("GET", answer.data.next);
      items.push(...answer.data[key]);
    }
    return { items, first, last: answer };
  }

  /**
   * A turn's server-sent events: POST `json` to start one (ifMatch: the version it is
   * based on), or GET a turn's events from the start (`json` undefined).
   * Calls onEvent(kind, data) for each event (turn, status, reasoning, token, warning,
   * then node, cancelled or error). Resolves with the last event.
   * Refusals before the stream (422, 412, 503...) throw a Problem.
   */
  async stream(path, json, { ifMatch, onEvent, signal } = {}) {
    const headers = this.headers({ Accept: "text/event-stream" });
    if (json !== undefined) headers["Content-Type"] = "application/json";
    if (ifMatch != null) headers["If-Match"] = `"${ifMatch}"`;
    const method = json === undefined ? "GET" : "POST";
    const body = json === undefined ? undefined : JSON.stringify(json);
    let response;
    try {
      response = await fetch(path, { method, headers, body, signal });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw unreachable(error);
    }
    if (!response.ok) throw await problemOf(response);
    let last = null;
    await readEvents(
      response,
      (kind, payload) => {
        last = { kind, data: payload };
        onEvent?.(kind, payload);
      },
      { tail: true },
    );
    return last;
  }
}

/** Read the text/event-stream `response` to its end: `onEvent(kind, data, id)` for each
 * event that carries data (`data` parsed as JSON, `id` the `id:` field as a number, or
 * null). With `tail`, a last event not closed by a blank line is read too. */
export async function readEvents(response, onEvent, { tail = false } = {}) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      deliverEvent(buffer.slice(0, cut), onEvent);
      buffer = buffer.slice(cut + 2);
    }
  }
  if (tail && buffer.trim()) deliverEvent(buffer, onEvent);
}

function deliverEvent(block, onEvent) {
  let kind = "message";
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue; // a keep-alive comment
    if (line.startsWith("event:")) kind = line.slice(6).trim();
    else if (line.startsWith("id:")) id = Number(line.slice(3).trim());
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!data.length) return;
  onEvent(kind, JSON.parse(data.join("\n")), id);
}

/** `/api/sessions/<id>` + rest, with the id escaped. */
export function sessionPath(sid, rest = "") {
  return `/api/sessions/${encodeURIComponent(sid)}${rest}`;
}
