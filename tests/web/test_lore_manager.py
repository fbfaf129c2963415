"""The lore manager in the page: open Lore from the header, find an entry by its key, change
its keys, save, test a text and see the entry fire by its new key (and why), a change not
saved kept when another entry is asked for (the player is asked first); the same at
phone width (390×844, touch), the editor in place of the lists and nothing wider than the
screen. Screenshots at both widths."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests._fixtures import ELDORIA

from .conftest import PHONE, screenshot
from .test_page import expect

pytestmark = pytest.mark.slow


def _session_with_book(api: httpx.Client, new_session: Callable[[str], str]) -> str:
    sid = new_session("Lore")
    made = api.post(
        f"/api/sessions/{sid}/imports/lorebook",
        content=ELDORIA.read_bytes(),
        params={"name": "Eldoria.json"},
    )
    assert made.status_code == 200, made.text
    return sid


def _edit_and_test(page: Any, name: str) -> None:
    """Find the Shadowfang entry, give it a new key, save, and test a text with it."""
    dialog = page.locator("#lore-dialog")
    expect(dialog.locator(".lore-book-name")).to_have_text(["Eldoria (4)"])
    dialog.locator(".lore-search input").fill("shadow")
    expect(dialog.locator(".lore-list li:visible")).to_have_count(1)
    dialog.locator(".lore-list li:visible button").click()
    keys = dialog.locator(".lore-form input[name=keys]")
    expect(keys).to_have_value("shadowfang, beast, monster, monsters, beasts")
    keys.fill(f"{name}, shadowfang")
    dialog.locator(".lore-form button[type=submit]").click()
    expect(page.locator("#toasts")).to_contain_text("Saved")
    expect(dialog.locator(".lore-form input[name=keys]")).to_have_value(f"{name}, shadowfang")
    dialog.locator(".lore-test textarea").fill(f"A {name} prowls in the dark.")
    dialog.locator(".lore-test button[type=submit]").click()
    fired = dialog.locator('.lore-fired li[data-uid="1"]')
    expect(fired).to_have_attribute("data-via", "key")
    expect(fired.locator(".reason")).to_contain_text(name)
    expect(dialog.locator(".lore-budget")).to_contain_text("tokens of the lore budget")


def test_open_lore_edit_a_key_and_see_it_fire(
    open_page: Callable[..., Any],
    browser: Any,
    site: Any,
    api: httpx.Client,
    new_session: Callable[[str], str],
) -> None:
    sid = _session_with_book(api, new_session)
    page = open_page(sid)
    page.locator("#lore-open").click()
    expect(page.get_by_role("dialog", name="Lore")).to_be_visible()  # named by its title
    _edit_and_test(page, "moonbeast")
    screenshot(page, "lore-manager")
    entry = api.get(f"/api/sessions/{sid}/lore/books/Eldoria").json()["entries"][1]
    assert entry["keys"] == ["moonbeast", "shadowfang"]
    # a change not saved is not lost by opening another entry without a word
    dialog = page.locator("#lore-dialog")
    dialog.locator(".lore-search input").fill("")
    dialog.locator(".lore-form input[name=comment]").fill("The Shadowfangs")
    dialog.locator('.lore-list li[data-uid="0"] button').click()
    page.locator("#ask button[value=cancel]").click()
    expect(dialog.locator(".lore-form input[name=comment]")).to_have_value("The Shadowfangs")

    # at phone width, by touch: the menu, the lists, then the editor in their place
    phone_sid = _session_with_book(api, new_session)
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    try:
        phone = context.new_page()
        errors: list[str] = []
        phone.on("pageerror", lambda error: errors.append(str(error)))
        phone.goto(f"{site.url}/#view=chat&token={site.token}&session={phone_sid}")
        phone.locator("#menu-toggle").tap()
        phone.locator("#lore-open").tap()
        expect(phone.locator("#lore-dialog .lore-editor")).to_be_hidden()
        _edit_and_test(phone, "nightwolf")
        expect(phone.locator("#lore-dialog .lore-entries")).to_be_hidden()
        wide = phone.evaluate(
            "() => { const d = document.getElementById('lore-dialog');"
            " return [d.scrollWidth, d.clientWidth, document.documentElement.scrollWidth]; }"
        )
        assert wide[0] <= wide[1] and wide[2] <= PHONE["width"], wide
        small = phone.evaluate(
            "() => [...document.querySelectorAll('#lore-dialog button, #lore-dialog select')]"
            ".filter((e) => e.offsetParent !== null)"
            ".map((e) => [e.textContent, e.getBoundingClientRect().height])"
            ".filter(([, height]) => height < 40)"
        )
        assert not small, f"targets under 40 px: {small}"
        screenshot(phone, "lore-manager-phone")
        phone.locator("#lore-dialog .lore-back").tap()
        expect(phone.locator("#lore-dialog .lore-entries")).to_be_visible()
        screenshot(phone, "lore-manager-phone-list")
        assert not errors, errors
    finally:
        context.close()
