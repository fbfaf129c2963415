"""The state document says what the session's schema declares of each variable (type,
bounds as numbers at that state), so a page can draw HP 80/100 as a bar; a session
without a schema declares nothing and its variables are there all the same."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

CAMPAIGN = """\
[state.variables.max_hp]
type = "int"
default = 100

[state.variables.hp]
type = "int"
default = 100
min = 0
max = "max_hp"
description = "Hit points"

[state.variables.gold]
type = "int"
default = 10
min = 0

[state.variables.mood]
type = "enum"
choices = ["calm", "angry"]
"""


def test_the_state_declares_the_schema_bounds_resolved_at_that_node(
    client: TestClient, tmp_path: Path
) -> None:
    folder = tmp_path / "campaign"
    folder.mkdir()
    (folder / "campaign.toml").write_text(CAMPAIGN)
    made = client.post("/api/sessions", json={"title": "bounds", "campaign": str(folder)})
    assert made.status_code == 201, made.text
    sid = made.json()["session"]["id"]
    grown = [
        {"op": "set", "path": "max_hp", "value": 120},
        {"op": "inc", "path": "hp", "value": -30},
    ]
    added = client.post(
        f"/api/sessions/{sid}/messages", json={"role": "user", "content": "x", "delta": grown}
    )
    assert added.status_code == 201, added.text

    state = client.get(f"/api/sessions/{sid}/state").json()
    assert state["variables"]["hp"] == 70
    declared = state["declared"]
    assert list(declared) == ["max_hp", "hp", "gold", "mood"]  # the schema's order
    assert declared["hp"] == {
        "type": "int",
        "min": 0,
        "max": 120,  # "max_hp", as it stands at HEAD
        "choices": None,
        "description": "Hit points",
    }
    assert declared["gold"]["min"] == 0 and declared["gold"]["max"] is None
    assert declared["mood"]["choices"] == ["calm", "angry"]


def test_a_session_without_a_schema_declares_nothing(client: TestClient) -> None:
    sid = client.post("/api/sessions", json={"title": "free"}).json()["session"]["id"]
    delta = [{"op": "set", "path": "luck", "value": 3}]
    client.post(
        f"/api/sessions/{sid}/messages", json={"role": "user", "content": "x", "delta": delta}
    )
    state = client.get(f"/api/sessions/{sid}/state").json()
    assert state["variables"] == {"luck": 3} and state["declared"] == {}
