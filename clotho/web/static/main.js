// The page: the token, the sessions, the two views and the address that names them
// (#view=tree&session=ID&node=ID: back and forward move between views), undo/redo, the
// header's menu and the side drawer of the narrow layout, the language, and errors
// shown as readable messages. Every write sends the version the view was drawn from
// (If-Match); a refused write changes nothing, and the view is drawn again from the server.

import { Api, newKey, sessionPath } from "./api.js";
import { CascadeBar } from "./cascade.js";
import { CastPanel } from "./cast.js";
import { ChatView } from "./chat.js";
import { LANGUAGES, language, setLanguage, t } from "./i18n.js";
import { LiveSession } from "./live.js";
import { LoreManager } from "./lore.js";
import { renderTrace } from "./panels.js";
import { StoryNotes } from "./notes.js";
import { Connections } from "./connections.js";
import { ReplayPanel } from "./replay.js";
import { Stories } from "./sessions.js";
import { TreeView } from "./tree.js";
import { TraceCompare } from "./tracediff.js";
import { ask, el, formatTokens, preview, showError, toast, translate } from "./ui.js";

const TOKEN_KEY = "clotho.token";

class App {
  constructor() {
    this.api = null;
    this.sid = null;
    this.version = null;
    this.view = "chat";
    this.sessions = [];
    this.views = {};
    this.node = null; // the node the address names (#node=ID): shown once the view is drawn
    this.stories = new Stories(this);
    this.notes = new StoryNotes(this); // the story's settings, the context meter
    this.connections = new Connections(this); // the model profiles, and the story's
    this.lore = new LoreManager(this); // the session's lorebooks (the header's Lore)
    this.cast = new CastPanel(this); // the story's characters (the chat's side panel)
    this.live = new LiveSession(this); // the open session's changes made elsewhere, drawn as they come
    this.replay = new ReplayPanel(this); // a message's "Replay with…" (replay.js)
    this.compare = new TraceCompare(this); // a trace's "Compare with…" (tracediff.js)
    this.cascade = new CascadeBar(this); // after an edit as a fork: regenerate the rest (cascade.js)
    this.avatars = new Map(); // session id (or a picture's URL) → a promise of its image (a data: URL) or null
  }

  async boot() {
    translate();
    const route = this.route();
    this.view = route.view;
    this.sid = route.session;
    this.node = route.node;
    this.views = { chat: new ChatView(this), tree: new TreeView(this) };
    this.bindControls();
    this.bindLayout();
    this.api = new Api(localStorage.getItem(TOKEN_KEY) || "");
    await this.start();
  }

  async start() {
    try {
      await this.stories.load();
    } catch (error) {
      if (error.status === 401) return this.login(this.api.token ? t("app.token_refused") : "");
      return this.fail(error, t("app.loading_sessions"));
    }
    if (!this.sid || !this.sessions.some((s) => s.id === this.sid)) this.sid = this.sessions[0]?.id ?? null;
    if (!this.sid) await this.stories.create(t("story.first_title"), false);
    this.stories.fillPicker();
    this.showView(this.view, { push: false, node: this.node });
    this.cascade.rejoin(); // one still running after a reload
  }

  /**
   * What the address names: {view, session, node} (#view=tree&session=ID&node=ID). A
   * token in it (#token=..., as `clotho serve` prints it) is kept in the browser and
   * taken out of the address.
   */
  route() {
    const params = new URLSearchParams(location.hash.slice(1));
    if (params.get("token")) {
      localStorage.setItem(TOKEN_KEY, params.get("token"));
      params.delete("token");
      history.replaceState(null, "", `#${params}`);
    }
    return { view: params.get("view") === "tree" ? "tree" : "chat", session: params.get("session"), node: params.get("node") };
  }

  /** The address changed (typed, a link, back or forward): show what it names. */
  async followRoute() {
    const { view, session, node } = this.route();
    const token = localStorage.getItem(TOKEN_KEY) || "";
    if (this.api && this.api.token !== token) this.api = new Api(token); // a new #token=
    const listed = () => this.sessions.some((s) => s.id === session);
    if (session && !listed()) await this.stories.load().catch(() => null); // made since the list was read?
    const known = session && listed();
    if (known && session !== this.sid) {
      this.sid = session;
      this.cascade.leave(); // as choose() does
      this.version = null;
      for (const each of Object.values(this.views)) each.reset();
      this.stories.fillPicker();
      this.cascade.rejoin();
      return this.showView(view, { push: false, node });
    }
    if (view !== this.view) return this.showView(view, { push: false, node });
    if (node && node !== this.node) {
      this.node = node;
      this.reveal(node);
    }
  }

  login(reason) {
    const dialog = document.getElementById("login");
    document.getElementById("login-reason").textContent = reason;
    dialog.showModal();
    const form = dialog.querySelector("form");
    form.onsubmit = (event) => {
      event.preventDefault();
      const token = form.elements.token.value.trim();
      if (!token) return;
      localStorage.setItem(TOKEN_KEY, token);
      this.api = new Api(token);
      dialog.close();
      this.start();
    };
  }

  bindControls() {
    this.stories.bind();
    this.notes.bind();
    this.connections.bind();
    for (const button of document.querySelectorAll("#views button")) {
      button.addEventListener("click", () => this.showView(button.dataset.view));
    }
    window.addEventListener("hashchange", () => this.followRoute());
    document.getElementById("undo").addEventListener("click", () => this.undo("undo"));
    document.getElementById("redo").addEventListener("click", () => this.undo("redo"));
    document.addEventListener("keydown", (event) => {
      const typing = event.target.closest?.("input, textarea, select, [contenteditable]");
      if (event.key === "Escape" && this.views.tree.cancelPick()) return;
      const arrow = event.key.startsWith("Arrow") && !event.ctrlKey && !event.metaKey && !event.altKey;
      if (arrow && !typing && this.view === "tree" && !document.querySelector("dialog[open]")) {
        if (this.views.tree.navigate(event.key)) event.preventDefault();
        return;
      }
      if (typing || !(event.ctrlKey || event.metaKey) || event.altKey) return;
      const key = event.key.toLowerCase();
      if (key === "z" || key === "y") {
        event.preventDefault();
        this.undo(key === "y" || event.shiftKey ? "redo" : "undo");
      }
    });
  }

  /**
   * The header's menu (folded behind ☰ at narrow width), the side panel as a drawer at
   * narrow width, and the language switch.
   */
  bindLayout() {
    const bar = document.getElementById("bar");
    const toggle = document.getElementById("menu-toggle");
    const setMenu = (open) => {
      bar.classList.toggle("menu-open", open);
      toggle.setAttribute("aria-expanded", String(open));
    };
    toggle.addEventListener("click", () => setMenu(!bar.classList.contains("menu-open")));
    // A choice made in the menu closes it; so do a tap elsewhere and Escape.
    document.getElementById("menu-panel").addEventListener("click", (event) => {
      if (event.target.closest("button")) setMenu(false);
    });
    document.addEventListener("pointerdown", (event) => {
      if (!event.target.closest("#menu-panel, #menu-toggle")) setMenu(false);
    });
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      setMenu(false);
      this.setDrawer(false);
    });
    document.getElementById("side-toggle").addEventListener("click", () => this.setDrawer(!document.body.classList.contains("side-open")));
    document.getElementById("side-backdrop").addEventListener("click", () => this.setDrawer(false));
    // Narrow, a message's actions show on the last message and on the one tapped.
    document.getElementById("messages").addEventListener("click", (event) => {
      if (event.target.closest("button, a, summary, input, textarea, select")) return;
      const message = event.target.closest("article.message");
      if (!message) return;
      const open = !message.classList.contains("open");
      for (const other of document.querySelectorAll("#messages article.message.open")) other.classList.remove("open");
      message.classList.toggle("open", open);
    });
    // Narrow, the node panel is a drawer: a node tapped in the tree opens it.
    document.getElementById("tree-svg").addEventListener("click", (event) => {
      if (event.target.closest?.(".node") && matchMedia("(max-width: 760px)").matches) this.setDrawer(true);
    });
    const choice = document.getElementById("language");
    choice.append(...Object.entries(LANGUAGES).map(([code, name]) => el("option", { value: code, text: name, selected: code === language })));
    choice.addEventListener("change", () => setLanguage(choice.value));
    // The header's height, for what is placed under it (the toasts, the drawer).
    new ResizeObserver(() => document.body.style.setProperty("--bar-height", `${bar.offsetHeight}px`)).observe(bar);
  }

  /** Open or close the side panel's drawer (the narrow layout; a no-op when wide). */
  setDrawer(open) {
    document.body.classList.toggle("side-open", open);
    document.getElementById("side-backdrop").hidden = !open;
    document.getElementById("side-toggle").setAttribute("aria-expanded", String(open));
  }

  choose(sid) {
    this.sid = sid;
    this.cascade.leave(); // the other story's cascade runs on, no longer followed here
    this.version = null;
    this.node = null;
    for (const view of Object.values(this.views)) view.reset();
    this.remember(true);
    this.refresh();
    this.cascade.rejoin(); // this story's, if one runs
  }

  /**
   * Show a view. push: a new entry in the browser's history (Back returns to the view
   * before); node: a node to open and centre (tree) or scroll to (chat) once drawn.
   */
  async showView(name, { push = true, node = null } = {}) {
    this.view = name;
    this.node = node;
    for (const button of document.querySelectorAll("#views button")) button.setAttribute("aria-pressed", String(button.dataset.view === name));
    document.getElementById("chat-view").hidden = name !== "chat";
    document.getElementById("tree-view").hidden = name !== "tree";
    document.body.dataset.view = name;
    document.getElementById("side-toggle").textContent = name === "tree" ? t("app.side_node") : t("app.side_state");
    this.setDrawer(false);
    this.remember(push);
    await this.refresh();
    if (node) this.reveal(node);
  }

  /** The address of what is shown: a new history entry (push) or in place of the last. */
  remember(push = false) {
    const params = new URLSearchParams();
    if (this.sid) params.set("session", this.sid);
    params.set("view", this.view);
    if (this.node) params.set("node", this.node);
    const hash = `#${params}`;
    if (hash === location.hash) return;
    if (push) history.pushState(null, "", hash);
    else history.replaceState(null, "", hash);
  }

  /** The node the address names, in the view shown: opened and centred in the tree,
   * scrolled to and marked in the chat (when it is on the story's path). */
  reveal(id) {
    if (this.view === "tree") {
      this.views.tree.show(id);
      return;
    }
    const message = [...document.querySelectorAll("#messages article.message")].find((m) => m.dataset.nodeId === id);
    if (!message) return;
    for (const other of document.querySelectorAll("#messages .target")) other.classList.remove("target");
    message.classList.add("target");
    message.scrollIntoView({ block: "center" });
  }

  path(rest) {
    return sessionPath(this.sid, rest);
  }

  setVersion(version) {
    if (version != null) this.version = version;
    this.notes.changed(); // the story may have changed: the context meter measures again
    document.getElementById("version").textContent = this.version != null ? t("app.version", { version: this.version }) : "";
  }

  /**
   * The tokens spent in the header: the last reply's and the story's so far; a part
   * with nothing to say is left out (a stopped reply may have no count).
   */
  setUsage(last, story) {
    const parts = [];
    if (formatTokens(last)) parts.push(t("app.usage_last", { tokens: formatTokens(last) }));
    if (formatTokens(story)) parts.push(t("app.usage_story", { tokens: formatTokens(story) }));
    document.getElementById("usage").textContent = parts.join(" · ");
  }

  /** Draw the current view again from the server, and what Undo and Redo can do. */
  async refresh() {
    if (!this.sid) return;
    this.live.follow(this.sid);
    const view = this.views[this.view];
    document.body.classList.add("loading");
    try {
      await Promise.all([view.load(), this.readJournal()]);
    } catch (error) {
      this.fail(error, t("app.loading_session"));
    } finally {
      document.body.classList.remove("loading");
    }
  }

  /** Undo and Redo enabled only when the journal has something for them. */
  async readJournal() {
    const sid = this.sid;
    let entries = null;
    try {
      // The journal keeps a few dozen entries: one page holds them all.
      entries = (await this.api.get(this.path("/history?limit=1000"))).entries;
    } catch {
      entries = null; // unknown: both stay usable, and the API says why if it refuses
    }
    if (sid !== this.sid) return;
    document.getElementById("undo").disabled = entries ? !entries.some((e) => !e.undone) : false;
    document.getElementById("redo").disabled = entries ? !entries.some((e) => e.undone) : false;
  }

  /** The image of a session's character (its card's), as a data: URL; null: none.
   * `url`: the picture to read (a card's in the new-story picker: its member's own). */
  avatarImage(sid, url = null) {
    const session = this.sessions.find((s) => s.id === sid);
    if (!url && (!session || !(session.avatar_url || session.has_avatar))) return Promise.resolve(null);
    const key = url || sid;
    if (!this.avatars.has(key)) {
      const read = this.api
        .request("GET", url || session.avatar_url || this.path("/avatar"), { as: "blob" })
        .then(
          ({ data }) =>
            new Promise((resolve) => {
              const reader = new FileReader();
              reader.onload = () => resolve(reader.result);
              reader.onerror = () => resolve(null);
              reader.readAsDataURL(data);
            }),
        )
        .catch(() => null);
      this.avatars.set(key, read);
    }
    return this.avatars.get(key);
  }

  /** A write based on the version shown, with its own Idempotency-Key (a dropped
   * connection is retried once, and applied once); the view is drawn again either way. */
  async write(method, rest, json, doing) {
    try {
      const { data, version } = await this.api.request(method, this.path(rest), { json, ifMatch: this.version, idempotencyKey: newKey() });
      this.setVersion(version);
      await this.refresh();
      return data ?? true;
    } catch (error) {
      this.fail(error, doing);
      if (error.status === 412 || error.status === 409) await this.refresh();
      return null;
    }
  }

  /** Editor operations, atomically: one undo step. */
  edit(operations, doing) {
    return this.write("POST", "/edits", { operations }, doing);
  }

  async undo(which) {
    if (document.getElementById(which).disabled) return; // nothing to undo (or redo): the journal says
    const done = await this.write("POST", `/${which}`, undefined, which === "undo" ? t("app.undo") : t("app.redo"));
    if (done && typeof done === "object") {
      const result = done.results?.[0] || {};
      // "undo say": what was taken back (or done again), in words when the page knows it.
      const action = (result.action || "").replace(/^(undo|redo) /, "");
      const key = `app.journal_${action}`;
      const words = /^[a-z_]+$/.test(action) && t(key) !== key ? t(key) : action;
      const what = [words, result.note].filter(Boolean).join(": ");
      toast(which === "undo" ? t("app.undone") : t("app.redone"), preview(what, 120));
    }
  }

  async openTrace(nodeId) {
    const dialog = document.getElementById("trace-dialog");
    const body = dialog.querySelector(".trace-body");
    try {
      const trace = await this.api.get(this.path(`/nodes/${encodeURIComponent(nodeId)}/trace`));
      renderTrace(body, trace);
      dialog.showModal();
    } catch (error) {
      this.fail(error, t("app.opening_trace"));
    }
  }

  ask(...args) {
    return ask(...args);
  }

  notify(title, detail) {
    toast(title, detail);
  }

  /** A problem document that arrived as an SSE `error` event. */
  problem(doc, doing) {
    showError({ title: doc.title, detail: doc.detail, doc }, doing);
  }

  fail(error, doing) {
    if (error?.status === 412) {
      const now = error.doc?.current_version;
      showError({ title: t("app.conflict"), detail: t("app.conflict_detail", { mine: this.version, now: now ?? t("app.conflict_newer") }) }, doing);
      return;
    }
    showError(error, doing);
  }
}

const app = new App();
globalThis.clotho = app; // for the browser's console, and the tests' measurements
app.boot();
