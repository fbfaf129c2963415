"""A trace's "Compare with…": two turns and a reroll played in the page, then the reroll
compared with its sibling (the default) and with a reply far away in the story, at
1280x800 and at phone width (390x844), in headless Chromium against `clotho serve`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .conftest import screenshot
from .test_page import BUY, FIGHT, expect, say

pytestmark = pytest.mark.slow


def _open_compare(page: Any, *, tap: bool = False) -> Any:
    """The last reply's trace, then its "Compare with…": the comparison dialog."""
    press = (lambda target: target.tap()) if tap else (lambda target: target.click())
    press(page.locator("article.message.assistant").last.locator("button.trace"))
    dialog = page.locator("#trace-dialog")
    expect(dialog.locator("dl.facts")).to_be_visible()
    press(dialog.locator("button.compare-trace"))
    expect(dialog.locator(".compare-summary")).to_be_visible()
    return dialog


def _fits(page: Any, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    body = page.locator("#trace-dialog")
    assert body.evaluate("(d) => d.scrollWidth <= d.clientWidth"), "the dialog scrolls sideways"


def test_compare_a_reroll_with_its_sibling_and_a_reply_far_away(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("compare")
    page = open_page(sid, viewport={"width": 1280, "height": 800})
    say(page, FIGHT)
    say(page, BUY)
    last = page.locator("article.message.assistant").last
    last.locator("button.next").click()  # `>` on the last reply: a reroll beside it
    expect(last.locator(".alternatives .count")).to_have_text("2/2")
    expect(page.locator("#chat-view")).not_to_have_class("busy")
    projection = api.get(f"/api/sessions/{sid}/projection").json()["nodes"]
    fight_reply, buy_user, reroll = projection[-3]["id"], projection[-2], projection[-1]
    first_buy = next(s for s in reroll["siblings"] if s != reroll["id"])

    dialog = _open_compare(page)
    picker = dialog.locator("#compare-with")
    assert picker.input_value() == first_buy  # the sibling, by default
    expect(dialog.locator(".compare-summary")).to_contain_text("same messages")
    expect(dialog.locator(".compare-summary")).to_contain_text("same starting state")
    expect(dialog.locator(".compare-messages > li")).to_have_count(1)  # all folded: the same
    expect(dialog.locator(".compare-messages li.same summary")).to_contain_text("the same")
    screenshot(page, "trace-diff-rerolls")

    # a reply far away: the fight, one turn before
    picker.select_option(fight_reply)
    summary = dialog.locator(".compare-summary")
    expect(summary).to_contain_text("state:")
    # the message of the state sent to the model: hp 90 in A's, 100 in B's, word by word
    changed = dialog.locator(".compare-messages li.changed")
    expect(changed.first.locator("del", has_text="90")).to_be_visible()
    expect(changed.first.locator("ins", has_text="100")).to_be_visible()
    # the fight's turn is history in both; the reply to it and the purchase are in A's only
    expect(dialog.locator(".compare-messages li.removed del.block", has_text=BUY)).to_be_visible()
    state = dialog.locator(".compare-section", has_text="The state each started from")
    expect(state.locator("tbody th", has_text="hp")).to_be_visible()
    tokens = dialog.locator(".compare-section", has_text="Tokens")
    expect(tokens.locator("tbody tr")).to_have_count(3)
    _fits(page, 1280)
    screenshot(page, "trace-diff")
    tokens.scroll_into_view_if_needed()
    screenshot(page, "trace-diff-tables")
    dialog.locator("button.back-to-trace").click()
    expect(dialog.locator("dl.facts")).to_be_visible()
    assert buy_user["content"] == BUY
    dialog.locator("button", has_text="Close").click()

    # a message selected in the tree is offered apart (the sibling stays the default)
    page.locator("button", has_text="Tree").first.click()
    page.locator(f'g.node[data-node-id="{fight_reply}"] circle').click()
    page.locator("button", has_text="Chat").first.click()
    dialog = _open_compare(page)
    chosen = dialog.locator('#compare-with optgroup[label="Selected in the tree"] option')
    expect(chosen).to_have_count(1)
    assert chosen.get_attribute("value") == fight_reply
    assert dialog.locator("#compare-with").input_value() == first_buy

    # answers that come back out of order: the one to the choice made last is shown
    held: list[Any] = []
    page.route("**/trace-diff?*", lambda route: route.continue_() if held else held.append(route))
    dialog.locator("#compare-with").select_option(fight_reply)  # its answer held back
    dialog.locator("#compare-with").select_option(first_buy)
    summary = dialog.locator(".compare-summary")
    expect(dialog.locator(".compare-result[aria-busy]")).to_have_count(0)  # B's answer drawn
    expect(summary).to_contain_text("same messages")
    assert len(held) == 1
    with page.expect_response("**/trace-diff?*") as late:
        held[0].continue_()
    late.value.finished()
    page.evaluate("() => new Promise((done) => setTimeout(done, 50))")  # its answer read
    expect(summary).to_contain_text("same messages")
    expect(dialog.locator(".compare-result[aria-busy]")).to_have_count(0)
    page.unroute("**/trace-diff?*")
    dialog.locator("button", has_text="Close").click()

    # on a phone, in Chinese: the summary line is the page's words, not the server's
    phone = open_page(sid, phone=True, locale="zh-CN")
    expect(phone.locator("article.message.assistant")).to_have_count(2)
    dialog = _open_compare(phone, tap=True)
    dialog.locator("#compare-with").select_option(fight_reply)
    summary = dialog.locator(".compare-summary")
    expect(summary).to_contain_text("状态：")
    expect(summary).to_contain_text("词元：")
    expect(summary).not_to_contain_text("state")
    _fits(phone, 390)
    screenshot(phone, "trace-diff-phone")

    # a turn played in the chat since the tree was drawn (the tree view, not shown, keeps
    # the tree as it was): its reroll is compared with its sibling all the same
    say(page, FIGHT)
    last = page.locator("article.message.assistant").last
    last.locator("button.next").click()
    expect(last.locator(".alternatives .count")).to_have_text("2/2")
    expect(page.locator("#chat-view")).not_to_have_class("busy")
    newest = api.get(f"/api/sessions/{sid}/projection").json()["nodes"][-1]
    dialog = _open_compare(page)
    sibling = next(s for s in newest["siblings"] if s != newest["id"])
    assert dialog.locator("#compare-with").input_value() == sibling
