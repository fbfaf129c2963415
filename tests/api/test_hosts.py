"""Careless configurations and foreign hosts are refused.

`clotho serve` beyond loopback refuses a weak token, and on every address (0.0.0.0)
wants the names it answers; a request whose Host the server does not serve is refused
(421, a problem document naming it) before anything else sees it, on every kind of
route, the page, its files, health, the OpenAPI document, the API with a valid token;
the names it serves are answered; CORS headers are sent
only for the origins configured. Real `clotho serve` processes on loopback, with the
app in process where its insides are looked at.
"""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from clotho.api.auth import allowed_origins, served_hosts, token_weakness
from clotho.errors import UsageError
from clotho.settings import Settings

from ._server import Server, free_port, running, serve_command, serve_env

STRONG = "4f0c2b9e8d7a6b5c4d3e2f1a0b9c8d7e"  # 32 characters, 15 different
EVIL = "rebound.evil.example"
ORIGIN = "https://app.example"


# --- clotho serve refuses to start -------------------------------------------------


def refused_start(tmp_path: Path, *args: str, token: str | None) -> str:
    """Run `clotho serve ARGS` (it must refuse to start) and return its one stderr line."""
    port = free_port()
    done = subprocess.run(
        [*serve_command(f"sqlite:///{tmp_path / 'clotho.db'}"), "--port", str(port), *args],
        env=serve_env(tmp_path / "data", token=token),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)  # as every refused command
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing listens
    return lines[0]


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("a", "it is 1 character long"),
        ("server-test-token-5e1f0a", "it is 24 characters long"),
        ("ab" * 20, "it has only 2 different characters"),
        ("password" * 4, "it has only 7 different characters"),
    ],
)
def test_beyond_loopback_a_weak_token_is_refused_with_the_reason(
    tmp_path: Path, token: str, why: str
) -> None:
    line = refused_start(tmp_path, "--host", "0.0.0.0", "--allowed-host", "h.example", token=token)
    assert line.startswith("error: refusing to listen on 0.0.0.0"), line
    assert "weak CLOTHO_API_TOKEN" in line and why in line
    assert "at least 32 characters, 8 of them different" in line
    assert token not in line or len(token) == 1  # the secret itself is not echoed


def test_on_every_address_the_names_to_answer_are_required(tmp_path: Path) -> None:
    line = refused_start(tmp_path, "--host", "0.0.0.0", token=STRONG)
    assert "refusing to listen on 0.0.0.0" in line
    assert "CLOTHO_ALLOWED_HOSTS" in line and "--allowed-host" in line


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--allowed-host", "https://h.example"), "CLOTHO_ALLOWED_HOSTS: 'https://h.example'"),
        (("--allowed-host", "h.example:8000"), "CLOTHO_ALLOWED_HOSTS: 'h.example:8000'"),
        (("--allowed-host", "*evil.example"), "CLOTHO_ALLOWED_HOSTS: '*evil.example'"),
        (("--cors-origin", "app.example"), "CLOTHO_CORS_ORIGINS: 'app.example'"),
        (("--cors-origin", "https://app.example/page"), "CLOTHO_CORS_ORIGINS"),
    ],
)
def test_malformed_names_and_origins_are_refused_even_on_loopback(
    tmp_path: Path, args: tuple[str, ...], named: str
) -> None:
    line = refused_start(tmp_path, *args, token="short")
    assert named in line, line


def test_the_rules_of_tokens_names_and_origins() -> None:
    assert token_weakness(STRONG) is None
    assert token_weakness("0123456789abcdef" * 2) is None  # `openssl rand -hex 16` shaped
    assert token_weakness("x" * 31) == "it is 31 characters long"
    assert token_weakness("abcdefg" * 5) == "it has only 7 different characters"

    loopback = ["127.0.0.1", "localhost", "[::1]"]
    assert served_hosts("127.0.0.1", Settings()) == loopback
    assert served_hosts("::1", Settings()) == loopback
    assert served_hosts("0.0.0.0", Settings()) == loopback
    assert served_hosts("192.168.1.5", Settings()) == [*loopback, "192.168.1.5"]
    assert served_hosts("fd00:0::5", Settings()) == [*loopback, "[fd00::5]"]
    given = Settings(allowed_hosts=["Clotho.Example.", "::1", "*.lan.example", "10.0.0.2"])
    assert served_hosts("::", given) == [*loopback, "clotho.example", "*.lan.example", "10.0.0.2"]

    assert allowed_origins(Settings(cors_origins=["HTTPS://App.Example:8443", "*"])) == [
        "https://app.example:8443",
        "*",
    ]
    with pytest.raises(UsageError, match=re.escape("CLOTHO_CORS_ORIGINS: 'ftp://app.example'")):
        allowed_origins(Settings(cors_origins=["ftp://app.example"]))


def test_lists_are_read_from_the_environment_comma_separated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLOTHO_ALLOWED_HOSTS", "a.example, b.example,,c.example")
    monkeypatch.setenv("CLOTHO_CORS_ORIGINS", "https://app.example")
    settings = Settings()
    assert settings.allowed_hosts == ["a.example", "b.example", "c.example"]
    assert settings.cors_origins == ["https://app.example"]
    monkeypatch.delenv("CLOTHO_ALLOWED_HOSTS")
    monkeypatch.delenv("CLOTHO_CORS_ORIGINS")
    assert Settings().allowed_hosts == Settings().cors_origins == []


# --- a served server: Host and CORS ------------------------------------------------


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`clotho serve` as it starts by default: loopback, no names or origins configured."""
    folder = tmp_path_factory.mktemp("plain")
    with running(f"sqlite:///{folder / 'clotho.db'}", folder / "data") as up:
        yield up


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`clotho serve` with a name, a wildcard name and a CORS origin configured."""
    folder = tmp_path_factory.mktemp("configured")
    args = ("--allowed-host", "clotho.example", "--cors-origin", ORIGIN)
    with running(f"sqlite:///{folder / 'clotho.db'}", folder / "data", *args) as up:
        yield up


def port_of(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def routes(api: httpx.Client) -> list[str]:
    """A route of every kind: the page, a file, health, the OpenAPI document and its
    page, and the API (a session's read)."""
    created = api.post("/api/sessions", json={"title": "hosts"})
    assert created.status_code == 201, created.text
    projection = f"/api/sessions/{created.json()['session']['id']}/projection"
    assert api.get(projection).status_code == 200
    return ["/", "/static/main.js", "/api/health", "/docs", "/openapi.json", projection]


def assert_refused(response: httpx.Response, host: str) -> None:
    assert response.status_code == 421, (response.request.url, response.text)
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "unknown_host" and problem["host"] == host
    assert repr(host) in problem["detail"] and "CLOTHO_ALLOWED_HOSTS" in problem["detail"]
    assert "access-control-allow-origin" not in response.headers


def test_a_foreign_host_gets_nothing_on_any_route(plain: Server) -> None:
    host = f"{EVIL}:{port_of(plain)}"
    with plain.client() as api:  # with the valid token, even
        for path in [*routes(api), "/api/sessions", "/api/no-such-route"]:
            assert_refused(api.get(path, headers={"Host": host}), host)
        refused = api.post("/api/sessions", json={"title": "x"}, headers={"Host": host})
        assert_refused(refused, host)
        assert "x" not in [s["title"] for s in api.get("/api/sessions").json()["sessions"]]


def test_the_loopback_names_are_answered_with_the_port(plain: Server) -> None:
    port = port_of(plain)
    with plain.client() as api:
        paths = routes(api)
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LocalHost"):
            for path in paths:
                answer = api.get(path, headers={"Host": host})
                assert answer.status_code == 200, (host, path, answer.text)


def test_a_request_without_a_host_is_refused(plain: Server) -> None:
    with socket.create_connection(("127.0.0.1", port_of(plain)), timeout=10) as conn:
        conn.sendall(b"GET /api/health HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer
    assert b"content-type: application/problem+json" in head.lower()
    assert b'"code":"invalid_host"' in body and b"no Host header" in body


def test_no_cors_header_unless_configured(plain: Server) -> None:
    with plain.client() as api:
        for path in routes(api):
            answer = api.get(path, headers={"Origin": ORIGIN})
            assert answer.status_code == 200
            assert not [name for name in answer.headers if name.startswith("access-control-")]
        preflight = api.options(
            "/api/sessions",
            headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
        )
        assert preflight.status_code == 405
        assert not [name for name in preflight.headers if name.startswith("access-control-")]


def test_configured_names_are_answered_and_others_refused(configured: Server) -> None:
    port = port_of(configured)
    with configured.client() as api:
        paths = routes(api)
        for host in (f"clotho.example:{port}", "clotho.example", f"127.0.0.1:{port}"):
            for path in paths:
                assert api.get(path, headers={"Host": host}).status_code == 200, (host, path)
        for host in (f"{EVIL}:{port}", f"sub.clotho.example:{port}", "clotho.example.evil"):
            assert_refused(api.get(paths[-1], headers={"Host": host}), host)


def test_cors_for_the_configured_origins_only(configured: Server) -> None:
    with configured.client() as api:
        projection = routes(api)[-1]
        answer = api.get(projection, headers={"Origin": ORIGIN})
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == ORIGIN
        assert "etag" in answer.headers["access-control-expose-headers"].lower()
        assert "access-control-allow-credentials" not in answer.headers  # a token, no cookie

        preflight = api.options(
            projection,
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "PUT",
                "Access-Control-Request-Headers": "authorization, if-match",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == ORIGIN
        assert "PUT" in preflight.headers["access-control-allow-methods"]
        allowed = preflight.headers["access-control-allow-headers"].lower()
        assert "authorization" in allowed and "if-match" in allowed

        other = api.get(projection, headers={"Origin": "https://evil.example"})
        assert other.status_code == 200
        assert "access-control-allow-origin" not in other.headers
        refused = api.options(
            projection,
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "PUT"},
        )
        assert refused.status_code == 400
        assert "access-control-allow-origin" not in refused.headers


# --- in process -------------------------------------------------------------------------


def test_the_app_alone_answers_loopback_and_its_settings_names(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(allowed_hosts=["testserver", "*.lan.example"])
    for host in ("127.0.0.1:8000", "localhost.", "[::1]", "[0::1]", "pi.lan.example:8000"):
        assert client.get("/api/health", headers={"Host": host}).status_code == 200, host
    for host in ("lan.example", "[::2]", "127.0.0.2", EVIL):
        assert client.get("/api/health", headers={"Host": host}).status_code == 421, host


@pytest.mark.slow
def test_workers_answer_the_same_names_and_origins(tmp_path: Path) -> None:
    """`--workers N`: each worker builds its app from the environment `clotho serve` gives
    it, the served names and the CORS origins included."""
    args = ("--workers", "2", "--allowed-host", "clotho.example", "--cors-origin", ORIGIN)
    with running(f"sqlite:///{tmp_path / 'clotho.db'}", tmp_path / "data", *args) as up:
        port = port_of(up)
        with up.client() as api:
            for _ in range(4):  # likely to meet both workers
                answer = api.get(
                    "/api/health", headers={"Host": "clotho.example", "Origin": ORIGIN}
                )
                assert answer.status_code == 200
                assert answer.headers["access-control-allow-origin"] == ORIGIN
                assert_refused(api.get("/", headers={"Host": f"{EVIL}:{port}"}), f"{EVIL}:{port}")
