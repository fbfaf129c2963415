"""A turn in a story with a cast of several: who speaks (read from the store), the
``cast`` part's context, the lore of absent owners, recaps of what a member missed.

The orders themselves are :mod:`orchestrator.speakers` (pure); what a member witnessed
is :mod:`orchestrator.scenes` (pure); this is what the turn loop
(:mod:`orchestrator.turn`) calls them with.
"""

from __future__ import annotations

import dataclasses
import random
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from mnemosyne import Message, Node, Session, TurnStore, WorldState
from planner import Retrieval
from prompts import FRAMING, macros

from .errors import TurnError
from .gateway import Gateway
from .scenes import Scope
from .setup import Character, TurnSetup
from .speakers import next_speakers, present_names, speaker_for

__all__ = [
    "KEPT_RECAPS",
    "UNSEEN",
    "Unnamed",
    "cast_context",
    "choose_speaker",
    "last_recaps",
    "owned_lore",
    "recap_missed",
    "scoped",
    "speakers_at",
    "teller",
    "unnamed",
]

#: How many recaps an engine keeps (the oldest forgotten first).
KEPT_RECAPS = 512


def choose_speaker(
    store: TurnStore,
    session: Session,
    parent_id: str | None,
    kind: str,
    named: str | None,
    where: dict[str, Any],
    setup: TurnSetup,
    rng: random.Random | None = None,
) -> Character:
    """Who the reply of a turn of ``kind`` is written as (``where``: what
    :func:`orchestrator.turn.locate_turn` found, the nodes it read included). A reroll
    or a continue keeps the speaker of the reply it replaces or extends; a say, an edit
    or a reply takes the one ``named`` (the request's ``speaker``; no order is rolled),
    else the first of the speaker order. A session of one character: that character,
    always (a named speaker must be it). Impersonate: the session's character (the line
    is the player's). In a cast of several, the world state at ``parent_id`` is read
    once, into ``where["state"]`` (the turn's anchor takes it from there).

    Raises:
        TurnError: another speaker named for a reroll or continue; an unknown, muted or
            absent speaker; no one who can speak.
    """
    members = setup.members
    if kind == "impersonate":
        return setup.character
    sid = session.id
    if len(members) == 1:
        if named is not None:
            speaker_for(members, None, setup.speaker_order, named)
        return setup.character
    state: WorldState | None = where.get("state")
    if state is None and parent_id is not None:
        state = where["state"] = store.state(sid, parent_id)
    present = state.present if state is not None else None
    kept: Node | None = where.get("replaces") if kind == "reroll" else where.get("continues")
    name = named
    if kept is not None:
        old = kept.name
        if old is not None:
            if name is not None and name.casefold() != old.casefold():
                raise TurnError(
                    f"node {kept.id} is {old}'s reply: a {kind} keeps its speaker ({old}), "
                    f"not {name}"
                )
            name = old
    if name is None:
        text = where.get("user_text") if kind != "reply" else None
        answers: Node | None = where.get("answers")
        if text is None and kind == "continue" and answers is not None:
            text = answers.content  # the player's message it answers
        names = speakers_at(store, session, parent_id, text, setup, rng, present=present)
        if not names:
            raise TurnError(
                "no one can speak: every member of the cast is absent or muted "
                "(let someone join the scene, or unmute someone)"
            )
        name = names[0]
    return speaker_for(members, present, setup.speaker_order, name)


_UNREAD: Any = object()


def speakers_at(
    store: TurnStore,
    session: Session,
    at: str | None,
    text: str | None,
    setup: TurnSetup,
    rng: random.Random | None,
    *,
    present: Any = _UNREAD,
) -> list[str]:
    """:func:`orchestrator.speakers.next_speakers` at node ``at`` of the story (who is
    present there read from the store unless given, and who spoke last)."""
    members = setup.members
    if len(members) == 1:
        return [members[0].name]
    sid = session.id
    if present is _UNREAD:
        present = store.state(sid, at).present if at is not None else None
    last = None
    if at is not None and setup.speaker_order in ("natural", "round_robin"):
        last = store.last_speaker(sid, at)
    order = setup.speaker_order
    return next_speakers(members, present, order, text=text, last_speaker=last, rng=rng)


#: Why a speaker's prompt was trimmed with no summary (``trimmed.summary.skipped``).
UNSEEN = (
    "the speaker was away from part of the story: the story's summary would tell what it "
    "did not see, so the oldest messages it saw are dropped"
)


def owned_lore(
    retrieval: Retrieval, members: tuple[Character, ...], present: list[str] | None
) -> tuple[Retrieval, list[dict[str, Any]]]:
    """The hits of ``retrieval`` less those from a book whose owners (the members whose
    own book it is) are all absent; and those left out, with why."""
    here = set(present_names(members, present))
    owners: dict[str, list[str]] = {}
    for member in members:
        for book in member.books:
            owners.setdefault(book, []).append(member.name)
    kept, left_out = [], []
    for hit in retrieval.hits:
        owned_by = owners.get(hit.book or "")
        if owned_by and not here.intersection(owned_by):
            who = ", ".join(owned_by)
            left_out.append(
                {"id": hit.id, "book": hit.book, "owners": owned_by, "reason": f"absent: {who}"}
            )
        else:
            kept.append(hit)
    if not left_out:
        return retrieval, []
    return dataclasses.replace(retrieval, hits=kept), left_out


def teller(message: Message) -> str:
    """Who a message is told as in a summary or a recap: its speaker's name, else
    ``narration`` (a system line), else its role."""
    return message.name or ("narration" if message.role == "system" else message.role)


def _named(head: str, prefix: str) -> int | None:
    """How far ``head`` begins with ``prefix`` (casefolded), ignoring case: the length
    of that beginning in ``head`` (a casefold may change a text's length: ``ß`` is
    ``ss``); ``-1``: ``head`` is too short to tell, and may still; ``None``: it does not."""
    folded = ""
    for index, char in enumerate(head):
        folded += char.casefold()
        if len(folded) >= len(prefix):
            return index + 1 if folded == prefix else None
        if not prefix.startswith(folded):
            return None
    return -1


def unnamed(text: str, speaker: str) -> str:
    """A reply without the ``Speaker:`` a model may begin it with (it saw every reply
    of the history sent so, :func:`mnemosyne.traces.history_message`)."""
    head = text.lstrip()
    size = _named(head, f"{speaker}:".casefold())
    if size is not None and size > 0 and head[size:].strip():
        return head[size:].lstrip()
    return text


class Unnamed:
    """A turn's event callback that passes the reply's tokens on as :func:`unnamed`
    stores the reply: the first ones are held until it is clear whether they begin with
    ``Speaker:``, which is then left out. Other events pass at once. :meth:`flush` at
    the end of the stream gives what is still held."""

    def __init__(self, on_event: Callable[[str, str], None], speaker: str) -> None:
        self.on_event = on_event
        self.prefix = f"{speaker}:".casefold()
        self.held = ""
        self.deciding = True

    def __call__(self, kind: str, text: str) -> None:
        if kind != "token" or not self.deciding:
            self.on_event(kind, text)
            return
        self.held += text
        head = self.held.lstrip()
        size = _named(head, self.prefix)
        if size == -1:
            return  # it may still be the name
        if size is not None:
            rest = head[size:]
            if not rest.strip():
                return  # the name, and nothing yet after it
            self.held, self.deciding = "", False
            self.on_event(kind, rest.lstrip())
            return
        held, self.held, self.deciding = self.held, "", False
        self.on_event(kind, held)

    def flush(self) -> None:
        """Pass on what is held (a stream that ended while it was deciding)."""
        if self.held:
            held, self.held, self.deciding = self.held, "", False
            self.on_event("token", held)


def cast_context(
    setup: TurnSetup, speaker: Character, present: list[str] | None, reply_role: str
) -> dict[str, Any]:
    """The ``cast`` template's context: in a cast of several, the others present (each
    card's ``{{char}}`` its own name) and whether the speaker is the narrator (everyone
    voiced); for the player's line (``player``: an impersonation), everyone present,
    and no character is voiced; with one character, nothing (``group`` false: the part
    renders empty)."""
    if len(setup.members) < 2:
        return {"group": False, "narrator": False, "player": False, "cast": []}
    user = setup.player
    here = set(present_names(setup.members, present))
    players_line = reply_role == "user"
    others = []
    for member in setup.members:
        if member.name in here and (players_line or member.name != speaker.name):
            text = member.as_context(lambda t, n=member.name: macros(t, char=n, user=user))
            others.append(
                {
                    "name": member.name,
                    "description": text["description"],
                    "personality": text["personality"],
                }
            )
    narrating = speaker not in setup.members and not players_line
    return {"group": True, "narrator": narrating, "player": players_line, "cast": others}


def scoped(setup: TurnSetup, speaker: Character, reply_role: str) -> bool:
    """Whether the reply's prompt holds only what its speaker witnessed: a member of a
    cast of several (not the narrator, who sees everything; not the player's line)."""
    return len(setup.members) > 1 and reply_role == "assistant" and speaker in setup.members


def last_recaps(store: TurnStore, session_id: str, scope: Scope, speaker: str) -> list[Any]:
    """The recaps kept on ``speaker``'s newest reply of its view (metadata ``recaps``,
    :attr:`Scope.told`): what it was told of the runs it missed, as far as then."""
    for message in reversed(scope.history):
        if message.role == "assistant" and message.name == speaker and message.id:
            told = store.node(session_id, message.id).metadata.get("recaps")
            return told if isinstance(told, list) else []
    return []


def _told(stored: Sequence[Any]) -> dict[tuple[str, str, int], str]:
    """Stored recaps by run (first, last, count); anything not so shaped is skipped."""
    runs: dict[tuple[str, str, int], str] = {}
    for item in stored:
        covers = item.get("covers") if isinstance(item, dict) else None
        if isinstance(covers, dict) and isinstance(item.get("recap"), str):
            first, last, size = covers.get("first"), covers.get("last"), covers.get("count")
            if isinstance(first, str) and isinstance(last, str) and isinstance(size, int):
                runs[(first, last, size)] = item["recap"]
    return runs


async def recap_missed(
    scope: Scope,
    speaker: str,
    session_id: str,
    setup: TurnSetup,
    gateway: Gateway,
    kept: OrderedDict[tuple[str, str, str, str, int], str],
    *,
    stored: Callable[[], Sequence[Any]] = lambda: (),
    preview: bool = False,
) -> None:
    """Each ``away`` line of ``speaker``'s prompt (``scope``) with a recap of the run it
    stands for (``TurnSetup.recap_missed``): the one in ``kept`` (by session, speaker
    and run), else one kept on the speaker's last reply (``stored()``, called once, at
    the first run ``kept`` does not hold: :func:`last_recaps`), else a call to the
    summary model (a preview makes none). It is written from the newest messages of the
    run that fit in half the model's window; the calls made go to ``scope.recaps`` (the
    trace's), every recap used to ``scope.told`` (the reply's)."""
    name, model = speaker, setup.summarizer
    count = gateway.counter(model)
    room = gateway.context_window(model) // 2
    runs: dict[tuple[str, str, int], str] | None = None
    for at, start, end in scope.gaps:
        run = scope.path[start:end]
        key = (session_id, name, run[0].id, run[-1].id, end - start)
        recap = kept.get(key)
        if recap is None:
            runs = _told(stored()) if runs is None else runs
            recap = runs.get(key[2:])
            if recap is not None:
                kept[key] = recap
        if recap is None and preview:
            continue
        if recap is None:
            told: list[dict[str, Any]] = []
            spent = 0
            for message in reversed(run):
                if not message.content.strip():
                    continue
                spent += count(message.content) + FRAMING
                if spent > room and told:
                    break
                told.append({"speaker": teller(message), "content": message.content})
            scope_vars = {
                "char": name,
                "user": setup.player,
                "messages": told[::-1],
                "words": max(setup.summary_words // 3, 40),
            }
            messages = [{"role": "user", "content": setup.templates.render("recap", scope_vars)}]
            answer = await gateway.complete(model, messages)
            recap = answer.content.strip()
            kept[key] = recap
            while len(kept) > KEPT_RECAPS:
                kept.popitem(last=False)
            scope.recaps.append(
                {
                    "covers": [run[0].id, run[-1].id],
                    "model": model.model,
                    "messages": messages,
                    "output": recap,
                    "usage": answer.usage,
                    "latency_ms": round(answer.latency_ms, 2),
                }
            )
        covers = {"first": run[0].id, "last": run[-1].id, "count": end - start}
        scope.told.append({"covers": covers, "recap": recap})
        text = setup.templates.render("away", {"char": name, "user": setup.player, "recap": recap})
        scope.history[at] = Message("", "system", None, text)
