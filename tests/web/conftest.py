"""Fixtures of the web page's tests: a real `clotho serve` (SQLite) with the scripted game
master on loopback as its model, a headless Chromium, and a page opened on a session.

Without Playwright or Chromium these tests are skipped with the reason; under
``CI=true`` that is a failure (``.ci/run`` installs Chromium).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from clotho.cli.gamemaster import serve_game_master
from orchestrator.loopback import ModelServer
from tests.api._server import Server, running, running_with_model

from ..conftest import _in_ci
from ._browser import chromium, missing

SCREENSHOTS = Path(__file__).resolve().parents[2] / "bench" / "screenshots"
GUIDE_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}

CAMPAIGN = """\
title = "The Goblin Cave"

[state.variables.hp]
type = "int"
default = 100
min = 0
max = 100

[state.variables.gold]
type = "int"
default = 10
min = 0

[state.variables.inventory]
type = "list"
"""


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    reason = missing()
    if reason:
        if _in_ci():
            pytest.fail(f"{reason} (CI=true: a missing browser is a failure)")
        pytest.skip(reason)
    with chromium() as found:
        yield found


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`clotho serve` on a fresh SQLite database, its model the scripted game master."""
    folder = tmp_path_factory.mktemp("web")
    campaign = folder / "campaign"
    campaign.mkdir()
    (campaign / "campaign.toml").write_text(CAMPAIGN)
    with running_with_model(serve_game_master(), folder) as up:
        up.campaign = campaign  # type: ignore[attr-defined]
        yield up


@pytest.fixture
def api(site: Server) -> Iterator[httpx.Client]:
    with site.client() as client:
        yield client


@pytest.fixture
def new_session(site: Server, api: httpx.Client) -> Callable[[str], str]:
    """``new_session(title)``: a session of the campaign (hp 100, gold 10), its id."""

    def make(title: str) -> str:
        answer = api.post("/api/sessions", json={"title": title, "campaign": str(site.campaign)})  # type: ignore[attr-defined]
        assert answer.status_code == 201, answer.text
        return answer.json()["session"]["id"]

    return make


@pytest.fixture(scope="module")
def game_master() -> Iterator[ModelServer]:
    """The scripted game master on loopback, for a server that has no model of its own
    (:func:`model_free_site`): the page's connection profiles point at it."""
    with serve_game_master() as server:
        yield server


def model_free_site(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Server]:
    """`clotho serve` as a new player starts it: no model, no story (a module's ``site``
    fixture: ``yield from model_free_site(tmp_path_factory, "web-...")``)."""
    folder = tmp_path_factory.mktemp(name)
    with running(f"sqlite:///{folder / 'clotho.db'}", folder / "data") as up:
        yield up


@pytest.fixture
def open_page(site: Server, browser: Any) -> Iterator[Callable[..., Any]]:
    """``open_page(session_id, view="chat", token=<the server's>, *, phone=False,
    viewport=None, locale=None)``: a new browser context on the page (1400x900; ``phone``:
    390x844 with touch, taps as touches; ``locale``: the browser's language);
    JavaScript errors on the page fail the test."""
    contexts: list[Any] = []
    errors: list[str] = []

    def make(
        session_id: str | None = None,
        view: str = "chat",
        token: str | None = "",
        *,
        phone: bool = False,
        viewport: dict[str, int] | None = None,
        locale: str | None = None,
    ) -> Any:
        size = viewport or (PHONE if phone else DESKTOP)
        options: dict[str, Any] = {"viewport": size, "has_touch": phone, "is_mobile": phone}
        if locale:
            options["locale"] = locale
        context = browser.new_context(**options)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.set_default_timeout(20_000)
        token = site.token if token == "" else token
        fragment = [f"view={view}"]
        if token:
            fragment.append(f"token={token}")
        if session_id:
            fragment.append(f"session={session_id}")
        page.goto(f"{site.url}/#{'&'.join(fragment)}")
        return page

    yield make
    for context in contexts:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def screenshot(page: Any, name: str) -> Path:
    """Keep a picture of the page (CI keeps ``bench/screenshots/``)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def guide_screenshot(page: Any, name: str, *, toasts: bool = True) -> Path:
    """A screenshot kept for CI (:func:`screenshot`) and, when ``CLOTHO_GUIDE_IMAGES=1``,
    as the user guide's picture ``docs/images/NAME.png``: the guide's pictures change
    when someone means them to, not at every run of the tests. ``toasts=False``: the
    toasts of the steps before it are taken away first."""
    if not toasts:
        page.evaluate("document.querySelectorAll('.toast').forEach((toast) => toast.remove())")
    path = screenshot(page, name)
    if os.environ.get("CLOTHO_GUIDE_IMAGES") == "1":
        shutil.copyfile(path, GUIDE_IMAGES / f"{name}.png")
    return path
