"""Clotho: an engine for long text-RPG campaigns with language models.

The application shell: settings, the ``clotho`` command line (``clotho.cli``), the
HTTP API and the page (``clotho.api``, ``clotho.web``), and the files it reads and
writes (``clotho.formats``). The parts it wires together live in ``mnemosyne``
(memory), ``orchestrator`` (the turn loop), ``planner`` (lore) and ``postprocess``.
"""

__version__ = "0.1.0"
