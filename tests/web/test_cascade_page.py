"""The cascade on the page: after the player's first message is edited as a fork, the bar
offers to regenerate the rest of the branch; started, it shows its progress and Stop,
then how the world state differs from the old branch's (desktop 1280x800 and phone)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .conftest import screenshot
from .test_page import add, expect

pytestmark = pytest.mark.slow

HIT = [{"op": "inc", "path": "hp", "value": -10}]


def old_branch(api: httpx.Client, sid: str) -> list[str]:
    """Three exchanges written by hand, each reply costing 10 hp."""
    ids = []
    for text, reply in (
        ("I attack the goblin.", "The goblin's blade slashes your arm."),
        ("I look around.", "Water drips in the dark."),
        ("I light a torch.", "The goblin's blade slashes your arm again."),
    ):
        ids.append(add(api, sid, "user", text))
        ids.append(add(api, sid, "assistant", reply, HIT if "slashes" in reply else None))
    return ids


@pytest.mark.parametrize(
    ("phone", "viewport"), [(False, {"width": 1280, "height": 800}), (True, None)]
)
def test_an_edit_as_a_fork_offers_the_cascade_and_shows_how_the_states_diverged(
    open_page: Callable[..., Any],
    api: httpx.Client,
    new_session: Callable[[str], str],
    phone: bool,
    viewport: dict[str, int] | None,
) -> None:
    sid = new_session("Cascade")
    old = old_branch(api, sid)
    page = open_page(sid, phone=phone, viewport=viewport)
    first = page.locator("article.message.user").first
    expect(first.locator(".content")).to_have_text("I attack the goblin.")
    if phone:
        first.tap()  # narrow: a message's actions show on the one tapped
    first.locator("button.edit").click()
    page.fill("#ask textarea[name=content]", "I sneak along the wall, quiet as I can.")
    page.locator("#ask button", has_text="Fork only").click()

    bar = page.locator("#cascade-bar")
    expect(bar).to_contain_text("The old branch goes on for 5 more messages")
    screenshot(page, "cascade-offer-phone" if phone else "cascade-offer")
    bar.locator("button", has_text="Regenerate the rest of this branch").click()
    expect(bar).to_contain_text("Done: the 5 messages of the old branch were played again")
    expect(bar.locator(".cascade-divergence")).to_contain_text("hp")
    screenshot(page, "cascade-done-phone" if phone else "cascade-done")
    # the chat: the edited message, then the old branch's messages on it, replies new
    contents = page.locator("article.message .content")
    expect(contents).to_have_count(6)
    expect(contents.nth(2)).to_have_text("I look around.")
    expect(contents.nth(4)).to_have_text("I light a torch.")
    nodes = api.get(f"/api/sessions/{sid}/projection?metadata=true").json()["nodes"]
    assert [n["metadata"]["cascade"]["of"] for n in nodes[1:]] == old[1:]
    bar.locator("button", has_text="Close").click()
    expect(bar).to_be_hidden()
    # the old branch is untouched
    assert api.get(f"/api/sessions/{sid}/nodes/{old[-1]}").json()["content"] == (
        "The goblin's blade slashes your arm again."
    )
    assert (
        api.get(f"/api/sessions/{sid}/state", params={"node_id": old[-1]}).json()["variables"]["hp"]
        == 80
    )
