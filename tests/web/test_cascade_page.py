"""The cascade on the page: after the player's first message is edited as a fork, the bar
offers to regenerate the rest of the branch; started, it shows its progress and Stop,
then how the world state differs from the old branch's (desktop 1280x800 and phone).
Stopped from the page while a reply is awaited, it goes on with Go on. The model is one
of this module's that can hold a reply until the test releases it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from orchestrator.loopback import ModelServer
from tests.api._server import Server, running_with_model

from .conftest import CAMPAIGN, screenshot
from .test_page import add, expect

pytestmark = pytest.mark.slow

HIT = [{"op": "inc", "path": "hp", "value": -10}]


class Held:
    """A model answering at once with an empty delta; with ``hold`` set, the reply to
    "I look around." waits until ``release`` (``asked`` is set when it has come)."""

    def __init__(self) -> None:
        self.hold = False
        self.asked = threading.Event()
        self.release = threading.Event()

    def __call__(self, request: dict[str, Any]) -> str:
        if "response_format" in request:
            return json.dumps({"operations": []})
        if self.hold and request["messages"][-1]["content"] == "I look around.":
            self.asked.set()
            self.release.wait(60)
        return "The cave is quiet; nothing moves."


MODEL = Held()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`clotho serve` with this module's model, and the cave campaign."""
    folder = tmp_path_factory.mktemp("web-cascade")
    campaign = folder / "campaign"
    campaign.mkdir()
    (campaign / "campaign.toml").write_text(CAMPAIGN)
    with running_with_model(ModelServer(MODEL), folder) as up:
        up.campaign = campaign  # type: ignore[attr-defined]
        yield up
        MODEL.release.set()


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


def test_a_cascade_is_stopped_from_the_page_and_goes_on(
    open_page: Callable[..., Any], api: httpx.Client, new_session: Callable[[str], str]
) -> None:
    sid = new_session("Cascade stopped")
    old_branch(api, sid)
    page = open_page(sid, viewport={"width": 1280, "height": 800})
    first = page.locator("article.message.user").first
    expect(first.locator(".content")).to_have_text("I attack the goblin.")
    first.locator("button.edit").click()
    page.fill("#ask textarea[name=content]", "I wait in the dark.")
    page.locator("#ask button", has_text="Fork only").click()
    bar = page.locator("#cascade-bar")
    MODEL.asked.clear()
    MODEL.release.clear()
    MODEL.hold = True
    try:
        bar.locator("button", has_text="Regenerate the rest of this branch").click()
        assert MODEL.asked.wait(30)  # step 3: the reply to "I look around." is awaited
        expect(bar.locator("progress")).to_have_attribute("value", "2")
        expect(bar.locator(".cascade-step")).to_contain_text("Step 3 of 5: regenerating")
        # the chat drawn again as each step is stored: the fork, its reply, the message
        expect(page.locator("article.message .content")).to_have_count(3)
        screenshot(page, "cascade-running")
        bar.locator("button", has_text="Stop").click()
        expect(bar).to_contain_text("Stopped at step 2 of 5: every step made is kept.")
    finally:
        MODEL.hold = False
        MODEL.release.set()
    expect(page.locator("article.message .content")).to_have_count(3)
    bar.locator("button", has_text="Go on").click()
    expect(bar).to_contain_text("Done: the 5 messages of the old branch were played again")
    expect(page.locator("article.message .content")).to_have_count(6)


def test_a_cascade_running_is_followed_again_after_a_reload(
    open_page: Callable[..., Any], api: httpx.Client, new_session: Callable[[str], str]
) -> None:
    sid = new_session("Cascade reloaded")
    old_branch(api, sid)
    page = open_page(sid, viewport={"width": 1280, "height": 800})
    first = page.locator("article.message.user").first
    expect(first.locator(".content")).to_have_text("I attack the goblin.")
    first.locator("button.edit").click()
    page.fill("#ask textarea[name=content]", "I wait in the dark.")
    page.locator("#ask button", has_text="Fork only").click()
    MODEL.asked.clear()
    MODEL.release.clear()
    MODEL.hold = True
    try:
        page.locator("#cascade-bar button", has_text="Regenerate the rest").click()
        assert MODEL.asked.wait(30)
        page.reload()
        bar = page.locator("#cascade-bar")
        expect(bar.locator(".cascade-step")).to_contain_text("Step 3 of 5: regenerating")
    finally:
        MODEL.hold = False
        MODEL.release.set()
    expect(bar).to_contain_text("Done: the 5 messages of the old branch were played again")


def test_switching_stories_leaves_the_cascade_running_and_coming_back_rejoins_it(
    open_page: Callable[..., Any], api: httpx.Client, new_session: Callable[[str], str]
) -> None:
    sid = new_session("Cascade switched")
    old = old_branch(api, sid)
    other = new_session("Another story")
    add(api, other, "user", "A quiet evening at the inn.")
    page = open_page(sid, viewport={"width": 1280, "height": 800})
    posted: list[dict[str, Any]] = []
    page.on(
        "request",
        lambda request: (
            posted.append(json.loads(request.post_data or "{}"))
            if request.method == "POST" and request.url.endswith(f"/sessions/{sid}/cascade")
            else None
        ),
    )
    first = page.locator("article.message.user").first
    expect(first.locator(".content")).to_have_text("I attack the goblin.")
    first.locator("button.edit").click()
    page.fill("#ask textarea[name=content]", "I wait in the dark.")
    page.locator("#ask button", has_text="Fork only").click()
    bar = page.locator("#cascade-bar")
    MODEL.asked.clear()
    MODEL.release.clear()
    MODEL.hold = True
    try:
        bar.locator("button", has_text="Regenerate the rest of this branch").click()
        assert MODEL.asked.wait(30)
        expect(bar.locator(".cascade-step")).to_contain_text("Step 3 of 5: regenerating")
        page.select_option("#session-select", other)  # the cascade runs on, unfollowed
        expect(page.locator("article.message .content")).to_have_text(
            ["A quiet evening at the inn."]
        )
        expect(bar).to_be_hidden()
        running = api.get(f"/api/sessions/{sid}/cascades?status=running").json()["cascades"]
        assert len(running) == 1
        page.select_option("#session-select", sid)  # back: followed again
        expect(bar.locator(".cascade-step")).to_contain_text("Step 3 of 5: regenerating")
        screenshot(page, "cascade-rejoined")
        bar.locator("button", has_text="Stop").click()  # this story's cascade, stopped
        expect(bar).to_contain_text("Stopped at step 2 of 5: every step made is kept.")
    finally:
        MODEL.hold = False
        MODEL.release.set()
    bar.locator("button", has_text="Go on").click()
    expect(bar).to_contain_text("Done: the 5 messages of the old branch were played again")
    assert posted[-1]["to_id"] == old[-1]  # Go on keeps the old branch's leaf
    assert api.get(f"/api/sessions/{other}/cascades").json()["cascades"] == []
