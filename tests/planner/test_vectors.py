"""Lore retrieval by meaning: the real local model, real Chroma on disk, a real HTTP server.

The local model itself (what it finds, offline, an index it built reopened or rebuilt)
is tested in tests/planner/test_embeddings.py.
The provider tests call litellm against an OpenAI ``/v1/embeddings`` server on
127.0.0.1 (below) that embeds with the hashing trick: deterministic, word-based vectors.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.api.segment import check_index_name
from chromadb.config import Settings

from planner.errors import RetrievalError
from planner.lorebook import Lorebook, parse_world_info
from planner.vectors import (
    LiteLLMEmbeddings,
    LocalEmbeddings,
    LoreIndex,
    collection_name,
    entry_id,
    entry_text,
)

# --------------------------------------------------------------------------- the lore

SHADOWFANGS = 3
LORE: dict[int, dict[str, Any]] = {
    1: {
        "comment": "The Gilded Goose",
        "key": ["Gilded Goose", "tavern"],
        "content": "A crowded tavern by the Eastmarch gate, famous for its dark ale, its dice "
        "games and the bard Merrin who sings there every evening.",
    },
    2: {
        "comment": "King Aldric",
        "key": ["Aldric", "the king"],
        "content": "The old king rules from the White Keep. He distrusts the northern lords "
        "and has not left his throne room since the plague summer.",
    },
    SHADOWFANGS: {
        "comment": "Shadowfangs",
        "key": ["Shadowfang", "Shadowfangs"],
        "content": "Huge black wolves that hunt in packs through the Mirkwood after dusk. "
        "Their howls carry for miles, and travellers who hear them bar their doors.",
    },
    4: {
        "comment": "Ferry of Lowmere",
        "key": ["ferry", "Lowmere"],
        "content": "A flat barge pulled across the Lowmere river on a rope; the ferryman asks "
        "one silver coin and a story from every passenger.",
    },
    5: {
        "comment": "Guild of Lanterns",
        "key": ["Lantern Guild"],
        "content": "The merchants' guild that controls the salt and spice trade in the "
        "capital; its members wear brass lanterns on their belts.",
    },
    6: {
        "comment": "Ember, the red dragon",
        "key": ["Ember", "dragon"],
        "content": "A red dragon sleeping under the Ashen Peaks. When she wakes, the sky "
        "over the mountains glows and the villages below are burned.",
    },
    7: {
        "comment": "Shrine of the Green Mother",
        "key": ["Green Mother", "shrine"],
        "content": "A mossy stone shrine in a quiet glade where pilgrims leave bread and "
        "flowers, asking for a good harvest.",
    },
    8: {
        "comment": "Ironhand smithy",
        "key": ["Ironhand", "blacksmith"],
        "content": "Dagna Ironhand forges swords and horseshoes in the market square; her "
        "hammer can be heard from dawn until noon.",
    },
    9: {
        "comment": "The Drowned Bell",
        "key": ["Drowned Bell"],
        "content": "A temple bell lost in the marsh. Fishermen swear it still rings on "
        "stormy nights to warn of floods.",
    },
    10: {
        "comment": "Moonfall festival",
        "key": ["Moonfall"],
        "content": "Each autumn the city celebrates Moonfall with lanterns, masks and "
        "dancing in the streets until dawn.",
    },
    11: {
        "comment": "Old notes (disabled)",
        "key": ["notes"],
        "content": "Draft text about wolves and forests that must not be indexed.",
        "disable": True,
    },
}
ENABLED = sum(1 for raw in LORE.values() if not raw.get("disable"))


def make_book(name: str = "Northreach", lore: dict[int, dict[str, Any]] | None = None) -> Lorebook:
    entries = {str(uid): {"uid": uid, **raw} for uid, raw in (lore or LORE).items()}
    return parse_world_info({"entries": entries}, name)


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ------------------------------------------------- an OpenAI /v1/embeddings server

DIMENSIONS = 1024
STOPWORDS = frozenset(
    ["a", "an", "and", "are", "by", "for", "from", "in", "is", "it", "of", "on", "the", "to"]
)


def hashed_vector(text: str) -> list[float]:
    """Bag of words, hashed into DIMENSIONS buckets (plural 's' dropped)."""
    vector = [0.0] * DIMENSIONS
    for word in re.findall(r"[a-z]+", text.lower()):
        if word in STOPWORDS:
            continue
        word = word[:-1] if len(word) > 3 and word.endswith("s") else word
        bucket = int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMENSIONS
        vector[bucket] += 1.0
    vector[0] += 0.01  # no zero vector
    return vector


@dataclass
class EmbeddingServer:
    """A real HTTP server on 127.0.0.1 speaking OpenAI's embeddings protocol."""

    status: int = 200
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    url: str = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path not in ("/v1/embeddings", "/embeddings"):
                    self.reply(404, {"error": {"message": f"no route {self.path}"}})
                    return
                server.requests.append(body)
                server.authorizations.append(self.headers.get("Authorization"))
                if server.status != 200:
                    error = {"message": "the model is overloaded", "type": "server_error"}
                    self.reply(server.status, {"error": error})
                    return
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = []
                for index, text in enumerate(texts):
                    vector = hashed_vector(text)
                    if body.get("encoding_format") == "base64":
                        packed = struct.pack(f"<{len(vector)}f", *vector)
                        embedding: Any = base64.b64encode(packed).decode()
                    else:
                        embedding = vector
                    data.append({"object": "embedding", "index": index, "embedding": embedding})
                tokens = sum(len(text.split()) for text in texts)
                usage = {"prompt_tokens": tokens, "total_tokens": tokens}
                self.reply(
                    200, {"object": "list", "data": data, "model": body["model"], "usage": usage}
                )

            def reply(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        return Handler


@pytest.fixture
def embedding_server() -> Iterator[EmbeddingServer]:
    state = EmbeddingServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), state.handler())
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        _close_litellm_clients()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _close_litellm_clients() -> None:
    """litellm keeps the provider's (sync) client in its cache: close it with the
    server, so its sockets do not leak into later tests."""
    from orchestrator.gateway import Gateway

    asyncio.run(Gateway().aclose())


def provider(server: EmbeddingServer, **options: Any) -> LiteLLMEmbeddings:
    return LiteLLMEmbeddings(
        "openai/hash-embed", api_base=server.url, api_key="sk-test", retries=0, **options
    )


# ----------------------------------------------------------------- pure functions


def test_collection_names_follow_chromas_rules_and_stay_distinct() -> None:
    names = [
        "Northreach",
        "northreach",
        "North reach!",
        "Ævintýri – saga ✨",
        "火影忍者",
        "",
        "..",
        "192.168.0.1",
        "x" * 300,
        "a..b",
    ]
    collections = [collection_name(name) for name in names]
    for name in collections:
        check_index_name(name)  # Chroma's own check (the stricter, 3-63 characters)
        assert name.startswith("lore-")
    assert len(set(collections)) == len(names)
    assert collection_name("Northreach") == collection_name("Northreach")
    assert collection_name("Ævintýri – saga ✨").startswith("lore-aevintyri-saga-")


def test_entry_text_is_comment_keys_content_without_regex_keys() -> None:
    book = parse_world_info(
        {
            "entries": {
                "1": {
                    "comment": "Shadowfangs",
                    "key": ["Shadowfang", "/shadow ?fangs?/i"],
                    "content": "Black wolves.",
                },
                "2": {"key": [], "content": ""},
            }
        },
        "b",
    )
    assert entry_text(book.entry(1)) == "Shadowfangs\nShadowfang\nBlack wolves."
    assert entry_text(book.entry(2)) == ""
    assert entry_id("b", 1) == "b:1"


def test_an_index_needs_a_folder_or_a_server(tmp_path: Path) -> None:
    with pytest.raises(RetrievalError, match="either a folder"):
        LoreIndex()
    with pytest.raises(RetrievalError, match="either a folder"):
        LoreIndex(tmp_path, url="http://127.0.0.1:8000")
    with pytest.raises(RetrievalError, match="a path is not supported"):
        LoreIndex(url="http://127.0.0.1:8000/api")


# ------------------------------------------------------------ the real local model


def test_sync_embeds_only_what_changed_and_removes_what_is_gone(tmp_path: Path) -> None:
    embedder = LocalEmbeddings()
    index = LoreIndex(tmp_path / "index", embedder=embedder)
    index.sync(make_book())
    assert embedder.embedded == ENABLED

    again = index.sync(make_book())
    assert (again.added, again.updated, again.removed, again.unchanged) == (0, 0, 0, ENABLED)
    assert embedder.embedded == ENABLED  # nothing embedded a second time

    lore = {uid: dict(raw) for uid, raw in LORE.items()}
    lore[4]["content"] += " The ferry does not run in winter."  # changed
    lore[11]["disable"] = False  # enabled now
    del lore[SHADOWFANGS]  # removed from the book
    report = index.sync(make_book(lore=lore))
    assert (report.added, report.updated, report.removed, report.unchanged) == (
        1,
        1,
        1,
        ENABLED - 2,
    )
    assert embedder.embedded == ENABLED + 2
    assert index.count("Northreach") == ENABLED

    hits = index.query(["Northreach"], ["what are those beasts howling in the dark woods?"], n=20)
    assert SHADOWFANGS not in {hit.uid for hit in hits}
    assert len(hits) == ENABLED

    # Disabling an entry takes it out too.
    lore[4]["disable"] = True
    report = index.sync(make_book(lore=lore))
    assert (report.removed, report.embedded, report.skipped) == (1, 0, 1)
    assert index.count("Northreach") == ENABLED - 1


# ------------------------------------------------------- a provider, through litellm


def test_a_provider_embedding_model_through_litellm(
    tmp_path: Path, embedding_server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLOTHO_TEST_EMBED_KEY", "sk-from-env")
    embedder = provider(embedding_server, batch_size=4, api_key_env="CLOTHO_TEST_EMBED_KEY")
    index = LoreIndex(tmp_path / "index", embedder=embedder)
    book = make_book()
    report = index.sync(book)
    assert report.added == ENABLED
    assert len(embedding_server.requests) == -(-ENABLED // 4)  # batches of 4
    assert embedding_server.requests[0]["model"] == "hash-embed"
    assert embedding_server.requests[0]["input"][0] == entry_text(book.entry(1))
    assert set(embedding_server.authorizations) == {"Bearer sk-test"}

    hits = index.query([book], ["tell me about the black wolves"], n=2)
    assert hits[0].uid == SHADOWFANGS
    assert index.sync(book).embedded == 0
    assert embedder.embedded == ENABLED + 1

    # Reopened by a plain Chroma client: the function is rebuilt from the collection's
    # config, which names the key's variable and never holds the key itself.
    client = chromadb.PersistentClient(
        path=str(tmp_path / "index"), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.get_collection(collection_name(book.name))
    config = collection.configuration_json["embedding_function"]
    assert config["name"] == "clotho-litellm"
    assert "sk-test" not in json.dumps(config)
    result = collection.query(query_texts=["a guild of merchants with brass lanterns"], n_results=1)
    assert result["ids"] == [["Northreach:5"]]
    assert embedding_server.authorizations[-1] == "Bearer sk-from-env"


def test_another_model_rebuilds_the_collection(
    tmp_path: Path, embedding_server: EmbeddingServer
) -> None:
    book = make_book()
    LoreIndex(tmp_path / "index", embedder=provider(embedding_server)).sync(book)
    other = LiteLLMEmbeddings(
        "openai/hash-embed-v2", api_base=embedding_server.url, api_key="sk-test", retries=0
    )
    index = LoreIndex(tmp_path / "index", embedder=other)
    with pytest.raises(RetrievalError, match=r"indexed with litellm:openai/hash-embed, not"):
        index.query([book], ["wolves"])
    report = index.sync(book)
    assert (report.rebuilt, report.added, report.removed) == (True, ENABLED, 0)
    assert index.query([book], ["black wolves hunting"], n=1)[0].uid == SHADOWFANGS


# ------------------------------------------------------------------------- errors


def test_a_chroma_server_that_refuses_connections(
    tmp_path: Path, embedding_server: EmbeddingServer
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    index = LoreIndex(url=url, embedder=provider(embedding_server))
    with pytest.raises(RetrievalError, match=re.escape(url)) as caught:
        index.sync(make_book())
    assert "Could not connect to a Chroma server" in str(caught.value)
    with pytest.raises(RetrievalError, match=re.escape(url)):
        index.query(["Northreach"], ["wolves"])
    assert embedding_server.requests == []


def test_an_embedding_endpoint_that_fails(
    tmp_path: Path, embedding_server: EmbeddingServer
) -> None:
    refused = f"http://127.0.0.1:{closed_port()}/v1"
    dead = LiteLLMEmbeddings(
        "openai/hash-embed", api_base=refused, api_key="k", retries=0, timeout=5
    )
    index = LoreIndex(tmp_path / "index", embedder=dead)
    with pytest.raises(
        RetrievalError, match=f"embedding model openai/hash-embed at {re.escape(refused)}"
    ):
        index.sync(make_book())

    embedding_server.status = 500
    index = LoreIndex(tmp_path / "index2", embedder=provider(embedding_server))
    with pytest.raises(RetrievalError, match=r"embedding model openai/hash-embed at .*overloaded"):
        index.sync(make_book())
    # (litellm 1.106 reads max_retries=0 as its default, 2: up to 3 requests.)
    assert 1 <= len(embedding_server.requests) <= 3

    embedding_server.status = 200
    index.sync(make_book())
    embedding_server.status = 503
    with pytest.raises(RetrievalError, match="embedding model openai/hash-embed"):
        index.query(["Northreach"], ["wolves"])


def test_querying_a_book_that_was_never_synced(
    tmp_path: Path, embedding_server: EmbeddingServer
) -> None:
    index = LoreIndex(tmp_path / "index", embedder=provider(embedding_server))
    with pytest.raises(RetrievalError, match=r"lore-unknown-\w+ \(book 'Unknown'\).*not indexed"):
        index.query(["Unknown"], ["wolves"])
    assert index.count("Unknown") == 0
    assert index.query(["Unknown"], []) == []
    assert index.drop("Unknown") is False
    index.sync(make_book())
    assert index.drop("Northreach") is True
    assert index.count("Northreach") == 0
