"""The chat view names who speaks: an imported chat's player and character, on the
messages that came with it, on a message added by hand (no name of its own), on the
bubbles of a turn and on the nodes the turn stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests._fixtures import FIXTURES

from .test_page import expect, say

pytestmark = pytest.mark.slow


def test_the_chat_view_labels_speakers_by_name(
    open_page: Callable[..., Any], api: httpx.Client
) -> None:
    data = (FIXTURES / "chats" / "greeting_swipes.jsonl").read_bytes()
    made = api.post("/api/imports/chat", content=data, params={"filename": "greeting.jsonl"})
    assert made.status_code == 201, made.text
    sid = made.json()["session"]["id"]
    added = api.post(f"/api/sessions/{sid}/messages", json={"role": "user", "content": "Hi."})
    assert added.status_code == 201, added.text
    page = open_page(sid)
    who = page.locator("article.message .who")
    expect(who).to_have_text(["Seraphina", "Aldric"])  # the added message has no name
    say(page, "I look around the glade.")
    expect(who).to_have_text(["Seraphina", "Aldric", "Aldric", "Seraphina"])
    nodes = api.get(f"/api/sessions/{sid}/projection").json()["nodes"]
    assert [n["name"] for n in nodes][-2:] == ["Aldric", "Seraphina"]
