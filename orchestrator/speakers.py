"""Who speaks: the speaker orders of a cast, and the check of a speaker the player names.

Pure functions of the cast (:class:`~orchestrator.Character` members, the first one the
session's character), who is present (the state's ``present``: ``None`` is everyone),
the player's message and who spoke last; the randomness is an injected
:class:`random.Random`, so every order is testable without a store.

The orders (``TurnSetup.speaker_order``):

- ``natural``, SillyTavern's (``activateNaturalOrder`` in its
  ``public/scripts/group-chats.js``): the members whose name has a word the message
  has (whole words, any case), in the order the message mentions them; then every
  other member, in shuffled order, if ``random() < talkativeness``; if no one was
  chosen, one at random among those with a talkativeness above 0 (else among all).
  With no player message (a reply), the last speaker is not chosen again unless no
  one else can speak.
- ``round_robin``: the member after the last one who spoke, in the cast's order.
- ``narrator``: one voice for everyone, named :data:`NARRATOR`.
- ``manual``: the first member who can speak (the player names the others).

Only members present and not muted speak. A session of one character always gives
that character.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from .errors import TurnError
from .setup import Character

__all__ = [
    "NARRATOR",
    "NARRATOR_CHARACTER",
    "eligible",
    "next_speakers",
    "present_names",
    "speaker_for",
]

#: The speaker of the ``narrator`` order: one voice for every character.
NARRATOR = "Narrator"
#: The narrator as the prompt sees it: no card of its own (the members present are in
#: its prompt's ``cast`` part).
NARRATOR_CHARACTER = Character(name=NARRATOR)

_WORD = re.compile(r"\w+")


def present_names(members: Sequence[Character], present: Sequence[str] | None) -> list[str]:
    """The members in the scene, in the cast's order (``present`` ``None``: all)."""
    if present is None:
        return [member.name for member in members]
    here = set(present)
    return [member.name for member in members if member.name in here]


def eligible(members: Sequence[Character], present: Sequence[str] | None) -> list[Character]:
    """The members who may speak: present and not muted, in the cast's order."""
    here = set(present_names(members, present))
    return [member for member in members if member.name in here and not member.muted]


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def next_speakers(
    members: Sequence[Character],
    present: Sequence[str] | None,
    order: str,
    *,
    text: str | None = None,
    last_speaker: str | None = None,
    rng: random.Random | None = None,
) -> list[str]:
    """Who answers the player's message ``text`` (``None``: who speaks next with no
    message), in order; empty if no one can. ``last_speaker``: the name on the newest
    reply of the story (``None``: no reply yet)."""
    if len(members) == 1:
        return [members[0].name]
    if order == "narrator":
        return [NARRATOR]
    can = eligible(members, present)
    if not can:
        return []
    if order == "manual":
        return [can[0].name]
    if order == "round_robin":
        names = [member.name for member in members]
        if last_speaker in names:
            start = names.index(last_speaker) + 1
            ring = [*members[start:], *members[:start]]
            return [next(member.name for member in ring if member in can)]
        return [can[0].name]
    return _natural(can, text, last_speaker, rng or random.Random())


def _natural(
    can: list[Character], text: str | None, last_speaker: str | None, rng: random.Random
) -> list[str]:
    banned = last_speaker if text is None else None
    choosable = [member for member in can if member.name != banned]
    chosen: list[str] = []
    if text:
        names = [(member.name, set(_words(member.name))) for member in choosable]
        for word in _words(text):
            for name, words in names:
                if word in words:
                    if name not in chosen:
                        chosen.append(name)
                    break
    shuffled = list(choosable)
    rng.shuffle(shuffled)
    chatty = []
    for member in shuffled:
        if rng.random() < member.talkativeness and member.name not in chosen:
            chosen.append(member.name)
        if member.talkativeness > 0:
            chatty.append(member)
    if not chosen:
        pool = chatty or can
        chosen.append(rng.choice(pool).name)
    return chosen


def speaker_for(
    members: Sequence[Character],
    present: Sequence[str] | None,
    order: str,
    name: str,
) -> Character:
    """The member who speaks as ``name`` (the exact name, else the only one matching it
    ignoring case; :data:`NARRATOR` in a cast of several: a narrator voicing everyone).

    Raises:
        TurnError: no member is named so, or it is muted, or it is not in the scene.
    """
    found = [member for member in members if member.name == name]
    if not found:
        found = [member for member in members if member.name.casefold() == name.casefold()]
    if len(found) != 1:
        if len(members) > 1 and name.casefold() == NARRATOR.casefold():
            return NARRATOR_CHARACTER
        cast = ", ".join(member.name for member in members)
        raise TurnError(f"no member of the cast is named {name!r} (the cast: {cast})")
    member = found[0]
    if len(members) == 1:
        return member
    if member.muted:
        raise TurnError(f"{member.name} is muted: a muted member never speaks (unmute it first)")
    here = present_names(members, present)
    if member.name not in here:
        who = ", ".join(here) if here else "no one"
        raise TurnError(
            f"{member.name} is not in the scene (present: {who}): let {member.name} join first"
        )
    return member
