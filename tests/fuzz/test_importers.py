"""Every importer fed hostile variants of real files (hypothesis, structure-aware).

Lorebooks, character cards (JSON and PNG), SillyTavern chats and tree files start from
real fixtures (``tests/fixtures``) and are mutated where it hurts (``_hostile.py``): a
value replaced by a 5,000-digit integer, ``NaN``, 100,000 levels of nesting, 8 MB of
text, the wrong type; 100,000 entries; regex-bomb keys; a file cut short or with bytes
that are not UTF-8; PNG chunks with a bad CRC, a length past the end, text chunks that
inflate to hundreds of MB.

Whatever the input, an importer either imports it or refuses it *cleanly*: it raises
its declared error (``LorebookError``, ``CardError``, ``ChatError``, ``TreeFileError``)
whose message is one line of reasonable length, and the database is exactly as it was.
Any other exception (``ValueError`` from ``int()``'s digit limit, ``RecursionError``,
``MemoryError``...) is a failure: the CLI would print a traceback and the API answer 500.
The same inputs go through the HTTP API (``POST .../imports/...``): a 2xx, or a 4xx
``application/problem+json`` with a one-line detail, the database unchanged.

Short example counts by default; ``-m long`` (or ``CLOTHO_LONG=1``) runs many more.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from clotho import lore
from clotho.formats.stchat import ChatError, import_chat
from clotho.formats.treefile import TreeFileError, import_tree
from mnemosyne import Store
from planner.errors import CardError, LorebookError

from . import _hostile as h

SHORT, LONG = 12, 300
MAX_MESSAGE = 4096  # characters: a refusal names what is wrong, it does not echo the file
REPO = Path(__file__).resolve().parents[2]

EXAMPLES = pytest.mark.parametrize(
    "examples",
    [pytest.param(SHORT, id="short"), pytest.param(LONG, id="long", marks=pytest.mark.long)],
)


def run_examples(examples: int, strategy: st.SearchStrategy[Any], check: Callable[[Any], None]):
    """Run ``check`` on ``examples`` inputs drawn from ``strategy`` (no deadline: the
    bench measures time; no shrinking: a failing input is reported by its recipe, and
    shrinking megabyte inputs costs minutes)."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.explicit, Phase.generate),  # no shrinking: the label names the input
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(strategy)
    def inner(data: Any) -> None:
        check(data)

    inner()


@functools.cache
def raw() -> dict[str, str]:
    return h.raw_values()


def snapshot(store: Store) -> Any:
    """Everything an import could change: every table's rows counted, the sessions'
    versions and HEADs, the documents' hashes."""
    with store.engine.connect() as conn:
        counts = {
            table: conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("sessions", "nodes", "documents", "traces", "blobs", "journal")
        }
        sessions = conn.execute(
            text("SELECT id, version, head_pk FROM sessions ORDER BY id")
        ).fetchall()
        documents = conn.execute(
            text("SELECT session_pk, kind, name, hash FROM documents ORDER BY pk")
        ).fetchall()
    return counts, [tuple(row) for row in sessions], [tuple(row) for row in documents]


def clean(store: Store, error_type: type[Exception], work: Callable[[], Any]) -> str:
    """Run one import: ``imported``, or ``refused`` with the declared error, one short
    line, nothing changed. Any other exception propagates (a failure)."""
    before = snapshot(store)
    try:
        work()
    except error_type as error:
        message = str(error)
        assert message.strip(), "a refusal with no message"
        assert "\n" not in message.strip(), f"a refusal of several lines: {message[:500]!r}"
        assert len(message) <= MAX_MESSAGE, f"a refusal of {len(message)} characters"
        assert snapshot(store) == before, "a refused import changed the database"
        return "refused"
    return "imported"


# -- strategies: hostile variants of each real file -------------------------------------


class Input:
    """A hostile file and how it was made (its repr, in a failure's report, is the
    recipe, not megabytes of bytes)."""

    def __init__(self, label: str, data: bytes | str) -> None:
        self.label = label
        self.data = data.encode() if isinstance(data, str) else data

    def __repr__(self) -> str:
        return f"<{self.label}: {len(self.data)} bytes>"


def mutated(
    document: Any, dump: Callable[[tuple[Any, ...], str], bytes | str]
) -> st.SearchStrategy[Input]:
    """One part of ``document`` (any depth) replaced by a hostile raw value."""
    every = list(h.paths(document))
    return st.builds(
        lambda path, name: Input(f"{name} at {list(path)}", dump(path, raw()[name])),
        st.sampled_from(every),
        st.sampled_from(sorted(raw())),
    )


def damaged(text_: str) -> st.SearchStrategy[Input]:
    """The file cut short, or a byte replaced by one that is not UTF-8."""
    data = text_.encode()
    cut = st.integers(0, len(data) - 1).map(lambda n: Input(f"cut at byte {n}", data[:n]))
    flipped = st.integers(0, len(data) - 1).map(
        lambda n: Input(f"byte {n} made 0xff", data[:n] + b"\xff" + data[n + 1 :])
    )
    return st.one_of(cut, flipped)


def lorebook_inputs() -> st.SearchStrategy[Input]:
    book = h.lorebook()
    return st.one_of(
        mutated(book, lambda path, value: h.replaced(book, path, value)),
        st.sampled_from([1_000, 5_000]).map(
            lambda n: Input(f"{n} entries", h.lorebook_with_entries(n))
        ),
        st.lists(st.sampled_from(h.REGEX_BOMBS), min_size=1, max_size=3).map(
            lambda keys: Input(f"regex keys {keys}", h.lorebook_with_regex_keys(keys))
        ),
        damaged(json.dumps(book)),
    )


def card_json_inputs() -> st.SearchStrategy[Input]:
    card = h.card()
    return st.one_of(
        mutated(card, lambda path, value: h.replaced(card, path, value)),
        damaged(json.dumps(card)),
    )


def card_png_inputs() -> st.SearchStrategy[Input]:
    card = h.card()
    real = h.CARD_PNG.read_bytes()
    good = h.card_chunk(json.dumps(card))
    broken = {
        "a text chunk with a bad CRC": lambda: [h.chunk(b"tEXt", good[8:-4], crc=0)],
        "a text chunk whose length runs past the end": lambda: [
            h.chunk(b"tEXt", good[8:-4], length=2**31 - 1)
        ],
        "50,000 text chunks": lambda: [h.chunk(b"tEXt", b"junk\0x")] * 50_000 + [good],
        "a zTXt chunk inflating to 64 MB": lambda: [h.ztxt_bomb(64 << 20)],
        "an iTXt chunk inflating to 64 MB": lambda: [h.itxt_bomb(64 << 20)],
    }
    return st.one_of(
        mutated(
            card, lambda path, value: h.png_with([h.card_chunk(h.replaced(card, path, value))])
        ),
        st.sampled_from(sorted(broken)).map(lambda how: Input(how, h.png_with(broken[how]()))),
        st.integers(8, len(real) - 1).map(lambda n: Input(f"PNG cut at byte {n}", real[:n])),
    )


def chat_inputs() -> st.SearchStrategy[Input]:
    lines = h.chat_lines()
    choices = [(i, path) for i, line in enumerate(lines) for path in h.paths(line)]
    return st.one_of(
        st.builds(
            lambda where, name: Input(
                f"{name} at line {where[0]} {list(where[1])}",
                h.chat_replaced(where[0], where[1], raw()[name]),
            ),
            st.sampled_from(choices),
            st.sampled_from(sorted(raw())),
        ),
        damaged("\n".join(json.dumps(line) for line in lines)),
    )


def tree_inputs(document: dict[str, Any]) -> st.SearchStrategy[Input]:
    return st.one_of(
        mutated(document, lambda path, value: h.replaced(document, path, value)),
        damaged(json.dumps(document)),
    )


# -- through the Python entry points -----------------------------------------------------


@EXAMPLES
def test_lorebook_import_refuses_cleanly(store: Store, examples: int) -> None:
    session = store.create_session(title="lore")
    run_examples(
        examples,
        lorebook_inputs(),
        lambda data: clean(
            store, LorebookError, lambda: lore.import_lorebook(store, session.id, data.data, "book")
        ),
    )


@EXAMPLES
def test_card_json_import_refuses_cleanly(store: Store, examples: int) -> None:
    session = store.create_session(title="card")
    run_examples(
        examples,
        card_json_inputs(),
        lambda data: clean(
            store, CardError, lambda: lore.import_card(store, session.id, data.data, "card.json")
        ),
    )


@EXAMPLES
def test_card_png_import_refuses_cleanly(store: Store, examples: int) -> None:
    session = store.create_session(title="card")
    run_examples(
        examples,
        card_png_inputs(),
        lambda data: clean(
            store, CardError, lambda: lore.import_card(store, session.id, data.data, "card.png")
        ),
    )


@EXAMPLES
def test_chat_import_refuses_cleanly(store: Store, examples: int) -> None:
    run_examples(
        examples,
        chat_inputs(),
        lambda data: clean(store, ChatError, lambda: import_chat(store, data.data, "chat.jsonl")),
    )


@EXAMPLES
def test_tree_import_refuses_cleanly(store: Store, examples: int) -> None:
    document = h.tree_document(store, h.CHAT.read_bytes())
    run_examples(
        examples,
        tree_inputs(document),
        lambda data: clean(
            store, TreeFileError, lambda: import_tree(store, data.data, "tree.json", new_ids=True)
        ),
    )


# -- through the HTTP API ---------------------------------------------------------------


def api_clean(store: Store, client: Any, url: str, data: Input) -> None:
    """A 2xx, or a 4xx problem document with a one-line detail and nothing changed."""
    before = snapshot(store)
    response = client.post(url, content=data.data)
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith("application/problem+json")
        detail = response.json()["detail"]
        assert "\n" not in detail and len(detail) <= MAX_MESSAGE, detail[:500]
        assert snapshot(store) == before, "a refused import changed the database"


@EXAMPLES
def test_api_imports_refuse_cleanly(store: Store, client: Any, examples: int) -> None:
    session = store.create_session(title="api")
    base = f"/api/sessions/{session.id}/imports"
    document = h.tree_document(store, h.CHAT.read_bytes())
    cases = st.one_of(
        lorebook_inputs().map(lambda d: (f"{base}/lorebook?name=book", d)),
        card_json_inputs().map(lambda d: (f"{base}/card?filename=card.json", d)),
        card_png_inputs().map(lambda d: (f"{base}/card?filename=card.png", d)),
        chat_inputs().map(lambda d: ("/api/imports/chat", d)),
        tree_inputs(document).map(lambda d: ("/api/imports/tree?new_ids=true", d)),
    )
    run_examples(examples * 2, cases, lambda case: api_clean(store, client, *case))


# -- the worst cases, each named (what the fuzzers found on main) ---------------------


@pytest.mark.parametrize(
    ("importer", "data"),
    [
        pytest.param(
            "lorebook",
            lambda: h.replaced(h.lorebook(), ("entries", "0", "order"), "9" * 5000),
            id="lorebook-int-5000-digits",
        ),
        pytest.param(
            "lorebook",
            lambda: h.replaced(
                h.lorebook(), ("entries", "0", "key"), "[" * 100_000 + "]" * 100_000
            ),
            id="lorebook-deep-nesting",
        ),
        pytest.param(
            "card",
            lambda: h.replaced(h.card(), ("data", "name"), "9" * 5000),
            id="card-int-5000-digits",
        ),
        pytest.param(
            "chat", lambda: h.chat_replaced(1, ("swipe_id",), "9" * 5000), id="chat-int-5000-digits"
        ),
    ],
)
def test_named_hostile_files_are_refused_cleanly(
    store: Store, importer: str, data: Callable[[], str]
) -> None:
    """Regression cases found by the fuzzers: each must be a clean refusal."""
    session = store.create_session(title="named")
    work = {
        "lorebook": (LorebookError, lambda d: lore.import_lorebook(store, session.id, d, "b")),
        "card": (CardError, lambda d: lore.import_card(store, session.id, d, "c.json")),
        "chat": (ChatError, lambda d: import_chat(store, d, "c.jsonl")),
    }
    error, call = work[importer]
    payload = data().encode()
    assert clean(store, error, lambda: call(payload)) == "refused"


CHILD = """
import resource, sys, time
from planner.cards import load_card
from planner.errors import CardError
data = open(sys.argv[1], "rb").read()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
try:
    load_card(data, "bomb.png")
    outcome = "imported"
except CardError as error:
    outcome = "refused " + str(error)[:200]
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
print(f"{outcome}|{grown:.0f}|{time.monotonic() - started:.2f}")
"""


@pytest.mark.parametrize("bomb", ["ztxt", "itxt"])
def test_png_decompression_bomb_is_refused_without_inflating(tmp_path: Path, bomb: str) -> None:
    """A card PNG whose ``chara`` chunk inflates to 512 MB: refused, the reader's peak
    memory under 200 MB above its start (run in a child whose address space is capped at
    2 GB, so that on a reader without a bound it is a MemoryError, not a machine out of
    memory)."""
    make = h.ztxt_bomb if bomb == "ztxt" else h.itxt_bomb
    file = tmp_path / "bomb.png"
    file.write_bytes(h.png_with([make(512 << 20)]))
    cap = 2 << 30

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(file)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome, grown, _ = done.stdout.strip().rsplit("|", 2)
    assert outcome.startswith("refused"), outcome
    assert float(grown) < 200, (
        f"peak memory grew {grown} MB reading a {file.stat().st_size} byte file"
    )


def test_regex_bomb_key_does_not_hang_lore_test(tmp_path: Path) -> None:
    """``clotho lore test`` over a lorebook keyed by backtracking regexes: it answers
    (or refuses the key) within 10 s instead of running for ever."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOTHO_")}
    env |= {
        "CLOTHO_DATABASE_URL": f"sqlite:///{tmp_path / 'bomb.db'}",
        "CLOTHO_VECTORS": "false",
        "HOME": str(tmp_path),
        "NO_COLOR": "1",
    }
    clotho = str(Path(sys.executable).parent / "clotho")
    book = tmp_path / "bomb.json"
    book.write_text(h.lorebook_with_regex_keys(list(h.REGEX_BOMBS)))
    for args in (["session", "new"], ["import", "lorebook", str(book)]):
        made = subprocess.run([clotho, *args], env=env, capture_output=True, text=True, timeout=60)
        if made.returncode != 0:  # a clean refusal of the keys at import is fine too
            assert made.returncode == 1 and len(made.stderr.strip().splitlines()) == 1, made.stderr
            return
    started = time.monotonic()
    try:
        done = subprocess.run(
            [clotho, "lore", "test", h.BOMB_TEXT],
            env=env,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`clotho lore test {h.BOMB_TEXT}` still running after 10 s (regex bomb)")
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 10
