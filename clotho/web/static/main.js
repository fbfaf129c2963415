// The page: the token, the sessions, the two views, undo/redo, and errors shown as
// readable messages. Every write sends the version the view was drawn from (If-Match);
// a refused write changes nothing, and the view is drawn again from the server.

import { Api, newKey, sessionPath } from "./api.js";
import { ChatView } from "./chat.js";
import { renderTrace } from "./panels.js";
import { StoryNotes } from "./notes.js";
import { Stories } from "./sessions.js";
import { TreeView } from "./tree.js";
import { ask, preview, showError, toast } from "./ui.js";

const TOKEN_KEY = "clotho.token";

class App {
  constructor() {
    this.api = null;
    this.sid = null;
    this.version = null;
    this.view = "chat";
    this.sessions = [];
    this.views = {};
    this.stories = new Stories(this);
    this.notes = new StoryNotes(this); // the story's settings, the context meter
  }

  async boot() {
    const params = new URLSearchParams(location.hash.slice(1));
    if (params.get("token")) {
      localStorage.setItem(TOKEN_KEY, params.get("token"));
      params.delete("token");
    }
    if (params.get("view") === "tree") this.view = "tree";
    this.sid = params.get("session");
    this.views = { chat: new ChatView(this), tree: new TreeView(this) };
    this.bindControls();
    this.api = new Api(localStorage.getItem(TOKEN_KEY) || "");
    await this.start();
  }

  async start() {
    try {
      await this.stories.load();
    } catch (error) {
      if (error.status === 401) return this.login(this.api.token ? "That token was refused." : "");
      return this.fail(error, "Loading the sessions");
    }
    if (!this.sid || !this.sessions.some((s) => s.id === this.sid)) this.sid = this.sessions[0]?.id ?? null;
    if (!this.sid) await this.stories.create("My first story", false);
    this.stories.fillPicker();
    this.showView(this.view);
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
    for (const button of document.querySelectorAll("#views button")) {
      button.addEventListener("click", () => this.showView(button.dataset.view));
    }
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

  choose(sid) {
    this.sid = sid;
    this.version = null;
    for (const view of Object.values(this.views)) view.reset();
    this.remember();
    this.refresh();
  }

  showView(name) {
    this.view = name;
    for (const button of document.querySelectorAll("#views button")) button.setAttribute("aria-pressed", String(button.dataset.view === name));
    document.getElementById("chat-view").hidden = name !== "chat";
    document.getElementById("tree-view").hidden = name !== "tree";
    document.body.dataset.view = name;
    this.remember();
    this.refresh();
  }

  remember() {
    const params = new URLSearchParams();
    if (this.sid) params.set("session", this.sid);
    params.set("view", this.view);
    history.replaceState(null, "", `#${params}`);
  }

  path(rest) {
    return sessionPath(this.sid, rest);
  }

  setVersion(version) {
    if (version != null) this.version = version;
    this.notes.changed(); // the story may have changed: the context meter measures again
    document.getElementById("version").textContent = this.version != null ? `v${this.version}` : "";
  }

  setUsage(text) {
    document.getElementById("usage").textContent = text;
  }

  /** Draw the current view again from the server. */
  async refresh() {
    if (!this.sid) return;
    const view = this.views[this.view];
    document.body.classList.add("loading");
    try {
      await view.load();
    } catch (error) {
      this.fail(error, "Loading the session");
    } finally {
      document.body.classList.remove("loading");
    }
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
    const done = await this.write("POST", `/${which}`, undefined, which === "undo" ? "Undo" : "Redo");
    if (done && typeof done === "object") {
      const result = done.results?.[0] || {};
      const what = [result.action, result.note].filter(Boolean).join(": ");
      toast(which === "undo" ? "Undone" : "Redone", preview(what, 120));
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
      this.fail(error, "Opening the trace");
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
      showError({ title: "The session changed elsewhere", detail: `Nothing was changed: your view was of version ${this.version}, the session is at ${now ?? "a newer one"}. The view is reloaded; try again.` }, doing);
      return;
    }
    showError(error, doing);
  }
}

const app = new App();
globalThis.clotho = app; // for the browser's console, and the tests' measurements
app.boot();
