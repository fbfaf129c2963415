"""Replay (A/B): a generated node's prompt sent again with something changed.

Two kinds of change, and a replay is one or the other (:attr:`ReplayChanges.rebuilds`):

- **sent as stored**: another model or sampler settings only. The node's exact stored
  messages (its PromptTrace, which must be ``verified``: rebuilt, they still hash to what
  was sent) go to the other model as they are; nothing is planned or built again. The
  new node's lore, note and summary are the original's (the same prompt carries them):
  those operations of its delta are copied, the reply's own changes extracted anew.
- **rebuilt**: a changed template, lore entries switched on or off, another author's
  note (and maybe another model too). The prompt is built again at the node's parent by
  the engine's own steps (a reroll of the node, run by :class:`_Rebuilding`, an
  :class:`~orchestrator.turn.Engine` whose setup, lore and note carry the changes).

Either way each reply is a new sibling of the node (never a replacement), stored as a
reroll is: one transaction with the node, its extracted delta, its trace (what was sent)
and one undo step (``reroll``); HEAD moves to it, so after ``n`` replays HEAD is on the
last. The state delta is extracted by the session's usual extraction model (the replay
changes the reply's model only), so that two replies differ by what was asked. Each
node's metadata ``replay`` names the original and what changed against it::

    {"of": "<id>", "sent": "as stored", "changed": {"model": ["gpt-a", "gpt-b"],
     "params": {"temperature": [0.7, 1.1]}}}
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import jinja2

from mnemosyne import Message, Node
from mnemosyne.traces import Trace
from planner import LoreHit, Retrieval
from postprocess import describe_failure
from prompts import TEMPLATE_NAMES, TemplateError, Templates, UsedTemplate

from .config import ModelConfig
from .errors import TurnError
from .gateway import Completion
from .setup import TurnSetup
from .trace import TraceBuilder, call_record, postprocess_record
from .turn import Anchor, Engine, OnEvent, TurnRequest, TurnResult, TurnState, load_anchor

__all__ = [
    "MAX_REPLAYS",
    "PreparedReplay",
    "ReplayChanges",
    "TemplateChange",
    "prepare_replay",
    "replay",
]

#: The most siblings one replay makes (each is a model call or more).
MAX_REPLAYS = 8

#: The paths of a delta that the turn's commit writes (lore, note, summary), not the
#: extraction: a reply sent the same prompt shares them with the original.
_PROMPT_PATHS = frozenset({"active_lore_ids", "lore_timers", "author_note", "summary"})


@dataclass(frozen=True)
class TemplateChange:
    """A template replaced for the replay: its new source and where it came from."""

    source: str
    origin: str
    """The file's path (``clotho replay --template FILE``)."""


@dataclass(frozen=True)
class ReplayChanges:
    """What a replay changes against the original node."""

    model: ModelConfig | None = None
    """Another model (a model string on the session's connection, or a profile's)."""
    profile: str | None = None
    """The connection profile ``model`` came from, if one did (recorded)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Sampler settings set over the model's (``temperature``...)."""
    templates: Mapping[str, TemplateChange] = field(default_factory=dict)
    lore_off: frozenset[str] = frozenset()
    """Lore entries (``book:uid``) left out even if they fire."""
    lore_on: frozenset[str] = frozenset()
    """Lore entries put in even if they do not fire."""
    note: str | None = None
    """Another author's note text (``""``: no note); ``None``: the original's."""

    @property
    def rebuilds(self) -> bool:
        """Whether the prompt must be built again (else it is sent as stored)."""
        return bool(self.templates or self.lore_off or self.lore_on or self.note is not None)

    @property
    def empty(self) -> bool:
        return not (self.rebuilds or self.model is not None or self.params)


async def replay(
    engine: Engine,
    session_id: str,
    ref: str,
    changes: ReplayChanges,
    *,
    n: int = 1,
    on_event: OnEvent | None = None,
) -> list[TurnResult]:
    """Replay node ``ref`` ``n`` times with ``changes``: the
    :class:`~orchestrator.TurnResult` of each new sibling, in order
    (:func:`prepare_replay`, then :meth:`PreparedReplay.run`).

    Raises:
        TurnError, prompts.TemplateError: refused before anything is sent
            (:func:`prepare_replay`).
        ModelError: the model failed; the siblings stored before stay (each is its own
            transaction), nothing of the failed one is.
    """
    return await prepare_replay(engine, session_id, ref, changes, n=n).run(on_event)


def prepare_replay(
    engine: Engine, session_id: str, ref: str, changes: ReplayChanges, *, n: int = 1
) -> PreparedReplay:
    """Everything that can refuse a replay, checked before any model call (it reads the
    store: blocking).

    Raises:
        TurnError: a node that is not a generated reply (a player's message, one written
            or imported with no trace, a continuation), one in the trash or in a pruned
            fragment, a trace that no longer verifies
            (for a prompt sent as stored), nothing changed, ``n`` outside
            1..:data:`MAX_REPLAYS`, a lore entry the session does not have, a template
            name unknown.
        prompts.TemplateError: a replaced template does not compile.
        mnemosyne.MnemosyneError: unknown session or node.
    """
    if not 1 <= n <= MAX_REPLAYS:
        raise TurnError(f"a replay makes 1 to {MAX_REPLAYS} alternatives, not {n}")
    if changes.empty:
        raise TurnError(
            "a replay changes something: a model, a profile, a sampler setting, a "
            "template, lore on or off, or the author's note (`clotho reroll` asks the "
            "same model again)"
        )
    sid = engine.store.session(session_id).id
    original, trace = _original(engine, sid, ref)
    note_text = ""  # the original's note: recorded only when the replay changes it
    if changes.note is not None:
        old_note = engine.store.state(sid, original.id).author_note
        note_text = str(old_note.get("text", "")) if old_note else ""
    if changes.rebuilds:
        rebuilding = _Rebuilding(engine, original, trace, changes, note_text)
        return PreparedReplay(
            engine, sid, original, trace, changes, n, rebuilding.record, rebuilding
        )
    if not trace.verified:
        raise TurnError(
            f"node {original.id}'s stored prompt is no longer what was sent "
            f"({'; '.join(trace.problems)}): it cannot be sent as stored (a changed "
            "template, lore or note builds it again from the tree as it is)"
        )
    record = _record(original, trace, changes, engine.setup, "as stored", note_text)
    request = TurnRequest("reroll", node=original.id)
    anchor = load_anchor(engine.store, sid, request, engine.setup, engine.rng)
    history = anchor.scope.path if anchor.scope is not None else anchor.history
    stored = _AsStored(anchor, history, _sources(trace, history))
    return PreparedReplay(engine, sid, original, trace, changes, n, record, stored=stored)


@dataclass(frozen=True)
class _AsStored:
    """What every alternative of a prompt sent as stored shares, read once: where it
    grows, the history its trace refers to, and which of its messages each sent is."""

    anchor: Anchor
    history: list[Message]
    sources: list[int | None]


@dataclass
class PreparedReplay:
    """A replay checked and ready: :meth:`run` (or :meth:`one`, ``n`` times) plays it."""

    engine: Engine
    session_id: str
    original: Node
    trace: Trace
    changes: ReplayChanges
    n: int
    record: dict[str, Any]
    """The ``replay`` metadata every new sibling carries."""
    rebuilding: _Rebuilding | None = None
    stored: _AsStored | None = None
    """Sent as stored (``rebuilding`` is ``None``): what each alternative shares."""

    async def one(self, on_event: OnEvent | None = None) -> TurnResult:
        """One new sibling, stored (one transaction)."""
        if self.rebuilding is not None:
            request = TurnRequest("reroll", node=self.original.id, speaker=self.original.name)
            return await self.rebuilding.run(self.session_id, request, on_event)
        assert self.stored is not None
        return await _as_stored(
            self.engine,
            self.session_id,
            self.original,
            self.trace,
            self.changes,
            self.record,
            self.stored,
            on_event,
        )

    async def run(self, on_event: OnEvent | None = None) -> list[TurnResult]:
        """The ``n`` new siblings, one after the other."""
        return [await self.one(on_event) for _ in range(self.n)]


def _original(engine: Engine, sid: str, ref: str) -> tuple[Node, Trace]:
    """The node replayed and its trace; refused if it is not a generated reply."""
    store = engine.store
    node = store.node(sid, ref)
    if node.role != "assistant":
        raise TurnError(
            f"node {node.id} is a {node.role} message: a replay sends a generated reply's "
            "prompt again"
        )
    trace = store.trace(sid, node.id)  # type: ignore[attr-defined]
    if trace is None:
        raise TurnError(
            f"node {node.id} has no PromptTrace (written or imported, not generated here): "
            "there is no prompt to replay"
        )
    if node.metadata.get("continues"):
        raise TurnError(
            f"node {node.id} continues another reply: replay the reply it continues, "
            f"{node.metadata['continues']}"
        )
    _require_attached(engine, sid, node)
    return node, trace


def _require_attached(engine: Engine, sid: str, node: Node) -> None:
    """Refuse a node out of the tree (in the trash, or in a pruned fragment): its
    replies would be siblings of a node no story reaches."""
    place = engine.store.placement(sid, node.id)  # type: ignore[attr-defined]
    if place is not None:
        where, hint = {
            "trash": ("the trash", "restore it first"),
            "fragment": ("a pruned fragment", "graft it first"),
        }[place]
        raise TurnError(
            f"node {node.id} is in {where}, out of the story's tree: {hint} to replay it"
        )


def _config(setup: TurnSetup, changes: ReplayChanges) -> ModelConfig:
    """The reply's model with the changes: another model, then the settings over it."""
    config = changes.model or setup.model
    if changes.params:
        config = replace(config, params={**config.params, **changes.params})
    return config


def _record(
    original: Node,
    trace: Trace,
    changes: ReplayChanges,
    setup: TurnSetup,
    sent: str,
    note_text: str,
) -> dict[str, Any]:
    """The ``replay`` metadata: the original, how it was sent, what changed."""
    document = trace.document
    changed: dict[str, Any] = {}
    config = _config(setup, changes)
    old_model = original.metadata.get("model") or document.get("model")
    # against the original, whatever made it differ (the session's model may have
    # changed since too)
    if config.model != old_model:
        changed["model"] = [old_model, config.model]
    if changes.profile is not None:
        changed["profile"] = [None, changes.profile]
    if "api_base" in document and config.api_base != document["api_base"]:
        changed["api_base"] = [document["api_base"], config.api_base]
    old_params = dict(document.get("params") or original.metadata.get("params") or {})
    params = {
        key: [old_params.get(key), value]
        for key, value in sorted(config.params.items())
        if old_params.get(key) != value
    }
    params.update(
        {key: [value, None] for key, value in old_params.items() if key not in config.params}
    )
    if params:
        changed["params"] = params
    if changes.templates:
        old_templates = document.get("templates") or {}
        changed["templates"] = {
            name: [(old_templates.get(name) or {}).get("origin", "package"), change.origin]
            for name, change in sorted(changes.templates.items())
        }
    if changes.lore_off or changes.lore_on:
        changed["lore"] = {"off": sorted(changes.lore_off), "on": sorted(changes.lore_on)}
    if changes.note is not None:
        changed["note"] = [note_text, changes.note]
    return {"of": original.id, "sent": sent, "changed": changed}


class _ReplayTrace(TraceBuilder):
    """A reroll's trace and metadata, with the ``replay`` record in both."""

    def __init__(self, setup: TurnSetup, record: dict[str, Any]) -> None:
        super().__init__("replay", setup)
        self.record = record

    def node_metadata(self, completion: Completion, extraction: Any) -> dict[str, Any]:
        return {**super().node_metadata(completion, extraction), "replay": self.record}

    def document(self, put_blob: Any, **parts: Any) -> dict[str, Any]:
        return {**super().document(put_blob, **parts), "replay": self.record}


class _Templates(Templates):
    """A session's templates with some replaced by the replay's sources (local files,
    trusted as the campaign's own templates are, compiled in the same sandbox; what fails
    while rendering them is a :class:`TemplateError` naming the file)."""

    def __init__(self, base: Templates, changes: Mapping[str, TemplateChange]) -> None:
        self.__dict__.update(base.__dict__)
        self._cache = dict(base._cache)
        self._replaced = set(changes)
        for name, change in changes.items():
            if name not in TEMPLATE_NAMES:
                raise TurnError(
                    f"no template named {name!r} to replace (known: {', '.join(TEMPLATE_NAMES)})"
                )
            try:
                template = self._env.from_string(change.source)
            except jinja2.TemplateSyntaxError as error:
                raise TemplateError(
                    f"template {change.origin} ({name}), line {error.lineno}: {error.message}"
                ) from None
            self._cache[name] = (template, UsedTemplate(name, change.origin, change.source))

    def render(self, name: str, context: Mapping[str, Any]) -> str:
        if name not in self._replaced:
            return super().render(name, context)
        try:
            return super().render(name, context)
        except TemplateError:
            raise
        except Exception as error:  # noqa: BLE001 - a file being tried out: anything it raises
            origin = self.used(name).origin
            raise TemplateError(f"template {origin} ({name}) failed: {error}") from None


class _Rebuilding(Engine):
    """The engine replaying a node with its prompt built again: a reroll of the node
    whose setup (model, templates), lore and author's note carry the changes."""

    def __init__(
        self,
        engine: Engine,
        original: Node,
        trace: Trace,
        changes: ReplayChanges,
        note_text: str,
    ) -> None:
        base = engine.setup
        templates = (
            _Templates(base.templates, changes.templates) if changes.templates else base.templates
        )
        setup = replace(
            base,
            model=_config(base, changes),
            templates=templates,
            # only the reply's model changes: extraction, summaries, planning as they were
            extraction_model=base.extractor,
            summary_model=base.summarizer,
            planner_model=base.plan_caller,
        )
        super().__init__(
            engine.store,
            setup,
            gateway=engine.gateway,
            planner=engine.planner,
            close_clients=False,
            rng=engine.rng,
        )
        self.changes = changes
        self.record = _record(original, trace, changes, base, "rebuilt", note_text)
        self._lore_on = _lore_entries(engine, changes)

    async def _load(self, state: TurnState) -> dict[str, Any]:
        loaded = await super()._load(state)
        anchor = loaded["anchor"]
        note = self.changes.note
        if note is not None:
            old = anchor.state.get("author_note")
            new = {**(old or {}), "text": note} if note.strip() else None
            anchor.state = {**anchor.state, "author_note": new}
            anchor.carried_note = True  # the reply's delta records the note it was made with
        return {**loaded, "trace": _ReplayTrace(self.setup, self.record)}

    async def _retrieve(self, state: TurnState) -> dict[str, Any]:
        found = await super()._retrieve(state)
        retrieval: Retrieval = found["retrieval"]
        off, on = self.changes.lore_off, self._lore_on
        hits = [hit for hit in retrieval.hits if hit.id not in off]
        have = {hit.id for hit in hits}
        hits.extend(hit for hit in on if hit.id not in have)
        details = {
            **retrieval.details,
            "replay": {"off": sorted(off), "on": sorted(self.changes.lore_on)},
        }
        return {**found, "retrieval": replace(retrieval, hits=hits, details=details)}


def _lore_entries(engine: Engine, changes: ReplayChanges) -> list[LoreHit]:
    """The hits of the entries switched on (and a check that every entry named is one
    of the session's)."""
    named = changes.lore_on | changes.lore_off
    if not named:
        return []
    from planner.lore import LorePlanner

    lore = engine.planner if isinstance(engine.planner, LorePlanner) else None
    unknown = sorted(entry_id for entry_id in named if lore is None or not lore.entry(entry_id))
    if unknown:
        known = ", ".join(sorted(lore.entry_ids)[:20]) if lore is not None else ""
        known = known or "none: the session has no lorebook"
        raise TurnError(f"no lore entry {', '.join(unknown)} in this session (entries: {known})")
    assert lore is not None
    hits = []
    for entry_id in sorted(changes.lore_on):
        entry = lore.entry(entry_id)
        assert entry is not None
        book = entry_id.rsplit(":", 1)[0]
        hits.append(lore.hit(book, entry, reason="switched on by a replay", via="replay"))
    return hits


async def _as_stored(
    engine: Engine,
    sid: str,
    original: Node,
    trace: Trace,
    changes: ReplayChanges,
    record: dict[str, Any],
    stored: _AsStored,
    on_event: OnEvent | None,
) -> TurnResult:
    """One reply to the original's exact messages, stored as its sibling."""
    store, setup = engine.store, engine.setup
    config = _config(setup, changes)
    anchor = stored.anchor
    completion = await engine.gateway.stream(config, trace.messages, on_event)
    if not completion.content.strip():
        raise TurnError(f"the model {config.model} answered nothing: nothing was stored")
    # the reply's model; the extraction's stays the session's (engine._postprocess)
    builder = _ReplayTrace(replace(setup, model=config, extraction_model=setup.extractor), record)
    state: TurnState = {"anchor": anchor, "completion": completion, "trace": builder}
    if on_event is not None:
        state["on_event"] = on_event
    extraction = (await engine._postprocess(state))["extraction"]
    delta = list(extraction.delta) if extraction is not None and extraction.ok else []
    delta.extend(op for op in original.delta if op.get("path") in _PROMPT_PATHS)
    metadata = builder.node_metadata(completion, extraction)
    for key in ("summary_through", "recaps"):
        if key in original.metadata:
            metadata[key] = original.metadata[key]
    warnings = []
    if completion.incomplete:
        warnings.append(f"the reply is incomplete ({completion.stopped_by})")
    if extraction is not None and not extraction.ok:  # as a turn's commit says it
        warnings.append(describe_failure(extraction))
    with store.transaction(sid) as tx, tx.journaled("reroll"):
        reply = tx.add_sibling(
            original.id,
            completion.content,
            name=original.name,
            metadata=metadata,
            delta=delta or None,
        )
        document = _document(trace.document, builder, completion, extraction, delta, tx.put_blob)
        digest = tx.put_trace(
            reply.id,
            messages=trace.messages,
            sources=stored.sources,
            history=stored.history,
            document=document,
            named=any(part.get("named") for part in trace.parts),
        )
    return TurnResult(
        node=reply,
        user_node=None,
        session=tx.session,
        completion=completion,
        extraction=extraction,
        warnings=warnings,
        messages_hash=digest,
    )


def _sources(trace: Trace, history: list[Message]) -> list[int | None]:
    """Which message of ``history`` each message of the trace is (runs of the history
    stored by reference again; ``None``: stored as a blob). A run that is not where it
    was is stored as blobs (the store checks each reference anyway)."""
    index = {message.id: i for i, message in enumerate(history)}
    sources: list[int | None] = []
    for part in trace.parts:
        if "run" not in part:
            sources.append(None)
            continue
        first, last, count = part["run"]
        start, end = index.get(first), index.get(last)
        if start is not None and end is not None and end - start + 1 == count:
            sources.extend(range(start, end + 1))
        else:
            sources.extend([None] * count)
    return sources


def _document(
    stored: Mapping[str, Any],
    builder: _ReplayTrace,
    completion: Completion,
    extraction: Any,
    delta: list[dict[str, Any]],
    put_blob: Any,
) -> dict[str, Any]:
    """The trace document of a reply sent as stored: the original's (its lore, note,
    trimming: the messages are the same) with this call's model, settings, answer and
    extraction."""
    document = copy.deepcopy(dict(stored))
    templates = dict(document.get("templates") or {})
    if extraction is not None:
        used = builder.setup.templates.used("extract")
        templates["extract"] = {"origin": used.origin, "blob": put_blob(used.source)}
    document.pop("continues", None)
    document.update(
        {
            "kind": "replay",
            **call_record(builder.setup, completion),
            "templates": templates,
            "postprocess": postprocess_record(builder.setup, completion, extraction),
            "delta": delta,
            "replay": builder.record,
        }
    )
    return document
