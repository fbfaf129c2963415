"""A client written from docs/api.md and /openapi.json alone, as an integrator would
(it imports nothing of Clotho): against a real `clotho serve` on loopback, it creates a
session, appends messages, reads the story a window at a time, edits with If-Match, meets
a 412 made by another writer and recovers from the problem's versions. Every answer is
checked against what the document declares for its operation: the status, the body's
schema (the Problem for errors), the ETag."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from tests.api._server import running

PROBLEM = "application/problem+json"


class DocsClient:
    """What docs/api.md describes, over httpx; each answer checked against /openapi.json."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0
        )
        self.document = self.http.get("/openapi.json").json()
        self.paths = [
            (re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"), path)
            for path in self.document["paths"]
        ]

    def close(self) -> None:
        self.http.close()

    def _schema(self, schema: dict[str, Any]) -> Draft202012Validator:
        return Draft202012Validator({"components": self.document["components"], **schema})

    def call(self, method: str, path: str, **given: Any) -> httpx.Response:
        """The answer, once it is what the document says this operation answers."""
        answer = self.http.request(method, path, **given)
        template = next(t for pattern, t in self.paths if pattern.match(answer.url.path))
        operation = self.document["paths"][template][method.lower()]
        declared = operation["responses"].get(str(answer.status_code))
        assert declared is not None, f"{method} {template}: {answer.status_code} undeclared"
        media = answer.headers.get("content-type", "").split(";")[0]
        if answer.status_code >= 400:
            assert media == PROBLEM
        if "ETag" in declared.get("headers", {}):
            assert re.fullmatch(r'"[0-9]+"', answer.headers["etag"])
        if answer.status_code != 304 and media in declared.get("content", {}):
            schema = declared["content"][media]["schema"]
            self._schema(schema).validate(answer.json())
        return answer

    # the session: POST /api/sessions answers a write's document, the session in `session`
    def create_session(self, title: str) -> tuple[str, str]:
        answer = self.call("POST", "/api/sessions", json={"title": title})
        assert answer.status_code == 201
        return answer.json()["session"]["id"], answer.headers["etag"]

    def append(self, sid: str, role: str, content: str, etag: str | None = None) -> str:
        """A message under HEAD; the new ETag."""
        headers = {"If-Match": etag} if etag else {}
        answer = self.call(
            "POST",
            f"/api/sessions/{sid}/messages",
            json={"role": role, "content": content},
            headers=headers,
        )
        assert answer.status_code == 201, answer.text
        return answer.headers["etag"]

    def story(self, sid: str, limit: int) -> list[dict[str, Any]]:
        """The whole projection, a window at a time, following `next` until it is null;
        every window of the same version (the ETag)."""
        windows: list[list[dict[str, Any]]] = []
        url: str | None = f"/api/sessions/{sid}/projection?limit={limit}"
        tags = set()
        while url is not None:
            answer = self.call("GET", url)
            assert answer.status_code == 200
            body = answer.json()
            assert len(body["nodes"]) <= limit
            windows.insert(0, body["nodes"])
            tags.add(answer.headers["etag"])
            url = body["next"]
        assert len(tags) == 1
        return [node for window in windows for node in window]

    def rewrite(self, sid: str, node_id: str, content: str, etag: str) -> httpx.Response:
        return self.call(
            "POST",
            f"/api/sessions/{sid}/edits",
            json={"operations": [{"op": "rewrite", "node_id": node_id, "content": content}]},
            headers={"If-Match": etag},
        )


def test_a_client_written_from_the_docs_plays_its_part(tmp_path: Path) -> None:
    with running(f"sqlite:///{tmp_path / 'clotho.db'}", tmp_path / "data") as server:
        assert server.token is not None
        client = DocsClient(server.url, server.token)
        other = DocsClient(server.url, server.token)  # another writer of the same session
        try:
            sid, etag = client.create_session("The docs' campaign")
            lines = [("user", "I enter the inn."), ("assistant", "The innkeeper nods.")] * 3
            for role, content in lines:
                etag = client.append(sid, role, content, etag)

            story = client.story(sid, limit=2)  # three windows
            assert [(n["role"], n["content"]) for n in story] == lines
            assert client.call("GET", f"/api/sessions/{sid}").headers["etag"] == etag
            cached = client.call(
                "GET", f"/api/sessions/{sid}/projection", headers={"If-None-Match": etag}
            )
            assert cached.status_code == 304

            first = story[0]["id"]
            edited = client.rewrite(sid, first, "I enter the tavern.", etag)
            assert edited.status_code == 200
            assert edited.json()["results"][0]["action"] == "rewrite"
            etag = edited.headers["etag"]

            other.append(sid, "user", "Someone else speaks.")  # the session moves on
            stale = client.rewrite(sid, first, "I enter the inn again.", etag)
            assert stale.status_code == 412
            problem = stale.json()
            assert problem["code"] == "conflict"
            assert f'"{problem["expected_version"]}"' == etag
            now = f'"{problem["current_version"]}"'
            assert stale.headers["etag"] == now
            assert client.story(sid, limit=2)[0]["content"] == "I enter the tavern."  # unchanged

            retried = client.rewrite(sid, first, "I enter the inn again.", now)
            assert retried.status_code == 200
            assert client.story(sid, limit=10)[0]["content"] == "I enter the inn again."
            assert client.story(sid, limit=10)[-1]["content"] == "Someone else speaks."
        finally:
            client.close()
            other.close()
