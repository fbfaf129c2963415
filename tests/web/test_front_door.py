"""The whole front door in one go, as a player who never used the command line, on a
phone (390x844, touch): a server started with no model; a connection profile for the
game master on loopback added and tested; a new story from Seraphina's card with the
Eldoria book and a persona; an author's note; turns played, a swipe right on the last
reply writing a new one, a reply edited in place, a turn undone; the tree explored and
the lore manager opened. Each flow has its own test at both widths; this one checks that
they hold together, and that nothing on the way is wider than the screen."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from orchestrator.loopback import ModelServer
from tests._fixtures import ELDORIA, SERAPHINA
from tests.api._server import Server

from .conftest import PHONE, model_free_site, screenshot
from .test_page import expect

pytestmark = pytest.mark.slow

EDITED = "She smiles, and the lanterns brighten."


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`clotho serve` with no model of its own: the profiles choose it."""
    yield from model_free_site(tmp_path_factory, "web-front-door")


def fits(page: Any, step: str) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{step}: the page is {width} px wide"


def menu(page: Any, button: str) -> None:
    """A button of the header's menu (folded behind ☰ at phone width)."""
    if not page.locator(button).is_visible():
        page.locator("#menu-toggle").tap()
    page.locator(button).tap()


def played(page: Any) -> None:
    page.wait_for_selector("#chat-view:not(.busy)")
    expect(page.locator("article.message.pending")).to_have_count(0)


def test_a_new_player_sets_up_and_plays_a_story_on_a_phone(
    site: Server, game_master: ModelServer, browser: Any
) -> None:
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.set_default_timeout(20_000)
        page.goto(f"{site.url}/#token={site.token}")
        expect(page.locator("#session-select option")).not_to_have_count(0)
        fits(page, "first open")

        # A model: a profile for the game master, tested, the default for every story.
        menu(page, "#connections-open")
        dialog = page.locator("#connections-dialog")
        dialog.get_by_role("button", name="Add a profile").tap()
        form = page.locator("form.connections-form")
        form.locator("input[name=name]").fill("Local GM")
        form.locator("input[name=model]").fill("openai/gm")
        form.locator("input[name=api_base]").fill(game_master.url)
        form.locator("input[name=key]").fill("sk-front-door")
        form.locator("input[name=default]").check()
        fits(page, "the profile's form")
        form.get_by_role("button", name="Save").tap()
        profile = dialog.locator("li.connection[data-profile='Local GM']")
        profile.get_by_role("button", name="Test").tap()
        expect(profile.locator(".connection-result.ok")).to_contain_text("It works")
        dialog.get_by_role("button", name="Close").tap()

        # A new story from the card, with the book and a persona.
        menu(page, "#new-session")
        story = page.locator("#new-story")
        story.locator("label.story-upload input").first.set_input_files(str(SERAPHINA))
        expect(story.locator('li.story-card[aria-selected="true"]')).to_contain_text("Seraphina")
        story.locator("input[name=persona_name]").fill("Aria")
        story.locator("textarea[name=persona_description]").fill("A bard with a cracked lute.")
        story.locator("label.story-upload input").last.set_input_files(str(ELDORIA))
        expect(story.locator("ul.story-books input:checked")).to_have_count(1)
        fits(page, "the new story's dialog")
        story.locator("button.primary").tap()
        expect(story).to_be_hidden()
        messages = page.locator("article.message")
        expect(messages).to_have_count(1)
        expect(messages.first.locator(".who")).to_have_text("Seraphina")

        # An author's note, kept in the world state.
        menu(page, "#story-settings")
        page.fill("[name=note_text]", "Keep the forest ominous.")
        page.locator("#notes-dialog button.primary").tap()
        expect(page.locator("#notes-dialog")).to_be_hidden()
        expect(page.locator("#context-meter")).to_contain_text("author's note")

        # Play: two turns, each reply under the persona's and the character's names.
        for line in ("I sit up and look around.", "I ask who she is, and what this forest is."):
            page.fill("#composer-input", line)
            page.locator("#send").tap()
            played(page)
        expect(messages).to_have_count(5)
        expect(messages.nth(3).locator(".who")).to_have_text("Aria")
        asked = len(game_master.requests)
        assert asked >= 2, "the turns did not reach the profile's model"
        fits(page, "after two turns")

        # Its trace: the note placed and why, the lore that fired and by what.
        messages.last.locator("button.trace").tap()
        trace = page.locator("#trace-dialog")
        expect(trace.locator("dl.facts")).to_contain_text("author's note")
        expect(trace.locator("ul.lore-hits .via", has_text="key").first).to_be_visible()
        fits(page, "the trace")
        screenshot(page, "web-front-door-trace-phone")
        trace.locator("button", has_text="Close").tap()

        # Swipe right on the last reply: a new alternative written, the old one kept.
        last = messages.last
        last.locator("button.next").tap()
        played(page)
        expect(messages.last.locator(".alternatives .count")).to_have_text("2/2")
        messages.last.locator("button.prev").tap()
        expect(messages.last.locator(".alternatives .count")).to_have_text("1/2")

        # The reply edited in place.
        messages.last.locator("button.edit").tap()
        text = page.locator("#ask textarea").first
        text.fill(EDITED)
        page.locator("#ask menu button", has_text="Save").first.tap()
        expect(messages.last.locator(".content")).to_have_text(EDITED)

        # A turn undone: its two messages leave the story (to the trash), HEAD goes back.
        page.fill("#composer-input", "I wave goodbye.")
        page.locator("#send").tap()
        played(page)
        expect(messages).to_have_count(7)
        page.locator("#undo").tap()
        expect(messages).to_have_count(5)
        expect(messages.last.locator(".content")).to_have_text(EDITED)
        expect(page.locator("#redo")).to_be_enabled()
        screenshot(page, "web-front-door-chat-phone")

        # The tree: the story's nodes, the world state in its drawer.
        page.locator("#views button[data-view=tree]").tap()
        expect(page.locator("#tree-svg g.node").first).to_be_visible()
        fits(page, "the tree")
        screenshot(page, "web-front-door-tree-phone")
        page.locator("#views button[data-view=chat]").tap()
        page.locator("#side-toggle").tap()
        expect(page.locator("#chat-state")).to_contain_text("hp")
        page.locator("#side-toggle").tap()

        # The lore manager: the book that came with the story.
        menu(page, "#lore-open")
        expect(page.locator("#lore-dialog .lore-book-name").first).to_contain_text("Eldoria")
        fits(page, "the lore manager")
    finally:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
