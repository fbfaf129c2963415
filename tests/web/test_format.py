"""The chat's roleplay formatting (static/format.js) in the browser, against friendly and
hostile text: *actions* italic, "speech" set apart, the Markdown subset; a `<script>`,
an `<img onerror>`, a javascript: link, an image, unbalanced markers and 100 KB of
each never become markup. One page load; every case through one page.evaluate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.slow

# Every case is formatted by formatText; the page answers with the fragment's HTML, its
# text, and every element and attribute it holds.
RUN = """async (cases) => {
  const { formatText } = await import("/static/format.js");
  const out = {};
  for (const [name, text] of Object.entries(cases)) {
    const box = document.createElement("div");
    box.append(formatText(text));
    const elements = [...box.querySelectorAll("*")];
    out[name] = {
      html: box.innerHTML,
      text: box.textContent,
      tags: [...new Set(elements.map((e) => e.tagName.toLowerCase()))].sort(),
      attributes: [...new Set(elements.flatMap((e) => e.getAttributeNames()))].sort(),
      hrefs: elements.filter((e) => e.hasAttribute("href")).map((e) => e.getAttribute("href")),
    };
  }
  return out;
}"""

ALLOWED_TAGS = {"p", "br", "em", "strong", "code", "pre", "q", "blockquote", "ul", "ol", "li", "a"}
ALLOWED_ATTRIBUTES = {"class", "href", "rel", "target", "start"}

FRIENDLY = {
    "action": "*She smiles warmly.* Welcome back.",
    "speech": '"Welcome, traveller," she said. “And you?”',
    "both": '*nods* "Yes." *leaves*',
    "strong": "**Careful** now, _friend_.",
    "code": "Type `<b>look</b>` to look.",
    "paragraphs": "First line\nsecond line\n\nA new paragraph.",
    "list": "You carry:\n- a lantern\n- a rope\n\n1. go north\n2. go south",
    "quote": "> The sign reads:\n> *Beware.*\nYou shiver.",
    "fence": "```\n<script>x</script>\n*not italic*\n```",
    "link": "See [the wiki](https://example.org/wiki).",
    "snake": "the variable max_hp_value stays",
    "arithmetic": "5 * 3 * 2 = 30",
    "corner_brackets": "她笑了。「欢迎，旅人。」",
}

BIG = 100_000
HOSTILE = {
    "script": "<script>alert(1)</script>",
    "img": '<img src=x onerror="alert(1)">',
    "html_in_italics": "*<img src=x onerror=alert(1)>*",
    "javascript_link": "[click me](javascript:alert(1))",
    "data_link": "[click me](data:text/html,<script>alert(1)</script>)",
    "image": "![a cat](https://example.org/cat.png)",
    "unbalanced": '*she smiles and **waves "hello `there',
    "stars": "*" * BIG,
    "lone_openers": " *a" * (BIG // 3),
    "underscores": " _a" * (BIG // 3),
    "bold_openers": "**a " * (BIG // 4),
    "quotes": 'x "' * (BIG // 3),
    "nested_quotes": ">" * BIG,
    "brackets": "[" * BIG,
    "backticks_inside_bold": "**x" + " `a" * (BIG // 3) + "x**",
    "underscores_inside_bold": "**x" + " _a" * (BIG // 3) + "x** x_",
    "long_lines": "\n".join(["- " + "x" * 50] * (BIG // 52)),
}


def test_roleplay_formatting_and_hostile_text(open_page: Callable[..., Any]) -> None:
    page = open_page()
    page.wait_for_selector("#composer-input")
    out = page.evaluate(RUN, {**FRIENDLY, **HOSTILE})

    for name, result in out.items():
        assert set(result["tags"]) <= ALLOWED_TAGS, (name, result["tags"])
        assert set(result["attributes"]) <= ALLOWED_ATTRIBUTES, (name, result["attributes"])
        assert all(h.startswith(("https://", "http://", "mailto:")) for h in result["hrefs"]), name

    html = {name: result["html"] for name, result in out.items()}
    assert html["action"] == '<p><em class="action">She smiles warmly.</em> Welcome back.</p>'
    assert html["speech"] == (
        '<p><q class="speech">"Welcome, traveller,"</q> she said. '
        '<q class="speech">“And you?”</q></p>'
    )
    assert html["both"] == (
        '<p><em class="action">nods</em> <q class="speech">"Yes."</q> '
        '<em class="action">leaves</em></p>'
    )
    assert html["strong"] == "<p><strong>Careful</strong> now, <em>friend</em>.</p>"
    assert html["code"] == "<p>Type <code>&lt;b&gt;look&lt;/b&gt;</code> to look.</p>"
    assert html["paragraphs"] == "<p>First line<br>second line</p><p>A new paragraph.</p>"
    assert html["list"] == (
        "<p>You carry:</p><ul><li>a lantern</li><li>a rope</li></ul>"
        "<ol><li>go north</li><li>go south</li></ol>"
    )
    assert html["quote"] == (
        '<blockquote><p>The sign reads:<br><em class="action">Beware.</em></p></blockquote>'
        "<p>You shiver.</p>"
    )
    assert html["fence"] == "<pre><code>&lt;script&gt;x&lt;/script&gt;\n*not italic*</code></pre>"
    assert html["link"] == (
        '<p>See <a href="https://example.org/wiki" rel="noopener noreferrer nofollow" '
        'target="_blank">the wiki</a>.</p>'
    )
    assert html["snake"] == "<p>the variable max_hp_value stays</p>"
    assert html["arithmetic"] == "<p>5 * 3 * 2 = 30</p>"
    assert html["corner_brackets"] == '<p>她笑了。<q class="speech">「欢迎，旅人。」</q></p>'

    # Hostile text is shown as the characters it is: nothing of it became an element.
    assert out["img"]["tags"] == ["p", "q"]  # its quoted "alert(1)" is speech, as text
    assert out["img"]["text"] == HOSTILE["img"]
    for name in ("script", "javascript_link", "data_link", "image", "unbalanced", "stars"):
        assert out[name]["tags"] == ["p"], (name, out[name]["tags"])
        assert out[name]["text"] == HOSTILE[name], name
    assert out["html_in_italics"]["tags"] == ["em", "p"]
    assert out["html_in_italics"]["text"] == "<img src=x onerror=alert(1)>"
    for name in ("lone_openers", "underscores", "brackets", "quotes", "bold_openers"):
        assert out[name]["text"] == HOSTILE[name], name
    assert out["bold_openers"]["tags"] == ["p"]
    assert out["underscores_inside_bold"]["tags"] == ["p", "strong"]
    # Blockquotes nest only so deep; the rest is text, and the page still answers.
    assert out["nested_quotes"]["tags"] == ["blockquote", "p"]
    assert out["long_lines"]["tags"] == ["li", "ul"]
