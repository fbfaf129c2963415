"""A PromptTrace as text: what ``clotho trace`` and play's ``/trace`` print."""

from __future__ import annotations

import json
from typing import Any

from . import render
from .cells import clean, terminal_width, wrap, wrap_line
from .style import out, paint

__all__ = ["print_trace", "trace_lines"]


def _detail(text: str, width: int | None, *styles: str) -> list[str]:
    """A line of the trace's summary: two spaces in, continuation four."""
    return wrap_line(text, width, lead="  ", indent=4, styles=styles)


def trace_lines(trace: dict[str, Any], width: int | None) -> list[str]:
    """The trace's lines, styled, wrapped to ``width`` (``None``: lines whole, the
    messages' text as stored)."""
    ok = "verified" if trace["verified"] else "NOT verified"
    usage = trace.get("usage") or {}
    lines = wrap_line(
        f"of {render.short(trace['node_id'])} ({trace['kind']}): {trace['model']}, "
        f"{trace['latency_ms']} ms, {usage.get('prompt_tokens', '?')} + "
        f"{usage.get('completion_tokens', '?')} tokens; messages {ok}",
        width,
        lead=paint("trace", "bold") + " ",
        indent=2,
        styles=() if trace["verified"] else ("red",),
    )
    for problem in trace["problems"]:
        lines += _detail(f"! {problem}", width, "red")
    if trace.get("params"):
        lines += _detail(f"params: {json.dumps(trace['params'])}", width)
    planner = trace.get("planner") or {}
    lines += _detail(f"planner ({planner.get('strategy')}): {planner.get('reasoning')}", width)
    lines += _scene_lines(trace.get("scene"), width)
    for hit in trace.get("lore") or []:
        lines += _detail(f"lore {hit['id']}: {hit['reason']}", width)
    for miss in trace.get("lore_skipped") or []:
        lines += _detail(f"not {miss['id']}: {miss['reason']}", width)
    if trace.get("system_prompt"):
        lines += _detail("system prompt: the session's own, in place of system.j2", width)
    note = trace.get("author_note")
    if note:
        lines += _detail(f"author's note: {note['reason']}", width)
    trimmed = trace.get("trimmed") or {}
    if trimmed.get("dropped"):
        summary = trimmed.get("summary") or {}
        how = "reused the summary" if summary.get("reused") else "wrote a new summary"
        lines += _detail(
            f"trimmed: {trimmed['dropped']} old message(s) left out for the window of "
            f"{trimmed['window']} tokens; {how}",
            width,
        )
    post = trace.get("postprocess") or {}
    if post.get("skipped"):
        lines += _detail(f"state: {post['skipped']}", width)
    elif post:
        outcome = "ok" if post.get("ok") else f"FAILED ({post.get('error')})"
        lines += _detail(
            f"state: {outcome} after {len(post.get('attempts', []))} call(s) to "
            f"{post.get('model')}; delta {json.dumps(trace.get('delta'))}",
            width,
        )
    if trace.get("incomplete"):
        lines += _detail(f"incomplete: {trace.get('stopped_by')}", width, "yellow")
    templates = ", ".join(
        f"{name}" + ("" if info["origin"] == "package" else " (campaign)")
        for name, info in (trace.get("templates") or {}).items()
    )
    lines += _detail(f"templates: {templates}", width)
    lines.append(paint(f"--- {len(trace['messages'])} messages sent ---", "dim"))
    for message in trace["messages"]:
        lines.append(paint(f"[{message['role']}]", render.ROLE_STYLE.get(message["role"], "dim")))
        if width is None:
            lines.append(message["content"])
        else:
            lines += wrap(clean(message["content"]), width)
    return lines


#: How many runs of messages a speaker missed the trace's text names (the rest counted).
LEFT_OUT_NAMED = 8


def _run(run: dict[str, Any]) -> str:
    """A run of messages left out, ``1a2b3c4d..5e6f7a8b (4)``: its first and last node,
    shortened, and how many messages."""
    first, last = render.short(run.get("first")), render.short(run.get("last"))
    ends = first if first == last else f"{first}..{last}"
    return f"{ends} ({run.get('count', '?')})"


def _scene_lines(scene: Any, width: int | None) -> list[str]:
    """In a cast of several: who spoke, who was present, the messages left out of the
    prompt because the speaker was away (as runs, a few named), and the lore left out
    because its book's owners were away."""
    if not isinstance(scene, dict):
        return []
    speaker = scene.get("speaker") or "?"
    present = scene.get("present")
    here = ", ".join(present) if isinstance(present, list) and present else "no one"
    lines = _detail(f"scene: {speaker} speaks; present: {here}", width)
    runs = [run for run in scene.get("left_out") or [] if isinstance(run, dict)]
    if runs:
        total = sum(run.get("count", 0) for run in runs if isinstance(run.get("count"), int))
        named = ", ".join(_run(run) for run in runs[:LEFT_OUT_NAMED])
        more = f" and {len(runs) - LEFT_OUT_NAMED} more runs" if len(runs) > LEFT_OUT_NAMED else ""
        count = f"{total} message" + ("s" if total != 1 else "")
        lines += _detail(
            f"left out: {count} {speaker} did not witness (away): {named}{more}", width
        )
    for lore in scene.get("lore_left_out") or []:
        if not isinstance(lore, dict):
            continue
        why = lore.get("reason") or "its book's owners were away"
        lines += _detail(f"lore left out: {lore.get('id', '?')}: {why}", width)
    return lines


def print_trace(trace: dict[str, Any]) -> None:
    """The trace, wrapped to the terminal's width (whole lines to a pipe)."""
    out(*trace_lines(trace, terminal_width()))
