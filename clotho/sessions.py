"""Creating sessions, from nothing or from a campaign folder (the CLI and the API)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from clotho.formats.campaign import load_campaign

if TYPE_CHECKING:
    from mnemosyne import Session, Store

__all__ = ["new_session"]


def new_session(store: Store, *, title: str | None = None, campaign: Path | None = None) -> Session:
    """A new session. With a campaign folder, it takes the campaign's world-state schema,
    its card and its lorebooks (kept with the session) and, unless ``title`` is given,
    its title.

    Raises:
        CampaignError: the folder is not a valid campaign (the message names it).
        CardError, LorebookError, UsageError: a file it names cannot be used.
    """
    schema = campaign_path = None
    documents: list[tuple[str, str, str]] = []
    if campaign is not None:
        from clotho.lore import campaign_documents

        loaded = load_campaign(campaign)
        schema, campaign_path = loaded.schema, str(loaded.folder)
        title = title or loaded.title
        documents = campaign_documents(loaded)
    return store.create_session(
        title=title, campaign=campaign_path, schema=schema, documents=documents
    )
