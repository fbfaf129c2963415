"""The API on a model's key: none set is a 503 problem (`model_error`, kind `no_key`)
naming the variable to set, nothing sent and nothing stored; a key refused is a 502 of
kind `auth`, asked once (tests/api/test_turns_api.py has the refused key's event)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from clotho.api import create_app
from mnemosyne import Store
from orchestrator.loopback import ModelServer, Reply

from .conftest import TOKEN, api_settings
from .test_turns_api import events, play, session


def test_no_key_is_a_503_naming_the_variable(
    make_client: Callable[..., TestClient],
    serve: Callable[..., ModelServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    server = serve(["never sent"])
    monkeypatch.setenv("GROQ_API_BASE", server.url)  # where litellm would send it
    client = make_client(model="groq/gm")
    sid = session(client)
    seen = events(play(client, sid, {"kind": "say", "text": "Hello?"}))
    kind, problem, _ = seen[-1]
    assert kind == "error"
    assert (problem["status"], problem["code"], problem["kind"]) == (503, "model_error", "no_key")
    assert problem["title"] == "Service Unavailable"
    assert problem["detail"] == (
        "no API key for groq/gm: set GROQ_API_KEY (read by litellm for groq) or "
        "CLOTHO_API_KEY; nothing was sent"
    )
    assert server.requests == []
    assert client.get(f"/api/sessions/{sid}/tree").json()["nodes"] == []


def test_a_refused_key_is_asked_once(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    refused = Reply(status=401, error="Incorrect API key provided")
    server = serve([refused, refused, refused])
    client = make_client(server, api_key="sk-wrong")
    sid = session(client)
    kind, problem, _ = events(play(client, sid, {"kind": "say", "text": "Hello?"}))[-1]
    assert kind == "error"
    assert (problem["status"], problem["kind"]) == (502, "auth")
    assert problem["detail"] == (
        f"the provider at {server.url} refused the API key in CLOTHO_API_KEY for openai/gm "
        "(HTTP 401): check the key (Incorrect API key provided)"
    )
    assert len(server.requests) == 1


def test_a_server_without_the_key_says_so_as_it_starts(
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    caplog.set_level(logging.WARNING, logger="clotho")
    app = create_app(api_settings(tmp_path, model="groq/gm"), store=store, token=TOKEN, warm=True)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        deadline = time.monotonic() + 60
        while client.get("/api/health").json()["warm"] == "warming":
            assert time.monotonic() < deadline
            time.sleep(0.05)
    said = [r.getMessage() for r in caplog.records if r.name == "clotho.api.warm"]
    assert said == [
        "no API key for groq/gm: set GROQ_API_KEY (read by litellm for groq) or "
        "CLOTHO_API_KEY; nothing was sent: every turn will fail until the server is started "
        "with one"
    ]
