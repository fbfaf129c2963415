"""Putting a prompt together: the rendered parts, then the history, trimmed to fit.

The order is fixed: system (or the session's own system prompt), lore placed before
the character, character (the speaker's card), cast (in a story with several
characters: who speaks, and the others present; empty with one character), lore (the
rest), the player's persona, summary, state (each its own system message, left out
when it renders empty, so the parts that rarely change stay identical from turn to
turn), then the linear projection with any lore placed at a depth in it (in a story
with several characters, each reply with its speaker's name, ``named``), then what the
turn adds (an instruction to continue or to impersonate). The author's note goes
where it says (:mod:`prompts.note`).

A message of the projection with no text is left out of the prompt: a reply
interrupted before its first token was stored empty by older versions, and an empty
message says nothing to the model (some providers refuse it). The node stays in the
tree; the trace's history references skip it as they skip any message not sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mnemosyne import Message
from mnemosyne.traces import history_message

from ._templates import Templates

__all__ = [
    "PARTS",
    "PART_TEMPLATES",
    "SYSTEM_PROMPT_PART",
    "Injection",
    "Prompt",
    "TokenCounts",
    "fit",
    "history_message",
    "macros",
    "render_parts",
    "sent_text",
]

#: The head of every prompt, in order: (template, the context key it takes its ``lore``
#: from; ``None``: the context as it is).
PARTS: tuple[tuple[str, str | None], ...] = (
    ("system", None),
    ("lore", "lore_before"),
    ("character", None),
    ("cast", None),
    ("lore", "lore"),
    ("persona", None),
    ("summary", None),
    ("state", None),
)
#: The templates of the head, each once.
PART_TEMPLATES = tuple(dict.fromkeys(name for name, _ in PARTS))

_MACRO = re.compile(r"\{\{\s*(char|user)\s*\}\}", re.IGNORECASE)


def macros(text: str, *, char: str, user: str) -> str:
    """Substitute SillyTavern's ``{{char}}`` and ``{{user}}`` (any case, as it does)."""
    if "{{" not in text:
        return text
    names = {"char": char, "user": user}
    return _MACRO.sub(lambda match: names[match.group(1).lower()], text)


@dataclass(frozen=True)
class Prompt:
    """The messages of one model call and where each came from."""

    messages: list[dict[str, Any]]
    sources: list[int | None]
    """For each message, its index in the history, or ``None`` (a rendered part)."""
    parts: list[str] = field(default_factory=list)
    """The templates rendered into the head of the prompt, in order (empty ones left out)."""
    first_kept: int = 0
    """The index of the oldest history message sent (the ones before were trimmed)."""
    named: bool = False
    """The history's replies were sent with their speaker's name (:func:`history_message`)."""


#: The name of the first part when the session sets its own system prompt.
SYSTEM_PROMPT_PART = "system_prompt"


def render_parts(
    templates: Templates, context: Mapping[str, Any], *, system_prompt: str | None = None
) -> list[tuple[str, str]]:
    """The head of the prompt: ``(template, text)`` of each part that is not empty.

    ``system_prompt``: the session's own, in place of the ``system`` template (named
    :data:`SYSTEM_PROMPT_PART`); blank or ``None``: the template."""
    out = []
    for name, lore_key in PARTS:
        if name == "system" and system_prompt and system_prompt.strip():
            out.append((SYSTEM_PROMPT_PART, system_prompt.strip()))
            continue
        scope = context if lore_key in (None, "lore") else {**context, "lore": context[lore_key]}
        text = templates.render(name, scope)
        if text:
            out.append((name, text))
    return out


@dataclass(frozen=True)
class Injection:
    """A message placed inside the history (SillyTavern's "@ depth" lore)."""

    depth: int
    """0: after the newest history message; 1: before it; and so on."""
    role: str
    content: str


def assemble(
    parts: Sequence[tuple[str, str]],
    history: Sequence[Message],
    tail: Sequence[Mapping[str, Any]],
    *,
    first_kept: int = 0,
    injections: Sequence[Injection] = (),
    named: bool = False,
) -> Prompt:
    """The messages: the parts, the history from ``first_kept`` on (messages with no
    text left out; ``named``: replies with their speaker's name) with the injections
    in it, then ``tail``.

    An injection deeper than the history kept goes just before its oldest message.
    """
    messages = [{"role": "system", "content": text} for _, text in parts]
    sources: list[int | None] = [None] * len(messages)
    sent = [index for index in range(first_kept, len(history)) if history[index].content.strip()]
    kept = len(sent)
    at: dict[int, list[Injection]] = {}
    for injection in injections:
        at.setdefault(max(kept - max(injection.depth, 0), 0), []).append(injection)
    for offset, index in enumerate([*sent, None]):
        for injection in at.get(offset, ()):
            messages.append({"role": injection.role, "content": injection.content})
            sources.append(None)
        if index is not None:
            messages.append(history_message(history[index], named))
            sources.append(index)
    for message in tail:
        messages.append(dict(message))
        sources.append(None)
    return Prompt(messages, sources, [name for name, _ in parts], first_kept, named)


class TokenCounts:
    """The token count of each history message, computed once per tokenizer and kept.

    Keyed by tokenizer (a name), node id and whether replies go with their speaker's
    name, with the sent text's hash and length, so an edit in place is counted again.
    A message with no id yet (the player's, before the commit) is counted each time.
    One per process is enough (:data:`TOKEN_COUNTS`): every engine that plays a
    session's turns reads the same messages. Bounded: past ``limit`` entries, the older
    half is forgotten.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._counts: dict[tuple[str, str, bool], tuple[int, int, int]] = {}

    def counter(
        self, tokenizer: str, count: Callable[[str], int], *, named: bool = False
    ) -> Callable[[Message], int]:
        """Counts a message's text as it is sent (``named``: a reply with its speaker's
        name, :func:`sent_text`) with ``count`` (the tokenizer named ``tokenizer``),
        once per message, text and way of sending it."""
        counts = self._counts

        def count_message(message: Message) -> int:
            text = sent_text(message, named)
            if not message.id:
                return count(text)
            key = (tokenizer, message.id, named)
            kept = counts.get(key)
            if kept is not None and kept[0] == hash(text) and kept[1] == len(text):
                return kept[2]
            tokens = count(text)
            if len(counts) >= self.limit:
                for old in list(counts)[: self.limit // 2]:
                    del counts[old]
            counts[key] = (hash(text), len(text), tokens)
            return tokens

        return count_message


#: The counts kept in this process.
TOKEN_COUNTS = TokenCounts()


def sent_text(message: Message, named: bool = False) -> str:
    """The text a history message is sent with (``named``: a reply as ``Name: text``,
    :func:`history_message`): what its tokens are counted on."""
    if named and message.role == "assistant" and message.name:
        text: str = history_message(message, named)["content"]
        return text
    return message.content


def fit(
    history: Sequence[Message],
    budget: int,
    count: Callable[[Message], int],
    *,
    named: bool = False,
) -> int:
    """The index of the oldest history message that can be kept: the newest messages
    whose tokens add up to at most ``budget`` (each message costs the tokens of the
    text it is sent with, ``count(message)``, plus a few for its framing; ``named``:
    replies are sent with their speaker's name, :func:`sent_text`, so ``count`` must
    count them so too: a :meth:`TokenCounts.counter` made ``named``).

    Counting stops as soon as the budget is spent, and a history whose UTF-8 size is
    within the budget is not counted at all (a token is at least one byte; its size is
    summed from the newest message too, stopping past the budget), so the cost follows
    the window, not the length of the campaign; with a
    :class:`TokenCounts` counter, a message is tokenized once, not every turn.
    """
    if budget <= 0:
        return len(history)
    size = 0
    for index in range(len(history) - 1, -1, -1):
        size += _utf8_size(sent_text(history[index], named)) + FRAMING
        if size > budget:
            break
    else:
        return 0  # its bytes fit, so its tokens do
    spent = 0
    for index in range(len(history) - 1, -1, -1):
        spent += count(history[index]) + FRAMING
        if spent > budget:
            return index + 1
    return 0


def _utf8_size(text: str) -> int:
    """The UTF-8 size of a text, without encoding it when it is ASCII (Python knows
    that of every string at no cost)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


#: Tokens each message costs beyond its text (role and separators; OpenAI's own
#: accounting is 3 to 4).
FRAMING = 4
