"""The web page end to end, in headless Chromium against a real `clotho serve` whose model
is the scripted game master on loopback: play, reroll and flip back, edit as a fork,
open a trace, fold and unfold the tree, graft by dragging, undo with Ctrl+Z, and the
messages a refused edit gets (the view, and the session, stay as they were)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests._fixtures import CHAT

from .conftest import screenshot

pytestmark = pytest.mark.slow

FIGHT = "I draw my sword and step into the cave."
BUY = "I buy a healing potion from the merchant."
HURT = {"op": "inc", "path": "hp", "value": -10}
PAID = {"op": "inc", "path": "gold", "value": 5}
LANTERN = {"op": "append", "path": "inventory", "value": "lantern"}


def expect(target: Any) -> Any:
    """Playwright's ``expect``, waiting up to 30 s (a first turn loads the model client)."""
    from playwright.sync_api import expect as playwright_expect

    playwright_expect.set_options(timeout=30_000)
    return playwright_expect(target)


def say(page: Any, text: str) -> None:
    """Type a message, send it with Enter, wait for the reply to be committed and shown."""
    replies = page.locator("article.message.assistant:not(.pending)")
    before = replies.count()
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")
    expect(replies).to_have_count(before + 1)
    expect(page.locator("#chat-view")).not_to_have_class("busy")


def variable(page: Any, name: str) -> Any:
    return page.locator(f"#chat-state dd[data-var={name}]")


def state(api: httpx.Client, sid: str) -> dict[str, Any]:
    return api.get(f"/api/sessions/{sid}/state").json()["variables"]


def add(api: httpx.Client, sid: str, role: str, content: str, delta: Any = None) -> str:
    body = {"role": role, "content": content, "delta": delta}
    answer = api.post(f"/api/sessions/{sid}/messages", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()["nodes"][0]["id"]


def node(api: httpx.Client, sid: str, nid: str) -> dict[str, Any]:
    answer = api.get(f"/api/sessions/{sid}/nodes/{nid}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def fragment_ids(api: httpx.Client, sid: str) -> list[str]:
    return [item["top"]["id"] for item in api.get(f"/api/sessions/{sid}/fragments").json()]


def drag(page: Any, source: Any, target: Any) -> None:
    """Press on ``source``, move in steps onto ``target``, release (pointer events)."""
    start, end = source.bounding_box(), target.bounding_box()
    page.mouse.move(start["x"] + 8, start["y"] + start["height"] / 2)
    page.mouse.down()
    page.mouse.move(end["x"] + 10, end["y"] + end["height"] / 2, steps=12)
    page.mouse.up()


def test_two_turns_reroll_and_flip_back_restore_the_hp(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("reroll")
    page = open_page(sid)
    expect(variable(page, "hp")).to_have_text("100")
    say(page, FIGHT)
    expect(variable(page, "hp")).to_have_text("90")
    say(page, BUY)
    expect(variable(page, "gold")).to_have_text("5")
    expect(variable(page, "inventory")).to_contain_text("healing potion")
    screenshot(page, "chat")

    fight = page.locator("article.message.assistant").first
    expect(fight.locator("button.reroll")).to_have_count(0)  # reroll: the last reply only
    fight.locator("button.branch").click()  # go on from here: what followed stays
    expect(page.locator("article.message.assistant")).to_have_count(1)
    fight.locator("button.next").click()  # `>` on the last reply: a new one
    # The new reply stands beside the old one, which keeps what came after it.
    expect(fight.locator(".content")).to_contain_text("parry")
    expect(fight.locator(".alternatives .count")).to_have_text("2/2")
    expect(variable(page, "hp")).to_have_text("100")
    expect(variable(page, "gold")).to_have_text("10")
    assert state(api, sid)["hp"] == 100

    page.locator("article.message.assistant").first.locator("button.prev").click()
    expect(
        page.locator("article.message.assistant").first.locator(".alternatives .count")
    ).to_have_text("1/2")
    expect(variable(page, "hp")).to_have_text("90")
    expect(variable(page, "gold")).to_have_text("5")
    expect(page.locator("article.message.assistant")).to_have_count(2)
    assert state(api, sid) == {"hp": 90, "gold": 5, "inventory": ["healing potion"]}

    # The trace of the reply: what the model was sent, verified.
    page.locator("article.message.assistant").first.locator("button.trace").click()
    dialog = page.locator("#trace-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("dl.facts")).to_contain_text(
        "yes: the messages below hash to what was sent"
    )
    expect(dialog.locator("ol.sent")).to_contain_text(FIGHT)
    screenshot(page, "trace")
    dialog.locator("button", has_text="Close").click()
    expect(dialog).to_be_hidden()


def test_edit_as_a_fork_keeps_the_original(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("edit")
    page = open_page(sid)
    say(page, f"{FIGHT} (edit test)")
    expect(variable(page, "hp")).to_have_text("90")

    mine = page.locator("article.message.user").first
    mine.locator("button.edit").click()
    page.fill("#ask textarea[name=content]", "I sneak along the wall, quiet as I can.")
    page.locator("#ask button", has_text="Fork and get a reply").click()
    expect(mine.locator(".content")).to_have_text("I sneak along the wall, quiet as I can.")
    expect(mine.locator(".alternatives .count")).to_have_text("2/2")
    expect(page.locator("article.message.assistant .content")).to_contain_text(
        "slip along the wall"
    )
    expect(variable(page, "hp")).to_have_text("100")

    mine.locator("button.prev").click()
    expect(page.locator("article.message.user").first.locator(".content")).to_have_text(
        f"{FIGHT} (edit test)"
    )
    expect(variable(page, "hp")).to_have_text("90")

    # An assistant message is edited as a fork with no model call.
    reply = page.locator("article.message.assistant").first
    original = reply.locator(".content").inner_text()
    reply.locator("button.edit").click()
    page.fill("#ask textarea[name=content]", "The goblin trips over its own feet.")
    page.locator("#ask button", has_text="Save as a fork").click()
    expect(reply.locator(".content")).to_have_text("The goblin trips over its own feet.")
    expect(reply.locator(".alternatives .count")).to_have_text("2/2")
    siblings = api.get(f"/api/sessions/{sid}/projection").json()["nodes"][-1]["siblings"]
    assert len(siblings) == 2
    contents = {node(api, sid, s)["content"] for s in siblings}
    assert contents == {original, "The goblin trips over its own feet."}


def test_tree_folds_grafts_by_dragging_and_undoes_with_ctrl_z(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("tree")
    u1 = add(api, sid, "user", "I light a torch.")
    a1 = add(api, sid, "assistant", "Shadows dance on the wet stone.", [HURT])
    u2 = add(api, sid, "user", "I follow the river.")
    a2 = add(api, sid, "assistant", "The river sinks under the rock.")
    # An alternative of u2 with a reply: a branch off the trunk, folded at first.
    fork = api.post(f"/api/sessions/{sid}/nodes/{u2}/fork", json={"content": "I go back."})
    assert fork.status_code == 201, fork.text
    back = fork.json()["nodes"][0]["id"]
    daylight = add(api, sid, "assistant", "Daylight again.", [PAID, LANTERN])
    assert api.put(f"/api/sessions/{sid}/head", json={"node_id": a2}).status_code == 200

    page = open_page(sid, view="tree")
    svg = page.locator("#tree-svg")
    expect(svg).to_have_attribute("data-total", "6")
    expect(svg).to_have_attribute("data-visible", "4")  # the trunk; the other branch folded
    expect(page.locator(f'g.node[data-node-id="{back}"]')).to_have_count(0)
    page.locator(f'g.fold[data-fold-id="{a1}"]').click()
    expect(svg).to_have_attribute("data-visible", "6")
    expect(page.locator(f'g.node[data-node-id="{back}"]')).to_have_count(1)

    # Read a node: its text, state, actions.
    page.locator(f'g.node[data-node-id="{a2}"]').click()
    expect(page.locator("#node-panel .node-content")).to_have_text(
        "The river sinks under the rock."
    )

    # Prune a2, then drag the fragment onto a1: a2 becomes a child of a1.
    page.locator("#node-panel button[data-action=prune]").click()
    fragment = page.locator(f'ul.subtrees.fragment li[data-node-id="{a2}"]')
    expect(fragment).to_have_count(1)
    assert fragment_ids(api, sid) == [a2]
    drag(page, fragment, page.locator(f'g.node[data-node-id="{a1}"] circle'))
    expect(page.locator("ul.subtrees.fragment li")).to_have_count(0)
    assert node(api, sid, a2)["parent_id"] == a1
    assert fragment_ids(api, sid) == []

    # Two nodes selected: the state after each, side by side (a dialog).
    page.locator(f'g.node[data-node-id="{a2}"]').click()
    page.locator(f'g.node[data-node-id="{daylight}"]').click(modifiers=["Shift"])
    diff = page.locator("#state-diff table.diff").first
    expect(diff.locator("tbody tr")).to_have_count(2)
    expect(diff).to_contain_text("gold")
    expect(diff).to_contain_text("lantern")
    screenshot(page, "tree")
    page.locator("#state-diff menu button").click()
    expect(page.locator("#state-diff")).to_be_hidden()

    # The arrow keys walk the tree from the selected node.
    page.keyboard.press("ArrowUp")
    panel_text = page.locator("#node-panel .node-content")
    expect(panel_text).to_have_text("Shadows dance on the wet stone.")
    page.keyboard.press("ArrowUp")
    expect(panel_text).to_have_text("I light a torch.")

    # Ctrl+Z undoes the graft (a2 is a fragment again), Ctrl+Shift+Z redoes it.
    page.locator("#tree-svg").click(position={"x": 20, "y": 20})
    page.keyboard.press("Control+z")
    expect(page.locator(f'ul.subtrees.fragment li[data-node-id="{a2}"]')).to_have_count(1)
    assert fragment_ids(api, sid) == [a2]
    page.keyboard.press("Control+Shift+z")
    expect(page.locator("ul.subtrees.fragment li")).to_have_count(0)
    assert node(api, sid, a2)["parent_id"] == a1

    # Dragging a node onto its own child (a graft of its subtree) is refused: a readable
    # message naming the cycle, and neither the session nor the view changes.
    version = api.get(f"/api/sessions/{sid}").json()["version"]
    drag(
        page,
        page.locator(f'g.node[data-node-id="{u1}"] circle'),
        page.locator(f'g.node[data-node-id="{a1}"] circle'),
    )
    error = page.locator(".toast.error")
    expect(error).to_have_count(1)
    expect(error).to_contain_text("Grafting")
    expect(error).to_contain_text("cycle")
    assert api.get(f"/api/sessions/{sid}").json()["version"] == version
    assert node(api, sid, a1)["parent_id"] == u1
    expect(svg).to_have_attribute("data-total", "6")


def test_a_stale_view_is_refused_and_reloaded(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("stale")
    first = add(api, sid, "user", "I wait.")
    page = open_page(sid, view="tree")
    svg = page.locator("#tree-svg")
    expect(svg).to_have_attribute("data-total", "1")
    page.locator(f'g.node[data-node-id="{first}"]').click()
    expect(page.locator("#node-panel .node-content")).to_have_text("I wait.")

    add(api, sid, "assistant", "Someone else wrote this meanwhile.")  # behind the page's back
    page.locator("#node-panel button[data-action=disable]").click()
    error = page.locator(".toast.error")
    expect(error).to_contain_text("changed elsewhere")
    expect(error).to_contain_text("Nothing was changed")
    assert node(api, sid, first)["enabled"] is True
    expect(svg).to_have_attribute("data-total", "2")  # drawn again from the server

    # Now on the current version, the same click works.
    page.locator(f'g.node[data-node-id="{first}"]').click()
    page.locator("#node-panel button[data-action=disable]").click()
    expect(page.locator(f'g.node.disabled[data-node-id="{first}"]')).to_have_count(1)
    assert node(api, sid, first)["enabled"] is False


def test_the_page_asks_for_the_token(
    new_session: Callable[[str], str], open_page: Callable[..., Any], site: Any
) -> None:
    sid = new_session("token")
    page = open_page(sid, token=None)
    login = page.locator("#login")
    expect(login).to_be_visible()
    page.fill("#login input[name=token]", "not-the-token")
    page.locator("#login button", has_text="Open").click()
    expect(page.locator("#login-reason")).to_have_text("That token was refused.")
    page.fill("#login input[name=token]", site.token)
    page.locator("#login button", has_text="Open").click()
    expect(login).to_be_hidden()
    expect(page.locator(f'#session-select option[value="{sid}"]')).to_have_count(1)


def test_a_sillytavern_chat_is_imported_from_the_page(
    open_page: Callable[..., Any], api: httpx.Client
) -> None:
    page = open_page(None)
    expect(page.locator("#session-select option")).not_to_have_count(0)
    page.set_input_files("#import", str(CHAT))
    expect(page.locator(".toast", has_text="Imported")).to_have_count(1)
    # Swipes are alternatives (the active one shown); the hidden (system) message is a
    # disabled node: shown dimmed, not in the story the model sees.
    messages = page.locator("article.message")
    expect(messages).to_have_count(6)
    expect(messages.nth(0).locator(".alternatives .count")).to_have_text("1/2")
    expect(messages.nth(2).locator(".alternatives .count")).to_have_text("2/3")
    hidden = messages.nth(3)
    expect(hidden).to_have_class(re.compile(r"\bdisabled\b"))
    expect(hidden.locator("footer")).to_have_text("hidden from the model")
    sid = page.locator("#session-select").input_value()
    assert api.get(f"/api/sessions/{sid}/projection").json()["total"] == 5
    hidden.locator("button.toggle", has_text="Unhide").click()
    expect(page.locator("article.message.disabled")).to_have_count(0)
    assert api.get(f"/api/sessions/{sid}/projection").json()["total"] == 6
    page.locator("#views button", has_text="Tree").click()
    expect(page.locator("#tree-svg")).to_have_attribute("data-total", "9")
    expect(page.locator("g.node.disabled")).to_have_count(0)
    page.keyboard.press("Control+z")  # the unhide is an edit: undone from the tree view
    expect(page.locator("g.node.disabled")).to_have_count(1)


def test_a_session_goes_to_the_trash_and_comes_back(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("doomed")
    add(api, sid, "user", "A line worth keeping.")
    page = open_page(sid)
    expect(page.locator("article.message")).to_have_count(1)
    page.locator("#delete-session").click()
    page.locator("#ask button", has_text="Move to the trash").click()
    expect(page.locator(f'#session-select option[value="{sid}"]')).to_have_count(0)
    assert sid in [s["id"] for s in api.get("/api/trash/sessions").json()["sessions"]]

    page.locator("#session-trash").click()
    row = page.locator(f'#ask li[data-session-id="{sid}"]')
    expect(row).to_contain_text("doomed")
    row.locator("button", has_text="Restore").click()
    expect(page.locator("#session-select")).to_have_value(sid)
    # (a count first: a locator matching several elements fails at once, it does not wait)
    expect(page.locator("article.message")).to_have_count(1)
    expect(page.locator("article.message .content")).to_have_text("A line worth keeping.")
    assert sid in [s["id"] for s in api.get("/api/sessions").json()["sessions"]]


def test_a_refusal_names_each_field_the_api_refused(
    new_session: Callable[[str], str], open_page: Callable[..., Any]
) -> None:
    """A 422's problems reach the player: the page reads the Problem's ``errors`` as the
    API sends them (``{field, problem}``, docs/api.md), not FastAPI's ``loc``/``msg``."""
    page = open_page(new_session("refusal"))
    page.evaluate(
        """async () => {
            const ui = await import("/static/ui.js");
            ui.showError({title: "The request is not valid", detail: "1 problem",
                doc: {errors: [{field: "body.operations[0].node_id", problem: "field required"}]}},
                "Editing");
        }"""
    )
    error = page.locator(".toast.error")
    expect(error).to_contain_text("Editing: The request is not valid")
    expect(error).to_contain_text("body.operations[0].node_id: field required")
