"""What the library reports through :mod:`logging`, shown by the command line.

Library code never prints: it logs (``clotho.lore`` warns when lore is found by
keywords only, ``clotho.api.warm`` says when a server is warming up...). A command
shows the warnings on stderr as one line each, ``warning: ...``, the way it shows its
own (:func:`show_warnings`); ``clotho serve`` hands uvicorn a logging configuration
(:func:`server_log_config`) in which Clotho's packages write ``clotho: ...`` lines,
warnings and the server's own notices, to stderr, in every worker process.

Some warnings help once, not on every command: lore found by keywords only (the
embedding model missing, the Chroma server down) is worth saying when it starts, not
before every turn. Such a warning carries a topic (``extra={"once": topic}``); within
:func:`said_once` (around building a session's engine, as the playing commands do) the
terminal shows it only when its text differs from the last one shown for its topic,
remembered in the data folder, and a topic not warned about within is forgotten: its
cause gone, its return is said again. Elsewhere (``lore test``, the imports, a server's
log) it is said every time: there it is the answer to what was asked.

A progress line (:func:`progress`: what is being done, on a terminal's stderr, erased
when it is done) is erased before any warning, so a warning never reads as the end of
it.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .style import paint

__all__ = [
    "ONCE",
    "PACKAGES",
    "SAID_FILE",
    "ServerFormatter",
    "clear_progress",
    "progress",
    "said_once",
    "server_log_config",
    "show_progress",
    "show_warnings",
]

#: The loggers of Clotho's packages (each module logs under its package's name).
PACKAGES = ("clotho", "orchestrator", "planner", "postprocess", "prompts", "mnemosyne")


#: The attribute of a record (``extra={ONCE: topic}``) naming the topic of a warning
#: said once per cause within :func:`said_once`.
ONCE = "once"
#: The file in the data folder that remembers, per topic, the last warning shown.
SAID_FILE = "warnings-said.json"

_SAID = TypeAdapter(dict[str, str])


class _Said:
    """The warnings said once: the last shown per topic (kept in a file), and the
    topics warned about since :func:`said_once` began."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.last = _SAID.validate_json(path.read_bytes())
        except (OSError, ValidationError):  # none yet, or unreadable: say it again
            self.last = {}
        self.seen: set[str] = set()
        self.changed = False

    def shown(self, topic: str, text: str) -> bool:
        """Whether the warning ``text`` of ``topic`` is to be shown now."""
        self.seen.add(topic)
        if self.last.get(topic) == text:
            return False
        self.last[topic] = text
        self.changed = True
        return True

    def forget_unseen(self) -> None:
        for topic in set(self.last) - self.seen:
            del self.last[topic]
            self.changed = True

    def save(self) -> None:
        if not self.changed:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            partial.write_bytes(_SAID.dump_json(self.last, indent=2))
            partial.replace(self.path)
        except OSError:  # a read-only folder: the warning is said again next time
            pass


_said: _Said | None = None
_progress_shown = False


@contextlib.contextmanager
def said_once(data_dir: Path) -> Iterator[None]:
    """Within: a warning with a topic (``extra={ONCE: topic}``) is shown only if it says
    something else than the last one shown for that topic (remembered in
    ``data_dir/`` :data:`SAID_FILE`, across commands); when the block ends without an
    error, a topic with no warning within is forgotten (its cause is gone: if it comes
    back, it is said again). Around what checks the causes every time (building a
    session's engine checks its lore index)."""
    global _said
    said = _Said(data_dir / SAID_FILE)
    _said = said
    try:
        yield
        said.forget_unseen()
    finally:
        _said = None
        said.save()


def show_progress(text: str) -> None:
    """``… text`` on stderr when it is a terminal, replacing the progress line shown."""
    global _progress_shown
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K" + paint(f"… {text}", "dim"))
        sys.stderr.flush()
        _progress_shown = True


def clear_progress() -> None:
    """Erase the progress line, if one is shown."""
    global _progress_shown
    if _progress_shown:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()
        _progress_shown = False


@contextlib.contextmanager
def progress(text: str) -> Iterator[None]:
    """A progress line while the block runs (:func:`show_progress`), erased after."""
    show_progress(text)
    try:
        yield
    finally:
        clear_progress()


class _Terminal(logging.Handler):
    """A record as one line on stderr, ``warning: ...`` (``error: ...``), painted; a
    warning with a topic once per cause within :func:`said_once`."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split())
            topic = getattr(record, ONCE, None)
            said = _said
            if isinstance(topic, str) and said is not None and not said.shown(topic, text):
                return
            clear_progress()
            line = f"{record.levelname.lower()}: {text}"
            sys.stderr.write(paint(line, "red" if record.levelno >= logging.ERROR else "yellow"))
            sys.stderr.write("\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging's contract: report, never raise
            self.handleError(record)


def show_warnings() -> None:
    """Show the warnings Clotho's packages log, on stderr (once per process; the
    stream is looked up at each line, so a test's captured stderr gets them)."""
    for name in PACKAGES:
        logger = logging.getLogger(name)
        if not any(isinstance(handler, _Terminal) for handler in logger.handlers):
            logger.addHandler(_Terminal(logging.WARNING))


class ServerFormatter(logging.Formatter):
    """A server's line: ``clotho: <message>``, ``clotho: warning: <message>`` from
    warnings up (a traceback after it, when the record has one)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        prefix = (
            "clotho: "
            if record.levelno < logging.WARNING
            else f"clotho: {record.levelname.lower()}: "
        )
        return prefix + record.getMessage()


def server_log_config() -> dict[str, Any]:
    """uvicorn's logging configuration, plus Clotho's packages at ``INFO`` on stderr
    (``--workers N``: each worker applies it)."""
    import uvicorn.config

    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["formatters"]["clotho"] = {"()": f"{__name__}.ServerFormatter"}
    config["handlers"]["clotho"] = {
        "class": "logging.StreamHandler",
        "formatter": "clotho",
        "stream": "ext://sys.stderr",
    }
    for name in PACKAGES:
        config["loggers"][name] = {"handlers": ["clotho"], "level": "INFO", "propagate": False}
    return config
