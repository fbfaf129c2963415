"""Tags and branches over HTTP (:mod:`mnemosyne.refs`; ``docs/tags.md``).

- ``GET /api/sessions/{session_id}/refs``: the session's names (``?kind=tag|branch``),
  with its version as ``ETag`` (304 for ``If-None-Match``).
- ``POST .../refs``: name a node (``{"name", "kind", "node_id", "force"}``).
- ``PATCH .../refs/{name}``: rename it (``name``) and/or move it (``node_id``).
- ``DELETE .../refs/{name}``: delete it.

The writes are writes like the others (:mod:`clotho.api.writes`): ``If-Match``,
``Idempotency-Key``, a ``WriteOut`` with the new version as ``ETag``, and one step of
the undo journal each. A name is taken wherever the API takes a node (paths, bodies,
queries: ``first-meeting``, ``first-meeting~2``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from mnemosyne import SessionTransaction, refs
from mnemosyne.edits import NodeRef
from mnemosyne.nodenames import MAX_REF_LENGTH, REF_NAME_PATTERN
from mnemosyne.refs import RefKind

from .deps import ReadSession, StoreDep, Writer
from .idempotency import Outcome
from .schemas import ResultOut, WriteOut

__all__ = ["RefBody", "RefOut", "RefPatch", "RefsOut", "router"]

router = APIRouter(tags=["names"])

RefName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_REF_LENGTH,
        pattern=REF_NAME_PATTERN,
        description="ASCII letters, digits, `-`, `_`, `.`, starting with a letter; not all "
        "hex digits (it would read as an id prefix), not `HEAD`.",
        examples=["first-meeting"],
    ),
]
RefNameInPath = Annotated[
    str, Path(min_length=1, max_length=MAX_REF_LENGTH, description="The tag's or branch's name.")
]


class RefOut(BaseModel):
    """A tag or a branch."""

    name: str
    kind: RefKind
    node_id: str = Field(description="The node it names.")
    created_at: datetime
    place: Literal["tree", "fragment", "trash"] = Field(
        description="Where that node is: in the tree, in a pruned fragment, in the trash."
    )
    role: Literal["system", "user", "assistant"]
    text: str = Field(description="The start of the node's text, on one line.")
    at_head: bool = Field(description="Whether the node is HEAD.")


class RefsOut(BaseModel):
    refs: list[RefOut] = Field(description="By name.")


class RefBody(BaseModel):
    """A new name on a node."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"name": "first-meeting", "kind": "tag", "node_id": "HEAD~2"}]
        },
    )
    name: RefName
    kind: RefKind = Field(
        description="A tag names its node for good; a branch follows the turns played from its tip."
    )
    node_id: NodeRef = Field(default="HEAD", description="The node to name (default HEAD).")
    force: bool = Field(
        default=False, description="Move the name if the session has it already (same kind)."
    )


class RefPatch(BaseModel):
    """A name renamed, moved, or both (neither: nothing changes)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"name": "the-meeting"}]}
    )
    name: RefName | None = Field(default=None, description="Its new name.")
    node_id: NodeRef | None = Field(default=None, description="The node it moves to.")


class RefsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: RefKind | None = Field(default=None, description="Only these.")


def _results(*done: Any) -> list[ResultOut]:
    return [ResultOut.model_validate(one.as_dict()) for one in done]


@router.get(
    "/sessions/{session_id}/refs", summary="The session's tags and branches", response_model=RefsOut
)
def list_refs(
    session: ReadSession, store: StoreDep, query: Annotated[RefsQuery, Query()]
) -> RefsOut:
    """Every name of the session (or of one `kind`), by name, each with its node and
    where that is."""
    listed = refs.listed(store, session.id, query.kind)
    return RefsOut(refs=[RefOut.model_validate(ref.as_dict()) for ref in listed])


@router.post(
    "/sessions/{session_id}/refs",
    summary="Name a node (a tag or a branch)",
    status_code=201,
    response_model=WriteOut,
)
def create_ref(session_id: str, body: RefBody, write: Writer) -> WriteOut:
    """A tag or a branch on `node_id`. A name the session has is refused (422) unless
    `force` moves it. One step of the undo journal."""

    def act(tx: SessionTransaction) -> Outcome:
        done = tx.name_node(body.name, body.kind, body.node_id, force=body.force)
        return Outcome(_results(done), [tx.node(body.name)])

    return write(session_id, act, body)


@router.patch(
    "/sessions/{session_id}/refs/{name}",
    summary="Rename or move a tag or branch",
    response_model=WriteOut,
)
def patch_ref(session_id: str, name: RefNameInPath, body: RefPatch, write: Writer) -> WriteOut:
    """Moves it to `node_id` and/or renames it to `name`, in one transaction and one step
    of the undo journal. `nodes`: the node it names."""

    def act(tx: SessionTransaction) -> Outcome:
        done = tx.change_name(name, new=body.name, ref=body.node_id)
        return Outcome(_results(done), [tx.node(body.name or name)])

    return write(session_id, act, body)


@router.delete(
    "/sessions/{session_id}/refs/{name}", summary="Delete a tag or branch", response_model=WriteOut
)
def delete_ref(session_id: str, name: RefNameInPath, write: Writer) -> WriteOut:
    """The name goes; its node stays. One step of the undo journal."""

    def act(tx: SessionTransaction) -> Outcome:
        return Outcome(_results(tx.unname(name)))

    return write(session_id, act)
