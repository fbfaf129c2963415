"""Cascade: after an early message was edited as a fork, the rest of its old branch
played again on the new base, as a new branch.

The player edited message ``O`` as a fork: ``F``, a sibling of ``O``. The old branch is
``O`` → ... → its leaf (the active path below ``O``, or a leaf named). A cascade walks
the old branch below ``O`` and mirrors each node under ``F``, one step per node, each
step its own transaction (and one step of the undo journal):

- a player's message (``user``) and a scene change or any other ``system`` node is
  copied as it is (text, speaker's name, enabled flag, metadata, state delta);
- a reply (``assistant``, enabled) is generated again by the engine's own turn (a
  ``reply`` turn at the copied message: lore, prompt, model, delta extracted, trace),
  by the speaker of the old reply in a cast of several;
- a disabled reply is copied as it is (it is out of every prompt: nothing to
  regenerate).

Every new node records the old node it mirrors in its metadata (``cascade``:
``{"from": O's id, "of": the old node's id, "to": the old leaf's id}``), so a cascade
run again finds the deepest node already mirrored (:func:`plan_cascade`) and goes on
from there, to the same leaf: a step is never made twice. A reply ``F`` already has
(the edit's own, ``clotho edit`` made it) stands as the mirror of ``O``'s first reply.
The old branch is never written to.

:meth:`Cascade.stop` stops the step running as a turn's Ctrl+C does
(:meth:`Engine.interrupt`: a reply streaming is kept as it stands, marked incomplete,
and counts as that step's; before its first word nothing is stored) and no further
step begins. The outcome ends with how the world states diverged: the state after the
old node the cascade reached (the old leaf, once complete) against the state after its
mirror (``Store.diff``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from mnemosyne import Node, Store

from .errors import OrchestratorError, TurnError, TurnInterrupted
from .speakers import speaker_for
from .turn import Engine, OnEvent, TurnRequest

__all__ = [
    "CASCADE",
    "Cascade",
    "CascadeError",
    "CascadeOutcome",
    "CascadePlan",
    "CascadeStep",
    "plan_cascade",
    "regenerates",
]

#: The metadata key of a node a cascade made: ``{"from": original id, "of": old id}``.
CASCADE = "cascade"
#: Metadata of an old node that refers to other nodes of its branch: not copied.
_BRANCH_BOUND = (CASCADE, "summary_through", "recaps", "continues")


def regenerates(node: Node) -> bool:
    """A cascade generates ``node``'s mirror again (an enabled reply); any other node
    it copies."""
    return node.role == "assistant" and node.enabled


class CascadeError(OrchestratorError, ValueError):
    """The cascade asked for cannot be made here (no original to follow, a leaf that is
    not below it, nothing below it to regenerate, a node no longer in the tree)."""

    code = "invalid_cascade"


@dataclass(frozen=True)
class CascadePlan:
    """What a cascade regenerates and how far it has come.

    ``old`` is the old branch below ``original`` down to ``leaf_id``, in order;
    ``mirrors`` the new nodes already made for its first ``len(mirrors)`` nodes (on
    a first run: none, or the reply the edit made)."""

    session_id: str
    fork: Node
    original: Node
    leaf_id: str
    old: tuple[Node, ...]
    mirrors: tuple[Node, ...] = ()

    @property
    def total(self) -> int:
        """How many steps the whole cascade has (the old branch's nodes below ``O``)."""
        return len(self.old)

    @property
    def done(self) -> int:
        """How many of them are made already."""
        return len(self.mirrors)

    @property
    def tip(self) -> str:
        """The node the next step grows under (``fork`` or the deepest mirror)."""
        return self.mirrors[-1].id if self.mirrors else self.fork.id

    def mark(self, old: Node) -> dict[str, Any]:
        """The metadata a node mirroring ``old`` records."""
        return {CASCADE: {"from": self.original.id, "of": old.id, "to": self.leaf_id}}

    def mirrors_of(self, node: Node, old: Node) -> bool:
        """``node`` mirrors ``old`` in this cascade (whichever leaf it was run to)."""
        mark = node.metadata.get(CASCADE)
        return (
            isinstance(mark, dict)
            and mark.get("from") == self.original.id
            and mark.get("of") == old.id
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "fork_id": self.fork.id,
            "original_id": self.original.id,
            "leaf_id": self.leaf_id,
            "total": self.total,
            "done": self.done,
            "tip_id": self.tip,
        }


@dataclass(frozen=True)
class CascadeStep:
    """One step made: ``number`` of ``total`` (1-based), the old node and its mirror."""

    number: int
    total: int
    old: Node
    new: Node
    generated: bool
    """The reply was generated again (else the node was copied)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.number,
            "total": self.total,
            "old_id": self.old.id,
            "new_id": self.new.id,
            "role": self.new.role,
            "name": self.new.name,
            "generated": self.generated,
            "incomplete": bool(self.new.metadata.get("incomplete")),
        }


@dataclass(frozen=True)
class CascadeOutcome:
    """How a run ended: the steps it made, whether it was stopped, and how the states
    diverged (``{path: [old value, new value]}``) between ``old_id`` (the old node the
    cascade reached) and ``new_id`` (its mirror, the new branch's tip)."""

    plan: CascadePlan
    made: list[CascadeStep] = field(default_factory=list)
    old_id: str = ""
    new_id: str = ""
    divergence: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return self.plan.done + len(self.made)

    @property
    def complete(self) -> bool:
        return self.done == self.plan.total

    @property
    def stopped(self) -> bool:
        """The run ended before the cascade's last step."""
        return not self.complete

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.plan.as_dict(),
            "done": self.done,
            "made": [step.as_dict() for step in self.made],
            "complete": self.complete,
            "stopped": self.stopped,
            "old_id": self.old_id,
            "new_id": self.new_id,
            "divergence": self.divergence,
        }


def plan_cascade(
    store: Store,
    session_id: str,
    fork: str | None = None,
    *,
    original: str | None = None,
    leaf: str | None = None,
) -> CascadePlan:
    """The cascade of ``fork`` (a node name; default HEAD) in place of ``original``
    (default: the nearest alternative before ``fork`` among its siblings whose story
    goes on below it) down the old branch to ``leaf`` (default: the active path below
    ``original``), with the steps made already.

    ``fork`` defaulting to HEAD: on a node a cascade made (one stopped), that cascade
    (its fork, original and leaf); on a reply with no earlier alternative whose
    player's message has one (``clotho edit`` leaves HEAD on the edit's reply), the fork
    is that message.

    Raises:
        CascadeError: no earlier alternative, an ``original`` that is not a sibling of
            ``fork``, a ``leaf`` not below ``original``, nothing below it, a fork,
            original or leaf no longer in the tree (trashed, pruned).
        mnemosyne.MnemosyneError: unknown session or node.
    """
    sid = store.session(session_id).id
    tree = store.tree(sid)
    by_id = {node.id: node for node in tree.nodes}
    children = tree.children()

    def in_tree(ref: str, what: str) -> Node:
        node = store.node(sid, ref)
        if node.id not in by_id:
            raise CascadeError(
                f"node {node.id[:8]} ({what}) is no longer in the story's tree (trashed or "
                "pruned): a cascade follows nodes of the tree"
            )
        return by_id[node.id]

    def earlier(node: Node) -> Node | None:
        """The nearest sibling before ``node`` whose story goes on past the one reply
        an edit makes (an earlier edit of the same message has at most that), else the
        nearest with anything below it, else the one just before."""
        siblings = children.get(node.parent_id, [])
        before = siblings[: [s.id for s in siblings].index(node.id)][::-1]

        def depth(start: Node) -> int:
            count, end = 0, start
            while end.active_child_id in by_id and count < 2:
                end, count = by_id[end.active_child_id], count + 1
            return count

        for least in (2, 1, 0):
            found = next((sibling for sibling in before if depth(sibling) >= least), None)
            if found is not None:
                return found
        return None

    fork_node = in_tree(fork or "HEAD", "the fork")
    mark = fork_node.metadata.get(CASCADE)
    if fork is None and original is None and isinstance(mark, dict) and mark.get("from") in by_id:
        # HEAD on a node a cascade made (one stopped): that cascade, its fork above HEAD
        original_node = by_id[mark["from"]]
        above = [n for n in tree.path(fork_node.id) if n.parent_id == original_node.parent_id]
        if above and above[0].id != original_node.id:
            fork_node, original = above[0], original_node.id
            if leaf is None and mark.get("to") in by_id:
                leaf = mark["to"]
    if original is None:
        before = earlier(fork_node)
        if before is None and fork is None and fork_node.parent_id is not None:
            parent = by_id[fork_node.parent_id]
            if fork_node.role == "assistant" and parent.role == "user":
                before = earlier(parent)
                if before is not None:
                    fork_node = parent
        if before is None:
            raise CascadeError(
                f"node {fork_node.id[:8]} has no earlier alternative to follow: name the "
                "edited message (the fork) and the original it replaces (--from)"
            )
        original_node = before
    else:
        original_node = in_tree(original, "the original")
        if original_node.id == fork_node.id or original_node.parent_id != fork_node.parent_id:
            raise CascadeError(
                f"node {original_node.id[:8]} is not another alternative of node "
                f"{fork_node.id[:8]} (a cascade follows a sibling of the fork)"
            )
    if leaf is None:
        end = original_node
        while end.active_child_id in by_id:
            end = by_id[end.active_child_id]
        leaf_id = end.id
    else:
        leaf_id = in_tree(leaf, "the leaf").id
    path = tree.path(leaf_id)  # leaf first, up to the root
    ids = [node.id for node in path]
    if original_node.id not in ids:
        raise CascadeError(
            f"node {leaf_id[:8]} is not on the old branch: it is not below node "
            f"{original_node.id[:8]}"
        )
    old = tuple(reversed(path[: ids.index(original_node.id)]))
    if not old:
        raise CascadeError(
            f"nothing to cascade: node {original_node.id[:8]} (the original) has nothing below it"
        )
    plan = CascadePlan(sid, fork_node, original_node, leaf_id, old)
    return replace(plan, mirrors=_mirrors(plan, children))


def _mirrors(plan: CascadePlan, children: dict[str | None, list[Node]]) -> tuple[Node, ...]:
    """The nodes already mirroring the old branch's first nodes, in order."""
    found: list[Node] = []
    tip = plan.fork
    for number, old in enumerate(plan.old):
        below = children.get(tip.id, [])
        mirror = next((node for node in below if plan.mirrors_of(node, old)), None)
        if mirror is None and number == 0 and old.role == "assistant":
            # the reply the edit made: the active child of the fork, a reply
            mirror = next(
                (n for n in below if n.id == tip.active_child_id and n.role == "assistant"),
                None,
            )
        if mirror is None:
            break
        found.append(mirror)
        tip = mirror
    return tuple(found)


#: Called as a step begins: its number, the total, the old node it mirrors.
OnBegin = Callable[[int, int, Node], None]
#: Called when a step is made.
OnStep = Callable[[CascadeStep], None]


class Cascade:
    """Runs a cascade's steps with an engine (the session's) on its store."""

    def __init__(self, engine: Engine, store: Store) -> None:
        self.engine = engine
        self.store = store
        self._stop = False
        self._replying = False
        """A reply of this cascade is being played: only then may :meth:`stop` interrupt
        the engine (shared with the session's turns, which may hold it meanwhile)."""

    @property
    def stopping(self) -> bool:
        """:meth:`stop` was called."""
        return self._stop

    def stop(self) -> None:
        """Stop the step running as a turn's interrupt does (a reply streaming kept,
        incomplete; before its first word, nothing), and begin no other. Only the
        cascade's own reply is interrupted: a turn the engine plays while the cascade
        waits for it (or copies a node) is left alone."""
        self._stop = True
        if self._replying:
            self.engine.interrupt()

    async def run(
        self,
        plan: CascadePlan,
        *,
        on_begin: OnBegin | None = None,
        on_step: OnStep | None = None,
        on_event: OnEvent | None = None,
    ) -> CascadeOutcome:
        """Make the steps left of ``plan``, each committed as it is made; ``on_event``
        gets the engine's events of each reply.

        Raises:
            OrchestratorError: a step's turn failed (the steps before it are kept: run
                the cascade again to go on).
            mnemosyne.MnemosyneError: the tree changed under the cascade.
        """
        made: list[CascadeStep] = []
        tip = plan.tip
        cast = len(self.engine.setup.members) > 1
        for number in range(plan.done + 1, plan.total + 1):
            if self._stop:
                break
            old = plan.old[number - 1]
            if on_begin is not None:
                on_begin(number, plan.total, old)
            generate = regenerates(old)
            if generate:
                new = await self._reply(plan, tip, old, cast, on_event)
            else:
                new = self._copy(plan, tip, old)
            if new is None:  # stopped before the reply's first word: nothing stored
                break
            step = CascadeStep(number, plan.total, old, new, generate)
            made.append(step)
            tip = new.id
            if on_step is not None:
                on_step(step)
        return self.outcome(plan, made)

    def outcome(self, plan: CascadePlan, made: list[CascadeStep]) -> CascadeOutcome:
        """The outcome of a run that made ``made``: the states diverged where it stands."""
        done = plan.done + len(made)
        new_id = made[-1].new.id if made else plan.tip
        old_id = plan.old[done - 1].id if done else plan.original.id
        divergence = self.store.diff(plan.session_id, old_id, new_id)
        return CascadeOutcome(plan, made, old_id, new_id, divergence)

    async def _reply(
        self, plan: CascadePlan, tip: str, old: Node, cast: bool, on_event: OnEvent | None
    ) -> Node | None:
        sid = plan.session_id
        speaker = self._speaker(sid, tip, old, on_event) if cast else None
        request = TurnRequest("reply", node=tip, speaker=speaker, metadata=plan.mark(old))
        self._replying = True
        try:
            result = await self.engine.run(sid, request, on_event)
        except TurnInterrupted:
            return None
        finally:
            self._replying = False
        return result.node

    def _speaker(self, sid: str, tip: str, old: Node, on_event: OnEvent | None) -> str | None:
        """The old reply's speaker, if that member can still speak at ``tip``; else
        ``None`` (whoever speaks next there), said in a warning."""
        if old.name is None:
            return None
        setup = self.engine.setup
        present = self.store.state(sid, tip).present
        try:
            speaker_for(setup.members, present, setup.speaker_order, old.name)
        except TurnError as error:
            if on_event is not None:
                on_event("warning", f"{error}; the next speaker replies in {old.name}'s place")
            return None
        return old.name

    def _copy(self, plan: CascadePlan, tip: str, old: Node) -> Node:
        metadata = {k: v for k, v in old.metadata.items() if k not in _BRANCH_BOUND}
        with self.store.transaction(plan.session_id) as tx, tx.journaled("cascade"):
            if tx.head_id != tip:
                tx.checkout(tip)
            return tx.append(
                old.role,
                old.content,
                name=old.name,
                metadata={**metadata, **plan.mark(old)},
                delta=old.delta or None,
                enabled=old.enabled,
            )
