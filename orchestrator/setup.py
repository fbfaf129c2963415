"""What a turn needs besides the tree: models, templates, the character and the player."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prompts import Templates

from .config import ModelConfig

__all__ = ["Character", "TurnSetup"]


@dataclass(frozen=True)
class Character:
    """The character card's text (SillyTavern's fields), ``{{char}}``/``{{user}}`` kept."""

    name: str = "Narrator"
    description: str = ""
    personality: str = ""
    scenario: str = ""
    examples: str = ""
    """Example dialogue (the card's ``mes_example``)."""
    creator_notes: str = ""
    depth_prompt: str = ""
    """The card's character note (``extensions.depth_prompt.prompt``)."""
    tags: tuple[str, ...] = ()
    talkativeness: float = 0.5
    """How readily the character speaks unnamed in SillyTavern's natural order (0 to 1;
    the card's ``extensions.talkativeness``)."""
    muted: bool = False
    """A muted member of the cast never speaks (it may still be present and witness)."""
    books: tuple[str, ...] = ()
    """The lorebooks that are the character's own (its card's book): they play while the
    character is present."""

    def as_context(self, substitute: Any) -> dict[str, str]:
        return {
            "name": self.name,
            "description": substitute(self.description),
            "personality": substitute(self.personality),
            "scenario": substitute(self.scenario),
            "examples": substitute(self.examples),
        }

    def scan_texts(self) -> dict[str, str]:
        """What World Info entries with a ``match*`` flag may scan besides the chat."""
        return {
            "description": self.description,
            "personality": self.personality,
            "scenario": self.scenario,
            "depth_prompt": self.depth_prompt,
            "creator_notes": self.creator_notes,
        }


@dataclass(frozen=True)
class TurnSetup:
    """How turns are played in a session (from its campaign and the settings)."""

    model: ModelConfig
    extraction_model: ModelConfig | None = None
    """The model that extracts state deltas (default: ``model``); may be cheaper."""
    summary_model: ModelConfig | None = None
    """The model that writes running summaries (default: ``model``)."""
    planner_model: ModelConfig | None = None
    """The model that plans lore lookups (default: ``model``), when ``plan_by_model``."""
    plan_by_model: bool = False
    """Whether a model call proposes what lore to look up (else rules do):
    :func:`orchestrator.build_engine` then gives the planner that call."""
    templates: Templates = field(default_factory=Templates)
    character: Character = field(default_factory=Character)
    """The session's first character: who speaks when no one else is named."""
    cast: tuple[Character, ...] = ()
    """Every character of the session, ``character`` first (empty: ``character`` alone;
    see :attr:`members`)."""
    speaker_order: str = "natural"
    """Who answers the player when no speaker is named: ``natural`` (SillyTavern's
    natural order), ``round_robin``, ``narrator`` (one voice for everyone) or
    ``manual`` (the first member present and not muted, unless the player names one)."""
    player: str = "Player"
    """The player's name (``{{user}}``): the persona's, unless the campaign names one."""
    persona: str = ""
    """The player's persona description (the session's settings), in the story string."""
    system_prompt: str | None = None
    """The session's own system prompt, in place of the ``system`` template."""
    title: str | None = None
    extract: bool = True
    """Whether replies go through state extraction."""
    summary_words: int = 250
    recap_missed: bool = False
    """In a cast of several, what a member missed while away is told in its prompt: the
    ``away`` line of each run left out carries a recap of it (a model call, the
    ``recap`` template, made once per run and speaker and kept by the engine)."""

    @property
    def members(self) -> tuple[Character, ...]:
        """The cast: :attr:`cast`, or :attr:`character` alone."""
        return self.cast or (self.character,)

    @property
    def extractor(self) -> ModelConfig:
        return self.extraction_model or self.model

    @property
    def summarizer(self) -> ModelConfig:
        return self.summary_model or self.model

    @property
    def plan_caller(self) -> ModelConfig:
        return self.planner_model or self.model
