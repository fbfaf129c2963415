"""Connection profiles and their keys: the files (0600 keys, whole writes, bad files named
with their field), and which profile a session's turns use."""

from __future__ import annotations

import os
import stat
import threading
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from clotho.formats.campaign import load_campaign
from clotho.profiles import (
    Profile,
    Profiles,
    ProfilesChangedError,
    ProfilesFileError,
    UnknownProfileError,
    chosen_profile,
)
from clotho.sessionconfig import SessionSettings
from clotho.settings import Settings
from clotho.wiring import NoModelError, turn_setup

KEY = "sk-test-9f3e1c0b7a5d"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _local(**given: object) -> Profile:
    return Profile.model_validate(
        {"model": "openai/gm", "api_base": "http://127.0.0.1:9/v1", **given}
    )


def test_a_key_goes_to_a_private_file_and_never_beside_the_profile(tmp_path: Path) -> None:
    folder = tmp_path / "config"
    profiles = Profiles(folder)
    assert profiles.save("Local", _local(params={"temperature": 0.7}), key=KEY) is True
    assert _mode(folder) == 0o700
    assert _mode(profiles.secrets_path) == 0o600
    assert KEY not in profiles.profiles_path.read_text()
    assert tomllib.loads(profiles.secrets_path.read_text()) == {"keys": {"Local": KEY}}
    assert profiles.key("Local") == KEY
    kept = profiles.get("Local")
    assert kept.params.params() == {"temperature": 0.7}
    assert kept.config(KEY).params == {"temperature": 0.7}
    # saved again without a key: the key stays; forget_key removes it
    assert profiles.save("Local", _local(preset="warm")) is False
    assert profiles.key("Local") == KEY and profiles.get("Local").preset == "warm"
    profiles.save("Local", _local(), forget_key=True)
    assert profiles.key("Local") is None
    # nothing left behind by the writes (their temporary files)
    assert sorted(p.name for p in folder.iterdir()) == [".lock", "profiles.toml", "secrets.toml"]


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX's")
def test_a_secrets_file_others_can_read_is_made_private_with_a_warning(tmp_path: Path) -> None:
    profiles = Profiles(tmp_path)
    profiles.save("Local", _local(), key=KEY)
    profiles.secrets_path.chmod(0o644)
    assert profiles.key("Local") == KEY
    assert _mode(profiles.secrets_path) == 0o600
    assert len(profiles.warnings) == 1 and "0644" in profiles.warnings[0]
    assert KEY not in profiles.warnings[0]


def test_readers_see_the_old_file_or_the_new_one_never_half(tmp_path: Path) -> None:
    profiles = Profiles(tmp_path)
    profiles.save("Local", _local(preset="p" * 90), key=KEY)
    seen: list[str] = []
    failures: list[Exception] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                seen.append(str(Profiles(tmp_path).get("Local").preset))
            except Exception as error:  # noqa: BLE001 - any failure is the test's finding
                failures.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for number in range(40):
            profiles.save("Local", _local(preset=f"{number}" * (1 + number % 30)))
    finally:
        done.set()
        reader.join()
    assert not failures
    assert len(seen) > 3


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[profiles.A]\nmodel = "a/b"\ncontext_window = -3\n', "profiles.A.context_window"),
        ('[profiles.A]\nmodel = "a/b"\ncolour = "red"\n', "profiles.A.colour"),
        ('[profiles.A]\napi_base = "http://x:1/v1"\n', "profiles.A.model"),
        ("[profiles.A]\nmodel = \n", "not TOML"),
        (
            '[profiles.A]\nmodel = "a/b"\ndefault = true\n[profiles.B]\nmodel = "c/d"\n'
            "default = true\n",
            "only one profile may be the default",
        ),
        ('[profiles.A]\nmodel = "a/b"\n[profiles.A.params]\ntemperature = 9\n', "temperature"),
    ],
)
def test_a_bad_profiles_file_names_the_file_and_the_field(
    tmp_path: Path, text: str, named: str
) -> None:
    (tmp_path / "profiles.toml").write_text(text)
    with pytest.raises(ProfilesFileError) as refused:
        Profiles(tmp_path).all()
    assert str(tmp_path / "profiles.toml") in str(refused.value)
    assert named in str(refused.value)


def test_a_bad_secrets_file_names_the_field_but_never_the_value(tmp_path: Path) -> None:
    path = tmp_path / "secrets.toml"
    path.write_text(f'[keys]\nLocal = "{KEY}"\nOther = 12\n')
    path.chmod(0o600)
    with pytest.raises(ProfilesFileError) as refused:
        Profiles(tmp_path).key("Local")
    assert "keys.Other" in str(refused.value) and str(path) in str(refused.value)
    assert KEY not in str(refused.value)


def test_a_profile_refuses_what_no_model_takes() -> None:
    for bad in (
        {"model": "has space"},
        {"model": "a/b", "api_base": "ftp://x.example"},
        {"model": "a/b", "timeout": 0},
        {"model": "a/b", "params": {"top_p": 2}},
        {"model": "a/b", "params": {"not a name": 1}},
    ):
        with pytest.raises(ValidationError):
            Profile.model_validate(bad)


def test_a_write_on_a_version_read_before_a_change_writes_nothing(tmp_path: Path) -> None:
    profiles = Profiles(tmp_path)
    profiles.save("A", _local())
    read = profiles.version()
    profiles.save("B", _local(), key=KEY)  # someone else's write
    assert profiles.version() != read
    before = profiles.profiles_path.read_bytes()
    with pytest.raises(ProfilesChangedError):
        profiles.save("A", _local(preset="mine"), expected_version=read)
    with pytest.raises(ProfilesChangedError):
        profiles.delete("A", expected_version=read)
    assert profiles.profiles_path.read_bytes() == before
    profiles.delete("B", expected_version=profiles.version())
    assert list(profiles.all()) == ["A"] and profiles.key("B") is None
    with pytest.raises(UnknownProfileError):
        profiles.delete("B")


def test_one_default_at_a_time(tmp_path: Path) -> None:
    profiles = Profiles(tmp_path)
    profiles.save("A", _local(default=True))
    profiles.save("B", _local(default=True))
    assert {name: p.default for name, p in profiles.all().items()} == {"A": False, "B": True}
    assert profiles.default() == ("B", profiles.get("B"))


# -- which profile a session's turns use --------------------------------------------


def _campaign(tmp_path: Path, model: str | None) -> Path:
    folder = tmp_path / "campaign"
    folder.mkdir(exist_ok=True)
    table = f'\n[model]\nmodel = "{model}"\nextraction_model = "openai/small"\n' if model else ""
    (folder / "campaign.toml").write_text(f'title = "Cave"\n{table}')
    return folder


def test_the_model_comes_from_the_command_line_then_the_session_then_the_campaign_then_the_default(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config"
    profiles = Profiles(config)
    profiles.save("Mine", _local(context_window=4096, params={"temperature": 0.3}), key=KEY)
    profiles.save("Fallback", Profile(model="ollama/llama3", default=True))
    chosen = SessionSettings(profile="Mine")
    with_model = load_campaign(_campaign(tmp_path, "openai/campaign"))

    explicit = Settings(config_dir=config, model="openai/cli", api_key="env-key")
    assert turn_setup(explicit, with_model, session_settings=chosen).model.model == "openai/cli"

    plain = Settings(config_dir=config)
    setup = turn_setup(plain, with_model, session_settings=chosen)
    assert (setup.model.model, setup.model.api_base) == ("openai/gm", "http://127.0.0.1:9/v1")
    assert setup.model.api_key == KEY and setup.model.context_window == 4096
    assert setup.model.params == {"temperature": 0.3}
    assert setup.extraction_model is None  # the campaign's names its own provider's model

    assert turn_setup(plain, with_model).model.model == "openai/campaign"
    assert turn_setup(plain, None).model.model == "ollama/llama3"
    # a key from CLOTHO_API_KEY when the secrets file holds none
    assert turn_setup(Settings(config_dir=config, api_key="env-key"), None).model.api_key == (
        "env-key"
    )

    profiles.save("Fallback", Profile(model="ollama/llama3"))  # no default any more
    with pytest.raises(NoModelError, match="Connections"):
        turn_setup(plain, None)
    with pytest.raises(UnknownProfileError, match="'Gone'"):
        turn_setup(plain, None, session_settings=SessionSettings(profile="Gone"))
    # a lore preview needs no model: a profile gone is no reason to refuse it
    preview = turn_setup(
        plain, None, require_model=False, session_settings=SessionSettings(profile="Gone")
    )
    assert preview.model.model == "none"


def test_chosen_profile_reads_no_file_when_the_model_is_explicit(tmp_path: Path) -> None:
    (tmp_path / "profiles.toml").write_text("not toml at all [")
    assert chosen_profile(tmp_path, "Mine", explicit_model=True, campaign_model=False) is None
    with pytest.raises(ProfilesFileError):
        chosen_profile(tmp_path, "Mine", explicit_model=False, campaign_model=False)
