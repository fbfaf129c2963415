"""A tree of more nodes than a page holds in the tree view: the page reads the tree's
pages one after another through the API's cursor (`next`) and draws every node."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .test_page import expect

pytestmark = pytest.mark.slow

MESSAGES = 1_250  # more than the 1,000 nodes of a page


def long_chat(api: httpx.Client) -> str:
    """A SillyTavern chat of ``MESSAGES`` messages, imported: its session id."""
    lines = [json.dumps({"user_name": "unused", "character_name": "unused", "chat_metadata": {}})]
    for i in range(MESSAGES):
        message = {"name": "x", "is_user": bool(i % 2), "mes": f"message {i}"}
        lines.append(json.dumps({**message, "send_date": "2025-03-01T18:00:00.000Z"}))
    answer = api.post(
        "/api/imports/chat", params={"filename": "long.jsonl"}, content="\n".join(lines)
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["session"]["id"]


def test_the_tree_view_reads_every_page(open_page: Callable[..., Any], api: httpx.Client) -> None:
    sid = long_chat(api)
    first = api.get(f"/api/sessions/{sid}/tree").json()
    assert first["total"] == MESSAGES and len(first["nodes"]) == 1000

    page = open_page(sid, view="tree")
    expect(page.locator("#tree-svg")).to_have_attribute("data-total", str(MESSAGES))
    fetched = page.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    reads = [url.split("/api/")[1] for url in fetched if "/tree?" in url]
    assert reads == [
        f"sessions/{sid}/tree?limit=1000",
        f"sessions/{sid}/tree?after={first['nodes'][-1]['id']}&limit=1000",
    ]
