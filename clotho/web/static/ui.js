// Small DOM helpers: elements from data (text is always set as text, never as markup),
// the page's own words put in place (data-i18n), toasts that go away, readable messages
// for errors, a dialog asking for text, and avatars.

import { t } from "./i18n.js";

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

const TRANSLATED_ATTRIBUTES = { i18nTitle: "title", i18nPlaceholder: "placeholder", i18nAriaLabel: "aria-label" };

/**
 * The words of the page's static markup in the page's language: an element with
 * `data-i18n="area.key"` gets the string as its text; `data-i18n-title`,
 * `data-i18n-placeholder`, `data-i18n-aria-label` set those attributes.
 */
export function translate(root = document) {
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  for (const node of root.querySelectorAll("[data-i18n-title], [data-i18n-placeholder], [data-i18n-aria-label]")) {
    for (const [data, attribute] of Object.entries(TRANSLATED_ATTRIBUTES)) {
      if (node.dataset[data]) node.setAttribute(attribute, t(node.dataset[data]));
    }
  }
}

/** How long a toast stays (ms): an error longer, so that it can be read. */
const TOAST_MS = { info: 4000, error: 15000 };
/** Toasts on screen at most: a new one sends the oldest away. */
const MAX_TOASTS = 3;

const toasts = () => document.getElementById("toasts");

/** Send a toast away: it fades, then leaves. */
export function dismiss(box) {
  if (!box.isConnected || box.classList.contains("leaving")) return;
  box.classList.add("leaving");
  setTimeout(() => box.remove(), 300); // the fade (clotho.css: .toast.leaving)
}

/**
 * A message near the top of the page, away from the composer: an info fades after a few
 * seconds, an error stays longer; each can be dismissed, and at most three are shown
 * (the oldest goes first, an info before an error).
 */
export function toast(title, detail = "", kind = "info") {
  const box = el(
    `div.toast.${kind}`,
    { role: kind === "error" ? "alert" : "status" },
    el("strong", { text: title }),
    detail ? el("div.detail", { text: detail }) : null,
    el("button.dismiss", { type: "button", "aria-label": t("app.dismiss"), title: t("app.dismiss"), text: "×", onclick: () => dismiss(box) }),
  );
  const shown = [...toasts().querySelectorAll(".toast:not(.leaving)")];
  for (let extra = shown.length - MAX_TOASTS + 1; extra > 0; extra -= 1) {
    const oldest = shown.find((b) => !b.classList.contains("error")) || shown[0];
    shown.splice(shown.indexOf(oldest), 1);
    dismiss(oldest);
  }
  toasts().append(box);
  setTimeout(() => dismiss(box), TOAST_MS[kind] ?? TOAST_MS.info);
  return box;
}

/** An error (a Problem from the API or anything thrown) as a readable message. */
export function showError(error, doing = "") {
  if (error?.name === "AbortError") return;
  const title = error?.title || t("app.error_unknown");
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
export function ask(title, fields, buttons = [{ value: "ok", label: t("app.ok") }]) {
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
        el("button", { value: "cancel", type: "button", text: t("app.cancel"), onclick: () => dialog.close("cancel") }),
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
    if (!value.length) return el("span.muted", { text: t("app.none") });
    return el("span.chips", {}, value.map((item) => el("span.chip", { text: typeof item === "object" ? JSON.stringify(item) : String(item) })));
  }
  if (value && typeof value === "object") {
    const keys = Object.keys(value);
    if (!keys.length) return el("span.muted", { text: t("app.none") });
    return el("dl.nested", {}, keys.flatMap((key) => [el("dt", { text: key }), el("dd", {}, valueView(value[key]))]));
  }
  if (typeof value === "boolean") return el(`span.flag.${value ? "on" : "off"}`, { text: value ? t("app.yes") : t("app.no") });
  if (value === null || value === undefined) return el("span.muted", { text: "—" });
  return el("span.value", { text: String(value) });
}

/** Tokens spent, in words ("1,200 in · 80 out"); "" when the usage says nothing. */
export function formatTokens(usage) {
  if (!usage) return "";
  const parts = [];
  if (usage.prompt_tokens != null) parts.push(t("app.tokens_in", { n: usage.prompt_tokens.toLocaleString() }));
  if (usage.completion_tokens != null) parts.push(t("app.tokens_out", { n: usage.completion_tokens.toLocaleString() }));
  return parts.join(" · ");
}

/**
 * A speaker's avatar: the image at `image` (a promise of a URL, or null: none), else the
 * name's first letter in a circle whose colour the name picks (the same name, the same
 * colour on every message).
 */
export function avatar(name, image = null) {
  const who = String(name || "?").trim() || "?";
  const box = el("span.avatar", { "aria-hidden": "true", text: [...who][0].toUpperCase() });
  let hue = 0;
  for (const c of who) hue = (hue * 31 + c.codePointAt(0)) % 360;
  box.style.setProperty("--avatar-hue", String(hue)); // CSSOM: allowed by the page's CSP
  image?.then((url) => {
    if (!url) return;
    box.replaceChildren(el("img", { src: url, alt: "" }));
    box.classList.add("image");
  });
  return box;
}
