"""Regex keys with catastrophic backtracking over HTTP: `POST .../lore/test` answers
with the key reported as skipped (`?skipped=true`), a good key still fires, and a real
`clotho serve` answers `GET /api/health` while the bomb is being matched."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from ._server import running

BOMB = "/(a|a)*$/"
"""Exponential in ``regex`` on a long run of ``a`` (``/(a+)+$/`` is cut short by it)."""
TEXT = "A dragon lands. " + "a" * 60 + "!"
"""Unbounded, the bomb would take longer than anyone waits on this."""


def book(bombs: int) -> bytes:
    """Entry 0 fires on dragons; entries 1.. are bombs, each its own key."""
    entries: dict[str, Any] = {"0": {"uid": 0, "key": ["/dra(g|k)on/i"], "content": "Dragons."}}
    for uid in range(1, bombs + 1):
        key = BOMB if uid == 1 else f"/(a|a)*b{{0,{uid}}}$/"
        entries[str(uid)] = {"uid": uid, "key": [key], "content": f"Bomb {uid}."}
    return json.dumps({"entries": entries}).encode()


def test_lore_test_reports_a_slow_key_as_skipped(client: TestClient) -> None:
    sid = client.post("/api/sessions", json={}).json()["session"]["id"]
    imported = client.post(
        f"/api/sessions/{sid}/imports/lorebook", params={"name": "bombs"}, content=book(1)
    )
    assert imported.status_code == 200, imported.text
    fired = client.post(f"/api/sessions/{sid}/lore/test", json={"text": TEXT})
    assert fired.status_code == 200, fired.text
    assert [row["uid"] for row in fired.json()] == [0]
    explained = client.post(
        f"/api/sessions/{sid}/lore/test", params={"skipped": "true"}, json={"text": TEXT}
    ).json()
    assert [row["uid"] for row in explained["fired"]] == [0]
    (skip,) = explained["skipped"]
    assert skip["book"] == "bombs" and skip["uid"] == 1
    assert skip["reason"].startswith(f"regex {BOMB} took longer than ")
    assert skip["reason"].endswith(" ms and was skipped for this scan")


def test_health_answers_while_a_regex_bomb_is_matched(tmp_path: Path) -> None:
    """Thirty bombs: the lore test spends the scan's whole budget for regexes, matching
    with the GIL released; health checks sent meanwhile answer at once."""
    with (
        running(f"sqlite:///{tmp_path / 'clotho.db'}", tmp_path / "data") as server,
        server.client() as api,
    ):
        sid = api.post("/api/sessions", json={}).json()["session"]["id"]
        imported = api.post(
            f"/api/sessions/{sid}/imports/lorebook", params={"name": "bombs"}, content=book(30)
        )
        assert imported.status_code == 200, imported.text
        answers: list[Any] = []

        def lore_test() -> None:
            with server.client() as other:
                answers.append(
                    other.post(
                        f"/api/sessions/{sid}/lore/test",
                        params={"skipped": "true"},
                        json={"text": TEXT},
                    )
                )

        worker = threading.Thread(target=lore_test)
        worker.start()
        waits: list[float] = []
        while worker.is_alive():
            start = time.monotonic()
            assert api.get("/api/health").status_code == 200
            waits.append(time.monotonic() - start)
            time.sleep(0.01)
        worker.join()
        (answer,) = answers
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert [row["uid"] for row in body["fired"]] == [0]
        assert sorted(row["uid"] for row in body["skipped"]) == list(range(1, 31))
        assert all(
            "skipped for this scan" in row["reason"] or "spent" in row["reason"]
            for row in body["skipped"]
        )
        assert waits and max(waits) < 1.0, waits


def test_lore_test_uses_the_engine_the_sessions_turns_use(
    make_client: Any,
) -> None:
    """With a model configured, the lore test reads the session's lore through the engine
    the server keeps for its turns (built once), not one built and dropped per request."""
    from orchestrator.loopback import ModelServer

    with ModelServer(lambda request: "unused") as model:
        client = make_client(model)
        sid = client.post("/api/sessions", json={}).json()["session"]["id"]
        client.post(f"/api/sessions/{sid}/imports/lorebook", params={"name": "b"}, content=book(0))
        context = client.app.state.clotho
        assert sid not in context._engines
        for _ in range(2):
            fired = client.post(f"/api/sessions/{sid}/lore/test", json={"text": "A dragon."})
            assert [row["uid"] for row in fired.json()] == [0]
        assert sid in context._engines  # kept for the turns, and for the next preview
