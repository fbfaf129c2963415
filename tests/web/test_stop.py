"""Stopping and rejoining a turn from the page: the model is slow; the player clicks Stop
while the reply streams in, which stops the turn through the API (DELETE: the page's
turns are detached, so only that can stop them): the text so far is kept (marked
incomplete) and Continue goes on. A reload while a turn plays rejoins it: the reply so
far, then the rest as it comes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orchestrator.loopback import ModelServer, Reply
from tests.api._server import Server, running_with_model

from .conftest import screenshot
from .test_page import expect

pytestmark = pytest.mark.slow

WORDS = 400
SHORT = 60


def slow_gm(request: dict[str, Any]) -> Reply | str:
    """A reply of many words, 40 ms apart; no state change."""
    if "response_format" in request:
        return json.dumps({"operations": []})
    last = request["messages"][-1]
    if last["role"] != "user":
        return Reply("And the story goes on.", chunk_delay=0.01)
    words = SHORT if "reload" in last["content"] else WORDS
    delay = 3.0 if "wait" in last["content"] else 0.0  # the model thinks before its first word
    return Reply(" ".join(f"word{i}" for i in range(words)), delay=delay, chunk_delay=0.04)


@pytest.fixture(scope="module")
def slow_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("web-slow")
    with running_with_model(ModelServer(slow_gm), folder) as up:
        yield up


def test_stop_keeps_the_reply_so_far_and_continue_goes_on(slow_site: Server, browser: Any) -> None:
    with slow_site.client() as api:
        sid = api.post("/api/sessions", json={"title": "slow"}).json()["session"]["id"]
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            page = context.new_page()
            page.goto(f"{slow_site.url}/#token={slow_site.token}&session={sid}")
            page.fill("#composer-input", "Tell me everything.")
            page.press("#composer-input", "Enter")
            streaming = page.locator("article.message.streaming .content")
            expect(streaming).to_contain_text("word5 ")  # tokens arrive as they are written
            page.locator("#stop").click()
            expect(page.locator(".toast", has_text="Stopped")).to_have_count(1)
            reply = page.locator("article.message.assistant:not(.pending)")
            expect(reply).to_have_count(1)
            expect(reply.locator("footer")).to_contain_text("incomplete")
            kept = reply.locator(".content").inner_text()
            assert kept.startswith("word0 word1") and f"word{WORDS - 1}" not in kept
            node = _head(api, sid)
            assert node["metadata"]["incomplete"] is True and node["content"] == kept
            (turn,) = api.get(f"/api/sessions/{sid}/turns").json()["turns"]
            assert turn["detach"] is True  # leaving would not have stopped it: DELETE did
            assert turn["status"] == "done" and turn["incomplete"] is True

            expect(page.locator("#composer-input")).to_have_value("")  # no double send
            page.locator("#continue").click()  # extends the stopped reply: still one
            expect(reply.locator(".alternatives .count")).to_have_text("2/2")
            expect(reply).to_have_count(1)
            expect(reply.locator(".content")).to_contain_text("And the story goes on.")
            assert reply.locator(".content").inner_text().startswith(kept)
        finally:
            context.close()


def test_stop_before_the_reply_keeps_the_players_message(slow_site: Server, browser: Any) -> None:
    with slow_site.client() as api:
        sid = api.post("/api/sessions", json={"title": "early"}).json()["session"]["id"]
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            page = context.new_page()
            page.goto(f"{slow_site.url}/#token={slow_site.token}&session={sid}")
            page.fill("#composer-input", "I wait for the answer.")
            page.press("#composer-input", "Enter")
            expect(page.locator("#turn-status")).to_contain_text("waiting for the model")
            page.locator("#stop").click()
            expect(page.locator(".toast", has_text="your message is kept")).to_have_count(1)
            expect(page.locator("article.message.pending")).to_have_count(0)
            kept = page.locator("article.message:not(.pending)")
            expect(kept).to_have_count(1)
            expect(kept).to_contain_text("I wait for the answer.")
            nodes = api.get(f"/api/sessions/{sid}/tree").json()["nodes"]
            stored = [(n["role"], n["content"]) for n in nodes]
            assert stored == [("user", "I wait for the answer.")]
            assert page.input_value("#composer-input") == ""  # it was sent, and kept
        finally:
            context.close()


def test_a_reload_while_a_turn_plays_rejoins_it(slow_site: Server, browser: Any) -> None:
    with slow_site.client() as api:
        sid = api.post("/api/sessions", json={"title": "reload"}).json()["session"]["id"]
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            page = context.new_page()
            page.goto(f"{slow_site.url}/#token={slow_site.token}&session={sid}")
            page.fill("#composer-input", "Tell me, then I reload.")
            page.press("#composer-input", "Enter")
            expect(page.locator("article.message.streaming .content")).to_contain_text("word3 ")
            page.reload()
            streaming = page.locator("article.message.streaming .content")
            expect(streaming).to_contain_text("word0 word1 word2 word3 ")  # from the start
            expect(page.locator("article.message.user.pending")).to_contain_text(
                "Tell me, then I reload."
            )
            expect(streaming).to_contain_text("word30 ")  # and on as it comes
            screenshot(page, "turn-rejoined")
            reply = page.locator("article.message.assistant:not(.pending)")
            expect(reply).to_have_count(1)
            expect(reply.locator(".content")).to_have_text(
                " ".join(f"word{i}" for i in range(SHORT))
            )
            expect(page.locator("article.message.pending")).to_have_count(0)
            assert "incomplete" not in (reply.locator("footer").text_content() or "")
        finally:
            context.close()


def _head(api: httpx.Client, sid: str) -> dict[str, Any]:
    head = api.get(f"/api/sessions/{sid}").json()["head_id"]
    return api.get(f"/api/sessions/{sid}/nodes/{head}").json()
