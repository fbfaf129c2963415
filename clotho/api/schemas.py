"""The API's request bodies and response documents (they make the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from clotho.sessionconfig import SessionSettings
from mnemosyne.edits import Delta, DeltaOperation, Edit, NodeRef, delta_dicts

__all__ = [
    "AppendBody",
    "EditsBody",
    "ForkBody",
    "HeadBody",
    "NewSession",
    "SwipeBody",
    "TurnBody",
]

Role = Literal["system", "user", "assistant"]
Text = Annotated[str, Field(max_length=1_000_000)]


def _ops(delta: list[DeltaOperation] | None) -> list[dict[str, Any]] | None:
    return delta_dicts(delta)


# -- requests -----------------------------------------------------------------------------


class NewSession(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"title": "Eldoria"}]}
    )
    title: Annotated[str | None, Field(max_length=500)] = None
    campaign: Annotated[
        str | None,
        Field(max_length=4096, description="A campaign folder on the server's disk."),
    ] = None


class SessionPatch(BaseModel):
    """What to change in a session: its title, its settings (each settings field given
    replaces that field; the others stay)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"title": "The ruins of Eldoria"},
                {"settings": {"persona": {"name": "Aria", "description": "A wandering bard."}}},
                {"settings": {"profile": "local", "system_prompt": None}},
            ]
        },
    )
    title: Annotated[str | None, Field(max_length=500)] = Field(
        default=None, description="The new title (null: none)."
    )
    settings: SessionSettings | None = Field(
        default=None,
        description="The fields to change of the session's settings (a field set to null "
        "goes back to its default).",
    )

    @model_validator(mode="after")
    def _something(self) -> SessionPatch:
        if not self.model_fields_set & {"title", "settings"}:
            raise ValueError("nothing to change: give title, settings, or both")
        return self


class HeadBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node_id: NodeRef


class SwipeBody(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"direction": "next"}]}
    )
    direction: Literal["next", "prev"]
    node_id: NodeRef | None = Field(default=None, description="Default: HEAD.")


class AppendBody(BaseModel):
    """A message added under HEAD without a model (HEAD moves to it)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"role": "user", "content": "I open the door."}]},
    )
    role: Role
    content: Text
    name: Annotated[str | None, Field(max_length=200)] = None
    delta: Delta = None

    def operations(self) -> list[dict[str, Any]] | None:
        return _ops(self.delta)


class ForkBody(BaseModel):
    """A new sibling of a node, with its own text (HEAD moves to it)."""

    model_config = ConfigDict(extra="forbid")
    content: Text
    delta: Delta = None

    def operations(self) -> list[dict[str, Any]] | None:
        return _ops(self.delta)


class TurnBody(BaseModel):
    """One turn played by the model."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"kind": "say", "text": "I draw my sword."},
                {"kind": "reroll"},
                {"kind": "edit", "node_id": "3f2a9c", "text": "I sheathe my sword."},
                {"kind": "say", "text": "Bram, is the river safe?", "speaker": "Bram"},
                {"kind": "reply", "speaker": "Marla"},
            ]
        },
    )
    kind: Literal["say", "reroll", "edit", "continue", "impersonate", "reply"] = Field(
        description="`reply`: a member of the cast speaks at HEAD with no message of the "
        "player's (after a `say`, the next of `POST .../speakers`)."
    )
    text: Annotated[str | None, Field(max_length=1_000_000)] = Field(
        default=None, description="say/edit: the player's message."
    )
    node_id: NodeRef | None = Field(
        default=None,
        description="reroll: the reply (default HEAD); edit: the player's message; reply: "
        "the message a character answers below (default HEAD).",
    )
    speaker: Annotated[str | None, Field(min_length=1, max_length=200)] = Field(
        default=None,
        description="say/edit/reply: the member of the cast who answers (its name; default: "
        "the first of the session's speaker order, `POST .../speakers`). A reroll or a "
        "continue keeps the speaker of its reply. An unknown, muted or absent member is "
        "refused (422 `invalid_turn`), as a reply when no one can speak.",
    )

    @model_validator(mode="after")
    def _needs(self) -> TurnBody:
        if self.kind in ("say", "edit") and not (self.text and self.text.strip()):
            raise ValueError(f"{self.kind} needs the text of the player's message")
        if self.kind == "edit" and self.node_id is None:
            raise ValueError("edit needs node_id: the player's message to edit as a fork")
        if self.kind == "reply" and self.text is not None:
            raise ValueError("reply takes no text: a player's message is a say")
        return self


class EditsBody(BaseModel):
    """Editor operations applied in order, atomically: all of them or none."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "operations": [
                        {"op": "prune", "node_id": "3f2a9c"},
                        {"op": "graft", "node_id": "3f2a9c", "parent_id": "b81e07"},
                    ]
                }
            ]
        },
    )
    operations: Annotated[
        list[Edit],
        Field(
            min_length=1,
            max_length=1000,
            description='Each one `{"op": ..., ...}`: its fields are those of its schema.',
        ),
    ]


class LoreTestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Annotated[str, Field(min_length=1, max_length=100_000)]


# -- responses ------------------------------------------------------------------------------


class SessionOut(BaseModel):
    id: str
    title: str | None
    head_id: str | None
    version: int
    created_at: str
    updated_at: str
    campaign: str | None
    metadata: dict[str, Any]
    trashed_at: str | None


class NodeOut(BaseModel):
    id: str
    session_id: str
    parent_id: str | None
    role: Role
    name: str | None
    content: str
    enabled: bool
    created_at: str
    metadata: dict[str, Any]
    delta: list[dict[str, Any]]
    active_child_id: str | None


class NodeAmongSiblingsOut(NodeOut):
    siblings: list[str] = Field(description="The ids of the node and its alternatives, in order.")
    index: int = Field(description="The node's place among its siblings (0-based).")


class NodeDetail(NodeAmongSiblingsOut):
    children: list[str]


class ProjectionNode(BaseModel):
    id: str
    parent_id: str | None
    role: Role
    name: str | None
    content: str
    enabled: bool
    created_at: str
    siblings: list[str]
    index: int
    metadata: dict[str, Any] | None = Field(default=None, description="With ?metadata=true.")


PAGE_MAX = 1000


class ProjectionQuery(BaseModel):
    """A window of the projection, by cursor; any other parameter is refused (422)."""

    model_config = ConfigDict(extra="forbid")

    before: NodeRef | None = Field(
        default=None,
        description="A node on the path root → HEAD: the window ends just before it "
        "(the `next` of the window after it). Default: at HEAD, the last messages.",
    )
    limit: int = Field(default=200, ge=1, le=PAGE_MAX, description="How many messages, at most.")
    metadata: bool = Field(default=False, description="Include each node's metadata.")
    disabled: bool = Field(
        default=False, description="Include the path's disabled nodes (hidden from the model)."
    )


class ProjectionOut(BaseModel):
    session_id: str
    head_id: str | None
    version: int
    total: int = Field(description="How many messages the whole projection has.")
    earlier: int = Field(description="How many of them come before this window.")
    next: str | None = Field(
        description="The window before this one (a path with its query), or null at the root."
    )
    nodes: list[ProjectionNode] = Field(description="The window, oldest first.")


class TreeOut(BaseModel):
    session_id: str
    head_id: str | None
    version: int
    total: int = Field(description="How many nodes the whole tree has.")
    next: str | None = Field(
        description="The page after this one (a path with its query), or null at the end."
    )
    nodes: list[NodeOut] = Field(description="The page, parents before children.")


class DeclaredOut(BaseModel):
    """A variable as the session's schema declares it, its bounds as numbers at a state."""

    type: str
    min: int | float | None = Field(
        default=None,
        description="The lower bound; one named after another variable is that variable's "
        "value in this state (null: none, or that variable holds no number).",
    )
    max: int | float | None = Field(default=None, description="The upper bound, likewise.")
    choices: list[str] | None = Field(default=None, description="An enum's allowed values.")
    description: str = ""


class StateOut(BaseModel):
    node_id: str | None
    variables: dict[str, Any]
    declared: dict[str, DeclaredOut] = Field(
        default_factory=dict,
        description="Each variable the session's schema declares, in the schema's order "
        "(empty for a session without a schema: its variables are free).",
    )
    active_lore_ids: list[str]
    summary: str
    lore_timers: dict[str, Any]
    author_note: dict[str, Any] | None = Field(
        default=None,
        description="The author's note at this node (text, depth, position, interval, role)"
        " or null: docs/state.md.",
    )
    present: list[str] | None = Field(
        default=None,
        description="Who of the cast is in the scene at this node (names, in the order "
        "they came), or null: everyone (no one has come or gone). docs/state.md.",
    )


class BlameOut(BaseModel):
    path: str
    value: Any = None
    node_id: str | None


class ChangeOut(BaseModel):
    node_id: str
    operations: list[dict[str, Any]]
    value: Any = None


class ChangesOut(BaseModel):
    path: str
    start: Any = None
    changes: list[ChangeOut]


class ResultOut(BaseModel):
    """What one operation of a write did."""

    action: str = Field(
        description="The operation: `checkout`, `swipe`, `append`, `fork`, an edit's `op`,"
        " `undo`/`redo` (then `note` names the edit taken back or done again), `purge`,"
        " `create`, `trash`, `restore`, `import`; the lore manager's `lore_book`,"
        " `lore_remove`, `lore_add`, `lore_change`, `lore_delete`."
    )
    node_id: str | None = Field(description="The node it was about, if one.")
    head_id: str | None = Field(description="HEAD after it.")
    head_moved: bool = Field(description="Whether it moved HEAD.")
    created: list[str] = Field(description="The ids of the nodes it made.")
    note: str = Field(description="A line for people (empty when there is nothing to add).")
    count: int | None = Field(
        default=None,
        description="`purge`: how many nodes were deleted for good; `import`: how many "
        "nodes (a chat, a tree) or lore entries (a lorebook, a card's book) came in; "
        "`lore_add`: the new entry's uid; `lore_remove`: the book's entries.",
    )


class ImportedOut(BaseModel):
    """What an imported file brought."""

    kind: Literal["chat", "tree", "lorebook", "card"]
    name: str | None = Field(default=None, description="The book's or the character's name.")
    nodes: int = Field(default=0, description="The nodes it added (a card: its greetings).")
    entries: int = Field(
        default=0, description="The lore entries it brought (a lorebook, a card's book)."
    )
    enabled: int = Field(default=0, description="How many of those entries are enabled.")
    book: str | None = Field(
        default=None, description="The lorebook it added (a lorebook, a card's book)."
    )
    spec: str | None = Field(default=None, description="A card's spec (`chara_card_v2`...).")
    same_as: str | None = Field(
        default=None,
        description="A lorebook whose lore the session already holds (the same book, or a "
        "card's own book): the book that holds it; nothing was added.",
    )
    renamed_from: str | None = Field(
        default=None,
        description="A lorebook whose name another book had: the name it came with "
        "(`book` is the name it is kept under).",
    )


class WriteOut(BaseModel):
    """What every write answers: the session as the write left it (its `version` is the
    response's ETag), what each operation did, and the nodes the write made or moved
    HEAD to."""

    session: SessionOut
    results: list[ResultOut] = Field(
        description="One per operation: one for a simple write, one per edit of a batch."
    )
    nodes: list[NodeOut] = Field(
        description="The nodes the write made (a message, a fork, an edit's new nodes, a "
        "card's greetings) or moved HEAD to (checkout, swipe), as they are now."
    )
    imported: ImportedOut | None = Field(
        default=None, description="Imports only: what the file brought."
    )


class JournalEntryOut(BaseModel):
    position: int
    action: str
    at: str
    current: bool
    undone: bool
    snapshot: bool
    touched: int


class TurnResultOut(BaseModel):
    node: NodeOut
    user_node: NodeOut | None
    session: SessionOut
    state: StateOut
    incomplete: bool
    warnings: list[str]
    usage: dict[str, Any]


class LoreHitOut(BaseModel):
    book: str | None
    uid: Any = None
    comment: str | None
    reason: str
    via: str = Field(
        default="key",
        description="Which way it came in: `key`, `recursion` (a key in what other entries "
        "brought in), `constant`, `sticky`, `decorator` (`@@activate`) or `meaning` (found "
        "by the search by meaning).",
    )
    similarity: float | None = Field(
        default=None, description="`meaning`: its similarity to the newest messages (1 best)."
    )


class HealthOut(BaseModel):
    status: Literal["ok"]
    version: str
    database: str
    warm: Literal["warming", "ready"]


# -- pages of lists, and the reads' other documents ----------------------------------------

#: The most items a page holds.


class SessionsQuery(BaseModel):
    """A page of the sessions list, by cursor; any other parameter is refused (422)."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=50, ge=1, le=PAGE_MAX, description="How many sessions, at most.")
    after: str | None = Field(
        default=None,
        max_length=40,
        pattern=r"^[0-9]{1,18}-[0-9]{1,18}$",
        description="Where the page before ended (opaque: take it from that page's "
        "`next`). Default: the first page.",
    )


class ListedSession(SessionOut):
    """A session as the lists show it: with its character and avatar."""

    character: str | None = Field(
        default=None,
        description="Its character's name (a new story's card, an imported chat's), if known.",
    )
    avatar_url: str | None = Field(
        default=None, description="Its avatar (`GET`, a PNG), when it has one."
    )


class SessionsPage(BaseModel):
    sessions: list[ListedSession] = Field(
        description="The page: most recently changed first, ties newest first."
    )
    total: int = Field(description="How many sessions the whole list has.")
    next: str | None = Field(
        description="The page after this one (a path with its query), or null at the end."
    )


class TreeQuery(BaseModel):
    """A page of the tree, by cursor; any other parameter is refused (422)."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=PAGE_MAX, ge=1, le=PAGE_MAX, description="How many nodes, at most.")
    after: NodeRef | None = Field(
        default=None,
        description="The last node of the page before (the `next` of that page): this "
        "page starts after it. Default: the first page.",
    )


class HistoryQuery(BaseModel):
    """A page of the undo journal, by cursor; any other parameter is refused (422)."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=50, ge=1, le=PAGE_MAX, description="How many entries, at most.")
    after: int | None = Field(
        default=None,
        ge=1,
        le=2**53,
        description="The position of the last entry of the page before (the `next` of "
        "that page): this page starts after it. Default: the first page.",
    )


class HistoryPage(BaseModel):
    session_id: str
    version: int
    total: int = Field(description="How many entries the whole journal has.")
    next: str | None = Field(
        description="The page after this one (a path with its query), or null at the end."
    )
    entries: list[JournalEntryOut] = Field(description="The page, oldest first.")


class SubtreeOut(BaseModel):
    """A fragment (pruned) or a subtree in the trash: its top node and its size."""

    top: NodeOut
    size: int = Field(description="How many nodes the subtree has, its top included.")


class LeftOutRun(BaseModel):
    """Messages of the path the speaker did not witness (it was away), one run of them."""

    model_config = ConfigDict(extra="allow")

    first: str | None = Field(default=None, description="The run's first node.")
    last: str | None = Field(default=None, description="The run's last node.")
    count: int | None = Field(default=None, description="How many messages it holds.")


class SceneTraceOut(BaseModel):
    """The scene of a reply in a cast of several (docs/cast.md), as the engine stored it
    (every field read leniently: a trace stored by another version still reads)."""

    model_config = ConfigDict(extra="allow")

    speaker: str | None = Field(default=None, description="Who the reply was written as.")
    present: list[str] | None = Field(
        default=None, description="Who was in the scene, in the cast's order."
    )
    left_out: list[LeftOutRun] = Field(
        default_factory=list,
        description="The path's messages left out of the prompt because the speaker was "
        "away when they were said (a leave and a join are seen by the one who moves).",
    )
    lore_left_out: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Lore that fired but was left out: an absent member's own book.",
    )


class TraceOut(BaseModel):
    """A PromptTrace: what the model was sent for a node, and the stored document
    (model, params, usage, lore, planner, templates...: its other fields)."""

    model_config = ConfigDict(extra="allow")

    node_id: str
    messages: list[dict[str, Any]] = Field(description="What was sent, rebuilt.")
    verified: bool = Field(description="Whether the rebuilt messages hash to what was sent.")
    messages_hash: str = Field(description="The SHA-256 of what was sent, taken when sent.")
    problems: list[str] = Field(description="Why the messages could not be rebuilt, if so.")
    model: str | None = None
    params: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    lore: list[dict[str, Any]] | None = None
    planner: dict[str, Any] | None = None
    scene: SceneTraceOut | None = Field(
        default=None, description="A reply of a cast of several: who spoke, and what it saw."
    )


class DiffOut(RootModel[dict[str, Annotated[list[Any], Field(min_length=2, max_length=2)]]]):
    """Per variable that differs: `[value after a, value after b]`."""


class LoreEntryOut(BaseModel):
    uid: int
    comment: str
    keys: list[str]
    enabled: bool
    constant: bool
    condition: str | None = Field(description="The world-state condition, if any (`hp < 10`).")


class LorebookOut(BaseModel):
    """A lorebook of the session, its entries in order."""

    book: str
    enabled: bool = Field(
        default=True, description="Whether it plays (a book switched off stays, unplayed)."
    )
    entries: list[LoreEntryOut]


class LoreSkipOut(BaseModel):
    """An entry that could have fired and did not."""

    book: str
    uid: int | str
    reason: str = Field(description="Why: a rule, a roll, the budget, `slow_regex`...")


class LoreTestOut(BaseModel):
    """`POST .../lore/test?skipped=true`: what fired, and what did not and why."""

    fired: list[LoreHitOut]
    skipped: list[LoreSkipOut]
    budget: int | None = Field(
        default=None, description="The lore's budget in tokens (null: no lorebook plays)."
    )
    tokens: int | None = Field(
        default=None, description="The tokens the entries that fired spent of it."
    )


# -- the reads' queries: any parameter a read does not take is refused (422) ---------------

NodeId = NodeRef  # a node's name in a query: the same grammar as in a body


class NoQuery(BaseModel):
    """A read that takes no parameter."""

    model_config = ConfigDict(extra="forbid")


class StateQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node_id: NodeId | None = Field(default=None, description="The node (default: HEAD).")


class DiffQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    from_id: NodeId = Field(description="The node whose state is compared from.")
    to_id: NodeId = Field(description="The node whose state is compared to.")


class VariableQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1, max_length=200, description="A variable, such as hp or affinity.marla."
    )
    node_id: NodeId | None = Field(default=None, description="The node (default: HEAD).")
