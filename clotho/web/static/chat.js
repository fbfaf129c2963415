// The chat view ("immersion"): the story root → HEAD, replies streaming in, and the
// turns as SillyTavern players expect them: swipes (`<`/`>` on every fork; `>` on the
// last alternative of the last reply generates a new one), Continue extending the
// reply, Impersonate filling the input box, a reply edited in place, "delete from here"
// (to the trash, undoable), "branch from here" on older messages; the world state beside.
// With several characters (the cast, cast.js): each reply under its speaker's name and
// picture, a message answered by one member or by a round of them (the speaker order
// decides who, one turn each; Stop ends the round), and a change of scene shown as
// narration, set apart from the characters' lines.

import { renderFormatted } from "./format.js";
import { t } from "./i18n.js";
import { renderState } from "./panels.js";
import { avatar, clear, el, formatTokens, toast } from "./ui.js";

const PAGE = 200; // messages read at a time, newest first; "Show earlier" reads the window before
const ATTEMPTS = 3; // reads of a story that changes while it is read window by window

export class ChatView {
  constructor(app) {
    this.app = app;
    this.root = document.getElementById("chat-view");
    this.list = document.getElementById("messages");
    this.side = document.getElementById("world-state");
    this.status = document.getElementById("turn-status");
    this.input = document.getElementById("composer-input");
    this.shown = PAGE; // how many of the last messages to show
    this.state = null;
    this.running = null; // the AbortController of the turn streaming now
    this.round = null; // a round of turns playing (several members answering): {stopped}
    this.turn = null; // that turn, as its first event told (its id, its events)
    this.stopping = false; // the player asked to stop it
    this.story_ = null; // the projection shown (its nodes: what Continue and the buttons see)
    this.keep = null; // where the view stays after the next render: {index, offset}
    this.buttons = {
      send: document.querySelector("#composer button[type=submit]"),
      continue: document.getElementById("continue"),
      impersonate: document.getElementById("impersonate"),
      stop: document.getElementById("stop"),
    };
    document.getElementById("composer").addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.send();
        return;
      }
      // Ctrl+Z right after a turn, the input empty: nothing to take back in it, so the
      // story's last step is (the turn); with text in it, the text's own undo.
      const key = event.key.toLowerCase();
      if ((event.ctrlKey || event.metaKey) && !event.altKey && (key === "z" || key === "y") && !this.input.value) {
        event.preventDefault();
        this.app.undo(key === "y" || event.shiftKey ? "redo" : "undo");
      }
    });
    document.getElementById("continue").addEventListener("click", () => this.play({ kind: "continue" }));
    document.getElementById("impersonate").addEventListener("click", () => this.play({ kind: "impersonate" }));
    document.getElementById("stop").addEventListener("click", () => this.stop());
    // The input and Send come disabled in the page until here: a line typed while the
    // page loads is not lost to a newline, nor sent as a form the page never sees.
    this.input.disabled = false;
    this.buttons.send.disabled = false;
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
      app.cast.load().catch((error) => app.fail(error, t("cast.loading"))), // the story is shown all the same
    ]);
    if (sid !== app.sid) return; // another session was chosen meanwhile
    app.setVersion(story.version);
    const keep = this.keep;
    this.keep = null;
    this.render(story, null, keep);
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
      this.app.fail(error, t("chat.loading_earlier"));
    }
  }

  render(projection, keep = null, place = null) {
    this.story_ = projection;
    // A turn streaming now keeps its bubbles (a reload may land while it streams).
    const pending = this.running ? [...this.list.querySelectorAll(".pending")] : [];
    clear(this.list);
    const nodes = projection.nodes;
    if (projection.next) {
      this.list.append(
        el("button.earlier", {
          type: "button",
          text: t("chat.earlier", { count: Math.min(PAGE, projection.earlier), hidden: projection.earlier }),
          onclick: (event) => {
            event.currentTarget.disabled = true;
            this.showEarlier(projection);
          },
        }),
      );
    }
    if (!nodes.length && !pending.length) {
      // An empty story: say something, or start one from a character card instead.
      this.list.append(
        el(
          "div.empty",
          {},
          el("p", { text: t("chat.empty") }),
          el("button.primary", { type: "button", text: t("chat.empty_new_story"), onclick: () => this.app.stories.startNew() }),
        ),
      );
    }
    // Who speaks: a node's own name, else the name its role last had above it in the
    // story (the turns store the session's names on the nodes they make), else the
    // name the session was given (the player's persona, an imported chat's player and
    // character, the character of its card), else its role.
    const session = this.app.sessions.find((s) => s.id === this.app.sid);
    const given = session?.metadata?.names || {};
    this.names = { user: session?.metadata?.settings?.persona?.name || given.player, assistant: given.character || session?.character };
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
    this.app.setUsage(last, last ? spent : null);
    const shown = [...this.list.querySelectorAll("article.message")];
    const kept = keep && shown.find((m) => m.dataset.nodeId === keep);
    const again = place && shown[place.index];
    if (kept) kept.scrollIntoView({ block: "start" });
    else if (again) this.list.scrollTop = again.offsetTop - place.offset; // a swipe: the view stays
    else this.list.scrollTop = this.list.scrollHeight;
    this.updateButtons();
  }

  /** Send, Continue, Impersonate and Stop enabled only when they have something to do. */
  updateButtons() {
    const busy = this.busy();
    this.root.classList.toggle("busy", busy);
    const empty = !this.story_?.nodes?.length;
    if (this.buttons.send) this.buttons.send.disabled = busy;
    this.buttons.continue.disabled = busy || empty;
    this.buttons.impersonate.disabled = busy;
    this.buttons.stop.disabled = !busy || this.stopping;
    this.app.cast.setBusy(busy); // its Speak, Leave and Join wait for the turn (the panel is not drawn again)
  }

  /** A turn (or a round of them) is playing. */
  busy() {
    return Boolean(this.running || this.round);
  }

  /** Keep the message shown at `article` where it is through the next render. */
  stay(article) {
    const shown = [...this.list.querySelectorAll("article.message")];
    const index = shown.indexOf(article);
    if (index >= 0) this.keep = { index, offset: article.offsetTop - this.list.scrollTop };
  }

  message(node, isLast) {
    if (node.role === "system" && node.metadata?.scene) return this.sceneChange(node, isLast);
    const generated = Boolean(node.metadata?.generated);
    // SillyTavern's swipes: `>` on the last alternative of the last reply asks for a new one.
    const lastReply = isLast && node.role === "assistant";
    const count = node.siblings.length;
    const alternatives =
      count > 1 || lastReply
        ? el(
            "span.alternatives",
            { "aria-label": t("chat.alternatives") },
            el("button.prev", { type: "button", title: t("chat.previous"), "aria-label": t("chat.previous"), text: "<", disabled: node.index === 0, onclick: (event) => this.swipe(node, "prev", event) }),
            el("span.count", { text: `${node.index + 1}/${count}` }),
            el("button.next", {
              type: "button",
              title: node.index === count - 1 ? t("chat.swipe_new") : t("chat.next"),
              "aria-label": node.index === count - 1 ? t("chat.swipe_new") : t("chat.next"),
              text: ">",
              disabled: node.index === count - 1 && !lastReply,
              onclick: (event) => (node.index === count - 1 ? this.play({ kind: "reroll", node_id: node.id }, node) : this.swipe(node, "next", event)),
            }),
          )
        : null;
    const actions = el(
      "span.actions",
      {},
      el("button.edit", { type: "button", text: t("chat.edit"), title: node.role === "user" ? t("chat.edit_user_title") : t("chat.edit_reply_title"), onclick: () => this.edit(node) }),
      lastReply ? el("button.reroll", { type: "button", text: t("chat.reroll"), title: t("chat.reroll_title"), onclick: () => this.play({ kind: "reroll", node_id: node.id }, node) }) : null,
      isLast ? null : el("button.branch", { type: "button", text: t("chat.branch"), title: t("chat.branch_title"), onclick: () => this.branch(node) }),
      el("button.toggle", {
        type: "button",
        text: node.enabled ? t("chat.hide") : t("chat.unhide"),
        title: node.enabled ? t("chat.hide_title") : t("chat.unhide_title"),
        onclick: () => this.app.edit([{ op: "toggle", node_id: node.id }], node.enabled ? t("chat.hiding") : t("chat.unhiding")),
      }),
      el("button.delete", { type: "button", text: t("chat.delete"), title: t("chat.delete_title"), onclick: () => this.deleteFrom(node) }),
      generated ? el("button.trace", { type: "button", text: t("chat.trace"), title: t("chat.trace_title"), onclick: () => this.app.openTrace(node.id) }) : null,
      generated && node.role === "assistant" && !node.metadata.continues ? el("button.replay", { type: "button", text: t("replay.open"), title: t("replay.open_title"), onclick: () => this.app.replay.open(node) }) : null,
    );
    const meta = [];
    if (node.metadata?.usage) meta.push(formatTokens(node.metadata.usage));
    if (node.metadata?.incomplete) meta.push(t("chat.incomplete", { why: node.metadata.stopped_by || t("chat.stopped") }));
    if (!node.enabled) meta.push(t("chat.hidden"));
    return el(
      `article.message.${node.role}${node.enabled ? "" : ".disabled"}${isLast ? ".last" : ""}`,
      { dataset: { nodeId: node.id, role: node.role } },
      el("header", {}, this.face(node), el("span.who", { text: this.speaker(node) }), alternatives, el("details.node-id", {}, el("summary", { text: t("app.node_id"), title: t("app.node_id_title") }), el("code", { text: node.id })), actions),
      renderFormatted(el("div.content"), node.content),
      meta.length ? el("footer", { text: meta.join(" · ") }) : null,
    );
  }

  /** A change of scene (someone leaves or joins): narration, set apart, no bubble; in the
   * page's language unless its text was rewritten. */
  sceneChange(node, isLast) {
    const [move, name] = Object.entries(node.metadata.scene)[0] || [];
    const stored = { leaves: `${name} leaves the scene.`, joins: `${name} joins the scene.` }[move];
    const text = stored && node.content === stored ? t(`cast.narration_${move}`, { name }) : node.content;
    return el(
      `article.message.system.scene${node.enabled ? "" : ".disabled"}${isLast ? ".last" : ""}`,
      { dataset: { nodeId: node.id, role: node.role, scene: move || "" } },
      el("p.narration", { text }),
    );
  }

  /** Another alternative of a node; the view stays on the message. */
  async swipe(node, direction, event) {
    const article = event?.target?.closest("article.message");
    if (article) this.stay(article);
    await this.app.write("POST", "/swipe", { direction, node_id: node.id }, t("chat.swiping"));
  }

  /** HEAD to an older message: the story goes on from there (what was below stays, an alternative). */
  async branch(node) {
    const article = this.list.querySelector(`article.message[data-node-id="${CSS.escape(node.id)}"]`);
    if (article) this.stay(article);
    await this.app.write("PUT", "/head", { node_id: node.id }, t("chat.branching"));
  }

  /** The message and everything below it to the trash (undoable), after the player says yes. */
  async deleteFrom(node) {
    const shown = this.story_?.nodes || [];
    const at = shown.findIndex((n) => n.id === node.id);
    const below = at >= 0 ? shown.length - at - 1 : 0;
    const answer = await this.app.ask(t("chat.delete_confirm", { count: below + 1, below }), [], [{ value: "delete", label: t("chat.delete_yes") }]);
    if (!answer) return;
    await this.app.edit([{ op: "delete", node_id: node.id }], t("chat.deleting"));
  }

  async edit(node) {
    const field = [{ name: "content", label: t("chat.text"), value: node.content, multiline: true }];
    if (node.role === "user") {
      const buttons = [
        { value: "reply", label: t("chat.fork_reply") },
        { value: "fork", label: t("chat.fork_only") },
      ];
      const answer = await this.app.ask(t("chat.edit_user"), field, buttons);
      if (!answer) return;
      const speaker = this.app.cast.chosen() || undefined; // else the order's first
      if (answer.action === "reply") await this.play({ kind: "edit", node_id: node.id, text: answer.content, speaker }, node);
      else await this.app.write("POST", `/nodes/${encodeURIComponent(node.id)}/fork`, { content: answer.content }, t("chat.forking"));
      this.app.cascade.offer(node); // the old branch below it, regenerated on request
      return;
    }
    // A reply (or a system message) is edited in place: one undo step takes it back.
    const buttons = [
      { value: "rewrite", label: t("chat.save") },
      { value: "fork", label: t("chat.save_fork") },
    ];
    const answer = await this.app.ask(t("chat.edit_reply"), field, buttons);
    if (!answer || answer.content === node.content) return;
    const article = this.list.querySelector(`article.message[data-node-id="${CSS.escape(node.id)}"]`);
    if (article) this.stay(article);
    if (answer.action === "rewrite") await this.app.edit([{ op: "rewrite", node_id: node.id, content: answer.content }], t("chat.saving"));
    else {
      await this.app.write("POST", `/nodes/${encodeURIComponent(node.id)}/fork`, { content: answer.content }, t("chat.forking"));
      this.app.cascade.offer(node); // the old branch below it, regenerated on request
    }
  }

  async send() {
    const text = this.input.value;
    if (!text.trim() || this.busy()) {
      this.input.focus();
      return;
    }
    this.input.value = ""; // sent: Enter again sends nothing (Stop keeps what was stored)
    const restore = () => {
      if (!this.stopping && !this.input.value) this.input.value = text; // refused: nothing stored
    };
    const cast = this.app.cast;
    if (!cast.several()) {
      if (!(await this.play({ kind: "say", text }))) restore();
      return;
    }
    // Several characters: the one picked answers, else those the order names, in turn.
    this.round = { stopped: false };
    this.updateButtons();
    try {
      let names = cast.chosen() ? [cast.chosen()] : null;
      if (!names) {
        try {
          names = await cast.speakers(text);
        } catch (error) {
          this.app.fail(error, t("cast.asking_speakers"));
          return restore();
        }
      }
      if (this.round.stopped) {
        // Stopped while asking who answers: no turn started, nothing stored.
        this.stopping = false;
        this.setStatus("");
        return restore();
      }
      if (!names.length) {
        toast(t("cast.no_speaker"), t("cast.no_speaker_detail"), "error");
        return restore();
      }
      if (!(await this.play({ kind: "say", text, speaker: names[0] }, null, true))) return restore();
      for (const name of names.slice(1)) {
        if (this.round.stopped) break;
        if (!(await this.play({ kind: "reply", speaker: name }, null, true))) break;
      }
    } finally {
      this.round = null;
      this.stopping = false;
      this.updateButtons();
    }
  }

  /** Stream a turn into the view: pending bubbles, tokens as they come, then reload. */
  async play(request, replacing = null, inRound = false) {
    if (this.running || (this.round && !inRound)) return false;
    const app = this.app;
    // What the new reply replaces in the view: from the rerolled/edited message on.
    if (replacing) {
      const shown = [...this.list.querySelectorAll("article.message")];
      const at = shown.findIndex((item) => item.dataset.nodeId === replacing.id);
      if (at >= 0) shown.slice(at).forEach((item) => item.remove());
    }
    this.asked = request;
    this.pending(request, replacing);
    // detach: the turn plays on if this page goes (a reload rejoins it); Stop cancels it.
    const path = app.path("/turns?detach=true");
    return this.follow((handlers) => app.api.stream(path, request, { ifMatch: app.version, ...handlers }));
  }

  /** The name shown for who speaks a node (or a role, for a bubble still streaming). */
  speaker(node) {
    const roles = { user: t("app.role_user"), assistant: t("app.role_assistant"), system: t("app.role_system") };
    return node.name || this.names?.[node.role] || roles[node.role] || node.role;
  }

  /** The speaker's avatar: on a reply its speaker's picture (the cast's), else an initial. */
  face(node) {
    const name = this.speaker(node);
    return avatar(name, node.role === "assistant" ? this.app.cast.picture(node.name) : null);
  }

  /** The bubbles of a turn being played: the player's message (say, edit) and the reply's. */
  pending(request, replacing = null) {
    this.list.querySelector(".empty")?.remove();
    if (request.kind === "impersonate") return; // the player's line streams into the input box
    const last = this.story_?.nodes?.at(-1);
    const shown = [...this.list.querySelectorAll("article.message:not(.pending)")].at(-1);
    if (request.kind === "continue" && last?.role === "assistant" && shown?.dataset.nodeId === last.id) {
      // Continue extends the reply in place: its text so far, the continuation after it.
      shown.classList.add("pending", "streaming");
      const content = shown.querySelector(".content");
      clear(content).append(last.content);
      return;
    }
    if (request.kind === "say" || request.kind === "edit") {
      this.list.append(el("article.message.user.pending", {}, el("header", {}, this.face({ role: "user" }), el("span.who", { text: this.speaker({ role: "user" }) })), el("div.content", { text: request.text })));
    }
    const role = request.kind === "impersonate" ? "user" : "assistant";
    // Who speaks it: the one asked for, else (a reroll) the speaker of the reply it replaces.
    const name = request.speaker || (replacing?.role === "assistant" ? replacing.name : null) || null;
    const who = { role, name };
    const bubble = el(`article.message.${role}.pending.streaming`, { dataset: { speaker: name || "" } }, el("header", {}, this.face(who), el("span.who", { text: this.speaker(who) })), el("div.content"));
    this.list.append(bubble);
    this.list.scrollTop = this.list.scrollHeight;
  }

  /**
   * Show a turn's events as they come (open(handlers) reads them: a new turn's or a
   * rejoined one's) into the last pending bubble; then reload. Whether it was stored.
   */
  async follow(open, turn = null) {
    const app = this.app;
    const drafting = (turn?.request?.kind || this.asked?.kind) === "impersonate";
    const content = drafting ? null : [...this.list.querySelectorAll(".pending.streaming .content")].pop();
    const warned = new Set();
    if (drafting) this.input.value = "";
    this.running = new AbortController();
    this.turn = turn;
    if (!this.round) this.stopping = false; // a round's Stop stops the rest of it too
    this.updateButtons();
    this.setStatus(t("chat.starting"));
    let ok = false;
    try {
      const last = await open({
        signal: this.running.signal,
        onEvent: (kind, data) => {
          if (kind === "turn") {
            this.turn = data;
            if (this.stopping) this.cancel(); // Stop was pressed before the turn had an id
          } else if (kind === "token") {
            if (drafting) {
              if (!this.input.value) this.setStatus("");
              this.input.value += data.text;
              return;
            }
            if (!content.dataset.begun) {
              content.dataset.begun = "1";
              this.setStatus(""); // the reply has begun
            }
            content.append(data.text);
            this.list.scrollTop = this.list.scrollHeight;
          } else if (kind === "status") this.setStatus(data.text);
          else if (kind === "reasoning") this.setStatus(t("chat.thinking"));
          else if (kind === "warning") this.warn(data.text, warned);
          else if (kind === "error") app.problem(data, t("chat.turn_failed"));
        },
      });
      ok = last?.kind === "node" || last?.kind === "draft" || Boolean(last?.kind === "cancelled" && last.data.user_node_id);
      if (last?.kind === "draft") {
        // Impersonate: the player's line, stored nowhere, to edit and send.
        this.input.value = last.data.text;
        this.input.focus();
      }
      if (last?.kind === "node" && this.stopping && last.data.incomplete) app.notify(t("chat.stopped_title"), t("chat.stopped_kept"));
      else if (last?.kind === "node" || last?.kind === "draft") for (const warning of last.data.warnings || []) this.warn(warning, warned);
      if (last?.kind === "cancelled") app.notify(t("chat.stopped_title"), last.data.user_node_id ? t("chat.stopped_message_kept") : t("chat.stopped_nothing"));
    } catch (error) {
      if (error.name === "AbortError") {
        // Stop could not reach the turn (another server process plays it): it plays on.
        app.notify(t("chat.not_stopped_title"), t("chat.not_stopped"));
      } else app.fail(error, t("chat.turn_refused"));
    } finally {
      this.running = null;
      this.turn = null;
      this.asked = null;
      this.setStatus("");
      this.updateButtons();
    }
    await app.refresh();
    return ok;
  }

  /** A warning once (the event and the stored turn's list name the same ones). */
  warn(text, warned) {
    if (warned.has(text) || this.stopping) return;
    warned.add(text);
    this.app.notify(t("chat.warning"), text);
  }

  /**
   * Stop the turn through the API: its reply so far is kept (or, before the reply,
   * the player's message); the stream goes on to the turn's last event.
   */
  stop() {
    if (!this.busy() || this.stopping) return;
    this.stopping = true;
    if (this.round) this.round.stopped = true;
    this.updateButtons();
    this.setStatus(t("chat.stopping"));
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
