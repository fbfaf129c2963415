"""Library code never prints: a warning it logs (lore found by keywords only, the Chroma
server being down) reaches the command line's stderr as ``warning: ...`` and a server's
log (its stderr) as ``clotho: warning: ...``, never a server's stdout; previewing lore
runs inside a running event loop (an API route awaits it)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from clotho.lore import import_lorebook
from clotho.settings import Settings
from clotho.wiring import preview_lore
from mnemosyne import Store
from tests._fixtures import ELDORIA as BOOK

from ..cli.test_cli import Run
from ._server import Server, free_port, serve_command, serve_env, stop, wait_ready

WARNING = "lore is found by keywords only"


def _chroma_down() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def test_a_preview_runs_inside_a_running_loop(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", vectors=False)
    with Store.open(f"sqlite:///{tmp_path / 'preview.db'}") as store:
        sid = store.create_session().id
        import_lorebook(store, sid, BOOK.read_bytes(), "World")

        async def in_the_loop() -> dict[str, object]:
            # (asyncio.run inside the library would raise here: a loop is running.)
            return await preview_lore(settings, store, sid, "Is that a Shadowfang?")

        preview = asyncio.run(in_the_loop())
    fired = preview["fired"]
    assert isinstance(fired, list)
    reasons = {row["uid"]: row["reason"] for row in fired if isinstance(row, dict)}
    assert reasons[1] == "key 'shadowfang' in message 0"


def test_the_command_line_shows_a_library_warning_on_stderr(tmp_path: Path) -> None:
    run = Run(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "home")
    run.env.update({"CLOTHO_VECTORS": "true", "CLOTHO_CHROMA_URL": _chroma_down()})
    run("session", "new")
    run("import", "lorebook", str(BOOK), "--name", "World")
    done = run("--json", "lore", "test", "Is that a Shadowfang?")
    fired = json.loads(done.stdout)  # stdout is the document alone
    assert ("World", 1) in [(row["book"], row["uid"]) for row in fired]
    (line,) = [line for line in done.stderr.splitlines() if WARNING in line]
    assert line.startswith(f"warning: {WARNING}: Chroma at http://127.0.0.1:")


def test_a_server_logs_a_library_warning_on_stderr_not_stdout(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    env = serve_env(data)
    env.update({"CLOTHO_VECTORS": "true", "CLOTHO_CHROMA_URL": _chroma_down()})
    port = free_port()
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            serve_command(f"sqlite:///{tmp_path / 'clotho.db'}", "--port", str(port)),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process, err)
        server = Server(url, env["CLOTHO_API_TOKEN"], process, err, data)
        with server.client() as api:
            sid = api.post("/api/sessions", json={}).json()["session"]["id"]
            imported = api.post(
                f"/api/sessions/{sid}/imports/lorebook",
                params={"name": "World"},
                content=BOOK.read_bytes(),
            )
            assert imported.status_code == 200, imported.text
            answer = api.post(
                f"/api/sessions/{sid}/lore/test",
                json={"text": "Is that a Shadowfang?"},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            assert ("World", 1) in [(row["book"], row["uid"]) for row in answer.json()]
    finally:
        stop(process)
    logged = err.read_text()
    assert f"clotho: warning: {WARNING}: Chroma at http://127.0.0.1:" in logged, logged
    assert "clotho: ready for the first turn" in logged  # the warm-up's notices too
    assert WARNING not in out.read_text()
