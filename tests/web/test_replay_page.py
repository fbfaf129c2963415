"""Replay (A/B) on the page: "Replay with…" on a generated message, the replays streamed
into a side-by-side view beside the original, the words that differ marked and what
changed as chips; the chat then shows the new alternatives (desktop 1280x800 and phone)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .conftest import screenshot
from .test_page import expect, say

pytestmark = pytest.mark.slow

FIGHT = "I attack the goblin with my sword."


@pytest.mark.parametrize("phone", [False, True], ids=["desktop", "phone"])
def test_replay_with_other_settings_side_by_side(
    new_session: Callable[[str], str],
    open_page: Callable[..., Any],
    api: httpx.Client,
    phone: bool,
) -> None:
    sid = new_session("replay")
    viewport = None if phone else {"width": 1280, "height": 800}
    page = open_page(sid, phone=phone, viewport=viewport)
    say(page, FIGHT)
    reply = page.locator("article.message.assistant").first
    original = reply.get_attribute("data-node-id")
    screenshot(page, "replay-button-phone" if phone else "replay-button")
    reply.locator("button.replay").click()
    dialog = page.locator("#replay-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator(".replay-column")).to_have_count(1)  # the original alone
    dialog.locator("input[name=temperature]").fill("1.2")
    dialog.locator("input[name=n]").fill("2")
    dialog.locator(".replay-go").click()
    columns = dialog.locator(".replay-column:not(.streaming)")
    expect(columns).to_have_count(3)
    expect(dialog).not_to_have_attribute("aria-busy", "true")
    replays = dialog.locator(".replay-column").filter(
        has=page.locator(".replay-chips:not(.settings)")
    )
    expect(replays.first.locator(".chip")).to_have_text("temperature — → 1.2")
    # the game master answers a reroll of the same message with its next alternative:
    # the replay's words differ from the original's, and are marked
    expect(replays.first.locator(".replay-text ins").first).to_be_visible()
    expect(replays.first.locator(".replay-text del").first).to_be_visible()
    screenshot(page, "replay-phone" if phone else "replay")

    stored = api.get(f"/api/sessions/{sid}/nodes/{original}").json()
    assert len(stored["siblings"]) == 3
    made = [api.get(f"/api/sessions/{sid}/nodes/{n}").json() for n in stored["siblings"][1:]]
    assert [m["metadata"]["replay"]["changed"] for m in made] == [
        {"params": {"temperature": [None, 1.2]}}
    ] * 2
    page.locator("#replay-dialog .close-row button").click()
    # the chat was drawn again: HEAD on the last replay, 3 alternatives
    expect(page.locator("article.message.assistant .alternatives .count")).to_have_text("3/3")
    # opened again from a replay: the original and both replays side by side
    page.locator("article.message.assistant button.replay").click()
    expect(dialog.locator(".replay-column")).to_have_count(3)


def test_the_word_difference_marks_words_signs_and_characters(
    new_session: Callable[[str], str], open_page: Callable[..., Any]
) -> None:
    page = open_page(new_session("words"))
    expect(page.locator("#composer-input")).to_be_visible()
    runs = page.evaluate(
        """async () => {
            const { wordDiff } = await import("/static/replay.js");
            return [wordDiff("The goblin flees.", "The goblin flees, wounded."),
                    wordDiff("哥布林逃跑了", "哥布林倒下了"), wordDiff("", "new")];
        }"""
    )
    assert runs[0] == [
        {"op": "same", "text": "The goblin flees"},
        {"op": "added", "text": ", wounded"},
        {"op": "same", "text": "."},
    ]
    assert runs[1] == [
        {"op": "same", "text": "哥布林"},
        {"op": "removed", "text": "逃跑"},
        {"op": "added", "text": "倒下"},
        {"op": "same", "text": "了"},
    ]
    assert runs[2] == [{"op": "added", "text": "new"}]


def test_a_replay_whose_original_is_in_the_trash_is_its_own_original(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("replay, original trashed")
    say(page := open_page(sid, viewport={"width": 1280, "height": 800}), FIGHT)
    original = page.locator("article.message.assistant").first.get_attribute("data-node-id")
    made = api.post(
        f"/api/sessions/{sid}/nodes/{original}/replay",
        json={"params": {"temperature": 1.2}},
        headers={"Accept": "text/event-stream"},
    )
    assert made.status_code == 201, made.text
    session = api.get(f"/api/sessions/{sid}").json()
    head = session["head_id"]
    deleted = api.post(
        f"/api/sessions/{sid}/edits",
        json={"operations": [{"op": "delete", "node_id": original}]},
        headers={"If-Match": f'"{session["version"]}"'},
    )
    assert deleted.status_code in (200, 201), deleted.text
    page.reload()
    page.locator(f'article.message.assistant[data-node-id="{head}"] button.replay').click()
    columns = page.locator("#replay-dialog .replay-column")
    expect(columns).to_have_count(1)  # the replay stands for its original, now gone
    expect(columns.first).to_have_attribute("data-node-id", head)
