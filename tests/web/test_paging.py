"""A long story in the chat view: the page shows the last 200 messages and reads the
ones before window by window through the API's cursor (`next`) when asked, each window
above the last, the view kept where it was; a turn keeps every message shown."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .test_page import expect, say

pytestmark = pytest.mark.slow

MESSAGES = 450


def long_chat(api: httpx.Client) -> str:
    """A SillyTavern chat of ``MESSAGES`` messages, imported: its session id."""
    lines = [json.dumps({"user_name": "unused", "character_name": "unused", "chat_metadata": {}})]
    for i in range(MESSAGES):
        lines.append(
            json.dumps(
                {
                    "name": "Traveler" if i % 2 else "Seraphina",
                    "is_user": bool(i % 2),
                    "is_system": False,
                    "send_date": "2025-03-01T18:00:00.000Z",
                    "mes": f"message {i}",
                }
            )
        )
    answer = api.post(
        "/api/imports/chat", params={"filename": "long.jsonl"}, content="\n".join(lines)
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["session"]["id"]


def test_earlier_messages_come_window_by_window(
    open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = long_chat(api)
    page = open_page(sid)
    messages = page.locator("article.message")
    expect(messages).to_have_count(200)
    expect(messages.first.locator(".content")).to_have_text(f"message {MESSAGES - 200}")
    earlier = page.locator("button.earlier")
    expect(earlier).to_have_text("Show 200 earlier messages (250 not shown)")

    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    earlier.click()
    expect(messages).to_have_count(400)
    assert [url for url in requests if "/projection" in url] == [
        page.url.split("/#")[0]
        + f"/api/sessions/{sid}/projection?before={_id(api, sid, 250)}&limit=200"
        + "&metadata=true&disabled=true"
    ]
    expect(messages.nth(200).locator(".content")).to_be_in_viewport()  # where it was
    expect(earlier).to_have_text("Show 50 earlier messages (50 not shown)")
    earlier.click()
    expect(messages).to_have_count(MESSAGES)
    expect(messages.first.locator(".content")).to_have_text("message 0")
    expect(earlier).to_have_count(0)

    say(page, "I look back on the long road.")  # a turn: everything shown stays shown
    expect(messages).to_have_count(MESSAGES + 2)
    expect(messages.first.locator(".content")).to_have_text("message 0")


def _id(api: httpx.Client, sid: str, index: int) -> str:
    """The id of the ``index``-th message of the path."""
    page = api.get(f"/api/sessions/{sid}/projection", params={"limit": 1000}).json()
    return page["nodes"][index]["id"]
