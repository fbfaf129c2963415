"""What the tests of a cast share: a loopback model that answers each story request with
a numbered line, and the story requests it received."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.loopback import ModelServer, Received


class Voices:
    """The loopback model's answers: each story request a numbered line (``Line 3.``); a
    state extraction changes nothing."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, request: dict[str, Any]) -> str:
        if "response_format" in request:
            return json.dumps({"operations": []})
        self.count += 1
        return f"Line {self.count}."


def chat(server: ModelServer) -> list[Received]:
    """The story requests the model received (state extractions left out)."""
    return [r for r in server.requests if "response_format" not in r.json]
