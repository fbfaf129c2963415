"""The page watches the open session live (GET .../events): a turn played in one tab, an
undo in another, a message added through the API all appear in the other pages without
a reload, the next write meets no 412, a page's own writes are not drawn twice, a
dropped stream is opened again with Last-Event-ID (once, even if the player switched away
and back meanwhile), and an edit box open while another tab writes is not redrawn under
the player: its save meets a 412, never a silent overwrite."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .conftest import screenshot
from .test_page import BUY, FIGHT, add, expect, node, say

pytestmark = pytest.mark.slow


def _live(page: Any) -> None:
    """Until the page's stream is open."""
    deadline = time.monotonic() + 20
    while not page.evaluate("globalThis.clotho?.live?.connected === true"):
        assert time.monotonic() < deadline, "the page's event stream never opened"
        page.wait_for_timeout(50)


def test_a_turn_and_an_undo_in_one_tab_appear_in_the_other(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("live")
    one = open_page(sid)
    other = open_page(sid, viewport={"width": 1280, "height": 800})
    _live(one)
    _live(other)

    say(one, FIGHT)  # a turn in the first tab...
    replies = other.locator("article.message.assistant:not(.pending)")
    expect(replies).to_have_count(1)  # ...drawn in the second, no reload
    expect(other.locator("article.message.user")).to_have_count(1)
    version = api.get(f"/api/sessions/{sid}").json()["version"]
    expect(other.locator("#version")).to_contain_text(str(version))
    assert one.evaluate("clotho.live.redraws") == 0  # its own turn: drawn once, by itself

    other.locator("#undo").click()  # the second takes it back: the first follows
    expect(other.locator("article.message")).to_have_count(0)
    expect(one.locator("article.message")).to_have_count(0)

    say(one, BUY)  # and the first plays on from the version it was redrawn at: no 412
    expect(other.locator("article.message.assistant:not(.pending)")).to_have_count(1)
    expect(one.locator(".toast.error")).to_have_count(0)
    expect(other.locator(".toast.error")).to_have_count(0)
    screenshot(other, "live-desktop")


def test_a_write_elsewhere_redraws_the_tree_and_a_dropped_stream_resumes(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("live tree")
    page = open_page(sid, view="tree", phone=True)
    _live(page)
    asked: list[str | None] = []
    page.on(
        "request",
        lambda request: (
            asked.append(request.headers.get("last-event-id"))
            if request.url.endswith("/events")
            else None
        ),
    )

    def add(text: str) -> int:
        answer = api.post(f"/api/sessions/{sid}/messages", json={"role": "user", "content": text})
        assert answer.status_code == 201, answer.text
        return int(answer.json()["session"]["version"])

    add("A message from the command line.")
    expect(page.locator("#tree-svg")).to_have_attribute("data-total", "1")
    seen = page.evaluate("clotho.live.last")
    page.evaluate("clotho.live.controller.abort()")  # the connection drops...
    version = add("Another, while the page was away.")
    expect(page.locator("#tree-svg")).to_have_attribute("data-total", "2")  # ...nothing lost
    expect(page.locator("#version")).to_contain_text(str(version))
    assert str(seen) in asked  # it came back saying where it was
    assert page.evaluate("clotho.live.redraws") >= 2
    screenshot(page, "live-phone")


def test_an_edit_box_open_while_another_tab_writes_meets_a_412_not_an_overwrite(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("live edit")
    add(api, sid, "user", "I wait.")
    reply = add(api, sid, "assistant", "The inn is quiet.")
    page = open_page(sid)
    _live(page)
    message = page.locator(f'article.message[data-node-id="{reply}"]')
    message.locator("button.edit").click()
    page.fill("#ask textarea[name=content]", "The inn is loud.")

    operations = [{"op": "rewrite", "node_id": reply, "content": "The inn burns."}]
    other = api.post(f"/api/sessions/{sid}/edits", json={"operations": operations})
    assert other.status_code == 200, other.text  # another tab saved first
    version = api.get(f"/api/sessions/{sid}").json()["version"]
    page.wait_for_function(f"clotho.live.last >= {version}")  # the page heard of it...
    page.wait_for_timeout(800)  # ...and would have drawn it again by now
    assert page.evaluate("clotho.live.redraws") == 0  # not under the open edit box

    page.locator("#ask").get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".toast.error")).to_contain_text("changed elsewhere")
    assert node(api, sid, reply)["content"] == "The inn burns."  # the other tab's change kept
    expect(message).to_contain_text("The inn burns.")  # and the view drawn again


def test_switching_away_and_back_during_a_retry_pause_leaves_one_stream(
    new_session: Callable[[str], str], open_page: Callable[..., Any]
) -> None:
    sid, elsewhere = new_session("live back"), new_session("live away")
    page = open_page(sid)
    _live(page)
    opened: list[str] = []
    page.on(
        "request",
        lambda request: opened.append(request.url) if request.url.endswith("/events") else None,
    )
    page.evaluate(
        """async ([sid, elsewhere]) => {
            clotho.live.controller.abort(); // the stream drops: a retry pause begins
            await new Promise((resolve) => setTimeout(resolve, 50));
            clotho.live.follow(elsewhere); // away...
            clotho.live.follow(sid); // ...and back, within the pause
        }""",
        [sid, elsewhere],
    )
    page.wait_for_timeout(2500)  # past the pause: a loop left over would open another
    mine = [url for url in opened if f"/sessions/{sid}/events" in url]
    assert len(mine) == 1, opened
    assert page.evaluate("clotho.live.connected && clotho.live.sid") == sid


def test_a_story_renamed_elsewhere_is_renamed_in_the_picker(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("Before")
    page = open_page(sid)
    _live(page)
    option = page.locator(f'#session-select option[value="{sid}"]')
    expect(option).to_have_text("Before")
    version = api.get(f"/api/sessions/{sid}").json()["version"]
    answer = api.patch(
        f"/api/sessions/{sid}", json={"title": "After"}, headers={"If-Match": f'"{version}"'}
    )
    assert answer.status_code == 200, answer.text
    expect(option).to_have_text("After")
    expect(page.locator(".toast.error")).to_have_count(0)


def test_a_change_during_the_pages_first_read_is_drawn(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    """The first read of the tree is answered before a write elsewhere and reaches the page
    after the write's event: the page draws the change once the read is in (it dropped
    it when it had no version yet)."""
    sid = new_session("live first read")
    held: list[Any] = []

    def answered_then_held(route: Any) -> None:
        if held:
            route.continue_()
            return
        held.append((route, route.fetch()))  # the server answers now: no node yet

    page = open_page(sid, view="tree")
    _live(page)
    page.route("**/tree?*", answered_then_held)
    page.reload()  # the page starts again: its first read of the tree is held
    deadline = time.monotonic() + 30
    while not held or not page.evaluate("globalThis.clotho?.live?.connected === true"):
        assert time.monotonic() < deadline, "the page never read its tree and its stream"
        page.wait_for_timeout(50)
    answer = api.post(f"/api/sessions/{sid}/messages", json={"role": "user", "content": "Hi."})
    assert answer.status_code == 201, answer.text
    version = answer.json()["session"]["version"]
    deadline = time.monotonic() + 20
    while page.evaluate("clotho.live.last") != version:  # the change has come
        assert time.monotonic() < deadline, "the change never reached the page"
        page.wait_for_timeout(50)
    route, fetched = held[0]
    route.fulfill(response=fetched)  # the first read, from before the change, arrives
    expect(page.locator("#tree-svg")).to_have_attribute("data-total", "1")
