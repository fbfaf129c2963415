"""Large bodies written by threads (clotho.api.transport) in a real uvicorn server on
loopback, with each of uvicorn's HTTP protocols and event loops: every byte arrives, in
order (pipelined requests, a large chunk then small ones), a client that stops reading
gets the rest from the event loop, one that goes away frees the server, and the threads
really write (a body goes out while the event loop is blocked)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import uvicorn
import uvloop
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from clotho.api.transport import LargeWrites

from ._server import free_port

THRESHOLD = 64 * 1024
MB = 1 << 20
RELEASE = threading.Event()


def payload(size: int, seed: int = 0) -> bytes:
    """``size`` bytes that differ all along (a shifted or truncated copy would show)."""
    block = b"".join(hashlib.sha256(b"%d:%d" % (seed, i)).digest() for i in range(2048))
    return (block * (size // len(block) + 1))[:size]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/bytes/N``: N bytes in one body; ``/chunks/N/M``: N bytes then M small chunks;
    ``/block``: the event loop blocked after the body is handed over, until the client
    says it has it all (``RELEASE``; 20 s at most)."""
    if scope["type"] != "http":
        return
    kind, *args = scope["path"].strip("/").split("/")
    if kind == "chunks":
        size, count = int(args[0]), int(args[1])
        small = [b"<%d>" % i for i in range(count)]
        head = [(b"content-length", b"%d" % (size + sum(map(len, small))))]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": payload(size), "more_body": True})
        for i, chunk in enumerate(small):
            await send({"type": "http.response.body", "body": chunk, "more_body": i < count - 1})
        return
    body = payload(int(args[0])) if kind == "bytes" else payload(32 * MB, seed=1)
    head = [(b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    await send({"type": "http.response.body", "body": body})
    if kind == "block":
        RELEASE.wait(timeout=20)  # the event loop can't write meanwhile: a thread must


@contextlib.contextmanager
def server(http: type, loop: str, patience_s: float = 1.0) -> Iterator[str]:
    def protocol(**given: Any) -> LargeWrites:
        return LargeWrites(http(**given), threshold=THRESHOLD, patience_s=patience_s)

    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=protocol, loop=loop, log_level="error"
    )
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not running.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        running.should_exit = True
        thread.join(timeout=20)


KINDS = {"httptools-uvloop": (HttpToolsProtocol, "uvloop"), "h11-asyncio": (H11Protocol, "asyncio")}


@pytest.fixture(params=KINDS.values(), ids=KINDS.keys())
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    with server(*request.param) as base:
        yield base


def test_bodies_of_every_size_arrive_whole(url: str) -> None:
    sizes = [0, 1, THRESHOLD - 1, THRESHOLD, THRESHOLD + 1, 3 * MB + 7, 24 * MB]
    with httpx.Client(base_url=url, timeout=30) as client:  # one keep-alive connection
        for size in sizes * 2:
            response = client.get(f"/bytes/{size}")
            assert response.status_code == 200
            assert response.content == payload(size), size


def test_concurrent_clients_each_get_their_own_bytes(url: str) -> None:
    def fetch(n: int) -> bool:
        with httpx.Client(base_url=url, timeout=60) as client:
            return all(
                client.get(f"/bytes/{size}").content == payload(size)
                for size in (4 * MB + n, 1000 + n, 6 * MB - n)
            )

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(fetch, range(8)))


def _read_response(stream: Any) -> bytes:
    status = stream.readline()
    assert status.startswith(b"HTTP/1.1 200"), status
    length = None
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    assert length is not None
    return stream.read(length)


def test_pipelined_requests_are_answered_in_order(url: str) -> None:
    port = int(url.rsplit(":", 1)[1])
    sizes = [5 * MB, 10, 2 * MB, 3]
    requests = b"".join(b"GET /bytes/%d HTTP/1.1\r\nHost: x\r\n\r\n" % size for size in sizes)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(requests)
        stream = sock.makefile("rb")
        for size in sizes:
            assert _read_response(stream) == payload(size)


def test_small_chunks_after_a_large_one_follow_it(url: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        body = client.get("/chunks/4194304/50").content
    assert body[: 4 * MB] == payload(4 * MB)
    assert body[4 * MB :] == b"".join(b"<%d>" % i for i in range(50))


@pytest.mark.parametrize("kind", KINDS.values(), ids=KINDS.keys())
def test_a_client_that_stops_reading_gets_the_rest_from_the_loop(kind: tuple[type, str]) -> None:
    with server(*kind, patience_s=0.1) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: x\r\n\r\n" % (16 * MB))
            time.sleep(1.0)  # the writer's patience runs out long before
            assert _read_response(sock.makefile("rb")) == payload(16 * MB)
        with httpx.Client(base_url=base, timeout=30) as client:
            assert client.get("/bytes/2097152").content == payload(2 * MB)


def test_a_client_that_leaves_mid_body_frees_the_server(url: str) -> None:
    port = int(url.rsplit(":", 1)[1])
    for _ in range(20):  # more than the writer threads
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: x\r\n\r\n" % (16 * MB))
            sock.recv(1000)
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
    with httpx.Client(base_url=url, timeout=30) as client:
        for size in (8 * MB, 100):
            assert client.get(f"/bytes/{size}").content == payload(size)


def test_a_thread_writes_the_body_while_the_event_loop_is_blocked(url: str) -> None:
    """The loop blocks right after handing the 32 MB over, until the client has read them
    all: written by the loop, they would not arrive (the read times out)."""
    port = int(url.rsplit(":", 1)[1])
    RELEASE.clear()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
            sock.sendall(b"GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
            assert _read_response(sock.makefile("rb")) == payload(32 * MB, seed=1)
    finally:
        RELEASE.set()


class _Burst(asyncio.Protocol):
    """Writes all its parts and closes at once, without waiting for the writes to drain
    (as nothing in uvicorn does, but nothing stops a protocol from doing)."""

    def __init__(self, parts: list[bytes], done: asyncio.Future[None]) -> None:
        self.parts, self.done = parts, done

    def connection_made(self, transport: Any) -> None:
        for part in self.parts:
            transport.write(part)
        transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set_result(None)


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_writes_made_while_a_thread_writes_follow_it_and_close_waits_for_them(loop: str) -> None:
    parts = [payload(8 * MB), b"small", payload(2 * MB, seed=2), b"end"]
    ours, theirs = socket.socketpair()
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)

    async def serve() -> None:
        done = asyncio.get_running_loop().create_future()
        await asyncio.get_running_loop().connect_accepted_socket(
            lambda: LargeWrites(_Burst(parts, done), threshold=THRESHOLD), ours
        )
        await done

    runner = uvloop.run if loop == "uvloop" else asyncio.run
    writer = threading.Thread(target=runner, args=(serve(),))
    writer.start()
    received = bytearray()
    with theirs:
        theirs.settimeout(30)
        while chunk := theirs.recv(1 << 20):
            received += chunk
    writer.join(timeout=30)
    assert bytes(received) == b"".join(parts)
