"""The settings of the model calls of a turn (main reply, extraction, summary)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["DEFAULT_CONTEXT_WINDOW", "ModelConfig"]

#: The window assumed when neither the campaign nor litellm's model list gives one.
DEFAULT_CONTEXT_WINDOW = 8192


@dataclass(frozen=True)
class ModelConfig:
    """One model and how to call it."""

    model: str
    """A litellm model string (``openai/gpt-4o-mini``, ``ollama/llama3``, ...)."""
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    params: dict[str, Any] = field(default_factory=dict)
    """Sampling parameters sent as they are (temperature, top_p, max_tokens...)."""
    timeout: float = 120.0
    """Seconds to wait for an answer (or between two chunks of a stream)."""
    retries: int = 2
    """Retries after a rate limit (429), a server error (5xx) or a timeout."""
    context_window: int | None = None
    """Tokens the model accepts; default: litellm's model list, else 8,192."""
    reply_tokens: int = 1024
    """Tokens kept free for the reply when trimming (``max_tokens`` when it is set)."""

    def with_model(self, model: str | None) -> ModelConfig:
        """The same settings for another model (the extraction's), if one is named."""
        return self if not model else replace(self, model=model)

    def public(self) -> dict[str, Any]:
        """What a trace records: everything but the key."""
        return {
            "model": self.model,
            "api_base": self.api_base,
            "params": dict(self.params),
            "timeout": self.timeout,
            "retries": self.retries,
        }
