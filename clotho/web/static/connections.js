// Connections: the model profiles (GET/PUT/DELETE /api/profiles), a Test of each that
// says in words what one tiny call found, and which profile this story plays with
// (PATCH /api/sessions/{id} {"settings": {"profile"}}).
//
// A key is typed in and never shown again: the server keeps it in its secrets file and
// says only whether one is set. Writes send the profiles' ETag (If-Match): if another tab
// or a hand edit changed the files meanwhile, the write is refused and the list is read
// again.

import { newKey } from "./api.js";
import { t } from "./i18n.js";
import { clear, el, showError, toast } from "./ui.js";

/** The sampler settings the form shows (any other a profile has is kept as it is). */
const SAMPLERS = [
  { name: "temperature", step: "0.05", min: "0", max: "5" },
  { name: "top_p", step: "0.01", min: "0", max: "1" },
  { name: "max_tokens", step: "1", min: "1" },
  { name: "frequency_penalty", step: "0.05", min: "-2", max: "2" },
  { name: "presence_penalty", step: "0.05", min: "-2", max: "2" },
];
/** The outcomes of a Test the catalogue words (any other: the server's message). */
const OUTCOMES = ["auth", "no_key", "not_found", "connection", "timeout", "rate_limit", "server", "bad_request", "config"];
/** How long "Delete?" waits for its confirming tap (ms). */
const CONFIRM_MS = 4000;

export class Connections {
  constructor(app) {
    this.app = app;
    this.tag = null; // the profiles' ETag when last read
    this.listed = null; // GET /api/profiles' answer
    this.used = null; // the profile this story names
    this.results = new Map(); // profile name → its last Test's answer
  }

  bind() {
    const open = el("button", { id: "connections-open", type: "button", text: t("connections.open"), title: t("connections.open_title") });
    open.addEventListener("click", () => this.open());
    document.getElementById("menu").append(open);
  }

  /** The dialog, made once: a title row, then the list or the form. */
  dialog() {
    let dialog = document.getElementById("connections-dialog");
    if (dialog) return dialog;
    dialog = el(
      "dialog",
      { id: "connections-dialog", "aria-labelledby": "connections-title" },
      el(
        "div.connections-top",
        {},
        el("h3", { id: "connections-title", text: t("connections.title") }),
        el("button.connections-close", { type: "button", text: t("connections.close"), onclick: () => dialog.close() }),
      ),
      el("div.connections-body"),
    );
    document.body.append(dialog);
    return dialog;
  }

  get body() {
    return this.dialog().querySelector(".connections-body");
  }

  async open() {
    const dialog = this.dialog();
    clear(this.body).append(el("p.muted", { text: t("connections.loading") }));
    if (!dialog.open) dialog.showModal();
    await this.load();
  }

  /** The profiles and this story's choice, read fresh; then the list. */
  async load() {
    const app = this.app;
    try {
      const [listed, session] = await Promise.all([
        app.api.request("GET", "/api/profiles"),
        app.sid ? app.api.get(app.path("")) : Promise.resolve(null),
      ]);
      this.tag = listed.response.headers.get("ETag");
      this.listed = listed.data;
      this.used = session?.metadata?.settings?.profile ?? null;
    } catch (error) {
      showError(error, t("connections.loading_failed"));
      return;
    }
    this.renderList();
  }

  renderList() {
    const listed = this.listed;
    const body = clear(this.body);
    if (listed.model_from_environment) {
      body.append(el("p.connections-notice", { text: t("connections.from_environment", { model: listed.model_from_environment }) }));
    }
    if (listed.problem) body.append(el("p.error-text.connections-problem", { text: t("connections.problem", { problem: listed.problem }) }));
    for (const warning of listed.warnings || []) body.append(el("p.error-text", { text: warning }));
    if (this.app.sid) {
      const gone = this.used && !listed.profiles.some((p) => p.name === this.used);
      const line = this.used ? t(gone ? "connections.story_uses_gone" : "connections.story_uses", { name: this.used }) : t("connections.story_uses_none");
      body.append(el("p.connections-story", { text: line }));
    }
    if (!listed.profiles.length && !listed.problem) body.append(el("p.muted", { text: t("connections.none") }));
    body.append(el("ul.connections-list", {}, listed.profiles.map((profile) => this.item(profile))));
    body.append(
      el(
        "div.connections-footer",
        {},
        el("button.primary", { type: "button", text: t("connections.add"), disabled: Boolean(listed.problem), onclick: () => this.renderForm(null) }),
        el("span.muted.connections-folder", { text: t("connections.folder", { folder: listed.folder }) }),
      ),
    );
  }

  /** One profile in the list: what it reaches, its key's state, its last Test, its actions. */
  item(profile) {
    const inUse = profile.name === this.used;
    const where = [profile.model, profile.api_base, profile.preset].filter(Boolean).join(" · ");
    const result = el("div.connection-result", { "aria-live": "polite" });
    const answer = this.results.get(profile.name);
    if (answer) this.showResult(result, answer);
    const remove = el("button.danger", { type: "button", text: t("connections.delete") });
    remove.addEventListener("click", () => this.confirmDelete(remove, profile));
    return el(
      "li.connection",
      { dataset: { profile: profile.name } },
      el(
        "div.connection-head",
        {},
        el("strong.connection-name", { text: profile.name }),
        profile.default ? el("span.badge.default", { text: t("connections.default") }) : null,
        inUse ? el("span.badge.in-use", { text: t("connections.in_use") }) : null,
        el(`span.badge.key.key-${profile.key.replace(/ /g, "-")}`, { text: t(`connections.key_${profile.key.replace(/ /g, "_")}`) }),
      ),
      el("div.connection-where.muted", { text: where }),
      result,
      el(
        "div.connection-actions",
        {},
        this.app.sid
          ? inUse
            ? el("button", { type: "button", text: t("connections.stop_using"), onclick: () => this.use(null) })
            : el("button.primary", { type: "button", text: t("connections.use"), onclick: () => this.use(profile.name) })
          : null,
        el("button.connection-test", { type: "button", text: t("connections.test"), onclick: (event) => this.test(profile, event.currentTarget, result) }),
        el("button", { type: "button", text: t("connections.edit"), onclick: () => this.renderForm(profile) }),
        remove,
      ),
    );
  }

  /** Delete asks once more on the same button (a tap, then "Delete? tap again"). */
  confirmDelete(button, profile) {
    if (button.dataset.armed) {
      this.remove(profile);
      return;
    }
    button.dataset.armed = "1";
    button.textContent = t("connections.delete_confirm");
    setTimeout(() => {
      if (!button.isConnected) return;
      delete button.dataset.armed;
      button.textContent = t("connections.delete");
    }, CONFIRM_MS);
  }

  /** The form that adds a profile (null) or edits one. */
  renderForm(profile) {
    const editing = profile != null;
    const given = profile || { params: {} };
    const number = (name, value, attributes = {}) => {
      const input = el("input", { name, type: "number", inputmode: "decimal", ...attributes });
      if (value != null) input.value = String(value);
      return input;
    };
    const row = (label, input, hint = "") => el("label", {}, el("span", { text: label }), input, hint ? el("small.muted", { text: hint }) : null);
    const name = el("input", { name: "name", type: "text", required: true, maxlength: "100", autocomplete: "off", readOnly: editing });
    name.value = given.name || "";
    const model = el("input", { name: "model", type: "text", required: true, maxlength: "200", pattern: "\\S+", autocomplete: "off", placeholder: "openai/gpt-4o-mini" });
    model.value = given.model || "";
    const base = el("input", { name: "api_base", type: "url", maxlength: "2000", autocomplete: "off", placeholder: "http://127.0.0.1:8080/v1" });
    base.value = given.api_base || "";
    const preset = el("input", { name: "preset", type: "text", maxlength: "100", autocomplete: "off" });
    preset.value = given.preset || "";
    const keyState = given.key || "not set";
    const key = el("input", {
      name: "key",
      type: "password",
      autocomplete: "new-password",
      maxlength: "4096",
      placeholder: keyState === "set" ? t("connections.key_keep") : t("connections.key_placeholder"),
    });
    const forget = keyState === "set" ? el("input", { name: "forget_key", type: "checkbox" }) : null;
    const isDefault = el("input", { name: "default", type: "checkbox", checked: Boolean(given.default) });
    const samplers = SAMPLERS.map((s) => row(t(`connections.param_${s.name}`), number(s.name, given.params?.[s.name], { step: s.step, min: s.min, max: s.max })));
    const problem = el("p.error-text.connections-problem", { "aria-live": "polite" });
    const form = el(
      "form.connections-form",
      {},
      el("h4", { text: editing ? t("connections.editing", { name: given.name }) : t("connections.adding") }),
      row(t("connections.name"), name),
      row(t("connections.model"), model, t("connections.model_hint")),
      row(t("connections.api_base"), base, t("connections.api_base_hint")),
      el(
        "fieldset.connections-key",
        {},
        el("legend", { text: t("connections.key") }),
        el("p.muted", { text: t(`connections.key_${keyState.replace(/ /g, "_")}_long`) }),
        row(t("connections.key_new"), key),
        forget ? el("label.inline", {}, forget, el("span", { text: t("connections.forget_key") })) : null,
      ),
      el(
        "fieldset.connections-samplers",
        {},
        el("legend", { text: t("connections.samplers") }),
        el("div.connections-grid", {}, samplers),
      ),
      el(
        "fieldset.connections-limits",
        {},
        el("legend", { text: t("connections.limits") }),
        el(
          "div.connections-grid",
          {},
          row(t("connections.context_window"), number("context_window", given.context_window, { step: "1", min: "1" }), t("connections.context_window_hint")),
          row(t("connections.reply_tokens"), number("reply_tokens", given.reply_tokens ?? 1024, { step: "1", min: "1" })),
          row(t("connections.timeout"), number("timeout", given.timeout ?? 120, { step: "1", min: "1", max: "3600" })),
          row(t("connections.retries"), number("retries", given.retries ?? 2, { step: "1", min: "0", max: "10" })),
        ),
      ),
      row(t("connections.preset"), preset, t("connections.preset_hint")),
      el("label.inline", {}, isDefault, el("span", { text: t("connections.make_default") })),
      problem,
      el(
        "menu",
        {},
        el("button", { type: "button", text: t("connections.cancel"), onclick: () => this.renderList() }),
        el("button.primary", { type: "submit", text: t("connections.save") }),
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (form.reportValidity()) this.save(form, given, problem);
    });
    clear(this.body).append(form);
    (editing ? model : name).focus();
  }

  /** The profile the form describes, as PUT takes it (the key only if one was typed). */
  bodyOf(form, given) {
    const fields = form.elements;
    const numberOf = (input) => (input.value.trim() === "" ? null : Number(input.value));
    // a setting the form does not show (min_p...) stays as it was
    const params = Object.fromEntries(Object.entries(given.params || {}).filter(([name]) => !SAMPLERS.some((s) => s.name === name)));
    for (const sampler of SAMPLERS) {
      const value = numberOf(fields[sampler.name]);
      if (value != null) params[sampler.name] = value;
    }
    const body = {
      model: fields.model.value.trim(),
      api_base: fields.api_base.value.trim() || null,
      preset: fields.preset.value.trim() || null,
      context_window: numberOf(fields.context_window),
      reply_tokens: numberOf(fields.reply_tokens) ?? 1024,
      timeout: numberOf(fields.timeout) ?? 120,
      retries: numberOf(fields.retries) ?? 2,
      params,
      default: fields.default.checked,
    };
    if (fields.key.value.trim()) body.key = fields.key.value.trim();
    else if (fields.forget_key?.checked) body.forget_key = true;
    return body;
  }

  async save(form, given, problem) {
    const name = form.elements.name.value.trim();
    problem.textContent = "";
    try {
      await this.app.api.request("PUT", `/api/profiles/${encodeURIComponent(name)}`, {
        json: this.bodyOf(form, given),
        headers: this.tag ? { "If-Match": this.tag } : {},
      });
    } catch (error) {
      if (error.status === 412) {
        toast(t("connections.changed"), t("connections.changed_detail"));
        await this.load();
        return;
      }
      const fields = (error.doc?.errors || []).map((e) => `${e.field.replace(/^body\./, "")}: ${e.problem}`);
      problem.textContent = fields.length ? fields.join("\n") : error.detail || error.message;
      return; // the form stays, with what the player wrote
    }
    this.results.delete(name);
    toast(t("connections.saved", { name }));
    await this.load();
  }

  async remove(profile) {
    try {
      await this.app.api.request("DELETE", `/api/profiles/${encodeURIComponent(profile.name)}`, { headers: this.tag ? { "If-Match": this.tag } : {} });
      this.results.delete(profile.name);
      toast(t("connections.deleted", { name: profile.name }));
    } catch (error) {
      if (error.status === 412) toast(t("connections.changed"), t("connections.changed_detail"));
      else showError(error, t("connections.deleting"));
    }
    await this.load();
  }

  /** One tiny call; its answer in words under the profile. */
  async test(profile, button, result) {
    button.disabled = true;
    clear(result).append(el("span.muted", { text: t("connections.testing") }));
    try {
      const answer = (await this.app.api.request("POST", `/api/profiles/${encodeURIComponent(profile.name)}/test`)).data;
      this.results.set(profile.name, answer);
      this.showResult(result, answer);
    } catch (error) {
      clear(result);
      showError(error, t("connections.testing_failed"));
    } finally {
      button.disabled = false;
    }
  }

  showResult(box, answer) {
    clear(box).classList.toggle("failed", !answer.ok);
    box.classList.toggle("ok", answer.ok);
    if (answer.ok) {
      box.append(el("span", { text: t("connections.test_ok", { model: answer.model, ms: answer.latency_ms }) }));
      return;
    }
    const words = OUTCOMES.includes(answer.outcome) ? t(`connections.outcome_${answer.outcome}`) : t("connections.outcome_other");
    box.append(el("strong", { text: words }), el("div.connection-detail", { text: answer.message }));
  }

  /** This story plays with `name` from its next turn (null: no profile of its own). */
  async use(name) {
    const app = this.app;
    try {
      const { version } = await app.api.request("PATCH", app.path(""), {
        json: { settings: { profile: name } },
        ifMatch: app.version,
        idempotencyKey: newKey(),
      });
      app.setVersion(version);
      app.notes?.changed(); // the context meter: the window may be another model's now
      toast(name ? t("connections.now_used", { name }) : t("connections.not_used"));
    } catch (error) {
      app.fail(error, t("connections.choosing"));
      if (error.status === 412) await app.refresh();
    }
    await this.load();
  }
}
