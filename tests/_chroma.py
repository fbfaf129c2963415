"""A throwaway Chroma server for the test session.

Started as a player would start one, with the ``chroma`` command the chromadb package
installs (``chroma run --path DIR --host 127.0.0.1 --port PORT``), on a free loopback port
with its data in a temporary directory; stopped and removed at the end.
``CLOTHO_TEST_CHROMA_URL`` names an existing server instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ENV_URL = "CLOTHO_TEST_CHROMA_URL"
START_TIMEOUT = 60.0
"""Seconds the server has to answer its heartbeat."""


def find_chroma() -> Path | None:
    """The ``chroma`` command beside the running Python, else on the PATH."""
    found = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")
    return Path(found) if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _log_tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:] if log.exists() else ""


@contextlib.contextmanager
def throwaway_server() -> Iterator[str]:
    """Start a server; yield its URL (``http://127.0.0.1:PORT``) once it answers.

    Raises:
        FileNotFoundError: no ``chroma`` command.
        RuntimeError: the server exited or did not answer within ``START_TIMEOUT``.
    """
    chroma = find_chroma()
    if chroma is None:
        raise FileNotFoundError("no `chroma` command (the chromadb package installs it)")
    root = Path(tempfile.mkdtemp(prefix="clotho-chroma-"))
    log = root / "server.log"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "NO_COLOR": "1"}
    command = [str(chroma), "run", "--path", str(root / "data")]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    try:
        _wait_until_up(process, url, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)


def _wait_until_up(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"chroma run exited with {process.returncode} before answering: {_log_tail(log)}"
            )
        try:
            if httpx.get(f"{url}/api/v2/heartbeat", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(
        f"chroma run did not answer at {url} within {START_TIMEOUT:.0f} s: {_log_tail(log)}"
    )
