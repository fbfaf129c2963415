// The stories (sessions) as the page lists them: the picker grouped by character, a new
// story, rename, delete to the trash and restore, Export story… (the branch as a book)
// and Import… (each file recognised by its content on the server: newstory.js).

import { t } from "./i18n.js";
import { importByContent, openNewStory } from "./newstory.js";
import { clear, el, short, toast } from "./ui.js";

/** A story's name as the page shows it. */
export function storyTitle(session) {
  return session.title || t("story.untitled", { id: short(session.id) });
}

export class Stories {
  constructor(app) {
    this.app = app;
  }

  get current() {
    return this.app.sessions.find((s) => s.id === this.app.sid) || null;
  }

  bind() {
    document.getElementById("session-select").addEventListener("change", (event) => this.app.choose(event.target.value));
    document.getElementById("new-session").addEventListener("click", () => this.startNew());
    document.getElementById("import").addEventListener("change", (event) => this.importFile(event.target));
    document.getElementById("delete-session").addEventListener("click", () => this.remove());
    document.getElementById("session-trash").addEventListener("click", () => this.showTrash());
    document.getElementById("rename-session")?.addEventListener("click", () => this.rename());
    document.getElementById("export-story")?.addEventListener("change", (event) => this.exportStory(event.target));
  }

  /** Export story: the branch to HEAD as a book (`md` or `html`), downloaded. */
  async exportStory(select) {
    const format = select.value;
    select.value = "";
    if (!format || !this.app.sid) return;
    try {
      const path = `/api/sessions/${encodeURIComponent(this.app.sid)}/exports/story?format=${format}${format === "html" ? "&pictures=true" : ""}`;
      const response = await fetch(path, { headers: this.app.api.headers() });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const name = this.current ? storyTitle(this.current) : "story";
      const link = el("a", { href: URL.createObjectURL(await response.blob()), download: `${name}.${format}` });
      link.click();
      setTimeout(() => URL.revokeObjectURL(link.href), 1000);
    } catch (error) {
      this.app.fail(error, t("story.export"));
    }
  }

  async load() {
    this.app.sessions = (await this.app.api.pages("/api/sessions?limit=1000", "sessions")).items;
  }

  /** The picker: the stories grouped by character (those without one last). */
  fillPicker() {
    const select = document.getElementById("session-select");
    const groups = new Map();
    for (const session of this.app.sessions) {
      const who = session.character || "";
      if (!groups.has(who)) groups.set(who, []);
      groups.get(who).push(session);
    }
    const option = (s) => el("option", { value: s.id, text: storyTitle(s), selected: s.id === this.app.sid });
    const named = [...groups.keys()].filter(Boolean).sort((a, b) => a.localeCompare(b));
    const parts = named.map((who) => el("optgroup", { label: who }, groups.get(who).map(option)));
    const loose = groups.get("") || [];
    if (loose.length && named.length) parts.push(el("optgroup", { label: t("story.no_character") }, loose.map(option)));
    else parts.push(...loose.map(option));
    clear(select).append(...parts);
  }

  /** A story made on the server: drawn, chosen, remembered. */
  async opened(session) {
    await this.load();
    if (!this.app.sessions.some((s) => s.id === session.id)) this.app.sessions.unshift(session);
    this.app.sid = session.id;
    this.fillPicker();
    this.app.choose(session.id);
  }

  /** The New button: the new-story dialog (newstory.js). */
  async startNew(given = {}) {
    return openNewStory(this, given);
  }

  /** An empty story with a title (the page's first one, when there is none). */
  async create(title, draw = true) {
    try {
      const { data } = await this.app.api.request("POST", "/api/sessions", { json: { title } });
      this.app.sessions.unshift(data.session);
      this.app.sid = data.session.id;
      if (draw) {
        this.fillPicker();
        this.app.choose(data.session.id);
      }
      return data.session;
    } catch (error) {
      this.app.fail(error, t("story.creating"));
      return null;
    }
  }

  async rename() {
    const session = this.current;
    if (!session) return;
    const answer = await this.app.ask(t("story.rename_title"), [{ name: "title", label: t("story.title"), value: session.title || "" }], [{ value: "ok", label: t("story.rename") }]);
    if (!answer) return;
    try {
      const { data, version } = await this.app.api.request("PATCH", this.app.path(""), { json: { title: answer.title.trim() || null }, ifMatch: this.app.version });
      Object.assign(session, data.session || data);
      this.app.setVersion(version);
      this.fillPicker();
      toast(t("story.renamed"), storyTitle(session));
    } catch (error) {
      this.app.fail(error, t("story.renaming"));
      if (error.status === 412) await this.app.refresh();
    }
  }

  async remove() {
    const session = this.current;
    if (!session) return;
    const answer = await this.app.ask(t("story.delete_ask", { title: storyTitle(session) }), [], [{ value: "ok", label: t("story.delete_ok") }]);
    if (!answer) return;
    try {
      await this.app.api.request("DELETE", this.app.path(""), { ifMatch: this.app.version });
      toast(t("story.deleted"), t("story.deleted_detail"));
      await this.load();
      this.app.sid = this.app.sessions[0]?.id ?? null;
      if (!this.app.sid) await this.create(t("story.first_title"), false);
      this.fillPicker();
      this.app.choose(this.app.sid);
    } catch (error) {
      this.app.fail(error, t("story.deleting"));
      if (error.status === 412) await this.app.refresh();
    }
  }

  async showTrash() {
    const dialog = document.getElementById("ask");
    let trashed;
    try {
      trashed = (await this.app.api.pages("/api/trash/sessions?limit=1000", "sessions")).items;
    } catch (error) {
      return this.app.fail(error, t("story.reading_trash"));
    }
    const restore = async (session) => {
      try {
        await this.app.api.request("POST", `/api/trash/sessions/${encodeURIComponent(session.id)}/restore`);
        dialog.close("cancel");
        await this.load();
        this.app.choose(session.id);
        this.fillPicker();
        toast(t("story.restored"), storyTitle(session));
      } catch (error) {
        this.app.fail(error, t("story.restoring"));
      }
    };
    const rows = trashed.map((session) =>
      el(
        "li",
        { dataset: { sessionId: session.id } },
        el("span.what", { text: storyTitle(session) }),
        el("span.muted", { text: ` ${t("story.deleted_at", { when: new Date(session.trashed_at).toLocaleString() })}` }),
        " ",
        el("button", { type: "button", text: t("story.restore"), onclick: () => restore(session) }),
      ),
    );
    clear(dialog).append(
      el("h3", { text: t("story.trash_title", { count: trashed.length }) }),
      trashed.length ? el("ul.trashed", {}, rows) : el("p.muted", { text: t("story.trash_empty") }),
      el("menu", {}, el("button", { type: "button", text: t("story.close"), onclick: () => dialog.close("cancel") })),
    );
    dialog.onclose = null;
    dialog.showModal();
  }

  /** Import…: any file the server recognises (a card, a lorebook, a chat, a tree file). */
  async importFile(input) {
    const file = input.files?.[0];
    input.value = "";
    if (!file) return;
    return importByContent(this, file);
  }
}
