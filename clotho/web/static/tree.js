// The tree view ("god view"): the whole conversation as a graph drawn with d3 (a tidy
// tree layout, SVG, zoom and pan). The trunk (root → HEAD) is highlighted; branches off
// it are folded until opened, and `‹ 2/3 ›` above a node flips between the alternatives
// of a fork in place. Player, reply and system nodes have their colours (the legend says
// which); hovering a node shows its whole text. Click a node to read it, shift-click a
// second one (or Compare…) to see how their states differ, drag a node or a pruned
// fragment onto another node to graft it there (Alt or Ctrl: copy it, Shift: move the
// node alone); a graft, move or copy is confirmed in a toast with its Undo.
//
// Bookmarks and named branches (tags.js, docs/tags.md): a named node is starred, its
// names in a small label under its text and as badges in the panel (with "Bookmark
// this…", rename, delete); the panel lists every name, to jump to one.
//
// A change of scene (a narration node saying who left or joined, metadata `scene`) is
// marked: ⇄ before its label (and in the legend), a badge in the panel. When several
// characters reply, a reply's label begins with its speaker's name.

import { t } from "./i18n.js";
import { renderDiff, renderState, variableOrder } from "./panels.js";
import { TreeSearch } from "./search.js";
import { TreeNames } from "./tags.js";
import { clear, el, formatTokens, preview, short, toast } from "./ui.js";

const d3 = globalThis.d3;
const DX = 190; // horizontal room of a node (its label included)
const DY = 48; // one generation (a label of two lines and the `‹ i/n ›` above it)
const LABEL_PX = DX - 34; // the width a label may take
const LABEL_LINES = 2;
const ROOT = "@start";
const DRAG_START_PX = 6;
const TIP_CHARS = 4000; // the hover tip's text beyond this is in the node panel

/** Each role's name as the tree shows it (the legend, the panel, the tip). */
const ROLE = { user: t("tree.role.user"), assistant: t("tree.role.assistant"), system: t("tree.role.system") };
const roleName = (role) => ROLE[role] || role;

/** What an operation on a dragged or picked node is called, while it runs and done. */
const DROP = { graft: t("tree.drop.graft"), copy: t("tree.drop.copy"), move: t("tree.drop.move") };
const DOING = {
  graft: (vars) => t("tree.doing.graft", vars),
  copy: (vars) => t("tree.doing.copy", vars),
  move: (vars) => t("tree.doing.move", vars),
};
const DONE = {
  graft: (vars) => [t("tree.done.graft", vars), t("tree.done_detail.graft", vars)],
  copy: (vars) => [t("tree.done.copy", vars), t("tree.done_detail.copy", vars)],
  move: (vars) => [t("tree.done.move", vars), t("tree.done_detail.move", vars)],
};
const PICK = {
  graft: (vars) => t("tree.pick.graft", vars),
  copy: (vars) => t("tree.pick.copy", vars),
  move: (vars) => t("tree.pick.move", vars),
  compare: (vars) => t("tree.pick.compare", vars),
};

/** What dropping does: a fragment is grafted; a node is grafted with its subtree, copied
 * with it (Alt or Ctrl held), or moved alone (Shift held: its children stay). */
function dropOp(kind, event) {
  if (kind === "fragment") return "graft";
  if (event.altKey || event.ctrlKey) return "copy";
  return event.shiftKey ? "move" : "graft";
}

/** A change of scene in words: "⇄ Bram leaves" / "⇄ Bram joins". */
function sceneBadge(scene) {
  if (scene.leaves) return t("tree.scene_leaves", { name: scene.leaves });
  if (scene.joins) return t("tree.scene_joins", { name: scene.joins });
  return t("tree.scene");
}

/** Run after the browser has painted what was drawn (the measurements' end). */
function afterPaint(callback) {
  requestAnimationFrame(() => setTimeout(callback, 0));
}

/** How wide a character is drawn in a label (11 px system-ui), near enough to fit. */
function charPx(code) {
  if (code >= 0x2e80) return 11; // CJK, kana, hangul, full-width forms: one em
  if (code >= 0x41 && code <= 0x5a) return 7.2; // capitals
  if (code === 0x20 || "iljtfr.,;:'!|".includes(String.fromCharCode(code))) return 3.4;
  return 6.1;
}

/**
 * A node's text cut to ``lines`` lines of ``width`` pixels (at word ends where it can),
 * the last one ending in "…" when text is left over.
 */
export function fitLabel(text, width = LABEL_PX, lines = LABEL_LINES) {
  const flat = (text || "").replace(/\s+/g, " ").trim();
  const out = [];
  let at = 0;
  while (at < flat.length && out.length < lines) {
    let px = 0;
    let end = at;
    let lastSpace = -1;
    while (end < flat.length) {
      const w = charPx(flat.charCodeAt(end));
      if (px + w > width) break;
      if (flat[end] === " ") lastSpace = end;
      px += w;
      end++;
    }
    const last = out.length === lines - 1;
    if (end >= flat.length) {
      out.push(flat.slice(at));
      at = flat.length;
    } else if (last) {
      out.push(`${flat.slice(at, Math.max(at + 1, end - 1)).trimEnd()}…`);
      at = flat.length;
    } else {
      const cut = lastSpace > at ? lastSpace : end;
      out.push(flat.slice(at, cut));
      at = lastSpace > at ? cut + 1 : cut;
    }
  }
  return out;
}

export class TreeView {
  constructor(app) {
    this.app = app;
    this.names = new TreeNames(this);
    this.root = document.getElementById("tree-view");
    this.panel = document.getElementById("node-panel");
    this.svg = d3.select("#tree-svg");
    this.layer = this.svg.append("g").attr("class", "layer");
    this.links = this.layer.append("g").attr("class", "links");
    this.nodes = this.layer.append("g").attr("class", "nodes");
    this.zoom = d3
      .zoom()
      .scaleExtent([0.03, 3])
      .filter((event) => !event.target.closest?.(".node, .fold, .alts") && !event.button && (event.type === "wheel" || !event.ctrlKey))
      .on("zoom", (event) => {
        this.layer.attr("transform", event.transform);
        this.hideTip();
        this.schedulePaint();
      });
    this.svg.call(this.zoom).on("dblclick.zoom", null);
    window.addEventListener("resize", () => this.schedulePaint());
    this.open = new Set(); // nodes whose every child is shown
    this.showing = new Map(); // folded fork → the child flipped to with ‹ ›
    this.selected = null;
    this.compare = null;
    this.placed = null; // the session whose view was placed once
    this.data = null;
    this.fragments = [];
    this.trash = [];
    this.pick = null; // {op, node}: the next node clicked is the target
    const canvas = this.root.querySelector(".canvas");
    this.tip = el("div.tree-tip", { role: "tooltip", hidden: true });
    this.legend = el("div.tree-legend", { "aria-label": t("tree.legend") });
    canvas.append(this.tip, this.legend);
    this.svg.on("click.tip", (event) => {
      if (!event.target.closest?.(".node")) this.hideTip();
    });
    this.diffDialog = el("dialog.wide", { id: "state-diff", "aria-label": t("tree.diff_title") });
    document.body.append(this.diffDialog);
    this.diffDialog.addEventListener("close", () => {
      this.compare = null;
      this.draw();
    });
    this.bindTools();
  }

  /** The tools above the canvas (index.html has them, and their words). */
  bindTools() {
    this.search = new TreeSearch(this);
    document.getElementById("tree-center").addEventListener("click", () => this.reveal(this.data?.head_id));
    document.getElementById("tree-fit").addEventListener("click", () => this.fit());
    document.getElementById("tree-fold").addEventListener("click", () => {
      this.open.clear();
      this.showing.clear();
      this.draw();
    });
  }

  reset() {
    this.open.clear();
    this.showing.clear();
    this.selected = null;
    this.compare = null;
    this.placed = null;
    this.pick = null;
    this.hideTip();
  }

  async load() {
    const app = this.app;
    const sid = app.sid;
    const [tree, fragments, trash] = await Promise.all([
      this.readTree(),
      app.api.get(app.path("/fragments")),
      app.api.get(app.path("/trash")),
      this.names.load(),
    ]);
    if (sid !== app.sid) return;
    app.setVersion(tree.version);
    this.index(tree.data);
    this.fragments = fragments;
    this.trash = trash;
    if (this.selected && !this.byId.has(this.selected)) this.selected = null;
    if (this.compare && !this.byId.has(this.compare)) this.compare = null;
    this.draw();
    if (this.placed !== sid) {
      this.placed = sid;
      this.firstView(); // paints the part in view
    }
    this.drawLegend();
    afterPaint(() => performance.mark("clotho:tree-rendered", { detail: { nodes: this.data.nodes.length } }));
    await this.renderPanel();
  }

  /**
   * The whole tree, its pages read one after another ({data, version} as a request
   * gives them, data holding every node). A write between two pages changes the
   * version (or stales the cursor): then it is read again, a few times at most.
   */
  async readTree() {
    const path = this.app.path("/tree?limit=1000");
    for (let attempt = 1; ; attempt++) {
      try {
        const { items, first, last } = await this.app.api.pages(path, "nodes");
        if (first.data.version === last.data.version || attempt >= 3) {
          return { data: { ...last.data, nodes: items, next: null }, version: last.version };
        }
      } catch (error) {
        if (error.code !== "stale_cursor" || attempt >= 3) throw error;
      }
    }
  }

  /** Children lists, subtree sizes and the trunk of the tree document. */
  index(data) {
    this.data = data;
    this.byId = new Map(data.nodes.map((node) => [node.id, node]));
    this.kids = new Map([[ROOT, []]]);
    for (const node of data.nodes) {
      const parent = node.parent_id ?? ROOT;
      if (!this.kids.has(parent)) this.kids.set(parent, []);
      this.kids.get(parent).push(node);
    }
    this.trunk = new Set();
    for (let id = data.head_id; id; id = this.byId.get(id)?.parent_id) this.trunk.add(id);
    // Sizes bottom-up: the document lists parents before children.
    this.size = new Map();
    for (let i = data.nodes.length - 1; i >= 0; i--) {
      const node = data.nodes[i];
      let size = 1;
      for (const kid of this.kids.get(node.id) || []) size += this.size.get(kid.id);
      this.size.set(node.id, size);
    }
    this.labels = new Map(); // node id → its label's lines, fitted when first painted
    this.bookmarked = this.names.any();
    this.sceneChanges = data.nodes.some((node) => node.metadata?.scene);
    // Several characters reply: each reply's label begins with its speaker's name.
    this.severalSpeakers = new Set(data.nodes.filter((node) => node.role === "assistant" && node.name).map((node) => node.name)).size > 1;
  }

  /** The child a folded node continues with: the one flipped to, the trunk, else its
   * active child. */
  shownChild(id, kids) {
    const flipped = this.showing.get(id);
    if (flipped && kids.some((kid) => kid.id === flipped)) return flipped;
    const onTrunk = kids.find((kid) => this.trunk.has(kid.id));
    if (onTrunk) return onTrunk.id;
    const node = this.byId.get(id);
    if (node?.active_child_id && kids.some((kid) => kid.id === node.active_child_id)) return node.active_child_id;
    return kids[kids.length - 1].id;
  }

  /** The visible part of the tree as nested objects for d3.hierarchy, and fold counts. */
  visible() {
    const make = (id) => ({ id, node: this.byId.get(id) || null, children: [], hidden: 0, foldable: false });
    const top = make(ROOT);
    const stack = [top];
    while (stack.length) {
      const item = stack.pop();
      const kids = this.kids.get(item.id) || [];
      if (!kids.length) continue;
      const everyOne = item.id === ROOT || this.open.has(item.id);
      const continued = everyOne ? null : this.shownChild(item.id, kids);
      for (const kid of kids) {
        if (everyOne || kid.id === continued) {
          const child = make(kid.id);
          item.children.push(child);
          stack.push(child);
        } else item.hidden += this.size.get(kid.id);
      }
      item.foldable = item.id !== ROOT && kids.length > 1;
    }
    return top;
  }

  /** Lay the unfolded tree out (every unfolded node), then paint what is in view. */
  draw() {
    if (!this.data) return;
    const root = d3.hierarchy(this.visible(), (item) => (item.children.length ? item.children : null));
    d3.tree().nodeSize([DX, DY]).separation((a, b) => (a.parent === b.parent ? 1 : 1.15))(root);
    this.laid = root.descendants();
    this.positions = new Map(this.laid.map((d) => [d.data.id, d]));
    this.svg.attr("data-visible", this.laid.length - 1).attr("data-total", this.data.nodes.length);
    this.paint();
    this.updateHint();
  }

  schedulePaint() {
    if (this.paintQueued) return;
    this.paintQueued = true;
    requestAnimationFrame(() => this.paintQueued && this.paint());
  }

  /** A node's label: its text fitted to two lines (a bookmark starred). */
  labelOf(node) {
    let lines = this.labels.get(node.id);
    if (!lines) {
      const mark = (this.names.has(node.id) ? "★ " : "") + (node.metadata?.scene ? "⇄ " : "");
      const who = this.severalSpeakers && node.role === "assistant" && node.name ? `${node.name}: ` : "";
      lines = fitLabel(`${mark}${who}${node.content}`);
      if (!lines.length) lines = [t("tree.empty_text")];
      this.labels.set(node.id, lines);
    }
    return lines;
  }

  /** `i/n` of a node among its siblings (null: it has none). */
  among(id) {
    const node = this.byId.get(id);
    if (!node) return null;
    const siblings = this.kids.get(node.parent_id ?? ROOT) || [];
    if (siblings.length < 2) return null;
    return { index: siblings.findIndex((kid) => kid.id === id), siblings };
  }

  /**
   * Draw the laid-out nodes and links that are in the viewport (and a margin): the SVG
   * holds what can be seen, not the whole tree, so a tree of thousands of nodes stays
   * as quick to draw, pan and unfold as a small one. Far out, labels are left out.
   */
  paint() {
    this.paintQueued = false;
    if (!this.laid) return;
    const tf = d3.zoomTransform(this.svg.node());
    const width = this.svg.node().clientWidth;
    const height = this.svg.node().clientHeight;
    const margin = 160;
    const x0 = (-margin - tf.x) / tf.k - DX;
    const x1 = (width + margin - tf.x) / tf.k;
    const y0 = (-margin - tf.y) / tf.k;
    const y1 = (height + margin - tf.y) / tf.k;
    const shown = this.laid.filter((d) => d.x >= x0 && d.x <= x1 && d.y >= y0 && d.y <= y1);
    const linked = this.laid.filter((d) => d.parent && d.y >= y0 && d.parent.y <= y1 && Math.max(d.x, d.parent.x) >= x0 && Math.min(d.x, d.parent.x) <= x1);
    const head = this.data.head_id;
    const far = tf.k < 0.35;
    this.svg.classed("far", far).attr("data-drawn", shown.length);

    this.links
      .selectAll("path")
      .data(linked, (d) => d.data.id)
      .join("path")
      .attr("class", (d) => (this.trunk.has(d.data.id) ? "link trunk" : "link"))
      .attr("d", (d) => `M${d.parent.x},${d.parent.y}C${d.parent.x},${(d.parent.y + d.y) / 2} ${d.x},${(d.parent.y + d.y) / 2} ${d.x},${d.y}`);

    const groups = this.nodes
      .selectAll("g.node")
      .data(shown, (d) => d.data.id)
      .join((enter) => {
        const g = enter.append("g");
        g.append("rect").attr("class", "hit").attr("x", -11).attr("y", -13).attr("width", DX - 30).attr("height", 28);
        g.append("circle");
        const label = g.append("text").attr("class", "label");
        label.append("tspan").attr("class", "l1").attr("x", 12).attr("dy", "0.32em");
        label.append("tspan").attr("class", "l2").attr("x", 12).attr("dy", "0.32em");
        g.append("text").attr("class", "ref-label").attr("x", 12).attr("y", 21);
        const fold = g.append("g").attr("class", "fold");
        fold.append("rect").attr("x", -54).attr("y", -9).attr("width", 40).attr("height", 18).attr("rx", 9);
        fold.append("text").attr("x", -34).attr("dy", "0.32em").attr("text-anchor", "middle");
        fold.on("click", (event, d) => {
          event.stopPropagation();
          this.toggleFold(d.data.id, event.timeStamp);
        });
        const alts = g.append("g").attr("class", "alts").attr("transform", "translate(12,-24)");
        for (const [side, x, glyph] of [["prev", 0, "‹"], ["next", 50, "›"]]) {
          const button = alts.append("g").attr("class", `flip ${side}`);
          button.append("rect").attr("x", x).attr("y", -10).attr("width", 24).attr("height", 20).attr("rx", 5);
          button.append("text").attr("x", x + 12).attr("dy", "0.32em").attr("text-anchor", "middle").text(glyph);
          button.on("click", (event, d) => {
            event.stopPropagation();
            this.flip(d.data.id, side === "prev" ? -1 : 1);
          });
        }
        alts.append("text").attr("class", "count").attr("x", 37).attr("dy", "0.32em").attr("text-anchor", "middle");
        g.on("click", (event, d) => this.clicked(event, d.data.id));
        g.on("pointerdown", (event, d) => this.pressed(event, d.data.id, "node"));
        g.on("pointerenter", (event, d) => event.pointerType === "mouse" && this.showTip(d.data.id, event));
        g.on("pointerleave", (event) => event.pointerType === "mouse" && this.hideTip());
        return g;
      })
      .attr("transform", (d) => `translate(${d.x},${d.y})`)
      .attr("data-node-id", (d) => (d.data.node ? d.data.id : null))
      .attr("data-role", (d) => d.data.node?.role ?? null)
      .attr("class", (d) => {
        const node = d.data.node;
        if (!node) return "node start";
        const classes = ["node", node.role];
        if (this.trunk.has(node.id)) classes.push("trunk");
        if (node.id === head) classes.push("head");
        if (!node.enabled) classes.push("disabled");
        if (this.names.has(node.id)) classes.push("bookmarked");
        if (node.metadata?.scene) classes.push("scene");
        if (node.id === this.selected) classes.push("selected");
        if (node.id === this.compare) classes.push("compared");
        return classes.join(" ");
      });
    groups.select("circle").attr("r", (d) => (d.data.node ? (d.data.id === head ? 9 : 7) : 5));
    groups.each((d, i, all) => {
      const lines = far ? [] : d.data.node ? this.labelOf(d.data.node) : [t("tree.start")];
      const label = d3.select(all[i]).select("text.label");
      label.select("tspan.l1").attr("y", lines.length > 1 ? -6 : 0).text(lines[0] || "");
      label.select("tspan.l2").attr("y", 8).text(lines[1] || "");
      const named = far || !d.data.node ? "" : this.names.label(d.data.id);
      d3.select(all[i]).select("text.ref-label").attr("display", named ? null : "none").text(named);
    });
    groups
      .select("g.fold")
      .attr("display", (d) => (d.data.hidden || (d.data.foldable && this.open.has(d.data.id)) ? null : "none"))
      .attr("data-fold-id", (d) => d.data.id)
      .select("text")
      .text((d) => (d.data.hidden ? `+${d.data.hidden}` : "−"));
    groups.select("g.alts").each((d, i, all) => {
      const where = far || !d.data.node ? null : this.among(d.data.id);
      const alts = d3.select(all[i]).attr("display", where ? null : "none").attr("data-alts-of", where ? d.data.id : null);
      if (!where) return;
      alts.select("text.count").text(`${where.index + 1}/${where.siblings.length}`);
      alts.select(".flip.prev").classed("off", where.index === 0);
      alts.select(".flip.next").classed("off", where.index === where.siblings.length - 1);
    });
  }

  /** Open or fold a branch; ``started``: when the user asked (an event's timeStamp). */
  toggleFold(id, started = performance.now()) {
    if (this.open.has(id)) this.open.delete(id);
    else this.open.add(id);
    this.draw();
    afterPaint(() => performance.measure("clotho:tree-fold", { start: started, detail: { id } }));
  }

  /** ‹ or ›: the previous or next alternative of a node, shown (and selected) in its
   * place; the story (HEAD) does not move: *Switch trunk here* does that. */
  flip(id, step) {
    const where = this.among(id);
    const to = where?.siblings[where.index + step];
    if (!to) return;
    this.showing.set(to.parent_id ?? ROOT, to.id);
    this.selected = to.id;
    this.compare = null;
    this.draw();
    this.renderPanel();
  }

  centerOn(id) {
    const d = id ? this.positions?.get(id) : this.positions?.get(ROOT);
    if (!d) return;
    const node = this.svg.node();
    const k = d3.zoomTransform(node).k || 1;
    this.svg.call(this.zoom.transform, d3.zoomIdentity.translate(node.clientWidth / 2 - (d.x + DX / 3) * k, node.clientHeight / 2 - d.y * k).scale(k));
    this.paint();
  }

  /** Lay the tree out with ``id`` in it (the folded forks above it flipped to its path),
   * and centre on it. */
  reveal(id) {
    if (!id || !this.byId?.has(id)) return;
    for (let at = id; at; ) {
      const parent = this.byId.get(at).parent_id ?? ROOT;
      const kids = this.kids.get(parent) || [];
      if (parent !== ROOT && !this.open.has(parent) && this.shownChild(parent, kids) !== at) this.showing.set(parent, at);
      at = parent === ROOT ? null : parent;
    }
    this.draw();
    this.centerOn(id);
  }

  /** Select a node and bring it into view (the page's address may name one). */
  show(id) {
    if (!this.byId?.has(id)) return false;
    this.selected = id;
    this.compare = null;
    this.reveal(id);
    this.renderPanel();
    return true;
  }

  /** Zoom to show every unfolded node. */
  fit() {
    if (!this.laid?.length) return;
    const [leftmost, rightmost] = d3.extent(this.laid, (d) => d.x);
    const left = leftmost - 60; // the +N badges
    const [top, bottom] = d3.extent(this.laid, (d) => d.y);
    const right = rightmost + DX;
    const node = this.svg.node();
    const k = Math.max(0.03, Math.min(2, 0.92 * Math.min(node.clientWidth / (right - left || 1), node.clientHeight / (bottom - top + DY || 1))));
    const x = node.clientWidth / 2 - (k * (left + right)) / 2;
    const y = node.clientHeight / 2 - (k * (top + bottom)) / 2;
    this.svg.call(this.zoom.transform, d3.zoomIdentity.translate(x, y).scale(k));
    this.paint();
  }

  /**
   * The first view of a session: the whole unfolded tree if it fits at a readable
   * scale, else the start of the story at the top, at full size, the first screenful's
   * width in view (HEAD, far below, is a click on HEAD away).
   */
  firstView() {
    if (!this.laid?.length) return;
    const node = this.svg.node();
    const width = node.clientWidth;
    const height = node.clientHeight;
    const [leftmost, rightmost] = d3.extent(this.laid, (d) => d.x);
    const [top, bottom] = d3.extent(this.laid, (d) => d.y);
    const spanX = rightmost + DX - (leftmost - 60);
    const spanY = bottom - top + 2 * DY;
    const k = Math.min(1, Math.min(width / spanX, height / spanY));
    if (k >= 0.6) {
      const x = width / 2 - (k * (leftmost - 60 + rightmost + DX)) / 2;
      this.svg.call(this.zoom.transform, d3.zoomIdentity.translate(x, DY * k - top * k).scale(k));
    } else {
      const start = this.positions.get(ROOT);
      const screenful = this.laid.filter((d) => d.y - start.y <= height);
      const [a, b] = d3.extent(screenful, (d) => d.x);
      const span = b + DX - (a - 60);
      const x = span <= width ? width / 2 - (a - 60 + b + DX) / 2 : 70 - start.x;
      this.svg.call(this.zoom.transform, d3.zoomIdentity.translate(x, DY - start.y));
    }
    this.paint();
  }

  /** The colours' legend (and the bookmarks', when the tree has some). */
  drawLegend() {
    const item = (kind, text) => el(`span.item.${kind}`, {}, el("span.swatch"), text);
    clear(this.legend).append(
      item("user", roleName("user")),
      item("assistant", roleName("assistant")),
      item("system", roleName("system")),
      item("trunk", t("tree.trunk")),
      item("head", t("tree.head")),
      ...(this.bookmarked ? [item("bookmark", t("tree.bookmark"))] : []),
      ...(this.sceneChanges ? [item("scene", t("tree.scene"))] : []),
    );
  }

  // -- the node's whole text: on hover (a mouse; a tap opens the node panel) -----------

  showTip(id, event) {
    const node = this.byId?.get(id);
    if (!node || this.dragging) return;
    const text = node.content.length > TIP_CHARS ? `${node.content.slice(0, TIP_CHARS)}…` : node.content;
    clear(this.tip).append(el("div.who", {}, el(`span.role.${node.role}`, { text: this.speakerOf(node) }), " ", el("span.muted", { text: roleName(node.role) })), el("div.text", { text: text || t("tree.empty_text") }));
    this.tip.hidden = false;
    this.tip.dataset.nodeId = id;
    const canvas = this.root.querySelector(".canvas").getBoundingClientRect();
    const box = this.tip.getBoundingClientRect();
    const x = Math.min(event.clientX - canvas.left + 16, canvas.width - box.width - 8);
    const below = event.clientY - canvas.top + 18;
    const y = below + box.height > canvas.height - 8 ? Math.max(8, event.clientY - canvas.top - box.height - 12) : below;
    this.tip.style.left = `${Math.max(8, x)}px`;
    this.tip.style.top = `${y}px`;
  }

  hideTip() {
    if (this.tip) this.tip.hidden = true;
  }

  /** Who wrote a node: its speaker's name, else the persona's (the player) or the
   * character's (a reply), else its role. */
  speakerOf(node) {
    if (node.name) return node.name;
    const session = this.app.sessions?.find((s) => s.id === this.app.sid);
    if (node.role === "user" && session?.metadata?.settings?.persona?.name) return session.metadata.settings.persona.name;
    if (node.role === "assistant" && session?.character) return session.character;
    return roleName(node.role);
  }

  /** A node as a toast or a heading names it: its opening words, quoted. */
  describe(id) {
    const node = this.byId.get(id) || this.fragments.find((f) => f.top.id === id)?.top;
    return node ? t("tree.quoted", { text: preview(node.content, 40) || short(id) }) : short(id);
  }

  clicked(event, id) {
    if (this.dragged) return; // the click that ends a drag
    if (id === ROOT) return;
    if (this.pick) {
      const { op, node } = this.pick;
      this.pick = null;
      this.updateHint();
      if (op === "compare") this.compareWith(node, id);
      else this.relocate(op, node, id);
      return;
    }
    if (event.shiftKey && this.selected && id !== this.selected) {
      this.compareWith(this.selected, id);
      return;
    }
    this.selected = id;
    this.compare = null;
    this.draw();
    this.renderPanel();
  }

  // -- dragging: a node (move; Alt/Ctrl: copy) or a fragment (graft) onto a node --------

  pressed(event, id, kind) {
    if (event.button !== 0 || id === ROOT) return;
    const start = { x: event.clientX, y: event.clientY };
    let ghost = null;
    this.dragged = false;
    const move = (e) => {
      if (!ghost && Math.hypot(e.clientX - start.x, e.clientY - start.y) < DRAG_START_PX) return;
      if (!ghost) {
        this.dragged = true;
        this.dragging = true;
        this.hideTip();
        const node = kind === "node" ? this.byId.get(id) : this.fragments.find((f) => f.top.id === id)?.top;
        ghost = el("div.drag-ghost", { text: preview(node?.content || id, 40) });
        document.body.append(ghost);
        this.root.classList.add("dragging");
      }
      ghost.style.left = `${e.clientX + 12}px`;
      ghost.style.top = `${e.clientY + 12}px`;
      ghost.dataset.op = DROP[dropOp(kind, e)];
      this.nodes.selectAll("g.drop-target").classed("drop-target", false);
      const over = document.elementFromPoint(e.clientX, e.clientY)?.closest?.("g.node[data-node-id]");
      if (over && over.dataset.nodeId !== id) over.classList.add("drop-target");
    };
    const up = (e) => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      this.root.classList.remove("dragging");
      this.dragging = false;
      this.nodes.selectAll("g.drop-target").classed("drop-target", false);
      if (!ghost) return;
      ghost.remove();
      setTimeout(() => (this.dragged = false), 0);
      const target = document.elementFromPoint(e.clientX, e.clientY)?.closest?.("g.node[data-node-id]");
      if (!target || target.dataset.nodeId === id) return;
      this.relocate(dropOp(kind, e), id, target.dataset.nodeId);
    };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  }

  /** Graft, move or copy ``node`` under ``onto``; done, a toast says what went where,
   * with Undo. */
  async relocate(op, node, onto) {
    const operation = { op, node_id: node, parent_id: onto };
    if (op === "copy") operation.subtree = true;
    const fragment = this.fragments.find((f) => f.top.id === node);
    const count = op === "move" ? 1 : (this.size.get(node) ?? fragment?.size ?? 1);
    const what = this.describe(node);
    const where = this.describe(onto);
    const done = await this.app.edit([operation], DOING[op]({ node: short(node), onto: short(onto) }));
    if (!done) return;
    const nodes = count === 1 ? t("tree.one_node") : t("tree.nodes", { count });
    const box = toast(...DONE[op]({ what, where, nodes }));
    box.classList.add("relocated");
    box.dataset.op = op;
    box.append(
      el("button.undo-relocate", {
        type: "button",
        text: t("tree.undo"),
        onclick: () => {
          box.remove();
          this.app.undo("undo");
        },
      }),
    );
  }

  updateHint() {
    const hint = document.getElementById("tree-hint");
    if (this.pick) {
      hint.textContent = PICK[this.pick.op]({ node: this.describe(this.pick.node) });
      return;
    }
    const visible = this.svg.attr("data-visible");
    hint.textContent = this.data ? t("tree.hint", { visible, total: this.data.nodes.length, version: this.data.version }) : "";
  }

  cancelPick() {
    if (!this.pick) return false;
    this.pick = null;
    this.updateHint();
    return true;
  }

  // -- the two states compared: a dialog, in view at any width ------------------------

  async compareWith(a, b) {
    if (!a || !b || a === b) return;
    this.selected = a;
    this.compare = b;
    this.draw();
    this.renderPanel();
    const app = this.app;
    const sid = app.sid;
    const q = encodeURIComponent;
    try {
      const [diff, stateA, stateB] = await Promise.all([
        app.api.get(app.path(`/diff?from_id=${q(a)}&to_id=${q(b)}`)),
        app.api.get(app.path(`/state?node_id=${q(a)}`)),
        app.api.get(app.path(`/state?node_id=${q(b)}`)),
      ]);
      if (sid !== app.sid || this.compare !== b) return;
      const variables = [...new Set([...variableOrder(stateA), ...variableOrder(stateB)])];
      this.openDiff(diff, variables, a, b);
    } catch (error) {
      app.fail(error, t("tree.reading_diff"));
    }
  }

  openDiff(diff, variables, a, b) {
    const dialog = this.diffDialog;
    const column = (id, mark) => `${mark} ${this.speakerOf(this.byId.get(id))}: ${preview(this.byId.get(id)?.content, 28)}`;
    const labels = [column(a, "A"), column(b, "B")];
    const body = el("div.diff-body");
    renderDiff(body, diff, variables, labels);
    clear(dialog).append(
      el("h3", { text: t("tree.diff_title") }),
      el("p.muted.diff-legend", { text: t("tree.diff_explained") }),
      body,
      el("menu", {}, el("button.primary", { type: "button", text: t("tree.close"), onclick: () => dialog.close() })),
    );
    if (!dialog.open) dialog.showModal();
  }

  // -- the panel: the selected node, its state, fragments and trash --------------------

  async renderPanel() {
    const panel = this.panel;
    const app = this.app;
    const sid = app.sid;
    const id = this.selected;
    const node = id && this.byId.get(id);
    const parts = [];
    let stateBox = null;
    if (!node) {
      parts.push(el("h2", { text: t("tree.title") }), el("p.muted", { text: t("tree.help") }));
    } else {
      const isHead = node.id === this.data.head_id;
      const button = (action, label, onclick, title = "") => el("button", { type: "button", text: label, title, onclick, dataset: { action } });
      const where = this.among(node.id);
      const speaker = this.speakerOf(node);
      parts.push(
        el("h2", {}, el("span.speaker", { text: speaker }), " ", speaker === roleName(node.role) ? null : el(`span.role-chip.${node.role}`, { text: roleName(node.role) }), " ", el("span.id", { text: short(node.id) })),
        el(
          "p.badges",
          {},
          isHead ? el("span.badge.head", { text: t("tree.badge.head") }) : null,
          this.trunk.has(node.id) ? el("span.badge", { text: t("tree.badge.trunk") }) : null,
          node.enabled ? null : el("span.badge.off", { text: t("tree.badge.disabled") }),
          ...this.names.badges(node.id),
          node.metadata?.scene ? el("span.badge.scene", { text: sceneBadge(node.metadata.scene) }) : null,
        ),
        where
          ? el(
              "p.panel-alts",
              {},
              el("button.prev", { type: "button", text: "‹", "aria-label": t("tree.previous"), disabled: where.index === 0, onclick: () => this.flip(node.id, -1) }),
              el("span.count", { text: t("tree.alternative", { index: where.index + 1, count: where.siblings.length }) }),
              el("button.next", { type: "button", text: "›", "aria-label": t("tree.next"), disabled: where.index === where.siblings.length - 1, onclick: () => this.flip(node.id, 1) }),
            )
          : null,
        el("div.node-content", { text: node.content }),
        node.metadata?.usage ? el("p.muted", { text: t("tree.tokens", { tokens: formatTokens(node.metadata.usage) }) }) : null,
        node.delta?.length ? el("details", { open: true }, el("summary", { text: t("tree.changes") }), el("ul.delta", {}, node.delta.map((op) => el("li", { text: `${op.op} ${op.path}${"value" in op ? ` ${JSON.stringify(op.value)}` : ""}` })))) : null,
        el(
          "div.node-actions",
          {},
          button("set-head-here", t("tree.action.checkout"), () => app.edit([{ op: "checkout", node_id: node.id }], t("tree.doing.checkout")), t("tree.action.checkout_title")),
          button("switch-trunk-here", t("tree.action.switch"), () => app.edit([{ op: "checkout", node_id: this.leafOf(node.id) }], t("tree.doing.switch")), t("tree.action.switch_title")),
          button("compare", t("tree.action.compare"), () => this.startPick("compare", node.id), t("tree.action.compare_title")),
          button("rewrite", t("tree.action.rewrite"), () => this.rewrite(node)),
          button("inject-after", t("tree.action.inject"), () => this.inject(node)),
          button(node.enabled ? "disable" : "enable", node.enabled ? t("tree.action.disable") : t("tree.action.enable"), () => app.edit([{ op: "toggle", node_id: node.id }], node.enabled ? t("tree.doing.disable") : t("tree.doing.enable")), t("tree.action.toggle_title")),
          button("prune", t("tree.action.prune"), () => app.edit([{ op: "prune", node_id: node.id }], t("tree.doing.prune")), t("tree.action.prune_title")),
          button("delete", t("tree.action.delete"), () => app.edit([{ op: "delete", node_id: node.id }], t("tree.doing.delete")), t("tree.action.delete_title")),
          button("graft", t("tree.action.graft"), () => this.startPick("graft", node.id), t("tree.action.graft_title")),
          button("move", t("tree.action.move"), () => this.startPick("move", node.id), t("tree.action.move_title")),
          button("copy", t("tree.action.copy"), () => this.startPick("copy", node.id), t("tree.action.copy_title")),
          node.metadata?.generated ? button("trace", t("tree.action.trace"), () => app.openTrace(node.id), t("tree.action.trace_title")) : null,
          ...this.names.actions(node),
        ),
      );
      stateBox = el("div.state-box");
      parts.push(stateBox);
    }
    parts.push(this.names.section());
    parts.push(this.subtreeList(t("tree.fragments", { count: this.fragments.length }), this.fragments, "fragment"), this.subtreeList(t("tree.trash", { count: this.trash.length }), this.trash, "trash"));
    clear(panel).append(...parts.filter(Boolean));
    if (!node) return;
    try {
      const state = await app.api.get(app.path(`/state?node_id=${encodeURIComponent(node.id)}`));
      if (sid !== app.sid || id !== this.selected) return;
      renderState(stateBox, state, null, t("tree.state_after", { node: short(node.id) }));
    } catch (error) {
      app.fail(error, t("tree.reading_state"));
    }
  }

  subtreeList(title, items, kind) {
    const list = el(`ul.subtrees.${kind}`);
    for (const item of items) {
      const row = el(
        "li",
        { dataset: { nodeId: item.top.id, kind } },
        el("span.grip", { text: kind === "fragment" ? "⠿" : "" }),
        el("span.what", { text: `${this.speakerOf(item.top)}: ${preview(item.top.content, 40)}` }),
        el("span.muted", { text: ` (${item.size === 1 ? t("tree.one_node") : t("tree.nodes", { count: item.size })})` }),
        kind === "trash" ? el("button", { type: "button", text: t("tree.restore"), onclick: () => this.app.edit([{ op: "restore", node_id: item.top.id }], t("tree.doing.restore")) }) : null,
      );
      if (kind === "fragment") {
        row.title = t("tree.fragment_title");
        row.addEventListener("pointerdown", (event) => this.pressed(event, item.top.id, "fragment"));
      }
      list.append(row);
    }
    return el("section.subtree-section", {}, el("h3", { text: title }), items.length ? list : el("p.muted", { text: t("tree.none") }));
  }

  leafOf(id) {
    let at = id;
    for (;;) {
      const kids = this.kids.get(at) || [];
      if (!kids.length) return at;
      const node = this.byId.get(at);
      at = node.active_child_id && kids.some((k) => k.id === node.active_child_id) ? node.active_child_id : kids[kids.length - 1].id;
    }
  }

  /** Arrow keys: up to the parent, down to the child shown, left/right to a sibling. */
  navigate(key) {
    if (!this.data?.nodes.length) return false;
    const from = this.selected || this.data.head_id || this.data.nodes[0].id;
    const node = this.byId.get(from);
    let to = null;
    if (key === "ArrowUp") to = node.parent_id;
    else if (key === "ArrowDown") {
      const kids = this.kids.get(from) || [];
      to = kids.length ? this.shownChild(from, kids) : null;
    } else {
      const siblings = this.kids.get(node.parent_id ?? ROOT);
      const at = siblings.findIndex((kid) => kid.id === from);
      to = siblings[at + (key === "ArrowLeft" ? -1 : 1)]?.id ?? null;
    }
    if (!to) return true;
    this.show(to);
    return true;
  }

  startPick(op, node) {
    this.pick = { op, node };
    this.app.setDrawer?.(false); // narrow, the panel is a drawer over the tree: out of the way
    this.updateHint();
  }

  async rewrite(node) {
    const answer = await this.app.ask(t("tree.rewrite_title", { node: short(node.id) }), [{ name: "content", label: t("tree.text"), value: node.content, multiline: true }], [{ value: "ok", label: t("tree.rewrite") }]);
    if (answer) await this.app.edit([{ op: "rewrite", node_id: node.id, content: answer.content }], t("tree.doing.rewrite"));
  }

  async inject(node) {
    const answer = await this.app.ask(
      t("tree.inject_title", { node: short(node.id) }),
      [
        { name: "role", label: t("tree.role_field"), value: "system", options: ["system", "user", "assistant"] },
        { name: "content", label: t("tree.text"), value: "", multiline: true },
      ],
      [{ value: "ok", label: t("tree.inject") }],
    );
    if (answer) await this.app.edit([{ op: "inject", parent_id: node.id, role: answer.role, content: answer.content }], t("tree.doing.inject"));
  }
}
