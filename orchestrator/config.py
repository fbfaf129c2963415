"""The settings of the model calls of a turn (main reply, extraction, summary).

:class:`ModelSettings` is how a campaign's ``[model]`` table tunes the calls, with the
defaults every call has; :class:`ModelConfig` is one model and how to call it, those
settings included.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_CONTEXT_WINDOW", "ModelConfig", "ModelSettings"]

#: The window assumed when neither the campaign nor litellm's model list gives one.
DEFAULT_CONTEXT_WINDOW = 8192


class ModelSettings(BaseModel):
    """How the model calls are made, beside which model: the one home of their defaults."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    params: dict[str, Any] = Field(default_factory=dict)
    """Sampling parameters sent as they are (temperature, top_p, max_tokens...)."""
    timeout: float = Field(120.0, gt=0, allow_inf_nan=False)
    """Seconds to wait for an answer (or between two chunks of a stream)."""
    retries: int = Field(2, ge=0)
    """Retries after a rate limit (429), a server error (5xx) or a timeout."""
    context_window: int | None = Field(None, gt=0)
    """Tokens the model accepts; default: litellm's model list, else 8,192."""
    reply_tokens: int = Field(1024, gt=0)
    """Tokens kept free for the reply when trimming (``max_tokens`` when it is set)."""

    def config(
        self, model: str, *, api_base: str | None = None, api_key: str | None = None
    ) -> ModelConfig:
        """These settings for one model (a subclass's own fields left out)."""
        settings = self.model_dump(include=set(ModelSettings.model_fields))
        return ModelConfig(model, api_base=api_base, api_key=api_key, **settings)


_DEFAULT = ModelSettings()


@dataclass(frozen=True)
class ModelConfig:
    """One model and how to call it (the defaults: :class:`ModelSettings`')."""

    model: str
    """A litellm model string (``openai/gpt-4o-mini``, ``ollama/llama3``, ...)."""
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    key_source: str = "CLOTHO_API_KEY"
    """Where ``api_key`` came from, as an error names it (``refused the API key in ...``)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Sampling parameters sent as they are (temperature, top_p, max_tokens...)."""
    timeout: float = _DEFAULT.timeout
    """Seconds to wait for an answer (or between two chunks of a stream)."""
    retries: int = _DEFAULT.retries
    """Retries after a rate limit (429), a server error (5xx) or a timeout."""
    context_window: int | None = _DEFAULT.context_window
    """Tokens the model accepts; default: litellm's model list, else 8,192."""
    reply_tokens: int = _DEFAULT.reply_tokens
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
