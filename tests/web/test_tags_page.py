"""Bookmarks and named branches on the page (tags.js): a named node carries its label in
the tree, the panel lists every name and jumps to one, and "Bookmark this…", rename and
delete each make one write; at desktop width and on a phone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .conftest import guide_screenshot
from .test_page import add, expect

pytestmark = pytest.mark.slow


def _names(api: httpx.Client, sid: str) -> dict[str, tuple[str, str]]:
    answer = api.get(f"/api/sessions/{sid}/refs")
    assert answer.status_code == 200, answer.text
    return {ref["name"]: (ref["kind"], ref["node_id"]) for ref in answer.json()["refs"]}


def test_names_in_the_tree_made_renamed_and_deleted_from_the_panel(
    open_page: Callable[..., Any], api: httpx.Client, new_session: Callable[[str], str]
) -> None:
    sid = new_session("Names")
    add(api, sid, "user", "I step into the valley.")
    meeting = add(api, sid, "assistant", "Seraphina waits by the old oak.")
    add(api, sid, "user", "Who are you?")
    head = add(api, sid, "assistant", "A guardian of this forest.")
    made = api.post(
        f"/api/sessions/{sid}/refs",
        json={"name": "first-meeting", "kind": "tag", "node_id": "HEAD~2"},
    )
    assert made.status_code == 201, made.text

    page = open_page(sid, view="tree", viewport={"width": 1280, "height": 800})
    label = page.locator(f'g.node[data-node-id="{meeting}"] text.ref-label')
    expect(label).to_have_text("★ first-meeting")
    entry = page.locator('.names-section li[data-ref="first-meeting"] button.jump')
    expect(entry).to_contain_text("first-meeting")
    entry.click()  # jumps to the node: its panel
    expect(page.locator("#node-panel .node-content")).to_have_text(
        "Seraphina waits by the old oak."
    )
    expect(page.locator('#node-panel .badge.ref[data-ref="first-meeting"]')).to_be_visible()

    # "Bookmark this…" on HEAD, as a branch
    page.locator(f'g.node[data-node-id="{head}"] circle').click()
    expect(page.locator("#node-panel .node-content")).to_have_text("A guardian of this forest.")
    page.locator('#node-panel button[data-action="bookmark"]').click()
    page.locator("#ask input[name=name]").fill("main")
    page.locator('#ask button[value="branch"]').click()
    expect(page.locator(f'g.node[data-node-id="{head}"] text.ref-label')).to_have_text("⎇ main")
    assert _names(api, sid) == {"first-meeting": ("tag", meeting), "main": ("branch", head)}
    guide_screenshot(page, "web-tree-names")

    # rename, then delete, from the panel
    page.locator('#node-panel button[data-action="rename-name"]').click()
    page.locator("#ask input[name=name]").fill("forest")
    page.locator('#ask button[value="ok"]').click()
    expect(page.locator('.names-section li[data-ref="forest"]')).to_be_visible()
    page.locator('#node-panel button[data-action="delete-name"]').click()
    expect(page.locator('.names-section li[data-ref="forest"]')).to_have_count(0)
    assert _names(api, sid) == {"first-meeting": ("tag", meeting)}
    # a refused name says why and changes nothing
    page.locator('#node-panel button[data-action="bookmark"]').click()
    page.locator("#ask input[name=name]").fill("cafe")
    page.locator('#ask button[value="tag"]').click()
    expect(page.locator(".toast").last).to_contain_text("hex")
    assert _names(api, sid) == {"first-meeting": ("tag", meeting)}

    phone = open_page(sid, view="tree", phone=True)
    expect(phone.locator(f'g.node[data-node-id="{meeting}"] text.ref-label')).to_have_text(
        "★ first-meeting"
    )
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    phone.locator(f'g.node[data-node-id="{meeting}"] circle').tap()
    expect(phone.locator('#node-panel .badge.ref[data-ref="first-meeting"]')).to_be_visible()
    expect(phone.locator("#node-panel .node-content")).to_be_in_viewport(ratio=1)
    phone.locator(".names-section").scroll_into_view_if_needed()
    expect(phone.locator(".names-section button.jump").first).to_be_in_viewport(ratio=1)
    guide_screenshot(phone, "web-tree-names-phone")
