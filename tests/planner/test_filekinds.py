"""Telling a character card from a lorebook by content (the importers' hints)."""

from __future__ import annotations

import json

import pytest

from planner.filekinds import file_kind
from tests._fixtures import ELDORIA, SERAPHINA


def test_the_real_card_and_book_are_told_apart() -> None:
    assert file_kind(SERAPHINA.read_bytes()) == "card"
    assert file_kind(ELDORIA.read_bytes()) == "lorebook"


@pytest.mark.parametrize(
    ("document", "kind"),
    [
        ({"spec": "chara_card_v2", "data": {"name": "Ann"}}, "card"),
        ({"spec": "chara_card_v3", "data": {"name": "Ann"}}, "card"),
        ({"name": "Ann", "first_mes": "Hello."}, "card"),  # V1
        ({"entries": {}}, "lorebook"),
        ({"entries": [], "name": "Lore"}, "lorebook"),
        ({"spec": "something_else", "entries": {}}, "lorebook"),
        ({"messages": []}, None),
        ([1, 2], None),
    ],
)
def test_json_files_by_their_shape(document: object, kind: str | None) -> None:
    assert file_kind(json.dumps(document).encode()) == kind


def test_what_is_not_json_is_neither() -> None:
    assert file_kind(b"not json") is None
    assert file_kind(b"\xff\xfe\x00") is None
    assert file_kind("[" * 10_000) is None  # past the nesting limit: neither, no crash
