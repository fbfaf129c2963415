"""``clotho trace-diff A B``: how two generated nodes' prompts, lore, settings, starting
states and tokens differ (:mod:`orchestrator.tracediff`).

A summary line first, then one section each: the prompt (messages the same counted,
the others marked ``+`` added, ``-`` removed, ``~`` changed with a word-level diff
``[-old-]{+new+}``), the lore, the settings, the state each started from, the tokens.
Added text is green, removed red, on a terminal. ``--json``: the comparison's document
(``TraceDiff.as_dict``).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import typer

from . import render
from ._app import Cli, app, command
from .cells import clean, terminal_width, wrap, wrap_line
from .style import COLOR, out, paint

__all__ = ["diff_lines", "trace_diff"]

#: An unchanged stretch of a changed message longer than this is shortened on a
#: terminal to its ends (``--json`` and a pipe have it whole).
KEEP_EQUAL = 160
_MARKS = re.compile(r"\[-|-\]|\{\+|\+\}")
_STYLE = {"[-": ("red", "strike"), "{+": ("green",)}


def _words(words: list[dict[str, str]], width: int | None) -> str:
    """A changed message's text with its word diff marked ``[-removed-]{+added+}``."""
    parts: list[str] = []
    for run in words:
        text = run["text"]
        if run["op"] == "removed":
            parts.append(f"[-{text}-]")
        elif run["op"] == "added":
            parts.append(f"{{+{text}+}}")
        elif width is not None and len(text) > KEEP_EQUAL:
            parts.append(f"{text[: KEEP_EQUAL // 3]} … {text[-KEEP_EQUAL // 3 :]}")
        else:
            parts.append(text)
    return "".join(parts)


def _painted(lines: list[str]) -> list[str]:
    """Lines of marked text with what the marks enclose painted (a run may go on over
    several lines)."""
    if not COLOR:
        return lines
    painted: list[str] = []
    styles: tuple[str, ...] = ()
    for line in lines:
        pieces: list[str] = []
        at = 0
        for mark in _MARKS.finditer(line):
            opening = mark.group() in _STYLE
            if opening:
                pieces.append(paint(line[at : mark.start()], *styles))
                styles = _STYLE[mark.group()]
                at = mark.start()
            else:
                pieces.append(paint(line[at : mark.end()], *styles))
                styles = ()
                at = mark.end()
        pieces.append(paint(line[at:], *styles))
        painted.append("".join(pieces))
    return painted


def _text_lines(text: str, width: int | None, *, marked: bool = False) -> list[str]:
    """A message's text, indented, wrapped to ``width`` (``None``: its lines whole);
    ``marked``: a word diff whose marks are painted."""
    lead = "    "
    if width is None:
        lines = [lead + line for line in text.split("\n")]
    else:
        lines = [lead + line for line in wrap(clean(text), max(width - len(lead), 20))]
    return _painted(lines) if marked else lines


def _change_lines(changes: list[dict[str, Any]], named_by: str, width: int | None) -> list[str]:
    """``name: a -> b`` for each change (a setting, a path of the state), or "the same"."""
    if not changes:
        return ["  the same"]
    lines: list[str] = []
    for change in changes:
        lines += wrap_line(
            f"{change[named_by]}: {_value(change['a'])} -> {_value(change['b'])}",
            width,
            lead="  ",
            indent=4,
        )
    return lines


def _section(title: str) -> str:
    return paint(f"--- {title} ---", "dim")


def _value(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _message_lines(pairs: list[dict[str, Any]], width: int | None) -> list[str]:
    lines: list[str] = []
    same: list[dict[str, Any]] = []

    def flush() -> None:
        if same:
            first, last = same[0]["b_index"] + 1, same[-1]["b_index"] + 1
            where = f"#{first}" if first == last else f"#{first}-{last}"
            count = f"{len(same)} message" + ("s" if len(same) != 1 else "")
            lines.append(paint(f"  = {count} the same ({where} in B)", "dim"))
            same.clear()

    for pair in pairs:
        if pair["status"] == "equal":
            same.append(pair)
            continue
        flush()
        role = paint(f"[{pair['role']}]", render.ROLE_STYLE.get(pair["role"], "dim"))
        if pair["status"] == "changed":
            where = f"#{pair['a_index'] + 1} -> #{pair['b_index'] + 1}"
            lines.append(f"  {paint('~', 'yellow')} {role} changed ({where})")
            if pair["whole"]:
                lines.append(paint("    too long to compare word by word: shown whole", "dim"))
            lines += _text_lines(_words(pair["words"], width), width, marked=True)
        elif pair["status"] == "added":
            lines.append(f"  {paint('+', 'green')} {role} added (#{pair['b_index'] + 1} in B)")
            lines += [paint(line, "green") for line in _text_lines(pair["b"], width)]
        else:
            lines.append(f"  {paint('-', 'red')} {role} removed (#{pair['a_index'] + 1} in A)")
            lines += [paint(line, "red") for line in _text_lines(pair["a"], width)]
    flush()
    return lines


def _lore_lines(lore: list[dict[str, Any]], width: int | None) -> list[str]:
    lines: list[str] = []
    for entry in lore:
        if entry["status"] == "only_b":
            lead, text = paint("  + ", "green"), f"{entry['id']} (B only): {entry['reason_b']}"
        elif entry["status"] == "only_a":
            lead, text = paint("  - ", "red"), f"{entry['id']} (A only): {entry['reason_a']}"
        elif entry["reason_changed"] or entry["content_changed"]:
            why = (
                f"{entry['reason_a']} -> {entry['reason_b']}"
                if entry["reason_changed"]
                else entry["reason_b"]
            )
            text = entry["id"] + (" (its text changed)" if entry["content_changed"] else "")
            lead, text = paint("  ~ ", "yellow"), f"{text}: {why}"
        else:
            lead, text = paint("  = ", "dim"), f"{entry['id']}: {entry['reason_a']}"
        lines += wrap_line(text, width, lead=lead, indent=4)
    return lines or ["  no lore fired in either"]


def diff_lines(diff: dict[str, Any], width: int | None) -> list[str]:
    """The comparison (``TraceDiff.as_dict``) as lines, styled, wrapped to ``width``
    (``None``: lines whole)."""
    a, b = diff["a"], diff["b"]
    lines = wrap_line(
        f"A {render.short(a['node_id'])} ({a['kind']}, {a['model']}) -> "
        f"B {render.short(b['node_id'])} ({b['kind']}, {b['model']})",
        width,
        lead=paint("trace-diff", "bold") + " ",
        indent=2,
    )
    lines += wrap_line(diff["summary"], width, lead="  ", indent=4, styles=("bold",))
    for side, name in ((a, "A"), (b, "B")):
        for problem in side["problems"]:
            lines += wrap_line(f"! {name}: {problem}", width, lead="  ", indent=4, styles=("red",))
    lines.append(_section("prompt"))
    lines += _message_lines(diff["messages"], width)
    lines.append(_section("lore"))
    lines += _lore_lines(diff["lore"], width)
    lines.append(_section("settings"))
    lines += _change_lines(diff["settings"], "name", width)
    lines.append(_section("state each started from"))
    lines += _change_lines(diff["state"], "path", width)
    for side, name in ((a, "A"), (b, "B")):
        if side["delta"]:
            lines += wrap_line(
                f"{name}'s reply changed: {json.dumps(side['delta'], ensure_ascii=False)}",
                width,
                lead="  ",
                indent=4,
                styles=("dim",),
            )
    lines.append(_section("tokens"))
    tokens = diff["tokens"]
    for kind in ("prompt", "completion"):
        before, after, change = (tokens[key][kind] for key in ("a", "b", "difference"))
        shown = "" if change is None else f" ({change:+d})"
        lines.append(f"  {kind}: {_value(before)} -> {_value(after)}{shown}")
    return lines


@command(app, "trace-diff")
def trace_diff(
    cli: Cli,
    a: Annotated[str, typer.Argument(metavar="A", help="A generated node (id, prefix, HEAD~1).")],
    b: Annotated[str, typer.Argument(metavar="B", help="Another generated node to compare.")],
) -> None:
    """How two generated nodes' prompts, lore, settings, starting states and tokens
    differ: why two rerolls diverged, what an edit changed for the model."""
    from orchestrator.tracediff import trace_diff as compare  # the turn loop: loaded here

    session_id = cli.session_id()
    document = compare(cli.store, session_id, a, b).as_dict()
    cli.emit(document, lambda: out(*diff_lines(document, terminal_width())))
