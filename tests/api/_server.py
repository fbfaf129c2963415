"""`clotho serve` as a real process on loopback, for the tests that need one: started
with the environment a user would give it, ready once `GET /api/health` answers,
always stopped (with the workers it started) at the end."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

TOKEN = "server-test-token-5e1f0a"
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_env(data_dir: Path, *, token: str | None = TOKEN, model_url: str | None = None) -> dict:
    """The environment of a server: its data folder, no lore vectors, the model (if any)
    on loopback, no stray ``CLOTHO_*`` variables of the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOTHO_")}
    env.update(
        {
            "CLOTHO_DATA_DIR": str(data_dir),
            "CLOTHO_CONFIG_DIR": str(data_dir / "config"),
            "CLOTHO_VECTORS": "false",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "NO_COLOR": "1",
            "HOME": str(data_dir / "home"),
        }
    )
    if token is not None:
        env["CLOTHO_API_TOKEN"] = token
    if model_url is not None:
        env.update(
            {"CLOTHO_MODEL": "openai/gm", "CLOTHO_API_BASE": model_url, "CLOTHO_API_KEY": "x"}
        )
    return env


def serve_command(database_url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "clotho", "--db", database_url, "serve", *args]


@dataclass
class Server:
    """A running `clotho serve`: its URL, its token and what it wrote on stderr."""

    url: str
    token: str | None
    process: subprocess.Popen[bytes]
    log: Path
    data_dir: Path

    @property
    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def client(self, **given: Any) -> httpx.Client:
        """A client of the server, sending its token."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0, **given)


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until ``GET /api/health`` answers 200 (the process ending first is a failure)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"clotho serve ended ({process.returncode}) before it was ready:\n"
                + log.read_text(errors="replace")
            )
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/api/health", timeout=2.0).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"clotho serve did not answer in {START_TIMEOUT_S:.0f} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server and everything it started (it leads its own process group)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError):  # workers left behind, if any
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=15)


@contextlib.contextmanager
def running(
    database_url: str,
    data_dir: Path,
    *args: str,
    token: str | None = TOKEN,
    model_url: str | None = None,
    name: str = "serve",
) -> Iterator[Server]:
    """`clotho --db URL serve --port <free> ARGS...`, ready; stopped at the end."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = data_dir / f"{name}-{port}.log"
    env = serve_env(data_dir, token=token, model_url=model_url)
    with log.open("wb") as sink:
        process = subprocess.Popen(
            serve_command(database_url, "--port", str(port), *args),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process, log)
        yield Server(url, token, process, log, data_dir)
    finally:
        stop(process)


@contextlib.contextmanager
def running_with_model(model: Any, folder: Path) -> Iterator[Server]:
    """A model server (a :class:`~orchestrator.loopback.ModelServer`, not yet started) and
    `clotho serve` on a fresh SQLite database in ``folder`` using it as its model."""
    with (
        model as started,
        running(f"sqlite:///{folder / 'clotho.db'}", folder / "data", model_url=started.url) as up,
    ):
        yield up


@dataclass(frozen=True)
class Event:
    """One server-sent event, with when it arrived (``time.monotonic()``)."""

    event: str
    data: Any
    at: float


def events(response: httpx.Response) -> Iterator[Event]:
    """The events of a ``text/event-stream`` response as they arrive (comments, such as
    keep-alives, skipped)."""
    kind, data = "message", []
    for line in response.iter_lines():
        if not line:
            if data:
                yield Event(kind, json.loads("\n".join(data)), time.monotonic())
            kind, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            kind = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").removeprefix(" "))
