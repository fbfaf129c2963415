"""Jinja2 prompt templates shipped with the package (filled in by the turn-loop issue)."""
