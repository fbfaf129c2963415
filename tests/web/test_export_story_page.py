"""The page's Export story… (the menu, next to Trash…): Markdown or a web page of the
branch to HEAD, downloaded under the story's title; the HTML book opened on a phone shows
a hostile message as text (a screenshot of it is kept)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import PHONE, screenshot
from .test_page import expect

pytestmark = pytest.mark.slow


def test_export_story_downloads_the_book(
    open_page: Callable[..., Any],
    api: httpx.Client,
    new_session: Callable[[str], str],
    browser: Any,
    tmp_path: Path,
) -> None:
    sid = new_session("Night watch")
    for role, text, name in (
        ("assistant", "*Bram looks up from the fire.* Who goes there?", "Bram"),
        ("user", "A friend. 你好！ <script>alert(1)</script>", "Aria"),
        ("assistant", "*He nods.* Sit, then.", "Bram"),
    ):
        added = api.post(
            f"/api/sessions/{sid}/messages", json={"role": role, "content": text, "name": name}
        )
        assert added.status_code == 201, added.text
    page = open_page(sid)
    expect(page.locator("article.message")).to_have_count(3)
    choice = page.locator("#export-story")
    expect(choice).to_be_visible()
    screenshot(page, "export-story-menu")
    with page.expect_download() as md_download:
        choice.select_option("md")
    assert md_download.value.suggested_filename == "Night watch.md"
    markdown = Path(md_download.value.path()).read_text(encoding="utf-8")
    assert markdown.startswith("# Night watch\n")
    assert "**Bram**\n\n*Bram looks up from the fire.* Who goes there?" in markdown
    assert choice.input_value() == ""  # ready for the next export
    with page.expect_download() as html_download:
        choice.select_option("html")
    assert html_download.value.suggested_filename == "Night watch.html"
    book = tmp_path / "book.html"
    html_download.value.save_as(str(book))
    text = book.read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script" not in text
    reader = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        phone = reader.new_page()
        phone.goto(book.as_uri())
        expect(phone.locator("h1")).to_have_text("Night watch")
        expect(phone.locator(".speaker")).to_have_text(["Bram", "Aria", "Bram"])
        expect(phone.locator(".body em").first).to_have_text("Bram looks up from the fire.")
        expect(phone.locator(".message").nth(1)).to_contain_text("<script>alert(1)</script>")
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"]  # nothing wider than the phone
        screenshot(phone, "story-book-phone")
    finally:
        reader.close()
