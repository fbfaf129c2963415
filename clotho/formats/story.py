"""The story as a book: one branch (root -> HEAD, or -> any node) as Markdown or as one
self-contained HTML page.

Each message is a paragraph under its speaker's name (a node's own name, else the
session's names: the player for the player's messages, :mod:`clotho.formats.names`);
its roleplay formatting is kept (``*actions*`` stay italics). A narration node (role
``system``: a scene change, ``Bram leaves the scene.``) is an italic line of its own.
Hidden (disabled) messages are left out; the greeting is in. The HTML page may show each
speaker's picture (the cast's, kept with the session) inline as a ``data:`` image. State
notes, optional, are
a short line of what changed in the world (variables and who is present) since the
previous note (or since the start), after every ``state_every``-th message and after the
nodes named in ``state_at``.

The HTML page has inline CSS, no script and no external URL: every text (title, names,
messages) is escaped, and a message's Markdown is rendered by markdown-it with raw HTML,
links and images off, so a message holding ``<script>`` shows those characters.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from importlib.resources import files
from typing import Any, Literal

from jinja2 import Environment
from markdown_it import MarkdownIt
from markupsafe import Markup

from clotho.errors import ClothoError
from mnemosyne import Node, Store
from mnemosyne.state import BUILT_INS, diff_states

from .names import SessionNames

__all__ = ["Book", "Entry", "StoryExportError", "StoryFormat", "story_book"]

StoryFormat = Literal["md", "html"]
FORMATS: tuple[StoryFormat, ...] = ("md", "html")
#: What a state note tells (the rest of the state, lore timers and the summary, is not
#: the story's news).
NOTED = ("present",)
#: How long a value in a state note may be before it is cut.
NOTE_VALUE_CHARS = 60

_MARKDOWN = MarkdownIt("commonmark", {"html": False}).disable(["image", "link", "autolink"])
_TEMPLATES = Environment(autoescape=True, keep_trailing_newline=True)


class StoryExportError(ClothoError, ValueError):
    """The story cannot be exported as asked (a format it is not written in, a noted
    node not on the branch, a negative count)."""

    code = "invalid_story_export"


@dataclass(frozen=True)
class Entry:
    """One paragraph of the book."""

    kind: Literal["message", "narration", "state"]
    text: str
    speaker: str | None = None
    node_id: str | None = None
    picture: str | None = None
    """The speaker's picture (a PNG, base64), shown by the HTML page only."""


@dataclass(frozen=True)
class Book:
    """A branch as a book: its title and its paragraphs in order."""

    title: str
    entries: list[Entry]

    @property
    def messages(self) -> int:
        """How many messages (narration included) the book tells."""
        return sum(entry.kind != "state" for entry in self.entries)

    def markdown(self) -> str:
        """The book as Markdown: ``# title``, each message under ``**Speaker**``."""
        parts = [f"# {_md_escape(self.title)}"]
        for entry in self.entries:
            if entry.kind == "message":
                parts.append(f"**{_md_escape(entry.speaker or '')}**")
                parts.append(_fences_closed(entry.text.strip()) or "\u00a0")
            elif entry.kind == "narration":
                parts.append(f"*{_md_escape(entry.text.strip())}*")
            else:
                parts.append(f"> {_md_escape(entry.text)}")
        return "\n\n".join(parts) + "\n"

    def html(self) -> str:
        """The book as one self-contained HTML page (inline CSS, no script, no URL)."""
        template = _TEMPLATES.from_string(
            files("clotho.formats").joinpath("story.html.j2").read_text(encoding="utf-8")
        )
        return template.render(
            title=self.title,
            entries=[{**asdict(entry), "body": _html_body(entry)} for entry in self.entries],
        )

    def render(self, format: StoryFormat) -> str:
        """The book in ``format`` (``md`` or ``html``)."""
        return self.html() if format == "html" else self.markdown()


def story_format(name: str) -> StoryFormat:
    """A format's name checked (``md``, ``markdown``, ``html``, ``htm``).

    Raises:
        StoryExportError: any other.
    """
    lowered = name.lower().lstrip(".")
    if lowered in ("md", "markdown"):
        return "md"
    if lowered in ("html", "htm"):
        return "html"
    raise StoryExportError(f"format {name!r}: a story is written as md or html")


def story_book(
    store: Store,
    session_id: str,
    head: str | None = None,
    *,
    names: SessionNames | None = None,
    state_every: int = 0,
    state_at: Sequence[str] = (),
    picture: Callable[[str], bytes | None] | None = None,
) -> Book:
    """The path root -> ``head`` (default HEAD) of a session as a book. A message with
    no name of its own is named by ``names`` (default: the names the session was given).
    ``picture``: a speaker's picture (PNG bytes) by name, or ``None`` (the caller's
    reading of the cast's pictures, :func:`clotho.stories.session_avatar`); each message
    carries its speaker's.

    Raises:
        StoryExportError: ``state_every`` below 0, a node of ``state_at`` not on the path.
        mnemosyne.MnemosyneError: unknown session or node.
    """
    if state_every < 0:
        raise StoryExportError(f"state_every {state_every}: a count of messages, 0 or more")
    tree = store.tree(session_id)
    session = tree.session
    target = store.node(session.id, head).id if head else session.head_id
    path = tree.path(target)[::-1] if target else []
    on_path = {node.id for node in path}
    noted = {store.node(session.id, ref).id for ref in state_at}
    if missing := sorted(noted - on_path):
        raise StoryExportError(f"state note at {missing[0]}: not on the exported branch")
    speaking = names or SessionNames.resolve(metadata=session.metadata)
    before: dict[str, Any] = store.schema(session.id).initial_state()
    entries: list[Entry] = []
    faces: dict[str, str | None] = {}
    told = 0
    for node in path:
        if node.enabled:
            entry = _entry(node, speaking)
            if picture is not None and entry.speaker is not None:
                if entry.speaker not in faces:
                    png = picture(entry.speaker)
                    faces[entry.speaker] = base64.b64encode(png).decode() if png else None
                entry = replace(entry, picture=faces[entry.speaker])
            entries.append(entry)
            told += 1
        if node.id in noted or (state_every and node.enabled and told % state_every == 0):
            after = asdict(store.state(session.id, node.id))
            entries.append(Entry("state", _note(diff_states(before, after)), node_id=node.id))
            before = after
    return Book(session.title or session.id[:8], entries)


def _entry(node: Node, names: SessionNames) -> Entry:
    if node.role == "system":
        return Entry("narration", node.content, node_id=node.id)
    return Entry("message", node.content, node.name or names.of(node.role), node.id)


def _note(changes: dict[str, list[Any]]) -> str:
    shown = [
        f"{path}: {_value(old)} → {_value(new)}"
        for path, (old, new) in changes.items()
        if path in NOTED or path not in BUILT_INS
    ]
    return "State: " + ("; ".join(shown) if shown else "no change")


def _value(value: Any) -> str:
    text = "—" if value is None else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= NOTE_VALUE_CHARS else text[: NOTE_VALUE_CHARS - 1] + "…"


#: A line opening or closing a fenced code block (CommonMark: up to three spaces, then
#: three or more backticks or tildes; a backtick fence's info string has no backtick).
_FENCE = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})(.*)$")


def _fences_closed(text: str) -> str:
    """A message whose fenced code block is left open closed after it, so that it does
    not swallow the rest of the book as code."""
    opened: str | None = None
    for line in text.splitlines():
        found = _FENCE.match(line)
        if found is None:
            continue
        fence, rest = found.groups()
        if opened is None:
            opened = fence
        elif fence[0] == opened[0] and len(fence) >= len(opened) and not rest.strip():
            opened = None
    return text if opened is None else f"{text}\n{opened}"


def _md_escape(text: str) -> str:
    """Text that Markdown shows as it is (a name, a title, a narration line)."""
    return "".join("\\" + c if c in "\\`*_[]<>#|" else c for c in " ".join(text.split()))


def _html_body(entry: Entry) -> Markup:
    if entry.kind == "message":
        return Markup(_MARKDOWN.render(entry.text))  # raw HTML, links and images off
    return Markup.escape(entry.text)
