"""mnemosyne.validation: one line for a pydantic ValidationError, whatever the format."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import TypedDict

from mnemosyne.validation import json_place, known_keys, problem_line, toml_place

STRICT = ConfigDict(strict=True, extra="forbid")


class Leaf(TypedDict):
    colour: str
    weight: int


class Inner(BaseModel):
    model_config = STRICT
    timeout: float = 1.0
    retries: int = 0


class Outer(BaseModel):
    model_config = STRICT
    model: Inner | None = None
    leaves: list[Leaf] = Field(default_factory=list)
    named: dict[str, Inner] = Field(default_factory=dict)
    code: Annotated[str, Field(pattern=r"^[a-z]+$")] = "a"


def refusal(data: object, **options: object) -> str:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(data)
    return problem_line(caught.value, "f.json", model=Outer, **options)  # type: ignore[arg-type]


def test_places_are_written_as_json_paths_or_toml_keys() -> None:
    assert json_place(("nodes", 12, "role")) == "nodes[12].role"
    assert json_place(()) == "(top)"
    assert json_place(("blobs", "abc", "[key]")) == "blobs.abc"
    assert toml_place(("model", "timeout")) == "[model].timeout"
    assert toml_place(("lore", "vectors", "hits")) == "[lore.vectors].hits"
    assert toml_place(("lore", "books", 2)) == "[lore].books[2]"
    assert toml_place(("title",)) == "title"


def test_known_keys_follow_models_typeddicts_lists_dicts_and_optionals() -> None:
    assert known_keys(Outer, ("model",)) == ["timeout", "retries"]
    assert known_keys(Outer, ("leaves", 3)) == ["colour", "weight"]
    assert known_keys(Outer, ("named", "x")) == ["timeout", "retries"]
    assert known_keys(list[Leaf], (0,)) == ["colour", "weight"]
    assert known_keys(Outer, ("code",)) == []


def test_an_unknown_key_is_answered_with_the_nearest_or_the_known_ones() -> None:
    assert refusal({"model": {"timeuot": 1}}) == (
        "f.json: model.timeuot: unknown key (did you mean 'timeout'?)"
    )
    assert refusal({"leaves": [{"colour": "red", "weight": 1, "x": 0}]}) == (
        "f.json: leaves[0].x: unknown key (known: colour, weight)"
    )


def test_a_wrong_value_is_shown_and_a_missing_key_named() -> None:
    assert refusal({"model": {"retries": "2"}}) == (
        "f.json: model.retries: Input should be a valid integer (got '2')"
    )
    assert refusal({"leaves": [{"colour": "red"}]}) == "f.json: leaves[0].weight: missing"
    assert refusal({"model": 3}) == "f.json: model: Input should be an object (got 3)"


def test_a_pattern_is_said_in_words_when_it_is_given_some() -> None:
    said = refusal({"code": "B"}, patterns={r"^[a-z]+$": "lowercase letters only"})
    assert said == "f.json: code: lowercase letters only (got 'B')"
    assert "should match pattern" in refusal({"code": "B"})


def test_the_first_problems_are_named_and_the_rest_counted_on_one_line() -> None:
    said = refusal({"leaves": [{"colour": 1, "weight": 1}] * 1500})
    assert said.count("should be a valid string") == 3 and said.endswith("; and 1,497 more")
    assert "\n" not in said


def test_a_line_is_named_when_the_file_can_tell_it() -> None:
    said = refusal({"model": {"retries": -0.5}}, place=toml_place, line=lambda loc: 7)
    assert said.startswith("f.json: [model].retries (line 7): Input should be a valid integer")
