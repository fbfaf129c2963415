// The chat view ("immersion"): the story root → HEAD, replies streaming in, `< 2/5 >`
// on every fork, reroll, edit as a fork, continue, and the world state beside it.

import { renderState } from "./panels.js";
import { clear, el, formatTokens, short } from "./ui.js";

const PAGE = 200; // messages read at a time, newest first; "Show earlier" reads the window before
const ATTEMPTS = 3; // reads of a story that changes while it is read window by window

export class ChatView {
  constructor(app) {
    this.app = app;
    this.root = document.getElementById("chat-view");
    this.list = document.getElementById("messages");
    this.side = document.getElementById("chat-state");
    this.status = document.getElementById("turn-status");
    this.input = document.getElementById("composer-input");
    this.shown = PAGE; // how many of the last messages to show
    this.state = null;
    this.running = null; // the AbortController of the turn streaming now
    this.turn = null; // that turn, as its first event told (its id, its events)
    this.stopping = false; // the player asked to stop it
    document.getElementById("composer").addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.send();
      }
    });
    document.getElementById("continue").addEventListener("click", () => this.play({ kind: "continue" }));
    document.getElementById("impersonate").addEventListener("click", () => this.play({ kind: "impersonate" }));
    document.getElementById("stop").addEventListener("click", () => this.stop());
  }

  reset() {
    this.shown = PAGE;
    this.state = null;
  }

  async load() {
    const app = this.app;
    const sid = app.sid;
    const [story, state] = await Promise.all([
      this.story(),
      app.api.get(app.path("/state")).catch((error) => (error.status === 404 || error.status === 422 ? null : Promise.reject(error))),
    ]);
    if (sid !== app.sid) return; // another session was chosen meanwhile
    app.setVersion(story.version);
    this.render(story);
    renderState(this.side, state, this.state);
    this.state = state;
    if (!this.running) this.resume(sid);
  }

  /** A turn playing in this session that this page is not showing (a reload while it
   * plays, or another tab's): its bubbles and its events from the start. */
  async resume(sid) {
    let turns;
    try {
      ({ turns } = await this.app.api.get(this.app.path("/turns?status=running")));
    } catch {
      return; // the turns are a nicety here: the story is shown
    }
    if (sid !== this.app.sid || this.running || !turns.length) return;
    const turn = turns[0];
    this.pending(turn.request);
    await this.follow((handlers) => this.app.api.stream(turn.events, undefined, handlers), turn);
  }

  /**
   * The last `this.shown` messages (hidden ones too): the newest window, then the ones
   * before it through the API's cursor (`next`), all of one version of the session.
   */
  async story() {
    const api = this.app.api;
    let story = null;
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const { data, version } = await api.request("GET", this.app.path(`/projection?metadata=true&disabled=true&limit=${PAGE}`));
      story = { ...data, version };
      while (story.next && story.nodes.length < this.shown) {
        const earlier = await api.request("GET", story.next);
        if (earlier.version !== version) break; // the story changed meanwhile: read it again
        story = { ...earlier.data, nodes: [...earlier.data.nodes, ...story.nodes], version };
      }
      if (!story.next || story.nodes.length >= this.shown) break;
    }
    return story;
  }

  /** The window before the first message shown, added above it; the view stays where it was. */
  async showEarlier(story) {
    try {
      const { data, version } = await this.app.api.request("GET", story.next);
      this.shown = story.nodes.length + data.nodes.length;
      if (version !== story.version) return this.app.refresh(); // it changed: all of it again
      const first = this.list.querySelector("article.message");
      this.render({ ...data, nodes: [...data.nodes, ...story.nodes], version }, first?.dataset.nodeId);
    } catch (error) {
      this.app.fail(error, "Loading earlier messages");
    }
  }

  render(projection, keep = null) {
    // A turn streaming now keeps its bubbles (a reload may land while it streams).
    const pending = this.running ? [...this.list.querySelectorAll(".pending")] : [];
    clear(this.list);
    const nodes = projection.nodes;
    if (projection.next) {
      this.list.append(
        el("button.earlier", {
          type: "button",
          text: `Show ${Math.min(PAGE, projection.earlier)} earlier messages (${projection.earlier} not shown)`,
          onclick: (event) => {
            event.currentTarget.disabled = true;
            this.showEarlier(projection);
          },
        }),
      );
    }
    if (!nodes.length && !pending.length) {
      this.list.append(el("p.empty", { text: "The story has not started. Say something below." }));
    }
    // Who speaks: a node's own name, else the name its role last had above it in the
    // story (the turns store the session's names on the nodes they make), else the
    // name the session was given (an imported chat's player and character), else its role.
    const given = this.app.sessions.find((s) => s.id === this.app.sid)?.metadata?.names || {};
    this.names = { user: given.player, assistant: given.character };
    nodes.forEach((node, i) => {
      this.list.append(this.message(node, i === nodes.length - 1));
      if (node.name) this.names[node.role] = node.name;
    });
    this.list.append(...pending);
    let spent = { prompt_tokens: 0, completion_tokens: 0 };
    let last = null;
    for (const node of nodes) {
      const usage = node.metadata?.usage;
      if (!usage) continue;
      spent.prompt_tokens += usage.prompt_tokens || 0;
      spent.completion_tokens += usage.completion_tokens || 0;
      last = usage;
    }
    this.app.setUsage(last ? `last reply ${formatTokens(last)} · this story ${formatTokens(spent)}` : "");
    const kept = keep && [...this.list.querySelectorAll("article.message")].find((m) => m.dataset.nodeId === keep);
    if (kept) kept.scrollIntoView({ block: "start" });
    else this.list.scrollTop = this.list.scrollHeight;
  }

  message(node, isLast) {
    const generated = Boolean(node.metadata?.generated);
    const alternatives =
      node.siblings.length > 1
        ? el(
            "span.alternatives",
            { "aria-label": "alternatives" },
            el("button.prev", { type: "button", title: "Previous alternative", text: "<", disabled: node.index === 0, onclick: () => this.swipe(node, "prev") }),
            el("span.count", { text: `${node.index + 1}/${node.siblings.length}` }),
            el("button.next", { type: "button", title: "Next alternative", text: ">", disabled: node.index === node.siblings.length - 1, onclick: () => this.swipe(node, "next") }),
          )
        : null;
    const actions = el(
      "span.actions",
      {},
      el("button.edit", { type: "button", text: "Edit", title: "Edit as a fork (the original stays)", onclick: () => this.edit(node) }),
      node.role === "assistant" ? el("button.reroll", { type: "button", text: "Reroll", title: "Another reply beside this one", onclick: () => this.play({ kind: "reroll", node_id: node.id }, node) }) : null,
      el("button.toggle", {
        type: "button",
        text: node.enabled ? "Hide" : "Unhide",
        title: node.enabled ? "Hide from the model (it stays in the story, dimmed)" : "Show to the model again",
        onclick: () => this.app.edit([{ op: "toggle", node_id: node.id }], node.enabled ? "Hiding" : "Unhiding"),
      }),
      generated ? el("button.trace", { type: "button", text: "Trace", title: "What the model was sent, and why", onclick: () => this.app.openTrace(node.id) }) : null,
    );
    const meta = [];
    if (node.metadata?.usage) meta.push(formatTokens(node.metadata.usage));
    if (node.metadata?.incomplete) meta.push(`incomplete (${node.metadata.stopped_by || "stopped"})`);
    if (!node.enabled) meta.push("hidden from the model");
    return el(
      `article.message.${node.role}${node.enabled ? "" : ".disabled"}${isLast ? ".last" : ""}`,
      { dataset: { nodeId: node.id, role: node.role } },
      el("header", {}, el("span.who", { text: this.speaker(node) }), alternatives, el("span.id", { text: short(node.id) }), actions),
      el("div.content", { text: node.content }),
      meta.length ? el("footer", { text: meta.join(" · ") }) : null,
    );
  }

  async swipe(node, direction) {
    await this.app.write("POST", "/swipe", { direction, node_id: node.id }, "Switching alternatives");
  }

  async edit(node) {
    const buttons =
      node.role === "user"
        ? [
            { value: "reply", label: "Fork and get a reply" },
            { value: "fork", label: "Fork only" },
          ]
        : [{ value: "fork", label: "Save as a fork" }];
    const answer = await this.app.ask(`Edit this ${node.role} message (the original stays as an alternative)`, [{ name: "content", label: "Text", value: node.content, multiline: true }], buttons);
    if (!answer) return;
    if (answer.action === "reply") await this.play({ kind: "edit", node_id: node.id, text: answer.content }, node);
    else await this.app.write("POST", `/nodes/${encodeURIComponent(node.id)}/fork`, { content: answer.content }, "Editing as a fork");
  }

  async send() {
    const text = this.input.value;
    if (!text.trim()) {
      this.input.focus();
      return;
    }
    const done = await this.play({ kind: "say", text });
    if (done) this.input.value = "";
  }

  /** Stream a turn into the view: pending bubbles, tokens as they come, then reload. */
  async play(request, replacing = null) {
    if (this.running) return false;
    const app = this.app;
    // What the new reply replaces in the view: from the rerolled/edited message on.
    if (replacing) {
      const shown = [...this.list.querySelectorAll("article.message")];
      const at = shown.findIndex((item) => item.dataset.nodeId === replacing.id);
      if (at >= 0) shown.slice(at).forEach((item) => item.remove());
    }
    this.pending(request);
    // detach: the turn plays on if this page goes (a reload rejoins it); Stop cancels it.
    const path = app.path("/turns?detach=true");
    return this.follow((handlers) => app.api.stream(path, request, { ifMatch: app.version, ...handlers }));
  }

  /** The name shown for who speaks a node (or a role, for a bubble still streaming). */
  speaker(node) {
    return node.name || this.names?.[node.role] || node.role;
  }

  /** The bubbles of a turn being played: the player's message (say, edit) and the reply's. */
  pending(request) {
    this.list.querySelector("p.empty")?.remove();
    if (request.kind === "say" || request.kind === "edit") {
      this.list.append(el("article.message.user.pending", {}, el("header", {}, el("span.who", { text: this.speaker({ role: "user" }) })), el("div.content", { text: request.text })));
    }
    const role = request.kind === "impersonate" ? "user" : "assistant";
    const bubble = el(`article.message.${role}.pending.streaming`, {}, el("header", {}, el("span.who", { text: this.speaker({ role }) })), el("div.content"));
    this.list.append(bubble);
    this.list.scrollTop = this.list.scrollHeight;
  }

  /**
   * Show a turn's events as they come (open(handlers) reads them: a new turn's or a
   * rejoined one's) into the last pending bubble; then reload. Whether it was stored.
   */
  async follow(open, turn = null) {
    const app = this.app;
    const content = [...this.list.querySelectorAll(".pending.streaming .content")].pop();
    const warned = new Set();
    this.running = new AbortController();
    this.turn = turn;
    this.stopping = false;
    this.root.classList.add("busy");
    this.setStatus("starting");
    let ok = false;
    try {
      const last = await open({
        signal: this.running.signal,
        onEvent: (kind, data) => {
          if (kind === "turn") {
            this.turn = data;
            if (this.stopping) this.cancel(); // Stop was pressed before the turn had an id
          } else if (kind === "token") {
            if (!content.childNodes.length) this.setStatus(""); // the reply has begun
            content.append(data.text);
            this.list.scrollTop = this.list.scrollHeight;
          } else if (kind === "status") this.setStatus(data.text);
          else if (kind === "reasoning") this.setStatus("thinking");
          else if (kind === "warning") this.warn(data.text, warned);
          else if (kind === "error") app.problem(data, "The turn failed");
        },
      });
      ok = last?.kind === "node" || Boolean(last?.kind === "cancelled" && last.data.user_node_id);
      if (last?.kind === "node" && this.stopping && last.data.incomplete) app.notify("Stopped", "The reply so far is kept, marked incomplete.");
      else if (last?.kind === "node") for (const warning of last.data.warnings || []) this.warn(warning, warned);
      if (last?.kind === "cancelled") app.notify("Stopped", "Stopped before the reply began: your message is kept.");
    } catch (error) {
      if (error.name === "AbortError") {
        // Stop could not reach the turn (another server process plays it): it plays on.
        app.notify("Not stopped", "This server could not stop the turn; its reply is kept when it ends.");
      } else app.fail(error, "The turn was refused");
    } finally {
      this.running = null;
      this.turn = null;
      this.root.classList.remove("busy");
      this.setStatus("");
    }
    await app.refresh();
    return ok;
  }

  /** A warning once (the event and the stored turn's list name the same ones). */
  warn(text, warned) {
    if (warned.has(text) || this.stopping) return;
    warned.add(text);
    this.app.notify("Warning", text);
  }

  /**
   * Stop the turn through the API: its reply so far is kept (or, before the reply,
   * the player's message); the stream goes on to the turn's last event.
   */
  stop() {
    if (!this.running || this.stopping) return;
    this.stopping = true;
    this.setStatus("stopping");
    if (this.turn) this.cancel(); // else as soon as its first event names it
  }

  async cancel() {
    try {
      await this.app.api.request("DELETE", this.app.path(`/turns/${encodeURIComponent(this.turn.turn_id)}`));
    } catch {
      this.running?.abort(); // a turn this process does not know (another worker's): leave it
    }
  }

  setStatus(text) {
    this.status.textContent = text ? `${text}…` : "";
  }
}
