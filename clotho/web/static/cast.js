// The cast: the characters who share the story, at the top of the chat's side panel
// (the drawer at phone width), as SillyTavern's group members are. Each member with its
// picture (or its initial on its colour), its name, present or away, muted or not, and
// what can be done with it: speak next (a `reply` turn, SillyTavern's "trigger"), mute,
// leave or join the scene (a narration node: Undo takes it back), remove (asked first);
// folded under More, its description, talkativeness and own lore.
// Below them: Add a character (a card uploaded, or one written in place) and the
// speaker order. By the message input, "Who answers": the order decides (auto), or a
// member picked.
//
// Everything comes from GET .../cast, read again with the story; every write names the
// version shown (If-Match), as the page's other writes do (app.write).

import { newKey } from "./api.js";
import { t } from "./i18n.js";
import { avatar, clear, el, showError } from "./ui.js";

/** The speaker orders, as CastSettings names them. */
const ORDERS = ["natural", "round_robin", "narrator", "manual"];
/** The speaker choice meaning "the order decides". */
export const AUTO = "";

const enc = encodeURIComponent;

/** A Blob as a data: URL (the page's CSP allows data: images); null when unreadable. */
function dataUrl(blob) {
  return new Promise((resolve) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => resolve(null);
    reader.readAsDataURL(blob);
  });
}

export class CastPanel {
  constructor(app) {
    this.app = app;
    this.cast = null; // GET .../cast as last read (null: unknown, or the server has no cast)
    this.sid = null; // the session it was read for
    this.pictures = new Map(); // "sid\nname" → a promise of the member's picture (data: URL) or null
    this.opened = new Set(); // the members whose details are unfolded
    this.box = document.getElementById("cast-panel");
    this.choice = document.getElementById("speaker");
    this.choiceRow = document.getElementById("speaker-choice");
  }

  /** The cast of the session shown, read again (a server without the cast: none). */
  async load() {
    const app = this.app;
    const sid = app.sid;
    let cast = null;
    try {
      cast = await app.api.get(app.path("/cast"));
    } catch (error) {
      if (error.status !== 404 && error.status !== 405) throw error;
    }
    if (sid !== app.sid) return;
    if (this.sid !== sid) {
      this.pictures.clear();
      this.opened.clear();
    } else {
      // The story's picture is its first member's: read again once that one changed.
      const first = (c) => c?.members?.[0] && `${c.members[0].name}\n${c.members[0].avatar}`;
      if (first(this.cast) !== first(cast)) {
        for (const key of [...this.app.avatars.keys()]) if (key === sid || key.startsWith(`/api/sessions/${sid}/`)) this.app.avatars.delete(key);
      }
    }
    this.sid = sid;
    this.cast = cast;
    this.render();
  }

  members() {
    return this.cast?.members || [];
  }

  /** The member named `name`, or null. */
  member(name) {
    return this.members().find((m) => m.name === name) || null;
  }

  /** More than one character: who answers matters. */
  several() {
    return this.members().length > 1;
  }

  /** The member picked to answer, or AUTO (the order decides). */
  chosen() {
    return this.several() ? this.choice.value : AUTO;
  }

  /** Who answers the player's `text` (or speaks next, with none), in order. */
  async speakers(text) {
    // A POST: the message is the body, as long as a say's (a URL holds far less).
    const { data } = await this.app.api.request("POST", this.app.path("/speakers"), { json: { text: text ?? null } });
    return data.speakers;
  }

  /**
   * A speaker's picture (a promise of a data: URL, or of null: its initial is shown):
   * the member's own, read by its name; an unnamed reply is the session's character's
   * (the first member); in a cast of several, a name the cast does not know (a removed
   * member, the narrator) has none: never another member's face; in a story of one
   * character, every reply is its (an imported chat may name it otherwise). A server
   * without the cast: the story's.
   */
  picture(name) {
    if (!this.cast) return this.app.avatarImage(this.app.sid);
    const first = this.members()[0];
    const member = name ? this.member(name) || (this.several() ? null : first) : first;
    if (!member?.avatar) return Promise.resolve(null);
    const key = `${this.app.sid}\n${member.name}`;
    if (!this.pictures.has(key)) {
      const read = this.app.api
        .request("GET", this.app.path(`/cast/${enc(member.name)}/avatar`), { as: "blob" })
        .then(({ data }) => dataUrl(data))
        .catch(() => null);
      this.pictures.set(key, read);
    }
    return this.pictures.get(key);
  }

  /** Forget the picture read for `name` (it was removed, or added anew). */
  forget(name) {
    this.pictures.delete(`${this.app.sid}\n${name}`);
  }

  // -- the panel ----------------------------------------------------------------------

  render() {
    const box = this.box;
    if (!box) return;
    box.hidden = !this.cast;
    this.renderChoice();
    // At phone width the panel is in the side drawer: its button says so once there is a cast.
    if (this.app.view === "chat") document.getElementById("side-toggle").textContent = this.several() ? t("cast.side_toggle") : t("app.side_state");
    if (!this.cast) return clear(box);
    const members = this.members();
    const list = el(
      "ul.cast-members",
      {},
      members.map((m) => this.row(m)),
    );
    const order = el(
      "select",
      { id: "cast-order", "aria-label": t("cast.order"), onchange: (event) => this.setOrder(event.target.value) },
      ORDERS.map((o) => el("option", { value: o, text: t(`cast.order_${o}`), selected: o === this.cast.order })),
    );
    clear(box).append(
      el("h2", { text: t("cast.title") }),
      members.length ? list : el("p.muted", { text: t("cast.none") }),
      el(
        "div.cast-tools",
        {},
        el("button", { type: "button", id: "cast-add", text: t("cast.add"), title: t("cast.add_title"), onclick: () => this.openAdd() }),
        members.length > 1 ? el("label.cast-order", { title: t("cast.order_title") }, el("span", { text: t("cast.order") }), order) : null,
        members.length > 1
          ? el(
              "label.cast-recap",
              { title: t("cast.recap_title") },
              el("input", {
                type: "checkbox",
                id: "cast-recap",
                checked: Boolean(this.cast.recap_missed),
                onchange: (event) => this.setRecap(event.target.checked),
              }),
              el("span", { text: t("cast.recap") }),
            )
          : null,
      ),
    );
  }

  /** Speak, Leave and Join wait for the turn playing: only their `disabled` changes, so
   * an open select, a slider being dragged or a member unfolded stays as it is. */
  setBusy(busy) {
    if (!this.box) return;
    for (const row of this.box.querySelectorAll("li.cast-member")) {
      const member = this.member(row.dataset.name);
      if (!member) continue;
      const speak = row.querySelector("button.cast-speak");
      if (speak) speak.disabled = busy || !member.present || member.muted;
      for (const button of row.querySelectorAll("button.cast-leave, button.cast-join")) button.disabled = busy;
    }
  }

  /** One member: its picture, name and state, and what can be done with it. */
  row(member) {
    const busy = Boolean(this.app.views.chat?.busy());
    const state = [member.present ? t("cast.present") : t("cast.away")];
    if (member.muted) state.push(t("cast.muted"));
    if (member.first) state.push(t("cast.first"));
    const button = (action, text, title, onclick, disabled = false) =>
      el(`button.cast-${action}`, { type: "button", text, title, "aria-label": `${text}: ${member.name}`, onclick, disabled });
    const details = this.more(member);
    return el(
      `li.cast-member${member.present ? "" : ".away"}${member.muted ? ".is-muted" : ""}`,
      { dataset: { name: member.name, present: String(member.present), muted: String(member.muted) } },
      avatar(member.name, this.picture(member.name)),
      el("div.cast-who", {}, el("span.cast-name", { text: member.name }), el("span.cast-state", { text: state.join(" · ") })),
      el(
        "div.cast-actions",
        {},
        button("speak", t("cast.speak"), t("cast.speak_title", { name: member.name }), () => this.speak(member.name), busy || !member.present || member.muted),
        button("mute", member.muted ? t("cast.unmute") : t("cast.mute"), member.muted ? t("cast.unmute_title") : t("cast.mute_title"), () => this.setMuted(member)),
        member.present
          ? button("leave", t("cast.leave"), t("cast.leave_title", { name: member.name }), () => this.move(member.name, "leave"), busy)
          : button("join", t("cast.join"), t("cast.join_title", { name: member.name }), () => this.move(member.name, "join"), busy),
        this.moreButton(member, details),
        button("remove", t("cast.remove"), t("cast.remove_title"), () => this.remove(member.name)),
      ),
      details,
    );
  }

  /** More / Less: unfolds the member's details (they stay so when the panel is drawn again). */
  moreButton(member, details) {
    const open = () => this.opened.has(member.name);
    const toggle = el("button.cast-more", { type: "button", "aria-expanded": String(open()), text: open() ? t("cast.less") : t("cast.more") });
    toggle.addEventListener("click", () => {
      if (open()) this.opened.delete(member.name);
      else this.opened.add(member.name);
      details.hidden = !open();
      toggle.setAttribute("aria-expanded", String(open()));
      toggle.textContent = open() ? t("cast.less") : t("cast.more");
    });
    return toggle;
  }

  /** A member's details (folded unless More unfolded them): its description, its
   * talkativeness (a slider, saved when let go), its own lore. */
  more(member) {
    const percent = (value) => `${Math.round(value * 100)}%`;
    const shown = el("output.cast-talk-value", { text: percent(member.talkativeness) });
    const slider = el("input", {
      type: "range",
      min: "0",
      max: "1",
      step: "0.05",
      value: String(member.talkativeness),
      "aria-label": `${t("cast.talkativeness")}: ${member.name}`,
      oninput: (event) => (shown.textContent = percent(Number(event.target.value))),
      onchange: (event) => this.setTalkativeness(member, Number(event.target.value)),
    });
    return el(
      "div.cast-details",
      { hidden: !this.opened.has(member.name) },
      member.description ? el("p.cast-description", { text: member.description }) : el("p.muted", { text: t("cast.no_description") }),
      el("label.cast-talk", { title: t("cast.talkativeness_title") }, el("span", { text: t("cast.talkativeness") }), slider, shown),
      el("p.cast-books", { text: member.books.length ? t("cast.books", { books: member.books.join(", ") }) : t("cast.no_books") }),
    );
  }

  /** "Who answers" by the message input: shown when the cast has several members. */
  renderChoice() {
    if (!this.choice) return;
    const several = this.several();
    this.choiceRow.hidden = !several;
    const kept = this.choice.value;
    const options = [el("option", { value: AUTO, text: t("cast.auto", { order: t(`cast.order_${this.cast?.order || "natural"}`) }) })];
    for (const m of this.members()) {
      const why = !m.present ? t("cast.away") : m.muted ? t("cast.muted") : "";
      options.push(el("option", { value: m.name, text: why ? `${m.name} (${why})` : m.name, disabled: Boolean(why) }));
    }
    clear(this.choice).append(...options);
    const still = this.members().find((m) => m.name === kept && m.present && !m.muted);
    this.choice.value = still ? kept : AUTO;
  }

  // -- what the buttons do ---------------------------------------------------------------

  /** The member speaks now, with no message of the player's (a `reply` turn). */
  speak(name) {
    this.app.setDrawer(false); // at phone width: the drawer makes way for the reply
    this.app.views.chat.play({ kind: "reply", speaker: name });
  }

  setMuted(member) {
    const doing = member.muted ? t("cast.unmuting", { name: member.name }) : t("cast.muting", { name: member.name });
    return this.app.write("PATCH", `/cast/${enc(member.name)}`, { muted: !member.muted }, doing);
  }

  setTalkativeness(member, value) {
    return this.app.write("PATCH", `/cast/${enc(member.name)}`, { talkativeness: value }, t("cast.saving_talkativeness", { name: member.name }));
  }

  move(name, which) {
    const doing = which === "leave" ? t("cast.leaving", { name }) : t("cast.joining", { name });
    return this.app.write("POST", `/cast/${enc(name)}/${which}`, undefined, doing);
  }

  setOrder(order) {
    return this.app.write("PATCH", "/cast", { order }, t("cast.ordering"));
  }

  setRecap(on) {
    return this.app.write("PATCH", "/cast", { recap_missed: on }, t("cast.recapping"));
  }

  async remove(name) {
    const answer = await this.app.ask(t("cast.remove_confirm", { name }), [], [{ value: "remove", label: t("cast.remove_yes") }]);
    if (!answer) return;
    if (await this.app.write("DELETE", `/cast/${enc(name)}`, undefined, t("cast.removing", { name }))) this.forget(name);
  }

  /** The Add dialog: a card uploaded (added at once), or a character written in place. */
  openAdd() {
    const dialog = this.addDialog();
    const form = dialog.querySelector("form");
    form.reset();
    dialog.querySelector(".cast-problem").textContent = "";
    dialog.showModal();
    form.elements.name.focus();
  }

  addDialog() {
    let dialog = document.getElementById("cast-dialog");
    if (dialog) return dialog;
    const problem = el("p.error-text.cast-problem", { role: "alert" });
    const file = el("input", { type: "file", name: "card", accept: ".png,.json,image/png,application/json", hidden: true });
    file.addEventListener("change", () => {
      const chosen = file.files?.[0];
      file.value = "";
      if (chosen) this.addCard(dialog, chosen);
    });
    const form = el(
      "form",
      { method: "dialog" },
      el("h3", { text: t("cast.add_heading") }),
      el("section.cast-part", {}, el("h4", { text: t("cast.from_card") }), el("p.muted", { text: t("cast.from_card_hint") }), el("label.file-button.cast-upload", {}, el("span", { text: t("cast.upload") }), file)),
      el(
        "section.cast-part",
        {},
        el("h4", { text: t("cast.written") }),
        el("label", {}, el("span", { text: t("cast.name") }), el("input", { name: "name", maxlength: "200", autocomplete: "off" })),
        el("label", {}, el("span", { text: t("cast.description") }), el("textarea", { name: "description", rows: "4", maxlength: "100000", placeholder: t("cast.description_placeholder") })),
      ),
      problem,
      el(
        "menu",
        {},
        el("button", { type: "button", value: "cancel", text: t("app.cancel"), onclick: () => dialog.close() }),
        el("button.primary", { type: "submit", value: "add", text: t("cast.add_written") }),
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const name = form.elements.name.value.trim();
      if (!name) {
        problem.textContent = t("cast.name_needed");
        form.elements.name.focus();
        return;
      }
      this.addWritten(dialog, { name, description: form.elements.description.value });
    });
    dialog = el("dialog", { id: "cast-dialog", "aria-label": t("cast.add_heading") }, form);
    document.body.append(dialog);
    return dialog;
  }

  addWritten(dialog, body) {
    return this.added(dialog, () => this.app.api.request("POST", this.app.path("/cast"), { json: body, ifMatch: this.app.version, idempotencyKey: newKey() }));
  }

  addCard(dialog, file) {
    const body = new FormData();
    body.append("file", file, file.name);
    return this.added(dialog, () => this.app.api.request("POST", this.app.path("/cast/card"), { body, ifMatch: this.app.version, idempotencyKey: newKey() }));
  }

  /** Send an addition; the dialog closes when it is made, else says why and stays. */
  async added(dialog, send) {
    const problem = dialog.querySelector(".cast-problem");
    problem.textContent = t("cast.adding");
    try {
      const { data, version } = await send();
      this.app.setVersion(version);
      this.forget(data?.name); // a member of that name removed before had another picture
      dialog.close();
      this.app.notify(t("cast.added", { name: data?.name || "" }));
    } catch (error) {
      const detail = error?.detail || error?.message || String(error);
      problem.textContent = [error?.title, detail].filter(Boolean).join(": ");
      if (error?.status === 412) await this.app.refresh();
      else if (error?.status === 0) showError(error, t("cast.adding"));
      return;
    }
    await this.app.refresh();
  }
}
