"""The documents of the cast's routes (:mod:`clotho.api.cast`): a member, the cast, what
changes them, a change of scene, who would speak."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from clotho.sessionconfig import SpeakerOrder

from .schemas import NodeOut, Text

__all__ = [
    "CastOut",
    "CastPatch",
    "MemberOut",
    "MemberPatch",
    "SceneChangeOut",
    "SpeakersBody",
    "SpeakersOut",
    "WrittenMember",
]

#: A member's name: as a card's (at most 200 characters), surrounding spaces dropped.
MemberName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
CardText = Annotated[str, Field(max_length=100_000)]
Talkativeness = Annotated[float, Field(ge=0, le=1)]


class MemberOut(BaseModel):
    """One character of the cast."""

    name: str = Field(description="Its name (its card's), which names it in paths and turns.")
    description: str = Field(description="Its card's description.")
    talkativeness: float = Field(
        ge=0,
        le=1,
        description="How readily it speaks unnamed in the natural order: the session's "
        "setting, else its card's, else 0.5.",
    )
    muted: bool = Field(description="It never speaks (it may still be present and witness).")
    present: bool = Field(description="It is in the scene at HEAD.")
    avatar: bool = Field(description="It has a picture (`GET .../cast/{name}/avatar`).")
    books: list[str] = Field(description="Its own lorebooks (its card's book), by name.")
    source: Literal["card", "written"] = Field(
        description="`card`: it came as a character card; `written`: written in place."
    )
    first: bool = Field(
        description="It is the session's character: the first member, who speaks when no "
        "one else is named."
    )


class CastOut(BaseModel):
    """A session's cast at HEAD."""

    order: SpeakerOrder = Field(
        description="Who answers the player when no speaker is named: `natural` (those "
        "named in the message, then by talkativeness), `round_robin`, `narrator` (one voice "
        "for everyone), `manual` (the first member present)."
    )
    recap_missed: bool = Field(
        description="A member back from away is told what it missed (a recap in each gap "
        "of its prompt)."
    )
    present: list[str] | None = Field(
        description="The world state's `present` at HEAD: the names in the scene in the "
        "order they came, or null: everyone (no one has come or gone)."
    )
    members: list[MemberOut] = Field(description="In the order they were added.")


class WrittenMember(BaseModel):
    """A character written in place (kept as a small Character Card V2)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"name": "Bram", "description": "A ferryman who talks too much."}]
        },
    )

    name: MemberName
    description: CardText = ""
    personality: CardText = ""
    scenario: CardText = ""


class MemberPatch(BaseModel):
    """How a member plays (kept in the session's settings, `settings.cast`); a field
    left out stays as it is."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"muted": True}, {"talkativeness": 0.8}]},
    )

    muted: bool | None = Field(default=None, description="It never speaks while muted.")
    talkativeness: Talkativeness | None = Field(
        default=None, description="0 to 1, in place of its card's."
    )


class CastPatch(BaseModel):
    """How the cast plays (fields left out stay as they are)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"order": "natural"}, {"recap_missed": True}]},
    )

    order: SpeakerOrder | None = Field(
        default=None, description="Who answers the player when no speaker is named."
    )
    recap_missed: bool | None = Field(
        default=None,
        description="A member back from away is told what it missed (a recap in each gap "
        "of its prompt, a call to the summary model once per gap and member).",
    )


class SceneChangeOut(BaseModel):
    """A member left or joined the scene: the narration node saying so (HEAD now) and
    the cast after it."""

    node: NodeOut
    cast: CastOut


class SpeakersBody(BaseModel):
    """Who would answer what: a body, not a query, as a message may be longer than a URL
    a server takes."""

    model_config = ConfigDict(extra="forbid")

    text: Text | None = Field(
        default=None,
        description="The player's message to be answered, as long as a turn's (absent or "
        "null: who speaks next with no message, as a `reply` turn).",
    )


class SpeakersOut(BaseModel):
    speakers: list[str] = Field(
        description="Who would answer, in order: play the first as the `say` (its "
        "`speaker`), each next as a `reply`. The natural order rolls dice: two reads may "
        "differ."
    )
