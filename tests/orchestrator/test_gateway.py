"""What the gateway loads stays out of the cyclic garbage collector's passes."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from orchestrator.gateway import lasting


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector could ever free it


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def tracked(thing: object) -> bool:
    return any(other is thing for other in gc.get_objects())


def test_what_is_loaded_is_frozen_out_of_the_collectors_passes() -> None:
    gc.enable()
    with lasting():
        assert not gc.isenabled()  # no pass walks what is being loaded
        loaded = Node()
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    assert not tracked(loaded)  # no later pass walks it either
    made_after = Node()
    assert tracked(made_after)


def test_the_collector_stays_off_if_it_was_and_is_back_after_an_error() -> None:
    gc.disable()
    with lasting():
        pass
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(ValueError, match="broken"), lasting():
        raise ValueError("broken")
    assert gc.isenabled()


def test_nested_loads_leave_the_collector_on_only_at_the_end() -> None:
    gc.enable()
    with lasting():
        with lasting():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
