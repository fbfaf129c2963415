"""The ready campaigns a new story can start with (``rpg.toml``: HP with its bounds, gold,
an inventory), read by :func:`clotho.stories.ready_schema`."""
