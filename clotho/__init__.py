"""Clotho: an engine for long text-RPG campaigns with language models.

The application shell: settings, the ``clotho`` command line, and (in later issues)
the HTTP API and import/export. The parts it wires together live in ``mnemosyne``
(memory), ``orchestrator`` (the turn loop), ``planner`` (lore) and ``postprocess``.
"""

__version__ = "0.1.0"
