// One drawing of a word-level diff, shared by the replay's side-by-side view (replay.js)
// and the comparison of two traces (tracediff.js): the runs {op, text} in order, those
// removed struck out (<del>), those added marked (<ins>), the others as plain text.

import { el } from "./ui.js";

/** The runs of a word diff ({op: "removed" | "added" | any other: kept, text}) drawn in an element made by `el(tag)`. */
export function diffView(tag, runs) {
  return el(
    tag,
    {},
    runs.map((run) => (run.op === "removed" ? el("del", { text: run.text }) : run.op === "added" ? el("ins", { text: run.text }) : run.text)),
  );
}
