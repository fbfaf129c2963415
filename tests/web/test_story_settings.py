"""The story settings and the context meter in the browser: the meter under the composer
follows the draft; the dialog (from the header's menu) sets the persona, the author's
note (world state, at HEAD) and the system prompt, which the meter then shows; at phone
width the dialog fits the screen. Screenshots at both widths (docs/images)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .conftest import PHONE, guide_screenshot
from .test_page import add, expect

pytestmark = pytest.mark.slow


def test_settings_dialog_and_meter(
    api: httpx.Client,
    new_session: Callable[[str], str],
    open_page: Callable[..., Any],
    browser: Any,
    site: Any,
) -> None:
    sid = new_session("Story settings")
    add(api, sid, "assistant", "The gate of Eldoria stands open before you.")
    page = open_page(sid)
    meter = page.locator("#context-meter")
    expect(meter).to_have_text(re.compile(r"^[\d,]+ / [\d,]+ tokens"))
    before = meter.text_content()
    page.fill("#composer-input", "I walk through the gate, my lantern raised high above my head.")
    expect(meter).not_to_have_text(before or "")  # the draft is measured (debounced)

    page.click("#story-settings")
    dialog = page.locator("#notes-dialog")
    expect(dialog).to_be_visible()
    page.fill("[name=persona_name]", "Aria")
    page.fill("[name=persona_description]", "A wandering bard with a cracked lute.")
    page.fill("[name=note_text]", "{{user}} is hunted: keep the tension high.")
    page.select_option("[name=note_position]", "after_story")
    expect(page.locator("[name=note_depth]")).to_be_hidden()  # a depth only in the chat
    page.select_option("[name=note_position]", "in_chat")
    page.fill("[name=note_depth]", "2")
    page.fill("[name=system_prompt]", "You narrate a grim tale for {{user}}.")
    guide_screenshot(page, "web-story-settings")
    page.click("#notes-dialog button.primary")
    expect(dialog).to_be_hidden()

    session = api.get(f"/api/sessions/{sid}").json()
    assert session["metadata"]["settings"]["persona"]["name"] == "Aria"
    assert session["metadata"]["settings"]["system_prompt"].startswith("You narrate")
    note = api.get(f"/api/sessions/{sid}/state").json()["author_note"]
    assert note["text"].startswith("{{user}} is hunted") and note["depth"] == 2
    expect(meter).to_contain_text("author's note")
    assert "at depth 2" in (meter.get_attribute("title") or "")
    # undo takes the note back (one step), the settings stay
    page.click("#undo")
    expect(meter).not_to_contain_text("author's note")
    assert api.get(f"/api/sessions/{sid}/state").json()["author_note"] is None

    # at phone width: the menu opens, the dialog fits the screen, the meter is shown
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    try:
        phone = context.new_page()
        phone.goto(f"{site.url}/#view=chat&token={site.token}&session={sid}")
        expect(phone.locator("#context-meter")).to_have_text(re.compile("tokens"))
        phone.tap("#menu-toggle")
        phone.tap("#story-settings")
        shown = phone.locator("#notes-dialog")
        expect(shown).to_be_visible()
        expect(phone.locator("[name=persona_name]")).to_have_value("Aria")
        box = shown.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        save = phone.locator("#notes-dialog button.primary").bounding_box()
        assert save is not None and save["height"] >= 40
        guide_screenshot(phone, "web-story-settings-phone")
        phone.locator("#notes-dialog button", has_text="Cancel").tap()
        expect(shown).to_be_hidden()
        guide_screenshot(phone, "web-context-meter-phone")
    finally:
        context.close()
