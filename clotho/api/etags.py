"""Entity-tags (RFC 9110): a session's version as the ETag of everything it shows, and
the tags of ``If-Match`` / ``If-None-Match`` headers."""

from __future__ import annotations

import re

__all__ = ["ETAG_HEADER", "entity_tags", "etag", "none_match"]

#: The ETag header as the OpenAPI document declares it.
ETAG_HEADER = {
    "description": 'The session\'s version as a strong ETag ("12"): send it back as '
    "`If-Match` to write on top of what you read, as `If-None-Match` to read only if it "
    "changed.",
    "schema": {"type": "string", "pattern": '^"[0-9]+"$'},
}


def etag(version: int) -> str:
    """The ETag of everything a session shows at ``version`` (a strong one)."""
    return f'"{version}"'


#: One entity-tag of a header (RFC 9110): optionally weak (``W/``), then a quoted
#: string of visible characters without ``"``.
_ENTITY_TAG = re.compile(r'\s*(W/)?"([\x21\x23-\x7e\x80-\xff]*)"\s*')


def entity_tags(header: str) -> list[tuple[bool, str]] | None:
    """The entity-tags of an ``If-Match`` / ``If-None-Match`` header, each as (weak,
    opaque tag); ``None`` if the header is not a list of entity-tags."""
    tags = []
    for part in header.split(","):
        found = _ENTITY_TAG.fullmatch(part)
        if found is None:
            return None
        tags.append((found.group(1) is not None, found.group(2)))
    return tags


def none_match(header: str | None, version: int) -> bool:
    """Whether an ``If-None-Match`` header names the ETag of ``version``, by the weak
    comparison its RFC asks for (``W/"2"`` names ``"2"``), or is ``*``. A malformed
    header names nothing (the full answer is sent)."""
    if header is None:
        return False
    if header.strip() == "*":
        return True
    tags = entity_tags(header)
    return tags is not None and any(opaque == str(version) for _, opaque in tags)
