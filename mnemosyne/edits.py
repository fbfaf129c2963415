"""The tree editor's operations as typed commands: one model per operation, each with
its fields, their checks, and how it applies itself to the editor.

This module is the one definition of the edit operations: the store applies them
(:meth:`~mnemosyne.Store.edit`, :meth:`~mnemosyne.Store.edits`,
:meth:`~mnemosyne.SessionTransaction.apply`), the HTTP API takes a list of
:data:`Edit` as its batch body (so OpenAPI shows each operation's body under the
``op`` discriminator) and the command line builds them. Adding an operation is a
class here, added to :data:`Edit`.

The models are strict (no coercion: ``"true"`` is not a boolean) and refuse unknown
keys. Built from untrusted values, :meth:`EditCommand.checked` and :func:`parse` turn
a refusal into :class:`~mnemosyne.InvalidOperationError` naming the field. What only
the tree can tell (a cycle, a node in the trash, a delta that no longer applies) is
refused when the command is applied, before anything of it is stored.

``purge`` is not one of them: it cannot be undone (it clears the journal), so it is no
part of a batch that is one undo step (:meth:`~mnemosyne.Store.purge`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from . import nodenames
from ._checks import check_content, check_name
from .editor import IMAGE_COLUMNS, Editor, EditResult
from .errors import InvalidOperationError
from .models import Role
from .state.delta import OPS, touches, unstorable
from .state.note import AuthorNote

__all__ = [
    "EDITS",
    "Checkout",
    "Copy",
    "Delete",
    "Delta",
    "DeltaOperation",
    "Edit",
    "EditCommand",
    "Graft",
    "Inject",
    "Move",
    "NodeRef",
    "Note",
    "Prune",
    "Restore",
    "Rewrite",
    "Toggle",
    "delta_dicts",
    "parse",
]


#: The built-in of the state that :class:`Note` writes.
NOTE_PATH = "author_note"


def _node_name(value: str) -> str:
    nodenames.parse(value)  # its refusal (a ValueError) says what is wrong with the name
    return value


NodeRef = Annotated[
    str,
    Field(
        min_length=1,
        max_length=nodenames.MAX_NAME_LENGTH,
        description="A node: its id or a unique prefix of at least 6 hex characters, "
        "HEAD (or @), a tag or branch, and steps up the path: HEAD~2, HEAD^, 3f2a9c~1, "
        "first-meeting~2.",
        examples=["3f2a9c", "HEAD~1"],
        json_schema_extra={"pattern": nodenames.NODE_NAME_PATTERN},
    ),
    AfterValidator(_node_name),
]
Text = Annotated[str, Field(max_length=1_000_000), AfterValidator(check_content)]
Name = Annotated[
    str | None,
    Field(max_length=200, description="The speaker's name."),
    AfterValidator(check_name),
]


class DeltaOperation(BaseModel):
    """One world-state operation of a node's delta."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    op: Literal[OPS]  # type: ignore[valid-type]
    path: Annotated[str, Field(min_length=1, max_length=200, examples=["hp"])]
    value: Any = None

    @field_validator("value")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        reason = unstorable(value)
        if reason is not None:
            raise ValueError(reason)
        return value

    def as_dict(self) -> dict[str, Any]:
        """As a delta stores it (``value`` only if it was given)."""
        return self.model_dump(exclude_unset=True)


Delta = Annotated[
    list[DeltaOperation] | None,
    Field(
        description="World-state operations applied by the node.",
        examples=[[{"op": "inc", "path": "hp", "value": -10}]],
    ),
]


def delta_dicts(delta: list[DeltaOperation] | None) -> list[dict[str, Any]] | None:
    """A delta as the store takes it (``None`` for none)."""
    return [op.as_dict() for op in delta] if delta else None


def _tag_required(schema: dict[str, Any]) -> None:
    """In the JSON schema, ``op`` is required: it picks the operation (in Python it
    defaults to the class's own)."""
    schema["properties"]["op"].pop("default", None)
    schema["required"] = ["op", *(name for name in schema.get("required", []) if name != "op")]


class EditCommand(BaseModel):
    """The base of every edit operation: strict, frozen, unknown keys refused."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, json_schema_extra=_tag_required
    )
    op: str

    def apply(self, editor: Editor) -> EditResult:
        """Do the operation in the editor's transaction (journaled by the editor)."""
        raise NotImplementedError

    @classmethod
    def checked(cls, **fields: Any) -> Self:
        """The command from values not checked yet (the command line, a script); a
        refusal is an :class:`~mnemosyne.InvalidOperationError` naming the field."""
        try:
            return cls(**fields)
        except ValidationError as error:
            raise _refusal(error, cls.model_fields["op"].default) from None


class Prune(EditCommand):
    """Detach a node's subtree as a fragment, kept and ready to be grafted."""

    op: Literal["prune"] = "prune"
    node_id: NodeRef

    def apply(self, editor: Editor) -> EditResult:
        return editor.detach(self.node_id, "fragment", self.op)


class Delete(EditCommand):
    """Move a node and its subtree to the trash (restorable until a purge)."""

    op: Literal["delete"] = "delete"
    node_id: NodeRef

    def apply(self, editor: Editor) -> EditResult:
        return editor.detach(self.node_id, "trash", self.op)


class Restore(EditCommand):
    """Put a trashed subtree back where it hung (or as a root, if it was one)."""

    op: Literal["restore"] = "restore"
    node_id: NodeRef = Field(description="The top of a subtree in the trash.")

    def apply(self, editor: Editor) -> EditResult:
        pk, node_id = editor.resolve(self.node_id)
        row = editor.row(pk)
        if row.detached != "trash":
            raise InvalidOperationError(f"node {node_id} is not the top of a subtree in the trash")
        home = row.detached_from_pk
        if home is not None and (not editor.exists(home) or editor.placement(home) is not None):
            raise InvalidOperationError(
                f"the node {node_id} hung under is no longer in the tree: graft it instead"
            )
        recorder = editor.begin()
        recorder.touch(pk, home)
        before = editor.states_before([pk])
        editor.attach(pk, home)
        return editor.finish(recorder, self.op, node_id, settle=before)


class Graft(EditCommand):
    """Attach a fragment, or move a subtree, under another node; its deltas are
    replayed on the new base. A cycle is refused."""

    op: Literal["graft"] = "graft"
    node_id: NodeRef = Field(description="The top of a fragment, or a node in the tree.")
    parent_id: NodeRef = Field(description="The node to hang it under (its new parent).")

    def apply(self, editor: Editor) -> EditResult:
        pk, node_id = editor.resolve(self.node_id)
        target, target_id = editor.resolve(self.parent_id)
        row = editor.row(pk)
        if editor.placement(pk) == "trash":
            raise InvalidOperationError(f"node {node_id} is in the trash: restore it first")
        editor.require_attached(target, target_id, "target")
        if editor.is_below(target, pk):
            raise InvalidOperationError(
                f"grafting {node_id} under {target_id} would make a cycle: "
                f"{target_id} is {node_id} itself or below it"
            )
        recorder = editor.begin()
        recorder.touch(pk, row.parent_pk, target)
        before = editor.states_before([pk])
        editor.attach(pk, target)
        editor.repair_active(row.parent_pk)
        return editor.finish(recorder, self.op, node_id, settle=before)


class Move(EditCommand):
    """Re-parent one node alone under another; its children go to its former parent."""

    op: Literal["move"] = "move"
    node_id: NodeRef
    parent_id: NodeRef = Field(description="The node to hang it under (its new parent).")

    def apply(self, editor: Editor) -> EditResult:
        pk, node_id = editor.resolve(self.node_id)
        target, target_id = editor.resolve(self.parent_id)
        if target == pk:
            raise InvalidOperationError(f"cannot move {node_id} under itself")
        editor.require_attached(pk, node_id, "node")
        editor.require_attached(target, target_id, "target")
        row = editor.row(pk)
        kids = editor.children(pk)
        recorder = editor.begin()
        recorder.touch(pk, row.parent_pk, target, *kids)
        before = editor.states_before([pk, *kids])
        for kid in kids:
            editor.update(kid, parent_pk=row.parent_pk)
        editor.update(pk, parent_pk=target, active_child_pk=None)
        if row.parent_pk is not None:
            if editor.row(row.parent_pk).active_child_pk == pk:
                replacement = row.active_child_pk if row.active_child_pk in kids else None
                editor.update(row.parent_pk, active_child_pk=replacement)
            editor.repair_active(row.parent_pk)
        if editor.row(target).active_child_pk is None:
            editor.update(target, active_child_pk=pk)
        return editor.finish(recorder, self.op, node_id, settle=before)


class Copy(EditCommand):
    """Duplicate a node and its active branch (``subtree``: everything below it) under
    another node; the copies are new nodes, replayed on the new base."""

    op: Literal["copy"] = "copy"
    node_id: NodeRef
    parent_id: NodeRef = Field(description="The node to hang the copy under.")
    subtree: bool = Field(default=False, description="Copy the whole subtree.")

    def apply(self, editor: Editor) -> EditResult:
        pk, node_id = editor.resolve(self.node_id)
        target, target_id = editor.resolve(self.parent_id)
        editor.require_attached(target, target_id, "target")
        keys = editor.subtree(pk) if self.subtree else editor.active_branch(pk)
        if target in keys:
            raise InvalidOperationError(
                f"cannot copy {node_id} under {target_id}: it is inside the copy"
            )
        recorder = editor.begin()
        recorder.touch(target)
        source = {
            key: dict(zip(IMAGE_COLUMNS, image or (), strict=True))
            for key, image in editor.images(keys).items()
        }
        mapping: dict[int, tuple[int, str]] = {}
        for key in keys:  # parents before children
            values = source[key]
            parent = target if key == pk else mapping[values["parent_pk"]][0]
            mapping[key] = editor.create_node(
                parent,
                values["role"],
                values["content"],
                values["name"],
                json.loads(values["delta"]) if values["delta"] else None,
                enabled=values["enabled"],
                metadata=json.loads(values["metadata"]) if values["metadata"] else None,
                check=False,
            )
            recorder.created(mapping[key][0])
        for key in keys:
            active = source[key]["active_child_pk"]
            if active in mapping:
                editor.update(mapping[key][0], active_child_pk=mapping[active][0])
        top, top_id = mapping[pk]
        if editor.row(target).active_child_pk is None:
            editor.update(target, active_child_pk=top)
        created = [new_id for _, new_id in mapping.values()]
        return editor.finish(recorder, self.op, top_id, settle={top: None}, created=created)


class Inject(EditCommand):
    """A new node between a node and its active child (or as its only child)."""

    op: Literal["inject"] = "inject"
    parent_id: NodeRef = Field(
        description="The node to insert below (the new node's parent; its active child"
        " becomes the new node's child)."
    )
    role: Role
    content: Text
    name: Name = None
    delta: Delta = None

    def apply(self, editor: Editor) -> EditResult:
        parent, parent_id = editor.resolve(self.parent_id)
        editor.require_attached(parent, parent_id, "node")
        recorder = editor.begin()
        child = editor.row(parent).active_child_pk
        recorder.touch(parent, child)
        before = editor.states_before([child] if child is not None else [])
        pk, node_id = editor.create_node(
            parent, self.role, self.content, self.name, delta_dicts(self.delta)
        )
        recorder.created(pk)
        if child is not None:
            editor.update(child, parent_pk=pk)
            editor.update(pk, active_child_pk=child)
        editor.update(parent, active_child_pk=pk)
        return editor.finish(
            recorder, self.op, node_id, settle={pk: None, **before}, created=[node_id]
        )


class Rewrite(EditCommand):
    """Change a node's text in place (a chat's edit forks instead)."""

    op: Literal["rewrite"] = "rewrite"
    node_id: NodeRef
    content: Text

    def apply(self, editor: Editor) -> EditResult:
        pk, node_id = editor.resolve(self.node_id)
        recorder = editor.begin()
        recorder.touch(pk)
        editor.update(pk, content=self.content)
        return editor.finish(recorder, self.op, node_id)


class Note(EditCommand):
    """Set the author's note from a node on (HEAD by default): the node's delta gets one
    ``set author_note`` (``unset`` for ``note`` null), replacing any it had, so the note
    holds at that node and below it, and an earlier node keeps the note it had. The
    node's other operations stay as they were."""

    op: Literal["note"] = "note"
    node_id: NodeRef = "HEAD"
    note: AuthorNote | None = Field(
        description="The note (text, depth, position, interval, role), or null: no note."
    )

    def apply(self, editor: Editor) -> EditResult:
        pk, node_id = editor.resolve(self.node_id)
        editor.require_attached(pk, node_id, "node")
        recorder = editor.begin()
        recorder.touch(pk)
        before = editor.states_before([pk])
        image = editor.images([pk])[pk]
        assert image is not None
        stored = image[IMAGE_COLUMNS.index("delta")]
        kept = [op for op in json.loads(stored or "[]") if not touches(op, NOTE_PATH)]
        if self.note is None:
            kept.append({"op": "unset", "path": NOTE_PATH})
        else:
            kept.append({"op": "set", "path": NOTE_PATH, "value": self.note.model_dump()})
        editor.update(pk, delta=json.dumps(kept, ensure_ascii=False, separators=(",", ":")))
        return editor.finish(recorder, self.op, node_id, settle=before)


class Toggle(EditCommand):
    """Enable or disable a node: a disabled node leaves the projection, and its delta
    every state below it."""

    op: Literal["toggle"] = "toggle"
    node_id: NodeRef

    def apply(self, editor: Editor) -> EditResult:
        pk, node_id = editor.resolve(self.node_id)
        recorder = editor.begin()
        recorder.touch(pk)
        before = editor.states_before([pk])
        editor.update(pk, enabled=not editor.row(pk).enabled)
        return editor.finish(recorder, self.op, node_id, settle=before)


class Checkout(EditCommand):
    """Move HEAD to a node in the tree (to a leaf: switch the trunk). Not an entry of
    the journal by itself: undo restores HEAD with the edits around it."""

    op: Literal["checkout"] = "checkout"
    node_id: NodeRef

    def apply(self, editor: Editor) -> EditResult:
        pk, node_id = editor.resolve(self.node_id)
        moved = node_id != editor.head_id
        editor.move_head(pk, node_id)
        return EditResult(self.op, node_id, node_id, moved)


Edit = Annotated[
    Prune | Graft | Inject | Rewrite | Note | Toggle | Delete | Restore | Move | Copy | Checkout,
    Field(discriminator="op"),
]
"""Any edit operation, told apart by ``op``."""

#: The operations, by their ``op``.
EDITS: dict[str, type[EditCommand]] = {
    kind.model_fields["op"].default: kind for kind in get_args(get_args(Edit)[0])
}

_ADAPTER: TypeAdapter[EditCommand] = TypeAdapter(Edit)


def parse(data: Any) -> EditCommand:
    """An edit from JSON-like data (``{"op": ..., ...}``); a refusal is an
    :class:`~mnemosyne.InvalidOperationError` naming the field."""
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as error:
        op = data.get("op") if isinstance(data, dict) else None
        raise _refusal(error, op, tagged=True) from None


def _refusal(error: ValidationError, op: object, *, tagged: bool = False) -> InvalidOperationError:
    """One line per bad field, each naming it (``graft: parent_id: Field required``)."""
    problems = []
    for item in error.errors():
        loc = list(item["loc"][1:] if tagged and item["loc"] else item["loc"])
        where = ".".join(str(part) for part in loc) or "op"
        problems.append(f"{where}: {item['msg']}")
    prefix = f"{op}: " if isinstance(op, str) else ""
    return InvalidOperationError(prefix + "; ".join(problems))
