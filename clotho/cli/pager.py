"""Long output through a pager, as git does.

On a terminal, output longer than the screen goes through ``$CLOTHO_PAGER``, else
``$PAGER``, else ``less`` (run by the shell, so a pager may take arguments); ``LESS``
is set to ``FRX`` unless it is set already (colours pass, an output that fits after all
is just printed, the screen is not cleared on exit). A pager variable set to nothing
or to ``cat`` means no pager. Printed directly: with ``enabled=False`` (``--no-pager``),
off a terminal (a pipe, a file), or when the output fits; also when the pager cannot
start or fails (exits non-zero), so nothing is lost. A pager quit early (``q``) ends the
output quietly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

from .cells import terminal_size
from .style import out

__all__ = ["page", "pager_command"]


def pager_command() -> str | None:
    """The pager to run (a shell command), ``None`` for none."""
    for variable in ("CLOTHO_PAGER", "PAGER"):
        if variable in os.environ:
            command = os.environ[variable].strip()
            return None if command in ("", "cat") else command
    return "less"


def page(lines: Sequence[str], *, enabled: bool = True) -> None:
    """Print ``lines``, through the pager if they are longer than the screen."""
    command = pager_command() if enabled and sys.stdout.isatty() else None
    if command is not None and len(lines) >= terminal_size().lines and _through(command, lines):
        return
    try:
        out(*lines)
        sys.stdout.flush()
    except BrokenPipeError:  # `clotho log | head`: the reader has what it wanted
        _stdout_to_null()


def _through(command: str, lines: Sequence[str]) -> bool:
    """``lines`` shown by ``command``; ``False`` if it could not start or failed."""
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    data = "".join(line + "\n" for line in lines).encode(sys.stdout.encoding or "utf-8", "replace")
    sys.stdout.flush()
    try:  # the user's own command, run by the shell as git runs it
        pager = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=env)
    except OSError:
        return False
    # Ctrl+C belongs to the pager while it runs (less stays, as under git).
    ignoring = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if ignoring else None
    try:
        pager.communicate(data)  # a pager quit before reading it all (q) is no error
    finally:
        if ignoring:
            signal.signal(signal.SIGINT, previous)
    return pager.returncode <= 0  # a signal (negative) ended it: the player's doing, not a failure


def _stdout_to_null() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit raises nothing."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)
