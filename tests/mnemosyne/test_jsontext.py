"""mnemosyne.jsontext: JSON text from outside read within limits, each refusal one line
naming the place (JSON path, line) and the limit, checked before the decoder recurses."""

from __future__ import annotations

import json

import pytest

from mnemosyne import MnemosyneError, jsontext
from mnemosyne.errors import JsonTextError
from mnemosyne.jsontext import JsonLimits, loads, loads_lines

SMALL = JsonLimits(
    max_bytes=10_000, max_depth=4, max_digits=5, max_string=10, max_entries=3, max_values=50
)


def refusal(data: str | bytes, limits: JsonLimits = SMALL) -> JsonTextError:
    with pytest.raises(JsonTextError) as caught:
        loads(data, limits)
    assert "\n" not in str(caught.value)
    return caught.value


@pytest.mark.parametrize(
    ("text", "message", "limit"),
    [
        (
            '{"a": [1, {"b": 123456}]}',
            "a[1].b: a number of 6 digits, more than the 5 allowed",
            "max_digits",
        ),
        ('{"a": 1.1234567}', "a: a number of 7 digits", "max_digits"),
        (
            '{"a": [[[[1]]]]}',
            "a[0][0][0]: nested too deep: more than 4 levels (the limit)",
            "max_depth",
        ),
        (
            '{"a": {"b": "01234567890"}}',
            "a.b: a text of 11 characters, more than the 10",
            "max_string",
        ),
        ('{"' + "k" * 60 + '": 1}', '["' + "k" * 40 + '…"]: a text of 60 characters', "max_string"),
        (
            '{"a": [1, 2, 3, 4]}',
            "a: 4 entries, more than the 3 allowed in one list or object",
            "max_entries",
        ),
        ('{"a": 1, "b": 2, "c": 3, "d": 4}', "4 entries, more than the 3 allowed", "max_entries"),
        (
            "[" + ",".join(["[1,2]"] * 20) + "]",
            "more than 50 values in all (the limit)",
            "max_values",
        ),
        ('{"q": "' + '\\"' * 11 + '"}', "q: a text of 11 characters", "max_string"),
        ('{"x": [1, NaN]}', "x[1]: NaN is not a JSON number", None),
        ('{"x": -Infinity}', "x: -Infinity is not a JSON number", None),
        ('{"x": 1e999}', "x: '1e999' is too large to be a number (not finite)", None),
        ('{"x": "a\\ud800b"}', "x: a text holding a lone UTF-16 surrogate", None),
        ('{"x": "\\udc00"}', "x: a text holding a lone UTF-16 surrogate", None),
    ],
)
def test_each_limit_is_refused_naming_the_path_and_the_limit(
    text: str, message: str, limit: str | None
) -> None:
    error = refusal(text)
    assert message in str(error)
    assert error.limit == limit
    assert isinstance(error, MnemosyneError) and isinstance(error, ValueError)
    assert error.code == "invalid_json"


def test_at_the_limits_is_accepted() -> None:
    text = '{"a": [[[12345]]], "b": "0123456789", "c": [1, 2, 3]}'
    assert loads(text, SMALL) == json.loads(text)
    # more values in all than a list may hold, none holding too many
    crowd = '[[1, 2, {"a": [1, 2, 3]}], [[], [[1, 2, 3]], {}], {"x": "[,,,,,]"}]'
    assert loads(crowd, SMALL) == json.loads(crowd)
    assert loads('{"x": 1.5e300, "y": -0.0, "z": "\\ud83d\\ude00"}') == {
        "x": 1.5e300,
        "y": -0.0,
        "z": "\U0001f600",
    }


def test_what_is_inside_texts_is_not_structure() -> None:
    """Brackets, NaN, long digit runs and escaped quotes in texts are text, not JSON."""
    text = json.dumps({"a": '[[[[[[[[ NaN Infinity 1234567890123 " \\ {{{{{{'})
    assert loads(text, JsonLimits(max_depth=2, max_digits=5)) == json.loads(text)
    literal = '{"a": "\\\\ud800"}'  # an escaped backslash, then the letters ud800
    assert loads(literal, SMALL) == {"a": "\\ud800"}


def test_deep_nesting_is_refused_before_the_decoder_recurses() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    error = refusal('{"key": ' + deep + "}", jsontext.DOCUMENT)
    assert str(error).startswith("key[0][0][0]")
    assert "(64 levels down): nested too deep: more than 64 levels (the limit)" in str(error)
    # not JSON before it gets deep: refused all the same, never decoded
    assert refusal("x" + deep, jsontext.DOCUMENT).limit == "max_depth"
    objects = '{"a":' * 100_000 + "1" + "}" * 100_000
    assert refusal(objects, jsontext.DOCUMENT).limit == "max_depth"


def test_a_5000_digit_integer_is_refused_without_python_s_advice() -> None:
    error = refusal('{"order": ' + "9" * 5000 + "}", jsontext.DOCUMENT)
    assert str(error) == "order: a number of 5,000 digits, more than the 100 allowed"


def test_syntax_errors_name_line_and_column() -> None:
    error = refusal('{\n  "a": [1,, 2]\n}')
    assert error.syntax and error.limit is None
    assert str(error) == "not JSON: Expecting value (line 2, column 11)"
    assert (error.line, error.column) == (2, 11)


def test_size_is_checked_first_in_bytes_or_characters() -> None:
    error = refusal(b" " * 10_001)
    assert str(error) == "10,001 bytes, more than the 10,000 allowed"
    assert error.limit == "max_bytes"
    assert refusal(" " * 10_001).limit == "max_bytes"


def test_encodings_as_json_loads_detects_them_and_byte_order_marks() -> None:
    assert loads('\ufeff{"a": "é"}'.encode()) == {"a": "é"}
    assert loads('{"a": "é"}'.encode("utf-16")) == {"a": "é"}
    assert loads('\ufeff{"a": 1}') == {"a": 1}
    assert str(refusal(b'{"a": "\xff"}')) == "not UTF-8 text (invalid start byte at byte 7)"


def test_json_lines_name_the_line_and_count_lines_and_values() -> None:
    assert loads_lines(b'{"a": 1}\n[2]\n') == [{"a": 1}, [2]]
    with pytest.raises(JsonTextError) as caught:
        loads_lines(b'{"a": 1}\n{"b": NaN}\n')
    assert str(caught.value) == "line 2: b: NaN is not a JSON number"
    with pytest.raises(JsonTextError) as caught:
        loads_lines(b'{"a": 1}\n{"b": 2\n')
    assert str(caught.value) == "not JSON: Expecting ',' delimiter (line 2, column 8)"
    lines = JsonLimits(max_entries=3, max_values=10)
    assert loads_lines("1\n2\n3", lines) == loads_lines("1\n2\n3\n", lines) == [1, 2, 3]
    for text in ("1\n2\n3\n4\n", "1\n2\n3\n4"):
        with pytest.raises(JsonTextError, match="more than 3 lines"):
            loads_lines(text, lines)
    with pytest.raises(JsonTextError, match="line 3: more than 10 values in all"):
        loads_lines("[1,2,3]\n[4,5,6]\n[7,8,9]\n", lines)


def test_a_line_s_lists_are_held_to_the_document_entries() -> None:
    many = json.dumps(list(range(jsontext.MAX_DOCUMENT_ENTRIES + 1)))
    with pytest.raises(JsonTextError) as caught:
        loads_lines("{}\n" + many + "\n")
    assert str(caught.value).startswith(f"line 2: {jsontext.MAX_DOCUMENT_ENTRIES + 1:,} entries")


def test_a_real_sized_document_reads_as_json_loads_reads_it() -> None:
    document = {
        "nodes": [
            {"id": f"{i:032x}", "content": 'a "quoted" [text] ' * 20, "n": i, "f": i / 3}
            for i in range(20_000)
        ],
        "blobs": {f"{i:064x}": "x" * 1000 for i in range(5000)},
        "emoji": "\U0001f600",
    }
    for text in (json.dumps(document), json.dumps(document, ensure_ascii=False, indent=2)):
        assert len(text) > jsontext.MAX_STRING  # the walk runs
        assert loads(text, jsontext.TREE) == document


def test_messages_preview_values_and_cut_paths() -> None:
    assert jsontext.preview("x" * 10_000).endswith("… (10000 characters)")
    assert len(jsontext.preview("x" * 10_000)) < 100
    assert jsontext.preview(list(range(1000))) == "a list of 1000 entries"
    assert jsontext.path_text(("entries", "0", "key", 3)) == "entries.0.key[3]"
    assert jsontext.path_text(("a b", "c")) == '["a b"].c'
    assert jsontext.path_text((0,) * 100) == "[0]" * 12 + "… (100 levels down)"
