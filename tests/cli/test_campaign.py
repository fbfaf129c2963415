"""campaign.toml read through its pydantic models: what it gives, and one line per refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from clotho.formats.campaign import CampaignError, load_campaign
from clotho.settings import Settings
from clotho.wiring import turn_setup
from orchestrator import ModelConfig
from planner.lore import VectorSettings
from planner.worldinfo import ScanSettings


def campaign(tmp_path: Path, toml: str, *files: str) -> Path:
    folder = tmp_path / "campaign"
    folder.mkdir(exist_ok=True)
    (folder / "campaign.toml").write_text(toml)
    for name in files:
        (folder / name).write_text("{}")
    return folder


def refusal(tmp_path: Path, toml: str, *files: str) -> str:
    folder = campaign(tmp_path, toml, *files)
    with pytest.raises(CampaignError) as caught:
        load_campaign(folder)
    message = str(caught.value)
    prefix = f"{folder / 'campaign.toml'}: "
    assert message.startswith(prefix) and "\n" not in message
    return message.removeprefix(prefix)


def test_an_empty_campaign_has_the_defaults_of_one_place(tmp_path: Path) -> None:
    read = load_campaign(campaign(tmp_path, ""))
    assert read.title is None and read.player is None
    assert read.model.config("m") == ModelConfig("m")  # the defaults are ModelConfig's
    assert read.lore.scan == ScanSettings() and read.lore.vectors == VectorSettings()
    assert (read.lore.books, read.lore.card, read.lore.planner) == ([], None, "rules")
    assert read.character.name == "Narrator"


def test_the_tables_reach_the_turn_setup(tmp_path: Path) -> None:
    folder = campaign(
        tmp_path,
        'title = "Cave"\nplayer = "Tom"\n'
        '[model]\nmodel = "openai/gm"\ntimeout = 30\nretries = 0\nextract = false\n'
        'summary_model = "openai/small"\n'
        "[model.params]\ntemperature = 0.2\n"
        '[character]\nname = "Marla"\n'
        '[lore]\nbooks = ["book.json"]\nscan_depth = 4\nplanner = "model"\n'
        "[lore.vectors]\nhits = 1\n",
        "book.json",
    )
    read = load_campaign(folder)
    assert read.book_files == [folder.resolve() / "book.json"]
    assert read.lore.scan == ScanSettings(scan_depth=4)
    assert read.lore.vectors == VectorSettings(hits=1)
    setup = turn_setup(Settings(), read)
    assert setup.model == ModelConfig(
        "openai/gm", params={"temperature": 0.2}, timeout=30, retries=0
    )
    assert setup.summarizer.model == "openai/small" and setup.summarizer.timeout == 30
    assert setup.extractor is setup.model
    assert (setup.extract, setup.plan_by_model) == (False, True)
    assert (setup.character.name, setup.player, setup.title) == ("Marla", "Tom", "Cave")


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        (
            '[model]\ntimeout = "soon"\n',
            "[model].timeout (line 2): Input should be a valid number (got 'soon')",
        ),
        (
            "[model]\ntimeuot = 3\n",
            "[model].timeuot (line 2): unknown key (did you mean 'timeout'?)",
        ),
        ("[model]\nretries = true\n", "[model].retries (line 2): Input should be a valid integer"),
        (
            "[model]\ncontext_window = 0\n",
            "[model].context_window (line 2): Input should be greater",
        ),
        ("[model]\nparams = 3\n", "[model].params (line 2): Input should be an object (got 3)"),
        ("title = 3\n", "title (line 1): Input should be a valid string (got 3)"),
        ("colour = 1\n", "colour (line 1): unknown key (known: title, player, state, model,"),
        ("[character]\nname = 3\n", "[character].name (line 2): Input should be a valid string"),
        (
            '[lore]\nplanner = "llm"\n',
            "[lore].planner (line 2): Input should be 'rules' or 'model'",
        ),
        (
            "[lore]\nscan_dept = 1\n",
            "[lore].scan_dept (line 2): unknown key (did you mean 'scan_depth'?)",
        ),
        ("[lore]\nbudget_percent = 0\n", "[lore].budget_percent (line 2): Input should be greater"),
        (
            "[lore.vectors]\nhits = 1.5\n",
            "[lore.vectors].hits (line 2): Input should be a valid integer",
        ),
        (
            '[lore]\nbooks = ["../x.json"]\n',
            "[lore].books[0] (line 2): '../x.json': the file must be",
        ),
        ('[lore]\ncard = "card.png"\n', "[lore].card (line 2): 'card.png': no such file"),
        ("model = { timeout = -1 }\n", "[model].timeout: Input should be greater than 0 (got -1)"),
        (
            "[lore]\nmin_activations = 1\nmax_recursion_steps = 2\n",
            "[lore] (line 1): min_activations and max_recursion_steps exclude each other",
        ),
        ("model = 3\n", "[model] (line 1): Input should be an object (got 3)"),
    ],
)
def test_a_wrong_key_is_one_line_naming_it(tmp_path: Path, toml: str, says: str) -> None:
    assert refusal(tmp_path, toml).startswith(says)


def test_several_problems_are_named_together_and_the_rest_counted(tmp_path: Path) -> None:
    toml = "[model]\n" + "".join(f"k{i} = 1\n" for i in range(5))
    said = refusal(tmp_path, toml)
    assert said.count("unknown key") == 3 and said.endswith("; and 2 more")


def test_a_syntax_error_names_the_line_tomllib_gives(tmp_path: Path) -> None:
    assert "line 2" in refusal(tmp_path, "title = 'x'\n[model\n")


def test_a_dotted_key_is_named_without_a_line(tmp_path: Path) -> None:
    said = refusal(tmp_path, 'lore.books = ["a.json", "b.json"]\n', "a.json")
    assert said == "[lore].books[1]: 'b.json': no such file"


def test_every_model_setting_reaches_the_models_config(tmp_path: Path) -> None:
    read = load_campaign(
        campaign(
            tmp_path,
            "[model]\ntimeout = 7.5\nretries = 5\ncontext_window = 4000\nreply_tokens = 300\n"
            "[model.params]\ntemperature = 0.5\n",
        )
    )
    made = read.model.config("m", api_base="http://127.0.0.1:9", api_key="k")
    assert made == ModelConfig(
        "m",
        api_base="http://127.0.0.1:9",
        api_key="k",
        params={"temperature": 0.5},
        timeout=7.5,
        retries=5,
        context_window=4000,
        reply_tokens=300,
    )
