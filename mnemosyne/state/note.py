"""The author's note: a built-in of every world state, so it rolls back with the story.

SillyTavern keeps its Author's Note in the chat's header (``note_prompt``,
``note_depth``, ``note_position``, ``note_interval``, ``note_role``), one for the whole
chat; Clotho keeps it in the state after a node (``author_note``: ``None`` for no
note), set by a node's delta like any state, so checking out an earlier node brings
back the note as it was there. The fields and their defaults are SillyTavern's
(``DEFAULT_DEPTH`` 4, ``DEFAULT_POSITION`` in-chat, ``DEFAULT_INTERVAL`` 1, role
system); the prompt builder (:mod:`prompts.note`) places it as SillyTavern does.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["AuthorNote", "check_note"]


# Where the note goes: inside the history at ``depth`` (SillyTavern's "In-chat @ Depth"),
# or after / before the story string ("After/Before Main Prompt / Story String").
class AuthorNote(BaseModel):
    """An author's note and where it goes."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    text: Annotated[str, Field(max_length=20_000, description="The note ({{char}}, {{user}}).")]
    depth: Annotated[
        int,
        Field(
            ge=0,
            le=1000,
            description="In-chat: how many messages above the end (0: after the last one).",
        ),
    ] = 4
    position: Literal["in_chat", "after_story", "before_story"] = "in_chat"
    interval: Annotated[
        int,
        Field(
            ge=0,
            le=1000,
            description="Inserted every N player messages (1: every turn; 0: never).",
        ),
    ] = 1
    role: Literal["system", "user", "assistant"] = "system"


def check_note(value: Any) -> dict[str, Any]:
    """The stored form of a note given as an object (every field, defaults filled in).

    Raises:
        ValueError: what is wrong with it, field by field.
    """
    if not isinstance(value, dict):
        raise ValueError(f"author_note is an object with 'text', not {value!r}")
    try:
        return AuthorNote.model_validate(value).model_dump()
    except ValidationError as error:
        problems = []
        for item in error.errors():
            where = ".".join(str(part) for part in item["loc"]) or "(top)"
            problems.append(f"author_note.{where}: {item['msg']}")
        raise ValueError("; ".join(problems)) from None
