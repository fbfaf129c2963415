"""GET /api/sessions/{id}/events: a session's changes live, from real `clotho serve`
processes (SQLite; two servers on one PostgreSQL), resumable, ended by a shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import queue
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.concurrency import run_in_threadpool

from mnemosyne import Store
from mnemosyne.events import POLL_S

from ._server import Server, running

_names = itertools.count()


class Watcher:
    """A client reading a session's event stream in a thread: ``(event, id, data)``."""

    def __init__(self, server: Server, sid: str, headers: dict[str, str] | None = None) -> None:
        self.client = httpx.Client(
            base_url=server.url,
            headers={"Authorization": f"Bearer {server.token}"},
            timeout=httpx.Timeout(30.0, read=60.0),
        )
        self.events: queue.Queue[tuple[str, str, dict[str, Any]] | None] = queue.Queue()
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(sid, headers or {}), daemon=True)
        self.thread.start()

    def _read(self, sid: str, headers: dict[str, str]) -> None:
        kind, ident, data = "message", "", ""
        try:
            with self.client.stream("GET", f"/api/sessions/{sid}/events", headers=headers) as r:
                assert r.status_code == 200, r.read()
                assert r.headers["content-type"].startswith("text/event-stream")
                for line in r.iter_lines():
                    if line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("id:"):
                        ident = line[3:].strip()
                    elif line.startswith("data:"):
                        data = line[5:].strip()
                    elif line == "" and data:
                        self.events.put((kind, ident, json.loads(data)))
                        kind, ident, data = "message", "", ""
        except httpx.HTTPError:
            pass
        finally:
            self.ended.set()
            self.events.put(None)

    def next(self, timeout: float = 15.0) -> tuple[str, str, dict[str, Any]]:
        found = self.events.get(timeout=timeout)
        assert found is not None, "the stream ended"
        return found

    def close(self) -> None:
        self.client.close()


@contextlib.contextmanager
def watching(server: Server, sid: str, **headers: str) -> Iterator[Watcher]:
    watcher = Watcher(server, sid, {k.replace("_", "-"): v for k, v in headers.items()})
    try:
        yield watcher
    finally:
        watcher.close()


def _session(client: httpx.Client) -> str:
    answer = client.post("/api/sessions", json={"title": "live"})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["session"]["id"])


def _say(client: httpx.Client, sid: str, text: str) -> dict[str, Any]:
    answer = client.post(f"/api/sessions/{sid}/messages", json={"role": "user", "content": text})
    assert answer.status_code in (200, 201), answer.text
    return dict(answer.json())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("events")
    with running(f"sqlite:///{folder / 'clotho.db'}", folder / "data") as up:
        yield up


def test_a_write_from_another_client_arrives_as_it_commits(site: Server) -> None:
    with site.client() as client:
        sid = _session(client)
        with watching(site, sid) as watcher:
            assert watcher.next() == ("ready", "0", {"session_id": sid, "version": 0, "head": None})
            _say(client, sid, "I open the door.")
            kind, ident, data = watcher.next()
            node = data["head"]
            assert (kind, ident) == ("change", "1")
            assert data["kind"] == "turn" and data["added"] == [node] and data["session_id"] == sid
            assert "I open the door." not in json.dumps(data)  # ids, never texts
            operations = [{"op": "rewrite", "node_id": node, "content": "I knock."}]
            edited = client.post(f"/api/sessions/{sid}/edits", json={"operations": operations})
            assert edited.status_code == 200, edited.text
            kind, ident, data = watcher.next()
            assert (kind, ident, data["kind"], data["action"]) == ("change", "2", "edit", "rewrite")
            assert data["changed"] == [node]
            assert client.post(f"/api/sessions/{sid}/undo").status_code == 200
            kind, ident, data = watcher.next()
            assert (kind, ident, data["kind"], data["action"]) == ("change", "3", "undo", "rewrite")


def test_resuming_after_an_id_sends_what_came_since_or_a_reset(site: Server) -> None:
    with site.client() as client:
        sid = _session(client)
        for i in range(4):
            _say(client, sid, f"line {i}")
        with watching(site, sid, Last_Event_ID="2") as watcher:
            assert watcher.next()[:2] == ("ready", "2")
            assert [watcher.next()[1] for _ in range(2)] == ["3", "4"]
        with watching(site, sid, Last_Event_ID="4") as watcher:  # up to date
            assert watcher.next()[:2] == ("ready", "4")
            _say(client, sid, "more")
            assert watcher.next()[:2] == ("change", "5")
        with watching(site, sid, Last_Event_ID="99") as watcher:  # never was: start again
            assert watcher.next()[:2] == ("ready", "5")
            assert watcher.next() == ("reset", "5", {"session_id": sid, "version": 5})
        # the query parameter, for a client that cannot set the header
        with client.stream("GET", f"/api/sessions/{sid}/events?last_event_id=3") as answer:
            lines = answer.iter_lines()
            seen = [line for line in itertools.islice(lines, 12) if line.startswith("id:")][:3]
        assert seen == ["id: 3", "id: 4", "id: 5"]


def test_refusals_before_the_stream(site: Server) -> None:
    with site.client() as client:
        sid = _session(client)
        bare = httpx.get(f"{site.url}/api/sessions/{sid}/events", timeout=10)
        assert bare.status_code == 401 and bare.json()["code"] == "unauthorized"
        missing = client.get("/api/sessions/0123456789abcdef/events")
        assert missing.status_code == 404
        bad = client.get(f"/api/sessions/{sid}/events", headers={"Last-Event-ID": "x1"})
        assert bad.status_code == 400 and bad.json()["code"] == "bad_last_event_id"


def test_a_server_stopping_ends_its_streams(tmp_path: Path) -> None:
    with running(f"sqlite:///{tmp_path / 'clotho.db'}", tmp_path / "data") as server:
        with server.client() as client:
            sid = _session(client)
        with watching(server, sid) as watcher:
            assert watcher.next()[0] == "ready"
            started = time.monotonic()
            os.killpg(server.process.pid, signal.SIGTERM)
            assert watcher.ended.wait(10), "the stream outlived the server"
            server.process.wait(timeout=10)
            assert time.monotonic() - started < 10
        assert (
            "Waiting for connections to close" not in server.stderr
            or server.process.returncode == 0
        )


@pytest.fixture
def pg_url(postgres_server: str) -> Iterator[str]:
    import psycopg

    def admin(statement: str) -> None:
        with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    name = f"clotho_events_{os.getpid()}_{next(_names)}"
    admin(f"CREATE DATABASE {name}")
    url = f"{postgres_server}/{name}"
    Store.open(url, migrate=True).close()
    yield url
    admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.postgres
def test_two_servers_on_one_postgresql_deliver_each_others_writes(
    pg_url: str, tmp_path: Path
) -> None:
    with (
        running(pg_url, tmp_path / "a", name="a") as writer,
        running(pg_url, tmp_path / "b", name="b") as reader,
        writer.client() as client,
    ):
        sid = _session(client)
        with watching(reader, sid) as watcher, watching(writer, sid) as own:
            assert watcher.next()[:2] == ("ready", "0") and own.next()[:2] == ("ready", "0")
            for i in range(3):
                _say(client, sid, f"line {i}")
            for stream in (watcher, own):  # the other server's stream, and the writer's own
                got = [stream.next() for _ in range(3)]
                assert [(k, i) for k, i, _ in got] == [
                    ("change", "1"),
                    ("change", "2"),
                    ("change", "3"),
                ]
                assert all(data["added_count"] == 1 for _, _, data in got)


def test_a_session_trashed_then_purged_ends_its_stream(site: Server) -> None:
    with site.client() as client:
        sid = _session(client)
        with watching(site, sid) as watcher:
            assert watcher.next()[0] == "ready"
            assert client.delete(f"/api/sessions/{sid}").status_code == 200
            kind, ident, data = watcher.next()
            assert (kind, ident, data["kind"]) == ("change", "1", "trash")
            assert client.delete(f"/api/trash/sessions/{sid}").status_code in (200, 204)
            assert watcher.ended.wait(10), "the stream of a purged session went on"


def test_a_write_wakes_only_the_streams_of_its_session_once_per_version(store: Store) -> None:
    from clotho.api.events import Hub

    one, two = store.create_session().id, store.create_session().id

    async def run() -> None:
        hub = Hub(store)
        first, second = hub.subscribe(one), hub.subscribe(two)
        try:
            await asyncio.sleep(POLL_S * 1.5)
            first.clear(), second.clear()  # (a poller's first look at a session wakes it)
            await run_in_threadpool(store.append, one, "user", "hello")
            await asyncio.wait_for(first.wait(), 10)  # its commit here wakes it at once
            assert not second.is_set()  # the other session's stream sleeps on
            first.clear()
            version = store.session(one).version
            hub._wake(one, version)  # its notification (or poll) after the commit here
            assert not first.is_set()  # woken once for that version
            await asyncio.sleep(POLL_S * 2.5)  # polls (SQLite), or the notification
            assert not first.is_set() and not second.is_set()
        finally:
            await hub.aclose()

    asyncio.run(run())


def test_the_apps_lifespan_stops_what_listens_for_its_streams(
    make_client: Any, monkeypatch: pytest.MonkeyPatch, store: Store
) -> None:
    async def ends(*_args: Any) -> bool:  # the stream ends after ready (TestClient would
        return True  # never end it: it sends no disconnect before the response is done)

    monkeypatch.setattr("clotho.api.events._wait", ends)
    client = make_client()
    sid = store.create_session().id
    answer = client.get(f"/api/sessions/{sid}/events")
    assert answer.status_code == 200 and "event: ready" in answer.text
    hub = client.app.state.live_events  # type: ignore[attr-defined]
    assert (hub.listener.thread is not None) == (store.dialect == "postgresql")
    assert (hub.poller is not None) == (store.dialect == "sqlite")
    client.__exit__(None, None, None)  # the lifespan ends
    assert hub.listener.thread is None or not hub.listener.thread.is_alive()
    assert hub.poller is None or hub.poller.done()
    assert hub.unhook is None
    assert not [t for t in threading.enumerate() if t.name == "clotho-events"]
