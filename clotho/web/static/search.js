// Search every branch, from the tree view: the box above the canvas asks the session's
// GET .../search?q= and lists the hits (newest first, the words marked, each saying
// trunk or branch); choosing one selects it in the tree and brings it into view. A
// filter row beside the box narrows it: where (every branch, the path to HEAD, or below
// the selected message), who (a role), and when (the past hour, day or week).

import { t } from "./i18n.js";
import { clear, el, short, toast } from "./ui.js";

/** The snippet with the matched words in <mark>s (overlapping ones: the first wins). */
function marked(hit) {
  const text = el("span.snippet");
  let at = 0;
  for (const [start, end] of hit.matches) {
    if (start < at) continue;
    text.append(hit.snippet.slice(at, start), el("mark", { text: hit.snippet.slice(start, end) }));
    at = end;
  }
  text.append(hit.snippet.slice(at));
  return text;
}

/** A <select> of `choices` ([value, i18n key]) named `name`. */
function choice(name, label, choices) {
  return el(
    "select",
    { name, "aria-label": t(label), title: t(label) },
    choices.map(([value, key]) => el("option", { value, text: t(key) })),
  );
}

/** The filter row: where, who, when. */
function filterRow() {
  return el(
    "span.search-filters",
    { role: "group", "aria-label": t("search.filters") },
    choice("where", "search.where", [
      ["", "search.where_all"],
      ["trunk", "search.where_trunk"],
      ["under", "search.where_under"],
    ]),
    choice("role", "search.who", [
      ["", "search.who_any"],
      ["user", "app.role_user"],
      ["assistant", "app.role_assistant"],
      ["system", "app.role_system"],
    ]),
    choice("since", "search.when", [
      ["", "search.when_any"],
      ["1h", "search.when_hour"],
      ["1d", "search.when_day"],
      ["1w", "search.when_week"],
    ]),
  );
}

export class TreeSearch {
  constructor(view) {
    this.view = view;
    this.form = document.getElementById("tree-search");
    this.input = document.getElementById("tree-search-q");
    this.list = document.getElementById("tree-search-hits");
    /** Searches asked (and closes): an answer is shown only if none came after it. */
    this.asked = 0;
    this.filters = filterRow();
    this.form.append(this.filters);
    this.filters.addEventListener("change", () => {
      if (this.input.value.trim()) this.run();
    });
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.run();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.close();
    });
  }

  close() {
    this.asked += 1; // an answer still on its way is not shown
    this.list.hidden = true;
    clear(this.list);
  }

  async run() {
    const text = this.input.value.trim();
    if (!text) return this.close();
    const app = this.view.app;
    const asked = ++this.asked;
    let answer;
    try {
      answer = await app.api.get(app.path(`/search?${this.params(text)}`));
    } catch (error) {
      if (asked === this.asked) toast(t("search.failed"), error.message, "error");
      return;
    }
    if (asked !== this.asked) return; // a later search (or a close) came first: a stale answer
    clear(this.list);
    if (!answer.hits.length) this.list.append(el("li.muted", { text: t("search.none") }));
    for (const hit of answer.hits) {
      const where = [short(hit.node_id), hit.name || hit.role, t(hit.on_trunk ? "search.trunk" : "search.branch")];
      if (!hit.enabled) where.push(t("search.disabled"));
      const choose = el(
        "button",
        { type: "button", dataset: { nodeId: hit.node_id }, onclick: () => this.choose(hit.node_id) },
        el("span.where", { text: where.join(" · ") }),
        marked(hit),
      );
      this.list.append(el("li", {}, choose));
    }
    this.list.hidden = false;
  }

  /** The query string: the words and the filters chosen ("below": the selected
   * message, else HEAD). */
  params(text) {
    const params = new URLSearchParams({ q: text });
    const form = new FormData(this.form);
    const where = form.get("where");
    if (where === "trunk") params.set("trunk", "true");
    const under = this.view.selected || this.view.data?.head_id;
    if (where === "under" && under) params.set("under", under);
    for (const name of ["role", "since"]) if (form.get(name)) params.set(name, form.get(name));
    return params.toString();
  }

  choose(id) {
    this.close();
    if (!this.view.show(id)) toast(t("search.not_drawn"), short(id));
  }
}
