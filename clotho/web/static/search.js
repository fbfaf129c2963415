// Search every branch, from the tree view: the box above the canvas asks the session's
// GET .../search?q= and lists the hits (newest first, the words marked, each saying
// trunk or branch); choosing one selects it in the tree and brings it into view.

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

export class TreeSearch {
  constructor(view) {
    this.view = view;
    this.form = document.getElementById("tree-search");
    this.input = document.getElementById("tree-search-q");
    this.list = document.getElementById("tree-search-hits");
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.run();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.close();
    });
  }

  close() {
    this.list.hidden = true;
    clear(this.list);
  }

  async run() {
    const text = this.input.value.trim();
    if (!text) return this.close();
    const app = this.view.app;
    let answer;
    try {
      answer = await app.api.get(app.path(`/search?q=${encodeURIComponent(text)}`));
    } catch (error) {
      toast(t("search.failed"), error.message, "error");
      return;
    }
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

  choose(id) {
    this.close();
    if (!this.view.show(id)) toast(t("search.not_drawn"), short(id));
  }
}
