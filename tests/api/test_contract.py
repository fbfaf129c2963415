"""The API's contract is what the server does: /openapi.json is a valid OpenAPI 3.1
document in which every operation declares each status it can answer, errors with the one
Problem schema; every declared status can be made to happen; the flows here answer no
status that is not declared, every error validates against Problem, and an ETag comes
exactly where one is declared. If-Match compares strongly, If-None-Match weakly. /docs
works offline."""

from __future__ import annotations

import hashlib
import importlib
import json
import pkgutil
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from openapi_spec_validator import validate

from clotho.api import create_app
from clotho.api.problems import (
    CODES,
    MEDIA_TYPE,
    ApiError,
    Problem,
    codes_table,
    error_classes,
)
from clotho.web import STATIC
from mnemosyne import Store
from orchestrator.loopback import ModelServer, Reply
from tests._fixtures import CHAT, ELDORIA, SERAPHINA
from tests.api.conftest import TOKEN, api_settings

LIMIT = 1024 * 1024  # the upload limit of these tests' server
UNKNOWN = "fedcba987654"  # no session, node or turn has this id
#: swagger-ui-dist 5.35.0's files, as the vendor folder's README lists them.
SWAGGER_UI_SHA256 = {
    "swagger-ui-bundle.js": "e6a898692f2d768e807c3ba4626068a69a2c5dd960dd6c76f3e4d3a3de180af2",
    "swagger-ui.css": "5ed08757e53da3e026d6cbecc61fe5d43585c9560b302d534ad56692519a273d",
    "swagger-ui-favicon.png": "3ed612f41e050ca5e7000cad6f1cbe7e7da39f65fca99c02e99e6591056e5837",
}
#: Success answers without a schema (none may join).
KNOWN_WITHOUT_SCHEMA = {
    "GET /api/sessions/{session_id}/exports/chat",  # JSON Lines: SillyTavern's format
}


class Contract:
    """The document, and the check every answer of a test client goes through."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.seen: list[tuple[str, str, int]] = []
        self.templates = [
            (re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"), path)
            for path in document["paths"]
        ]

    def operation(self, method: str, path: str) -> tuple[str, dict[str, Any]] | None:
        for pattern, template in self.templates:
            if pattern.match(path):
                found = self.document["paths"][template].get(method.lower())
                if found is not None:
                    return template, found
        return None

    def check(self, response: httpx.Response) -> None:
        response.read()
        request = response.request
        found = self.operation(request.method, request.url.path)
        if found is None:  # the page, /docs, /openapi.json, or no such route
            if response.status_code >= 400:
                self.problem(response)
            return
        template, operation = found
        status = str(response.status_code)
        self.seen.append((request.method, template, response.status_code))
        declared = operation["responses"]
        assert status in declared, (
            f"{request.method} {template} answered {status}, which it does not declare "
            f"({sorted(declared)}): {response.text[:300]}"
        )
        if response.status_code >= 400:
            self.problem(response)
        elif status.startswith("2") and response.headers.get("content-type", "").startswith(
            "application/json"
        ):
            headers = declared[status].get("headers", {})
            assert ("ETag" in headers) == ("etag" in response.headers), (
                f"{request.method} {template} {status}: ETag declared {'ETag' in headers}, "
                f"sent {response.headers.get('etag')}"
            )

    @staticmethod
    def problem(response: httpx.Response) -> None:
        assert response.headers["content-type"] == MEDIA_TYPE, response.text[:200]
        body = Problem.model_validate_json(response.content)
        assert body.status == response.status_code


@pytest.fixture
def contract_app(tmp_path: Path) -> Iterator[Callable[..., tuple[TestClient, Contract]]]:
    """``make(auth=True, **settings)``: a client of an app over a SQLite store whose every
    answer is checked against the app's OpenAPI document."""
    store = Store.open(f"sqlite:///{tmp_path / 'contract.db'}")
    clients: list[TestClient] = []

    def make(
        server: ModelServer | None = None, *, auth: bool = True, **given: Any
    ) -> tuple[TestClient, Contract]:
        given.setdefault("max_upload_bytes", LIMIT)
        if server is not None:
            given.update(model="openai/gm", api_base=server.url, api_key="x")
        app = create_app(api_settings(tmp_path, **given), store=store, token=TOKEN)
        contract = Contract(app.openapi())
        headers = {"Authorization": f"Bearer {TOKEN}"} if auth else {}
        client = TestClient(app, headers=headers, raise_server_exceptions=False)
        client.event_hooks["response"].append(contract.check)
        client.__enter__()
        clients.append(client)
        return client, contract

    yield make
    for client in clients:
        client.__exit__(None, None, None)
    store.close()


def _session(client: TestClient) -> tuple[str, list[str]]:
    """A session with a player's message and a reply: its id and the two nodes' ids."""
    sid = client.post("/api/sessions", json={"title": "contract"}).json()["session"]["id"]
    nodes = []
    for role, text in (("user", "Hello"), ("assistant", "Well met.")):
        answer = client.post(f"/api/sessions/{sid}/messages", json={"role": role, "content": text})
        nodes.append(answer.json()["nodes"][0]["id"])
    return sid, nodes


# -- the document ---------------------------------------------------------------------


def test_the_document_is_valid_openapi_and_every_error_is_a_problem(
    contract_app: Callable[..., tuple[TestClient, Contract]],
) -> None:
    client, _ = contract_app()
    document = client.get("/openapi.json").json()
    validate(document)  # OpenAPI 3.1, its schemas included
    assert "HTTPValidationError" not in json.dumps(document)
    problem = {"$ref": "#/components/schemas/Problem"}
    without_schema = set()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            assert {"400", "421"} <= set(responses), f"{method} {path}"
            for status, response in responses.items():
                if status[0] in "45":
                    assert response["content"] == {MEDIA_TYPE: {"schema": problem}}, (
                        f"{method} {path} {status}"
                    )
            for status, response in responses.items():
                if status.startswith("2") and status != "204":
                    schemas = [c.get("schema") for c in response.get("content", {}).values()]
                    if not any(schemas):
                        without_schema.add(f"{method.upper()} {path}")
    assert without_schema <= KNOWN_WITHOUT_SCHEMA, (
        f"success answers without a schema: {sorted(without_schema - KNOWN_WITHOUT_SCHEMA)}"
    )
    assert document["components"]["schemas"]["Problem"]["properties"]["code"]["enum"] == list(CODES)


def test_every_error_class_of_every_package_has_its_code_in_the_problem_schema() -> None:
    for package in ("clotho", "orchestrator", "mnemosyne", "planner", "postprocess", "prompts"):
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            if ".migrations." not in info.name and not info.name.endswith("__main__"):
                importlib.import_module(info.name)
    for kind, code in error_classes():
        assert code in CODES, (
            f"{kind.__module__}.{kind.__name__} ({code}): import its module in "
            "clotho/api/problems.py"
        )


def test_an_unexpected_failure_is_a_problem_that_tells_nothing_of_it(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'bug.db'}") as store:
        app = create_app(api_settings(tmp_path), store=store, token=TOKEN)

        def bug() -> None:
            raise RuntimeError("secret internals")

        app.add_api_route("/api/bug", bug)
        with TestClient(app, raise_server_exceptions=False) as client:
            answer = client.get("/api/bug")
    assert answer.status_code == 500 and answer.headers["content-type"] == MEDIA_TYPE
    body = Problem.model_validate_json(answer.content)
    assert body.code == "error" and "secret" not in answer.text


def test_an_api_error_names_a_declared_code_with_its_status() -> None:
    assert ApiError(413, "too_large", "big").code == "too_large"
    with pytest.raises(TypeError, match="add it to ApiCode"):
        ApiError(400, "made_up", "a code no document lists")
    with pytest.raises(TypeError, match="declared with status 413"):
        ApiError(400, "too_large", "the status its code is not declared with")
    assert ApiError(418, "http_error", "any status").status == 418


def test_docs_list_every_code_with_its_status() -> None:
    text = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    listed = re.search(r"<!-- codes: generated [^\n]*-->\n(.*?)<!-- /codes -->", text, re.S)
    assert listed is not None, "docs/api.md lost its table of codes"
    assert listed.group(1) == codes_table(), (
        "docs/api.md's table of codes is stale: put clotho.api.problems.codes_table() there"
    )
    assert [row.split("`")[1] for row in listed.group(1).splitlines()[2:]] == list(CODES)


# -- every declared status happens ----------------------------------------------------


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _example(document: dict[str, Any], schema: dict[str, Any], name: str, node: str) -> Any:
    """A valid value of ``schema`` (ids are ``node``, a real node)."""
    schema = _resolve(document, schema)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for union in ("oneOf", "anyOf"):
        if union in schema:
            options = [s for s in schema[union] if _resolve(document, s).get("type") != "null"]
            return _example(document, options[0], name, node)
    kind = schema.get("type")
    if kind == "object":
        return {
            key: _example(document, value, key, node)
            for key, value in schema.get("properties", {}).items()
            if key in schema.get("required", ()) or key in ("content", "text", "title")
        }
    if kind == "array":
        return [_example(document, schema["items"], name, node)] * schema.get("minItems", 0)
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if name.endswith("_id") or name in ("a", "b"):  # trace-diff names its two nodes a, b
        return node
    return "hp" if name == "path" else "hello"


def _invalid(schema: dict[str, Any]) -> str:
    """A value a query parameter of ``schema`` refuses."""
    text = json.dumps(schema)
    if '"integer"' in text:
        return "many"
    if '"boolean"' in text:
        return "maybe"
    if '"enum"' in text:
        return "no-such-thing"
    return "~"  # below minLength, and no node name (a bare "x" may be a tag)


class Requests:
    """Requests that make each status of an operation happen."""

    def __init__(self, client: TestClient, bare: TestClient, document: dict[str, Any]) -> None:
        self.client = client
        self.bare = bare  # a server without a model
        self.document = document
        self.sid, self.nodes = _session(client)
        with client.stream(
            "POST", f"/api/sessions/{self.sid}/turns", json={"kind": "say", "text": "Go"}
        ) as turn:
            data = [line for line in turn.iter_lines() if line.startswith("data:")]
        self.turn_id = json.loads(data[0].removeprefix("data:"))["turn_id"]
        self.nodes.insert(0, json.loads(data[-1].removeprefix("data:"))["node"]["id"])
        book = client.post(  # the lore manager's routes name a book and an entry of it
            f"/api/sessions/{self.sid}/imports/lorebook",
            content=ELDORIA.read_bytes(),
            params={"name": "Eldoria.json"},
        )
        assert book.status_code == 200, book.text
        self.files = {
            "lorebook": ELDORIA.read_bytes(),
            "card": SERAPHINA.read_bytes(),
            "kind": SERAPHINA.read_bytes(),  # POST /api/imports/kind
            "chat": CHAT.read_bytes(),
            "tree": client.get(f"/api/sessions/{self.sid}/exports/tree").content,
        }

    def url(self, path: str, ids: str | None = None) -> str:
        values = {"session_id": ids or self.sid, "node_id": ids or self.nodes[0]}
        values.update(turn_id=ids or self.turn_id, book=ids or "Eldoria", uid="0")
        values["name"] = ids or "Contract"  # a connection profile's
        return re.sub(r"\{([^}]+)\}", lambda m: values[m.group(1)], path)

    def query(self, operation: dict[str, Any]) -> dict[str, Any]:
        return {
            p["name"]: _example(self.document, p["schema"], p["name"], self.nodes[0])
            for p in operation.get("parameters", [])
            if p["in"] == "query" and p.get("required")
        }

    def body(self, path: str, operation: dict[str, Any]) -> dict[str, Any]:
        content = operation.get("requestBody", {}).get("content", {})
        if not content:
            return {}
        media, spec = next(iter(content.items()))
        if spec["schema"].get("format") == "binary":
            name = path.rsplit("/", 1)[1]
            return {"content": self.files[name], "headers": {"content-type": media}}
        return {"json": _example(self.document, spec["schema"], "", self.nodes[0])}

    def send(
        self,
        method: str,
        path: str,
        operation: dict[str, Any],
        *,
        url: str | None = None,
        headers: dict[str, str] | None = None,
        bare: bool = False,
        **given: Any,
    ) -> int:
        """The status of the request (a valid one but for what ``given`` changes)."""
        kwargs: dict[str, Any] = {"params": self.query(operation), **self.body(path, operation)}
        sent = {"accept": "text/event-stream", **kwargs.pop("headers", {}), **(headers or {})}
        kwargs.update(given)
        kwargs = {key: value for key, value in kwargs.items() if value is not None}
        client = self.bare if bare else self.client
        with client.stream(method, url or self.url(path), headers=sent, **kwargs) as answer:
            return answer.status_code

    def attempts(self, method: str, path: str, operation: dict[str, Any], status: int):
        """Each a request (as keywords of :meth:`send`) that may answer ``status``."""
        if status == 400:
            yield {"headers": {"host": "bad host"}}
        elif status == 421:
            yield {"headers": {"host": "elsewhere.example"}}
        elif status == 401:
            yield {"headers": {"authorization": "Bearer not-the-token"}}
        elif status == 404:
            yield {"url": self.url(path, UNKNOWN)}
        elif status == 412:
            yield {"headers": {"if-match": '"999"'}}
        elif status == 413:
            yield {"content": b"[" + b" " * LIMIT + b"]", "json": None}
        elif status == 304:
            read = self.client.get(self.url(path), params=self.query(operation))
            yield {"headers": {"if-none-match": read.headers.get("etag", '"0"')}}
        elif status == 406:
            yield {"headers": {"accept": "application/json"}}
        elif status == 503:
            yield {"bare": True}
        elif status == 422:
            yield from self.refusals(method, path, operation)

    def refusals(self, method: str, path: str, operation: dict[str, Any]):
        content = operation.get("requestBody", {}).get("content", {})
        if content:
            binary = next(iter(content.values()))["schema"].get("format") == "binary"
            yield {"content": b"", "json": None} if binary else {"json": [], "content": None}
        for param in operation.get("parameters", []):
            if param["in"] == "query":
                invalid = _invalid(param["schema"])
                yield {"params": {**self.query(operation), param["name"]: invalid}}
        yield {"params": {**self.query(operation), "unknown": "1"}}  # a query model's refusal
        trashed, _ = _session(self.client)
        self.client.delete(f"/api/sessions/{trashed}")
        yield {"url": self.url(path, trashed)}  # a write on a session in the trash
        yield {}  # nothing to undo, not in the trash...


def test_every_status_an_operation_declares_can_happen(
    contract_app: Callable[..., tuple[TestClient, Contract]],
    serve: Callable[..., ModelServer],
    events_end_at_once: None,
) -> None:
    client, contract = contract_app(serve(lambda request: "The gate creaks open."))
    bare, _ = contract_app()
    requests = Requests(client, bare, contract.document)
    missing = []
    for path, item in contract.document["paths"].items():
        for method, operation in item.items():
            for declared in operation["responses"]:
                status = int(declared)
                if status < 300:
                    continue
                answers = []
                for attempt in requests.attempts(method.upper(), path, operation, status):
                    answers.append(requests.send(method.upper(), path, operation, **attempt))
                    if answers[-1] == status:
                        break
                else:
                    missing.append(f"{method.upper()} {path} {status} (got {answers})")
    assert not missing, "declared, never answered:\n" + "\n".join(missing)
    # and each operation asked properly: what it answers is declared (the client's check)
    operations = [
        (method.upper(), path, operation)
        for path, item in contract.document["paths"].items()
        for method, operation in item.items()
    ]
    order = {"GET": 0, "POST": 1, "PUT": 1, "PATCH": 1, "DELETE": 2}
    answered = set()
    for method, path, operation in sorted(operations, key=lambda op: order[op[0]]):
        unknown = {**requests.query(operation), "unknown": "1"}  # refused or ignored
        answered.add(requests.send(method, path, operation, params=unknown))
        answered.add(requests.send(method, path, operation))
    assert {200, 201, 204} <= answered
    events = "/api/sessions/{session_id}/events"  # a stream: its every status, 200 too
    for declared in contract.document["paths"][events]["get"]["responses"]:
        assert ("GET", events, int(declared)) in contract.seen, declared


# -- the errors flows answer ----------------------------------------------------------


def test_each_kind_of_error_is_a_declared_problem(
    contract_app: Callable[..., tuple[TestClient, Contract]],
) -> None:
    client, contract = contract_app()
    sid, (user, reply) = _session(client)
    base = f"/api/sessions/{sid}"
    version = int(client.get(base).headers["etag"].strip('"'))
    # a stale If-Match: the versions to recover from, and the ETag of the one now
    stale = client.put(f"{base}/head", json={"node_id": user}, headers={"if-match": '"1"'})
    assert stale.status_code == 412
    assert stale.json()["current_version"] == version and stale.json()["expected_version"] == 1
    assert stale.headers["etag"] == f'"{version}"'
    refused = client.post(f"{base}/messages", json={"role": "wizard", "content": "x"})
    assert refused.json()["errors"][0]["field"] == "body.role"
    delta = client.post(
        f"{base}/messages",
        json={
            "role": "user",
            "content": "x",
            "delta": [{"op": "inc", "path": "hp", "value": "ten"}],
        },
    )
    assert delta.status_code == 422 and delta.json()["errors"][0]["field"] == "delta[0]"
    batch = client.post(
        f"{base}/edits",
        json={
            "operations": [{"op": "toggle", "node_id": reply}, {"op": "prune", "node_id": UNKNOWN}]
        },
    )
    assert batch.status_code in (404, 422) and batch.json()["operation"] == 1
    assert client.get(f"{base}/nodes/{UNKNOWN}").json()["code"] == "unknown_node"
    assert client.get(f"{base}/nodes/{reply}/trace").json()["code"] == "no_trace"
    empty = client.post("/api/sessions", json={"title": "empty"}).json()["session"]["id"]
    undo = client.post(f"/api/sessions/{empty}/undo")  # nothing to undo
    assert undo.json()["code"] == "invalid_operation"
    unread = client.post(
        f"{base}/messages",
        content=b'{"role": "user", "content": "\xff"}',
        headers={"content-type": "application/json"},
    )
    assert unread.json()["code"] in ("invalid_body", "invalid_request")
    chat = client.post("/api/imports/chat", content=b"not a chat\n")
    assert chat.status_code == 422 and chat.json()["code"] == "invalid_chat"
    assert client.post("/api/imports/chat", content=b"").json()["code"] == "empty_upload"
    big = client.post("/api/imports/chat", content=b"x" * (LIMIT + 1))
    assert big.status_code == 413 and big.json()["code"] == "too_large"
    turn = client.post(f"{base}/turns", json={"kind": "say", "text": "hi"})
    assert turn.status_code == 503 and turn.json()["code"] == "no_model"
    nowhere = client.get("/api/nowhere")
    assert nowhere.status_code == 404 and nowhere.json()["code"] == "no_such_route"
    Contract.problem(nowhere)
    Contract.problem(client.patch(base))  # 405, no operation
    outside, _ = contract_app(auth=False)
    assert outside.get("/api/sessions").json()["code"] == "unauthorized"
    assert outside.get("/api/health", headers={"host": "evil.example"}).status_code == 421
    statuses = {status for _, _, status in contract.seen}
    assert {200, 201, 404, 412, 413, 422, 503} <= statuses


def test_a_refused_file_names_its_limit_and_a_failed_turn_its_kind(
    contract_app: Callable[..., tuple[TestClient, Contract]],
    serve: Callable[..., ModelServer],
) -> None:
    client, _ = contract_app(serve(lambda request: Reply(status=401, error="bad key")))
    deep = client.post("/api/imports/tree", content=b"[" * 200 + b"]" * 200)
    assert deep.status_code == 422 and deep.json()["limit"] == "max_depth"
    sid, _ = _session(client)
    with client.stream("POST", f"/api/sessions/{sid}/turns", json={"kind": "continue"}) as turn:
        assert turn.status_code == 201
        lines = [line for line in turn.iter_lines() if line.startswith(("event:", "data:"))]
    assert lines[-2] == "event: error"
    failed = Problem.model_validate_json(lines[-1].removeprefix("data:"))
    assert failed.code == "model_error" and failed.kind == "auth" and failed.status == 502


# -- ETags ----------------------------------------------------------------------------


def test_if_match_compares_strongly(
    contract_app: Callable[..., tuple[TestClient, Contract]],
) -> None:
    client, _ = contract_app()
    sid, (user, reply) = _session(client)
    base = f"/api/sessions/{sid}"
    tag = client.get(base).headers["etag"]
    version = tag.strip('"')
    weak = client.put(f"{base}/head", json={"node_id": user}, headers={"if-match": f"W/{tag}"})
    assert weak.status_code == 412 and weak.json()["code"] == "weak_if_match"
    for malformed in (version, f'"{version}", "{version}"', '"1a"', "W/", '"-1"'):
        bad = client.put(f"{base}/head", json={"node_id": user}, headers={"if-match": malformed})
        assert bad.status_code == 400 and bad.json()["code"] == "bad_if_match", malformed
    assert client.get(base).headers["etag"] == tag  # nothing was written
    moved = client.put(f"{base}/head", json={"node_id": user}, headers={"if-match": tag})
    assert moved.status_code == 200 and moved.headers["etag"] != tag
    anyway = client.put(f"{base}/head", json={"node_id": reply}, headers={"if-match": "*"})
    assert anyway.status_code == 200


def test_if_none_match_compares_weakly_on_every_read(
    contract_app: Callable[..., tuple[TestClient, Contract]],
) -> None:
    client, contract = contract_app()
    sid, (user, _) = _session(client)
    tag = client.get(f"/api/sessions/{sid}").headers["etag"]
    reads = [
        f"/api/sessions/{sid}/{tail}"
        for tail in ("tree", "projection", "history", "fragments", "state", f"nodes/{user}")
    ]
    for url in reads:
        for named in (tag, f"W/{tag}", f'"0", {tag}', "*"):
            answer = client.get(url, headers={"if-none-match": named})
            assert answer.status_code == 304 and answer.content == b"", (url, named)
            assert answer.headers["etag"] == tag
        for other in ('"0"', tag.strip('"')):  # another version; a tag without quotes
            assert client.get(url, headers={"if-none-match": other}).status_code == 200
    declared = contract.document["paths"]["/api/sessions/{session_id}/tree"]["get"]
    assert any(p["name"] == "If-None-Match" for p in declared["parameters"])
    assert declared["responses"]["304"]["headers"]["ETag"]


def test_pages_of_allowed_origins_may_send_and_read_every_declared_header(
    contract_app: Callable[..., tuple[TestClient, Contract]],
) -> None:
    origin = "https://app.example"
    client, contract = contract_app(cors_origins=[origin])
    sent, answered = set(), set()
    for item in contract.document["paths"].values():
        for operation in item.values():
            sent |= {p["name"] for p in operation.get("parameters", []) if p["in"] == "header"}
            for response in operation["responses"].values():
                answered |= set(response.get("headers", {}))
    assert {"If-Match", "If-None-Match", "Idempotency-Key", "ETag"} <= sent | answered
    preflight = client.options(
        "/api/sessions",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": ", ".join(sorted(sent)),
        },
    )
    assert preflight.status_code == 200, preflight.text
    allowed = preflight.headers["access-control-allow-headers"].lower()
    assert all(name.lower() in allowed for name in sent), (sent, allowed)
    methods = {method.upper() for item in contract.document["paths"].values() for method in item}
    for method in methods:  # every method a route takes (PATCH too)
        asked = client.options(
            "/api/sessions",
            headers={"Origin": origin, "Access-Control-Request-Method": method},
        )
        assert asked.status_code == 200, (method, asked.text)
    answer = client.get("/api/sessions", headers={"Origin": origin})
    exposed = answer.headers["access-control-expose-headers"].lower()
    assert all(name.lower() in exposed for name in answered), (answered, exposed)


# -- /docs ----------------------------------------------------------------------------


def test_docs_load_only_local_files(
    contract_app: Callable[..., tuple[TestClient, Contract]],
) -> None:
    client, _ = contract_app(auth=False)
    page = client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*["']([^"']+)["']""", page.text)
    assert len(urls) >= 4, urls  # the script, the styles, the icon, the document
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
        assert client.get(url).status_code == 200, url
    assert "http://" not in page.text and "https://" not in page.text
    assert client.get("/redoc").status_code == 404


def test_the_vendored_swagger_ui_is_the_published_one() -> None:
    readme = (STATIC / "vendor" / "README.md").read_text()
    for name, digest in SWAGGER_UI_SHA256.items():
        data = (STATIC / "vendor" / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, name
        assert digest in readme, name
