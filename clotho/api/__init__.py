"""Clotho's HTTP API (FastAPI): sessions, the tree, state, traces, the editor, turns
streamed as server-sent events, imports and exports. ``clotho serve`` runs it."""

from .app import app_from_env, create_app

__all__ = ["app_from_env", "create_app"]
