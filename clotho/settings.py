"""Clotho's settings: from arguments, then ``CLOTHO_*`` environment variables."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["Settings", "default_config_dir", "default_data_dir"]


def default_data_dir() -> Path:
    """The user's data directory for Clotho (platformdirs)."""
    from platformdirs import user_data_path

    return user_data_path("clotho", appauthor=False)


def default_config_dir() -> Path:
    """The user's config directory for Clotho (platformdirs): the connection profiles
    and their keys (:mod:`clotho.profiles`)."""
    from platformdirs import user_config_path

    return user_config_path("clotho", appauthor=False)


class Settings(BaseSettings):
    """Everything configurable, each with its ``CLOTHO_`` environment variable.

    Built by the wiring code (the CLI, the server), never at import time, so tests
    can make their own.
    """

    model_config = SettingsConfigDict(env_prefix="CLOTHO_", extra="ignore")

    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; default: clotho.db in the data directory",
    )
    data_dir: Path = Field(default_factory=default_data_dir, description="where files live")
    config_dir: Path = Field(
        default_factory=default_config_dir,
        description="where the connection profiles (profiles.toml) and their keys "
        "(secrets.toml) live",
    )
    session: str | None = Field(default=None, description="the session to act on")
    model: str | None = Field(default=None, description="litellm model string")
    api_base: str | None = Field(default=None, description="the model server's base URL")
    api_key: str | None = Field(
        default=None, repr=False, description="the provider's key (else litellm's own variables)"
    )
    extraction_model: str | None = Field(
        default=None, description="litellm model string for state extraction (default: model)"
    )
    vectors: bool = Field(
        default=True, description="find lore by meaning too (a local embedding model, Chroma)"
    )
    embedding_model: str | None = Field(
        default=None,
        description="litellm embedding model for lore vectors (default: the local model)",
    )
    embedding_api_base: str | None = Field(
        default=None, description="the embedding provider's base URL (default: api_base)"
    )
    chroma_url: str | None = Field(
        default=None,
        description="a Chroma server's URL for lore vectors (default: a folder in data_dir)",
    )

    api_token: str | None = Field(
        default=None,
        repr=False,
        description="the HTTP API's bearer token (default: one generated at first start, "
        "kept in data_dir/api-token)",
    )
    max_upload_bytes: int = Field(
        default=64 * 1024 * 1024,
        gt=0,
        description="the largest file the HTTP API accepts in an import (bytes)",
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="the names (Host headers) the HTTP API answers besides loopback's and "
        "the address it listens on; comma-separated; '*.example.com' for its subdomains, "
        "'*' for any",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="the origins (scheme://host[:port]) whose pages may call the HTTP API "
        "from a browser (CORS); comma-separated; none by default",
    )

    @field_validator("allowed_hosts", "cors_origins", mode="before")
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        """A list from the environment is written ``a,b`` (or ``a b``), not as JSON."""
        if isinstance(value, str):
            return [part for part in re.split(r"[,\s]+", value) if part]
        return value

    @property
    def resolved_database_url(self) -> str:
        """The database URL, defaulting to a SQLite file in the data directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'clotho.db'}"
