"""The files Clotho reads and writes: one module per format.

- :mod:`.campaign`: campaign folders (``campaign.toml`` and the files it names).
- :mod:`.treefile`: tree files, a whole session as one JSON document, losing nothing.
- :mod:`.stchat`: SillyTavern chats (JSONL), in and out of the tree.

Lorebooks and character cards are read by :mod:`planner.lorebook` and
:mod:`planner.cards` (the planner plays them); every outside JSON text goes through
:mod:`mnemosyne.jsontext` first. Each format is then checked by pydantic models (strict,
unknown keys refused where the format is ours, allowed in SillyTavern's), and a refusal
is one line written by :func:`mnemosyne.validation.problem_line`.
"""
