"""Lore by meaning on a Chroma server: the scale-out path, tested for real.

The server is ``chroma run`` (the command the chromadb package installs) on a loopback
port, started once for the test session by the ``chroma_server`` fixture
(``tests/_chroma.py``); the embeddings are Clotho's default local model. The index is
used directly (:class:`planner.vectors.LoreIndex` with ``url=``) and as a player selects
it, through ``CLOTHO_CHROMA_URL`` with ``clotho lore test``. Each test uses books of its
own names, so the shared server's collections do not meet.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import httpx
import pytest
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.config import Settings

from planner.lorebook import Lorebook, parse_world_info
from planner.vectors import LoreIndex, collection_name

CLOTHO = shutil.which("clotho", path=str(Path(sys.executable).parent)) or "clotho"

WOLVES: dict[str, Any] = {
    "uid": 0,
    "key": ["shadowfang"],
    "comment": "Shadowfangs",
    "content": "Black wolves that hunt in packs through the forest after dusk; their howls "
    "carry for miles and travellers bar their doors.",
    "vectorized": True,
}
FERRY: dict[str, Any] = {
    "uid": 1,
    "key": ["ferry"],
    "comment": "The Lowmere ferry",
    "content": "A flat barge pulled across the river on a rope for one silver coin.",
    "vectorized": True,
}
HOWLING = "What is that howling out in the dark woods tonight?"
"""Shares no key with either entry; means the wolves."""


@pytest.fixture(autouse=True, scope="module")
def _close_chroma_http_sessions() -> Iterator[None]:
    """chromadb 1.5's HTTP client never closes its httpx session (its system's stop
    leaves it; a dropped client's sockets are then reclaimed by the collector, which
    warns in whatever test it runs): close them once this module is done."""
    yield
    for system in list(SharedSystemClient._identifier_to_system.values()):
        for component in list(system._instances.values()):
            session = getattr(component, "_session", None)
            if isinstance(session, httpx.Client):
                session.close()
    SharedSystemClient.clear_system_cache()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def book(name: str) -> Lorebook:
    return parse_world_info({"entries": {"0": WOLVES, "1": FERRY}}, name)


def server_collections(url: str) -> set[str]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    client = chromadb.HttpClient(
        host=host, port=int(port), settings=Settings(anonymized_telemetry=False)
    )
    return {c.name for c in client.list_collections()}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_index_lives_on_the_server(chroma_server: str) -> None:
    north = book(unique("North"))
    first = LoreIndex(url=chroma_server)
    report = first.sync(north)
    assert (report.added, report.unchanged) == (2, 0)
    assert collection_name(north.name) in server_collections(chroma_server)
    assert not any(text in HOWLING.lower() for text in ("shadowfang", "ferry"))
    hits = first.query([north], [HOWLING], n=1)
    assert [(hit.book, hit.uid) for hit in hits] == [(north.name, 0)]

    # Another client (another process, say) finds the same collection, already embedded.
    second = LoreIndex(url=chroma_server)
    assert second.sync(north).unchanged == 2
    assert [hit.uid for hit in second.query([north], [HOWLING], n=1)] == [0]
    assert second.drop(north.name)
    assert collection_name(north.name) not in server_collections(chroma_server)


class Clotho:
    """``clotho`` against a fresh SQLite database, its data folder in ``tmp_path``."""

    def __init__(self, tmp_path: Path, chroma_url: str) -> None:
        home = tmp_path / "home"
        self.data = home / "data" / "clotho"
        self.env = {
            **os.environ,
            "CLOTHO_DATABASE_URL": f"sqlite:///{tmp_path / 'chroma.db'}",
            "CLOTHO_CHROMA_URL": chroma_url,
            "HOME": str(home),
            "XDG_DATA_HOME": str(home / "data"),
            "NO_COLOR": "1",
        }
        for name in ("CLOTHO_SESSION", "CLOTHO_VECTORS", "CLOTHO_EMBEDDING_MODEL"):
            self.env.pop(name, None)

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [CLOTHO, *args], env=self.env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    def lore_test(self, tmp_path: Path, text: str) -> tuple[dict[int, str], str]:
        """Import the wolves-and-ferry book, then ``lore test TEXT``: the reasons by uid,
        and what was said on stderr."""
        path = tmp_path / f"{unique('north')}.json"
        path.write_text(json.dumps({"entries": {"0": WOLVES, "1": FERRY}}), encoding="utf-8")
        self("session", "new")
        self("import", "lorebook", str(path))
        done = self("--json", "lore", "test", text)
        return {row["uid"]: row["reason"] for row in json.loads(done.stdout)}, done.stderr


def test_lore_test_finds_an_entry_by_meaning_through_the_server(
    chroma_server: str, tmp_path: Path
) -> None:
    clotho = Clotho(tmp_path, chroma_server)
    before = server_collections(chroma_server)
    fired, said = clotho.lore_test(tmp_path, HOWLING)
    assert said == ""  # no warning: nothing fell back to keywords
    assert list(fired) == [0]
    assert "similar" in fired[0]
    assert len(server_collections(chroma_server) - before) == 1  # the book's, on the server
    assert not (clotho.data / "lore-index").exists()  # and nothing in the data folder


def test_with_the_server_down_lore_is_found_by_keywords_with_a_warning(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{closed_port()}"
    clotho = Clotho(tmp_path, down)
    fired, said = clotho.lore_test(tmp_path, "A ferry waits at the river; wolves howl.")
    assert fired == {1: "key 'ferry' in message 0"}
    assert "keywords only" in said and down in said
    assert len(said.strip().splitlines()) == 1
