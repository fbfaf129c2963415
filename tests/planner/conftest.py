"""Fixtures shared by the planner's tests: the OpenAI-protocol embedding server on
loopback (deterministic, word-based vectors) that test_vectors defines."""

from tests.planner.test_vectors import embedding_server

__all__ = ["embedding_server"]
