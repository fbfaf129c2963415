"""A small scripted game master, served over the OpenAI protocol for ``clotho demo``.

It answers what a model would: story replies (streamed) to the player's messages, and
state deltas (JSON) to the extraction calls, so the demo runs the very code path a real
model runs. It knows one cave, one goblin and one merchant; a reroll of the same
message gets the next of its alternatives.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from orchestrator.loopback import ModelServer, Reply

__all__ = ["DEMO_MODEL", "GameMaster", "serve_game_master"]

DEMO_MODEL = "openai/clotho-gm"

_STORIES: list[tuple[tuple[str, ...], list[str]]] = [
    (
        ("sword", "attack", "fight"),
        [
            "A goblin leaps from the shadows and its rusty blade slashes your arm. "
            "Blood runs warm down your wrist as it cackles and backs into the dark.",
            "A goblin leaps from the shadows, but you parry its rusty blade with a clang. "
            "It squeals and flees deeper into the cave, leaving you unhurt.",
        ],
    ),
    (
        ("buy", "potion", "merchant"),
        [
            "A hunched merchant by the cave mouth takes your five gold, bites a coin, and "
            "hands you a small red healing potion.",
        ],
    ),
    (
        ("sneak", "quiet"),
        [
            "You slip along the wall in silence. The goblin snores on, curled around a "
            "chest; beyond it the tunnel glitters with old coins.",
        ],
    ),
    (
        ("drink", "heal"),
        ["The potion tastes of iron and cherries. Warmth closes the cut on your arm."],
    ),
]

_DELTAS: list[tuple[str, list[dict[str, Any]]]] = [
    ("slashes your arm", [{"op": "inc", "path": "hp", "value": -10}]),
    (
        "takes your five gold",
        [
            {"op": "inc", "path": "gold", "value": -5},
            {"op": "append", "path": "inventory", "value": "healing potion"},
        ],
    ),
    (
        "closes the cut",
        [
            {"op": "inc", "path": "hp", "value": 10},
            {"op": "remove", "path": "inventory", "value": "healing potion"},
        ],
    ),
]


class GameMaster:
    """The script: a function of the request, as :class:`ModelServer` wants."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        messages = request.get("messages", [])
        if "response_format" in request:
            return self._delta(messages[-1]["content"] if messages else "")
        if messages and messages[0]["content"].startswith("Summarise"):
            return "The hero entered the goblin cave and met its dwellers."
        last = messages[-1] if messages else {"role": "user", "content": ""}
        if last["role"] == "system" and "next message" in last["content"]:
            return "I drink the healing potion."
        if last["role"] != "user":
            return "Water drips somewhere in the dark. The cave waits for you to act."
        return self._story(last["content"])

    def _story(self, text: str) -> Reply:
        lowered = text.lower()
        for words, replies in _STORIES:
            if any(word in lowered for word in words):
                with self._lock:
                    seen = self._seen.get(text, 0)
                    self._seen[text] = seen + 1
                return Reply(
                    replies[seen % len(replies)],
                    reasoning="The player acts; the cave answers." if seen == 0 else None,
                )
        return Reply("The torchlight flickers. Nothing answers but the wind.")

    def _delta(self, told: str) -> str:
        reply = told.split("The game master:", 1)[-1]
        for marker, operations in _DELTAS:
            if marker in reply:
                return json.dumps({"operations": operations})
        return json.dumps({"operations": []})


def serve_game_master() -> ModelServer:
    """The game master on a free loopback port (a context manager; ``.url``)."""
    return ModelServer(GameMaster(), model=DEMO_MODEL.split("/", 1)[1])
