// Replay (A/B): "Replay with…" on a generated message sends its prompt again with
// something changed (POST .../nodes/{id}/replay: another model or profile, the sampler
// settings, the author's note, lore switched off or on), each answer a new alternative of
// the message; then the original and its replays side by side, each replay's words that
// differ from the original's marked (removed struck out, added underlined) and what
// changed against it as chips.

import { diffView } from "./diffview.js";
import { t } from "./i18n.js";
import { clear, el, short } from "./ui.js";

/** Above this many word pairs, two texts are shown whole rather than compared. */
const MAX_CELLS = 2_000_000;
/** The pieces compared: runs of white space, each Chinese or Japanese character, words
 * (letters, digits, apostrophes), and each other sign alone (a comma added after a word
 * marks the comma, not the word). */
const WORDS = /\s+|[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}]|(?:(?![\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}])[\p{L}\p{N}\p{M}'’_-])+|[^\s\p{L}\p{N}\p{M}'’_-]/gu;
/** The most alternatives of a message read for the side-by-side view. */
const MAX_SIBLINGS = 40;

/**
 * The word-level difference turning `a` into `b`: runs {op: "same" | "removed" |
 * "added", text}, white space kept (a longest common subsequence of the words).
 */
export function wordDiff(a, b) {
  const x = a.match(WORDS) || [];
  const y = b.match(WORDS) || [];
  const n = x.length;
  const m = y.length;
  if (n * m > MAX_CELLS) return [...(a ? [{ op: "removed", text: a }] : []), ...(b ? [{ op: "added", text: b }] : [])];
  const width = m + 1;
  const common = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      common[i * width + j] = x[i] === y[j] ? common[(i + 1) * width + j + 1] + 1 : Math.max(common[(i + 1) * width + j], common[i * width + j + 1]);
    }
  }
  const runs = [];
  const push = (op, text) => {
    const last = runs[runs.length - 1];
    if (last && last.op === op) last.text += text;
    else runs.push({ op, text });
  };
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      push("same", x[i]);
      i += 1;
      j += 1;
    } else if (common[(i + 1) * width + j] >= common[i * width + j + 1]) push("removed", x[i++]);
    else push("added", y[j++]);
  }
  while (i < n) push("removed", x[i++]);
  while (j < m) push("added", y[j++]);
  return runs;
}

function shown(value) {
  if (value === null || value === undefined || value === "") return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** What a replay changed against its original (its metadata's `replay.changed`), as chips. */
export function changeChips(changed) {
  const chips = [];
  for (const [key, value] of Object.entries(changed || {})) {
    if (key === "params") {
      for (const [name, [before, after]] of Object.entries(value)) chips.push(`${name} ${shown(before)} → ${shown(after)}`);
    } else if (key === "lore") {
      for (const id of value.off || []) chips.push(t("replay.chip_lore_off", { id }));
      for (const id of value.on || []) chips.push(t("replay.chip_lore_on", { id }));
    } else if (key === "templates") {
      for (const [name, [, after]] of Object.entries(value)) chips.push(t("replay.chip_template", { name, origin: after }));
    } else if (key === "note") {
      chips.push(value[1] ? t("replay.chip_note", { note: value[1] }) : t("replay.chip_no_note"));
    } else {
      chips.push(`${key} ${shown(value[0])} → ${shown(value[1])}`);
    }
  }
  return el("ul.replay-chips", {}, chips.map((text) => el("li.chip", { text })));
}

/** The settings a generated message was made with, as chips (the original's column). */
function settingChips(node) {
  const params = node.metadata?.params || {};
  const chips = [node.metadata?.model, ...Object.entries(params).map(([k, v]) => `${k} ${shown(v)}`)].filter(Boolean);
  return el("ul.replay-chips.settings", {}, chips.map((text) => el("li.chip", { text })));
}

function diffed(original, text) {
  return diffView("div.replay-text", wordDiff(original, text));
}

function number(form, name) {
  const text = form.elements[name].value.trim();
  return text === "" ? undefined : Number(text);
}

function ids(text) {
  return text
    .split(/[\s,]+/)
    .map((id) => id.trim())
    .filter(Boolean);
}

export class ReplayPanel {
  constructor(app) {
    this.app = app;
    this.dialog = null;
  }

  ensureDialog() {
    if (this.dialog) return this.dialog;
    this.dialog = el(
      "dialog.wide.replay-dialog",
      { id: "replay-dialog", "aria-labelledby": "replay-title" },
      el("form.close-row", { method: "dialog" }, el("button", { text: t("app.close") })),
      el("div.replay-body"),
    );
    document.body.append(this.dialog);
    return this.dialog;
  }

  /** The message replayed and its replays among its alternatives. Opened from a
   * replay, its original, if that is still one of its alternatives (not trashed, pruned
   * or moved since); else the message itself. */
  async family(node) {
    const api = this.app.api;
    const get = (id) => api.get(this.app.path(`/nodes/${encodeURIComponent(id)}`));
    const of = node.metadata?.replay?.of;
    let original = null;
    if (of && of !== node.id) {
      try {
        original = await get(of);
      } catch (error) {
        if (error.status !== 404) throw error; // deleted for good: the message itself
      }
    }
    if (!original || !original.siblings.includes(node.id)) original = await get(node.id);
    const others = original.siblings.filter((id) => id !== original.id).slice(0, MAX_SIBLINGS);
    const siblings = await Promise.all(others.map(get));
    return { original, replays: siblings.filter((each) => each.metadata?.replay?.of === original.id) };
  }

  async open(node) {
    const dialog = this.ensureDialog();
    const body = clear(dialog.querySelector(".replay-body"));
    let family;
    try {
      family = await this.family(node);
    } catch (error) {
      this.app.fail(error, t("replay.loading"));
      return;
    }
    const { original } = family;
    this.grid = el("div.replay-grid");
    this.original = original;
    this.columns = new Map();
    body.append(el("h2", { id: "replay-title", text: t("replay.title", { id: short(original.id) }) }), await this.form(original), el("h3", { text: t("replay.side_by_side") }), this.grid);
    this.grid.append(this.column(original, { label: t("replay.original"), chips: settingChips(original), text: original.content }));
    for (const made of family.replays) this.showReplay(made);
    if (!dialog.open) dialog.showModal();
  }

  /** One column: a heading, chips, the text (a replay's marked against the original's). */
  column(node, { label, chips, text, diff = false }) {
    const article = el(
      "article.replay-column",
      { dataset: { nodeId: node?.id || "" } },
      el("header", {}, el("strong", { text: label }), node?.id ? el("code", { text: short(node.id) }) : null),
      chips,
      diff ? diffed(this.original.content, text) : el("div.replay-text", { text }),
    );
    return article;
  }

  showReplay(made, index = null) {
    const record = made.metadata?.replay || {};
    const column = this.column(made, { label: t(record.sent === "rebuilt" ? "replay.rebuilt" : "replay.as_stored"), chips: changeChips(record.changed), text: made.content, diff: true });
    const waiting = index === null ? null : this.columns.get(index);
    if (waiting) waiting.replaceWith(column);
    else this.grid.append(column);
  }

  async form(original) {
    let profiles = [];
    try {
      profiles = (await this.app.api.get("/api/profiles")).profiles.map((p) => p.name);
    } catch {
      profiles = []; // the profiles cannot be read: a model by name still works
    }
    const params = original.metadata?.params || {};
    const field = (name, label, input) => el("label", {}, el("span", { text: label }), input);
    const form = el(
      "form.replay-form",
      {},
      el(
        "div.replay-fields",
        {},
        field("model", t("replay.model"), el("input", { name: "model", type: "text", placeholder: original.metadata?.model || "", autocomplete: "off" })),
        field("profile", t("replay.profile"), el("select", { name: "profile" }, el("option", { value: "", text: t("replay.no_profile") }), profiles.map((name) => el("option", { value: name, text: name })))),
        field("temperature", t("replay.temperature"), el("input", { name: "temperature", type: "number", min: "0", max: "5", step: "0.05", placeholder: shown(params.temperature) })),
        field("top_p", t("replay.top_p"), el("input", { name: "top_p", type: "number", min: "0", max: "1", step: "0.05", placeholder: shown(params.top_p) })),
        field("max_tokens", t("replay.max_tokens"), el("input", { name: "max_tokens", type: "number", min: "1", step: "1", placeholder: shown(params.max_tokens) })),
        field("n", t("replay.n"), el("input", { name: "n", type: "number", min: "1", max: "8", step: "1", value: "1" })),
      ),
      el(
        "details.replay-more",
        {},
        el("summary", { text: t("replay.rebuild") }),
        field("note", t("replay.note"), el("textarea", { name: "note", rows: 2, placeholder: t("replay.note_placeholder") })),
        field("lore_off", t("replay.lore_off"), el("input", { name: "lore_off", type: "text", placeholder: "book:uid, …" })),
        field("lore_on", t("replay.lore_on"), el("input", { name: "lore_on", type: "text", placeholder: "book:uid, …" })),
      ),
      el("menu", {}, el("button.primary.replay-go", { type: "submit", text: t("replay.go") })),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.replay(original, form);
    });
    return form;
  }

  /** The body the form asks for (only what was given). */
  body(form) {
    const json = { n: number(form, "n") || 1 };
    const model = form.elements.model.value.trim();
    if (model) json.model = model;
    if (form.elements.profile.value) json.profile = form.elements.profile.value;
    const params = {};
    for (const name of ["temperature", "top_p", "max_tokens"]) {
      const value = number(form, name);
      if (value !== undefined) params[name] = value;
    }
    if (Object.keys(params).length) json.params = params;
    const note = form.elements.note.value;
    if (note.trim()) json.note = note;
    const off = ids(form.elements.lore_off.value);
    const on = ids(form.elements.lore_on.value);
    if (off.length) json.lore_off = off;
    if (on.length) json.lore_on = on;
    return json;
  }

  async replay(original, form) {
    const button = form.querySelector(".replay-go");
    const json = this.body(form);
    button.disabled = true;
    this.dialog.setAttribute("aria-busy", "true");
    const streaming = (index) => {
      if (!this.columns.has(index)) {
        const column = this.column(null, { label: t("replay.writing", { n: index + 1 }), chips: el("ul.replay-chips"), text: "" });
        column.classList.add("streaming");
        this.columns.set(index, column);
        this.grid.append(column);
      }
      return this.columns.get(index);
    };
    this.columns = new Map();
    try {
      const last = await this.app.api.stream(this.app.path(`/nodes/${encodeURIComponent(original.id)}/replay`), json, {
        ifMatch: this.app.version,
        onEvent: (kind, data) => {
          if (kind === "token") streaming(data.index).querySelector(".replay-text").append(data.text);
          else if (kind === "replay") this.showReplay(data.node, data.index);
          else if (kind === "warning") this.app.notify(t("replay.warning"), data.text);
        },
      });
      if (last?.kind === "error") this.app.problem(last.data, t("replay.failed"));
      else if (last?.kind === "done") this.app.setVersion(last.data.session.version);
      await this.app.refresh();
    } catch (error) {
      this.app.fail(error, t("replay.refused"));
      if (error.status === 412) await this.app.refresh();
    } finally {
      for (const column of this.columns.values()) if (column.isConnected && column.classList.contains("streaming")) column.remove();
      button.disabled = false;
      this.dialog.removeAttribute("aria-busy");
    }
  }
}
