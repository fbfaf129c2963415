"""The embedding functions behind the lore index, registered with Chroma.

Both are Chroma ``EmbeddingFunction`` subclasses registered under their :meth:`name`, so
a collection created with one records ``{"name": ..., "config": ...}`` and any client
that opens it later rebuilds the function from that config (Chroma calls
``build_from_config`` whenever it needs to embed for a collection it was not handed a
function for). The config never holds a secret: the provider's key is kept in memory,
or named by the environment variable it is read from.

- :class:`LocalEmbeddings`: WordLlama's ``l2_supercat`` model, 256 dimensions, from the
  weights and tokenizer that the ``wordllama`` wheel ships (a dependency of Clotho: a
  plain install finds lore by meaning). No torch and no network: a text's vector is the
  average of its tokens' vectors, a table look-up; loading takes a fraction of a second,
  once per process. Its similarities run lower than a transformer's (a good match
  often scores 0.2 to 0.5), hence the planner's default ``max_distance``.
- :class:`LiteLLMEmbeddings`: a provider's embedding endpoint through litellm
  (``openai/text-embedding-3-small``, ``ollama/nomic-embed-text`` on a local Ollama,
  any OpenAI-compatible ``/v1/embeddings`` with ``api_base``), for better vectors.

Failures raise :class:`~planner.errors.RetrievalError` naming the model.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from .errors import RetrievalError

__all__ = [
    "LOCAL_MODEL",
    "LOCAL_MODEL_TOKENS",
    "LiteLLMEmbeddings",
    "LocalEmbeddings",
    "local_model_path",
]

LOCAL_MODEL = "wordllama-l2_supercat-256"
"""The model :class:`LocalEmbeddings` runs: WordLlama's ``l2_supercat`` at 256 dimensions."""

LOCAL_MODEL_TOKENS = 512
"""A text is cut at this many tokens before it is embedded (an entry's comment and keys,
which come first, always count; memory stays bounded whatever an entry's length)."""


def local_model_path() -> Path:
    """The folder of the ``wordllama`` package, which holds the model's ``weights/`` and
    ``tokenizers/`` (found without importing the package).

    Raises:
        RetrievalError: the ``wordllama`` package is not installed.
    """
    spec = importlib.util.find_spec("wordllama")
    if spec is None or spec.origin is None:
        raise RetrievalError(
            f"embedding model {LOCAL_MODEL}: the wordllama package is not installed "
            "(pip install -e . installs it)"
        )
    return Path(spec.origin).parent


@contextlib.contextmanager
def _root_logging_kept() -> Iterator[None]:
    """Keep the root logger as it is while ``wordllama`` is imported.

    ``wordllama.inference`` calls ``logging.basicConfig(level=logging.INFO)`` when it is
    imported, which would print every library's INFO records on stderr. ``basicConfig``
    does nothing when the root logger has a handler, so one is held there meanwhile.
    """
    root = logging.getLogger()
    guard = logging.NullHandler()
    root.addHandler(guard)
    try:
        yield
    finally:
        root.removeHandler(guard)


_load_lock = threading.Lock()
_loaded: dict[str, Any] = {}


def _local_model() -> Any:
    """The WordLlama model, loaded on first use and kept for the process.

    ``cache_dir`` is the package's own folder: WordLlama looks for the tokenizer in its
    package's ``tokenizer/`` while the wheel ships ``tokenizers/``, and would download
    it; with the package folder as its cache it finds both files, and
    ``disable_download`` makes a missing file an error instead of a download.
    """
    with _load_lock:
        model = _loaded.get(LOCAL_MODEL)
        if model is not None:
            return model
        folder = local_model_path()
        try:
            with _root_logging_kept():
                from wordllama import WordLlama

            model = WordLlama.load(
                config="l2_supercat", dim=256, cache_dir=folder, disable_download=True
            )
            model.tokenizer.enable_truncation(LOCAL_MODEL_TOKENS)
        except (OSError, ValueError, RuntimeError, ImportError) as error:
            raise RetrievalError(
                f"embedding model {LOCAL_MODEL}: cannot load it from {folder}: {error}"
            ) from error
        _loaded[LOCAL_MODEL] = model
        return model


@register_embedding_function
class LocalEmbeddings(EmbeddingFunction[Documents]):
    """WordLlama on the CPU, from the weights its wheel ships; no network, no torch.

    Vectors have unit length (cosine distance); a text with no token (``""``) gets the
    zero vector, which is near nothing. Creating one is free; the model is loaded by the
    first call and shared by every instance in the process.

    Attributes:
        embedded: How many texts this instance has embedded (documents and queries).
    """

    def __init__(self, batch_size: int = 64) -> None:
        """Set up the function; the model is loaded by the first call (or :meth:`load`).

        Args:
            batch_size: Texts encoded together (more is faster, up to memory).
        """
        self.batch_size = batch_size
        self.embedded = 0

    @property
    def identity(self) -> str:
        """What the vectors depend on: a collection built by another identity is rebuilt."""
        return f"local:{LOCAL_MODEL}"

    def load(self) -> None:
        """Load the model now (otherwise the first embedding does).

        Raises:
            RetrievalError: the model is not installed or cannot be read.
        """
        _local_model()

    def __call__(self, input: Documents) -> Embeddings:
        """Embed ``input`` (one vector per text, float32, unit length or zero).

        Raises:
            RetrievalError: the model cannot be loaded or fails on the input.
        """
        model = _local_model()
        texts = list(input)
        try:
            raw = np.asarray(model.embed(texts, batch_size=self.batch_size), dtype=np.float32)
        except (RuntimeError, ValueError, TypeError) as error:
            raise RetrievalError(f"embedding model {LOCAL_MODEL}: {error}") from error
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        vectors = np.divide(raw, norms, out=np.zeros_like(raw), where=norms > 0)
        self.embedded += len(texts)
        return list(vectors)

    @staticmethod
    def name() -> str:
        return "clotho-wordllama"

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "l2", "ip"]

    def get_config(self) -> dict[str, Any]:
        return {"model": LOCAL_MODEL, "batch_size": self.batch_size}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> LocalEmbeddings:
        model = config.get("model", LOCAL_MODEL)
        if model != LOCAL_MODEL:
            raise RetrievalError(f"embedding model {model}: not the local model ({LOCAL_MODEL})")
        return LocalEmbeddings(batch_size=int(config.get("batch_size", 64)))


@cache
def _litellm() -> ModuleType:
    """litellm, imported once, offline (as ``orchestrator.gateway`` does)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


@register_embedding_function
class LiteLLMEmbeddings(EmbeddingFunction[Documents]):
    """A provider's embedding model, called through ``litellm.embedding``.

    Attributes:
        embedded: How many texts this instance has embedded (documents and queries).
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        batch_size: int = 128,
    ) -> None:
        """Describe the endpoint; nothing is called (nor litellm imported) until needed.

        Args:
            model: A litellm model string (``openai/text-embedding-3-small``...).
            api_base: The provider's URL (``http://127.0.0.1:8080/v1``), if not the default.
            api_key: The key; kept in memory only, never written into Chroma.
            api_key_env: The environment variable to read the key from when none is given
                (recorded in the collection, so a reopened collection finds its key).
            timeout: Seconds to wait for one request.
            retries: Retries after a rate limit, a server error or a timeout (by the
                provider's client, with backoff). litellm 1.106 reads 0 as its default (2)
                for OpenAI-compatible providers, so 0 does not turn retrying off there.
            batch_size: Texts sent in one request.
        """
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self._api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.batch_size = batch_size
        self.embedded = 0

    @property
    def identity(self) -> str:
        """What the vectors depend on: a collection built by another identity is rebuilt."""
        return f"litellm:{self.model}"

    def _key(self) -> str | None:
        if self._api_key is not None:
            return self._api_key
        if self.api_key_env:
            return os.environ.get(self.api_key_env)
        return None

    def _where(self) -> str:
        return f"{self.model} at {self.api_base}" if self.api_base else self.model

    def __call__(self, input: Documents) -> Embeddings:
        """Embed ``input`` (one vector per text, float32), ``batch_size`` texts a request.

        Raises:
            RetrievalError: the provider refused, failed or could not be reached.
        """
        litellm = _litellm()
        import httpx
        import openai

        texts = list(input)
        vectors: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            try:
                response = litellm.embedding(
                    model=self.model,
                    input=batch,
                    api_base=self.api_base,
                    api_key=self._key(),
                    timeout=self.timeout,
                    max_retries=self.retries,
                )
                data = sorted(response.data, key=_index)
                batch_vectors = [np.asarray(_vector(item), dtype=np.float32) for item in data]
            except (openai.OpenAIError, httpx.HTTPError, ValueError, KeyError, TypeError) as error:
                raise RetrievalError(f"embedding model {self._where()}: {error}") from error
            if len(batch_vectors) != len(batch):
                raise RetrievalError(
                    f"embedding model {self._where()}: {len(batch_vectors)} vectors "
                    f"for {len(batch)} texts"
                )
            vectors.extend(batch_vectors)
        self.embedded += len(texts)
        return vectors

    @staticmethod
    def name() -> str:
        return "clotho-litellm"

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "l2", "ip"]

    def get_config(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "api_base": self.api_base,
            "api_key_env": self.api_key_env,
            "timeout": self.timeout,
            "retries": self.retries,
            "batch_size": self.batch_size,
        }

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> LiteLLMEmbeddings:
        return LiteLLMEmbeddings(
            str(config["model"]),
            api_base=config.get("api_base"),
            api_key_env=config.get("api_key_env"),
            timeout=float(config.get("timeout", 60.0)),
            retries=int(config.get("retries", 2)),
            batch_size=int(config.get("batch_size", 128)),
        )


def _index(item: Any) -> int:
    return int(item["index"] if isinstance(item, dict) else item.index)


def _vector(item: Any) -> Sequence[float]:
    vector: Sequence[float] = item["embedding"] if isinstance(item, dict) else item.embedding
    return vector
