"""The ``clotho`` command, run as a subprocess (:class:`Run`) or in this process
(:class:`InProcess`): its JSON output and exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clotho.cli import app

CLOTHO = shutil.which("clotho", path=str(Path(sys.executable).parent)) or "clotho"


class Run:
    """Runs ``clotho`` against one database with a private home directory."""

    def __init__(self, url: str, home: Path) -> None:
        self.url = url
        self.env = {
            **os.environ,
            "CLOTHO_DATABASE_URL": url,
            "HOME": str(home),
            "XDG_DATA_HOME": str(home / "data"),
            "NO_COLOR": "1",
        }
        self.env.pop("CLOTHO_SESSION", None)

    def __call__(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [CLOTHO, *args], env=self.env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
        return done

    def json(self, *args: str) -> Any:
        done = self("--json", *args)
        return json.loads(done.stdout)  # the whole of stdout is one document

    def fails(self, *args: str, code: int = 1) -> str:
        done = self(*args, code=code)
        if code in (1, 3):
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1, done.stderr
            return lines[0]
        return done.stderr


class InProcess(Run):
    """``clotho`` run in this process (Typer's runner) as :class:`Run` runs it: the same
    database, home and answers, without a process's start-up (a test of many commands)."""

    def __init__(self, url: str, home: Path) -> None:
        super().__init__(url, home)
        self.runner = CliRunner()

    @classmethod
    def on_sqlite(cls, folder: Path) -> InProcess:
        """One on a SQLite database of its own in ``folder``."""
        return cls(f"sqlite:///{folder / 'cli.db'}", folder / "home")

    def __call__(self, *args: str, code: int = 0) -> Any:
        # exactly :attr:`env`, as a process gets it: what it has not is unset here
        env: dict[str, str | None] = {key: None for key in os.environ if key not in self.env}
        env.update(self.env)
        done = self.runner.invoke(app, list(args), env=env, prog_name="clotho")
        assert done.exit_code == code, (args, done.exit_code, done.stdout, done.stderr)
        return done


@pytest.fixture
def run(database_url: str, tmp_path: Path) -> Run:
    """``clotho`` in this process (a test of many commands); :class:`Run` runs it as a
    player does, a process per command."""
    return InProcess(database_url, tmp_path / "home")


@pytest.fixture
def run_sqlite(tmp_path: Path) -> Run:
    return InProcess.on_sqlite(tmp_path)


def test_a_campaign_by_hand(run: Run) -> None:
    campaign_by_hand(run)


def test_a_campaign_by_hand_one_process_per_command(tmp_path: Path) -> None:
    """As a player runs it: each command its own process (SQLite; both databases above)."""
    campaign_by_hand(Run(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "home"))


def campaign_by_hand(run: Run) -> None:
    session = run.json("session", "new", "--title", "Goblins")
    assert (session["title"], session["head_id"], session["version"]) == ("Goblins", None, 0)
    system = run.json("add", "system", "You narrate.")
    user = run.json("add", "user", "I attack", "--name", "Alice")
    first = run.json(
        "add", "assistant", "You miss", "--delta", '[{"op":"inc","path":"hp","value":-10}]'
    )
    assert user["parent_id"] == system["id"] and first["parent_id"] == user["id"]
    assert first["delta"] == [{"op": "inc", "path": "hp", "value": -10}]
    assert set(first) >= {"id", "parent_id", "role", "name", "content", "enabled"}
    second = run.json("fork", first["id"][:8], "You hit")
    assert (second["parent_id"], second["role"]) == (user["id"], "assistant")

    log = run.json("log")
    assert [n["id"] for n in log] == [system["id"], user["id"], second["id"]]
    shown = run.json("show", first["id"][:7])
    assert (shown["siblings"], shown["index"]) == ([first["id"], second["id"]], 0)

    back = run.json("swipe", "prev")
    assert (back["id"], back["index"]) == (first["id"], 0)
    assert [n["id"] for n in run.json("log")][-1] == first["id"]
    run.fails("swipe", "prev")  # the first of two: nothing before it

    forward = run.json("swipe", "next", first["id"])
    assert forward["id"] == second["id"]
    moved = run.json("checkout", user["id"][:6])
    assert moved["id"] == user["id"]

    tree = run.json("tree")
    assert tree["head_id"] == user["id"]
    assert [n["id"] for n in tree["nodes"]] == [system["id"], user["id"], first["id"], second["id"]]
    listed = run.json("session", "list")
    assert [(s["id"], s["nodes"], s["current"]) for s in listed] == [(session["id"], 4, True)]


def test_text_output_shows_the_graph_and_head(run_sqlite: Run) -> None:
    run = run_sqlite
    run("session", "new")
    run("add", "user", "Open the door")
    first = run.json("add", "assistant", "It creaks")
    second = run.json("fork", first["id"], "It is locked")
    tree = run("tree", "--all").stdout.splitlines()  # side branches unfolded
    assert tree[0].startswith("* ") and "Open the door" in tree[0]
    assert tree[1] == "|\\"
    assert tree[2].startswith("| * ") and first["id"][:8] in tree[2] and "< 1/2 >" in tree[2]
    assert tree[3].startswith("* ") and second["id"][:8] in tree[3] and "(HEAD)" in tree[3]
    log = run("log").stdout
    assert "It is locked" in log and "It creaks" not in log and "< 2/2 >" in log
    assert first["id"] in run("show", first["id"]).stdout


def test_nodes_are_named_as_in_git(run: Run) -> None:
    run("session", "new")
    root = run.json("add", "system", "You narrate.")
    user = run.json("add", "user", "Open the door")
    first = run.json("add", "assistant", "It creaks")
    second = run.json("fork", "HEAD", "It is locked")  # the README's tour types this
    assert second["parent_id"] == user["id"]
    assert run.json("show", "HEAD~1")["id"] == user["id"]
    assert run.json("show", "@^^")["id"] == root["id"]
    assert run.json("swipe", "prev", "HEAD")["id"] == first["id"]
    assert run.json("state", "HEAD~2")["variables"] == {}
    before = run.json("tree")
    assert run.fails("checkout", "HEAD~9") == (
        f"error: HEAD~9: the path from the root to HEAD has 3 nodes (HEAD~2 is {root['id'][:8]})"
    )
    assert "HEAD is written in capitals" in run.fails("checkout", "head")
    assert run.json("tree") == before


def test_global_options_go_before_or_after_the_command(run_sqlite: Run, tmp_path: Path) -> None:
    run = run_sqlite
    other = f"sqlite:///{tmp_path / 'other.db'}"
    made = json.loads(run("--db", other, "--json", "session", "new").stdout)
    again = json.loads(run("session", "list", "--db", other, "--json").stdout)
    assert [s["id"] for s in again] == [made["id"]]
    assert run.json("session", "list") == []  # the default database is another one


def test_sessions_are_chosen_by_flag_or_the_last_used(run_sqlite: Run) -> None:
    run = run_sqlite
    run.fails("log")  # no session yet
    one = run.json("session", "new", "--title", "one")["id"]
    two = run.json("session", "new", "--title", "two")["id"]
    run.json("add", "user", "in two")
    assert run.json("--session", one[:6], "log") == []
    # Naming a session makes it the default of what follows.
    run.json("add", "user", "in one")
    assert [n["content"] for n in run.json("log")] == ["in one"]
    run.json("session", "use", two)
    assert [n["content"] for n in run.json("log")] == ["in two"]


def test_errors_name_what_was_wrong_and_change_nothing(run: Run) -> None:
    run.json("session", "new")
    node = run.json("add", "user", "hello")
    before = run.json("tree")
    assert "'narrator'" in run.fails("add", "narrator", "x")
    assert "role must be one of" in run.fails("add", "", "x")
    assert "'abcdef12'" in run.fails("checkout", "abcdef12")
    assert "too short" in run.fails("show", "abc")
    assert "--delta" in run.fails("add", "user", "x", "--delta", "{not json")
    assert "version" in run.fails("add", "user", "x", "--expect-version", "0", code=3)
    run.fails("swipe", "sideways", code=2)
    run.fails("no-such-command", code=2)
    other = run.json("--session", node["session_id"], "session", "new")["id"]
    foreign = run.json("--session", other, "add", "user", "elsewhere")
    message = run.fails("--session", node["session_id"], "checkout", foreign["id"])
    assert foreign["id"] in message and other in message
    assert run.json("--session", node["session_id"], "tree") == before


def test_a_corrupt_database_is_reported_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    path.write_bytes(b"\x00not sqlite\x00" * 500)
    run = Run(f"sqlite:///{path}", tmp_path / "home")
    message = run.fails("session", "list")
    assert "not a usable database" in message and str(path) in message
    assert path.read_bytes() == b"\x00not sqlite\x00" * 500


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("nonsense", "not a database URL"),
        ("mysql://x/y", "not mysql"),
        ("postgresql://postgres@127.0.0.1:1/none", "Connection refused"),
    ],
)
def test_a_database_that_cannot_be_used_is_named(url: str, expected: str, tmp_path: Path) -> None:
    message = Run(url, tmp_path / "home").fails("session", "list")
    assert expected in message


def test_db_upgrade_and_status(
    backend: str, blank_database_url: Callable[[str], str], tmp_path: Path
) -> None:
    run = InProcess(blank_database_url(backend), tmp_path / "home")
    status = run.json("db", "status")
    assert (status["revision"], status["current"]) == (None, False)
    upgraded = run.json("db", "upgrade")
    assert upgraded["before"] is None and upgraded["after"] == status["expected"]
    assert run.json("db", "status")["current"] is True
    assert run.json("db", "upgrade")["before"] == upgraded["after"]
    assert run.json("session", "new")["version"] == 0


def test_the_demo_runs_with_nothing_configured(tmp_path: Path) -> None:
    run = Run(f"sqlite:///{tmp_path / 'unused.db'}", tmp_path / "home")
    run.env["TMPDIR"] = str(tmp_path)
    text = run("demo").stdout
    lines = text.splitlines()
    assert "(HEAD)" in text and "|\\" in text
    swipes = [line for line in lines if "swipe prev: HEAD ->" in line or "swipe next:" in line]
    assert len(swipes) == 2 and not any("(HEAD)" in line for line in swipes)
    # the closing tree: the edited first message is a root of its own, apart
    tree = lines[next(i for i, line in enumerate(lines) if line.startswith("9. ")) + 1 :]
    gap = tree.index("")
    assert "I draw my sword" in tree[0] and "I sneak into the cave" in tree[gap + 1]
    assert lines[-1] == "  clotho demo --keep"  # its last line: a command that works
    assert not list(tmp_path.glob("clotho-demo-*"))  # its database is gone
    assert "clotho trace" not in text  # no command on a database that is gone

    result = run.json("demo")
    assert result["kept"] is False
    steps = {s["step"]: s for s in result["steps"]}
    assert {"scene", "purchase", "reroll", "swipe", "edit", "checkout", "undo", "trace"} <= set(
        steps
    )
    assert steps["undo"]["fragments_after_undo"] == 0
    assert len(steps["reroll"]["siblings"]) == 2
    assert steps["scene"]["state"]["variables"]["hp"] == 45  # below 50: the wound's lore
    assert steps["reroll"]["state"]["variables"]["hp"] == 100  # the reroll restored it
    assert steps["swipe"]["state"]["variables"]["hp"] == 45  # back where that timeline was
    assert steps["checkout"]["state"]["variables"]["gold"] == 5
    assert steps["checkout"]["state"]["variables"]["inventory"] == ["healing potion"]
    assert steps["trace"]["verified"] is True
    assert result["tree"]["head_id"] == steps["checkout"]["head_id"]
    assert not (tmp_path / "unused.db").exists()  # the demo never touches the user's data

    # the lorebook: one entry by its key, one by meaning, one waiting for hp < 50
    fight, purchase = steps["trace"]["lore"]["fight"], steps["trace"]["lore"]["purchase"]
    came = {hit["comment"]: hit for hit in purchase["fired"]}
    assert came["Grell the merchant"]["reason"].startswith("key 'merchant'")
    assert came["Badly wounded"]["reason"] == "constant; its condition hp < 50 holds"
    found = {hit["comment"]: hit for hit in fight["fired"]}
    assert found["Inside the cave"]["via"] == "meaning"  # its key, 'warren', is never said
    assert "Badly wounded" not in found
    assert [miss["reason"] for miss in fight["skipped"] if miss["comment"] == "Badly wounded"] == [
        "held back: condition hp < 50 is false (hp = 100)"
    ]
    # what the lore told the game master shows in its replies: an ambush cuts deep
    assert "an ambush: its rusty blade bites deep" in text
    assert '"Grell\'s the name," he mutters.' in text
    assert "Each breath stabs at the wound" in text


def test_the_demo_kept_ends_with_a_command_that_opens_it(tmp_path: Path) -> None:
    run = Run(f"sqlite:///{tmp_path / 'unused.db'}", tmp_path / "home")
    run.env["TMPDIR"] = str(tmp_path)
    last = run("demo", "--keep").stdout.splitlines()[-1].split()
    assert last[:2] == ["clotho", "--db"] and last[-2:] == ["trace", "HEAD"]
    opened = run(*last[1:]).stdout  # the command as printed, run
    assert "key 'merchant'" in opened and "messages verified" in opened
    assert not (tmp_path / "unused.db").exists()


def test_python_dash_m_works(tmp_path: Path) -> None:
    env = {**os.environ, "CLOTHO_DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}"}
    done = subprocess.run(
        [sys.executable, "-m", "clotho", "--json", "session", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == []


CAMPAIGN = """
title = "The Goblin Cave"

[state.variables.hp]
type = "int"
default = 100
min = 0
max = "max_hp"

[state.variables.max_hp]
type = "int"
default = 100

[state.variables.gold]
type = "int"
default = 10
min = 0
out_of_bounds = "refuse"
"""


def test_the_world_state_follows_head(run: Run, tmp_path: Path) -> None:
    folder = tmp_path / "cave"
    folder.mkdir()
    (folder / "campaign.toml").write_text(CAMPAIGN)
    session = run.json("session", "new", "--campaign", str(folder))
    assert session["title"] == "The Goblin Cave"
    run.json("add", "user", "I attack")
    hit = run.json(
        "add",
        "assistant",
        "The goblin hits you",
        "--delta",
        '[{"op":"inc","path":"hp","value":-10}]',
    )
    assert run.json("state")["variables"] == {"hp": 90, "max_hp": 100, "gold": 10}
    miss = run.json("fork", hit["id"], "It misses")
    assert run.json("state")["variables"]["hp"] == 100
    run.json("swipe", "prev")
    assert run.json("state")["variables"]["hp"] == 90
    assert run.json("state", miss["id"][:8])["variables"]["hp"] == 100
    assert run.json("diff", miss["id"], hit["id"]) == {"hp": [100, 90]}
    assert run.json("blame", "hp") == {"path": "hp", "value": 90, "node_id": hit["id"]}
    history = run.json("changes", "hp")
    assert history["start"] == 100 and [c["node_id"] for c in history["changes"]] == [hit["id"]]
    assert "last written by" in run("blame", "hp").stdout
    before = run.json("tree")
    message = run.fails(
        "add",
        "user",
        "I pay",
        "--delta",
        '[{"op":"inc","path":"gold","value":-20},{"op":"set","path":"mana","value":1}]',
    )
    assert "below its min 0" in message and "unknown variable 'mana'" in message
    assert run.json("tree") == before


def test_a_broken_campaign_is_named(run_sqlite: Run, tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "campaign.toml").write_text("title = 'x'\n[state.variables.hp\ntype = 'int'\n")
    message = run_sqlite.fails("campaign", "check", str(folder))
    assert "campaign.toml" in message and "line 2" in message
    (folder / "campaign.toml").write_text("[state.variables.hp]\ntype = 'int'\ndefault = 'full'\n")
    message = run_sqlite.fails("session", "new", "--campaign", str(folder))
    assert "campaign.toml [state]: variables.hp: default: expected int" in message
    (folder / "campaign.toml").write_text("state = 'schema.toml'\n")
    (folder / "schema.toml").write_text("[variables.hp]\ntype = 'int'\nmax = 'max_hp'\n")
    message = run_sqlite.fails("campaign", "check", str(folder))
    assert "schema.toml" in message and "not a number variable" in message
    assert run_sqlite.json("session", "list") == []  # nothing was created
    assert "no campaign.toml" in run_sqlite.fails("campaign", "check", str(tmp_path))


def test_the_editor_commands_are_the_edit_operations() -> None:
    """One definition: every operation of mnemosyne.edits is a command of the same name
    (checkout, HEAD's move, is the tree's), and every command of clotho/cli/editor.py is
    an operation or one of the journal's."""
    from clotho.cli import app
    from mnemosyne.edits import EDITS

    commands = {info.name: info.callback for info in app.registered_commands}
    assert set(EDITS) <= commands.keys()
    editing = {name for name, fn in commands.items() if fn.__module__ == "clotho.cli.editor"}
    assert editing - set(EDITS) == {"fragments", "trash", "purge", "undo", "redo", "history"}
    assert set(EDITS) - editing == {"checkout"}


def test_a_malformed_field_of_an_edit_is_refused_by_name(run: Run) -> None:
    run.json("session", "new")
    a = run.json("add", "user", "a")["id"]
    assert "inject: role: Input should be" in run.fails("inject", "narrator", "x", "--after", a)
    assert "prune: node_id: Value error, node id prefix 'abc' is too short" in run.fails(
        "prune", "abc"
    )
    assert run.json("history") == []


def test_the_tree_editor_with_undo(run: Run) -> None:
    run.json("session", "new")
    a = run.json("add", "user", "a")["id"]
    b = run.json("add", "assistant", "b")["id"]
    c = run.json("add", "user", "c")["id"]
    pruned = run.json("prune", b)
    assert pruned["head_moved"] and pruned["head_id"] == a and pruned["note"]
    assert [f["top"]["id"] for f in run.json("fragments")] == [b]
    run.json("graft", b, "--onto", a)
    injected = run.json("inject", "system", "A storm.", "--after", a)["node_id"]
    run.json("rewrite", c, "c!")
    run.json("toggle", injected)
    run.json("delete", c)
    assert [t["top"]["id"] for t in run.json("trash")] == [c]
    history = run.json("history")
    assert [e["action"] for e in history] == [
        "prune",
        "graft",
        "inject",
        "rewrite",
        "toggle",
        "delete",
    ]
    assert history[-1]["current"] and {"action", "at", "current"} <= set(history[-1])
    assert run("undo").stdout.startswith("undone: the deletion (to the trash); HEAD ")
    for _ in range(5):
        run.json("undo")
    assert "nothing to undo" in run.fails("undo")
    assert [n["content"] for n in run.json("log")] == ["a", "b", "c"]
    assert run("redo").stdout.startswith("redone: the prune; HEAD ")
    assert run.json("fragments")[0]["top"]["id"] == b
    assert "in a fragment" in run.fails("graft", a, "--onto", b)
    run.json("redo")
    assert "cycle" in run.fails("graft", a, "--onto", c)
    run.json("delete", b)
    assert run.json("purge", "--yes")["deleted"] == 2
    assert run.json("trash") == [] and run.json("history") == []
    run.json("add", "user", "more")
