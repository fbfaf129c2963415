"""Large response bodies written by threads, not by the server's event loop.

Copying a body into a socket is kernel work that takes the thread doing it: about
5 ms for a 20 MB projection. uvicorn writes every body from its one event-loop thread,
so eight clients reading long projections at once queue behind each other's copies on
one CPU while the others sit idle. ``clotho serve`` gives uvicorn :func:`protocol`
(its ``http=`` option takes any protocol factory): uvicorn's own HTTP protocol behind a
thin layer that is the socket's protocol and, towards uvicorn, its transport. The
layer hands a body of :data:`THRESHOLD` bytes or more to a thread that writes it with
``os.write`` (the GIL is released while the kernel copies), and passes everything else
to the real transport as it comes.

Order and back-pressure are kept: while a thread writes, uvicorn's writing is paused
(its ``send`` waits) and anything written meanwhile is queued behind the body; the loop
keeps reading the socket (a client's disconnect is seen as before). A client that
stops reading does not hold a thread: after :data:`PATIENCE_S` without the socket
becoming writable, the rest of the body goes to the real transport, which buffers it
as it buffers any write. TLS transports and bodies behind bytes still in the
transport's own buffer are left to uvicorn, unchanged.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["PATIENCE_S", "THRESHOLD", "LargeWrites", "protocol"]

#: Bodies (single writes) of this many bytes or more are written by a thread.
THRESHOLD = 1 << 20
#: How long a thread waits for a client to read before the loop takes the rest.
PATIENCE_S = 1.0
#: Threads that write bodies (they mostly wait for the kernel: more than the CPUs).
WRITERS = 16

# Its threads start as bodies come (none before the first).
_writers = ThreadPoolExecutor(WRITERS, thread_name_prefix="clotho-writer")


def _write(fd: int, data: Any, patience_s: float) -> int:
    """Write ``data`` to the non-blocking socket ``fd`` (a duplicate, closed here);
    returns how many bytes went out before the client stopped reading for
    ``patience_s`` (all of them, usually). A broken connection raises ``OSError``."""
    view = memoryview(data)
    sent = 0
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    try:
        while sent < len(view):
            try:
                sent += os.write(fd, view[sent:])
            except BlockingIOError:
                if not poller.poll(patience_s * 1000):
                    break
        return sent
    finally:
        os.close(fd)


class LargeWrites(asyncio.Transport):
    """The socket's protocol, and the transport of ``inner`` (uvicorn's protocol)."""

    def __init__(
        self,
        inner: asyncio.Protocol,
        *,
        threshold: int = THRESHOLD,
        patience_s: float = PATIENCE_S,
    ) -> None:
        super().__init__()
        self._inner: Any = inner
        self._threshold = threshold
        self._patience_s = patience_s
        self._transport: Any = None
        self._fd = -1
        self._busy: int = 0  # bytes a thread is writing
        self._queued: list[Any] = []  # written meanwhile, in order
        self._closing = False  # close() came while a thread wrote
        self._transport_paused = False
        self._inner_paused = False

    # -- towards the socket (asyncio.Protocol) ---------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        raw = transport.get_extra_info("socket")
        if raw is not None and transport.get_extra_info("sslcontext") is None:
            self._fd = raw.fileno()
        self._inner.connection_made(self)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._queued.clear()
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._transport_paused = True
        self._flow()

    def resume_writing(self) -> None:
        self._transport_paused = False
        self._flow()

    # -- towards uvicorn (asyncio.Transport) -----------------------------------------

    def write(self, data: Any) -> None:
        if not data:
            return
        if self._busy or self._queued:
            self._queued.append(data)
        elif (
            len(data) >= self._threshold
            and self._fd >= 0
            and not self._transport.is_closing()
            and self._transport.get_write_buffer_size() == 0
        ):
            self._start(data)
        else:
            self._transport.write(data)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def close(self) -> None:
        if self._busy or self._queued:
            self._closing = True
        else:
            self._transport.close()

    def abort(self) -> None:
        self._queued.clear()
        if self._busy and not self._transport.is_closing():
            # The thread's next write fails: it stops at once.
            with socket.socket(fileno=os.dup(self._fd)) as raw:
                raw.shutdown(socket.SHUT_RDWR)
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def get_write_buffer_size(self) -> int:
        queued = sum(len(data) for data in self._queued)
        return self._transport.get_write_buffer_size() + self._busy + queued

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._inner = protocol  # an upgrade (WebSocket): the new protocol gets our calls

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._inner

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def write_eof(self) -> None:
        self._transport.write_eof()

    # -- the threads -------------------------------------------------------------------

    def _start(self, data: Any) -> None:
        try:
            fd = os.dup(self._fd)
        except OSError:  # out of file descriptors: the loop writes it
            self._transport.write(data)
            return
        self._busy = len(data)
        self._flow()
        loop = asyncio.get_running_loop()
        task = loop.run_in_executor(_writers, _write, fd, data, self._patience_s)
        task.add_done_callback(partial(self._written, data))

    def _written(self, data: Any, task: asyncio.Future[int]) -> None:
        self._busy = 0
        error = None if task.cancelled() else task.exception()
        if task.cancelled() or self._transport.is_closing():
            self._queued.clear()
        elif error is not None:  # the client went away: the loop sees it too
            self._queued.clear()
            self._transport.abort()
        else:
            sent = task.result()
            if sent < len(data):  # a slow reader: the transport keeps the rest
                self._transport.write(memoryview(data)[sent:])
            queued, self._queued = self._queued, []
            for item in queued:
                self.write(item)
            if self._closing and not (self._busy or self._queued):
                self._transport.close()
        self._flow()

    def _flow(self) -> None:
        """uvicorn's writing paused while the socket's transport or a thread is busy."""
        paused = self._transport_paused or bool(self._busy)
        if paused and not self._inner_paused:
            self._inner_paused = True
            self._inner.pause_writing()
        elif not paused and self._inner_paused:
            self._inner_paused = False
            self._inner.resume_writing()


def protocol(**uvicorn_given: Any) -> asyncio.Protocol:
    """The protocol factory for uvicorn's ``http=``: its own HTTP protocol (httptools,
    else h11) behind :class:`LargeWrites`."""
    return LargeWrites(AutoHTTPProtocol(**uvicorn_given))
