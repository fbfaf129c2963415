"""What the library reports through :mod:`logging`, shown by the command line.

Library code never prints: it logs (``clotho.lore`` warns when lore is found by
keywords only, ``clotho.api.warm`` says when a server is warming up...). A command
shows the warnings on stderr as one line each, ``warning: ...``, the way it shows its
own (:func:`show_warnings`); ``clotho serve`` hands uvicorn a logging configuration
(:func:`server_log_config`) in which Clotho's packages write ``clotho: ...`` lines,
warnings and the server's own notices, to stderr, in every worker process.
"""

from __future__ import annotations

import copy
import logging
import sys
from typing import Any

from .style import paint

__all__ = ["PACKAGES", "ServerFormatter", "server_log_config", "show_warnings"]

#: The loggers of Clotho's packages (each module logs under its package's name).
PACKAGES = ("clotho", "orchestrator", "planner", "postprocess", "prompts", "mnemosyne")


class _Terminal(logging.Handler):
    """A record as one line on stderr, ``warning: ...`` (``error: ...``), painted."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = record.levelname.lower()
            line = f"{level}: {' '.join(record.getMessage().split())}"
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
