// Compare two moments: from a trace, "Compare with…" another generated message of the
// story (a sibling by default, the message selected in the tree, or any other), then
// what differed between the two (GET .../trace-diff?a=&b=): the prompts message by
// message with the words removed and added marked, the lore that fired and why, the
// settings, the state each started from, and the tokens.

import { diffView } from "./diffview.js";
import { t } from "./i18n.js";
import { clear, el, preview, short } from "./ui.js";

/** What the trace's "Compare with…" button sends (detail: {nodeId, container}). */
export const COMPARE_EVENT = "clotho:compare-trace";

/** A value of a setting or of the state, on one line. */
function shown(value) {
  if (value === null || value === undefined) return t("compare.unset");
  return typeof value === "string" ? value : JSON.stringify(value);
}

function signed(value) {
  if (value === null || value === undefined) return "—";
  return value > 0 ? `+${value}` : String(value);
}

function table(headings, rows) {
  return el(
    "table.compare-table",
    {},
    el("thead", {}, el("tr", {}, headings.map((text) => el("th", { text })))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((text, i) => el(i ? "td" : "th", { text }))))),
  );
}

function section(title, ...children) {
  return el("section.trace-section.compare-section", {}, el("h3", { text: title }), ...children);
}

/** Settings listed, never in the summary: each turn draws its own (the lore's seed). */
const QUIET = new Set(["lore_seed"]);

/** A count in words: `key_one` for one, else `key` with {count}. */
function counted(key, count) {
  return count === 1 ? t(`${key}_one`) : t(key, { count });
}

/** The comparison in one line, in the page's language, from its counts and settings. */
export function summaryLine(diff) {
  const counts = diff.counts;
  const parts = [];
  for (const kind of ["changed", "added", "removed"]) {
    const count = counts[`messages_${kind}`];
    if (count) parts.push(counted(`compare.sum_${kind}`, count));
  }
  if (!parts.length) parts.push(t("compare.sum_same_messages"));
  let lore = t("compare.sum_lore", { added: counts.lore_added, removed: counts.lore_removed });
  if (counts.lore_reasons_changed) lore += ` ${t("compare.sum_lore_reasons", { count: counts.lore_reasons_changed })}`;
  parts.push(lore);
  for (const change of diff.settings) {
    if (QUIET.has(change.name)) continue;
    const name = change.name.replace(/^params\./, "");
    const map = (value) => value !== null && typeof value === "object";
    parts.push(map(change.a) || map(change.b) ? t("compare.sum_setting_changed", { name }) : t("compare.sum_setting", { name, a: shown(change.a), b: shown(change.b) }));
  }
  parts.push(counts.state ? counted("compare.sum_state", counts.state) : t("compare.sum_same_state"));
  const usage = (side) => `${side.prompt ?? "?"}+${side.completion ?? "?"}`;
  parts.push(t("compare.sum_tokens", { a: usage(diff.tokens.a), b: usage(diff.tokens.b) }));
  return parts.join(t("compare.sum_join"));
}

function messageItem(pair) {
  const role = el(`span.role.${pair.role}`, { text: pair.role });
  if (pair.status === "changed") {
    const where = t("compare.changed_at", { a: pair.a_index + 1, b: pair.b_index + 1 });
    return el(
      "li.changed",
      {},
      el("div.compare-head", {}, el("span.mark", { text: "~" }), role, ` ${where}`),
      pair.whole ? el("p.muted.compare-whole", { text: t("compare.whole") }) : null,
      diffView("div.compare-words", pair.words),
    );
  }
  if (pair.status === "added") {
    return el("li.added", {}, el("div.compare-head", {}, el("span.mark", { text: "+" }), role, ` ${t("compare.added_at", { b: pair.b_index + 1 })}`), el("ins.block", { text: pair.b }));
  }
  return el("li.removed", {}, el("div.compare-head", {}, el("span.mark", { text: "−" }), role, ` ${t("compare.removed_at", { a: pair.a_index + 1 })}`), el("del.block", { text: pair.a }));
}

/** The messages the same, folded: how many, and each one's first words when unfolded. */
function sameItem(pairs) {
  return el(
    "li.same",
    {},
    el(
      "details",
      {},
      el("summary", { text: pairs.length === 1 ? t("compare.same_one") : t("compare.same", { count: pairs.length }) }),
      el("ol", {}, pairs.map((pair) => el("li", {}, el(`span.role.${pair.role}`, { text: pair.role }), ` ${preview(pair.b, 90)}`))),
    ),
  );
}

function messagesList(pairs) {
  const items = [];
  let same = [];
  for (const pair of pairs) {
    if (pair.status === "equal") {
      same.push(pair);
      continue;
    }
    if (same.length) items.push(sameItem(same));
    same = [];
    items.push(messageItem(pair));
  }
  if (same.length) items.push(sameItem(same));
  return el("ol.compare-messages", {}, items);
}

function loreList(lore) {
  if (!lore.length) return el("p.muted", { text: t("compare.no_lore") });
  return el(
    "ul.compare-lore",
    {},
    lore.map((entry) => {
      if (entry.status === "only_b") return el("li.added", {}, el("span.mark", { text: "+" }), el("strong", { text: entry.id }), ` ${t("compare.lore_only_b", { reason: entry.reason_b })}`);
      if (entry.status === "only_a") return el("li.removed", {}, el("span.mark", { text: "−" }), el("strong", { text: entry.id }), ` ${t("compare.lore_only_a", { reason: entry.reason_a })}`);
      const changed = entry.reason_changed || entry.content_changed;
      const why = entry.reason_changed ? t("compare.lore_reason_changed", { a: entry.reason_a, b: entry.reason_b }) : t("compare.lore_both", { reason: entry.reason_a });
      return el(changed ? "li.changed" : "li.same", {}, el("span.mark", { text: changed ? "~" : "=" }), el("strong", { text: entry.id }), ` ${why}`, entry.content_changed ? ` ${t("compare.lore_text_changed")}` : "");
    }),
  );
}

/** The comparison (a TraceDiffOut) drawn into `container`. */
export function renderTraceDiff(container, diff) {
  clear(container);
  const tokens = diff.tokens;
  container.append(
    el("p.compare-summary", { text: summaryLine(diff) }),
    ...[diff.a, diff.b]
      .filter((side) => side.problems.length)
      .map((side) => el("p.error", { text: t("compare.not_verified", { id: short(side.node_id), problems: side.problems.join("; ") }) })),
    section(t("compare.prompt"), messagesList(diff.messages)),
    section(t("compare.lore"), loreList(diff.lore)),
    section(
      t("compare.settings"),
      diff.settings.length ? table([t("compare.setting"), "A", "B"], diff.settings.map((c) => [c.name, shown(c.a), shown(c.b)])) : el("p.muted", { text: t("compare.same_settings") }),
    ),
    section(
      t("compare.state"),
      diff.state.length ? table([t("compare.path"), "A", "B"], diff.state.map((c) => [c.path, shown(c.a), shown(c.b)])) : el("p.muted", { text: t("compare.same_state") }),
    ),
    section(
      t("compare.tokens"),
      table(
        ["", "A", "B", "B − A"],
        ["prompt", "completion", "total"].map((kind) => [t(`compare.tokens_${kind}`), shown(tokens.a[kind]), shown(tokens.b[kind]), signed(tokens.difference[kind])]),
      ),
    ),
  );
}

export class TraceCompare {
  constructor(app) {
    this.app = app;
    document.addEventListener(COMPARE_EVENT, (event) => this.open(event.detail.nodeId, event.detail.container));
  }

  /** The generated messages to compare `nodeId` with: its siblings, the message selected
   * in the tree, every other one (the tree as the tree view holds it if it is of the
   * version the page is at, else the whole tree read again, every page). */
  async candidates(nodeId) {
    const app = this.app;
    const here = await app.api.get(app.path(`/nodes/${encodeURIComponent(nodeId)}`));
    const view = app.views.tree;
    const held = view.data?.session_id === app.sid && view.data.version === app.version;
    const tree = held ? view.data : (await view.readTree()).data;
    const generated = new Map(tree.nodes.filter((n) => n.metadata?.generated && n.id !== nodeId).map((n) => [n.id, n]));
    const siblings = here.siblings.filter((id) => generated.has(id));
    // the one after it first (a reroll's), then the one before
    siblings.sort((x, y) => (here.siblings.indexOf(x) > here.index ? 0 : 1) - (here.siblings.indexOf(y) > here.index ? 0 : 1));
    const selected = view.selected;
    const chosen = generated.has(selected) && !siblings.includes(selected) ? selected : null;
    const others = [...generated.keys()].filter((id) => !siblings.includes(id) && id !== chosen);
    return { siblings, chosen, others, nodes: generated };
  }

  async open(nodeId, container) {
    clear(container);
    const result = el("div.compare-result");
    const picker = el("select", { id: "compare-with", "aria-label": t("compare.with") });
    container.append(
      el("h2", { text: t("compare.title", { id: short(nodeId) }) }),
      el(
        "div.compare-controls",
        {},
        el("label", { for: "compare-with", text: t("compare.with") }),
        picker,
        el("button.back-to-trace", { type: "button", text: t("compare.back"), onclick: () => this.app.openTrace(nodeId) }),
      ),
      result,
    );
    let found;
    try {
      found = await this.candidates(nodeId);
    } catch (error) {
      this.app.fail(error, t("compare.loading"));
      return;
    }
    const label = (id) => {
      const node = found.nodes.get(id);
      return `${short(id)} · ${node.metadata.generated} · ${preview(node.content, 50)}`;
    };
    const group = (title, ids) => (ids.length ? el("optgroup", { label: title }, ids.map((id) => el("option", { value: id, text: label(id) }))) : null);
    picker.append(
      ...[
        group(t("compare.siblings"), found.siblings),
        group(t("compare.selected_in_tree"), found.chosen ? [found.chosen] : []),
        group(t("compare.elsewhere"), found.others),
      ].filter(Boolean),
    );
    if (!picker.options.length) {
      picker.disabled = true;
      result.append(el("p.muted", { text: t("compare.nothing") }));
      return;
    }
    // each choice's answer drawn only if no later choice was made meanwhile: answers
    // may come back in another order than asked
    let asked = 0;
    const compare = async () => {
      const mine = ++asked;
      result.setAttribute("aria-busy", "true");
      try {
        const query = new URLSearchParams({ a: nodeId, b: picker.value });
        const diff = await this.app.api.get(this.app.path(`/trace-diff?${query}`));
        if (mine === asked) renderTraceDiff(result, diff);
      } catch (error) {
        if (mine !== asked) return;
        clear(result); // not the comparison with the message chosen before
        this.app.fail(error, t("compare.comparing"));
      } finally {
        if (mine === asked) result.removeAttribute("aria-busy");
      }
    };
    picker.addEventListener("change", compare);
    await compare();
  }
}
