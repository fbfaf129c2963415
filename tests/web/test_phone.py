"""The page at phone width (390×844, touch): nothing wider than the screen, Send tapped
plays a turn, every control of the header and the composer a target of 40 px or more,
the header's menu folded behind ☰, the world state a drawer that opens and closes; the
messages named, with avatars, their text formatted. Screenshots at both widths."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests._fixtures import SERAPHINA

from .conftest import PHONE, screenshot
from .test_page import add, expect

pytestmark = pytest.mark.slow


# Every control of the header and the composer a player can see, and its size.
TARGETS = """() => [...document.querySelectorAll(
  "#bar button, #bar select, #bar .file-button, #composer button, #composer textarea"
)].filter((e) => e.offsetParent !== null).map((e) => {
  const box = e.getBoundingClientRect();
  return { id: e.id || e.textContent, width: box.width, height: box.height, right: box.right };
})"""


def in_view(page: Any, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    return bool(
        box
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= PHONE["width"] + 0.5
        and box["y"] + box["height"] <= PHONE["height"] + 0.5
    )


def test_the_page_at_phone_width(
    open_page: Callable[..., Any],
    api: httpx.Client,
) -> None:
    card = {"filename": SERAPHINA.name, "data": base64.b64encode(SERAPHINA.read_bytes()).decode()}
    made = api.post("/api/stories", json={"card": card, "persona": {"name": "Aria"}})
    assert made.status_code == 201, made.text
    sid = made.json()["session"]["id"]
    add(api, sid, "user", "I enter the tavern.")
    add(api, sid, "assistant", '*The innkeeper looks up.* "Welcome, traveller. **Sit.**"')
    page = open_page(sid, phone=True)
    expect(page.locator("article.message")).to_have_count(3)

    # Nothing wider than the screen: no horizontal scroll.
    wide = "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
    assert page.evaluate(wide) <= PHONE["width"], page.evaluate(wide)
    # Every control in sight a touch target, none past the right edge.
    for target in page.evaluate(TARGETS):
        assert target["height"] >= 40 and target["width"] >= 40, target
        assert target["right"] <= PHONE["width"] + 0.5, target
    assert in_view(page, "#send") and in_view(page, "#composer-input")
    # The reply formatted, its speaker named and shown by an avatar; no node id in sight.
    reply = page.locator("article.message.assistant").last
    expect(reply.locator(".content em.action")).to_have_text("The innkeeper looks up.")
    expect(reply.locator(".content q.speech strong")).to_have_text("Sit.")
    # Named: the card's character, the persona; the card's picture on the character's
    # messages, the persona's initial on the player's.
    expect(page.locator("article.message .who")).to_have_text(["Seraphina", "Aria", "Seraphina"])
    pictures = page.locator("article.message.assistant .avatar img")
    expect(pictures).to_have_count(2)
    assert (pictures.first.get_attribute("src") or "").startswith("data:image/png;base64,")
    expect(page.locator("article.message.user .avatar")).to_have_text("A")
    expect(reply.locator("details.node-id code")).not_to_be_visible()
    screenshot(page, "web-chat-phone")
    page.evaluate("clotho.notify('Saved', 'An info toast fades by itself.')")
    # A message's actions: on the last one; on another once it is tapped.
    first = page.locator("article.message").first
    expect(reply.locator(".actions button").first).to_be_visible()
    expect(first.locator(".actions")).to_be_hidden()
    first.locator(".content").tap()
    expect(first.locator(".actions button").first).to_be_visible()
    assert (first.locator(".actions button").first.bounding_box() or {}).get("height", 0) >= 40
    first.locator(".content").tap()
    expect(first.locator(".actions")).to_be_hidden()

    # The world state is a drawer: out of sight, then in it, then gone again.
    assert not in_view(page, "#chat-state") or not page.locator("#chat-state").is_visible()
    page.tap("#side-toggle")
    expect(page.locator("#chat-state dd[data-var=hp]")).to_be_visible()
    expect(page.locator("#chat-state")).to_be_in_viewport(ratio=0.99)  # slid in whole
    screenshot(page, "web-state-drawer-phone")
    page.tap("#side-backdrop", position={"x": 10, "y": 300})
    expect(page.locator("#chat-state")).not_to_be_visible()

    # The header's menu: folded behind ☰, its buttons in reach once opened.
    expect(page.locator("#new-session")).not_to_be_visible()
    page.tap("#menu-toggle")
    expect(page.locator("#new-session")).to_be_visible()
    assert in_view(page, "#new-session") and in_view(page, "#language")
    screenshot(page, "web-menu-phone")
    page.tap("#menu-toggle")
    expect(page.locator("#new-session")).not_to_be_visible()

    # Errors: at most three on screen, none over the composer's buttons, each dismissible.
    for n in range(4):
        page.evaluate(f"clotho.problem({{title: 'Refused {n}', detail: 'x '.repeat(400)}}, 'Test')")
    errors = page.locator(".toast.error:not(.leaving)")
    expect(errors).to_have_count(3)
    expect(page.locator(".toast", has_text="Refused 0")).to_have_count(0)
    buttons = [page.locator(f"#{name}").bounding_box() for name in ("send", "continue")]
    for n in range(3):
        box = errors.nth(n).bounding_box()
        for button in buttons:
            assert box["y"] + box["height"] <= button["y"], (box, button)
    screenshot(page, "web-errors-phone")
    errors.nth(0).locator("button.dismiss").tap()
    expect(errors).to_have_count(2)

    # Send is tapped: the turn plays, the reply comes, the input is emptied.
    page.fill("#composer-input", "I order a drink.")
    page.tap("#send")
    expect(page.locator("article.message.assistant:not(.pending)")).to_have_count(3)
    expect(page.locator("#composer-input")).to_have_value("")
    assert page.evaluate(wide) <= PHONE["width"], page.evaluate(wide)
    expect(page.locator(".toast.info")).to_have_count(0)  # it faded by itself
    usage = page.locator("#usage").text_content() or ""
    spent = r"[\d,]+ in · [\d,]+ out"
    assert re.fullmatch(f"last reply {spent} · this story {spent}", usage), usage

    # The same story at desktop width, for the guide.
    desktop = open_page(sid)
    expect(desktop.locator("article.message.assistant:not(.pending)")).to_have_count(3)
    expect(desktop.locator("#side-toggle")).not_to_be_visible()
    expect(desktop.locator("#chat-state dd[data-var=hp]")).to_be_visible()
    screenshot(desktop, "web-chat-desktop")
