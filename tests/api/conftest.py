"""Fixtures of the API tests: the app over a store of each backend, a client with the
token, and a model server on loopback for turns."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from clotho.api import create_app
from clotho.settings import Settings
from mnemosyne import Store
from orchestrator.loopback import ModelServer

TOKEN = "test-token-3f2a9c"


def api_settings(tmp_path: Path, **given: Any) -> Settings:
    """Settings of a test server: its own data folder, no lore vectors, fast retries, and
    the Host that test clients send (Starlette's and schemathesis's: ``testserver``)."""
    given.setdefault("allowed_hosts", ["testserver"])
    given.setdefault("config_dir", tmp_path / "config")  # profiles: never the user's own
    return Settings(data_dir=tmp_path / "data", vectors=False, api_token=TOKEN, **given)


@pytest.fixture
def make_client(store: Store, tmp_path: Path) -> Iterator[Callable[..., TestClient]]:
    """``make_client(model_server=None, **settings)``: a client of the app over the test's
    store, sending the token (``auth=False``: without it)."""
    clients: list[TestClient] = []

    def make(server: ModelServer | None = None, *, auth: bool = True, **given: Any) -> TestClient:
        if server is not None:
            given.setdefault("model", "openai/gm")
            given.setdefault("api_base", server.url)
            given.setdefault("api_key", "x")
        app = create_app(api_settings(tmp_path, **given), store=store, token=TOKEN)
        headers = {"Authorization": f"Bearer {TOKEN}"} if auth else {}
        client = TestClient(app, headers=headers, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


async def _stream_ends(*_args: Any) -> bool:
    """In place of clotho.api.events._wait: the stream of events ends after its first
    events (a test client sends no http.disconnect before a response completes, so a
    stream that waits for changes would never end, or only at its recheck)."""
    return True


@pytest.fixture
def events_end_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's stream of events (GET .../events) sends what it has and ends, for
    tests that read every route through a client that cannot leave a stream."""
    monkeypatch.setattr("clotho.api.events._wait", _stream_ends)
