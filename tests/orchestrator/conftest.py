"""Fixtures of the turn tests: scripted model servers on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from orchestrator.loopback import ModelServer


@pytest.fixture
def serve() -> Iterator[Callable[..., ModelServer]]:
    """Starts a scripted OpenAI-compatible server; every one is stopped after the test."""
    servers: list[ModelServer] = []

    def start(script: Any) -> ModelServer:
        server = ModelServer(script).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
