"""The session's names: who the player is and who the character is.

One rule, used by the prompt (``{{user}}``, ``{{char}}``), by the replies a turn stores
(each node carries its speaker's name, as a SillyTavern message does) and by
``export chat`` for messages that carry none:

- the player: the campaign's ``player``, else the name of the persona the player set
  for the session (``metadata["settings"]["persona"]``: :mod:`clotho.sessionconfig`),
  else the name the session was given (``metadata["names"]["player"]``: an imported
  chat's player, a persona), else :data:`DEFAULT_PLAYER`;
- the character: the session's card, else the campaign's ``[character] name`` when it
  names one, else the name the session was given (an imported chat's character), else
  :data:`DEFAULT_CHARACTER`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clotho.sessionconfig import METADATA_KEY
from orchestrator import Character, TurnSetup

if TYPE_CHECKING:
    from .campaign import Campaign

__all__ = [
    "DEFAULT_CHARACTER",
    "DEFAULT_PLAYER",
    "NAMES",
    "NARRATOR",
    "SessionNames",
    "narration",
    "speakers",
]

NAMES = "names"
"""The session metadata's key for the names a session was given (``{"player", "character"}``)."""
NARRATOR = "narrator"
"""A SillyTavern narrator's message's ``extra.type``."""
DEFAULT_PLAYER = TurnSetup.player
"""The player's name when nothing names the player."""
DEFAULT_CHARACTER = Character.name
"""The character's name when nothing names the character."""


@dataclass(frozen=True)
class SessionNames:
    """Who speaks in a session: the player and the character."""

    player: str = DEFAULT_PLAYER
    character: str = DEFAULT_CHARACTER

    @classmethod
    def resolve(
        cls,
        campaign: Campaign | None = None,
        card_name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionNames:
        """The names by the module's rule, from what the session has."""
        given = (metadata or {}).get(NAMES)
        given = given if isinstance(given, Mapping) else {}
        settings = (metadata or {}).get(METADATA_KEY)
        persona = settings.get("persona") if isinstance(settings, Mapping) else None
        persona_name = _text(persona.get("name")) if isinstance(persona, Mapping) else None
        player = (
            (campaign.player if campaign else None) or persona_name or _text(given.get("player"))
        )
        campaign_character = campaign.character.name if campaign else None
        if campaign_character == DEFAULT_CHARACTER:
            campaign_character = None
        character = card_name or campaign_character or _text(given.get("character"))
        return cls(player or DEFAULT_PLAYER, character or DEFAULT_CHARACTER)

    def of(self, role: str) -> str:
        """The name of who speaks a node of ``role`` (the player for ``user``)."""
        return self.player if role == "user" else self.character


def speakers(messages: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The names a SillyTavern chat gives (``{"player", "character"}``, those it has):
    the last named player, the first named character; a hidden (system) message and a
    narrator's (``extra.type`` ``narrator``) name no one."""
    found: dict[str, str] = {}
    for message in messages:
        name = _text(message.get("name"))
        if name is None or message.get("is_system") or narration(message):
            continue
        if message.get("is_user"):
            found["player"] = name
        else:
            found.setdefault("character", name)
    return found


def narration(message: Mapping[str, Any]) -> bool:
    """Whether a SillyTavern message is a narrator's (``/sys``: ``extra.type``
    ``narrator``), which SillyTavern sends as a system message and names no one of the
    story by."""
    extra = message.get("extra")
    narrated = isinstance(extra, Mapping) and extra.get("type") == NARRATOR
    return narrated and not message.get("is_user")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
