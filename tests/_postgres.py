"""A throwaway PostgreSQL server for the test session.

Started from the machine's PostgreSQL binaries (``initdb``, ``pg_ctl``) in a
temporary directory, on a free loopback port, as the ``postgres`` user when the
tests run as root (PostgreSQL refuses to run as root); stopped and removed at the
end. ``CLOTHO_TEST_POSTGRES_URL`` names an existing server instead.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ENV_URL = "CLOTHO_TEST_POSTGRES_URL"


def find_bindir() -> Path | None:
    """The directory of ``initdb``/``pg_ctl``: $CLOTHO_PG_BINDIR, then Debian's layout."""
    explicit = os.environ.get("CLOTHO_PG_BINDIR")
    candidates = [explicit] if explicit else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    which = shutil.which("initdb")
    if which:
        candidates.append(str(Path(which).parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    return None


def _memory_folder() -> str | None:
    """``/dev/shm`` when it is there with room (4 GiB), else the usual temporary folder:
    a database made from the template takes a third of the time in memory, and the
    files of the session's databases go at once at the end."""
    with contextlib.suppress(OSError):
        if os.access("/dev/shm", os.W_OK) and shutil.disk_usage("/dev/shm").free >= 4 << 30:
            return "/dev/shm"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_server_user(args: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return args
    return ["runuser", "-u", "postgres", "--", *args]


@contextlib.contextmanager
def throwaway_server() -> Iterator[str]:
    """Start a server; yield its URL (``postgresql://postgres@127.0.0.1:PORT``)."""
    bindir = find_bindir()
    if bindir is None:
        raise FileNotFoundError("no PostgreSQL binaries (initdb, pg_ctl) on this machine")
    root = Path(tempfile.mkdtemp(prefix="clotho-pg-", dir=_memory_folder()))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        for path in (root, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
    port = _free_port()
    log = root / "server.log"
    try:
        subprocess.run(
            _as_server_user(
                [
                    str(bindir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
        )
        options = (
            f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -F "
            "-c full_page_writes=off -c synchronous_commit=off -c max_connections=100"
        )
        subprocess.run(
            _as_server_user(
                [
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(log),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    "60",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
        )
    except subprocess.CalledProcessError as error:
        detail = (error.stderr or b"").decode(errors="replace").strip()
        if log.exists():
            detail += "\n" + log.read_text(errors="replace")[-2000:]
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"could not start PostgreSQL: {detail}") from error
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            _as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            check=False,
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)
