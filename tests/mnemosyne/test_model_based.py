"""Random sequences of operations against the store and a plain in-memory model.

After every step the projection, HEAD, every node's children and active child, and
the turn view at HEAD must agree with the model, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import mnemosyne._head
from mnemosyne import ROLES, ConflictError, InvalidOperationError, Store


@dataclass
class ModelNode:
    id: str
    parent: str | None
    role: str
    content: str
    enabled: bool
    children: list[str] = field(default_factory=list)
    active: str | None = None


class TreeModel:
    """The reference: the tree as a dict, operations as the brief defines them."""

    def __init__(self) -> None:
        self.nodes: dict[str, ModelNode] = {}
        self.roots: list[str] = []
        self.head: str | None = None
        self.version = 0

    def siblings(self, node_id: str) -> list[str]:
        parent = self.nodes[node_id].parent
        return self.roots if parent is None else self.nodes[parent].children

    def add(self, node_id: str, parent: str | None, role: str, content: str, enabled: bool) -> None:
        self.nodes[node_id] = ModelNode(node_id, parent, role, content, enabled)
        if parent is None:
            self.roots.append(node_id)
        else:
            self.nodes[parent].children.append(node_id)
        self.checkout(node_id)

    def checkout(self, node_id: str) -> None:
        """HEAD moves; every ancestor of HEAD has its active child on the path to it."""
        child, parent = node_id, self.nodes[node_id].parent
        while parent is not None:
            self.nodes[parent].active = child
            child, parent = parent, self.nodes[parent].parent
        self.head = node_id
        self.version += 1

    def leaf_below(self, node_id: str) -> str:
        while self.nodes[node_id].active is not None:
            node_id = self.nodes[node_id].active  # type: ignore[assignment]
        return node_id

    def path(self) -> list[str]:
        out, current = [], self.head
        while current is not None:
            out.append(current)
            current = self.nodes[current].parent
        return out[::-1]

    def projection(self) -> list[str]:
        return [n for n in self.path() if self.nodes[n].enabled]


texts = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00"),
    max_size=12,
)


class TreeMachine(RuleBasedStateMachine):
    store: Store  # set by the test

    def __init__(self) -> None:
        super().__init__()
        self.sid = self.store.create_session().id
        self.model = TreeModel()

    # -- growth ----------------------------------------------------------------

    @rule(role=st.sampled_from(ROLES), content=texts, enabled=st.booleans())
    def append(self, role: str, content: str, enabled: bool) -> None:
        node, session = self.store.append(
            self.sid, role, content, enabled=enabled, expected_version=self.model.version
        )
        self.model.add(node.id, self.model.head, role, content, enabled)
        assert session.version == self.model.version

    @precondition(lambda self: self.model.nodes)
    @rule(data=st.data(), content=texts)
    def add_sibling(self, data: st.DataObject, content: str) -> None:
        of = data.draw(st.sampled_from(list(self.model.nodes)))
        original = self.model.nodes[of]
        node, _ = self.store.add_sibling(self.sid, of, content)
        assert (node.parent_id, node.role) == (original.parent, original.role)
        self.model.add(node.id, original.parent, original.role, content, True)

    # -- moving HEAD -----------------------------------------------------------------

    @precondition(lambda self: self.model.nodes)
    @rule(data=st.data(), prefix=st.integers(min_value=6, max_value=32))
    def checkout(self, data: st.DataObject, prefix: int) -> None:
        target = data.draw(st.sampled_from(list(self.model.nodes)))
        node, _ = self.store.checkout(self.sid, target[:prefix])
        assert node.id == target
        self.model.checkout(target)

    @rule(data=st.data(), direction=st.sampled_from(["next", "prev"]))
    def switch(self, data: st.DataObject, direction: str) -> None:
        use_head = not self.model.nodes or data.draw(st.booleans())
        ref = None if use_head else data.draw(st.sampled_from(list(self.model.nodes)))
        start = ref if ref is not None else self.model.head
        if start is None:
            with pytest.raises(InvalidOperationError):
                self.store.switch_sibling(self.sid, direction, ref)  # type: ignore[arg-type]
            return
        siblings = self.model.siblings(start)
        target = siblings.index(start) + (1 if direction == "next" else -1)
        if not 0 <= target < len(siblings):
            with pytest.raises(InvalidOperationError):
                self.store.switch_sibling(self.sid, direction, ref)  # type: ignore[arg-type]
            return
        expected = self.model.leaf_below(siblings[target])
        node, _ = self.store.switch_sibling(self.sid, direction, ref)  # type: ignore[arg-type]
        assert node.id == expected
        self.model.checkout(expected)

    @precondition(lambda self: self.model.version > 0)
    @rule(content=texts)
    def stale_write_changes_nothing(self, content: str) -> None:
        with pytest.raises(ConflictError):
            self.store.append(self.sid, "user", content, expected_version=self.model.version - 1)

    # -- what must hold after every step -------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        tree = self.store.tree(self.sid)
        assert tree.head_id == self.model.head
        assert tree.session.version == self.model.version
        assert [n.id for n in self.store.projection(self.sid)] == self.model.projection()
        # the messages, served from the store's memory of recent paths when it can
        assert [(m.id, m.role, m.content) for m in self.store.messages(self.sid)] == [
            (n, self.model.nodes[n].role, self.model.nodes[n].content)
            for n in self.model.projection()
        ]
        stored = {n.id: n for n in tree.nodes}
        assert stored.keys() == self.model.nodes.keys()
        children = tree.children()
        assert [n.id for n in children.get(None, [])] == self.model.roots
        for node_id, expected in self.model.nodes.items():
            node = stored[node_id]
            assert (node.parent_id, node.role, node.content, node.enabled) == (
                expected.parent,
                expected.role,
                expected.content,
                expected.enabled,
            )
            assert [c.id for c in children.get(node_id, [])] == expected.children
            assert node.active_child_id == expected.active
        if self.model.head is not None:
            turn = self.store.turn(self.sid)
            assert turn.siblings == self.model.siblings(self.model.head)
            assert turn.siblings[turn.index] == self.model.head


@pytest.mark.parametrize("near", [16, 1, 0])
def test_the_store_behaves_like_the_model(
    store: Store, near: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # how far up from HEAD a move of HEAD looks for where the paths meet: 0 and 1 make
    # most moves walk up to the root (the general case), 16 lets most meet HEAD's path
    monkeypatch.setattr(mnemosyne._head, "NEAR_HEAD", near)
    TreeMachine.store = store
    run_state_machine_as_test(
        TreeMachine,
        settings=settings(
            max_examples=25 if store.dialect == "sqlite" else 15,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
