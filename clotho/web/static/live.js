// The open session, watched live (GET .../events, server-sent events; docs/events.md): a
// change made elsewhere (the command line, another tab, another player) draws the view
// again without a reload, so the next write is based on the version the server has and
// meets no 412. The page's own writes are not drawn twice: an event whose version the
// page has already drawn is skipped. The stream is read with fetch, so that the token
// goes in the Authorization header as on every other request (EventSource cannot send
// one, and a token in an address ends up in logs); a dropped stream is opened again after
// a pause, with Last-Event-ID, so nothing is missed.

import { readEvents, sessionPath } from "./api.js";

/** Pauses before opening a dropped stream again (ms), the last one repeated. */
const RETRY_MS = [500, 1000, 2000, 5000];
/** How long a change waits before the view is drawn again (ms): the answer of the page's
 * own write usually arrives in that time, and several changes are drawn once. */
const SETTLE_MS = 200;

export class LiveSession {
  constructor(app) {
    this.app = app;
    this.sid = null;
    this.controller = null;
    this.last = null; // the id of the last event seen (the version it made)
    this.pending = null; // the latest version announced and not yet drawn
    this.timer = null;
    this.redraws = 0; // views drawn again for a change made elsewhere (for the tests)
    this.opened = 0; // streams opened (for the tests)
    this.connected = false;
    this.active = false; // a stream is open or being opened again
    this.generation = 0; // counts follow() and stop(): a loop of an older one ends
  }

  /** Watch session `sid` (the one open); a no-op when it is watched already (a stream
   * the server refused, say for a token since replaced, is opened again). */
  follow(sid) {
    if (sid === this.sid && this.active) return;
    this.stop();
    this.sid = sid;
    this.last = null;
    if (sid) this.run(sid, this.generation);
  }

  stop() {
    this.generation += 1;
    this.controller?.abort();
    this.controller = null;
    clearTimeout(this.timer);
    this.timer = null;
    this.sid = null;
    this.connected = false;
    this.active = false;
  }

  /** The streams of one follow() (`generation`), one after the other, until it is
   * stopped or followed again: switching away and back within a pause leaves one. */
  async run(sid, generation) {
    this.active = true;
    const current = () => this.generation === generation;
    for (let attempt = 0; current(); attempt += 1) {
      const controller = new AbortController();
      this.controller = controller;
      let refused = false;
      try {
        refused = await this.read(sid, controller.signal, current);
        attempt = 0;
      } catch {
        // dropped (the network, the server stopping): opened again below, unless stopped
      }
      if (!current()) return;
      this.connected = false;
      if (refused) {
        this.active = false;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)]));
    }
  }

  /** One connection: events until it ends. Returns true when the server refused it for
   * good (no such session, no token): it is not opened again. */
  async read(sid, signal, current) {
    const headers = this.app.api.headers({ Accept: "text/event-stream" });
    if (this.last != null) headers["Last-Event-ID"] = String(this.last);
    const response = await fetch(sessionPath(sid, "/events"), { headers, signal });
    if (!response.ok) return response.status === 401 || response.status === 404;
    if (!current()) {
      response.body?.cancel(); // followed again meanwhile: the newer loop reads its own
      return false;
    }
    this.connected = true;
    this.opened += 1;
    await readEvents(response, (kind, payload, id) => {
      if (current()) this.dispatch(sid, kind, payload, id);
    });
    return false;
  }

  dispatch(sid, kind, payload, id) {
    if (sid !== this.sid) return;
    if (id != null && Number.isFinite(id)) this.last = id;
    if (kind === "reset") this.announce(payload.version, true);
    else if (kind === "ready" || kind === "change") this.announce(payload.version, false);
    if (kind === "change" && payload.kind === "session" && "title" in payload) this.retitle(sid, payload.title);
  }

  /** The story renamed (here or elsewhere): its name in the picker. */
  retitle(sid, title) {
    const session = this.app.sessions?.find((s) => s.id === sid);
    if (!session || session.title === title) return;
    session.title = title;
    this.app.stories.fillPicker();
  }

  /** The session is at `version` on the server: draw the view again once it settles,
   * unless the page has drawn that version already (its own write). A change that comes
   * while the page's first read is under way (no version shown yet) waits for it, and
   * is drawn if that read came before the change. */
  announce(version, always) {
    const shown = this.app.version;
    if (!always && shown != null && version <= shown) return;
    this.pending = Math.max(this.pending ?? 0, version);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.settle(), SETTLE_MS);
  }

  settle() {
    this.timer = null;
    const chat = this.app.views.chat;
    // A turn streaming here draws its own result. A dialog open (an edit box, the story's
    // settings) keeps what it shows and the version it was opened at: drawn again now,
    // its write would name the newer version and overwrite the change made elsewhere
    // unseen; it meets a 412 instead, and the view is drawn again then.
    if (chat?.busy() || document.body.classList.contains("loading") || document.querySelector("dialog[open]")) {
      this.timer = setTimeout(() => this.settle(), SETTLE_MS);
      return;
    }
    const version = this.pending;
    this.pending = null;
    if (version == null || (this.app.version != null && version <= this.app.version)) return;
    this.redraws += 1;
    this.app.refresh();
  }
}
