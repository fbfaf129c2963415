"""The local embedding model: WordLlama from the weights its wheel ships, with real Chroma.

No torch and no network: the model loads in a fraction of a second, so none of these is
``slow``. The lore is tests/planner/test_vectors.py's Northreach book.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
import pytest
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.config import Settings
from chromadb.utils.embedding_functions import (
    known_embedding_functions,
    register_embedding_function,
)

from planner.errors import RetrievalError
from planner.vectors import (
    LOCAL_MODEL,
    LocalEmbeddings,
    LoreIndex,
    VectorHit,
    collection_name,
    local_model_path,
)

from .test_vectors import ENABLED, LORE, SHADOWFANGS, closed_port, make_book

ROOT = Path(__file__).resolve().parents[2]

# Questions that share no key of the entry they are about (checked below), and its uid.
PARAPHRASES = {
    "where can I get a drink and play dice tonight?": 1,
    "where can I get a new sword made?": 8,
    "how do we cross the river?": 4,
    "is there a monster in the mountains?": 6,
    "what are those beasts howling in the dark woods?": SHADOWFANGS,
    "who sits on the throne?": 2,
    "we pray for a good harvest": 7,
    "the bell tolls from under the swamp water": 9,
    "masks and dancing in autumn": 10,
}


def test_the_paraphrases_share_no_key_with_their_entry() -> None:
    for question, uid in PARAPHRASES.items():
        keys = [key.lower() for key in LORE[uid]["key"]]
        assert not any(key in question.lower() for key in keys), (question, keys)


def test_the_local_model_finds_lore_that_no_key_names(tmp_path: Path) -> None:
    embedder = LocalEmbeddings()
    index = LoreIndex(tmp_path / "index", embedder=embedder)
    book = make_book()
    report = index.sync(book)
    assert (report.added, report.skipped, report.embedded) == (ENABLED, 1, ENABLED)
    assert embedder.embedded == ENABLED

    question = "what are those beasts howling in the dark woods?"
    hits = index.query([book], [question], n=3)
    best = hits[0]
    assert best == VectorHit(
        f"Northreach:{SHADOWFANGS}", "Northreach", SHADOWFANGS, best.distance, question
    )
    assert 0 < best.distance < hits[1].distance
    assert best.similarity == pytest.approx(1 - best.distance)

    # Each question alone: its entry comes first.
    alone = {text: index.query([book], text, n=ENABLED) for text in PARAPHRASES}
    assert {text: hits[0].uid for text, hits in alone.items()} == PARAPHRASES

    # Several at once: one hit per entry, at its nearest question's distance, best first.
    merged = index.query([book], list(PARAPHRASES), n=6)
    assert len({hit.id for hit in merged}) == len(merged) == 6
    assert [hit.distance for hit in merged] == sorted(hit.distance for hit in merged)
    for hit in merged:
        nearest = min(
            (other for hits in alone.values() for other in hits if other.id == hit.id),
            key=lambda other: other.distance,
        )
        assert (hit.query, hit.distance) == pytest.approx((nearest.query, nearest.distance))

    # max_distance keeps only the close ones; the disabled entry was never indexed.
    close = index.query([book], [question], n=10, max_distance=best.distance + 1e-6)
    assert [hit.uid for hit in close] == [SHADOWFANGS]
    everything = index.query([book], ["wolves and forests"], n=50)
    assert len(everything) == ENABLED
    assert 11 not in {hit.uid for hit in everything}


def test_vectors_have_unit_length_and_an_empty_text_is_near_nothing() -> None:
    embedder = LocalEmbeddings()
    texts = ["The red dragon sleeps under the mountain.", "", "龍が山の下で眠る", "x" * 50_000]
    vectors = embedder(texts)
    assert [vector.shape for vector in vectors] == [(256,)] * 4
    assert [vector.dtype for vector in vectors] == [np.float32] * 4
    norms = [float(np.linalg.norm(vector)) for vector in vectors]
    assert norms == pytest.approx([1.0, 0.0, 1.0, 1.0], abs=1e-5)
    assert embedder.embedded == 4
    # Same text, same vector, alone or in a batch; the queries go the same way.
    again = embedder.embed_query([texts[0]])[0]
    assert np.allclose(again, vectors[0], atol=1e-6)


def test_the_config_names_the_model_and_refuses_another() -> None:
    embedder = LocalEmbeddings(batch_size=8)
    assert LocalEmbeddings.name() == "clotho-wordllama"
    assert embedder.get_config() == {"model": LOCAL_MODEL, "batch_size": 8}
    rebuilt = LocalEmbeddings.build_from_config(embedder.get_config())
    assert (rebuilt.batch_size, rebuilt.identity) == (8, f"local:{LOCAL_MODEL}")
    with pytest.raises(RetrievalError, match="all-MiniLM-L6-v2: not the local model"):
        LocalEmbeddings.build_from_config({"model": "all-MiniLM-L6-v2"})
    weights = local_model_path() / "weights" / "l2_supercat_256.safetensors"
    assert weights.is_file()


def test_a_collection_reopens_from_disk_with_its_embedding_function(tmp_path: Path) -> None:
    path = tmp_path / "index"
    book = make_book("Northreach")
    other = make_book("Southmarch", {uid: LORE[uid] for uid in (1, 2, 4)})
    first = LoreIndex(path)
    first.sync(book)
    first.sync(other)
    name = collection_name("Northreach")
    del first

    # A fresh Chroma system (nothing kept in memory) on the same folder, handed no function:
    # Chroma rebuilds Clotho's registered one from the collection's config and embeds the query.
    SharedSystemClient.clear_system_cache()
    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.get_collection(name)
    recorded = collection.configuration_json["embedding_function"]
    assert recorded == {
        "type": "known",
        "name": "clotho-wordllama",
        "config": {"model": LOCAL_MODEL, "batch_size": 64},
    }
    assert isinstance(collection.configuration["embedding_function"], LocalEmbeddings)
    result = collection.query(
        query_texts=["what are those beasts howling in the dark woods?"], n_results=1
    )
    assert result["ids"] == [[f"Northreach:{SHADOWFANGS}"]]
    assert collection.metadata == {"book": "Northreach", "embedder": f"local:{LOCAL_MODEL}"}

    # A new index on the folder: nothing to embed again, and it queries both books at once.
    embedder = LocalEmbeddings()
    reopened = LoreIndex(path, embedder=embedder)
    assert reopened.sync(book).unchanged == ENABLED
    assert embedder.embedded == 0
    hits = reopened.query([book, other, "Northreach"], ["a tavern with ale and music"], n=4)
    assert hits[0].uid == 1
    assert {hit.book for hit in hits} == {"Northreach", "Southmarch"}
    assert len({hit.id for hit in hits}) == 4
    assert embedder.embedded == 1  # the query, once for both books


# ------------------------------------------- an index built by the previous local model


class _MiniLMOfOldReleases(EmbeddingFunction[Documents]):
    """What an index built by earlier releases recorded: the function's registered name
    ``clotho-local``, all-MiniLM-L6-v2's config and identity, 384 dimensions. (Fixed
    vectors: the test needs a collection as that model left it, not its meaning.)"""

    identity = "local:all-MiniLM-L6-v2"

    def __init__(self) -> None:
        pass

    def __call__(self, input: Documents) -> Embeddings:
        rng = np.random.default_rng(7)
        return [rng.standard_normal(384).astype(np.float32) for _ in input]

    @staticmethod
    def name() -> str:
        return "clotho-local"

    def get_config(self) -> dict[str, Any]:
        return {"model": "all-MiniLM-L6-v2", "batch_size": 64}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> _MiniLMOfOldReleases:
        return _MiniLMOfOldReleases()


@pytest.fixture
def old_index(tmp_path: Path) -> Path:
    """A lore index folder as the previous release left it; the old function is then
    unregistered, as it is in this release."""
    path = tmp_path / "lore-index"
    register_embedding_function(_MiniLMOfOldReleases)
    try:
        report = LoreIndex(path, embedder=_MiniLMOfOldReleases()).sync(make_book())
        assert report.added == ENABLED
    finally:
        known_embedding_functions.pop("clotho-local", None)
    SharedSystemClient.clear_system_cache()
    return path


def test_an_index_built_by_the_previous_model_is_rebuilt_not_mixed(old_index: Path) -> None:
    embedder = LocalEmbeddings()
    index = LoreIndex(old_index, embedder=embedder)
    with pytest.raises(RetrievalError, match=r"indexed with local:all-MiniLM-L6-v2, not local:"):
        index.query(["Northreach"], ["wolves"])
    assert embedder.embedded == 0  # refused before anything was embedded

    report = index.sync(make_book())
    assert (report.rebuilt, report.added, report.removed) == (True, ENABLED, 0)
    assert embedder.embedded == ENABLED  # every entry again, with the new model
    hits = index.query(["Northreach"], ["black wolves hunting in the forest"], n=2)
    assert hits[0].uid == SHADOWFANGS

    SharedSystemClient.clear_system_cache()
    client = chromadb.PersistentClient(
        path=str(old_index), settings=Settings(anonymized_telemetry=False)
    )
    (collection,) = client.list_collections()
    assert collection.metadata["embedder"] == f"local:{LOCAL_MODEL}"
    assert collection.configuration_json["embedding_function"]["name"] == "clotho-wordllama"
    stored = collection.get(include=["embeddings"])
    assert {len(vector) for vector in stored["embeddings"]} == {256}  # none of 384 left

    # Synced again: nothing to do.
    assert LoreIndex(old_index).sync(make_book()).embedded == 0


# ------------------------------------------------------------ offline, as installed

_OFFLINE = textwrap.dedent(
    """
    import json, logging, sys

    touched = []

    def refuse_network(event, args):
        if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
            touched.append(f"{event} {args!r}")
            raise OSError(f"no network in this test: {event}")

    sys.addaudithook(refuse_network)
    from planner.vectors import LocalEmbeddings

    embedder = LocalEmbeddings()
    embedder.load()
    a, b, c = embedder(["a red dragon sleeps", "the dragon is asleep", "taxes are due"])
    root = logging.getLogger()
    print(json.dumps({
        "touched": touched,
        "near": float(a @ b),
        "far": float(a @ c),
        "root_handlers": len(root.handlers),
        "root_level": root.level,
    }))
    """
)


def test_the_model_loads_from_the_wheel_with_no_network(tmp_path: Path) -> None:
    """In a fresh process with an empty home and cache, every proxy a closed loopback
    port and every attempt to resolve or connect refused (an audit hook), the model
    loads and embeds; nothing was downloaded or cached, and the root logger is as
    Python leaves it (wordllama's import would set it to INFO with a stderr handler)."""
    home = tmp_path / "home"
    home.mkdir()
    dead = f"http://127.0.0.1:{closed_port()}"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.upper().startswith(("HF_", "HUGGINGFACE", "XDG_", "HTTP", "ALL_PROXY"))
    }
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        HTTP_PROXY=dead,
        HTTPS_PROXY=dead,
        ALL_PROXY=dead,
        NO_PROXY="",
        PYTHONPATH=str(ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result = json.loads(done.stdout)
    assert result["touched"] == []
    assert result["near"] > 0.5 > result["far"]
    assert (result["root_handlers"], result["root_level"]) == (0, 30)
    assert list(home.rglob("*")) == []  # no ~/.cache/wordllama, nothing written at all
