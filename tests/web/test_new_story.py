"""A new story from the page: New opens the dialog, Seraphina's card uploaded (its picture
shown), a persona, the RPG campaign, the Eldoria book; the story starts with the card's
greeting (its alternatives as swipes), the state panel shows HP with its bounds, and a
turn plays. Import… tells files by their content (a lorebook added to the story open, a
card offered as a new story, a stranger's file refused naming the kinds), the story is
renamed and listed under its character. The dialog at phone width. Screenshots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests._fixtures import ELDORIA, SERAPHINA

from .conftest import PHONE, screenshot
from .test_page import expect, say

pytestmark = pytest.mark.slow


def test_a_new_story_from_a_card(
    open_page: Callable[..., Any],
    api: httpx.Client,
    tmp_path: Any,
) -> None:
    page = open_page(None)
    expect(page.locator("#session-select option")).not_to_have_count(0)
    first = page.locator("#session-select").input_value()

    page.locator("#new-session").click()
    dialog = page.locator("#new-story")
    expect(dialog).to_be_visible()
    dialog.locator("label.story-upload input").first.set_input_files(str(SERAPHINA))
    chosen = dialog.locator('li.story-card[aria-selected="true"]')
    expect(chosen).to_contain_text("Seraphina")
    expect(chosen.locator(".avatar img")).to_have_count(1)  # the card's picture
    dialog.locator("input[name=persona_name]").fill("Aria")
    dialog.locator("textarea[name=persona_description]").fill("A wandering bard.")
    expect(dialog.locator("input[name=campaign][value=rpg]")).to_be_checked()
    dialog.locator("label.story-upload input").last.set_input_files(str(ELDORIA))
    expect(dialog.locator("ul.story-books input:checked")).to_have_count(1)
    screenshot(page, "web-new-story")
    dialog.locator("button.primary").click()
    expect(dialog).to_be_hidden()

    # The story: the greeting first, its alternate greetings as swipes; HP with its bounds.
    expect(page.locator("#session-select")).not_to_have_value(first)  # the new one, shown
    sid = page.locator("#session-select").input_value()
    expect(page.locator("article.message")).to_have_count(1)
    expect(page.locator("article.message .who")).to_have_text(["Seraphina"])
    expect(page.locator("#chat-state dd[data-var=hp]")).to_contain_text("100")
    session = api.get(f"/api/sessions/{sid}").json()
    assert session["metadata"]["settings"]["persona"]["name"] == "Aria"
    assert session["character"] == "Seraphina" and session["avatar_url"]
    assert "Eldoria" in [b["book"] for b in api.get(f"/api/sessions/{sid}/lore").json()]
    assert api.get(f"/api/sessions/{sid}/state").json()["variables"]["hp"] == 100
    group = page.locator('#session-select optgroup[label="Seraphina"] option')
    expect(group).to_have_count(1)
    say(page, "I wake up in the glade.")
    screenshot(page, "web-new-story-played")

    # Import…: a lorebook asks, and is added to the story open.
    book = tmp_path / "Northwatch.json"
    book.write_text(ELDORIA.read_text().replace('"Eldoria"', '"Northwatch"'))
    page.locator("#import").set_input_files(str(book))
    page.locator("#ask button", has_text="Add to").click()
    expect(page.locator(".toast", has_text="Added")).to_have_count(1)
    # ...a card asks too, and "A new story" opens the dialog with it chosen.
    page.locator("#import").set_input_files(str(SERAPHINA))
    page.locator("#ask button", has_text="A new story").click()
    expect(dialog.locator('li.story-card[aria-selected="true"]').first).to_contain_text("Seraphina")
    dialog.locator("button", has_text="Cancel").click()
    # ...and a file that is none of them is refused naming the kinds (not "not JSON").
    junk = tmp_path / "notes.txt"
    junk.write_text("Remember to buy milk.")
    page.locator("#import").set_input_files(str(junk))
    refusal = page.locator(".toast.error")
    expect(refusal).to_contain_text("lorebook")
    expect(refusal).not_to_contain_text("not JSON")

    # Rename; the story stays under its character.
    page.locator("#rename-session").click()
    page.locator("#ask input[name=title]").fill("The glade")
    page.locator("#ask button.primary").click()
    expect(group).to_have_text(["The glade"])
    assert api.get(f"/api/sessions/{sid}").json()["title"] == "The glade"

    # At phone width: the dialog fits the screen, its controls are large enough to tap.
    small = open_page(sid, phone=True)
    expect(small.locator("article.message").first).to_be_visible()
    small.locator("#menu-toggle").click()
    small.locator("#new-session").click()
    expect(small.locator("#new-story li.story-card").first).to_be_visible()
    wide = "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
    assert small.evaluate(wide) <= PHONE["width"]
    box = small.locator("#new-story").bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    sizes = small.evaluate(
        """() => [...document.querySelectorAll(
          "#new-story button, #new-story li.story-card, #new-story label.story-upload"
        )].filter((e) => e.offsetParent !== null).map((e) => e.getBoundingClientRect().height)"""
    )
    assert sizes and min(sizes) >= 40, sizes
    screenshot(small, "web-new-story-phone")
    small.locator("#new-story button", has_text="Cancel").click()
    expect(small.locator("#new-story")).to_be_hidden()
