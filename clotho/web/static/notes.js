// The story's settings and the context meter.
//
// "Story settings" (a button in the header's menu) opens a dialog with the player's
// persona (their name, {{user}}, and a description), the author's note with
// SillyTavern's controls (text, depth, position, every N player messages, role) and
// the session's own system prompt. The persona and the system prompt are the session's
// settings (PATCH /api/sessions/{id}); the note is world state, set on the message at
// HEAD by the editor's `note` operation (one undo step), so it rolls back with the story.
//
// The meter under the composer says how full the next turn's prompt would be
// ("3,120 / 8,192 tokens · 4 messages trimmed"): POST .../prompt/preview with the draft,
// when the story changes and, debounced, while the player types.

import { newKey } from "./api.js";
import { language, t } from "./i18n.js";
import { el } from "./ui.js";

/** The note's positions and roles, as the dialog names them. */
const positions = () => ({
  in_chat: t("notes.position_in_chat"),
  after_story: t("notes.position_after_story"),
  before_story: t("notes.position_before_story"),
});
const roles = () => ({ system: t("app.role_system"), user: t("app.role_user"), assistant: t("app.role_assistant") });
/** SillyTavern's defaults for a new note. */
const DEFAULT_NOTE = { text: "", depth: 4, position: "in_chat", interval: 1, role: "system" };
/** How long typing pauses before the meter measures the draft (ms). */
const TYPING_MS = 400;

const number = new Intl.NumberFormat(language === "zh" ? "zh-CN" : "en");

export class StoryNotes {
  constructor(app) {
    this.app = app;
    this.timer = null;
    this.asked = 0; // the last measure asked: an older answer is dropped
    this.measured = null; // what the meter shows was measured for: "sid version draft"
  }

  bind() {
    const open = el("button", { id: "story-settings", type: "button", text: t("notes.open"), title: t("notes.open_title") });
    open.addEventListener("click", () => this.open());
    document.getElementById("menu").append(open);
    this.meter = el("div.muted", { id: "context-meter", "aria-live": "polite" });
    document.getElementById("composer").after(this.meter);
    document.getElementById("composer-input").addEventListener("input", () => this.changed(TYPING_MS));
  }

  /** The story (or the draft) changed: measure again, after `wait` ms without change. */
  changed(wait = 50) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.measure(), wait);
  }

  async measure() {
    const app = this.app;
    if (!app.sid || !app.api) return;
    const draft = document.getElementById("composer-input").value;
    const what = `${app.sid} ${app.version} ${draft}`;
    if (what === this.measured) return;
    const asked = ++this.asked;
    try {
      const { data } = await app.api.request("POST", app.path("/prompt/preview"), { json: { text: draft } });
      if (asked !== this.asked) return;
      this.measured = what;
      this.show(data);
    } catch {
      if (asked !== this.asked) return;
      this.measured = null;
      this.meter.textContent = t("notes.meter_unknown");
      this.meter.title = "";
      this.meter.classList.remove("full");
    }
  }

  /** The meter's line, and its details in its title (a tap shows them too). */
  show(preview) {
    const parts = [t("notes.meter", { used: number.format(preview.used), window: number.format(preview.window) })];
    if (preview.trimmed) {
      parts.push(t("notes.meter_trimmed", { count: number.format(preview.trimmed) }));
      if (preview.summary !== "none") parts.push(preview.summary === "reused" ? t("notes.meter_summary") : t("notes.meter_summary_new"));
    }
    const note = preview.author_note;
    if (note?.inserted) parts.push(t("notes.meter_note"));
    this.meter.textContent = parts.join(" · ");
    const details = [
      t("notes.meter_reply", { tokens: number.format(preview.reply_tokens) }),
      t("notes.meter_sent", { sent: number.format(preview.sent), messages: number.format(preview.messages) }),
      t("notes.meter_lore", { entries: number.format(preview.lore_entries), tokens: number.format(preview.lore_tokens) }),
    ];
    if (note) details.push(t("notes.meter_note_reason", { reason: note.reason }));
    if (preview.system_prompt === "session") details.push(t("notes.meter_system"));
    this.meter.title = details.join("\n");
    this.meter.classList.toggle("full", preview.used > preview.window - preview.reply_tokens);
  }

  /** The dialog: the session's settings and the note at HEAD, read fresh. */
  async open() {
    const app = this.app;
    if (!app.sid) return;
    let session;
    let state;
    try {
      [session, state] = await Promise.all([app.api.get(app.path("")), app.api.get(app.path("/state"))]);
    } catch (error) {
      app.fail(error, t("notes.loading"));
      return;
    }
    const settings = session.metadata?.settings || {};
    const note = { ...DEFAULT_NOTE, ...(state.author_note || {}) };
    const dialog = this.dialog();
    const form = dialog.querySelector("form");
    const fields = form.elements;
    fields.persona_name.value = settings.persona?.name || "";
    fields.persona_description.value = settings.persona?.description || "";
    fields.note_text.value = note.text;
    fields.note_depth.value = note.depth;
    fields.note_position.value = note.position;
    fields.note_interval.value = note.interval;
    fields.note_role.value = note.role;
    fields.system_prompt.value = settings.system_prompt || "";
    const noHead = !session.head_id;
    form.querySelector("fieldset.note").disabled = noHead;
    form.querySelector(".no-head").hidden = !noHead;
    this.showDepth(form);
    this.before = { settings: this.settingsOf(fields), note: noHead ? null : this.noteOf(fields) };
    dialog.showModal();
  }

  /** The dialog, made once. */
  dialog() {
    let dialog = document.getElementById("notes-dialog");
    if (dialog) return dialog;
    const field = (label, control, hint) => el("label", {}, el("span", { text: label }), control, hint ? el("small.muted", { text: hint }) : null);
    const options = (labels) => Object.entries(labels).map(([value, text]) => el("option", { value, text }));
    const form = el(
      "form",
      { method: "dialog" },
      el("h3", { text: t("notes.title") }),
      el(
        "fieldset.persona",
        {},
        el("legend", { text: t("notes.persona") }),
        field(t("notes.persona_name"), el("input", { name: "persona_name", maxlength: "100", autocomplete: "off" })),
        field(t("notes.persona_description"), el("textarea", { name: "persona_description", rows: "3", maxlength: "20000" }), t("notes.persona_hint")),
      ),
      el(
        "fieldset.note",
        {},
        el("legend", { text: t("notes.note") }),
        el("p.no-head.muted", { text: t("notes.no_head"), hidden: true }),
        field(t("notes.note_text"), el("textarea", { name: "note_text", rows: "3", maxlength: "20000" }), t("notes.note_hint")),
        el(
          "div.note-controls",
          {},
          field(t("notes.note_position"), el("select", { name: "note_position", onchange: () => this.showDepth(form) }, options(positions()))),
          field(t("notes.note_depth"), el("input", { name: "note_depth", type: "number", min: "0", max: "1000", step: "1", required: true })),
          field(t("notes.note_interval"), el("input", { name: "note_interval", type: "number", min: "0", max: "1000", step: "1", required: true })),
          field(t("notes.note_role"), el("select", { name: "note_role" }, options(roles()))),
        ),
      ),
      el(
        "fieldset.system",
        {},
        el("legend", { text: t("notes.system_prompt") }),
        field(t("notes.system_prompt"), el("textarea", { name: "system_prompt", rows: "4", maxlength: "100000", placeholder: t("notes.system_prompt_placeholder") }), t("notes.system_prompt_hint")),
      ),
      el(
        "menu",
        {},
        el("button", { type: "button", value: "cancel", text: t("notes.cancel"), onclick: () => dialog.close() }),
        el("button.primary", { type: "submit", value: "save", text: t("notes.save") }),
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (form.reportValidity()) this.save(dialog, form.elements);
    });
    dialog = el("dialog", { id: "notes-dialog" }, form);
    document.body.append(dialog);
    return dialog;
  }

  /** The depth matters only in the chat: hidden otherwise. */
  showDepth(form) {
    form.elements.note_depth.closest("label").hidden = form.elements.note_position.value !== "in_chat";
  }

  settingsOf(fields) {
    const name = fields.persona_name.value.trim();
    const description = fields.persona_description.value;
    return {
      persona: name || description.trim() ? { name, description } : null,
      system_prompt: fields.system_prompt.value.trim() ? fields.system_prompt.value : null,
    };
  }

  noteOf(fields) {
    if (!fields.note_text.value.trim()) return null;
    return {
      text: fields.note_text.value,
      depth: Number(fields.note_depth.value),
      position: fields.note_position.value,
      interval: Number(fields.note_interval.value),
      role: fields.note_role.value,
    };
  }

  /** Only what changed is written: the settings (PATCH), then the note (one edit). */
  async save(dialog, fields) {
    const app = this.app;
    const settings = this.settingsOf(fields);
    const note = fields.note_text.closest("fieldset").disabled ? this.before.note : this.noteOf(fields);
    const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
    try {
      if (!same(settings, this.before.settings)) {
        const { version } = await app.api.request("PATCH", app.path(""), { json: { settings }, ifMatch: app.version, idempotencyKey: newKey() });
        app.setVersion(version);
      }
      if (!same(note, this.before.note)) {
        const operations = [{ op: "note", node_id: "HEAD", note }];
        const { version } = await app.api.request("POST", app.path("/edits"), { json: { operations }, ifMatch: app.version, idempotencyKey: newKey() });
        app.setVersion(version);
      }
    } catch (error) {
      app.fail(error, t("notes.saving"));
      return; // the dialog stays open, with what the player wrote
    }
    dialog.close();
    app.notify(t("notes.saved"));
    await app.refresh();
    this.changed();
  }
}
