"""A small scripted game master, served over the OpenAI protocol for ``clotho demo``.

It answers what a model would: story replies (streamed) to the player's messages, and
state deltas (JSON) to the extraction calls, so the demo runs the very code path a real
model runs. It knows one cave, one goblin and one merchant; a reroll of the same
message gets the next of its alternatives. It reads its prompt as a model would: lore
that reached it (the demo's lorebook, ``demo_lore.json``) shows in the reply: told that
the goblins ambush the armed, its goblin cuts deep (the demo's hp falls below 50).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from orchestrator.loopback import ModelServer, Reply

__all__ = ["DEMO_MODEL", "GameMaster", "serve_game_master"]

DEMO_MODEL = "openai/clotho-gm"

_SLASH = (
    "A goblin leaps from the shadows and its rusty blade slashes your arm. "
    "Blood runs warm down your wrist as it cackles and backs into the dark."
)
#: The same fight when the game master knows the goblins ambush the armed (lore).
_DEEP_CUT = (
    "A goblin leaps from the shadows, an ambush: its rusty blade bites deep into your "
    "side. Blood runs warm down your hip as it cackles and backs into the dark."
)

_STORIES: list[tuple[tuple[str, ...], list[str]]] = [
    (
        ("sword", "attack", "fight"),
        [
            _SLASH,
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
    ("bites deep", [{"op": "inc", "path": "hp", "value": -55}]),
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


#: What lore in the prompt changes: (a phrase of an entry, the reply, what it becomes).
_LORE_TWISTS: list[tuple[str, str, str]] = [("ambush", _SLASH, _DEEP_CUT)]
#: What lore in the prompt adds to a reply: (a phrase of an entry, the aside).
_LORE_ASIDES: list[tuple[str, str]] = [
    ("Grell", '"Grell\'s the name," he mutters.'),
    ("badly wounded", "Each breath stabs at the wound in your side."),
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
        prompt = "\n".join(str(m.get("content", "")) for m in messages if m["role"] == "system")
        return self._story(last["content"], prompt)

    def _story(self, text: str, prompt: str) -> Reply:
        lowered = text.lower()
        for words, replies in _STORIES:
            if any(word in lowered for word in words):
                with self._lock:
                    seen = self._seen.get(text, 0)
                    self._seen[text] = seen + 1
                story = replies[seen % len(replies)]
                for marker, plain, twisted in _LORE_TWISTS:
                    if story == plain and marker in prompt:
                        story = twisted
                story += "".join(f" {aside}" for marker, aside in _LORE_ASIDES if marker in prompt)
                return Reply(
                    story, reasoning="The player acts; the cave answers." if seen == 0 else None
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
