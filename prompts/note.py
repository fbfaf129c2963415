"""The author's note and the persona in a prompt, placed as SillyTavern places them.

The note (a state built-in: :mod:`mnemosyne.state.note`) is inserted as SillyTavern's
Author's Note extension inserts it (``public/scripts/authors-note.js``,
``setFloatingPrompt``): counting the player's messages of the chat, a note with
interval 1 goes into every prompt, one with interval N when that count is a multiple
of N (not before the N-th), one with interval 0 never. Where it goes: in the history at
its depth with its role (``in_chat``: one message, joined before any lore placed at the
same depth with the same role, as SillyTavern joins its extension prompts, the note's
key sorting first), or as a system message after the story string (the system prompt,
the character, their lore and the persona: ``after_story``) or before it
(``before_story``). Its ``{{char}}`` and ``{{user}}`` are substituted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .build import Injection

__all__ = ["NOTE_PART", "PlacedNote", "place_note", "with_note"]

#: The name of the note's part in :attr:`prompts.Prompt.parts` when it is placed in the
#: head of the prompt.
NOTE_PART = "author_note"
#: The parts of the head that come after the story string.
_AFTER_STORY = ("summary", "state")


@dataclass(frozen=True)
class PlacedNote:
    """Where a turn's author's note goes, and why (for the trace)."""

    text: str
    """The note with its macros substituted."""
    position: str
    depth: int
    role: str
    interval: int
    inserted: bool
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def place_note(
    note: Mapping[str, Any] | None,
    player_messages: int,
    substitute: Callable[[str], str] = lambda text: text,
) -> PlacedNote | None:
    """The note of a turn whose history holds ``player_messages`` messages of the
    player (the one being sent included); ``None`` if there is no note (or its text is
    blank)."""
    if not note or not str(note.get("text", "")).strip():
        return None
    interval = int(note.get("interval", 1))
    if interval <= 0:
        inserted, reason = False, "every 0 messages: never inserted"
    elif interval == 1:
        inserted, reason = True, "inserted in every prompt (every 1 message)"
    elif player_messages <= 0:
        inserted, reason = False, f"every {interval} player messages: none yet"
    elif player_messages % interval == 0:
        inserted = True
        reason = f"every {interval} player messages: this is message {player_messages}"
    else:
        inserted = False
        to_go = interval - player_messages % interval
        reason = f"every {interval} player messages: message {player_messages}, the next in {to_go}"
    position = str(note.get("position", "in_chat"))
    depth = int(note.get("depth", 4))
    if inserted:
        where = {
            "in_chat": f"in the history at depth {depth}",
            "after_story": "after the story string",
            "before_story": "before the story string",
        }.get(position, position)
        reason += f"; placed {where}"
    return PlacedNote(
        text=substitute(str(note["text"])),
        position=position,
        depth=depth,
        role=str(note.get("role", "system")),
        interval=interval,
        inserted=inserted,
        reason=reason,
    )


def with_note(
    placed: PlacedNote | None,
    parts: Sequence[tuple[str, str]],
    injections: Sequence[Injection],
) -> tuple[list[tuple[str, str]], list[Injection]]:
    """The head's parts and the history's injections with the note placed in them (as
    they were if it is not inserted this turn)."""
    parts, injections = list(parts), list(injections)
    if placed is None or not placed.inserted:
        return parts, injections
    if placed.position == "before_story":
        return [(NOTE_PART, placed.text), *parts], injections
    if placed.position == "after_story":
        at = next(
            (index for index, (name, _) in enumerate(parts) if name in _AFTER_STORY), len(parts)
        )
        return [*parts[:at], (NOTE_PART, placed.text), *parts[at:]], injections
    for index, injection in enumerate(injections):
        if injection.depth == placed.depth and injection.role == placed.role:
            joined = f"{placed.text}\n{injection.content}"
            injections[index] = Injection(injection.depth, injection.role, joined)
            return parts, injections
    return parts, [Injection(placed.depth, placed.role, placed.text), *injections]
