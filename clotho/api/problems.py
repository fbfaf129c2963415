"""Errors as ``application/problem+json`` (RFC 9457), each naming what was wrong.

Every error Clotho raises on purpose has a ``code``; here it gets an HTTP status.
Bad input is never a 500: unknown ids are 404, invalid bodies and refused operations
422, a stale ``If-Match`` 412 (with the current version), a broken model 502. A file
refused for one of :mod:`mnemosyne.jsontext`'s limits names the limit (``limit``), and
is a 413 when the limit is its size.
"""

from __future__ import annotations

import sys
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from clotho.errors import ClothoError
from mnemosyne import ConflictError, InvalidDeltaError, MnemosyneError
from mnemosyne.editor import JournalMismatchError
from mnemosyne.errors import JsonTextError
from orchestrator.errors import ModelError, OrchestratorError
from planner.errors import PlannerError, RetrievalError
from prompts import PromptError

__all__ = ["MEDIA_TYPE", "ApiError", "install", "problem_of", "problem_response"]

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://clotho.invalid/problems/"

#: HTTP status per error code (codes not here: 422 for ValueErrors, else 500).
STATUS = {
    "not_found": 404,
    "unknown_session": 404,
    "unknown_node": 404,
    "foreign_node": 404,
    "ambiguous_id": 400,
    "conflict": 412,
    "journal_mismatch": 409,
    "storage_error": 503,
    "no_model": 503,
    "retrieval_failed": 502,
    "model_error": 502,
}


class ApiError(Exception):
    """An error of the API itself (auth, sizes, headers), with its status."""

    def __init__(self, status: int, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.extra = extra


def _json_refusal(error: BaseException | None) -> JsonTextError | None:
    """The :class:`JsonTextError` behind an importer's error (its cause), if any."""
    while error is not None:
        if isinstance(error, JsonTextError):
            return error
        error = error.__cause__
    return None


def _status(error: Exception) -> int:
    code = _code(error)
    if isinstance(error, ApiError):
        return error.status
    refusal = _json_refusal(error)
    if refusal is not None and refusal.limit == "max_bytes":
        return 413
    if isinstance(error, PromptError):
        return 422
    if isinstance(error, ModelError):
        return 504 if error.kind == "timeout" else 502
    if code in STATUS:
        return STATUS[code]
    if isinstance(error, ValueError):
        return 422
    return 500


def _code(error: Exception) -> str:
    if isinstance(error, PromptError):
        return "invalid_template"
    return getattr(error, "code", "error")


def problem_of(error: Exception, instance: str | None = None) -> dict[str, Any]:
    """The problem document of an error."""
    status = _status(error)
    code = _code(error)
    body: dict[str, Any] = {
        "type": TYPE_BASE + code,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": " ".join(str(error).split()) or HTTPStatus(status).phrase,
        "code": code,
    }
    index = getattr(error, "operation", None)
    if isinstance(index, int):
        body["operation"] = index
        body["detail"] = f"operations[{index}]: {body['detail']}"
    if instance:
        body["instance"] = instance
    if isinstance(error, ConflictError):
        body["current_version"] = error.current_version
        body["expected_version"] = error.expected_version
    if isinstance(error, InvalidDeltaError):
        body["errors"] = [problem.as_dict() for problem in error.problems]
    if isinstance(error, ModelError):
        body["kind"] = error.kind
    if isinstance(error, ApiError):
        body.update(error.extra)
    refusal = _json_refusal(error)
    if refusal is not None and refusal.limit is not None:
        body["limit"] = refusal.limit
    return body


def problem_response(
    error: Exception, instance: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = problem_of(error, instance)
    headers = dict(headers or {})
    if isinstance(error, ConflictError):
        headers["ETag"] = f'"{error.current_version}"'
    if body["status"] == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="clotho"'
    return JSONResponse(body, status_code=body["status"], headers=headers, media_type=MEDIA_TYPE)


def _validation(request: Request, error: RequestValidationError) -> JSONResponse:
    errors = []
    for item in error.errors():
        where = ".".join(str(part) for part in item.get("loc", ()))
        errors.append({"field": where, "problem": item.get("msg", "invalid")})
    detail = "; ".join(f"{e['field']}: {e['problem']}" for e in errors) or "invalid request"
    failure = ApiError(422, "invalid_request", detail, errors=errors)
    return problem_response(failure, request.url.path)


def _unreadable_body(error: StarletteHTTPException) -> ApiError | None:
    """FastAPI's 400 for a JSON body its decoder gave up on (not a syntax error, which
    is a validation error): as a 422 saying why."""
    cause = error.__cause__
    if error.status_code != 400 or cause is None:
        return None
    if isinstance(cause, RecursionError):
        problem = "it is nested too deep"
    elif isinstance(cause, UnicodeDecodeError):
        problem = f"it is not UTF-8 text ({cause.reason} at byte {cause.start})"
    elif isinstance(cause, ValueError):  # the decoder's only other one: int()'s limit
        problem = f"it holds a number of more than {sys.get_int_max_str_digits():,} digits"
    else:
        return None
    return ApiError(422, "invalid_body", f"the JSON body cannot be read: {problem}")


def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
    unreadable = _unreadable_body(error)
    if unreadable is not None:
        return problem_response(unreadable, request.url.path)
    code = {404: "no_such_route", 405: "method_not_allowed"}.get(error.status_code, "http_error")
    detail = error.detail if isinstance(error.detail, str) else HTTPStatus(error.status_code).phrase
    if error.status_code == 404 and detail == "Not Found":
        detail = f"no such resource: {request.method} {request.url.path}"
    failure = ApiError(error.status_code, code, detail)
    return problem_response(failure, request.url.path, dict(error.headers or {}))


def _known(request: Request, error: Exception) -> JSONResponse:
    return problem_response(error, request.url.path)


def install(app: FastAPI) -> None:
    """Register the handlers that turn errors into problem documents."""
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    for kind in (
        ApiError,
        MnemosyneError,
        JournalMismatchError,
        ClothoError,
        PlannerError,
        RetrievalError,
        OrchestratorError,
    ):
        app.add_exception_handler(kind, _known)
    app.add_exception_handler(PromptError, _known)
