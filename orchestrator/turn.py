"""One turn, as a LangGraph graph: load → plan → retrieve → build → generate →
post-process → commit.

The store is the persistence: the graph runs with no checkpointer, its state lives
for one turn, and the only thing written is the commit, one transaction with the new
node(s), the delta, the keyframe if due, the PromptTrace, HEAD and one entry of the undo
journal (undo sends the turn's nodes to the trash and HEAD back; the edits journaled
before stay undoable). Nothing is stored if the model fails; a reply whose delta
cannot be extracted is stored with an empty delta; a reply cut short (a broken
stream, Ctrl+C) is stored as it stands, marked incomplete, with no delta.

:meth:`Engine.interrupt` (the player's Ctrl+C) stops what the turn is doing and keeps
what the player typed or saw: the reply streaming (kept, incomplete), the extraction
(the reply kept with no delta, ``delta_error`` saying why), or anything before the
reply's first text (the player's message alone is kept, HEAD on it:
:class:`TurnInterrupted`). An empty reply is never stored.

``continue`` extends the reply at HEAD: the new node is an alternative of it holding
its whole text and the continuation (SillyTavern's Continue shows one message; the
old one stays, an alternative, so nothing is lost and undo is exact), its metadata and
trace naming the reply it continues (``continues``). At a player's message it asks for
the reply. ``impersonate`` writes the player's next line and stores nothing: the text
is the result's (:attr:`TurnResult.text`), for the player to edit and send.
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn, TypedDict, TypeVar

from mnemosyne import (
    Message,
    Node,
    Scenes,
    Session,
    StateSchema,
    TurnStore,
    TurnTransaction,
    WorldState,
)
from planner import LoreHit, Plan, PlanContext, Planner, Retrieval, RuleBasedPlanner
from postprocess import CallResult, Extraction, describe_failure, extract_delta, unfinished
from prompts import (
    FRAMING,
    TEMPLATE_NAMES,
    TOKEN_COUNTS,
    Injection,
    Prompt,
    assemble,
    fit,
    macros,
    place_note,
    render_parts,
    with_note,
)

from .casting import (
    UNSEEN,
    Unnamed,
    cast_context,
    choose_speaker,
    last_recaps,
    owned_lore,
    recap_missed,
    scoped,
    speakers_at,
    teller,
    unnamed,
)
from .errors import ModelError, OrchestratorError, TurnError, TurnInterrupted
from .gateway import INTERRUPTED, Completion, Gateway
from .preview import PromptPreview, measure
from .scenes import Scope, witnessed
from .setup import Character, TurnSetup
from .speakers import present_names
from .trace import TraceBuilder

__all__ = ["Engine", "TurnKind", "TurnRequest", "TurnResult"]

TurnKind = Literal["say", "reroll", "edit", "continue", "impersonate", "reply"]
KINDS: tuple[str, ...] = ("say", "reroll", "edit", "continue", "impersonate", "reply")
#: SillyTavern's generation type for each kind of turn (World Info ``triggers``).
TRIGGERS = {
    "say": "normal",
    "edit": "normal",
    "reroll": "swipe",
    "continue": "continue",
    "impersonate": "impersonate",
    "reply": "normal",
}

#: Receives the turn's events: ``token``/``reasoning`` (text as it streams),
#: ``status`` (what the engine is doing that takes a while: a summary, the extraction),
#: ``progress`` (the step the turn is in, until the reply begins), ``warning``.
OnEvent = Callable[[str, str], None]

#: The ``progress`` event each step sends as it begins (the steps before the reply).
PROGRESS = {
    "load": "reading the story",
    "plan": "choosing the lore",
    "build": "building the prompt",
    "generate": "waiting for the model",
}


@dataclass(frozen=True)
class TurnRequest:
    kind: TurnKind
    text: str | None = None
    """The player's message (say) or the new text of the edited message (edit)."""
    node: str | None = None
    """The node to reroll (default HEAD) or to edit; of a reply, the node it answers
    (default HEAD)."""
    speaker: str | None = None
    """The member of the cast who replies to a say, an edit or a reply (``None``: the
    first of :meth:`Engine.next_speakers`); a reroll or a continue keeps the speaker of
    the reply it replaces or extends (another name is refused). :data:`NARRATOR` in a
    cast of several: one voice for everyone."""
    metadata: Mapping[str, Any] | None = None
    """Kept in the reply node's metadata beside what the turn records (a cascade's
    ``cascade``: the old node the reply mirrors, :mod:`orchestrator.cascade`)."""


@dataclass(frozen=True)
class TurnResult:
    node: Node | None
    """The generated node (HEAD now); ``None`` for impersonate, which stores nothing."""
    user_node: Node | None
    session: Session
    completion: Completion
    extraction: Extraction | None
    warnings: list[str] = field(default_factory=list)
    messages_hash: str = ""

    @property
    def text(self) -> str:
        """What the model wrote: the reply's text (a continuation's whole text), or the
        player's line an impersonation drafted."""
        return self.node.content if self.node is not None else self.completion.content


@dataclass
class Anchor:
    """Where the turn grows the tree, and what the reply follows."""

    session_id: str
    parent_id: str | None
    """The node the new node(s) hang under (``None``: a new root)."""
    history: list[Message]
    """The projection the prompt is built from; for say/edit it ends with the player's
    new message, not stored yet (its id is empty)."""
    state: dict[str, Any]
    """The world state the reply's delta applies to."""
    schema: StateSchema
    """The session's state schema (what the delta is checked against)."""
    sibling_of: str | None = None
    """reroll: the reply this one is an alternative to; edit: the user message forked."""
    reply_role: str = "assistant"
    user_text: str | None = None
    continues: Node | None = None
    """continue: the reply being extended (the new node is its alternative)."""
    replaces: Node | None = None
    """reroll: the reply this one is an alternative to (its speaker's name is kept)."""
    carried_note: bool = False
    """The author's note in ``state`` is the one of ``sibling_of`` (set on the message
    this turn makes an alternative of), not its parent's: the reply's delta records it."""
    speaker: Character = field(default_factory=Character)
    """Who the reply is written as (its card is the prompt's ``character``; its name
    the reply node's); for impersonate, the session's character."""
    scope: Scope | None = None
    """In a cast of several, a member's view of the path: ``history`` is then
    ``scope.history`` (what it witnessed), the trace refers to ``scope.path``."""
    cast: bool = False
    """The session has a cast of several: replies go with their speaker's name."""

    @property
    def seen(self) -> list[Message]:
        """The messages the speaker witnessed (the history without ``away`` lines)."""
        return self.scope.seen if self.scope is not None else self.history


T = TypeVar("T")


class _Stopped(OrchestratorError):
    """The player interrupted the turn before the reply had any text."""


@dataclass
class _Running:
    """The turn being played, as :meth:`Engine.interrupt` needs to see it."""

    phase: str = "load"
    stop: bool = False
    """An interrupt was asked: the step running stops, and no later step starts."""
    work: asyncio.Future[Any] | None = None
    """The step's model call(s), which an interrupt cancels."""
    anchor: Anchor | None = None


class TurnState(TypedDict, total=False):
    request: TurnRequest
    running: _Running
    session_id: str
    on_event: OnEvent | None
    anchor: Anchor
    context: PlanContext
    plan: Plan
    retrieval: Retrieval
    prompt: Prompt
    completion: Completion
    extraction: Extraction | None
    summary: dict[str, Any] | None
    summary_text: str
    trace: TraceBuilder
    result: TurnResult
    lore_left_out: list[dict[str, Any]]
    """In a cast of several: the lore hits of books whose owners are all absent."""
    planner: Planner
    """A planner in place of the engine's (the preview's, which makes no model call)."""
    preview: bool
    """Build the prompt only: a summary that would be written is not (no model call)."""


class Engine:
    """Plays turns on a store's sessions.

    Build one with :func:`orchestrator.build_engine`, which gives the planner its model
    call when the setup plans by model.

    Args:
        gateway: the engine's gateway (one per engine: it holds the reply being
            streamed, which :meth:`interrupt` stops); ``None``: a new one.
        planner: the session's planner (``None``: a :class:`planner.RuleBasedPlanner`).
        close_clients: whether :meth:`aclose` closes the model clients of the running
            event loop. litellm keeps its HTTP clients per loop for the whole process,
            shared by every gateway: a server with many engines closes them once, at
            shutdown, not when one engine goes.
        rng: the randomness of the speaker order (SillyTavern's natural order rolls
            talkativeness); ``None``: a new :class:`random.Random`. Tests give a seeded one.
    """

    def __init__(
        self,
        store: TurnStore,
        setup: TurnSetup,
        *,
        gateway: Gateway | None = None,
        planner: Planner | None = None,
        close_clients: bool = True,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.setup = setup
        self.rng = rng or random.Random()
        self._recaps: OrderedDict[tuple[str, str, str, str, int], str] = OrderedDict()
        """Recaps of missed runs made (``TurnSetup.recap_missed``), by session, speaker
        and run: each is written once."""
        self._close_clients = close_clients
        self.gateway = gateway or Gateway()
        self.planner: Planner = planner or RuleBasedPlanner()
        self._running: _Running | None = None
        self.closed = False
        """:meth:`aclose` was called."""
        self._graph = self._compile()

    def _compile(self) -> Any:
        from langgraph.graph import END, START, StateGraph

        builder = StateGraph(TurnState)
        steps = [
            ("load", self._load),
            ("plan", self._plan),
            ("retrieve", self._retrieve),
            ("build", self._build),
            ("generate", self._generate),
            ("postprocess", self._postprocess),
            ("commit", self._commit),
        ]
        previous = START
        for name, step in steps:
            builder.add_node(name, step)
            builder.add_edge(previous, name)
            previous = name
        builder.add_edge(previous, END)
        return builder.compile()

    async def run(
        self, session_id: str, request: TurnRequest, on_event: OnEvent | None = None
    ) -> TurnResult:
        """Play one turn and commit it.

        Raises:
            TurnError: the turn cannot be played from here (nothing to reroll...).
            ModelError: the model failed; nothing was stored.
            TurnInterrupted: :meth:`interrupt` before the reply had any text; only the
                player's message (say, edit) was stored.
            mnemosyne.MnemosyneError: unknown session or node, or the tree changed
                under the turn in a way it cannot follow (nothing stored).
            prompts.PromptError: a campaign template is broken.
        """
        if request.kind not in KINDS:
            raise TurnError(f"a turn is one of {', '.join(KINDS)}, not {request.kind!r}")
        running = _Running()
        self._running = running
        try:
            final = await self._graph.ainvoke(
                {
                    "request": request,
                    "session_id": session_id,
                    "on_event": on_event,
                    "running": running,
                }
            )
        except _Stopped:
            running.phase = "commit"
            self._keep_players_message(session_id, request, running.anchor)
        finally:
            if self._running is running:
                self._running = None
        result: TurnResult = final["result"]
        return result

    async def preview_lore(self, session_id: str, text: str) -> tuple[Plan, Retrieval]:
        """The lore a turn would use if ``text`` were the player's next message at HEAD
        (nothing is generated or stored).

        Raises:
            TurnError: no text.
            mnemosyne.MnemosyneError: unknown session.
        """
        request = TurnRequest("say", text)
        state: TurnState = {
            "request": request,
            "session_id": session_id,
            "anchor": load_anchor(self.store, session_id, request, self.setup, self.rng),
        }
        planned = await self._plan(state)
        return planned["plan"], await self.planner.retrieve(planned["plan"], planned["context"])

    async def preview_prompt(
        self, session_id: str, text: str = "", speaker: str | None = None
    ) -> PromptPreview:
        """The prompt the next turn would send if ``text`` (the player's draft; may be
        empty) were the player's message at HEAD, answered by ``speaker`` (``None``: the
        first of :meth:`next_speakers`), measured (:mod:`orchestrator.preview`).
        No model call (the lore planned by rules, a summary a turn would write not
        written), nothing stored.

        Raises:
            TurnError: ``speaker`` cannot speak (unknown, muted, absent).
            mnemosyne.MnemosyneError: unknown session.
            prompts.PromptError: a campaign template is broken.
        """
        session = self.store.session(session_id)
        where: dict[str, Any] = {"user_text": text}
        where["speaker"] = choose_speaker(
            self.store, session, session.head_id, "say", speaker, where, self.setup, self.rng
        )
        anchor = _anchor(self.store, session, session.head_id, setup=self.setup, **where)
        planner = self.planner
        if getattr(planner, "plan_call", None) is not None:
            planner = copy.copy(planner)  # the same lore, planned by its rules
            planner.plan_call = None  # type: ignore[attr-defined]
        state: TurnState = {
            "request": TurnRequest("say", text),
            "session_id": session_id,
            "anchor": anchor,
            "trace": TraceBuilder("say", self.setup),
            "planner": planner,
            "preview": True,
        }
        state.update(await self._plan(state))  # type: ignore[typeddict-item]
        state.update(await self._retrieve(state))  # type: ignore[typeddict-item]
        built = await self._build(state)
        model = self.setup.model
        count = self.gateway.counter(model)
        return measure(
            built["prompt"],
            anchor.history,
            state["retrieval"],
            window=self.gateway.context_window(model),
            reply_tokens=int(model.params.get("max_tokens") or model.reply_tokens),
            count=count,
            count_message=TOKEN_COUNTS.counter(model.model, count, named=built["prompt"].named),
            summary=built["summary"],
            summary_text=built["summary_text"],
            note=state["trace"].author_note,
        )

    def next_speakers(self, session_id: str, text: str | None = None) -> list[str]:
        """Who answers the player's message ``text`` at HEAD (``None``: who speaks next
        with no message), in order, by the session's speaker order
        (:mod:`orchestrator.speakers`): only members present and not muted; a session
        of one character always gives that character. A caller plays one turn per
        name: the first a ``say`` (``speaker=names[0]``), each next a ``reply``.
        Empty when no one can speak (everyone absent or muted).

        Raises:
            mnemosyne.MnemosyneError: unknown session.
        """
        session = self.store.session(session_id)
        return speakers_at(self.store, session, session.head_id, text, self.setup, self.rng)

    async def aclose(self) -> None:
        """Release what the engine holds (call it before the event loop ends): the model
        clients of the running loop if it closes them (``close_clients``). A turn still
        running is not stopped."""
        self.closed = True
        if self._close_clients:
            await self.gateway.aclose()

    def interrupt(self) -> bool:
        """Stop the turn being played, keeping what the player typed or saw (Ctrl+C);
        whether a turn was being played.

        While the reply streams, it stops and is stored as it stands, marked incomplete;
        while its state delta is extracted, the reply is stored with no delta, marked
        (``delta_error``); before the reply has any text (planning, a summary, waiting
        for the model), no reply is stored, only the player's message (:meth:`run`
        raises :class:`TurnInterrupted`). While the turn is being stored there is
        nothing left to stop.
        """
        running = self._running
        if running is None:
            return False
        if running.phase == "commit":
            return True
        if running.phase == "generate" and self.gateway.interrupt():
            return True  # streaming: the text so far is kept
        running.stop = True
        if running.phase == "generate" and not self.gateway.waiting:
            # the stream has not begun (it will not), or has ended: the reply is whole,
            # its extraction will not run
            return True
        if running.work is not None:
            running.work.cancel()
        return True

    def stop_reply(self) -> bool:
        """Stop only the reply being streamed (a client gone: what it was shown is kept,
        incomplete; a reply with no text yet is not stored, the player's message is);
        whether one was streaming. The rest of the turn, extraction included, runs on."""
        return self.gateway.interrupt()

    # -- the steps ----------------------------------------------------------------------

    def _emit(self, state: TurnState, kind: str, text: str) -> None:
        callback = state.get("on_event")
        if callback is not None:
            callback(kind, text)

    @staticmethod
    def _enter(state: TurnState, phase: str) -> _Running | None:
        """Mark the step the turn is in (a ``progress`` event says which); before the
        reply exists, a turn already interrupted goes no further."""
        callback = state.get("on_event")
        if callback is not None and phase in PROGRESS:
            callback("progress", PROGRESS[phase])
        running = state.get("running")
        if running is None:
            return None
        running.phase = phase
        if running.stop and phase in ("plan", "retrieve", "build", "generate"):
            raise _Stopped
        return running

    @staticmethod
    async def _guarded(running: _Running | None, work: Awaitable[T]) -> T:
        """Await a step's model call(s) so that :meth:`interrupt` can cancel them
        (raising :class:`_Stopped`) without cancelling the turn itself."""
        if running is None:
            return await work
        task = asyncio.ensure_future(work)
        if running.stop:
            task.cancel()
        running.work = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if running.stop and not (current is not None and current.cancelling()):
                raise _Stopped from None
            raise
        finally:
            running.work = None

    def _keep_players_message(
        self, session_id: str, request: TurnRequest, anchor: Anchor | None
    ) -> NoReturn:
        """Interrupted before the reply had any text: store the player's message alone
        (say, edit), HEAD on it, and say so."""
        if anchor is None or anchor.user_text is None:
            raise TurnInterrupted("interrupted before the reply began: nothing was stored")
        with self.store.transaction(session_id) as tx, tx.journaled(request.kind):
            user_node = _place_players_message(tx, request, anchor, self.setup.player)
        assert user_node is not None
        raise TurnInterrupted(
            f"interrupted before the reply began: the player's message was kept as node "
            f"{user_node.id} (HEAD)",
            user_node=user_node,
            session=tx.session,
        )

    async def _load(self, state: TurnState) -> dict[str, Any]:
        request, sid = state["request"], state["session_id"]
        running = self._enter(state, "load")
        anchor = load_anchor(self.store, sid, request, self.setup, self.rng)
        if running is not None:
            running.anchor = anchor
        trace = TraceBuilder(request.kind, self.setup)
        return {"anchor": anchor, "trace": trace}

    async def _plan(self, state: TurnState) -> dict[str, Any]:
        running = self._enter(state, "plan")
        anchor, setup, model = state["anchor"], self.setup, self.setup.model
        speaker = anchor.speaker
        context = PlanContext(
            history=anchor.seen,
            state=anchor.state,
            user_text=anchor.user_text,
            trigger=TRIGGERS[state["request"].kind],
            char=speaker.name,
            user=setup.player,
            character=speaker.scan_texts(),
            character_tags=speaker.tags,
            context_window=self.gateway.context_window(model),
            count_tokens=self.gateway.counter(model),
            tokenizer=self.gateway.tokenizer(model),
        )
        plan = await self._guarded(running, state.get("planner", self.planner).plan(context))
        if plan.call is not None and "trace" in state:
            state["trace"].template("plan")
        return {"context": context, "plan": plan}

    async def _retrieve(self, state: TurnState) -> dict[str, Any]:
        running = self._enter(state, "retrieve")
        planner = state.get("planner", self.planner)
        retrieval = await self._guarded(running, planner.retrieve(state["plan"], state["context"]))
        anchor = state["anchor"]
        if not anchor.cast:
            return {"retrieval": retrieval}
        retrieval, left_out = owned_lore(retrieval, self.setup.members, anchor.state["present"])
        return {"retrieval": retrieval, "lore_left_out": left_out}

    async def _build(self, state: TurnState) -> dict[str, Any]:
        running = self._enter(state, "build")
        anchor, setup = state["anchor"], self.setup
        templates = setup.templates
        speaker = anchor.speaker
        char, user = speaker.name, setup.player

        def substitute(text: str) -> str:
            return macros(text, char=char, user=user)

        if setup.recap_missed and anchor.scope is not None and anchor.scope.gaps:
            preview = bool(state.get("preview"))
            scope = anchor.scope
            recap = recap_missed(
                scope,
                speaker.name,
                anchor.session_id,
                setup,
                self.gateway,
                self._recaps,
                stored=lambda: last_recaps(self.store, anchor.session_id, scope, speaker.name),
                preview=preview,
            )
            await self._guarded(running, recap)
            if anchor.scope.recaps:
                state["trace"].template("recap")
        hits = state["retrieval"].hits
        context = {
            "title": setup.title,
            "char": char,
            "user": user,
            "character": speaker.as_context(substitute),
            **cast_context(setup, speaker, anchor.state["present"], anchor.reply_role),
            "lore_before": _lore(hits, "before_char", substitute),
            "lore": _lore(hits, "after_char", substitute),
            "outlets": _outlets(hits, substitute),
            "variables": anchor.state["variables"],
            "persona": {"name": user, "description": substitute(setup.persona)},
            "summary": "",
        }
        note = place_note(
            anchor.state.get("author_note"),
            sum(1 for message in anchor.history if message.role == "user"),
            substitute,
        )
        system_prompt = substitute(setup.system_prompt) if setup.system_prompt else None
        parts, injections = with_note(
            note,
            render_parts(templates, context, system_prompt=system_prompt),
            _injections(hits, substitute),
        )
        tail: list[dict[str, Any]] = []
        tail_template = {"continue": "continue", "impersonate": "impersonate"}.get(
            state["request"].kind
        )
        if tail_template:
            tail.append({"role": "system", "content": templates.render(tail_template, context)})
        trace: TraceBuilder = state["trace"]
        trace.author_note = note
        fixed = [*tail, *({"content": item.content} for item in injections)]
        first_kept, budget, window, count = self._fit(anchor, parts, fixed)
        summary_info = None
        # A speaker who was away: the story's summary may stand in for the oldest
        # messages only while it tells nothing past the first it did not see.
        gap = anchor.scope.first_gap if anchor.scope is not None else None
        unseen = first_kept > 0 and gap is not None and first_kept > gap
        if first_kept > 0 and not unseen:
            found: tuple[str, int, dict[str, Any]] | None
            if state.get("preview"):
                found = await asyncio.to_thread(self._standing_summary, anchor, first_kept, gap)
            else:
                self._emit(state, "status", "summarising the oldest messages, which no longer fit")
                found = await self._guarded(
                    running, self._summary(anchor, first_kept, window, count, trace, gap)
                )
            if found is None:
                unseen = True
            else:
                summary_text, first_kept, summary_info = found
                context["summary"] = summary_text
                parts = with_note(
                    note, render_parts(templates, context, system_prompt=system_prompt), ()
                )[0]
                # the summary takes room: keep what still fits
                first_kept = max(first_kept, self._fit(anchor, parts, fixed)[0])
        prompt = assemble(
            parts,
            anchor.history,
            tail,
            first_kept=first_kept,
            injections=injections,
            named=anchor.cast,
        )
        for name in [*prompt.parts, *([tail_template] if tail_template else [])]:
            if name in TEMPLATE_NAMES:  # not the session's system prompt, not the note
                trace.template(name)
        if anchor.scope is not None and anchor.scope.left_out:
            trace.template("away")
        trace.trimmed = {
            "window": window,
            "budget": budget,
            "dropped": first_kept,
            "kept": len(anchor.history) - first_kept,
            "first_kept_id": anchor.history[first_kept].id
            if first_kept < len(anchor.history)
            else None,
            "summary": {"skipped": UNSEEN} if first_kept > 0 and unseen else summary_info,
        }
        return {"prompt": prompt, "summary": summary_info, "summary_text": context["summary"]}

    def _standing_summary(
        self, anchor: Anchor, first_kept: int, gap: int | None = None
    ) -> tuple[str, int, dict[str, Any]] | None:
        """For a preview: the summary the story has, if it covers what must be trimmed
        (``reused``), else the one there is and ``reused: False`` (a turn would write a
        new one; the preview does not). ``None`` if it covers messages past ``gap``."""
        covered, summary = self._covered(anchor)
        if gap is not None and covered > gap:
            return None
        if summary and covered >= first_kept:
            through = anchor.history[covered - 1].id
            return summary, covered, {"reused": True, "covers_through": through}
        return summary, first_kept, {"reused": False, "covers_through": None}

    def _fit(
        self, anchor: Anchor, parts: list[tuple[str, str]], tail: list[dict[str, Any]]
    ) -> tuple[int, int, int, Callable[[Message], int]]:
        model = self.setup.model
        window = self.gateway.context_window(model)
        count = self.gateway.counter(model)
        reserve = int(model.params.get("max_tokens") or model.reply_tokens)
        fixed = sum(count(text) + FRAMING for _, text in parts)
        fixed += sum(count(message["content"]) + FRAMING for message in tail)
        budget = window - reserve - fixed
        # each message once, kept; counted as it is sent (a reply with its speaker's name)
        counted = TOKEN_COUNTS.counter(model.model, count, named=anchor.cast)
        return fit(anchor.history, budget, counted, named=anchor.cast), budget, window, counted

    async def _summary(
        self,
        anchor: Anchor,
        first_kept: int,
        window: int,
        count: Callable[[Message], int],
        trace: TraceBuilder,
        gap: int | None = None,
    ) -> tuple[str, int, dict[str, Any]] | None:
        """A summary of ``history[:first_kept]`` at least: the one at the anchor if it
        covers enough, else a new one (a model call per chunk that fits). ``gap``: no
        summary may tell of ``history[gap:]`` (the speaker did not see all of it):
        ``None`` if the story's summary does."""
        history = anchor.history
        # A walk of the path to the node that wrote the summary: in a worker thread, so
        # that a long story does not hold the event loop (other sessions, reads) meanwhile.
        covered, summary = await asyncio.to_thread(self._covered, anchor)
        if gap is not None and covered > gap:
            return None
        if covered >= first_kept:
            return summary, covered, {"reused": True, "covers_through": history[covered - 1].id}
        # Drop a quarter of the window more than needed, so that the next turns can
        # reuse this summary instead of writing a new one each time.
        target = first_kept
        end_at = len(history) - 1 if gap is None else min(len(history) - 1, gap)
        slack, spent = window // 4, 0
        while target < end_at and spent < slack:
            spent += count(history[target]) + FRAMING
            target += 1
        model = self.setup.summarizer
        calls = []
        limit = max(window // 2, 256)
        start = covered
        while start < target:
            end, size = start, count(Message("", "system", None, summary))
            while end < target and (end == start or size < limit):
                size += count(history[end]) + FRAMING
                end += 1
            messages = [
                {
                    "role": "user",
                    "content": self.setup.templates.render(
                        "summarize",
                        {
                            "summary": summary,
                            "messages": [
                                {"role": m.role, "speaker": teller(m), "content": m.content}
                                for m in history[start:end]
                                if m.content.strip()  # an empty reply of an older version
                            ],
                            "words": self.setup.summary_words,
                            "char": self.setup.character.name,
                            "user": self.setup.player,
                        },
                    ),
                }
            ]
            answer = await self.gateway.complete(model, messages)
            summary = answer.content.strip()
            calls.append(
                {
                    "model": model.model,
                    "covers": [history[start].id, history[end - 1].id],
                    "messages": messages,
                    "output": summary,
                    "usage": answer.usage,
                    "latency_ms": round(answer.latency_ms, 2),
                }
            )
            start = end
        trace.template("summarize")
        info = {"reused": False, "covers_through": history[target - 1].id, "calls": calls}
        return summary, target, info

    def _covered(self, anchor: Anchor) -> tuple[int, str]:
        """How many history messages the anchor's summary covers, and its text.

        A speaker's view (``anchor.scope``): the message it covers through is looked
        for in the whole path (another speaker's turn may have summarised what this one
        did not see); past the speaker's first gap, the count given is the path's (more
        than ``first_gap``: the callers skip the summary, it tells what was missed)."""
        summary = anchor.state.get("summary") or ""
        if not summary or anchor.parent_id is None:
            return 0, ""
        sid = anchor.session_id
        blame = self.store.blame(sid, "summary", anchor.parent_id)
        if blame.node_id is None:
            return 0, ""
        through = self.store.node(sid, blame.node_id).metadata.get("summary_through")
        # the path's first messages up to the first gap are the speaker's history's too
        history = anchor.scope.path if anchor.scope is not None else anchor.history
        # from the newest: the message it covers through is near the window's start,
        # not near the root of a long story
        for index in range(len(history) - 1, -1, -1):
            if history[index].id == through:
                return index + 1, summary
        return 0, ""

    async def _generate(self, state: TurnState) -> dict[str, Any]:
        running = self._enter(state, "generate")
        prompt: Prompt = state["prompt"]

        on_event = state.get("on_event")
        anchor = state["anchor"]
        if on_event is not None and _names_itself(anchor):
            on_event = Unnamed(on_event, anchor.speaker.name)  # as the reply is stored

        async def reply() -> Completion:
            if running is not None and running.stop:
                raise _Stopped  # interrupted before the call began
            try:
                return await self.gateway.stream(self.setup.model, prompt.messages, on_event)
            finally:
                if isinstance(on_event, Unnamed):
                    on_event.flush()

        completion = await self._guarded(running, reply())
        if not completion.content.strip():  # interrupted before any text: no empty reply
            raise _Stopped
        if completion.incomplete:
            self._emit(
                state, "warning", f"the reply is incomplete ({completion.stopped_by}): kept as is"
            )
        return {"completion": completion}

    async def _postprocess(self, state: TurnState) -> dict[str, Any]:
        """The state delta of the reply. Whatever happens here, the reply is stored: an
        interrupt or a failed call leaves it with no delta, the reason in ``delta_error``."""
        running = self._enter(state, "postprocess")
        anchor, completion = state["anchor"], state["completion"]
        if not self.setup.extract or anchor.reply_role != "assistant" or completion.incomplete:
            return {"extraction": None}
        config = self.setup.extractor

        async def call(messages: list[dict[str, Any]], fmt: dict[str, Any]) -> CallResult:
            answer = await self.gateway.complete(config, messages, response_format=fmt)
            return CallResult(answer.content, answer.usage, answer.latency_ms)

        state["trace"].template("extract")
        arguments: dict[str, Any] = {
            "schema": anchor.schema,
            "state": anchor.state,
            "reply": completion.content,
            "user_message": anchor.user_text or _last_user_text(anchor.history),
        }
        if running is None or not running.stop:
            self._emit(state, "status", "updating the world state")
        try:
            extraction = await self._guarded(
                running, extract_delta(call, self.setup.templates, **arguments)
            )
        except _Stopped:
            reason = f"{INTERRUPTED} before the state delta was extracted"
            extraction = unfinished(reason, self.setup.templates, **arguments)
        except ModelError as error:
            reason = f"the extraction call failed: {error}"
            extraction = unfinished(reason, self.setup.templates, **arguments)
        if not extraction.ok:
            self._emit(state, "warning", describe_failure(extraction))
        return {"extraction": extraction}

    async def _commit(self, state: TurnState) -> dict[str, Any]:
        self._enter(state, "commit")
        request, anchor = state["request"], state["anchor"]
        completion, extraction = state["completion"], state.get("extraction")
        summary = state.get("summary")
        trace: TraceBuilder = state["trace"]
        delta = list(extraction.delta) if extraction is not None and extraction.ok else []
        delta.extend(_lore_delta(anchor.state, state["retrieval"]))
        if anchor.carried_note:
            delta.append(_note_operation(anchor.state.get("author_note")))
        metadata = trace.node_metadata(completion, extraction)
        if request.metadata:
            metadata.update(request.metadata)
        if summary is not None and not summary["reused"]:
            delta.append({"op": "set", "path": "summary", "value": _summary_of(summary)})
            metadata["summary_through"] = summary["covers_through"]
        if anchor.scope is not None and anchor.scope.told:
            metadata["recaps"] = anchor.scope.told  # the speaker's next turn reuses them
        warnings = []
        if completion.incomplete:
            warnings.append(f"the reply is incomplete ({completion.stopped_by})")
        if extraction is not None and not extraction.ok:
            warnings.append(describe_failure(extraction))
        # the turn's own lists: the trace refers to them, no copy
        history = anchor.scope.path if anchor.scope is not None else anchor.history
        prompt: Prompt = state["prompt"]
        sources = prompt.sources
        if anchor.scope is not None:  # the prompt's history is the speaker's view of the path
            into_path = anchor.scope.sources
            sources = [None if i is None else into_path[i] for i in sources]
        sid = state["session_id"]
        # Each node carries its speaker's name, as a SillyTavern message does: the one the
        # reply was written as (a reroll or a continue in a cast of several keeps the
        # speaker of the reply it replaces or extends: choose_speaker saw to it).
        speaker = self.setup.player if anchor.reply_role == "user" else anchor.speaker.name
        if request.kind == "impersonate":  # the player's line, to edit and send: not stored
            return {"result": self._draft(sid, completion, warnings)}
        old, content = anchor.continues, completion.content
        if _names_itself(anchor):
            content = unnamed(content, speaker)
        if old is not None:  # the whole text, the old reply's delta, then the new one's
            content = joined(old.content, content)
            delta = [*old.delta, *delta]
            metadata["continues"] = old.id
            if "summary_through" in old.metadata:
                metadata.setdefault("summary_through", old.metadata["summary_through"])
        with self.store.transaction(sid) as tx, tx.journaled(request.kind):
            user_node = _place_players_message(tx, request, anchor, self.setup.player)
            if user_node is not None:
                stored = Message(user_node.id, "user", user_node.name, user_node.content)
                if anchor.scope is not None:
                    anchor.scope.replace_last(stored)
                else:
                    history[-1] = stored
            if request.kind == "reroll" or old is not None:
                reply = tx.add_sibling(
                    old.id if old is not None else str(anchor.sibling_of),
                    content,
                    name=speaker,
                    metadata=metadata,
                    delta=delta or None,
                )
            else:
                reply = tx.append(
                    anchor.reply_role,
                    content,
                    name=speaker,
                    metadata=metadata,
                    delta=delta or None,
                )
            document = trace.document(
                tx.put_blob,
                plan=state["plan"],
                retrieval=state["retrieval"],
                completion=completion,
                extraction=extraction,
                delta=delta,
            )
            if old is not None:
                document["continues"] = old.id
            if anchor.cast:
                document["scene"] = self._scene(anchor, speaker, state.get("lore_left_out", []))
            digest = tx.put_trace(
                reply.id,
                messages=prompt.messages,
                sources=sources,
                history=history,
                document=document,
                named=prompt.named,
            )
        result = TurnResult(
            node=reply,
            user_node=user_node,
            session=tx.session,
            completion=completion,
            extraction=extraction,
            warnings=warnings,
            messages_hash=digest,
        )
        return {"result": result}

    def _scene(
        self, anchor: Anchor, speaker: str, lore_left_out: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The trace's ``scene``: who spoke, who was present, what the speaker did not
        see (runs of the path's messages) and the lore left out with its absent owners."""
        scene: dict[str, Any] = {
            "speaker": speaker,
            "present": present_names(self.setup.members, anchor.state["present"]),
            "left_out": anchor.scope.left_out if anchor.scope is not None else [],
            "lore_left_out": lore_left_out,
        }
        if anchor.scope is not None and anchor.scope.recaps:
            scene["recaps"] = anchor.scope.recaps
        return scene

    def _draft(self, sid: str, completion: Completion, warnings: list[str]) -> TurnResult:
        """An impersonation's result: the player's line, nothing stored."""
        return TurnResult(
            node=None,
            user_node=None,
            session=self.store.session(sid),
            completion=completion,
            extraction=None,
            warnings=warnings,
        )


def _place_players_message(
    tx: TurnTransaction, request: TurnRequest, anchor: Anchor, player: str
) -> Node | None:
    """In a commit's transaction: HEAD back where the turn grows the tree, and the
    player's new message (say, edit) stored there, named ``player``; that message, if
    any."""
    if request.kind == "edit":
        assert anchor.sibling_of is not None and anchor.user_text is not None
        return tx.add_sibling(anchor.sibling_of, anchor.user_text, name=player)
    if anchor.parent_id is not None:
        if tx.head_id != anchor.parent_id:
            tx.checkout(anchor.parent_id)
    elif tx.head_id is not None:
        raise TurnError(
            f"session {anchor.session_id} got its first message from elsewhere during the "
            "turn: play again"
        )
    if request.kind == "say":
        assert anchor.user_text is not None
        return tx.append("user", anchor.user_text, name=player)
    return None


def _names_itself(anchor: Anchor) -> bool:
    """Whether the reply may begin with its speaker's name (a new reply in a cast of
    several, which saw every reply of the history sent so): stripped, stored and shown."""
    return anchor.cast and anchor.reply_role == "assistant" and anchor.continues is None


def joined(text: str, continuation: str) -> str:
    """A reply and its continuation as one text, as SillyTavern joins them (as they are),
    but for one space where a model began a new sentence or word of Latin script right
    after the last one's end (``dark.`` + ``Water`` is ``dark. Water``)."""
    if text and continuation and not text[-1].isspace() and not continuation[0].isspace():
        last, first = text[-1], continuation[0]
        starts = first.isascii() and (first.isalnum() or first in "\"'*([")
        if starts and last.isascii() and last in ".!?,;:\"'*)]":
            return f"{text} {continuation}"
    return text + continuation


def _summary_of(summary: dict[str, Any]) -> str:
    output: str = summary["calls"][-1]["output"]
    return output


def _last_user_text(history: list[Message]) -> str | None:
    for message in reversed(history):
        if message.role == "user":
            return message.content
    return None


def _lore(hits: list[LoreHit], position: str, substitute: Callable[[str], str]) -> list[Any]:
    return [
        {"id": hit.id, "book": hit.book, "comment": hit.comment, "content": substitute(hit.content)}
        for hit in hits
        if hit.position == position
    ]


def _outlets(hits: list[LoreHit], substitute: Callable[[str], str]) -> dict[str, str]:
    outlets: dict[str, list[str]] = {}
    for hit in hits:
        if hit.position == "outlet":
            outlets.setdefault(hit.outlet, []).append(substitute(hit.content))
    return {name: "\n".join(texts) for name, texts in outlets.items()}


def _injections(hits: list[LoreHit], substitute: Callable[[str], str]) -> list[Injection]:
    """Lore placed at a depth: one message per (depth, role), entries joined as
    SillyTavern joins them (in the order the planner gives, lower order first)."""
    grouped: dict[tuple[int, str], list[str]] = {}
    for hit in hits:
        if hit.position == "at_depth":
            grouped.setdefault((hit.depth, hit.role), []).append(substitute(hit.content))
    return [Injection(depth, role, "\n".join(texts)) for (depth, role), texts in grouped.items()]


def _note_operation(note: dict[str, Any] | None) -> dict[str, Any]:
    """The operation that sets the author's note to ``note`` (``None``: no note)."""
    if note is None:
        return {"op": "unset", "path": "author_note"}
    return {"op": "set", "path": "author_note", "value": note}


def _lore_delta(state: dict[str, Any], retrieval: Retrieval) -> list[dict[str, Any]]:
    """The operations that record the lore of this reply on its node."""
    delta: list[dict[str, Any]] = []
    active = sorted({hit.id for hit in retrieval.hits})  # a set: kept sorted
    if active != state["active_lore_ids"]:
        delta.append({"op": "set", "path": "active_lore_ids", "value": active})
    if retrieval.timers is not None and retrieval.timers != state["lore_timers"]:
        delta.append({"op": "set", "path": "lore_timers", "value": retrieval.timers})
    return delta


def load_anchor(
    store: TurnStore,
    session_id: str,
    request: TurnRequest,
    setup: TurnSetup | None = None,
    rng: random.Random | None = None,
) -> Anchor:
    """Where the turn grows the tree, who speaks and the history it follows.

    Raises:
        TurnError: nothing to reroll or continue, an edit of a non-user message, no text,
            a speaker who cannot speak.
    """
    session, parent_id, where = locate_turn(store, session_id, request, setup, rng)
    return _anchor(store, session, parent_id, setup=setup, **where)


def locate_turn(
    store: TurnStore,
    session_id: str,
    request: TurnRequest,
    setup: TurnSetup | None = None,
    rng: random.Random | None = None,
) -> tuple[Session, str | None, dict[str, Any]]:
    """Where a turn grows the tree, without reading its history: the session, the node
    the new node(s) hang under, and how (what it is an alternative of, the player's
    text, the reply's role, the nodes read to find it, and, given the ``setup``, who
    speaks: ``where["speaker"]``, the :class:`Character` :func:`choose_speaker`
    settled, the order rolled once). What refuses a turn refuses it here, cheaply.

    A caller that shows who speaks before the turn (the CLI, the API) passes
    ``where["speaker"].name`` on as the request's ``speaker``: a request that names
    its speaker is never rolled again, so the reply is stored under that name.

    Raises:
        TurnError: nothing to reroll or continue, an edit of a non-user message, no text;
            with ``setup``, a speaker who cannot speak (unknown, muted, absent).
    """
    session, parent_id, where = _locate(store, session_id, request)
    if setup is not None:
        where["speaker"] = choose_speaker(
            store, session, parent_id, request.kind, request.speaker, where, setup, rng
        )
    return session, parent_id, where


def _locate(
    store: TurnStore, session_id: str, request: TurnRequest
) -> tuple[Session, str | None, dict[str, Any]]:
    session = store.session(session_id)
    sid = session.id
    kind = request.kind
    if kind in ("say", "edit") and not (request.text and request.text.strip()):
        raise TurnError(f"{kind} needs the text of the player's message")
    if kind == "say":
        return session, session.head_id, {"user_text": request.text}
    if kind == "impersonate":  # the player's next line: from anywhere, an empty story too
        return session, session.head_id, {"reply_role": "user"}
    if kind == "reply":  # a character speaks with no message of the player's
        if request.node is not None:  # below the node named (a cascade's tip), not HEAD
            return session, store.node(sid, request.node).id, {}
        if session.head_id is None:
            raise TurnError(f"session {sid} is empty: say something first")
        return session, session.head_id, {}
    if kind == "continue":
        if session.head_id is None:
            raise TurnError(f"session {sid} is empty: say something first")
        head = store.node(sid, session.head_id)
        if head.role == "assistant":  # extend this reply
            return session, head.id, {"continues": head}
        return session, head.id, {"answers": head}  # a player's message: its reply
    ref = request.node or session.head_id
    if ref is None:
        raise TurnError(f"session {sid} is empty: nothing to {kind}")
    target = store.node(sid, ref)
    if kind == "reroll":
        if target.role != "assistant":
            raise TurnError(
                f"node {target.id} is a {target.role} message: reroll makes a new "
                "alternative of a reply (use continue to get a reply to it)"
            )
        return session, target.parent_id, {"sibling_of": target.id, "replaces": target}
    if target.role != "user":
        raise TurnError(
            f"node {target.id} is a {target.role} message: edit forks a player's message "
            f"and generates the reply (`clotho fork {target.id[:8]} TEXT` edits any message)"
        )
    return session, target.parent_id, {"sibling_of": target.id, "user_text": request.text}


def _anchor(
    store: TurnStore,
    session: Session,
    parent_id: str | None,
    *,
    sibling_of: str | None = None,
    user_text: str | None = None,
    reply_role: str = "assistant",
    continues: Node | None = None,
    replaces: Node | None = None,
    answers: Node | None = None,
    state: WorldState | None = None,
    speaker: Character | None = None,
    setup: TurnSetup | None = None,
) -> Anchor:
    """The anchor of a turn located (:func:`locate_turn`'s ``where``: the nodes and the
    state it read are not read again; ``answers``, the player's message a continue
    replies to, is the speaker's choice's alone)."""
    del answers
    sid = session.id
    schema = store.schema(sid)
    speaker = speaker or Character()
    scope = None
    if setup is not None and scoped(setup, speaker, reply_role):
        # a member of a cast of several: only what it witnessed
        def away() -> str:
            return setup.templates.render("away", {"char": speaker.name, "user": setup.player})

        scenes = store.scenes(sid, parent_id) if parent_id is not None else Scenes([], [])
        scope = witnessed(scenes.messages, scenes.changes, speaker.name, away)
        history = scope.history
    else:
        history = store.messages(sid, parent_id) if parent_id is not None else []
    if state is None and parent_id is not None:
        state = store.state(sid, parent_id)
    values = state.as_dict() if state is not None else schema.initial_state()
    if user_text is not None:
        message = Message("", "user", None, user_text)
        if scope is not None:
            scope.add(message)
        else:
            history.append(message)
    carried = False
    if sibling_of is not None:
        # The note the player set on the message this turn replaces (a reroll of the
        # reply, an edit of their message) stays: it is the alternative's too.
        note = store.state(sid, sibling_of).author_note
        if note != values.get("author_note"):
            values, carried = {**values, "author_note": note}, True
    return Anchor(
        session_id=sid,
        parent_id=parent_id,
        history=history,
        state=values,
        schema=schema,
        sibling_of=sibling_of,
        reply_role=reply_role,
        user_text=user_text,
        carried_note=carried,
        continues=continues,
        replaces=replaces,
        speaker=speaker,
        scope=scope,
        cast=setup is not None and len(setup.members) > 1,
    )
