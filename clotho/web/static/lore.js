// The lore manager: the session's lorebooks (switched on or off, removed, added from a
// file, exported), their entries searchable by title or key, an entry editor (keys,
// content, logic, position, timed effects, the condition on the world state) that saves
// only what changed, and "test a text": which entries would fire for it, and why.
// Every write names the version the dialog was drawn from (If-Match); a refused one
// changes nothing and the dialog is drawn again from the server.

import { newKey } from "./api.js";
import { t } from "./i18n.js";
import { clear, el, showError, toast } from "./ui.js";

const LOGIC = [0, 2, 1, 3]; // SillyTavern's menu order: AND ANY, NOT ANY, NOT ALL, AND ALL
const POSITIONS = [0, 1, 4, 7, 2, 3, 5, 6];
const TIMERS = ["sticky", "cooldown", "delay"];

/** Keys written as a comma list; a `/regex/flags` key may hold commas of its own. */
export function splitKeys(text) {
  const keys = [];
  let rest = text.trim();
  while (rest) {
    const regex = /^\/(?:\\.|[^\\/])+\/[gimsuy]*(?=\s*(,|$))/.exec(rest);
    const cut = regex ? regex[0].length : rest.indexOf(",") < 0 ? rest.length : rest.indexOf(",");
    const key = rest.slice(0, cut).trim();
    if (key) keys.push(key);
    rest = rest.slice(cut).replace(/^\s*,/, "").trim();
  }
  return keys;
}

function entryTitle(entry) {
  return entry.comment || entry.keys[0] || t("lore.untitled", { uid: entry.uid });
}

export class LoreManager {
  constructor(app) {
    this.app = app;
    this.books = [];
    this.book = null; // the open book's name
    this.detail = null; // the open book in full
    this.uid = null; // the entry in the editor
    this.dialog = el("dialog.wide.lore", { id: "lore-dialog", "aria-labelledby": "lore-title" });
    document.body.append(this.dialog);
    this.dialog.addEventListener("cancel", async (event) => {
      if (!this.dirty()) return; // Escape closes it
      event.preventDefault();
      if (await this.leave()) this.dialog.close();
    });
    const button = el("button", { type: "button", id: "lore-open", text: t("lore.open"), title: t("lore.open_title"), onclick: () => this.open() });
    document.getElementById("menu")?.append(button);
  }

  path(rest) {
    return this.app.path(`/lore${rest}`);
  }

  bookPath(rest = "") {
    return this.path(`/books/${encodeURIComponent(this.book)}${rest}`);
  }

  async open() {
    if (!this.app.sid) return;
    this.uid = null;
    this.draw();
    if (!this.dialog.open) this.dialog.showModal();
    await this.load();
  }

  /** Read the books (and the open one in full) again, and draw them. */
  async load() {
    try {
      const { data, version } = await this.app.api.request("GET", this.path(""));
      this.app.setVersion(version);
      this.books = data;
      if (!this.books.some((b) => b.book === this.book)) this.book = this.books[0]?.book ?? null;
      this.detail = null;
      if (this.book) {
        const answer = await this.app.api.request("GET", this.bookPath());
        this.detail = answer.data;
        this.app.setVersion(answer.version);
      }
      if (this.detail && !this.detail.entries.some((e) => e.uid === this.uid)) this.uid = null;
    } catch (error) {
      this.app.fail(error, t("lore.loading"));
    }
    this.draw();
  }

  /** A write on the lore with the version shown; the dialog is read again either way. */
  async write(method, path, json, doing) {
    try {
      const { data, version } = await this.app.api.request(method, path, { json, ifMatch: this.app.version, idempotencyKey: newKey() });
      this.app.setVersion(version);
      return data;
    } catch (error) {
      this.app.fail(error, doing);
      if (error.status === 412) await this.load();
      return null;
    }
  }

  draw() {
    const searchBox = this.dialog.querySelector(".lore-search input");
    const query = searchBox ? searchBox.value : "";
    const testBox = this.dialog.querySelector(".lore-test textarea");
    const testText = testBox ? testBox.value : "";
    const results = this.dialog.querySelector(".lore-test-results");
    clear(this.dialog).append(
      el(
        "div.lore-head",
        {},
        el("h3", { id: "lore-title", text: t("lore.title") }),
        el("button", { type: "button", text: t("lore.close"), onclick: async () => (await this.leave()) && this.dialog.close() }),
      ),
      el("div.lore-body", { dataset: { editing: this.uid != null ? "yes" : "no" } }, this.drawBooks(), this.drawEntries(query), this.drawEditor(), this.drawTest(testText, results)),
    );
  }

  drawBooks() {
    const rows = this.books.map((book) =>
      el(
        `div.lore-book${book.book === this.book ? ".open" : ""}`,
        {},
        el("button.lore-book-name", {
          type: "button",
          "aria-pressed": String(book.book === this.book),
          text: `${book.book} (${book.entries.length})`,
          onclick: async () => {
            if (book.book !== this.book && !(await this.leave())) return;
            this.book = book.book;
            this.uid = null;
            this.load();
          },
        }),
        el(
          "label.lore-switch",
          {},
          el("input", { type: "checkbox", checked: book.enabled, onchange: (event) => this.switchBook(book.book, event.target.checked) }),
          t("lore.book_plays"),
        ),
      ),
    );
    const file = el("input", { type: "file", accept: ".json,application/json", hidden: true, onchange: (event) => this.addBook(event.target) });
    return el(
      "section.lore-books",
      { "aria-label": t("lore.books") },
      el("h4", { text: t("lore.books") }),
      rows.length ? rows : el("p.muted", { text: t("lore.no_books") }),
      el("div.lore-row", {}, el("label.file-button", {}, t("lore.add_book"), file)),
    );
  }

  drawEntries(query) {
    if (!this.detail) return el("section.lore-entries");
    const search = el("input", { type: "search", placeholder: t("lore.search"), "aria-label": t("lore.search"), value: query, oninput: () => this.filter() });
    const section = el(
      "section.lore-entries",
      { "aria-label": t("lore.entries") },
      el(
        "div.lore-row",
        {},
        el("h4", { text: this.detail.book }),
        el("button", { type: "button", text: t("lore.export"), onclick: () => this.exportBook() }),
        el("button.danger", { type: "button", text: t("lore.remove_book"), onclick: () => this.removeBook() }),
      ),
      el("div.lore-search", {}, search),
      el(
        "ul.lore-list",
        {},
        this.detail.entries.map((entry) =>
          el(
            "li",
            { dataset: { uid: entry.uid } },
            el(
              `button.lore-entry${entry.uid === this.uid ? ".open" : ""}${entry.enabled ? "" : ".off"}`,
              { type: "button", onclick: () => this.edit(entry.uid) },
              el("strong", { text: entryTitle(entry) }),
              el("span.muted", { text: entry.constant ? t("lore.constant") : entry.keys.join(", ") }),
              entry.enabled ? null : el("span.badge", { text: t("lore.off") }),
            ),
          ),
        ),
      ),
      el("p.muted.lore-nomatch", { text: t("lore.no_match"), hidden: true }),
      el("button", { type: "button", text: t("lore.new_entry"), onclick: () => this.addEntry() }),
    );
    this.filter(section, query);
    return section;
  }

  /** Show the entries whose title or a key holds the search text. */
  filter(section = this.dialog, query = section.querySelector(".lore-search input")?.value ?? "") {
    const wanted = query.trim().toLowerCase();
    let shown = 0;
    for (const item of section.querySelectorAll(".lore-list li")) {
      const entry = this.detail.entries.find((e) => String(e.uid) === item.dataset.uid);
      const texts = [entry.comment, ...entry.keys, ...entry.secondary_keys];
      item.hidden = Boolean(wanted) && !texts.some((text) => text.toLowerCase().includes(wanted));
      if (!item.hidden) shown += 1;
    }
    const none = section.querySelector(".lore-nomatch");
    if (none) none.hidden = shown > 0;
  }

  drawEditor() {
    const entry = this.detail?.entries.find((e) => e.uid === this.uid);
    if (!entry) return el("section.lore-editor", {}, this.detail ? el("p.muted", { text: t("lore.pick_entry") }) : null);
    const field = (label, input) => el("label.lore-field", {}, el("span", { text: label }), input);
    const text = (name, value) => el("input", { type: "text", name, value: value ?? "" });
    const number = (name, value, min) => el("input", { type: "number", name, min, step: 1, value: value ?? "", inputmode: "numeric" });
    const check = (name, value, label) => el("label.lore-check", {}, el("input", { type: "checkbox", name, checked: value }), label);
    const select = (name, values, current, label) =>
      el(
        "select",
        { name },
        values.map((value) => el("option", { value: String(value), text: label(value), selected: value === current })),
      );
    const content = el("textarea", { name: "content", rows: 8 });
    content.value = entry.content;
    const form = el(
      "form.lore-form",
      { onsubmit: (event) => (event.preventDefault(), this.save(form, entry)) },
      el("div.lore-row", {}, el("button.lore-back", { type: "button", text: t("lore.back"), onclick: () => this.edit(null) }), el("h4", { text: entryTitle(entry) })),
      field(t("lore.field_title"), text("comment", entry.comment)),
      field(t("lore.field_keys"), text("keys", entry.keys.join(", "))),
      field(t("lore.field_secondary"), text("secondary_keys", entry.secondary_keys.join(", "))),
      field(t("lore.field_logic"), select("selective_logic", LOGIC, entry.selective_logic, (v) => t(`lore.logic_${v}`))),
      field(t("lore.field_content"), content),
      el("div.lore-checks", {}, check("enabled", entry.enabled, t("lore.enabled")), check("constant", entry.constant, t("lore.constant")), check("vectorized", entry.vectorized, t("lore.vectorized"))),
      el(
        "div.lore-grid",
        {},
        field(t("lore.field_position"), select("position", POSITIONS, entry.position, (v) => t(`lore.position_${v}`))),
        field(t("lore.field_depth"), number("depth", entry.depth, 0)),
        field(t("lore.field_role"), select("role", [0, 1, 2], entry.role ?? 0, (v) => t(`lore.role_${v}`))),
        field(t("lore.field_order"), number("order", entry.order)),
        field(t("lore.field_probability"), el("input", { type: "number", name: "probability", min: 0, max: 100, step: 1, value: entry.probability ?? 100 })),
        ...TIMERS.map((name) => field(t(`lore.field_${name}`), number(name, entry[name], 0))),
      ),
      field(t("lore.field_condition"), el("input", { type: "text", name: "condition", value: entry.condition ?? "", placeholder: "hp < 10 and 'met_marla' in flags" })),
      el(
        "details.lore-more",
        {},
        el("summary", { text: t("lore.more") }),
        el(
          "div.lore-grid",
          {},
          field(t("lore.field_outlet_name"), text("outlet_name", entry.outlet_name)),
          field(t("lore.field_group"), text("group", entry.group)),
          field(t("lore.field_scan_depth"), number("scan_depth", entry.scan_depth, 0)),
        ),
        el(
          "div.lore-checks",
          {},
          check("exclude_recursion", entry.exclude_recursion, t("lore.exclude_recursion")),
          check("prevent_recursion", entry.prevent_recursion, t("lore.prevent_recursion")),
          check("ignore_budget", entry.ignore_budget, t("lore.ignore_budget")),
        ),
      ),
      el(
        "div.lore-row.lore-actions",
        {},
        el("button.primary", { type: "submit", text: t("lore.save") }),
        el("button", { type: "button", text: t("lore.discard"), onclick: () => this.draw() }),
        el("button.danger", { type: "button", text: t("lore.delete_entry"), onclick: () => this.deleteEntry(entry) }),
      ),
    );
    return el("section.lore-editor", { "aria-label": t("lore.editor") }, form);
  }

  /** What the form says, as the API's fields, only those that differ from `entry`. */
  changes(form, entry) {
    const value = (name) => form.elements[name].value;
    const count = (name) => (value(name).trim() === "" ? null : Number(value(name)));
    const wanted = {
      comment: value("comment"),
      keys: splitKeys(value("keys")),
      secondary_keys: splitKeys(value("secondary_keys")),
      selective_logic: Number(value("selective_logic")),
      content: value("content"),
      enabled: form.elements.enabled.checked,
      constant: form.elements.constant.checked,
      vectorized: form.elements.vectorized.checked,
      position: Number(value("position")),
      depth: count("depth") ?? 4,
      role: Number(value("role")),
      order: count("order") ?? 100,
      probability: count("probability") ?? 100,
      sticky: count("sticky"),
      cooldown: count("cooldown"),
      delay: count("delay"),
      condition: value("condition").trim() || null,
      outlet_name: value("outlet_name"),
      group: value("group"),
      scan_depth: count("scan_depth"),
      exclude_recursion: form.elements.exclude_recursion.checked,
      prevent_recursion: form.elements.prevent_recursion.checked,
      ignore_budget: form.elements.ignore_budget.checked,
    };
    if (entry.role == null && wanted.role === 0) delete wanted.role;
    return Object.fromEntries(Object.entries(wanted).filter(([name, v]) => JSON.stringify(v) !== JSON.stringify(entry[name] ?? null)));
  }

  async save(form, entry) {
    const changed = this.changes(form, entry);
    if (!Object.keys(changed).length) return toast(t("lore.nothing_changed"));
    const done = await this.write("PATCH", this.bookPath(`/entries/${entry.uid}`), changed, t("lore.saving"));
    if (done) toast(t("lore.saved"), entryTitle({ ...entry, ...changed }));
    if (done) await this.load();
  }

  /** Whether the entry in the editor has changes not saved. */
  dirty() {
    const form = this.dialog.querySelector(".lore-form");
    const entry = this.detail?.entries.find((e) => e.uid === this.uid);
    return Boolean(form && entry && Object.keys(this.changes(form, entry)).length);
  }

  /** Whether the entry being edited may be left: nothing unsaved, or the player lets it go. */
  async leave() {
    if (!this.dirty()) return true;
    const entry = this.detail.entries.find((e) => e.uid === this.uid);
    const answer = await this.app.ask(t("lore.unsaved", { title: entryTitle(entry) }), [], [{ value: "discard", label: t("lore.discard") }]);
    if (!this.dialog.open) this.dialog.showModal();
    return Boolean(answer);
  }

  async edit(uid) {
    if (uid !== this.uid && !(await this.leave())) return;
    this.uid = uid;
    this.draw();
    if (uid != null && matchMedia("(max-width: 760px)").matches) this.dialog.querySelector(".lore-editor")?.scrollIntoView({ block: "start" });
  }

  async addEntry() {
    if (!(await this.leave())) return;
    const done = await this.write("POST", this.bookPath("/entries"), { comment: t("lore.new_entry_title") }, t("lore.new_entry"));
    if (!done) return;
    this.uid = done.results[0].count;
    await this.load();
  }

  async deleteEntry(entry) {
    const sure = await this.app.ask(t("lore.delete_entry_ask", { title: entryTitle(entry) }), [], [{ value: "delete", label: t("lore.delete_entry") }]);
    if (!this.dialog.open) this.dialog.showModal();
    if (!sure) return;
    if (await this.write("DELETE", this.bookPath(`/entries/${entry.uid}`), undefined, t("lore.delete_entry"))) this.uid = null;
    await this.load();
  }

  async switchBook(name, enabled) {
    await this.write("PATCH", this.path(`/books/${encodeURIComponent(name)}`), { enabled }, t("lore.switching"));
    await this.load();
  }

  async removeBook() {
    const name = this.book;
    const sure = await this.app.ask(t("lore.remove_book_ask", { book: name }), [], [{ value: "remove", label: t("lore.remove_book") }]);
    if (!this.dialog.open) this.dialog.showModal();
    if (!sure) return;
    if (await this.write("DELETE", this.bookPath(), undefined, t("lore.remove_book"))) {
      this.book = null;
      this.uid = null;
    }
    await this.load();
  }

  async addBook(input) {
    const file = input.files?.[0];
    input.value = "";
    if (!file) return;
    try {
      const { data, version } = await this.app.api.request("POST", this.app.path(`/imports/lorebook?name=${encodeURIComponent(file.name)}`), {
        body: await file.arrayBuffer(),
        contentType: "application/json",
        ifMatch: this.app.version,
      });
      this.app.setVersion(version);
      const note = data.results?.[0]?.note;
      toast(t("lore.book_added", { book: data.imported?.book ?? file.name }), note && note !== data.imported?.book ? note : "");
      this.book = data.imported?.book ?? this.book;
    } catch (error) {
      this.app.fail(error, t("lore.add_book"));
    }
    await this.load();
  }

  async exportBook() {
    try {
      const response = await fetch(this.bookPath("/export"), { headers: this.app.api.headers() });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const link = el("a", { href: URL.createObjectURL(await response.blob()), download: `${this.book}.json` });
      link.click();
      setTimeout(() => URL.revokeObjectURL(link.href), 1000);
    } catch (error) {
      showError(error, t("lore.export"));
    }
  }

  drawTest(text, results) {
    const box = el("textarea", { rows: 2, placeholder: t("lore.test_placeholder"), "aria-label": t("lore.test") });
    box.value = text;
    return el(
      "section.lore-test",
      { "aria-label": t("lore.test") },
      el("h4", { text: t("lore.test") }),
      el(
        "form",
        { onsubmit: (event) => (event.preventDefault(), this.test(box.value)) },
        box,
        el("button.primary", { type: "submit", text: t("lore.test_run") }),
      ),
      results || el("div.lore-test-results"),
    );
  }

  async test(text) {
    if (!text.trim()) return;
    const out = this.dialog.querySelector(".lore-test-results");
    clear(out).append(el("p.muted", { text: t("lore.testing") }));
    try {
      const answer = await this.app.api.request("POST", this.path("/test?skipped=true"), { json: { text } });
      this.showTest(out, answer.data);
      out.scrollIntoView({ block: "nearest" });
    } catch (error) {
      clear(out);
      this.app.fail(error, t("lore.test"));
    }
  }

  showTest(out, found) {
    const open = (hit) => (hit.book === this.book ? this.detail?.entries.find((e) => e.uid === hit.uid) : null);
    const title = (hit) => hit.comment || (open(hit) ? entryTitle(open(hit)) : t("lore.untitled", { uid: hit.uid }));
    // what fired of itself first, then what it brought in by recursion (the API's order within each)
    const fired = [...found.fired].sort((a, b) => (a.via === "recursion") - (b.via === "recursion"));
    const budget = found.budget == null ? "" : t("lore.budget", { tokens: found.tokens ?? 0, budget: found.budget });
    const parts = [
      el("p.lore-budget", { text: [t("lore.fired_count", { count: found.fired.length }), budget].filter(Boolean).join(" · ") }),
      el(
        "ul.lore-fired",
        {},
        fired.map((hit) =>
          el(
            "li",
            { dataset: { uid: hit.uid, via: hit.via } },
            el("span.via", { text: t(`lore.via_${hit.via}`) }),
            el("strong", { text: title(hit) }),
            el("span.muted", { text: ` · ${hit.book}` }),
            el("div.reason", { text: hit.similarity != null ? `${hit.reason} (${t("lore.similarity", { value: hit.similarity.toFixed(2) })})` : hit.reason }),
          ),
        ),
      ),
      found.skipped.length
        ? el(
            "details.lore-skipped",
            {},
            el("summary", { text: t("lore.skipped", { count: found.skipped.length }) }),
            el(
              "ul",
              {},
              found.skipped.map((skip) => el("li", { text: `${skip.book}:${skip.uid} — ${skip.reason}` })),
            ),
          )
        : null,
    ];
    clear(out).append(...parts.filter(Boolean));
  }
}
