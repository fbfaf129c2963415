"""What the player sets for one session: the connection profile its turns use, the
player's persona, the system prompt, how its cast plays. Kept in the session's metadata
under ``settings``
(not in the world state: changing them does not rewrite the story), read back through
:func:`session_settings` and changed through :func:`updated_metadata`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from clotho.errors import ClothoError

__all__ = [
    "METADATA_KEY",
    "CastSettings",
    "Persona",
    "SessionSettings",
    "SessionSettingsError",
    "SpeakerOrder",
    "session_settings",
    "updated_metadata",
]

#: Where a session's settings live in its metadata.
METADATA_KEY = "settings"

ProfileName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]


class SessionSettingsError(ClothoError, ValueError):
    """A session's stored settings cannot be read (written by something else)."""

    code = "bad_session_settings"


class Persona(BaseModel):
    """Who the player is in this story: a name ({{user}}) and a description."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
    description: Annotated[str, Field(max_length=20_000)] = ""


#: Who answers the player when no one is named: SillyTavern's natural order (names
#: mentioned, then talkativeness, then at random), each in turn, one narrator voicing
#: everyone, or the first character unless the player picks.
SpeakerOrder = Literal["natural", "round_robin", "narrator", "manual"]
MemberName = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class CastSettings(BaseModel):
    """How a session's cast plays (:mod:`clotho.cast`)."""

    model_config = ConfigDict(extra="forbid")

    order: SpeakerOrder = Field(
        default="natural", description="Who answers the player when no speaker is named."
    )
    muted: Annotated[list[MemberName], Field(max_length=200)] = Field(
        default_factory=list, description="Members who never speak."
    )
    talkativeness: Annotated[
        dict[MemberName, Annotated[float, Field(ge=0, le=1)]], Field(max_length=200)
    ] = Field(
        default_factory=dict,
        description="A member's talkativeness in place of its card's (0 to 1).",
    )
    recap_missed: bool = Field(
        default=False,
        description="A member back from away is told what it missed: each gap in its "
        "prompt carries a recap (a call to the summary model, once per gap and member).",
    )


class SessionSettings(BaseModel):
    """A session's player-set configuration; every field optional (``None``: the
    default: the campaign's, the server's)."""

    model_config = ConfigDict(extra="forbid")

    profile: ProfileName | None = Field(
        default=None, description="The connection profile its turns use."
    )
    persona: Persona | None = Field(default=None, description="The player's persona.")
    system_prompt: Annotated[str | None, Field(max_length=100_000)] = Field(
        default=None, description="Replaces the default system prompt."
    )
    cast: CastSettings | None = Field(default=None, description="How the cast plays.")

    @property
    def cast_settings(self) -> CastSettings:
        """:attr:`cast`, or the defaults."""
        return self.cast or CastSettings()


def session_settings(metadata: Mapping[str, Any]) -> SessionSettings:
    """A session's settings, from its metadata (the defaults when it has none).

    Raises:
        SessionSettingsError: what is stored is not a valid settings object.
    """
    stored = metadata.get(METADATA_KEY)
    if stored is None:
        return SessionSettings()
    try:
        return SessionSettings.model_validate(stored)
    except ValidationError as error:
        raise SessionSettingsError(f"the session's stored settings: {error}") from error


def updated_metadata(metadata: Mapping[str, Any], changes: SessionSettings) -> dict[str, Any]:
    """The metadata with the fields ``changes`` was given (``model_fields_set``) replaced;
    the others as they were."""
    current = session_settings(metadata)
    merged = current.model_copy(
        update={name: getattr(changes, name) for name in changes.model_fields_set}
    )
    kept = merged.model_dump(exclude_none=True)
    result = {key: value for key, value in metadata.items() if key != METADATA_KEY}
    if kept:
        result[METADATA_KEY] = kept
    return result
