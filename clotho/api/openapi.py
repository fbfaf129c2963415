"""The OpenAPI document as the server behaves: every error status each route can answer,
with the one :class:`~clotho.api.problems.Problem` schema, and the headers it reads and
sends.

A route's statuses follow from facts about it, read from the document FastAPI builds
from the routes (:func:`facts`), in one place (:func:`statuses`):

- every request can be refused for its ``Host`` (400, 421);
- it needs the token (a security requirement) -> 401;
- it names a session, node or turn in its path -> 404;
- it takes ``If-Match`` -> 412, and 422 (a write refused: the session is in the trash,
  nothing to undo...);
- it takes a body or an upload -> 413 and 422; a query (parameters, or a query model
  that takes none: :func:`queried`) -> 422;
- it reads a session -> its ``ETag``, ``If-None-Match`` and 304 (every such read takes
  :data:`clotho.api.deps.ReadSession`, which answers the 304);
- it plays the model (a POST tagged ``playing``) -> 503 when none is configured (a model
  failing later is the stream's ``error`` event).

FastAPI's ``HTTPValidationError`` is gone: a 422 is the Problem with ``errors``.
tests/api/test_contract.py makes each declared status happen, and checks that its flows
answer no status undeclared.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts

from .deps import read_session
from .etags import ETAG_HEADER
from .problems import MEDIA_TYPE, Problem, code_statuses

__all__ = ["Facts", "declare", "facts", "statuses"]

COMPONENT = "#/components/schemas/"
PROBLEM_REF = {"$ref": COMPONENT + "Problem"}
_PLAYING_TAG = "playing"

IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "An ETag of the session read before: if the session is still at that "
    'version, the answer is 304 with no body (weak comparison: `W/"12"` names '
    '`"12"`; `*` names any).',
    "schema": {"type": "string"},
}

#: What each error status means on this API (the codes that come with it are added).
MEANING = {
    400: "The request is malformed: its Host, its If-Match, an ambiguous id prefix.",
    401: "No bearer token, or not this server's (`WWW-Authenticate: Bearer`).",
    404: "The session or node named in the path does not exist.",
    409: "The undo journal disagreed with the tree; it was cleared.",
    412: "If-Match named another version than the session's: nothing was changed; "
    "`current_version` (and `ETag`) is the version now.",
    413: "The body is larger than the server's upload limit (or a file's size limit).",
    406: "The client takes no answer the route can give.",
    421: "The Host is not a name this server answers for.",
    422: "A parameter, a field of the body, a file or the operation was refused: "
    "`errors` names each invalid field, `operation` the refused edit.",
    503: "No model is configured to play a turn.",
}


@dataclass(frozen=True)
class Facts:
    """What the document says of one operation, from which its statuses follow."""

    method: str
    token: bool
    path_ids: bool
    if_match: bool
    body: bool
    query: bool
    conditional: bool
    """It reads a session through :data:`~clotho.api.deps.ReadSession` (ETag, 304)."""
    model: bool


def _refers(schema: Any, name: str) -> bool:
    """Whether a part of the document is or holds a reference to component ``name``."""
    if isinstance(schema, dict):
        if schema.get("$ref") == COMPONENT + name:
            return True
        return any(_refers(value, name) for value in schema.values())
    if isinstance(schema, list):
        return any(_refers(value, name) for value in schema)
    return False


def _successes(operation: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (status, response)
        for status, response in operation.get("responses", {}).items()
        if status.startswith("2")
    ]


def _carries_etag(
    status: str, response: dict[str, Any], components: dict[str, Any], conditional: bool
) -> bool:
    """Whether a success answers with the session's version as ETag: a read through
    ``ReadSession``, an answer that holds a session, one whose route declares it."""
    content = response.get("content", {})
    if status == "204" or (content and set(content) <= {"text/event-stream"}):
        return False
    declared = "ETag" in response.get("headers", {})
    return conditional or declared or _holds_session(response, components)


def _holds_session(response: dict[str, Any], components: dict[str, Any]) -> bool:
    """Whether an answer is one session, or holds one as a member (a write's
    ``session``): not a list of them."""
    session = COMPONENT + "SessionOut"
    for media in response.get("content", {}).values():
        ref = str(media.get("schema", {}).get("$ref", ""))
        members = components.get(ref.removeprefix(COMPONENT), {}).get("properties", {})
        if ref == session or any(m.get("$ref") == session for m in members.values()):
            return True
    return False


def _walk(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for sub in dependant.dependencies:
        yield from _walk(sub)


def _operations(app: FastAPI, taking: Callable[[Dependant], bool]) -> set[tuple[str, str]]:
    """The operations (method, path) one of whose route's dependencies is ``taking``."""
    found = set()
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if isinstance(route, APIRoute) and any(map(taking, _walk(route.dependant))):
            found |= {(method.lower(), str(context.path_format)) for method in route.methods or ()}
    return found


def queried(app: FastAPI) -> set[tuple[str, str]]:
    """The operations whose route takes a query: parameters, or a query model; one
    without fields (it refuses any parameter) shows none in the document."""
    return _operations(app, lambda dependant: bool(dependant.query_params))


def conditional_reads(app: FastAPI) -> set[tuple[str, str]]:
    """The operations that read a session through ``ReadSession`` (ETag, 304)."""
    return _operations(app, lambda dependant: dependant.call is read_session)


def facts(
    method: str,
    path: str,
    operation: dict[str, Any],
    components: dict[str, Any],
    queries: Collection[tuple[str, str]] = (),
    reads: Collection[tuple[str, str]] = (),
) -> Facts:
    """The facts of one operation of the document (``components``: its schemas;
    ``queries``: :func:`queried`; ``reads``: :func:`conditional_reads`)."""
    params = operation.get("parameters", [])
    where = {(p.get("in"), p.get("name", "").lower()) for p in params}
    return Facts(
        method=method,
        token=bool(operation.get("security")),
        path_ids=any(place == "path" and name.endswith("_id") for place, name in where),
        if_match=("header", "if-match") in where,
        body="requestBody" in operation,
        query=any(place == "query" for place, _ in where) or (method, path) in queries,
        conditional=(method, path) in reads,
        model=method == "post" and _PLAYING_TAG in operation.get("tags", ()),
    )


def statuses(found: Facts) -> list[int]:
    """The error statuses an operation with these facts can answer (and 304)."""
    out = {400, 421}
    if found.token:
        out.add(401)
    if found.path_ids:
        out.add(404)
    if found.if_match:
        out.add(412)
    if found.body:
        out |= {413, 422}
    if found.query or found.if_match:  # a write on a session: refused in the trash, ...
        out.add(422)
    if found.conditional:
        out.add(304)
    if found.model:  # refused before it starts; a model failing later is an `error` event
        out.add(503)
    return sorted(out)


def _codes_by_status() -> dict[int, list[str]]:
    table: dict[int, list[str]] = {}
    for code, (codes_statuses, _) in code_statuses().items():
        for status in codes_statuses:
            table.setdefault(status, []).append(code)
    return table


def _problem_response(status: int, codes: list[str]) -> dict[str, Any]:
    listed = ", ".join(f"`{code}`" for code in codes)
    meaning = MEANING.get(status, HTTPStatus(status).phrase)
    response: dict[str, Any] = {
        "description": f"{meaning} Codes: {listed}." if listed else meaning,
        "content": {MEDIA_TYPE: {"schema": PROBLEM_REF}},
    }
    if status == 401:
        response["headers"] = {
            "WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}
        }
    if status == 412:
        response["headers"] = {"ETag": ETAG_HEADER}
    return response


def _item_schemas(response: dict[str, Any]) -> None:
    """OpenAPI 3.2's ``itemSchema`` (each event of a stream, as FastAPI's SSE support
    writes it) as the ``schema`` of a 3.1 document, which describes each event there."""
    for media in response.get("content", {}).values():
        if "itemSchema" in media:
            media.setdefault("schema", media.pop("itemSchema"))


def _patch(
    document: dict[str, Any], queries: set[tuple[str, str]], reads: set[tuple[str, str]]
) -> None:
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem.pop("$defs", {}))
    schemas["Problem"] = problem
    by_status = _codes_by_status()
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            found = facts(method, path, operation, schemas, queries, reads)
            responses = operation.setdefault("responses", {})
            if _refers(responses.get("422"), "HTTPValidationError"):
                del responses["422"]  # FastAPI's guess: ours is below, if the route can 422
            for status in statuses(found):
                if status == 304:
                    responses["304"] = {
                        "description": "Not modified: the session is at the version "
                        "`If-None-Match` named.",
                        "headers": {"ETag": ETAG_HEADER},
                    }
                else:
                    responses[str(status)] = _problem_response(status, by_status.get(status, []))
            for success, response in _successes(operation):
                if _carries_etag(success, response, schemas, found.conditional):
                    # a route's own ETag (not a session's version) is kept as declared
                    response.setdefault("headers", {}).setdefault("ETag", ETAG_HEADER)
            for declared, response in responses.items():
                if declared[0] in "45" and "content" not in response:  # declared by the route
                    response["content"] = {MEDIA_TYPE: {"schema": PROBLEM_REF}}
            if found.conditional:
                params = operation.setdefault("parameters", [])
                if not any(p.get("name", "").lower() == "if-none-match" for p in params):
                    params.append(IF_NONE_MATCH)
            for response in responses.values():
                _item_schemas(response)
    for unused in ("HTTPValidationError", "ValidationError"):
        if not _refers(document.get("paths"), unused):
            schemas.pop(unused, None)


def declare(app: FastAPI) -> None:
    """Have ``app``'s OpenAPI document declare every route's error statuses, with the
    Problem schema, and its headers (built once, after the routes)."""
    built = FastAPI.openapi
    patched: list[dict[str, Any]] = []  # the document last patched (FastAPI keeps it)

    def openapi() -> dict[str, Any]:
        document = built(app)
        if not patched or patched[0] is not document:
            _patch(document, queried(app), conditional_reads(app))
            patched[:] = [document]
        return document

    app.openapi = openapi  # type: ignore[method-assign]
