// What both views show beside the story: the world state, a PromptTrace, a state diff.

import { clear, el, formatTokens, preview, short, valueView } from "./ui.js";

/**
 * The world state after a node: variables (changed ones since the last render marked),
 * the active lore and the running summary.
 */
export function renderState(container, state, previous = null, title = "World state") {
  clear(container);
  container.append(el("h2", { text: title }));
  if (!state) {
    container.append(el("p.muted", { text: "Nothing yet: the story has not started." }));
    return;
  }
  const variables = state.variables || {};
  const keys = Object.keys(variables);
  const rows = el("dl.state", { dataset: { nodeId: state.node_id || "" } });
  for (const key of keys) {
    const before = previous?.variables?.[key];
    const changed = previous && JSON.stringify(before) !== JSON.stringify(variables[key]);
    rows.append(
      el(`dt${changed ? ".changed" : ""}`, { text: key }),
      el(`dd${changed ? ".changed" : ""}`, { dataset: { var: key } }, valueView(variables[key])),
    );
  }
  container.append(keys.length ? rows : el("p.muted", { text: "No variables in this session's schema." }));
  const lore = state.active_lore_ids || [];
  if (lore.length) {
    container.append(el("h3", { text: "Active lore" }), el("ul.lore", {}, lore.map((id) => el("li", { text: id }))));
  }
  if (state.summary) {
    container.append(el("details.summary", {}, el("summary", { text: "Summary so far" }), el("p", { text: state.summary })));
  }
}

/** The difference of the state after two nodes: {path: [after a, after b]}. */
export function renderDiff(container, diff, a, b) {
  const entries = Object.entries(diff || {});
  const table = el(
    "table.diff",
    {},
    el("thead", {}, el("tr", {}, el("th", { text: "variable" }), el("th", { text: `after ${short(a)}` }), el("th", { text: `after ${short(b)}` }))),
    el(
      "tbody",
      {},
      entries.map(([path, [left, right]]) => el("tr", {}, el("td", { text: path }), el("td", {}, valueView(left)), el("td", {}, valueView(right)))),
    ),
  );
  container.append(el("h3", { text: "State diff" }), entries.length ? table : el("p.muted", { text: "The same state after both nodes." }));
}

function section(title, ...children) {
  return el("section.trace-section", {}, el("h3", { text: title }), ...children);
}

function json(value) {
  return el("pre.json", { text: JSON.stringify(value, null, 2) });
}

/** A PromptTrace: what the model was sent, with which settings, and why. */
export function renderTrace(container, trace) {
  clear(container);
  const facts = [
    ["kind", trace.kind],
    ["model", trace.model],
    ["endpoint", trace.api_base],
    ["tokens", formatTokens(trace.usage)],
    ["latency", trace.latency_ms != null ? `${Math.round(trace.latency_ms)} ms (first token ${trace.first_token_ms != null ? Math.round(trace.first_token_ms) : "—"} ms)` : null],
    ["finish", trace.finish_reason + (trace.incomplete ? ` (incomplete: ${trace.stopped_by})` : "")],
    ["verified", trace.verified ? "yes: the messages below hash to what was sent" : `no: ${(trace.problems || []).join("; ")}`],
  ].filter(([, value]) => value);
  container.append(
    el("h2", { text: `PromptTrace of ${short(trace.node_id)}` }),
    el("dl.facts", {}, facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: String(v) })])),
  );
  if (trace.params && Object.keys(trace.params).length) container.append(section("Settings", json(trace.params)));
  const lore = trace.lore || [];
  container.append(
    section(
      `Lore (${lore.length})`,
      lore.length
        ? el("ul.lore-hits", {}, lore.map((hit) => el("li", {}, el("strong", { text: hit.comment || hit.id }), el("span.muted", { text: ` ${hit.id} · ${hit.position}` }), el("div.why", { text: `why: ${hit.reason}` }))))
        : el("p.muted", { text: "No lore entry was chosen." }),
      (trace.lore_skipped || []).length
        ? el("details", {}, el("summary", { text: `Not chosen (${trace.lore_skipped.length})` }), el("ul", {}, trace.lore_skipped.map((s) => el("li", { text: `${s.id}: ${s.reason}` }))))
        : null,
    ),
  );
  if (trace.planner) {
    container.append(section("Planner", el("p", { text: `${trace.planner.strategy}: ${trace.planner.reasoning || ""}` }), (trace.planner.queries || []).length ? el("p", { text: `queries: ${trace.planner.queries.join(" · ")}` }) : null));
  }
  const messages = trace.messages || [];
  container.append(
    section(
      `Messages sent (${messages.length})`,
      el(
        "ol.sent",
        {},
        messages.map((m, i) =>
          el(
            "li",
            {},
            el("details", { open: i >= messages.length - 3 || m.role === "system" }, el("summary", {}, el(`span.role.${m.role}`, { text: m.role }), ` ${preview(m.content, 90)}`), el("pre.content", { text: m.content })),
          ),
        ),
      ),
    ),
  );
  if (trace.trimmed) container.append(section("Trimmed to fit", json(trace.trimmed)));
  if (trace.postprocess) {
    const p = trace.postprocess;
    container.append(section("State extraction", p.skipped ? el("p", { text: p.skipped }) : el("div", {}, el("p", { text: p.error ? `failed: ${p.error}` : "the delta:" }), json(p.delta || []))));
  }
  if (trace.reasoning) container.append(section("Model reasoning", el("pre.content", { text: trace.reasoning })));
  container.append(el("details.raw", {}, el("summary", { text: "The whole trace (JSON)" }), json(trace)));
}
