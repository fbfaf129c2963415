"""The turns as SillyTavern players expect them, in the page: `>` on the last alternative
of the last reply generates a new one, Continue extends the reply in place, Impersonate
fills the input box and stores nothing, Undo takes a turn back (and Redo brings it),
"delete from here" asks first and goes to the trash; the buttons with nothing to do are
disabled. At desktop width, then the same page at phone width."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .conftest import guide_screenshot
from .test_page import FIGHT, expect, say

pytestmark = pytest.mark.slow


def test_swipe_continue_impersonate_undo_and_delete(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("turns")
    page = open_page(sid)
    expect(page.locator("#continue")).to_be_disabled()  # nothing to continue yet
    expect(page.locator("#stop")).to_be_disabled()  # no turn playing
    say(page, FIGHT)
    replies = page.locator("article.message.assistant")
    count = replies.last.locator(".alternatives .count")
    expect(count).to_have_text("1/1")
    expect(page.locator("#composer-input")).to_have_value("")  # sent: it left the input

    # `>` on the last alternative of the last reply: a new one (a reroll).
    replies.last.locator("button.next").click()
    expect(count).to_have_text("2/2")
    expect(replies.last.locator(".content")).to_contain_text("parry")
    replies.last.locator("button.prev").click()
    expect(count).to_have_text("1/2")
    expect(replies.last.locator("button.reroll")).to_have_count(1)
    expect(page.locator("article.message.user button.reroll")).to_have_count(0)

    # Continue extends the same reply: one message, its text and the continuation.
    before = replies.last.locator(".content").inner_text()
    page.locator("#continue").click()
    expect(count).to_have_text("3/3")
    expect(replies).to_have_count(1)
    expect(replies.last.locator(".content")).to_contain_text("Water drips")
    assert replies.last.locator(".content").inner_text().startswith(before[:20])

    # Impersonate: the player's line in the input box, nothing stored.
    version = api.get(f"/api/sessions/{sid}").headers["etag"]
    page.locator("#impersonate").click()
    expect(page.locator("#composer-input")).to_have_value("I drink the healing potion.")
    expect(page.locator("#chat-view")).not_to_have_class("busy")
    assert api.get(f"/api/sessions/{sid}").headers["etag"] == version
    expect(page.locator("article.message.user")).to_have_count(1)
    guide_screenshot(page, "web-chat-turns", toasts=False)

    # Undo after a turn: the continuation to the trash, the reply as it was.
    page.locator("#composer-input").fill("")  # the input empty and focused: the story's undo
    page.locator("#composer-input").press("Control+z")
    expect(count).to_have_text("1/2")
    trash = api.get(f"/api/sessions/{sid}/trash").json()
    assert len(trash) == 1 and "Water drips" in trash[0]["top"]["content"]
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("Control+Shift+Z")
    expect(count).to_have_text("3/3")
    expect(page.locator("#redo")).to_be_disabled()

    # Delete from here: asked first, naming how many; to the trash, and Undo brings it back.
    page.locator("article.message.user").first.locator("button.delete").click()
    expect(page.locator("#ask")).to_contain_text("Delete 2 message(s)")
    page.set_viewport_size({"width": 390, "height": 844})
    guide_screenshot(page, "web-chat-delete-phone", toasts=False)
    page.locator("#ask button", has_text="Delete").click()
    expect(page.locator("article.message")).to_have_count(0)
    expect(page.locator("#continue")).to_be_disabled()
    page.locator("#undo").click()
    expect(page.locator("article.message")).to_have_count(2)
    expect(count).to_have_text("3/3")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide at phone width"
    guide_screenshot(page, "web-chat-turns-phone", toasts=False)


def test_a_swipe_keeps_the_view_on_the_message(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("swipe view")
    base = f"/api/sessions/{sid}"
    ids = []
    for i in range(12):
        role = "user" if i % 2 == 0 else "assistant"
        body = {"role": role, "content": f"Message {i}. " + "Words fill the line. " * 12}
        ids.append(api.post(f"{base}/messages", json=body).json()["nodes"][0]["id"])
    api.post(f"{base}/nodes/{ids[3]}/fork", json={"content": "Another reply, shorter."})
    for i in range(8):  # the other timeline goes on as long
        role = "user" if i % 2 == 0 else "assistant"
        body = {"role": role, "content": f"Other {i}. " + "Words fill the line. " * 12}
        api.post(f"{base}/messages", json=body)
    api.put(f"{base}/head", json={"node_id": ids[-1]})  # back on the first timeline's end
    page = open_page(sid)
    page.set_viewport_size({"width": 1000, "height": 500})
    older = page.locator(f'article.message[data-node-id="{ids[3]}"]')
    expect(older.locator(".alternatives .count")).to_have_text("1/2")
    expect(older.locator("button.reroll")).to_have_count(0)  # not the last reply
    older.scroll_into_view_if_needed()
    top = older.evaluate("(node) => node.getBoundingClientRect().top")
    older.locator("button.next").click()
    swapped = page.locator("article.message.assistant").nth(1)
    expect(swapped.locator(".alternatives .count")).to_have_text("2/2")
    after = swapped.evaluate("(node) => node.getBoundingClientRect().top")
    assert abs(after - top) < 2, (top, after)  # no jump to the bottom
    expect(page.locator("article.message")).to_have_count(12)
