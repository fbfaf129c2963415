"""Replay (A/B) for the command line and the API: what a player asks for
(:class:`ReplayAsk`, checked at the edge), made into the engine's
:class:`orchestrator.replay.ReplayChanges`, and each new alternative as both answer it
(:func:`replay_document`). The replaying itself is :mod:`orchestrator.replay`'s.

A replaced template is the command line's alone (``clotho replay --template FILE``: a
local file, trusted as a campaign's own templates are); the API takes none (Jinja sent
to a server could make it render without end).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from clotho.errors import UsageError

if TYPE_CHECKING:
    from mnemosyne import Store
    from orchestrator import Engine, TurnResult
    from orchestrator.replay import ReplayChanges, TemplateChange

    from .settings import Settings

__all__ = ["MAX_TEMPLATE_CHARS", "ReplayAsk", "changes_for", "replay_document"]

#: The longest template source a replay takes.
MAX_TEMPLATE_CHARS = 50_000
#: The most lore entries a replay switches on or off (each way).
MAX_LORE_SWITCHES = 50

LoreId = Annotated[str, StringConstraints(min_length=3, max_length=300, pattern=r"^.+:\d+$")]


class ReplayAsk(BaseModel):
    """What a replay changes against the node it replays (at least one thing)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: (
        Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^\S+$")] | None
    ) = Field(
        None,
        description="Another litellm model string, asked on the session's connection "
        "(its server and key; `api_base` names another server).",
    )
    api_base: str | None = Field(
        None, max_length=2000, description="The server `model` is asked on (with `model`)."
    )
    profile: Annotated[str, StringConstraints(min_length=1, max_length=100)] | None = Field(
        None, description="A connection profile: its model, server, key and sampler settings."
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Sampler settings set over the model's (temperature, top_p, "
        "max_tokens, seed...), checked as a profile's are.",
    )
    lore_off: list[LoreId] = Field(
        default_factory=list,
        max_length=MAX_LORE_SWITCHES,
        description="Lore entries (`book:uid`) left out even if they fire.",
    )
    lore_on: list[LoreId] = Field(
        default_factory=list,
        max_length=MAX_LORE_SWITCHES,
        description="Lore entries (`book:uid`) put in even if they do not fire.",
    )
    note: str | None = Field(
        None,
        max_length=20_000,
        description="Another author's note text (empty: none); the prompt is built again.",
    )

    @field_validator("params")
    @classmethod
    def _sampler(cls, value: dict[str, Any]) -> dict[str, Any]:
        from clotho.profiles import Sampler

        return Sampler.model_validate(value).params()

    @field_validator("note")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        if value is not None and "\x00" in value:
            raise ValueError("must not contain NUL characters (\\x00)")
        return value

    @field_validator("api_base")
    @classmethod
    def _base(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// address")
        return value


def changes_for(
    settings: Settings,
    engine: Engine,
    ask: ReplayAsk,
    templates: Mapping[str, TemplateChange] | None = None,
) -> ReplayChanges:
    """The engine's changes for ``ask``: a model on the session's connection (or on
    ``api_base``), or a profile's model with its key (its sampler settings under the
    ``params`` asked); ``templates``: the templates replaced, by name (the command
    line's ``--template`` files).

    Raises:
        UsageError: a model and a profile both, or ``api_base`` with no model.
        UnknownProfileError, ProfilesFileError: the profile cannot be read.
    """
    from orchestrator.replay import ReplayChanges

    if ask.model and ask.profile:
        raise UsageError("a replay takes another model or a profile, not both")
    if ask.api_base and not ask.model:
        raise UsageError("api_base names the server of another model: give the model too")
    config = None
    if ask.profile:
        from clotho.profiles import chosen_profile

        # the profile named, with its kept key (else the environment's), as a session's is
        chosen = chosen_profile(
            settings.config_dir,
            ask.profile,
            explicit_model=False,
            campaign_model=False,
            environment_key=settings.api_key,
        )
        assert chosen is not None  # a profile named is one, or UnknownProfileError
        config = chosen.config()
    elif ask.model:
        config = replace(engine.setup.model, model=ask.model)
        if ask.api_base:
            config = replace(config, api_base=ask.api_base)
    return ReplayChanges(
        model=config,
        profile=ask.profile,
        params=dict(ask.params),
        templates=dict(templates or {}),
        lore_off=frozenset(ask.lore_off),
        lore_on=frozenset(ask.lore_on),
        note=ask.note,
    )


def replay_document(store: Store, session_id: str, result: TurnResult) -> dict[str, Any]:
    """One new alternative as the CLI's ``--json`` and the API give it: the node (its
    metadata's ``replay`` says what changed), the state after it, how the call went."""
    assert result.node is not None
    state = store.state(session_id, result.node.id)
    return {
        "node": result.node.as_dict(),
        "replay": result.node.metadata.get("replay"),
        "state": state.as_dict(),
        "incomplete": result.completion.incomplete,
        "warnings": result.warnings,
        "usage": result.completion.usage or {},
    }
