"""Several server processes on one PostgreSQL database lose no update: clients of two
`clotho serve` processes (and of one `clotho serve --workers 2`) write to one session at
once, each with `If-Match: "<the version it last saw>"`; the version check refuses every
stale write with a clean 412, and every accepted write is in the tree, in order."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemosyne import Store

from ._server import Server, running

pytestmark = pytest.mark.postgres

APPENDERS = 3  # threads appending messages, per server
APPENDS = 6  # messages each appender gets accepted
EDITORS = 1  # threads applying edit batches, per server
BATCHES = 3  # batches each editor gets accepted
MAX_TRIES = 300  # attempts per accepted write before the test gives up
_names = itertools.count()


@pytest.fixture
def pg_url(postgres_server: str) -> Iterator[str]:
    """A new PostgreSQL database, migrated (skipped with the reason without a server, a
    failure under CI=true: see ``postgres_server``)."""
    import psycopg

    def admin(statement: str) -> None:
        with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    name = f"clotho_workers_{os.getpid()}_{next(_names)}"
    admin(f"CREATE DATABASE {name}")
    url = f"{postgres_server}/{name}"
    Store.open(url, migrate=True).close()
    yield url
    admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@dataclass
class Accepted:
    """A write the server took: what it was, and the version it made."""

    kind: str  # "append" or "edits"
    version: int
    node_id: str | None
    parent_id: str | None
    content: str


@dataclass
class Record:
    accepted: list[Accepted] = field(default_factory=list)
    refused: list[tuple[int, dict[str, Any], str | None]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refuse(self, response: httpx.Response) -> int:
        """A 412 (or 409) refusal, checked clean; the current version it names."""
        body = response.json()
        with self.lock:
            self.refused.append((response.status_code, body, response.headers.get("etag")))
        return int(body["current_version"])


def write(
    server: Server,
    sid: str,
    record: Record,
    start: threading.Barrier,
    tag: str,
    edits: str | None,
) -> None:
    """Get ``APPENDS`` messages (or ``BATCHES`` edit batches on node ``edits``) accepted,
    each sent with the version last seen, retried on refusal with the version named."""
    goal = BATCHES if edits else APPENDS
    done, tries, seen = 0, 0, 1
    try:
        with server.client() as api:
            start.wait(timeout=60)
            while done < goal:
                tries += 1
                if tries > goal * MAX_TRIES:
                    raise AssertionError(f"{tag}: {done} of {goal} writes in {tries} tries")
                content = f"{tag}-{done}"
                headers = {"If-Match": f'"{seen}"'}
                if edits is None:
                    body: dict[str, Any] = {"role": "user", "content": content}
                    response = api.post(f"/api/sessions/{sid}/messages", json=body, headers=headers)
                else:
                    operations = [
                        {"op": "rewrite", "node_id": edits, "content": f"{content}-a"},
                        {"op": "toggle", "node_id": edits},
                        {"op": "toggle", "node_id": edits},
                        {"op": "rewrite", "node_id": edits, "content": content},
                    ]
                    response = api.post(
                        f"/api/sessions/{sid}/edits",
                        json={"operations": operations},
                        headers=headers,
                    )
                if response.status_code in (409, 412):
                    seen = record.refuse(response)
                    continue
                expected = 201 if edits is None else 200
                if response.status_code != expected:
                    raise AssertionError(f"{tag}: {response.status_code} {response.text}")
                answer = response.json()
                version = answer["session"]["version"]
                assert version == seen + 1, (tag, seen, answer)
                assert response.headers["etag"] == f'"{version}"'
                node = (answer["nodes"] or [{}])[0] if edits is None else {}
                with record.lock:
                    record.accepted.append(
                        Accepted(
                            "append" if edits is None else "edits",
                            version,
                            node.get("id"),
                            node.get("parent_id"),
                            content,
                        )
                    )
                seen, done = version, done + 1
    except BaseException as error:  # noqa: BLE001 - reported by the test, not lost
        with record.lock:
            record.failures.append(f"{tag}: {error!r}")
        with contextlib.suppress(threading.BrokenBarrierError):
            start.abort()


def hammer(servers: list[Server]) -> None:
    """Every thread of every server writes to one session at once; then the checks."""
    with servers[0].client() as api:
        sid = api.post("/api/sessions", json={"title": "contended"}).json()["session"]["id"]
        root = api.post(f"/api/sessions/{sid}/messages", json={"role": "system", "content": "go"})
        assert root.status_code == 201, root.text
        root_id = root.json()["nodes"][0]["id"]
    record = Record()
    jobs = [
        (server, f"s{s}-{kind}{t}", root_id if kind == "e" else None)
        for s, server in enumerate(servers)
        for kind, count in (("a", APPENDERS), ("e", EDITORS))
        for t in range(count)
    ]
    start = threading.Barrier(len(jobs))
    threads = [
        threading.Thread(target=write, args=(server, sid, record, start, tag, edits))
        for server, tag, edits in jobs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a writer hung"
    assert record.failures == []
    check(servers[-1], sid, root_id, record, len(servers))


def check(server: Server, sid: str, root_id: str, record: Record, servers: int) -> None:
    appends = [a for a in record.accepted if a.kind == "append"]
    batches = [a for a in record.accepted if a.kind == "edits"]
    assert len(appends) == servers * APPENDERS * APPENDS
    assert len(batches) == servers * EDITORS * BATCHES
    # Every refusal was a clean problem document naming the current version.
    assert record.refused, "no write was refused: the writers did not contend"
    for status, body, tag in record.refused:
        assert status == 412 and body["code"] == "conflict", body
        assert body["type"].endswith("/conflict") and body["status"] == 412
        assert tag == f'"{body["current_version"]}"'
        assert body["current_version"] != body["expected_version"]
    # Each accepted write made one new version: 1 (the root) + one per write, no gap.
    versions = sorted(a.version for a in record.accepted)
    assert versions == list(range(2, 2 + len(record.accepted)))
    with server.client() as api:
        session = api.get(f"/api/sessions/{sid}").json()
        tree = api.get(f"/api/sessions/{sid}/tree").json()
        projection = api.get(f"/api/sessions/{sid}/projection").json()
        root = api.get(f"/api/sessions/{sid}/nodes/{root_id}").json()
    assert session["version"] == 1 + len(record.accepted)
    # No lost node: every accepted message is in the tree, nothing else is.
    nodes = {node["id"]: node for node in tree["nodes"]}
    assert set(nodes) == {root_id} | {a.node_id for a in appends}
    for a in appends:
        assert nodes[a.node_id]["content"] == a.content
    # The path is consistent: each message went under the one accepted before it.
    previous = root_id
    for a in sorted(appends, key=lambda a: a.version):
        assert a.parent_id == previous == nodes[a.node_id]["parent_id"]
        previous = a.node_id
    assert session["head_id"] == previous
    path = [node["id"] for node in projection["nodes"]]
    assert path == [root_id] + [a.node_id for a in sorted(appends, key=lambda a: a.version)]
    # The batches were applied whole, in order: the last one accepted wrote last.
    last = max(batches, key=lambda a: a.version)
    assert root["content"] == last.content and root["enabled"] is True


def test_two_servers_on_one_database_lose_no_update(pg_url: str, tmp_path: Path) -> None:
    with (
        running(pg_url, tmp_path / "one", name="one") as one,
        running(pg_url, tmp_path / "two", name="two") as two,
    ):
        hammer([one, two])


def test_one_server_with_two_workers_loses_no_update(pg_url: str, tmp_path: Path) -> None:
    with running(pg_url, tmp_path / "data", "--workers", "2") as served:
        workers = children(served.process.pid)
        assert len(workers) >= 2, workers
        hammer([served, served])


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the workers of a server)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found
