"""A PromptTrace as text: what ``clotho trace`` and play's ``/trace`` print."""

from __future__ import annotations

import json
from typing import Any

from . import render
from .style import out, paint

__all__ = ["print_trace"]


def print_trace(trace: dict[str, Any]) -> None:
    ok = paint("verified", "green") if trace["verified"] else paint("NOT verified", "red")
    usage = trace.get("usage") or {}
    lines = [
        f"{paint('trace', 'bold')} of {render.short(trace['node_id'])} ({trace['kind']}): "
        f"{trace['model']}, {trace['latency_ms']} ms, "
        f"{usage.get('prompt_tokens', '?')} + {usage.get('completion_tokens', '?')} tokens; "
        f"messages {ok}",
    ]
    lines += [f"  {paint('!', 'red')} {problem}" for problem in trace["problems"]]
    if trace.get("params"):
        lines.append(f"  params: {json.dumps(trace['params'])}")
    planner = trace.get("planner") or {}
    lines.append(f"  planner ({planner.get('strategy')}): {planner.get('reasoning')}")
    for hit in trace.get("lore") or []:
        lines.append(f"  lore {hit['id']}: {hit['reason']}")
    for miss in trace.get("lore_skipped") or []:
        lines.append(f"  not {miss['id']}: {miss['reason']}")
    if trace.get("system_prompt"):
        lines.append("  system prompt: the session's own, in place of system.j2")
    note = trace.get("author_note")
    if note:
        lines.append(f"  author's note: {note['reason']}")
    trimmed = trace.get("trimmed") or {}
    if trimmed.get("dropped"):
        summary = trimmed.get("summary") or {}
        how = "reused the summary" if summary.get("reused") else "wrote a new summary"
        lines.append(
            f"  trimmed: {trimmed['dropped']} old message(s) left out for the window of "
            f"{trimmed['window']} tokens; {how}"
        )
    post = trace.get("postprocess") or {}
    if post.get("skipped"):
        lines.append(f"  state: {post['skipped']}")
    elif post:
        outcome = "ok" if post.get("ok") else f"FAILED ({post.get('error')})"
        lines.append(
            f"  state: {outcome} after {len(post.get('attempts', []))} call(s) to "
            f"{post.get('model')}; delta {json.dumps(trace.get('delta'))}"
        )
    if trace.get("incomplete"):
        lines.append(f"  {paint('incomplete', 'yellow')}: {trace.get('stopped_by')}")
    templates = ", ".join(
        f"{name}" + ("" if info["origin"] == "package" else " (campaign)")
        for name, info in (trace.get("templates") or {}).items()
    )
    lines.append(f"  templates: {templates}")
    lines.append(paint(f"--- {len(trace['messages'])} messages sent ---", "dim"))
    for message in trace["messages"]:
        lines.append(paint(f"[{message['role']}]", render.ROLE_STYLE.get(message["role"], "dim")))
        lines.append(message["content"])
    out(*lines)
