"""A write on a session, answered in the one shape every write has
(:class:`~clotho.api.schemas.WriteOut`), and done once per ``Idempotency-Key``.

:class:`SessionWriter` runs a write in one transaction of the store. With a key, the
answer is stored with the write, in that transaction
(:meth:`mnemosyne.SessionTransaction.remember`), so a retry of the same request (the
same method, path, query and body) gets that answer again, with the header
``Idempotent-Replayed: true``, and nothing is applied twice, also after a restart or
from another worker. The same key with another request is refused (422
``idempotency_key_reused``). The key is looked up before ``If-Match`` is checked: a
retry that names the version it first read gets its answer, not a 412.

Keys are kept :data:`mnemosyne.IDEMPOTENCY_KEEP` (24 hours), per session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fastapi import Request, Response
from pydantic import BaseModel

from mnemosyne import MnemosyneError, Node, Session, SessionTransaction, Store

from .etags import etag
from .schemas import ImportedOut, NodeOut, ResultOut, SessionOut, WriteOut

__all__ = [
    "REPLAYED_HEADER",
    "Outcome",
    "SessionWriter",
    "answer",
    "replayed",
    "request_hash",
    "result",
]

#: The header that marks a replayed answer.
REPLAYED_HEADER = "Idempotent-Replayed"


def request_hash(request: Request, body: str | None) -> str:
    """The SHA-256 of what names a request: method, path, query and body (a JSON body
    as its model dumps it, so the same fields in another order or spacing are the same
    request)."""
    digest = hashlib.sha256()
    for part in (request.method, request.url.path, str(request.url.query)):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update((body or "").encode())
    return digest.hexdigest()


@dataclass
class Outcome:
    """What a write did, before the commit gives the session its new version."""

    results: list[ResultOut]
    nodes: Sequence[Node] = ()
    imported: ImportedOut | None = None


def result(
    action: str,
    node_id: str | None,
    head_id: str | None,
    *,
    head_moved: bool = False,
    created: Sequence[str] = (),
    note: str = "",
    count: int | None = None,
) -> ResultOut:
    """One operation's result (an edit's comes from :meth:`ResultOut.model_validate` of
    :meth:`mnemosyne.EditResult.as_dict`)."""
    return ResultOut(
        action=action,
        node_id=node_id,
        head_id=head_id,
        head_moved=head_moved,
        created=list(created),
        note=note,
        count=count,
    )


def answer(session: Session, outcome: Outcome, response: Response) -> WriteOut:
    """The write's answer; the session's version goes in ``response``'s ETag."""
    response.headers["ETag"] = etag(session.version)
    return WriteOut(
        session=SessionOut.model_validate(session.as_dict()),
        results=outcome.results,
        nodes=[NodeOut.model_validate(node.as_dict()) for node in outcome.nodes],
        imported=outcome.imported,
    )


def replayed(
    store: Store, session_id: str, key: str | None, digest: str, response: Response
) -> WriteOut | None:
    """The answer stored under ``key`` for this request, or ``None``.

    Raises:
        IdempotencyKeyReusedError: the key was used for another request.
    """
    if key is None:
        return None
    stored = store.remembered(session_id, key, digest)
    if stored is None:
        return None
    found = WriteOut.model_validate_json(stored)
    response.headers["ETag"] = etag(found.session.version)
    response.headers[REPLAYED_HEADER] = "true"
    return found


@dataclass
class _Answer:
    """The answer made once, at the commit (to be stored with a key) or after it."""

    outcome: Outcome
    response: Response
    made: WriteOut | None = field(default=None)

    def of(self, session: Session) -> WriteOut:
        if self.made is None:
            self.made = answer(session, self.outcome, self.response)
        return self.made

    def text(self, session: Session) -> str:
        return self.of(session).model_dump_json()


@dataclass
class SessionWriter:
    """A route's way to write to a session (:data:`clotho.api.deps.Writer`): what the
    request brought (its ``If-Match``, its ``Idempotency-Key``) and where the answer's
    headers go."""

    store: Store
    request: Request
    response: Response
    expected_version: int | None
    key: str | None

    def __call__(
        self,
        session_id: str,
        act: Callable[[SessionTransaction], Outcome],
        body: BaseModel | None = None,
    ) -> WriteOut:
        """``act`` in one transaction on the session; its answer, once per key.

        ``body``: the request's body as its model (``None``: the request has none).
        """
        digest = request_hash(self.request, body.model_dump_json() if body else None)
        store, key, response = self.store, self.key, self.response
        if (again := replayed(store, session_id, key, digest, response)) is not None:
            return again
        try:
            with store.transaction(session_id, expected_version=self.expected_version) as tx:
                made = _Answer(act(tx), response)
                if key is not None:
                    tx.remember(key, digest, made.text)
        except MnemosyneError:
            # A retry that raced the first request (412 for the version it first read, or
            # its key found stored when it stored its own): the first answer, if any.
            if key is not None and (again := replayed(store, session_id, key, digest, response)):
                return again
            raise
        return made.of(tx.session)
