"""The tree view as a player first meets it, at desktop and at phone width: the first
open shows the start of the story, player and reply nodes are told apart (and a legend
says which is which), labels use the room they have, hovering shows a node's whole
text, `‹ i/n ›` flips a fork's alternatives in place, a graft is confirmed with what
went where and an Undo, the node panel names the speaker, and two nodes' states compared
in a dialog that is in view (both columns) with the engine's own parts folded away; the
state panel shows bounds as bars and hides the built-ins."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from .conftest import guide_screenshot
from .test_page import HURT, LANTERN, PAID, add, drag, expect, node

pytestmark = pytest.mark.slow

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
LONG = "The innkeeper leans over the counter and whispers about the ruins beyond the river."
INTERNAL = [
    {"op": "set", "path": "active_lore_ids", "value": ["cave-of-echoes"]},
    {"op": "set", "path": "lore_timers", "value": {"cave-of-echoes": {"sticky": 2}}},
]


@pytest.fixture
def pages(site: Any, browser: Any) -> Iterator[Callable[..., Any]]:
    """``pages(session_id, viewport, touch=False)``: the tree view in a new context of that
    size (``touch``: a phone's, taps as touches); JavaScript errors fail the test."""
    contexts: list[Any] = []
    errors: list[str] = []

    def make(
        session_id: str, viewport: dict[str, int], touch: bool = False, view: str = "tree"
    ) -> Any:
        context = browser.new_context(viewport=viewport, has_touch=touch, is_mobile=touch)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.set_default_timeout(20_000)
        page.goto(f"{site.url}/#view={view}&token={site.token}&session={session_id}")
        drawn = (
            ".tree-legend .item.user" if view == "tree" else "#chat-state dl.state[data-node-id]"
        )
        expect(page.locator(drawn)).to_be_visible()
        return page

    yield make
    for context in contexts:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def inside(box: dict[str, float] | None, area: dict[str, float]) -> bool:
    """Whether ``box`` (a bounding box) lies within ``area`` (x, y, width, height)."""
    return (
        box is not None
        and box["x"] >= area["x"] - 0.5
        and box["y"] >= area["y"] - 0.5
        and box["x"] + box["width"] <= area["x"] + area["width"] + 0.5
        and box["y"] + box["height"] <= area["y"] + area["height"] + 0.5
    )


def screen(viewport: dict[str, int]) -> dict[str, float]:
    return {"x": 0, "y": 0, "width": viewport["width"], "height": viewport["height"]}


def long_story(api: httpx.Client, turns: int = 40) -> str:
    """A SillyTavern chat of ``turns`` exchanges between Aria and Seraphina, imported."""
    lines = [json.dumps({"user_name": "Aria", "character_name": "Seraphina", "chat_metadata": {}})]
    for i in range(turns):
        lines.append(
            json.dumps(
                {"name": "Aria", "is_user": True, "mes": f"Aria's move {i}: I ask about the ruins."}
            )
        )
        lines.append(json.dumps({"name": "Seraphina", "is_user": False, "mes": f"{LONG} ({i})"}))
    made = api.post(
        "/api/imports/chat", params={"filename": "long.jsonl"}, content="\n".join(lines)
    )
    assert made.status_code == 201, made.text
    return made.json()["session"]["id"]


def circle_fill(page: Any, selector: str) -> str:
    return page.locator(f"{selector} circle").first.evaluate("c => getComputedStyle(c).fill")


def test_first_open_shows_the_start_roles_labels_tips_and_speakers(
    pages: Callable[..., Any], api: httpx.Client
) -> None:
    sid = long_story(api)
    page = pages(sid, DESKTOP)
    svg = page.locator("#tree-svg")
    expect(svg).to_have_attribute("data-total", "80")
    area = svg.bounding_box()
    # The start of the story is in view, not cut off above a view centred on HEAD.
    assert inside(page.locator("g.node.start circle").bounding_box(), area)
    first = api.get(f"/api/sessions/{sid}/tree").json()["nodes"][0]
    assert inside(page.locator(f'g.node[data-node-id="{first["id"]}"] circle').bounding_box(), area)

    # Player and reply nodes have their colours on the trunk too; the legend names them.
    player = circle_fill(page, "g.node.trunk.user:not(.head)")
    reply = circle_fill(page, "g.node.trunk.assistant:not(.head)")
    assert player != reply
    legend = page.locator(".tree-legend")
    expect(legend.locator(".item.user")).to_have_text("player")
    expect(legend.locator(".item.assistant")).to_have_text("reply")
    assert (
        legend.locator(".item.user .swatch").evaluate("s => getComputedStyle(s).backgroundColor")
        == player
    )

    # A label takes the room it has (two lines, well past 24 characters); hovering shows
    # the whole text.
    label = page.locator("g.node.trunk.assistant text.label").first
    assert len(label.text_content() or "") > 40
    reply_node = page.locator("g.node.trunk.assistant").first
    reply_node.locator("circle").hover()
    tip = page.locator(".tree-tip")
    expect(tip).to_be_visible()
    expect(tip.locator(".text")).to_have_text(f"{LONG} (0)")
    expect(tip.locator(".who")).to_contain_text("Seraphina")

    # The panel names the speaker.
    reply_node.locator("circle").click()
    expect(page.locator("#node-panel h2 .speaker")).to_have_text("Seraphina")
    expect(page.locator("#node-panel h2 .role-chip")).to_have_text("reply")
    guide_screenshot(page, "web-tree")


def fork_story(api: httpx.Client, sid: str) -> dict[str, str]:
    """torch → shadows (hp −10, lore set) → river → sinks (HEAD); river's alternative:
    back → daylight (gold +5, a lantern)."""
    ids = {"torch": add(api, sid, "user", "I light a torch.")}
    ids["shadows"] = add(
        api, sid, "assistant", "Shadows dance on the wet stone.", [HURT, *INTERNAL]
    )
    ids["river"] = add(api, sid, "user", "I follow the river.")
    ids["sinks"] = add(api, sid, "assistant", "The river sinks under the rock.")
    fork = api.post(
        f"/api/sessions/{sid}/nodes/{ids['river']}/fork", json={"content": "I go back."}
    )
    assert fork.status_code == 201, fork.text
    ids["back"] = fork.json()["nodes"][0]["id"]
    ids["daylight"] = add(api, sid, "assistant", "Daylight again.", [PAID, LANTERN])
    assert api.put(f"/api/sessions/{sid}/head", json={"node_id": ids["sinks"]}).status_code == 200
    return ids


def check_diff_in_view(page: Any, viewport: dict[str, int]) -> None:
    dialog = page.locator("#state-diff")
    expect(dialog).to_be_visible()
    table = dialog.locator("table.diff").first
    expect(table.locator("tbody tr")).to_have_count(3)
    rows = table.locator("tbody tr")
    assert [rows.nth(i).get_attribute("data-path") for i in range(3)] == ["hp", "gold", "inventory"]
    view = screen(viewport)
    assert inside(table.bounding_box(), view), (table.bounding_box(), view)
    for heading in table.locator("thead th").all():
        assert inside(heading.bounding_box(), view)
    for cell in rows.nth(0).locator("td").all():  # hp: 100 after A, 90 after B
        assert inside(cell.bounding_box(), view)
    # The engine's own parts are folded away under Details, and there when opened.
    hidden = dialog.locator("details.internals")
    expect(hidden.locator("tr[data-path=active_lore_ids]")).to_be_hidden()
    expect(hidden.locator("tr[data-path=lore_timers]")).to_be_hidden()
    hidden.locator("summary").click()
    expect(hidden.locator("tr[data-path=active_lore_ids]")).to_be_visible()


def test_the_diff_is_in_view_at_desktop_and_phone_width(
    pages: Callable[..., Any], new_session: Callable[[str], str], api: httpx.Client
) -> None:
    sid = new_session("diff")
    ids = fork_story(api, sid)

    page = pages(sid, DESKTOP)
    svg = page.locator("#tree-svg")
    expect(svg).to_have_attribute("data-visible", "4")
    # A small tree fits whole at first open.
    area = svg.bounding_box()
    for circle in page.locator("g.node circle").all():
        assert inside(circle.bounding_box(), area)
    page.locator(f'g.node[data-node-id="{ids["torch"]}"] circle').click()
    page.locator(f'g.fold[data-fold-id="{ids["shadows"]}"]').click()
    expect(svg).to_have_attribute("data-visible", "6")
    page.locator(f'g.node[data-node-id="{ids["daylight"]}"] circle').click(modifiers=["Shift"])
    check_diff_in_view(page, DESKTOP)
    guide_screenshot(page, "web-tree-diff")
    page.keyboard.press("Escape")
    expect(page.locator("#state-diff")).to_be_hidden()

    phone = pages(sid, PHONE, touch=True)
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    guide_screenshot(phone, "web-tree-phone")
    phone.locator(f'g.node[data-node-id="{ids["torch"]}"] circle').tap()
    # A tap opens the node panel (a drawer at this width) with the whole text.
    expect(phone.locator("#node-panel .node-content")).to_have_text("I light a torch.")
    expect(phone.locator("#node-panel .node-content")).to_be_in_viewport(ratio=1)
    compare = phone.locator("#node-panel button[data-action=compare]")
    compare.scroll_into_view_if_needed()
    assert compare.bounding_box()["height"] >= 40
    compare.tap()
    expect(phone.locator("#tree-hint")).to_contain_text("compare")
    # The other node is on the fork's other alternative, flipped to in place with ›.
    phone.locator(f'g.alts[data-alts-of="{ids["river"]}"] .flip.next').tap()
    expect(phone.locator(f'g.node[data-node-id="{ids["river"]}"]')).to_have_count(0)
    phone.locator(f'g.node[data-node-id="{ids["daylight"]}"] circle').tap()
    check_diff_in_view(phone, PHONE)
    guide_screenshot(phone, "web-tree-diff-phone")


def test_the_state_panel_bounds_and_built_ins(
    pages: Callable[..., Any], new_session: Callable[[str], str], api: httpx.Client
) -> None:
    sid = new_session("state panel")
    add(api, sid, "user", "I fall.", [{"op": "inc", "path": "hp", "value": -20}, *INTERNAL])
    page = pages(sid, DESKTOP, view="chat")
    panel = page.locator("#chat-state")
    terms = panel.locator("dl.state:not(.internal) > dt")
    expect(terms).to_have_text(["hp", "gold", "inventory"])  # the schema's order
    hp = panel.locator("dd[data-var=hp]")
    expect(hp).to_have_text("80")
    meter = hp.locator("meter")
    assert meter.evaluate("m => [m.min, m.max, m.value]") == [0, 100, 80]
    assert (
        hp.locator(".value").evaluate("v => getComputedStyle(v, '::after').content") == '" / 100"'
    )
    expect(panel.locator("dd[data-built-in=active_lore_ids]")).to_be_hidden()
    expect(panel.locator("dd[data-built-in=lore_timers]")).to_be_hidden()
    panel.locator("details.internals summary").click()
    expect(panel.locator("dd[data-built-in=active_lore_ids]")).to_contain_text("cave-of-echoes")
    expect(panel.locator("dd[data-var=gold] meter")).to_have_count(0)  # no max: no bar

    # A session without a schema shows its variables all the same.
    free = api.post("/api/sessions", json={"title": "free"}).json()["session"]["id"]
    add(api, free, "user", "Lucky.", [{"op": "set", "path": "luck", "value": 3}])
    page.evaluate("sid => clotho.choose(sid)", free)
    expect(page.locator("#chat-state dd[data-var=luck]")).to_have_text("3")


def test_a_graft_is_confirmed_with_what_went_where_and_undone_from_the_toast(
    pages: Callable[..., Any], new_session: Callable[[str], str], api: httpx.Client
) -> None:
    sid = new_session("graft toast")
    ids = fork_story(api, sid)
    page = pages(sid, DESKTOP)
    drag(
        page,
        page.locator(f'g.node[data-node-id="{ids["sinks"]}"] circle'),
        page.locator(f'g.node[data-node-id="{ids["torch"]}"] circle'),
    )
    toast = page.locator(".toast.relocated")
    expect(toast).to_contain_text("Grafted: 1 node")
    expect(toast).to_contain_text("“The river sinks under the rock.”")
    expect(toast).to_contain_text("under “I light a torch.”")
    assert node(api, sid, ids["sinks"])["parent_id"] == ids["torch"]
    toast.locator("button.undo-relocate").click()
    expect(page.locator(f'g.node[data-node-id="{ids["sinks"]}"]')).to_have_count(1)
    expect(page.locator(".toast", has_text="Undone")).to_have_count(1)
    assert node(api, sid, ids["sinks"])["parent_id"] == ids["river"]
