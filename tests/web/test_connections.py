"""Connections from the page: a server started with no model; the player adds a profile
for the game master on loopback with a key, Tests it (it works), Tests one whose server
refuses the key (said in words), picks the first for the story and plays a turn that
reaches that server with that key. Then the dialog at phone width."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.loopback import ModelServer, Reply
from tests.api._server import Server

from .conftest import guide_screenshot, model_free_site, screenshot
from .test_page import expect

pytestmark = pytest.mark.slow

KEY = "sk-browser-secret-51c7"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`clotho serve` with no model of its own: the profiles choose it."""
    yield from model_free_site(tmp_path_factory, "web-connections")


@pytest.fixture(scope="module")
def locked() -> Iterator[ModelServer]:
    refused = Reply(status=401, error="Incorrect API key provided")
    with ModelServer([refused] * 5) as server:
        yield server


def _add(page: Any, name: str, server: ModelServer, *, key: str, temperature: str = "") -> None:
    page.get_by_role("button", name="Add a profile").click()
    form = page.locator("form.connections-form")
    form.locator("input[name=name]").fill(name)
    form.locator("input[name=model]").fill("openai/gm")
    form.locator("input[name=api_base]").fill(server.url)
    form.locator("input[name=key]").fill(key)
    if temperature:
        form.locator("input[name=temperature]").fill(temperature)
    form.get_by_role("button", name="Save").click()
    expect(page.locator(f"li.connection[data-profile='{name}']")).to_be_visible()


def test_add_test_and_play_with_a_profile(
    site: Server,
    api: Any,
    open_page: Any,
    game_master: ModelServer,
    locked: ModelServer,
    browser: Any,
) -> None:
    sid = api.post("/api/sessions", json={"title": "Connections"}).json()["session"]["id"]
    page = open_page(sid)
    page.locator("#connections-open").click()
    dialog = page.locator("#connections-dialog")
    expect(dialog).to_contain_text("No profile yet")

    _add(page, "Loopback", game_master, key=KEY, temperature="0.4")
    mine = dialog.locator("li.connection[data-profile='Loopback']")
    expect(mine.locator(".badge.key-set")).to_have_text("key set")
    mine.get_by_role("button", name="Test").click()
    expect(mine.locator(".connection-result.ok")).to_contain_text("It works: openai/gm answered in")

    _add(page, "Locked", locked, key="sk-wrong")
    other = dialog.locator("li.connection[data-profile='Locked']")
    other.get_by_role("button", name="Test").click()
    expect(other.locator(".connection-result.failed")).to_contain_text("The key was refused.")
    expect(other.locator(".connection-detail")).to_have_text(
        f"{locked.url} refused the key (HTTP 401): check it (Incorrect API key provided)"
    )
    assert len(locked.requests) == 1  # a refused key is asked once

    mine.get_by_role("button", name="Use for this story").click()
    expect(dialog.locator(".connections-story")).to_have_text("This story plays with “Loopback”.")
    expect(mine.locator(".badge.in-use")).to_be_visible()
    assert KEY not in page.content()  # typed once, never shown again
    guide_screenshot(page, "web-connections")
    dialog.get_by_role("button", name="Close").click()

    asked = len(game_master.requests)
    page.fill("#composer-input", "I light a torch.")
    page.press("#composer-input", "Enter")
    expect(page.locator("article.message.assistant:not(.pending)").last).to_be_visible()
    sent = game_master.requests[asked:]
    assert sent, "the turn did not reach the profile's server"
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in sent)
    assert sent[0].json["temperature"] == 0.4

    # the same dialog at phone width: everything on screen, every control reachable by touch
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True)
    try:
        phone = context.new_page()
        phone.goto(f"{site.url}/#token={site.token}&session={sid}")
        phone.locator("#menu-toggle").tap()
        phone.locator("#connections-open").tap()
        listed = phone.locator("#connections-dialog li.connection")
        expect(listed).to_have_count(2)
        widest = phone.evaluate(
            "() => Math.max(document.documentElement.scrollWidth,"
            " document.querySelector('#connections-dialog').scrollWidth)"
        )
        assert widest <= 390
        for button in phone.locator("#connections-dialog button").all():
            box = button.bounding_box()
            assert box is not None and box["height"] >= 40, button.text_content()
        guide_screenshot(phone, "web-connections-phone")
        phone.locator("#connections-dialog").get_by_role("button", name="Edit").first.tap()
        expect(phone.locator("form.connections-form")).to_be_visible()
        assert phone.evaluate("() => document.documentElement.scrollWidth") <= 390
        screenshot(phone, "web-connections-phone-form")
    finally:
        context.close()
    assert Path(site.data_dir / "config" / "secrets.toml").exists()
