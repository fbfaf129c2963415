// The tree view ("god view"): the whole conversation as a graph drawn with d3 (a tidy
// tree layout, SVG, zoom and pan). The trunk (root → HEAD) is highlighted; branches off
// it are folded until opened. Click a node to read it, shift-click a second one to
// compare their states, drag a node or a pruned fragment onto another node to graft it
// there.
// Dragging a node grafts it with its subtree (Alt or Ctrl: copies it, Shift: moves the
// node alone).

import { renderDiff, renderState } from "./panels.js";
import { clear, el, formatTokens, preview, short } from "./ui.js";

const d3 = globalThis.d3;
const DX = 190; // horizontal room of a node (its label included)
const DY = 40; // one generation
const ROOT = "@start";
const DRAG_START_PX = 6;

/** What dropping does: a fragment is grafted; a node is grafted with its subtree, copied
 * with it (Alt or Ctrl held), or moved alone (Shift held: its children stay). */
function dropOp(kind, event) {
  if (kind === "fragment") return "graft";
  if (event.altKey || event.ctrlKey) return "copy";
  return event.shiftKey ? "move" : "graft";
}

/** Run after the browser has painted what was drawn (the measurements' end). */
function afterPaint(callback) {
  requestAnimationFrame(() => setTimeout(callback, 0));
}

export class TreeView {
  constructor(app) {
    this.app = app;
    this.root = document.getElementById("tree-view");
    this.panel = document.getElementById("node-panel");
    this.svg = d3.select("#tree-svg");
    this.layer = this.svg.append("g").attr("class", "layer");
    this.links = this.layer.append("g").attr("class", "links");
    this.nodes = this.layer.append("g").attr("class", "nodes");
    this.zoom = d3
      .zoom()
      .scaleExtent([0.03, 3])
      .filter((event) => !event.target.closest?.(".node, .fold") && !event.button && (event.type === "wheel" || !event.ctrlKey))
      .on("zoom", (event) => {
        this.layer.attr("transform", event.transform);
        this.schedulePaint();
      });
    this.svg.call(this.zoom).on("dblclick.zoom", null);
    window.addEventListener("resize", () => this.schedulePaint());
    this.open = new Set(); // nodes whose every child is shown
    this.selected = null;
    this.compare = null;
    this.placed = null; // the session whose view was centred once
    this.data = null;
    this.fragments = [];
    this.trash = [];
    this.pick = null; // {op, node}: the next node clicked is the target
    document.getElementById("tree-center").addEventListener("click", () => this.centerOn(this.data?.head_id));
    document.getElementById("tree-fit").addEventListener("click", () => this.fit());
    document.getElementById("tree-fold").addEventListener("click", () => {
      this.open.clear();
      this.draw();
    });
  }

  reset() {
    this.open.clear();
    this.selected = null;
    this.compare = null;
    this.placed = null;
    this.pick = null;
  }

  async load() {
    const app = this.app;
    const sid = app.sid;
    const [tree, fragments, trash] = await Promise.all([
      this.readTree(),
      app.api.get(app.path("/fragments")),
      app.api.get(app.path("/trash")),
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
      this.centerOn(this.data.head_id); // paints the part around HEAD
    }
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
  }

  /** The child a folded node continues with: the trunk, else its active child. */
  shownChild(id, kids) {
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

  /**
   * Draw the laid-out nodes and links that are in the viewport (and a margin): the SVG
   * holds what can be seen, not the whole tree, so a tree of thousands of nodes stays
   * as quick to draw, pan and unfold as a small one. Far out, labels are left out.
   */
  paint() {
    this.paintQueued = false;
    if (!this.laid) return;
    const t = d3.zoomTransform(this.svg.node());
    const width = this.svg.node().clientWidth;
    const height = this.svg.node().clientHeight;
    const margin = 160;
    const x0 = (-margin - t.x) / t.k - DX;
    const x1 = (width + margin - t.x) / t.k;
    const y0 = (-margin - t.y) / t.k;
    const y1 = (height + margin - t.y) / t.k;
    const shown = this.laid.filter((d) => d.x >= x0 && d.x <= x1 && d.y >= y0 && d.y <= y1);
    const linked = this.laid.filter((d) => d.parent && d.y >= y0 && d.parent.y <= y1 && Math.max(d.x, d.parent.x) >= x0 && Math.min(d.x, d.parent.x) <= x1);
    const head = this.data.head_id;
    const far = t.k < 0.35;
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
        g.append("rect").attr("class", "hit").attr("x", -11).attr("y", -11).attr("width", DX - 30).attr("height", 22);
        g.append("circle");
        g.append("text").attr("class", "label").attr("x", 12).attr("dy", "0.32em");
        g.append("title");
        const fold = g.append("g").attr("class", "fold");
        fold.append("rect").attr("x", -54).attr("y", -8).attr("width", 40).attr("height", 16).attr("rx", 8);
        fold.append("text").attr("x", -34).attr("dy", "0.32em").attr("text-anchor", "middle");
        fold.on("click", (event, d) => {
          event.stopPropagation();
          this.toggleFold(d.data.id, event.timeStamp);
        });
        g.on("click", (event, d) => this.clicked(event, d.data.id));
        g.on("pointerdown", (event, d) => this.pressed(event, d.data.id, "node"));
        return g;
      })
      .attr("transform", (d) => `translate(${d.x},${d.y})`)
      .attr("data-node-id", (d) => (d.data.node ? d.data.id : null))
      .attr("class", (d) => {
        const node = d.data.node;
        if (!node) return "node start";
        const classes = ["node", node.role];
        if (this.trunk.has(node.id)) classes.push("trunk");
        if (node.id === head) classes.push("head");
        if (!node.enabled) classes.push("disabled");
        if (node.id === this.selected) classes.push("selected");
        if (node.id === this.compare) classes.push("compared");
        return classes.join(" ");
      });
    groups.select("circle").attr("r", (d) => (d.data.node ? (d.data.id === head ? 9 : 7) : 5));
    groups.select("text.label").text((d) => (far ? "" : d.data.node ? preview(d.data.node.content, 24) : "start"));
    groups.select("title").text((d) => (d.data.node ? `${d.data.node.role} ${short(d.data.id)}\n${preview(d.data.node.content, 300)}` : "the start of the story"));
    groups
      .select("g.fold")
      .attr("display", (d) => (d.data.hidden || (d.data.foldable && this.open.has(d.data.id)) ? null : "none"))
      .attr("data-fold-id", (d) => d.data.id)
      .select("text")
      .text((d) => (d.data.hidden ? `+${d.data.hidden}` : "−"));
  }

  /** Open or fold a branch; ``started``: when the user asked (an event's timeStamp). */
  toggleFold(id, started = performance.now()) {
    if (this.open.has(id)) this.open.delete(id);
    else this.open.add(id);
    this.draw();
    afterPaint(() => performance.measure("clotho:tree-fold", { start: started, detail: { id } }));
  }

  centerOn(id) {
    const d = id ? this.positions?.get(id) : this.positions?.get(ROOT);
    if (!d) return;
    const node = this.svg.node();
    const k = d3.zoomTransform(node).k || 1;
    this.svg.call(this.zoom.transform, d3.zoomIdentity.translate(node.clientWidth / 2 - d.x * k, node.clientHeight / 2 - d.y * k).scale(k));
    this.paint();
  }

  /** Zoom to show every unfolded node. */
  fit() {
    if (!this.laid?.length) return;
    const [leftmost, rightmost] = d3.extent(this.laid, (d) => d.x);
    const left = leftmost - 60; // the +N badges
    const [top, bottom] = d3.extent(this.laid, (d) => d.y);
    const right = rightmost + DX;
    const node = this.svg.node();
    const k = Math.max(0.03, Math.min(2, 0.92 * Math.min(node.clientWidth / (right - left || 1), node.clientHeight / (bottom - top || 1))));
    const x = node.clientWidth / 2 - k * (left + right) / 2;
    const y = node.clientHeight / 2 - k * (top + bottom) / 2;
    this.svg.call(this.zoom.transform, d3.zoomIdentity.translate(x, y).scale(k));
    this.paint();
  }

  clicked(event, id) {
    if (this.dragged) return; // the click that ends a drag
    if (id === ROOT) return;
    if (this.pick) {
      const { op, node } = this.pick;
      this.pick = null;
      this.updateHint();
      this.relocate(op, node, id);
      return;
    }
    if (event.shiftKey && this.selected && id !== this.selected) this.compare = id;
    else {
      this.selected = id;
      this.compare = null;
    }
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
        const node = kind === "node" ? this.byId.get(id) : this.fragments.find((f) => f.top.id === id)?.top;
        ghost = el("div.drag-ghost", { text: preview(node?.content || id, 40) });
        document.body.append(ghost);
        this.root.classList.add("dragging");
      }
      ghost.style.left = `${e.clientX + 12}px`;
      ghost.style.top = `${e.clientY + 12}px`;
      ghost.dataset.op = dropOp(kind, e);
      this.nodes.selectAll("g.drop-target").classed("drop-target", false);
      const over = document.elementFromPoint(e.clientX, e.clientY)?.closest?.("g.node[data-node-id]");
      if (over && over.dataset.nodeId !== id) over.classList.add("drop-target");
    };
    const up = (e) => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      this.root.classList.remove("dragging");
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

  async relocate(op, node, onto) {
    const operation = { op, node_id: node, parent_id: onto };
    if (op === "copy") operation.subtree = true;
    const verb = { move: "Moving", copy: "Copying", graft: "Grafting" }[op];
    await this.app.edit([operation], `${verb} ${short(node)} onto ${short(onto)}`);
  }

  updateHint() {
    const hint = document.getElementById("tree-hint");
    if (this.pick) {
      hint.textContent = `Click the node to ${this.pick.op} ${short(this.pick.node)} onto (Esc: cancel)`;
      return;
    }
    const visible = this.svg.attr("data-visible");
    hint.textContent = this.data ? `${visible} of ${this.data.nodes.length} nodes shown · v${this.data.version}` : "";
  }

  cancelPick() {
    if (!this.pick) return false;
    this.pick = null;
    this.updateHint();
    return true;
  }

  // -- the panel: the selected node, its state, the diff, fragments and trash ----------

  async renderPanel() {
    const panel = this.panel;
    const app = this.app;
    const sid = app.sid;
    const id = this.selected;
    const node = id && this.byId.get(id);
    const parts = [];
    let stateBox = null;
    let diffBox = null;
    if (!node) {
      parts.push(
        el("h2", { text: "The tree" }),
        el("p.muted", {
          text: "Click a node to read it; shift-click a second node to compare their states. Drag a node onto another to graft it there with its subtree (hold Alt or Ctrl to copy it, Shift to move the node alone); drag a pruned fragment onto a node to graft it. +N opens a folded branch. Ctrl+Z undoes, Ctrl+Shift+Z redoes.",
        }),
      );
    } else {
      const isHead = node.id === this.data.head_id;
      const button = (label, onclick, title = "") => el("button", { type: "button", text: label, title, onclick, dataset: { action: label.toLowerCase().replace(/[^a-z]+/g, "-").replace(/-$/, "") } });
      parts.push(
        el("h2", {}, `${node.name || node.role} `, el("span.id", { text: short(node.id) })),
        el("p.badges", {}, isHead ? el("span.badge.head", { text: "HEAD" }) : null, this.trunk.has(node.id) ? el("span.badge", { text: "trunk" }) : null, node.enabled ? null : el("span.badge.off", { text: "disabled" })),
        el("div.node-content", { text: node.content }),
        node.metadata?.usage ? el("p.muted", { text: `tokens: ${formatTokens(node.metadata.usage)}` }) : null,
        node.delta?.length ? el("details", { open: true }, el("summary", { text: "Changes to the state" }), el("ul.delta", {}, node.delta.map((op) => el("li", { text: `${op.op} ${op.path}${"value" in op ? ` ${JSON.stringify(op.value)}` : ""}` })))) : null,
        el(
          "div.node-actions",
          {},
          button("Set HEAD here", () => app.edit([{ op: "checkout", node_id: node.id }], "Checkout"), "Move HEAD to this node"),
          button("Switch trunk here", () => app.edit([{ op: "checkout", node_id: this.leafOf(node.id) }], "Switching the trunk"), "Make this node's branch, down to its leaf, the story"),
          button("Rewrite…", () => this.rewrite(node)),
          button("Inject after…", () => this.inject(node)),
          button(node.enabled ? "Disable" : "Enable", () => app.edit([{ op: "toggle", node_id: node.id }], node.enabled ? "Disabling" : "Enabling"), "Hide from / show to the model"),
          button("Prune", () => app.edit([{ op: "prune", node_id: node.id }], "Pruning"), "Cut this subtree off into the fragments, to graft elsewhere"),
          button("Delete", () => app.edit([{ op: "delete", node_id: node.id }], "Deleting"), "Move this subtree to the trash"),
          button("Graft…", () => this.startPick("graft", node.id), "Then click the node to hang this subtree under"),
          button("Move…", () => this.startPick("move", node.id), "This node alone (its children stay): then click where to"),
          button("Copy…", () => this.startPick("copy", node.id), "A copy of the subtree: then click where to"),
          node.metadata?.generated ? button("Trace", () => app.openTrace(node.id), "What the model was sent, and why") : null,
        ),
      );
      stateBox = el("div.state-box");
      parts.push(stateBox);
      if (this.compare) {
        diffBox = el("div.diff-box");
        parts.push(diffBox);
      }
    }
    parts.push(this.subtreeList("Fragments (pruned)", this.fragments, "fragment"), this.subtreeList("Trash", this.trash, "trash"));
    clear(panel).append(...parts.filter(Boolean));
    if (!node) return;
    try {
      const requests = [app.api.get(app.path(`/state?node_id=${encodeURIComponent(node.id)}`))];
      if (this.compare) requests.push(app.api.get(app.path(`/diff?from_id=${encodeURIComponent(node.id)}&to_id=${encodeURIComponent(this.compare)}`)));
      const [state, diff] = await Promise.all(requests);
      if (sid !== app.sid || id !== this.selected) return;
      renderState(stateBox, state, null, `State after ${short(node.id)}`);
      if (diffBox) renderDiff(diffBox, diff, node.id, this.compare);
    } catch (error) {
      app.fail(error, "Reading the node's state");
    }
  }

  subtreeList(title, items, kind) {
    const list = el(`ul.subtrees.${kind}`);
    for (const item of items) {
      const row = el(
        "li",
        { dataset: { nodeId: item.top.id, kind } },
        el("span.grip", { text: kind === "fragment" ? "⠿" : "" }),
        el("span.what", { text: `${item.top.role}: ${preview(item.top.content, 40)}` }),
        el("span.muted", { text: ` (${item.size} node${item.size === 1 ? "" : "s"})` }),
        kind === "trash" ? el("button", { type: "button", text: "Restore", onclick: () => this.app.edit([{ op: "restore", node_id: item.top.id }], "Restoring") }) : null,
      );
      if (kind === "fragment") {
        row.title = "Drag onto a node to graft it there";
        row.addEventListener("pointerdown", (event) => this.pressed(event, item.top.id, "fragment"));
      }
      list.append(row);
    }
    return el("section.subtree-section", {}, el("h3", { text: `${title} (${items.length})` }), items.length ? list : el("p.muted", { text: "none" }));
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
    const parent = this.byId.get(to).parent_id;
    if (!this.positions.has(to) && parent) this.open.add(parent);
    this.selected = to;
    this.compare = null;
    this.draw();
    this.centerOn(to);
    this.renderPanel();
    return true;
  }

  startPick(op, node) {
    this.pick = { op, node };
    this.updateHint();
  }

  async rewrite(node) {
    const answer = await this.app.ask(`Rewrite ${short(node.id)} in place`, [{ name: "content", label: "Text", value: node.content, multiline: true }], [{ value: "ok", label: "Rewrite" }]);
    if (answer) await this.app.edit([{ op: "rewrite", node_id: node.id, content: answer.content }], "Rewriting");
  }

  async inject(node) {
    const answer = await this.app.ask(
      `Inject a message after ${short(node.id)}`,
      [
        { name: "role", label: "Role", value: "system", options: ["system", "user", "assistant"] },
        { name: "content", label: "Text", value: "", multiline: true },
      ],
      [{ value: "ok", label: "Inject" }],
    );
    if (answer) await this.app.edit([{ op: "inject", parent_id: node.id, role: answer.role, content: answer.content }], "Injecting");
  }
}
