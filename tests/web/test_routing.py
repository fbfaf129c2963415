"""The page's address names what it shows (#view=tree&session=ID&node=ID): changed on an
open page (hashchange) it shows that view, session and node; Back and Forward move
between the views shown; a node named in the chat is scrolled to and marked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .test_page import add, expect

pytestmark = pytest.mark.slow


def go(page: Any, fragment: str) -> None:
    page.evaluate("(hash) => { location.hash = hash; }", fragment)


def test_the_address_names_the_view_the_session_and_the_node(
    open_page: Callable[..., Any], new_session: Callable[[str], str], api: httpx.Client
) -> None:
    first = new_session("Routes one")
    second = new_session("Routes two")
    opening = add(api, first, "user", "I open the gate.")
    add(api, first, "assistant", "It creaks.")
    add(api, second, "user", "I sail west.")
    page = open_page(first)
    expect(page.locator("article.message")).to_have_count(2)
    expect(page.locator("#session-select")).to_have_value(first)

    # On the open page: the tree view, the node named opened and selected.
    go(page, f"view=tree&session={first}&node={opening}")
    expect(page.locator("#tree-view")).to_be_visible()
    expect(page.locator("#chat-view")).to_be_hidden()
    expect(page.locator(f'#tree-svg .node.selected[data-node-id="{opening}"]')).to_have_count(1)
    expect(page.locator("#node-panel .node-content")).to_have_text("I open the gate.")

    # Back: the chat again; Forward: the tree.
    page.go_back()
    expect(page.locator("#chat-view")).to_be_visible()
    expect(page.locator("#views button[data-view=chat]")).to_have_attribute("aria-pressed", "true")
    page.go_forward()
    expect(page.locator("#tree-view")).to_be_visible()

    # The view buttons make history too: Chat, then Back returns to the tree.
    page.click("#views button[data-view=chat]")
    expect(page.locator("#chat-view")).to_be_visible()
    assert "view=chat" in page.evaluate("location.hash")
    page.go_back()
    expect(page.locator("#tree-view")).to_be_visible()

    # Another session named: it is chosen, in the picker too.
    go(page, f"view=chat&session={second}")
    expect(page.locator("#chat-view .content")).to_have_text(["I sail west."])
    expect(page.locator("#session-select")).to_have_value(second)
    # Undo and Redo say what the journal holds: the message added, nothing undone.
    expect(page.locator("#undo")).to_be_enabled()
    expect(page.locator("#redo")).to_be_disabled()
    page.click("#undo")
    expect(page.locator("#chat-view article.message")).to_have_count(0)
    expect(page.locator("#undo")).to_be_disabled()
    expect(page.locator("#redo")).to_be_enabled()
    page.keyboard.press("Control+Z")  # nothing to undo: nothing asked, nothing refused
    expect(page.locator(".toast.error")).to_have_count(0)

    # A node named in the chat: scrolled to and marked.
    go(page, f"view=chat&session={first}&node={opening}")
    expect(page.locator("article.message.target")).to_have_attribute("data-node-id", opening)
    expect(page.locator("article.message.target")).to_be_in_viewport()
