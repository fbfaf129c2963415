// What both views show beside the story: the world state, a PromptTrace, a state diff.

import { t } from "./i18n.js";
import { COMPARE_EVENT } from "./tracediff.js";
import { clear, el, formatTokens, preview, short, valueView } from "./ui.js";

/** The parts of a state document that are not the engine's built-ins. */
const NOT_BUILT_IN = new Set(["node_id", "variables", "declared"]);

/** The engine's built-ins a state document holds (active lore, lore timers, the summary,
 * the author's note...): whatever it holds besides the variables. */
function builtIns(state) {
  return Object.keys(state || {}).filter((key) => !NOT_BUILT_IN.has(key));
}

/**
 * The variables in the order a player reads them: those the schema declares first, in
 * its order, then any other (a session without a schema holds variables all the same).
 */
export function variableOrder(state) {
  const variables = state.variables || {};
  const declared = Object.keys(state.declared || {}).filter((key) => key in variables);
  const rest = Object.keys(variables).filter((key) => !(key in (state.declared || {})));
  return [...declared, ...rest];
}

/** A number between two bounds: the value, "/ max" and a bar; else the plain value. */
function boundedView(value, spec) {
  const min = spec?.min;
  const max = spec?.max;
  if (typeof value !== "number" || typeof min !== "number" || typeof max !== "number" || max <= min) return valueView(value);
  const shown = el("span.value", { text: String(value), dataset: { of: `/ ${max}` } });
  const bar = el("meter.bar", { min, max, value, low: min + (max - min) / 4, high: min + (max - min) / 2, optimum: max, title: t("state.bounds", { min, max }) });
  return el("span.bounded", {}, shown, bar);
}

/**
 * The world state after a node: the variables first (a number with bounds as a bar,
 * changed ones since ``previous`` marked), the running summary, and the engine's
 * built-ins (active lore, lore timers, ...) behind a "details" toggle.
 */
export function renderState(container, state, previous = null, title = t("state.title")) {
  clear(container);
  container.append(el("h2", { text: title }));
  if (!state) {
    container.append(el("p.muted", { text: t("state.not_started") }));
    return;
  }
  const variables = state.variables || {};
  const keys = variableOrder(state);
  const rows = el("dl.state", { dataset: { nodeId: state.node_id || "" } });
  for (const key of keys) {
    const before = previous?.variables?.[key];
    const changed = previous && JSON.stringify(before) !== JSON.stringify(variables[key]);
    const spec = state.declared?.[key];
    rows.append(
      el(`dt${changed ? ".changed" : ""}`, { text: key, title: spec?.description || null }),
      el(`dd${changed ? ".changed" : ""}`, { dataset: { var: key } }, boundedView(variables[key], spec)),
    );
  }
  container.append(keys.length ? rows : el("p.muted", { text: t("state.no_variables") }));
  if (state.summary) {
    container.append(el("details.summary", {}, el("summary", { text: t("state.summary") }), el("p", { text: state.summary })));
  }
  container.append(internals(state));
}

/** The engine's built-ins of a state, folded away (a player rarely needs them). */
function internals(state) {
  const rows = el("dl.state.internal", { dataset: { builtIns: "" } });
  for (const key of builtIns(state)) {
    if (key === "summary") continue; // shown above, as the story so far
    rows.append(el("dt", { text: key }), el("dd", { dataset: { builtIn: key } }, valueView(state[key])));
  }
  return el("details.internals", {}, el("summary", { text: t("state.details") }), rows);
}

/**
 * The difference of the state after two nodes, as a table of two columns (after ``a``,
 * after ``b``): the variables first, the engine's built-ins behind a "details" toggle.
 * ``diff``: {path: [after a, after b]}; ``variables``: the names of the variables of
 * either state in the order they are shown (a path whose name is none of them is a
 * built-in); ``labels``: the columns' headings.
 */
export function renderDiff(container, diff, variables, labels) {
  clear(container);
  const entries = Object.entries(diff || {});
  const rank = new Map(variables.map((name, i) => [name, i]));
  const isVariable = ([path]) => rank.has(path.split(".")[0]);
  const shown = entries.filter(isVariable).sort(([a], [b]) => rank.get(a.split(".")[0]) - rank.get(b.split(".")[0]));
  const hidden = entries.filter((entry) => !isVariable(entry));
  const table = (rows) =>
    el(
      "table.diff",
      {},
      el("thead", {}, el("tr", {}, el("th", { text: t("state.diff_variable") }), el("th", { text: labels[0] }), el("th", { text: labels[1] }))),
      el(
        "tbody",
        {},
        rows.map(([path, [left, right]]) => el("tr", { dataset: { path } }, el("th", { scope: "row", text: path }), el("td", {}, valueView(left)), el("td", {}, valueView(right)))),
      ),
    );
  if (!entries.length) {
    container.append(el("p.muted", { text: t("state.diff_same") }));
    return;
  }
  container.append(shown.length ? table(shown) : el("p.muted", { text: t("state.diff_same_variables") }));
  if (hidden.length) {
    container.append(el("details.internals", {}, el("summary", { text: t("state.diff_details", { count: hidden.length }) }), table(hidden)));
  }
}

function section(title, ...children) {
  return el("section.trace-section", {}, el("h3", { text: title }), ...children);
}

function json(value) {
  return el("pre.json", { text: JSON.stringify(value, null, 2) });
}

/**
 * Who spoke, who was present, what the speaker did not see (it was away: runs of the
 * story's messages, {first, last, count}) and the lore of absent members left out.
 */
function sceneSection(scene) {
  const runs = scene.left_out || [];
  const count = runs.reduce((sum, run) => sum + (run.count || 0), 0);
  const present = scene.present || [];
  const lore = scene.lore_left_out || [];
  const run = (r) => (r.first === r.last ? short(r.first) : `${short(r.first)} … ${short(r.last)}`);
  return el(
    "section.trace-section.trace-scene",
    {},
    el("h3", { text: t("state.trace.scene") }),
    el(
      "dl.facts",
      {},
      el("dt", { text: t("state.trace.speaker") }),
      el("dd", { text: scene.speaker || "—" }),
      el("dt", { text: t("state.trace.present") }),
      el("dd", { text: present.length ? present.join(", ") : t("app.none") }),
      el("dt", { text: t("state.trace.left_out") }),
      el("dd.left-out", { dataset: { count: String(count) } }, count ? t("state.trace.left_out_count", { count, speaker: scene.speaker || "" }) : t("state.trace.left_out_none")),
      lore.length ? [el("dt", { text: t("state.trace.lore_left_out") }), el("dd", { text: lore.map((hit) => `${hit.id} (${hit.reason})`).join("; ") })] : null,
    ),
    runs.length
      ? el(
          "details",
          {},
          el("summary", { text: t("state.trace.left_out_ids") }),
          el("ul.left-out-runs", {}, runs.map((r) => el("li", { title: `${r.first} … ${r.last}` }, el("span.id", { text: run(r) }), ` (${r.count})`))),
        )
      : null,
  );
}

/** A PromptTrace: what the model was sent, with which settings, and why. */
export function renderTrace(container, trace) {
  clear(container);
  const ms = (value) => (value != null ? Math.round(value) : "—");
  const facts = [
    [t("state.trace.kind"), trace.kind],
    [t("state.trace.model"), trace.model],
    [t("state.trace.endpoint"), trace.api_base],
    [t("state.trace.tokens"), formatTokens(trace.usage)],
    [t("state.trace.latency"), trace.latency_ms != null ? t("state.trace.latency_value", { ms: ms(trace.latency_ms), first: ms(trace.first_token_ms) }) : null],
    [t("state.trace.finish"), trace.finish_reason + (trace.incomplete ? ` ${t("state.trace.incomplete", { by: trace.stopped_by })}` : "")],
    [t("state.trace.verified"), trace.verified ? t("state.trace.verified_yes") : t("state.trace.verified_no", { problems: (trace.problems || []).join("; ") })],
    [t("state.trace.system_prompt"), trace.system_prompt ? t("state.trace.system_prompt_story") : null],
    [t("state.trace.author_note"), trace.author_note ? trace.author_note.reason : null],
  ].filter(([, value]) => value);
  container.append(
    el("h2", { text: t("state.trace.title", { id: short(trace.node_id) }) }),
    // another generated message beside this one: tracediff.js answers the event
    el("button.compare-trace", { type: "button", text: t("compare.open"), onclick: () => container.dispatchEvent(new CustomEvent(COMPARE_EVENT, { bubbles: true, detail: { nodeId: trace.node_id, container } })) }),
    el("dl.facts", {}, facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: String(v) })])),
  );
  if (trace.scene) container.append(sceneSection(trace.scene));
  if (trace.params && Object.keys(trace.params).length) container.append(section(t("state.trace.settings"), json(trace.params)));
  const lore = trace.lore || [];
  container.append(
    section(
      t("state.trace.lore", { count: lore.length }),
      lore.length
        ? el("ul.lore-hits", {}, lore.map((hit) => el("li", {}, el("strong", { text: hit.comment || hit.id }), el("span.muted", { text: ` ${hit.id} · ${hit.position}` }), hit.via ? el("span.via", { text: ` ${t(`lore.via_${hit.via}`)}${hit.similarity != null ? ` ${hit.similarity.toFixed(2)}` : ""}` }) : null, el("div.why", { text: t("state.trace.why", { reason: hit.reason }) }))))
        : el("p.muted", { text: t("state.trace.no_lore") }),
      (trace.lore_skipped || []).length
        ? el("details", {}, el("summary", { text: t("state.trace.not_chosen", { count: trace.lore_skipped.length }) }), el("ul", {}, trace.lore_skipped.map((s) => el("li", { text: `${s.id}: ${s.reason}` }))))
        : null,
    ),
  );
  if (trace.planner) {
    container.append(
      section(
        t("state.trace.planner"),
        el("p", { text: `${trace.planner.strategy}: ${trace.planner.reasoning || ""}` }),
        (trace.planner.queries || []).length ? el("p", { text: t("state.trace.queries", { queries: trace.planner.queries.join(" · ") }) }) : null,
      ),
    );
  }
  const messages = trace.messages || [];
  container.append(
    section(
      t("state.trace.messages", { count: messages.length }),
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
  if (trace.trimmed) container.append(section(t("state.trace.trimmed"), json(trace.trimmed)));
  if (trace.postprocess) {
    const p = trace.postprocess;
    container.append(
      section(
        t("state.trace.extraction"),
        p.skipped ? el("p", { text: p.skipped }) : el("div", {}, el("p", { text: p.error ? t("state.trace.extraction_failed", { error: p.error }) : t("state.trace.the_delta") }), json(p.delta || [])),
      ),
    );
  }
  if (trace.reasoning) container.append(section(t("state.trace.reasoning"), el("pre.content", { text: trace.reasoning })));
  container.append(el("details.raw", {}, el("summary", { text: t("state.trace.raw") }), json(trace)));
}
