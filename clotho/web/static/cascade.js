// Cascade, on the chat: after a player's message was edited as a fork, a bar above the
// composer offers "Regenerate the rest of this branch" when the old branch goes on below
// the original (GET .../cascade: the plan). Started, it follows POST .../cascade's events:
// a progress bar (step i of n, what is being made), the chat drawn again as each step is
// stored, and Stop (DELETE .../cascades/{id}: the step running stops as a turn does,
// every step made is kept). At the end, or when stopped, how the world state differs
// from the old branch's (the outcome's divergence); stopped, "Go on" posts again, which
// continues where it stopped, to the same leaf. After a reload, or back on its story, a
// cascade still running is rejoined; switching to another story stops following it (it
// runs on). Every path is built from the session the cascade belongs to.

import { sessionPath } from "./api.js";
import { t } from "./i18n.js";
import { clear, el, valueView } from "./ui.js";

export class CascadeBar {
  constructor(app) {
    this.app = app;
    this.box = null; // the bar, made on first use
    this.running = null; // {sid, id, controller, ...} while one is followed
    this.request = null; // the body it was started with (Go on posts it again)
    this.sid = null; // the session of `request`
  }

  /** The bar above the composer (made once). */
  bar() {
    if (!this.box) {
      this.box = el("section", { id: "cascade-bar", "aria-label": t("cascade.title"), "aria-live": "polite", hidden: true });
      document.getElementById("composer").before(this.box);
    }
    return this.box;
  }

  hide() {
    if (this.box && !this.running) {
      this.box.hidden = true;
      clear(this.box);
    }
  }

  /** Another story is shown: stop following (the stream, not the cascade) and hide. */
  leave() {
    const run = this.running;
    this.running = null;
    this.request = null;
    if (run) {
      run.left = true;
      run.controller.abort();
    }
    this.hide();
  }

  /**
   * `original` (a player's message) was just edited as a fork: offer the cascade if its
   * old branch goes on below it. The fork is the message beside it on the path shown.
   */
  async offer(original) {
    const app = this.app;
    const sid = app.sid;
    const shown = app.views.chat.story_?.nodes || [];
    const fork = shown.find((n) => n.parent_id === original.parent_id && n.id !== original.id);
    if (!fork || this.running) return;
    const query = new URLSearchParams({ node_id: fork.id, from_id: original.id });
    let plan;
    try {
      plan = await app.api.get(sessionPath(sid, `/cascade?${query}`));
    } catch {
      return; // nothing below the original (invalid_cascade): nothing to offer
    }
    if (plan.done >= plan.total || app.sid !== sid || this.running) return;
    this.sid = sid;
    this.request = { node_id: plan.fork_id, from_id: plan.original_id, to_id: plan.leaf_id };
    const box = clear(this.bar());
    box.hidden = false;
    box.append(
      el("p", { text: t("cascade.offer", { n: plan.total - plan.done }) }),
      el(
        "div.cascade-buttons",
        {},
        el("button.primary", { type: "button", text: t("cascade.start"), onclick: () => this.start() }),
        el("button", { type: "button", text: t("cascade.not_now"), onclick: () => this.hide() }),
      ),
    );
  }

  /** Post the cascade (again: it goes on where it stopped) and follow its events. */
  async start() {
    const app = this.app;
    const sid = this.sid || app.sid;
    const ifMatch = sid === app.sid ? app.version : undefined;
    await this.follow(sid, (handlers) => app.api.stream(sessionPath(sid, "/cascade"), this.request || {}, { ifMatch, ...handlers }));
  }

  /** After a reload, or back on its story: a cascade of the session shown still running
   * is followed again. */
  async rejoin() {
    const app = this.app;
    const sid = app.sid;
    if (this.running || !sid) return;
    let found;
    try {
      found = (await app.api.get(sessionPath(sid, "/cascades?status=running"))).cascades[0];
    } catch {
      return;
    }
    if (!found || this.running || app.sid !== sid) return;
    this.sid = sid;
    this.request = { node_id: found.fork_id, from_id: found.original_id, to_id: found.leaf_id };
    await this.follow(sid, (handlers) => app.api.stream(found.events, undefined, handlers), found);
  }

  /** Draw the progress of the events `open(handlers)` reads (of session `sid`), then the
   * outcome; nothing more once another story is shown (leave). */
  async follow(sid, open, known = null) {
    const app = this.app;
    const box = clear(this.bar());
    box.hidden = false;
    const label = el("p.cascade-step", { text: t("cascade.starting") });
    const bar = el("progress", { max: known?.total || 1, value: known?.done || 0, "aria-label": t("cascade.title") });
    const stop = el("button", { type: "button", text: t("app.stop"), onclick: () => this.stop() });
    box.append(label, bar, el("div.cascade-buttons", {}, stop));
    const run = { sid, id: known?.cascade_id || null, controller: new AbortController(), stopping: false, left: false, stop };
    this.running = run;
    let last = null;
    try {
      last = await open({
        signal: run.controller.signal,
        onEvent: (kind, data) => {
          if (run.left) return;
          if (kind === "cascade") {
            run.id = data.cascade_id;
            bar.max = data.total;
            bar.value = data.done;
            if (run.stopping) this.cancel(run); // Stop pressed before it had an id
          } else if (kind === "progress") {
            bar.max = data.total;
            const what = data.role === "assistant" ? t(data.generate ? "cascade.regenerating" : "cascade.copying_reply", { name: data.name || t("app.role_assistant") }) : t(data.role === "user" ? "cascade.copying_message" : "cascade.copying_system");
            label.textContent = t("cascade.step", { i: data.step, n: data.total, what });
          } else if (kind === "step") {
            bar.value = data.step;
            app.refresh(); // the chat grows as each step is stored
          } else if (kind === "error") app.problem(data, t("cascade.failed"));
        },
      });
    } catch (error) {
      if (error.name !== "AbortError" && !run.left) app.fail(error, t("cascade.refused"));
    } finally {
      if (this.running === run) this.running = null;
    }
    if (run.left) return; // another story is shown: its bar is not this one's
    await app.refresh();
    if (last?.kind === "outcome") this.outcome(last.data);
    else this.hide();
  }

  stop() {
    const run = this.running;
    if (!run || run.stopping) return;
    run.stopping = true;
    run.stop.disabled = true;
    this.bar().querySelector(".cascade-step").textContent = t("cascade.stopping");
    if (run.id) this.cancel(run);
  }

  async cancel(run) {
    try {
      await this.app.api.request("DELETE", sessionPath(run.sid, `/cascades/${encodeURIComponent(run.id)}`));
    } catch {
      run.controller.abort(); // another server process runs it: leave it
    }
  }

  /** The end: how many steps, and how the world state differs from the old branch's. */
  outcome(doc) {
    const box = clear(this.bar());
    box.hidden = false;
    const head = doc.complete ? t("cascade.done", { n: doc.total }) : t("cascade.stopped", { i: doc.done, n: doc.total });
    box.append(el("p.cascade-head", { text: head }));
    const paths = Object.entries(doc.divergence || {});
    if (!paths.length) box.append(el("p.muted", { text: t("cascade.same_state") }));
    else {
      box.append(el("p", { text: t(doc.complete ? "cascade.diverged" : "cascade.diverged_so_far") }));
      box.append(
        el(
          "table.cascade-divergence",
          {},
          el("thead", {}, el("tr", {}, el("th", { text: t("cascade.path") }), el("th", { text: t("cascade.old") }), el("th", { text: t("cascade.new") }))),
          el("tbody", {}, paths.map(([path, [before, after]]) => el("tr", {}, el("th", { text: path }), el("td", {}, valueView(before)), el("td", {}, valueView(after))))),
        ),
      );
    }
    const buttons = el("div.cascade-buttons");
    if (!doc.complete) buttons.append(el("button.primary", { type: "button", text: t("cascade.go_on"), onclick: () => this.start() }));
    buttons.append(el("button", { type: "button", text: t("app.close"), onclick: () => this.hide() }));
    box.append(buttons);
  }
}
