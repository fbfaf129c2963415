// Small DOM helpers: elements from data (text is always set as text, never as markup),
// readable messages for errors, and a dialog asking for text.

/** el("div.message.user", {dataset: {...}, onclick}, child, "text", ...) */
export function el(spec, props = {}, ...children) {
  const [tag, ...classes] = spec.split(".");
  const node = document.createElement(tag || "div");
  if (classes.length) node.className = classes.join(" ");
  for (const [key, value] of Object.entries(props || {})) {
    if (value == null || value === false) continue;
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = value;
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
  return node;
}

export function short(id) {
  return id ? id.slice(0, 8) : "";
}

export function preview(text, length = 60) {
  const flat = (text || "").replace(/\s+/g, " ").trim();
  return flat.length > length ? `${flat.slice(0, length - 1)}…` : flat;
}

const toasts = () => document.getElementById("toasts");

/** A message at the bottom of the page; errors stay until dismissed. */
export function toast(title, detail = "", kind = "info") {
  const box = el(
    `div.toast.${kind}`,
    { role: kind === "error" ? "alert" : "status" },
    el("strong", { text: title }),
    detail ? el("div.detail", { text: detail }) : null,
    el("button.dismiss", { type: "button", "aria-label": "Dismiss", text: "×", onclick: () => box.remove() }),
  );
  toasts().append(box);
  if (kind !== "error") setTimeout(() => box.remove(), 4000);
  return box;
}

/** An error (a Problem from the API or anything thrown) as a readable message. */
export function showError(error, doing = "") {
  if (error?.name === "AbortError") return;
  const title = error?.title || "Something went wrong";
  let detail = error?.detail ?? error?.message ?? String(error);
  const doc = error?.doc || {};
  if (Array.isArray(doc.errors) && doc.errors.length) {
    // The Problem's errors: [{field, problem}] (docs/api.md, "Errors").
    const lines = doc.errors.map((e) => [e.field, e.problem].filter(Boolean).join(": "));
    if (!lines.some((line) => detail.includes(line))) detail = [detail, ...lines].filter(Boolean).join("\n");
  }
  const prefix = doing ? `${doing}: ` : "";
  toast(`${prefix}${title}`, detail, "error");
  console.warn(doing, error);
}

/**
 * Ask for text in a dialog. fields: [{name, label, value, multiline, options}];
 * buttons: [{value, label}] (the first is the default). Resolves with
 * {action: <the button's value>, <name>: <text>...}, or null when cancelled.
 */
export function ask(title, fields, buttons = [{ value: "ok", label: "OK" }]) {
  return new Promise((resolve) => {
    const dialog = document.getElementById("ask");
    const inputs = {};
    const rows = fields.map((field) => {
      let input;
      if (field.options) {
        input = el("select", { name: field.name }, field.options.map((o) => el("option", { value: o, text: o, selected: o === field.value })));
      } else if (field.multiline) {
        input = el("textarea", { name: field.name, rows: 8 });
        input.value = field.value || "";
      } else {
        input = el("input", { name: field.name, type: "text" });
        input.value = field.value || "";
      }
      inputs[field.name] = input;
      return el("label", {}, el("span", { text: field.label }), input);
    });
    const form = el(
      "form",
      { method: "dialog" },
      el("h3", { text: title }),
      rows,
      el(
        "menu",
        {},
        el("button", { value: "cancel", type: "button", text: "Cancel", onclick: () => dialog.close("cancel") }),
        buttons.map((b, i) => el(`button${i === 0 ? ".primary" : ""}`, { value: b.value, text: b.label })),
      ),
    );
    clear(dialog).append(form);
    dialog.onclose = () => {
      const action = dialog.returnValue;
      if (!action || action === "cancel") return resolve(null);
      resolve({ action, ...Object.fromEntries(Object.entries(inputs).map(([k, input]) => [k, input.value])) });
    };
    dialog.returnValue = "";
    dialog.showModal();
    Object.values(inputs)[0]?.focus();
  });
}

/** A world-state value rendered readably: lists as chips, mappings as nested rows. */
export function valueView(value) {
  if (Array.isArray(value)) {
    if (!value.length) return el("span.muted", { text: "none" });
    return el("span.chips", {}, value.map((item) => el("span.chip", { text: typeof item === "object" ? JSON.stringify(item) : String(item) })));
  }
  if (value && typeof value === "object") {
    const keys = Object.keys(value);
    if (!keys.length) return el("span.muted", { text: "none" });
    return el("dl.nested", {}, keys.flatMap((key) => [el("dt", { text: key }), el("dd", {}, valueView(value[key]))]));
  }
  if (typeof value === "boolean") return el(`span.flag.${value ? "on" : "off"}`, { text: value ? "yes" : "no" });
  if (value === null || value === undefined) return el("span.muted", { text: "—" });
  return el("span.value", { text: String(value) });
}

export function formatTokens(usage) {
  if (!usage) return "";
  const parts = [];
  if (usage.prompt_tokens != null) parts.push(`${usage.prompt_tokens.toLocaleString()} in`);
  if (usage.completion_tokens != null) parts.push(`${usage.completion_tokens.toLocaleString()} out`);
  return parts.join(" · ");
}
