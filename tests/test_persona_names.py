"""The player's name ({{user}}): the campaign's, else the persona's (the session's
settings), else the name the session was given, else the default."""

from __future__ import annotations

from pathlib import Path

from clotho.formats.campaign import load_campaign
from clotho.formats.names import DEFAULT_PLAYER, SessionNames


def test_the_persona_names_the_player_unless_the_campaign_does(tmp_path: Path) -> None:
    given = {"names": {"player": "Imported"}}
    persona = {**given, "settings": {"persona": {"name": "Aria", "description": "A bard."}}}
    assert SessionNames.resolve(None, None, persona).player == "Aria"
    assert SessionNames.resolve(None, None, given).player == "Imported"
    assert SessionNames.resolve(None, None, {}).player == DEFAULT_PLAYER
    broken = {"settings": {"persona": "not an object"}}  # written by something else
    assert SessionNames.resolve(None, None, broken).player == DEFAULT_PLAYER
    (tmp_path / "campaign.toml").write_text('player = "Hero"\n')
    assert SessionNames.resolve(load_campaign(tmp_path), None, persona).player == "Hero"
