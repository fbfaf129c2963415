// Names on nodes in the tree view: bookmarks (tags) and named branches (docs/tags.md).
// The session's names come from GET .../refs with the tree; a named node carries a
// small label under its text (★ first-meeting, ⎇ main) and its names as badges in the
// panel, with "Bookmark this…", rename and delete; the panel lists every name, and
// choosing one jumps to its node. Every change is one write (If-Match, one undo step).

import { t } from "./i18n.js";
import { el, preview, short } from "./ui.js";

const GLYPH = { tag: "★", branch: "⎇" };

export class TreeNames {
  constructor(view) {
    this.view = view;
    this.refs = [];
    this.byNode = new Map();
  }

  /** Read the session's names (with the tree: TreeView.load). */
  async load() {
    const app = this.view.app;
    const data = await app.api.get(app.path("/refs"));
    this.refs = data.refs;
    this.byNode = new Map();
    for (const ref of this.refs) {
      if (!this.byNode.has(ref.node_id)) this.byNode.set(ref.node_id, []);
      this.byNode.get(ref.node_id).push(ref);
    }
  }

  any() {
    return this.refs.length > 0;
  }

  has(id) {
    return this.byNode.has(id);
  }

  /** The small label under a named node's text: `★ first-meeting ⎇ main`. */
  label(id) {
    return (this.byNode.get(id) || []).map((ref) => `${GLYPH[ref.kind]} ${ref.name}`).join("  ");
  }

  /** A node's names as badges (in the panel). */
  badges(id) {
    return (this.byNode.get(id) || []).map((ref) =>
      el(`span.badge.ref.${ref.kind}`, { text: `${GLYPH[ref.kind]} ${ref.name}`, title: t(`names.kind.${ref.kind}`), dataset: { ref: ref.name } }),
    );
  }

  /** The panel's buttons for a node: bookmark it; rename or delete each of its names. */
  actions(node) {
    const button = (action, text, onclick, title = "") => el("button", { type: "button", text, title, onclick, dataset: { action } });
    const own = (this.byNode.get(node.id) || []).flatMap((ref) => [
      button("rename-name", t("names.rename", { name: ref.name }), () => this.rename(ref)),
      button("delete-name", t("names.delete", { name: ref.name }), () => this.remove(ref)),
    ]);
    return [button("bookmark", t("names.bookmark"), () => this.create(node), t("names.bookmark_title")), ...own];
  }

  /** Every name, each a button that jumps to its node (or says where it is). */
  section() {
    const list = el("ul.names");
    for (const ref of this.refs) {
      const where = ref.place === "tree" ? "" : ` (${t(`names.place.${ref.place}`)})`;
      list.append(
        el(
          "li",
          { dataset: { ref: ref.name, nodeId: ref.node_id } },
          el("button.jump", {
            type: "button",
            title: t("names.jump_title"),
            onclick: () => this.jump(ref),
          }, el(`span.glyph.${ref.kind}`, { text: GLYPH[ref.kind] }), " ", el("strong", { text: ref.name }), " ", el("span.muted", { text: `${short(ref.node_id)} ${preview(ref.text, 36)}${where}` })),
        ),
      );
    }
    return el("section.names-section", {}, el("h3", { text: t("names.title", { count: this.refs.length }) }), this.refs.length ? list : el("p.muted", { text: t("names.none") }));
  }

  jump(ref) {
    if (!this.view.show(ref.node_id)) this.view.app.fail(new Error(t("names.not_in_view", { name: ref.name })), t("names.jumping"));
  }

  async create(node) {
    const app = this.view.app;
    const answer = await app.ask(
      t("names.bookmark_heading", { node: short(node.id) }),
      [{ name: "name", label: t("names.name"), value: "" }],
      [
        { value: "tag", label: t("names.as_tag") },
        { value: "branch", label: t("names.as_branch") },
      ],
    );
    if (!answer) return;
    await app.write("POST", "/refs", { name: answer.name.trim(), kind: answer.action, node_id: node.id }, t("names.doing.create"));
  }

  async rename(ref) {
    const app = this.view.app;
    const answer = await app.ask(t("names.rename_heading", { name: ref.name }), [{ name: "name", label: t("names.name"), value: ref.name }], [{ value: "ok", label: t("names.rename_ok") }]);
    if (!answer || answer.name.trim() === ref.name) return;
    await app.write("PATCH", `/refs/${encodeURIComponent(ref.name)}`, { name: answer.name.trim() }, t("names.doing.rename"));
  }

  async remove(ref) {
    await this.view.app.write("DELETE", `/refs/${encodeURIComponent(ref.name)}`, undefined, t("names.doing.delete"));
  }
}
