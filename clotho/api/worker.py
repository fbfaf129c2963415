"""Large imports in a worker process, so that one upload cannot stall or swell the server.

Reading a tree file, a chat, a lorebook or a card of megabytes is mostly C code that holds the
interpreter (``json`` decoding, the limit checks of :mod:`mnemosyne.jsontext`) for a
second or more at a time, and builds Python objects several times the file's size that
the allocator keeps after the import. In the server's process that means every other
request (a player's turn, ``GET /api/health``) waits, and the process stays hundreds of
megabytes larger. So a file of :data:`LARGE_IMPORT_BYTES` or more is imported by a
worker process of anyio's pool (``anyio.to_process``), with its own connection to the
same database; one such import runs at a time, and a client that leaves kills it (its
transaction is rolled back: nothing is stored). Smaller files, and a store the worker
cannot reach (an in-memory SQLite database), are imported in the server's thread pool.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio
from anyio import to_process
from starlette.concurrency import run_in_threadpool

from clotho.lore import KeptBook
from mnemosyne import Node, Session, Store
from planner.cards import Card

__all__ = [
    "LARGE_IMPORT_BYTES",
    "import_card_at",
    "import_chat_at",
    "import_lorebook_at",
    "import_tree_at",
    "importing",
]

LARGE_IMPORT_BYTES = 4 * 1024 * 1024
"""From this size on a file is imported in a worker process: a file this size holds the
interpreter for a few tens of milliseconds, and the worker's start (its imports) costs
less than what the import itself takes from here on."""

_ONE_AT_A_TIME = anyio.CapacityLimiter(1)
T = TypeVar("T")


def _url(store: Store) -> str | None:
    url = store.engine.url
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        return None
    return url.render_as_string(hide_password=False)


async def importing(
    store: Store,
    data: bytes,
    inline: Callable[[], T],
    worker: Callable[..., T],
    *args: object,
) -> T:
    """``inline()`` in the thread pool, or ``worker(url, path, *args)`` in a worker
    process (``path``: a temporary file holding ``data``) when the file is large and the
    database can be opened from another process."""
    url = _url(store)
    if len(data) < LARGE_IMPORT_BYTES or url is None:
        return await run_in_threadpool(inline)
    # The file goes by a temporary file: through the worker's pipe it would be pickled
    # and written by the event loop, a chunk at a time.
    with tempfile.NamedTemporaryFile(prefix="clotho-import-") as file:
        await run_in_threadpool(file.write, data)
        await run_in_threadpool(file.flush)
        try:
            return await to_process.run_sync(
                _carrying_causes,
                worker,
                url,
                file.name,
                *args,
                cancellable=True,
                limiter=_ONE_AT_A_TIME,
            )
        except Exception as error:
            cause = error.__dict__.pop(_CAUSE, None)
            if isinstance(cause, BaseException):
                raise error from cause
            raise


_CAUSE = "_clotho_cause"


def _carrying_causes(worker: Callable[..., T], *args: object) -> T:
    """``worker(*args)``, an error raised keeping its cause (the limit a file passed, which
    the problem document names): pickling an exception leaves ``__cause__`` out."""
    try:
        return worker(*args)
    except Exception as error:
        if error.__cause__ is not None:
            error.__dict__[_CAUSE] = error.__cause__
        raise


def import_tree_at(url: str, path: str, name: str, new_ids: bool) -> str:
    """In the worker: :func:`clotho.formats.treefile.import_tree` into the database at ``url``;
    the new session's id."""
    from clotho.formats.treefile import import_tree

    with Store.open(url, migrate=False) as store:
        return import_tree(store, Path(path).read_bytes(), name, new_ids=new_ids).id


def import_chat_at(url: str, path: str, name: str, title: str | None) -> str:
    """In the worker: :func:`clotho.formats.stchat.import_chat` into the database at ``url``;
    the new session's id."""
    from clotho.formats.stchat import import_chat

    with Store.open(url, migrate=False) as store:
        return import_chat(store, Path(path).read_bytes(), name, title=title).id


def import_lorebook_at(
    url: str, path: str, session_id: str, name: str, expected: int | None
) -> tuple[KeptBook, Session]:
    """In the worker: :func:`clotho.lore.import_lorebook` into the database at ``url``."""
    from clotho.lore import import_lorebook

    with Store.open(url, migrate=False) as store:
        return import_lorebook(
            store, session_id, Path(path).read_bytes(), name, expected_version=expected
        )


def import_card_at(
    url: str, path: str, session_id: str, filename: str, expected: int | None
) -> tuple[Card, list[Node], Session]:
    """In the worker: :func:`clotho.lore.import_card` into the database at ``url``."""
    from clotho.lore import import_card

    with Store.open(url, migrate=False) as store:
        return import_card(
            store, session_id, Path(path).read_bytes(), filename, expected_version=expected
        )
