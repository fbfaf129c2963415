"""A write whose answer the page never gets (the connection drops after the server applied
it) is sent once more with the same Idempotency-Key: the server answers it again without
applying it twice, and the page shows the write done, with no error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow


def expect(target: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    playwright_expect.set_options(timeout=30_000)
    return playwright_expect(target)


def test_a_write_whose_answer_is_lost_is_applied_once(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("retry")
    answer = api.post(f"/api/sessions/{sid}/messages", json={"role": "user", "content": "I wait."})
    first = answer.json()["nodes"][0]["id"]
    page = open_page(sid, view="tree")
    expect(page.locator("#tree-svg")).to_have_attribute("data-total", "1")

    keys: list[str | None] = []

    def lose_the_first_answer(route: Any) -> None:
        keys.append(route.request.headers.get("idempotency-key"))
        if len(keys) == 1:
            route.fetch()  # the server gets the write and applies it...
            route.abort("connectionreset")  # ...and the page never sees the answer
        else:
            route.continue_()

    page.route("**/api/sessions/*/edits", lose_the_first_answer)
    page.locator(f'g.node[data-node-id="{first}"]').click()
    page.locator("#node-panel button[data-action=disable]").click()
    expect(page.locator(f'g.node.disabled[data-node-id="{first}"]')).to_have_count(1)
    # The page follows its session live: the change the server applied can be drawn from
    # the event stream before the retry is sent, so wait for the retry itself.
    for _ in range(300):
        if len(keys) >= 2:
            break
        page.wait_for_timeout(100)

    assert len(keys) == 2 and keys[0] and keys[0] == keys[1]
    # A toggle applied twice would have enabled the node again.
    assert api.get(f"/api/sessions/{sid}/nodes/{first}").json()["enabled"] is False
    history = api.get(f"/api/sessions/{sid}/history").json()["entries"]
    assert [entry["action"] for entry in history] == ["append", "toggle"]  # one toggle
    expect(page.locator(".toast.error")).to_have_count(0)
