// The page's words: one catalogue per language (i18n/en.json, i18n/zh.json), nested by
// area ("chat.send"). The language is the player's choice (kept in this browser), else
// the browser's; English fills any gap, and a key with no string at all shows itself.

const LANG_KEY = "clotho.lang";

/** The languages the page speaks: code → its own name. */
export const LANGUAGES = { en: "English", zh: "简体中文" };

function chosen() {
  const kept = localStorage.getItem(LANG_KEY);
  if (kept && kept in LANGUAGES) return kept;
  const wanted = navigator.languages?.length ? navigator.languages : [navigator.language || "en"];
  for (const tag of wanted) {
    const code = String(tag).toLowerCase().split("-")[0];
    if (code in LANGUAGES) return code;
  }
  return "en";
}

async function catalogue(code) {
  const response = await fetch(`/static/i18n/${code}.json`);
  if (!response.ok) throw new Error(`the ${code} catalogue: HTTP ${response.status}`);
  return response.json();
}

/** The language in use. */
export const language = chosen();
const english = await catalogue("en");
const strings = language === "en" ? english : await catalogue(language).catch(() => english);
document.documentElement.lang = language === "zh" ? "zh-Hans" : language;

function lookup(table, key) {
  let value = table;
  for (const part of key.split(".")) {
    if (value == null || typeof value !== "object") return undefined;
    value = value[part];
  }
  return typeof value === "string" ? value : undefined;
}

/** The string for `key` in the page's language, `{name}` replaced by `vars.name`. */
export function t(key, vars = {}) {
  const text = lookup(strings, key) ?? lookup(english, key) ?? key;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in vars ? String(vars[name]) : whole));
}

/** Speak `code` from now on (the page is loaded again in it). */
export function setLanguage(code) {
  if (!(code in LANGUAGES) || code === language) return;
  localStorage.setItem(LANG_KEY, code);
  location.reload();
}
