"""The cast on the page (issue 24), in headless Chromium against a real `clotho serve` whose
model is the scripted game master on loopback: a four-character story played from the
page. Three characters added from the cast panel (one by uploading a card, two written
in place), a message answered by the member picked, one answered by a round of them (the
natural order: the members named, in order), Bram leaving (narration in the chat, the
panel saying he is away), two turns, Bram joining and speaking when told to; his reply's
trace lacks the turns he missed; Undo across the join and the leave brings the panel
back to what it was. The tree marks the changes of scene. At desktop width; then the
cast panel in the drawer at phone width (leave, a member picked, Speak, join and Undo);
mute, talkativeness, the speaker order and remove from the panel; Stop ending a round."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from orchestrator.loopback import ModelServer, Reply
from tests._fixtures import SERAPHINA
from tests.api._server import Server, running_with_model
from tests.fuzz._hostile import card_chunk, png_with

from .conftest import DESKTOP, PHONE, guide_screenshot, screenshot
from .test_page import expect

pytestmark = pytest.mark.slow

MARLA = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Marla",
        "description": "Marla guides travellers through the goblin cave.",
        "personality": "calm, watchful",
        "scenario": "",
        "first_mes": "Marla lifts her lantern. *Stay close,* she says.",
        "mes_example": "",
    },
}
SNEAK = "I sneak quietly along the wall."
BUY = "I buy a healing potion from the merchant."


def marla_story(api: httpx.Client) -> str:
    """A story whose character is Marla (a JSON card), its id."""
    data = base64.b64encode(json.dumps(MARLA).encode()).decode()
    body = {"card": {"filename": "marla.json", "data": data}, "persona": {"name": "Aria"}}
    made = api.post("/api/stories", json=body)
    assert made.status_code == 201, made.text
    return made.json()["session"]["id"]


def member(page: Any, name: str) -> Any:
    return page.locator(f'#cast-panel li.cast-member[data-name="{name}"]')


def replies(page: Any) -> Any:
    return page.locator("article.message.assistant:not(.pending)")


def settled(page: Any) -> None:
    expect(page.locator("#chat-view")).not_to_have_class("busy")


def send(page: Any, text: str, speaker: str = "") -> None:
    """Pick who answers ("": the order decides) and send ``text``."""
    page.select_option("#speaker", speaker)
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def add_written(page: Any, name: str, description: str) -> None:
    page.locator("#cast-add").click()
    dialog = page.locator("#cast-dialog")
    dialog.locator("input[name=name]").fill(name)
    dialog.locator("textarea[name=description]").fill(description)
    dialog.locator("button[type=submit]").click()
    expect(member(page, name)).to_be_visible()
    expect(dialog).not_to_be_visible()


def no_wider_than(page: Any, width: int) -> None:
    wide = page.evaluate(
        "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
    )
    assert wide <= width, f"the page is {wide} px wide"


def test_a_four_character_story_from_the_page(
    open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = marla_story(api)
    base = f"/api/sessions/{sid}"
    page = open_page(sid)
    expect(member(page, "Marla")).to_contain_text("present")
    expect(page.locator("#speaker-choice")).to_be_hidden()  # one character: she answers

    # Three more: a card uploaded (added as soon as it is chosen), two written in place.
    page.locator("#cast-add").click()
    page.locator("#cast-dialog input[type=file]").set_input_files(str(SERAPHINA))
    expect(member(page, "Seraphina")).to_be_visible()
    expect(page.locator("#cast-dialog")).not_to_be_visible()
    expect(member(page, "Seraphina").locator(".avatar img")).to_have_count(1)  # the card's picture
    add_written(page, "Bram", "A ferryman who talks too much.")
    add_written(page, "Corin", "A young knight, eager and loud.")
    names = page.locator("#cast-panel li.cast-member .cast-name")
    expect(names).to_have_text(["Marla", "Seraphina", "Bram", "Corin"])
    expect(page.locator("#speaker-choice")).to_be_visible()
    expect(member(page, "Bram").locator(".avatar")).to_have_text("B")  # no picture: his initial

    # The member picked answers.
    send(page, "I draw my sword and step into the cave.", "Bram")
    expect(replies(page)).to_have_count(2)  # Marla's greeting, Bram's reply
    settled(page)
    expect(replies(page).last.locator(".who")).to_have_text("Bram")

    # The order decides: in the natural order the members named answer, in the order named
    # (the others are made quiet, so that no roll adds one).
    for quiet in ("Seraphina", "Bram"):
        assert api.patch(f"{base}/cast/{quiet}", json={"talkativeness": 0}).status_code == 200
    page.reload()
    send(page, "Corin, Marla: what do you make of this?")
    expect(replies(page)).to_have_count(4)
    settled(page)
    expect(replies(page).locator(".who")).to_have_text(["Marla", "Bram", "Corin", "Marla"])
    expect(page.locator("article.message.user")).to_have_count(2)  # one message, two replies

    # Bram leaves: narration in the chat, away in the panel, not offered to answer.
    member(page, "Bram").locator("button.cast-leave").click()
    scene = page.locator("article.message.scene")
    expect(scene).to_have_text("Bram leaves the scene.")
    expect(member(page, "Bram")).to_have_attribute("data-present", "false")
    expect(member(page, "Bram").locator(".cast-state")).to_contain_text("away")
    expect(member(page, "Bram").locator("button.cast-speak")).to_be_disabled()
    expect(page.locator('#speaker option[value="Bram"]')).to_be_disabled()
    expect(scene.locator("header")).to_have_count(0)  # narration, not a character's line
    align = scene.evaluate("(node) => getComputedStyle(node).textAlign")
    assert align == "center", align
    guide_screenshot(page, "web-cast", toasts=False)
    screenshot(page, "cast-away")

    # Two turns while he is away.
    send(page, SNEAK, "Marla")
    expect(replies(page)).to_have_count(5)
    settled(page)
    send(page, BUY, "Corin")
    expect(replies(page)).to_have_count(6)
    settled(page)

    # Bram joins, and speaks when told to (a reply with no message of the player's).
    member(page, "Bram").locator("button.cast-join").click()
    expect(scene.last).to_have_text("Bram joins the scene.")
    expect(member(page, "Bram")).to_have_attribute("data-present", "true")
    member(page, "Bram").locator("button.cast-speak").click()
    expect(replies(page)).to_have_count(7)
    settled(page)
    last = replies(page).last
    expect(last.locator(".who")).to_have_text("Bram")
    expect(page.locator("article.message.user")).to_have_count(4)  # no message of the player's
    screenshot(page, "cast-desktop")

    # His reply's trace: what he missed is left out, and says so.
    story = api.get(f"{base}/projection").json()["nodes"]
    said = {n["content"]: i for i, n in enumerate(story)}
    away = [n["id"] for n in story[said[SNEAK] : said[BUY] + 2]]
    assert [n["role"] for n in story[said[SNEAK] : said[BUY] + 2]] == ["user", "assistant"] * 2
    last.locator("button.trace").click()
    trace = page.locator("#trace-dialog")
    expect(trace.locator(".trace-scene")).to_be_visible()
    expect(trace.locator(".trace-scene dd.left-out")).to_have_attribute("data-count", "4")
    sent = trace.locator("ol.sent").inner_text()
    assert "sneak" not in sent and "merchant" not in sent, sent
    assert "draw my sword" in sent  # what he saw is there
    stored = api.get(f"{base}/nodes/{story[-1]['id']}/trace").json()["scene"]
    assert stored["speaker"] == "Bram", stored
    assert stored["left_out"] == [{"first": away[0], "last": away[-1], "count": 4}], stored
    guide_screenshot(page, "web-cast-trace")
    screenshot(page, "cast-trace")
    trace.locator("button", has_text="Close").click()

    # The tree marks the changes of scene.
    page.locator("#views button[data-view=tree]").click()
    marked = page.locator("#tree-svg g.node.scene")
    expect(marked).to_have_count(2)
    expect(page.locator(".tree-legend .item.scene")).to_be_visible()
    expect(page.locator("#tree-svg g.node.head text.label")).to_contain_text("Bram: Water")
    marked.first.click()
    expect(page.locator("#node-panel .badge.scene")).to_have_text("⇄ Bram leaves")
    screenshot(page, "cast-tree")
    page.locator("#views button[data-view=chat]").click()

    # Undo: his reply, then the join (the panel: away again), the two turns, the leave
    # (the panel: present, as before).
    undo = page.locator("#undo")
    undo.click()
    expect(replies(page)).to_have_count(6)
    undo.click()
    expect(page.locator(".toast").last).to_contain_text("the return to the scene")
    expect(member(page, "Bram")).to_have_attribute("data-present", "false")
    undo.click()
    expect(replies(page)).to_have_count(5)
    undo.click()
    expect(replies(page)).to_have_count(4)
    undo.click()
    expect(page.locator(".toast").last).to_contain_text("the departure from the scene")
    expect(member(page, "Bram")).to_have_attribute("data-present", "true")
    expect(page.locator("article.message.scene")).to_have_count(0)
    expect(member(page, "Bram").locator("button.cast-speak")).to_be_enabled()
    no_wider_than(page, 1400)


def test_the_cast_in_the_drawer_at_phone_width(
    open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = marla_story(api)
    base = f"/api/sessions/{sid}"
    for name in ("Bram", "Corin", "Seraphina"):
        body = {"name": name, "description": f"{name} of the cave."}
        answer = api.post(f"{base}/cast", json=body)
        assert answer.status_code == 201, answer.text
    page = open_page(sid, phone=True)
    expect(page.locator("#side-toggle")).to_have_text("Cast & state")
    expect(page.locator("#speaker-choice")).to_be_visible()
    no_wider_than(page, PHONE["width"])

    # The drawer holds the cast: every member and its buttons inside the screen, tappable.
    page.locator("#side-toggle").tap()
    expect(page.locator("#chat-state")).to_be_in_viewport(ratio=0.99)  # slid in whole
    expect(page.locator("#cast-panel li.cast-member")).to_have_count(4)
    sizes = page.evaluate(
        """() => [...document.querySelectorAll('#cast-panel button, #cast-panel select')]
        .map((e) => { const b = e.getBoundingClientRect();
          return { text: e.textContent, height: b.height, right: b.right, left: b.left }; })"""
    )
    for size in sizes:
        assert size["height"] >= 40, size
        assert size["left"] >= 0 and size["right"] <= PHONE["width"], size
    guide_screenshot(page, "web-cast-phone", toasts=False)
    screenshot(page, "cast-drawer-phone")

    # Bram leaves from the drawer: away there, narration in the chat.
    member(page, "Bram").locator("button.cast-leave").tap()
    expect(member(page, "Bram")).to_have_attribute("data-present", "false")
    page.locator("#side-backdrop").tap(position={"x": 10, "y": 300})
    expect(page.locator("#chat-state")).not_to_be_visible()
    expect(page.locator("article.message.scene")).to_have_text("Bram leaves the scene.")

    # A message answered by the member picked, then Corin made to speak from the drawer.
    send(page, "I draw my sword and step into the cave.", "Seraphina")
    expect(replies(page)).to_have_count(2)
    settled(page)
    expect(replies(page).last.locator(".who")).to_have_text("Seraphina")
    page.locator("#side-toggle").tap()
    member(page, "Corin").locator("button.cast-speak").tap()
    expect(page.locator("#chat-state")).not_to_be_visible()  # the drawer closes: the reply shows
    expect(replies(page)).to_have_count(3)
    settled(page)
    expect(replies(page).last.locator(".who")).to_have_text("Corin")
    no_wider_than(page, PHONE["width"])
    screenshot(page, "cast-chat-phone")

    # Bram joins from the drawer; Undo (in the header) sends him away again.
    page.locator("#side-toggle").tap()
    member(page, "Bram").locator("button.cast-join").tap()
    expect(member(page, "Bram")).to_have_attribute("data-present", "true")
    page.locator("#undo").tap()
    expect(member(page, "Bram")).to_have_attribute("data-present", "false")
    expect(page.locator(".toast").last).to_contain_text("the return to the scene")


def test_mute_talkativeness_the_speaker_order_and_remove_from_the_panel(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("mute and remove")
    base = f"/api/sessions/{sid}"
    for name in ("Marla", "Bram", "Corin"):
        assert api.post(f"{base}/cast", json={"name": name}).status_code == 201
    page = open_page(sid)
    expect(page.locator("#cast-panel li.cast-member")).to_have_count(3)

    # Muted: said in the panel, not offered to answer, kept in the settings; unmuted back.
    member(page, "Bram").locator("button.cast-mute").click()
    expect(member(page, "Bram")).to_have_attribute("data-muted", "true")
    expect(member(page, "Bram").locator(".cast-state")).to_contain_text("muted")
    ink = "(node) => getComputedStyle(node).color"
    name = member(page, "Bram").locator(".cast-name")
    assert name.evaluate(ink) == member(page, "Marla").locator(".cast-name").evaluate(ink)
    expect(member(page, "Bram").locator("button.cast-speak")).to_be_disabled()
    expect(page.locator('#speaker option[value="Bram"]')).to_be_disabled()
    muted = {m["name"]: m["muted"] for m in api.get(f"{base}/cast").json()["members"]}
    assert muted == {"Marla": False, "Bram": True, "Corin": False}, muted
    member(page, "Bram").locator("button.cast-mute").click()
    expect(member(page, "Bram")).to_have_attribute("data-muted", "false")
    expect(page.locator('#speaker option[value="Bram"]')).to_be_enabled()

    # Under More: the description, the talkativeness (saved when let go), the own lore.
    more = member(page, "Bram").locator(".cast-details")
    expect(more).to_be_hidden()
    member(page, "Bram").locator("button.cast-more").click()
    expect(more.locator(".cast-books")).to_have_text("No lore of its own.")
    version = page.locator("#version").inner_text()
    more.locator("input[type=range]").fill("0.2")
    expect(page.locator("#version")).not_to_have_text(version)  # saved
    expect(more.locator(".cast-talk-value")).to_have_text("20%")
    expect(more).to_be_visible()  # drawn again, still unfolded
    screenshot(page, "cast-more")
    talk = {m["name"]: m["talkativeness"] for m in api.get(f"{base}/cast").json()["members"]}
    assert talk == {"Marla": 0.5, "Bram": 0.2, "Corin": 0.5}, talk

    # Recaps of what a member missed: one checkbox, kept in the cast's settings.
    expect(page.locator("#cast-recap")).not_to_be_checked()
    version = page.locator("#version").inner_text()
    page.locator("#cast-recap").check()
    expect(page.locator("#version")).not_to_have_text(version)  # saved
    expect(page.locator("#cast-recap")).to_be_checked()  # drawn again from the answer
    assert api.get(f"{base}/cast").json()["recap_missed"] is True

    # The narrator voices everyone: the order chosen in the panel, "auto" answered by it.
    page.select_option("#cast-order", "narrator")
    expect(page.locator('#speaker option[value=""]')).to_contain_text("Narrator")
    assert api.get(f"{base}/cast").json()["order"] == "narrator"
    send(page, "I look around the cave.")
    expect(replies(page)).to_have_count(1)
    settled(page)
    expect(replies(page).locator(".who")).to_have_text("Narrator")
    expect(replies(page).locator(".avatar")).to_have_text("N")

    # Removed, after a yes: out of the panel and the cast; the story keeps its messages.
    member(page, "Corin").locator("button.cast-remove").click()
    expect(page.locator("#ask")).to_contain_text("Remove Corin from the cast?")
    page.locator("#ask button", has_text="Remove").click()
    expect(page.locator("#cast-panel li.cast-member")).to_have_count(2)
    assert [m["name"] for m in api.get(f"{base}/cast").json()["members"]] == ["Marla", "Bram"]
    expect(page.locator("article.message")).to_have_count(2)


def pictures_settled(page: Any) -> None:
    """Every picture the page asked for has come or failed, and what it does on either
    has run (the page's stream of live events never lets the network idle)."""
    page.wait_for_function("[...document.images].every((image) => image.complete)")
    page.evaluate("() => new Promise((done) => setTimeout(done, 0))")


def test_each_member_shows_its_own_picture_or_its_initial(
    open_page: Callable[..., Any], api: httpx.Client
) -> None:
    """Seraphina (a picture) is the first member, Marla (none) and Bram (one) after her;
    once she is removed Marla is the first, and still shows her initial, not another's
    face (neither Seraphina's nor Bram's); so do Seraphina's messages (her picture went
    with her), read again or not."""
    data = base64.b64encode(SERAPHINA.read_bytes()).decode()
    made = api.post("/api/stories", json={"card": {"filename": "seraphina.png", "data": data}})
    assert made.status_code == 201, made.text
    sid = made.json()["session"]["id"]
    base = f"/api/sessions/{sid}/cast"
    assert api.post(base, json={"name": "Marla"}).status_code == 201
    bram = json.dumps({**MARLA, "data": {**MARLA["data"], "name": "Bram"}})
    files = {"file": ("bram.png", png_with([card_chunk(bram)]), "image/png")}
    assert api.post(f"{base}/card", files=files).status_code == 201
    page = open_page(sid)
    expect(member(page, "Seraphina").locator(".avatar img")).to_have_count(1)
    expect(member(page, "Bram").locator(".avatar img")).to_have_count(1)
    greeting = page.locator("article.message.assistant").first
    expect(greeting.locator(".avatar img")).to_have_count(1)
    pictures_settled(page)
    expect(member(page, "Marla").locator(".avatar")).to_have_text("M")
    # The new-story picker: the story's card is its first member's, with her picture.
    stored = page.locator(f'#new-story li.story-card[data-key="stored:{sid}"]')
    page.locator("#new-session").click()
    expect(stored).to_contain_text("Seraphina")
    expect(stored.locator(".avatar img")).to_have_count(1)
    page.keyboard.press("Escape")
    expect(page.locator("#new-story")).not_to_be_visible()

    member(page, "Seraphina").locator("button.cast-remove").click()
    page.locator("#ask button", has_text="Remove").click()
    expect(page.locator("#cast-panel li.cast-member")).to_have_count(2)
    expect(member(page, "Marla").locator(".cast-state")).to_contain_text("main character")
    pictures_settled(page)  # every picture asked for has come
    expect(member(page, "Marla").locator(".avatar")).to_have_text("M")
    expect(member(page, "Marla").locator(".avatar img")).to_have_count(0)
    expect(member(page, "Bram").locator(".avatar img")).to_have_count(1)
    expect(greeting.locator(".avatar img")).to_have_count(0)
    screenshot(page, "cast-own-pictures")
    page.reload()
    expect(member(page, "Bram").locator(".avatar img")).to_have_count(1)
    pictures_settled(page)
    expect(member(page, "Marla").locator(".avatar")).to_have_text("M")
    expect(member(page, "Bram").locator(".avatar img")).to_have_count(1)
    expect(page.locator("article.message.assistant .avatar img")).to_have_count(0)
    page.locator("#new-session").click()
    expect(stored).to_contain_text("Marla")
    pictures_settled(page)
    expect(stored.locator(".avatar")).to_have_text("M")  # not Bram's face


def test_a_change_of_scene_in_the_pages_language_unless_rewritten(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    sid = new_session("scene in Chinese")
    base = f"/api/sessions/{sid}"
    for name in ("Marla", "Bram"):
        assert api.post(f"{base}/cast", json={"name": name}).status_code == 201
    left = api.post(f"{base}/cast/Bram/leave")
    assert left.status_code == 201, left.text
    page = open_page(sid, locale="zh-CN")
    scene = page.locator("article.message.scene")
    expect(scene).to_have_text("Bram 离开了场景。")
    expect(member(page, "Bram").locator(".cast-state")).to_have_text("离场")
    rewrite = {"op": "rewrite", "node_id": left.json()["node"]["id"], "content": "Bram slips out."}
    assert api.post(f"{base}/edits", json={"operations": [rewrite]}).status_code == 200
    page.reload()
    expect(scene).to_have_text("Bram slips out.")  # the player's words, as written


def slow_gm(request: dict[str, Any]) -> Reply | str:
    """A long reply, a word every 40 ms; no state change."""
    if "response_format" in request:
        return json.dumps({"operations": []})
    return Reply(" ".join(f"word{i}" for i in range(400)), chunk_delay=0.04)


@pytest.fixture(scope="module")
def slow_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("web-cast-slow")
    with running_with_model(ModelServer(slow_gm), folder) as up:
        yield up


def test_stop_ends_the_round(slow_site: Server, browser: Any) -> None:
    """Two members named: a round of two turns; Stop while the first streams keeps its
    reply so far, and the second never starts."""
    with slow_site.client() as api:
        sid = api.post("/api/sessions", json={"title": "round"}).json()["session"]["id"]
        for name in ("Marla", "Bram"):
            assert api.post(f"/api/sessions/{sid}/cast", json={"name": name}).status_code == 201
        context = browser.new_context(viewport=DESKTOP)
        try:
            page = context.new_page()
            page.goto(f"{slow_site.url}/#token={slow_site.token}&session={sid}")
            expect(page.locator("#speaker-choice")).to_be_visible()
            send(page, "Marla, Bram: tell me everything.")
            streaming = page.locator("article.message.streaming")
            expect(streaming.locator(".content")).to_contain_text("word5 ")
            expect(streaming.locator(".who")).to_have_text("Marla")
            page.locator("#stop").click()
            settled(page)
            expect(page.locator(".toast", has_text="Stopped")).to_have_count(1)
            expect(replies(page)).to_have_count(1)
            expect(replies(page).locator(".who")).to_have_text("Marla")
            nodes = api.get(f"/api/sessions/{sid}/projection").json()["nodes"]
            assert [(n["role"], n["name"]) for n in nodes][1:] == [("assistant", "Marla")]
            assert api.get(f"/api/sessions/{sid}/turns?status=running").json()["turns"] == []
        finally:
            context.close()


def test_stop_while_asking_who_answers_starts_no_turn(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    """Stop while the page asks who answers (the question held in the browser): no turn
    starts, nothing is stored, the message is back in the input."""
    sid = new_session("stop before the round")
    for name in ("Marla", "Bram"):
        assert api.post(f"/api/sessions/{sid}/cast", json={"name": name}).status_code == 201
    page = open_page(sid)
    held: list[Any] = []
    page.route("**/api/sessions/*/speakers", lambda route: held.append(route))
    text = "Marla, Bram: which way?"
    send(page, text)
    while not held:
        page.wait_for_timeout(20)
    expect(page.locator("#stop")).to_be_enabled()
    page.locator("#stop").click()
    held[0].continue_()
    settled(page)
    expect(page.locator("#composer-input")).to_have_value(text)
    expect(page.locator("article.message")).to_have_count(0)
    assert api.get(f"/api/sessions/{sid}/projection").json()["nodes"] == []
    assert api.get(f"/api/sessions/{sid}/turns").json()["turns"] == []


def test_a_turn_does_not_draw_the_cast_panel_again(slow_site: Server, browser: Any) -> None:
    """While a turn plays, Speak, Leave and Join wait (disabled), and that is all that
    changes: the panel is the same one (a member unfolded, the talkativeness slider being
    moved, an open select stay as they are)."""
    with slow_site.client() as api:
        sid = api.post("/api/sessions", json={"title": "steady"}).json()["session"]["id"]
        for name in ("Marla", "Bram"):
            assert api.post(f"/api/sessions/{sid}/cast", json={"name": name}).status_code == 201
        context = browser.new_context(viewport=DESKTOP)
        try:
            page = context.new_page()
            page.goto(f"{slow_site.url}/#token={slow_site.token}&session={sid}")
            bram = member(page, "Bram")
            expect(bram.locator("button.cast-speak")).to_be_enabled()
            bram.locator("button.cast-more").click()
            slider = bram.locator("input[type=range]")
            slider.evaluate("(node) => { node.value = '0.9'; node.dataset.held = 'yes'; }")
            send(page, "Tell me everything.", "Marla")
            streaming = page.locator("article.message.streaming")
            expect(streaming.locator(".content")).to_contain_text("word3 ")
            expect(bram.locator("button.cast-speak")).to_be_disabled()
            expect(bram.locator("button.cast-leave")).to_be_disabled()
            expect(bram.locator("button.cast-mute")).to_be_enabled()
            expect(slider).to_have_attribute("data-held", "yes")  # the same element
            expect(slider).to_have_value("0.9")
            expect(bram.locator(".cast-details")).to_be_visible()
            page.locator("#stop").click()
            settled(page)
            expect(bram.locator("button.cast-speak")).to_be_enabled()
            expect(bram.locator(".cast-details")).to_be_visible()  # unfolded still
        finally:
            context.close()


def test_a_member_named_with_a_slash_from_the_panel(
    new_session: Callable[[str], str], open_page: Callable[..., Any], api: httpx.Client
) -> None:
    """The page names a member in its paths percent-encoded (AC%2FDC): muted, sent away
    and removed from the panel."""
    sid = new_session("a slash")
    base = f"/api/sessions/{sid}"
    for name in ("Marla", "AC/DC"):
        assert api.post(f"{base}/cast", json={"name": name}).status_code == 201
    page = open_page(sid)
    band = member(page, "AC/DC")
    band.locator("button.cast-mute").click()
    expect(band).to_have_attribute("data-muted", "true")
    band.locator("button.cast-leave").click()
    expect(band).to_have_attribute("data-present", "false")
    expect(page.locator("article.message.scene")).to_have_text("AC/DC leaves the scene.")
    band.locator("button.cast-remove").click()
    page.locator("#ask button", has_text="Remove").click()
    expect(page.locator("#cast-panel li.cast-member")).to_have_count(1)
    assert [m["name"] for m in api.get(f"{base}/cast").json()["members"]] == ["Marla"]
