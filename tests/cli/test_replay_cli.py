"""``clotho replay``: a reply's prompt sent again to another model or profile, with other
settings, lore or note, from the command line (in this process, SQLite, a model server
on loopback for the session's model and another for a profile's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemosyne import Store
from orchestrator.loopback import ModelServer, Reply

from .test_cli import InProcess

NOTHING = '{"operations": []}'


def answers(request: dict[str, Any]) -> Reply | str:
    """Each model answers in its own words; extraction finds no change."""
    if "response_format" in request:
        return NOTHING
    if request["model"] == "missing":
        return Reply(status=404, error="The model `missing` does not exist")
    return f"{request['model']} answers at {request.get('temperature', 'default')}."


@pytest.fixture
def home(serve: Callable[..., ModelServer]) -> ModelServer:
    return serve(answers)


@pytest.fixture
def clotho(tmp_path: Path, home: ModelServer) -> InProcess:
    runner = InProcess.on_sqlite(tmp_path)
    runner.env.update(
        {
            "CLOTHO_MODEL": "openai/gm",
            "CLOTHO_API_BASE": home.url,
            "CLOTHO_API_KEY": "x",
            "CLOTHO_CONFIG_DIR": str(tmp_path / "config"),
        }
    )
    return runner


def test_replay_with_another_model_and_settings(clotho: InProcess) -> None:
    clotho("session", "new", "--title", "Replays")
    said = clotho.json("say", "Hello there.")
    original = said["node"]["id"]
    made = clotho.json(
        "replay", original[:8], "--model", "openai/other", "--param", "temperature=1.1", "--n", "2"
    )
    assert [m["node"]["content"] for m in made] == ["other answers at 1.1."] * 2
    assert all(m["node"]["parent_id"] == said["node"]["parent_id"] for m in made)
    assert made[0]["replay"] == {
        "of": original,
        "sent": "as stored",
        "changed": {
            "model": ["openai/gm", "openai/other"],
            "params": {"temperature": [None, 1.1]},
        },
    }
    # the session's own model is untouched: a reroll still asks it
    assert clotho.json("reroll")["node"]["content"] == "gm answers at default."
    shown = clotho("replay", original[:8], "--param", "temperature=0.2").stdout
    assert f"replay of {original[:8]}" in shown and "temperature None -> 0.2" in shown
    assert "gm answers at 0.2." in shown


def test_replay_with_a_profile_reaches_its_server(
    clotho: InProcess, tmp_path: Path, home: ModelServer, serve: Callable[..., ModelServer]
) -> None:
    far = serve(answers)
    config = tmp_path / "config"
    config.mkdir()
    (config / "profiles.toml").write_text(
        f'[profiles.Far]\nmodel = "openai/far"\napi_base = "{far.url}"\n'
        "[profiles.Far.params]\ntemperature = 0.3\n"
    )
    clotho("session", "new")
    original = clotho.json("say", "Hi.")["node"]["id"]
    before = len(home.requests)
    [made] = clotho.json("replay", original, "--profile", "Far")
    assert made["node"]["content"] == "far answers at 0.3."
    assert made["replay"]["changed"]["profile"] == [None, "Far"]
    assert made["replay"]["changed"]["params"] == {"temperature": [None, 0.3]}
    # the reply from the profile's server; its state extracted by the session's model
    assert len(far.requests) == 1
    assert len(home.requests) == before + 1 and "response_format" in home.requests[-1].json


def test_replay_rebuilt_with_a_note_and_a_template(
    clotho: InProcess, tmp_path: Path, home: ModelServer
) -> None:
    clotho("session", "new")
    original = clotho.json("say", "Hi.")["node"]["id"]
    system = tmp_path / "system.j2"
    system.write_text("You narrate tersely for {{ user }}.")
    [made] = clotho.json("replay", original, "--note", "Rain falls.", "--template", str(system))
    assert made["replay"]["sent"] == "rebuilt"
    assert made["replay"]["changed"] == {
        "templates": {"system": ["package", str(system)]},
        "note": ["", "Rain falls."],
    }
    sent = home.requests[-2].messages  # the reply's request, before its extraction
    assert sent[0]["content"].startswith("You narrate tersely for ")
    assert any(m["content"] == "Rain falls." for m in sent)
    assert made["state"]["author_note"]["text"] == "Rain falls."


def test_replay_refusals_are_one_line_and_store_nothing(clotho: InProcess) -> None:
    clotho("session", "new")
    said = clotho.json("say", "Hi.")
    reply, player = said["node"]["id"], said["user_node"]["id"]
    version = said["session"]["version"]
    assert "user message" in clotho.fails("replay", player, "--param", "temperature=1")
    assert "changes something" in clotho.fails("replay", reply)
    assert "1 to 8" in clotho.fails("replay", reply, "--param", "seed=1", "--n", "9")
    assert "temperature" in clotho.fails("replay", reply, "--param", "temperature=9")
    assert "NAME=VALUE" in clotho.fails("replay", reply, "--param", "hot")
    assert "no lore entry" in clotho.fails("replay", reply, "--lore-on", "book:3")
    assert "not both" in clotho.fails("replay", reply, "--model", "openai/x", "--profile", "P")
    assert "Nope" in clotho.fails("replay", reply, "--profile", "Nope")
    assert "missing" in clotho.fails("replay", reply, "--model", "openai/missing")
    with Store.open(clotho.env["CLOTHO_DATABASE_URL"]) as store:
        assert store.session(said["session"]["id"]).version == version


def test_replay_prints_its_warnings(tmp_path: Path, serve: Callable[..., ModelServer]) -> None:
    def unreadable(request: dict[str, Any]) -> Reply | str:
        return "not json" if "response_format" in request else answers(request)

    server = serve(unreadable)
    clotho = InProcess.on_sqlite(tmp_path)
    clotho.env.update({"CLOTHO_MODEL": "openai/gm", "CLOTHO_API_BASE": server.url})
    clotho.env.update({"CLOTHO_API_KEY": "x", "CLOTHO_CONFIG_DIR": str(tmp_path / "config")})
    clotho("session", "new", "--title", "Warnings")
    original = clotho.json("say", "Hello there.")["node"]["id"]
    shown = clotho("replay", original[:8], "--param", "seed=3").stdout
    assert "gm answers at default.\nno state change\nwarning: the world state was not updated" in (
        shown
    )
