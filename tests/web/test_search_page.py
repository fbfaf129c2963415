"""The tree view's search box: a word on a side branch is found, marked, said to be on
a side branch, and choosing it selects that message in the tree (its panel shows it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from .conftest import screenshot
from .test_page import add, expect

pytestmark = pytest.mark.slow


def test_search_box_finds_a_side_branch_and_selects_it(
    open_page: Callable[..., Any], api: httpx.Client, new_session: Callable[[str], str]
) -> None:
    sid = new_session("Search")
    add(api, sid, "user", "We climb to the lantern room.")
    trunk = add(api, sid, "assistant", "The keeper trims the wick.")
    fork = api.post(
        f"/api/sessions/{sid}/nodes/{trunk}/fork",
        json={"content": "A wyvern perches on the rail."},
    )
    assert fork.status_code == 201, fork.text
    side = fork.json()["nodes"][0]["id"]
    assert api.put(f"/api/sessions/{sid}/head", json={"node_id": trunk}).status_code == 200
    page = open_page(sid, view="tree")
    expect(page.locator(".tree-legend .item.user")).to_be_visible()
    box = page.locator("#tree-search-q")
    box.fill("wyvern")
    box.press("Enter")
    hits = page.locator("#tree-search-hits button")
    expect(hits).to_have_count(1)
    expect(hits.first.locator("mark")).to_have_text("wyvern")
    expect(hits.first).to_contain_text("on a side branch")
    assert hits.first.get_attribute("data-node-id") == side
    screenshot(page, "tree-search")
    hits.first.click()
    expect(page.locator("#tree-search-hits")).to_be_hidden()
    expect(page.locator("#node-panel")).to_contain_text("A wyvern perches on the rail.")
    box.fill("kraken")
    box.press("Enter")
    expect(page.locator("#tree-search-hits li.muted")).to_have_text("No message holds these words.")


def test_the_filter_row_narrows_the_search(
    open_page: Callable[..., Any], api: httpx.Client, new_session: Callable[[str], str]
) -> None:
    sid = new_session("Lighthouse")
    add(api, sid, "user", "We climb to the lantern room.")
    trunk = add(api, sid, "assistant", "The keeper trims the lantern wick.")
    fork = api.post(
        f"/api/sessions/{sid}/nodes/{trunk}/fork",
        json={"content": "A wyvern circles the lantern."},
    )
    assert fork.status_code == 201, fork.text
    side = fork.json()["nodes"][0]["id"]
    assert api.put(f"/api/sessions/{sid}/head", json={"node_id": trunk}).status_code == 200
    for phone, viewport in ((False, {"width": 1280, "height": 800}), (True, None)):
        page = open_page(sid, view="tree", phone=phone, viewport=viewport)
        expect(page.locator(".tree-legend .item.user")).to_be_visible()
        box = page.locator("#tree-search-q")
        box.fill("lantern")
        box.press("Enter")
        hits = page.locator("#tree-search-hits button")
        expect(hits).to_have_count(3)
        where = page.locator(".search-filters select[name=where]")
        expect(where).to_be_visible()
        where.select_option("trunk")  # a change runs the search again
        expect(hits).to_have_count(2)
        assert side not in [hits.nth(i).get_attribute("data-node-id") for i in range(2)]
        page.locator(".search-filters select[name=role]").select_option("user")
        expect(hits).to_have_count(1)
        expect(hits.first).to_contain_text("lantern room")
        screenshot(page, "tree-search-filters-phone" if phone else "tree-search-filters")
        page.locator(".search-filters select[name=role]").select_option("")
        where.select_option("under")  # below HEAD (nothing selected): HEAD itself
        expect(hits.first).to_have_attribute("data-node-id", trunk)  # the list may be the last
        expect(hits).to_have_count(1)  # one until this search's answer replaces it
        page.locator(".search-filters select[name=since]").select_option("1h")
        expect(hits).to_have_count(1)


def _until_held(page: Any, held: list[Any]) -> None:
    """Wait for the held request to reach the route's handler (which runs between the
    page's calls)."""
    for _ in range(500):
        if held:
            return
        page.wait_for_timeout(20)
    raise AssertionError("the search was never asked")


def test_a_late_answer_to_an_earlier_search_is_not_shown(
    open_page: Callable[..., Any], api: httpx.Client, new_session: Callable[[str], str]
) -> None:
    """The first search's answer is held back until a second search has been answered:
    the list keeps the second's hits; and an answer arriving after Escape opens nothing."""
    sid = new_session("Late")
    add(api, sid, "user", "The keeper trims the wick.")
    add(api, sid, "assistant", "A wyvern perches on the rail.")
    page = open_page(sid, view="tree")
    expect(page.locator(".tree-legend .item.user")).to_be_visible()
    held: list[Any] = []

    def hold(route: Any) -> None:
        if "q=keeper" in route.request.url:
            held.append(route)
        else:
            route.continue_()

    page.route("**/search?*", hold)
    box = page.locator("#tree-search-q")
    hits = page.locator("#tree-search-hits button")
    box.fill("keeper")
    box.press("Enter")
    _until_held(page, held)
    box.fill("wyvern")
    box.press("Enter")
    expect(hits).to_have_count(1)
    expect(hits.first).to_contain_text("wyvern")
    with page.expect_response(lambda response: "q=keeper" in response.url):
        held.pop().continue_()
    page.wait_for_timeout(300)  # time for the page to handle the late answer (if it did)
    expect(hits).to_have_count(1)
    expect(hits.first).to_contain_text("wyvern")
    box.fill("keeper")
    box.press("Enter")
    _until_held(page, held)
    box.press("Escape")
    expect(page.locator("#tree-search-hits")).to_be_hidden()
    with page.expect_response(lambda response: "q=keeper" in response.url):
        held.pop().continue_()
    page.wait_for_timeout(300)
    expect(page.locator("#tree-search-hits")).to_be_hidden()
