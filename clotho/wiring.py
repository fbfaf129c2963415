"""Putting the parts together: a session's campaign and the settings make a TurnSetup."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clotho.errors import ClothoError
from clotho.formats.campaign import Campaign, ModelTable
from clotho.settings import Settings

if TYPE_CHECKING:
    from clotho.cast import Cast
    from clotho.formats.names import SessionNames
    from clotho.profiles import ChosenProfile
    from clotho.sessionconfig import SessionSettings
    from mnemosyne import Store
    from orchestrator import Engine, TurnSetup
    from planner.cards import Card

__all__ = [
    "NoModelError",
    "preview_lore",
    "session_engine",
    "turn_setup",
]


class NoModelError(ClothoError, LookupError):
    """No model is configured for a command that generates."""

    code = "no_model"


def session_engine(
    settings: Settings,
    store: Store,
    session_id: str,
    *,
    require_model: bool = True,
    close_clients: bool = True,
) -> Engine:
    """The engine that plays a session's turns: its campaign, its card, its lore (made
    by :func:`orchestrator.build_engine`, the planner given its model call when the
    campaign plans by model).

    ``require_model=False`` is for what needs no model call (previewing lore): with no
    model configured, the window is the default one and tokens are counted with
    litellm's default tokenizer. ``close_clients``: whether the engine's ``aclose``
    closes the model clients of the event loop (a server, which keeps many engines,
    closes them once at shutdown instead).

    Blocking (it reads the store, and may embed the lore): run it in a thread from a
    running event loop.

    Raises:
        NoModelError: no model is configured (and one is required).
        CampaignError, PlannerError: the campaign or the session's lore is broken.
    """
    from clotho.cast import session_cast
    from clotho.lore import session_planner
    from clotho.sessionconfig import session_settings
    from clotho.sessions import session_campaign, session_names
    from orchestrator import build_engine

    campaign = session_campaign(store, session_id)
    cast = session_cast(store, session_id)
    card = cast.members[0].card if cast.members else None
    setup = turn_setup(
        settings,
        campaign,
        card,
        require_model=require_model,
        names=session_names(store, session_id, campaign, card),
        session_settings=session_settings(store.session(session_id).metadata),
        cast=cast,
    )
    return build_engine(
        store,
        setup,
        planner=lambda call: session_planner(store, session_id, settings, campaign, call),
        close_clients=close_clients,
    )


def turn_setup(
    settings: Settings,
    campaign: Campaign | None,
    card: Card | None = None,
    *,
    require_model: bool = True,
    names: SessionNames | None = None,
    session_settings: SessionSettings | None = None,
    cast: Cast | None = None,
) -> TurnSetup:
    """How turns are played: the command line and environment first, then the campaign
    (a session's character card, if it has one, is its character). ``names``: the
    session's (:func:`clotho.sessions.session_names`); without them, what the campaign and card say.
    ``session_settings``: what the player set for the session (its connection profile,
    the persona whose description goes into the prompt, its own system prompt).
    ``cast``: the session's (:func:`clotho.cast.session_cast`): every member, the first
    one the character (``card`` is its card), and the speaker order.

    The model: ``CLOTHO_MODEL`` / ``--model``, else the session's connection profile,
    else the campaign's ``[model]``, else the profile marked default
    (:func:`clotho.profiles.chosen_profile`).

    Raises:
        NoModelError: none names a model.
        UnknownProfileError: the session's profile is gone.
        ProfilesFileError: the profiles' files cannot be read.
    """
    from clotho.formats.names import SessionNames
    from orchestrator import Character, TurnSetup
    from prompts import Templates

    table = campaign.model if campaign else ModelTable()
    chosen = _profile(settings, table, session_settings, required=require_model)
    if chosen is not None:
        # the campaign's other models are named on its own provider, not the profile's
        table = ModelTable(extract=table.extract)
        config = chosen.config()
    else:
        model = settings.model or table.model or (None if require_model else "none")
        if not model:
            raise NoModelError(
                "no model to play with: pick a connection profile (the page's Connections, "
                "or mark one default), set CLOTHO_MODEL to a litellm model string "
                "(CLOTHO_MODEL=openai/gpt-4o-mini, its key in OPENAI_API_KEY; ollama/llama3 "
                "for a local Ollama), or pass --model, or set `model` in campaign.toml's "
                "[model]; `clotho demo` plays with a scripted one"
            )
        config = table.config(
            model, api_base=settings.api_base or table.api_base, api_key=settings.api_key
        )
    extraction = settings.extraction_model or table.extraction_model
    names = names or SessionNames.resolve(campaign, card.name if card else None)
    if card is not None:
        from clotho.lore import card_character

        character = card_character(card)
    elif campaign is not None:
        character = Character(**{**campaign.character.model_dump(), "name": names.character})
    else:
        character = Character(name=names.character)
    persona = session_settings.persona if session_settings else None
    members = tuple(member.character() for member in cast.members) if cast else ()
    if members:
        character = members[0]
    return TurnSetup(
        model=config,
        extraction_model=config.with_model(extraction) if extraction else None,
        summary_model=config.with_model(table.summary_model) if table.summary_model else None,
        planner_model=config.with_model(table.planner_model) if table.planner_model else None,
        plan_by_model=bool(campaign and campaign.lore.planner == "model"),
        templates=Templates(campaign.templates if campaign else None),
        character=character,
        cast=members,
        speaker_order=cast.settings.order if cast else "natural",
        recap_missed=cast.settings.recap_missed if cast else False,
        player=names.player,
        persona=persona.description if persona else "",
        system_prompt=session_settings.system_prompt if session_settings else None,
        title=campaign.title if campaign else None,
        extract=table.extract,
    )


def _profile(
    settings: Settings,
    table: ModelTable,
    session_settings: SessionSettings | None,
    *,
    required: bool,
) -> ChosenProfile | None:
    """The connection profile the turns use (:func:`clotho.profiles.chosen_profile`);
    where no model is required (a lore preview), one that cannot be read is left out."""
    from clotho.profiles import ProfilesError, chosen_profile

    try:
        return chosen_profile(
            settings.config_dir,
            session_settings.profile if session_settings else None,
            explicit_model=bool(settings.model),
            campaign_model=bool(table.model),
            environment_key=settings.api_key,
        )
    except ProfilesError:
        if required:
            raise
        return None


async def preview_lore(
    settings: Settings,
    store: Store,
    session_id: str,
    text: str,
    *,
    engine: Engine | None = None,
    close_clients: bool = False,
) -> dict[str, Any]:
    """Which entries would fire if ``text`` were the next message at HEAD, and why:
    ``{"fired": [{"book", "uid", "comment", "reason", "via", "similarity"}], "skipped":
    [...], "reasoning", "tokenizer", "budget", "tokens"}`` (``similarity`` for an entry
    found by meaning; ``tokenizer``: what counted the lore's tokens; ``budget``: the
    lore's budget in tokens; ``tokens``: what the entries that fired spent of it)
    (nothing is generated or stored).

    ``engine``: the session's engine, if the caller keeps one (a server does); else one
    is built for the preview in a worker thread (reading the lore and its index,
    importing the tokenizer's litellm: seconds, while the event loop keeps serving) and
    closed after, with the model clients of the event loop if ``close_clients`` (a
    command's edge; a server closes them at shutdown)."""
    import asyncio

    def build() -> Engine:
        from orchestrator import Gateway

        made = session_engine(
            settings, store, session_id, require_model=False, close_clients=close_clients
        )
        Gateway.counter(made.setup.model)  # litellm's import (seconds), off the loop
        return made

    own = engine is None
    used = await asyncio.to_thread(build) if engine is None else engine
    try:
        plan, retrieval = await used.preview_lore(session_id, text)
    finally:
        if own:
            await used.aclose()
    fired = [
        {
            "book": hit.book,
            "uid": hit.uid,
            "comment": hit.comment,
            "reason": hit.reason,
            "via": hit.via,
            **({"similarity": round(hit.similarity, 4)} if hit.similarity is not None else {}),
        }
        for hit in retrieval.hits
    ]
    skipped = []
    for item in retrieval.skipped:
        book, _, uid = item["id"].rpartition(":")
        skipped.append(
            {"book": book, "uid": int(uid) if uid.isdigit() else uid, "reason": item["reason"]}
        )
    return {
        "fired": fired,
        "skipped": skipped,
        "reasoning": plan.reasoning,
        "tokenizer": retrieval.details.get("tokenizer"),
        "budget": retrieval.details.get("budget"),
        "tokens": retrieval.details.get("tokens"),
    }
