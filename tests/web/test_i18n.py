"""The page's words: one catalogue per language (static/i18n/en.json, zh.json). Without a
browser: every key the page names (``"area.key"`` in the modules, ``data-i18n*`` in
index.html) is in both catalogues, the two hold the same keys with the same
``{placeholders}``, and no key is unused. In the browser: a Chinese browser gets the page
in Chinese, and the language switch in the header's menu changes it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from clotho.web import STATIC

from .test_page import add, expect

CATALOGUES = STATIC / "i18n"
LANGUAGES = ("en", "zh")

# A key is written out whole ("area.key", wherever it is: t("a.b"), t(x ? "a.b" : "a.c"), a
# table of keys), or built from a written-out prefix (t(`lore.logic_${v}`)): every key
# under that prefix counts as used. Only strings naming one of the catalogue's areas count.
LITERAL = r"""["']({areas})\.([\w.]+)["']"""
PREFIX = r"""`({areas})\.([\w.]*)\$\{{"""
# Comments name keys too ("area.key" in a docstring): they are left out.
COMMENT = re.compile(r"/\*[\s\S]*?\*/|(?:^|(?<=\s))//[^\n]*", re.MULTILINE)
USED_IN_HTML = re.compile(r"""\bdata-i18n(?:-[a-z-]+)?="([^"]+)\"""")
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def leaves(table: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """The catalogue flattened: "area.key" → its string."""
    found: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            found.update(leaves(value, f"{name}."))
        else:
            assert isinstance(value, str), f"{name}: {value!r} is not a string"
            found[name] = value
    return found


def catalogue(code: str) -> dict[str, str]:
    return leaves(json.loads((CATALOGUES / f"{code}.json").read_text(encoding="utf-8")))


def areas() -> str:
    table = json.loads((CATALOGUES / "en.json").read_text(encoding="utf-8"))
    return "|".join(re.escape(area) for area in table)


def used_keys() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The keys the page names (key → the files naming it), and the prefixes it builds
    keys from (prefix → the files)."""
    literal = re.compile(LITERAL.format(areas=areas()))
    prefix = re.compile(PREFIX.format(areas=areas()))
    keys: dict[str, set[str]] = {}
    prefixes: dict[str, set[str]] = {}
    for module in sorted(STATIC.glob("*.js")):
        text = COMMENT.sub("", module.read_text(encoding="utf-8"))
        for area, rest in literal.findall(text):
            keys.setdefault(f"{area}.{rest}", set()).add(module.name)
        for area, rest in prefix.findall(text):
            prefixes.setdefault(f"{area}.{rest}", set()).add(module.name)
    for key in USED_IN_HTML.findall((STATIC / "index.html").read_text(encoding="utf-8")):
        keys.setdefault(key, set()).add("index.html")
    return keys, prefixes


def test_every_key_named_is_in_both_catalogues() -> None:
    keys, prefixes = used_keys()
    assert keys, "no key found: has the page's i18n changed shape?"
    for code in LANGUAGES:
        strings = catalogue(code)
        missing = {key: sorted(files) for key, files in keys.items() if key not in strings}
        assert not missing, f"keys missing from {code}.json: {missing}"
        empty = {
            start: sorted(files)
            for start, files in prefixes.items()
            if not any(key.startswith(start) for key in strings)
        }
        assert not empty, f"keys built from a prefix no key of {code}.json has: {empty}"


def test_the_catalogues_hold_the_same_keys_and_placeholders() -> None:
    english, chinese = catalogue("en"), catalogue("zh")
    assert not english.keys() - chinese.keys(), "missing in zh.json"
    assert not chinese.keys() - english.keys(), "in zh.json only"
    for key, text in english.items():
        mine, theirs = set(PLACEHOLDER.findall(text)), set(PLACEHOLDER.findall(chinese[key]))
        assert mine == theirs, f"{key}: en has {sorted(mine)}, zh has {sorted(theirs)}"
        assert chinese[key].strip(), f"{key} is empty in zh.json"


def test_no_key_is_unused() -> None:
    keys, prefixes = used_keys()
    unused = sorted(
        key
        for key in catalogue("en")
        if key not in keys and not any(key.startswith(start) for start in prefixes)
    )
    assert not unused, f"keys no module and not index.html names: {unused}"


@pytest.mark.slow
def test_a_chinese_browser_gets_the_page_in_chinese_and_can_switch(
    open_page: Callable[..., Any], new_session: Callable[[str], str], api: Any
) -> None:
    sid = new_session("语言")
    add(api, sid, "user", "我挥了挥手。")
    add(api, sid, "assistant", "*她抬起头。*「欢迎，旅人。」")
    page = open_page(sid, viewport={"width": 1280, "height": 800}, locale="zh-CN")
    expect(page.locator("article.message")).to_have_count(2)
    assert page.evaluate("document.documentElement.lang") == "zh-Hans"
    expect(page.locator("#send")).to_have_text("发送")
    expect(page.locator("#views button[data-view=tree]")).to_have_text("树")
    expect(page.locator("#composer-input")).to_have_attribute(
        "placeholder", re.compile("你要做什么")
    )
    expect(page.locator("article.message .who")).to_have_text(["玩家", "叙述者"])
    expect(page.locator("#language")).to_have_value("zh")
    # The switch: English from now on, in this browser.
    page.select_option("#language", "en")
    expect(page.locator("#send")).to_have_text("Send")
    assert page.evaluate("document.documentElement.lang") == "en"
