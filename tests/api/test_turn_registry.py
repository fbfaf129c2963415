"""The turns a process keeps: ended ones for a bounded time and count (running ones
always), their Idempotency-Keys with them, and followers that join late or fall behind."""

from __future__ import annotations

import asyncio

from clotho.api.turn_registry import Asked, TurnRegistry

SAY = Asked("say", "Hello.", None, False)


def test_ended_turns_are_kept_up_to_a_count_running_ones_always() -> None:
    registry = TurnRegistry(max_ended=2)
    running = registry.create("s", SAY)
    ended = [registry.create("s", SAY, key=f"k{i}") for i in range(3)]
    for turn in ended:
        turn.end("done", "node", {})
        registry.ended(turn)
    kept = {turn.turn_id for turn in registry.of_session("s")}
    assert kept == {running.turn_id, ended[1].turn_id, ended[2].turn_id}
    assert registry.get("s", ended[0].turn_id) is None
    assert registry.by_key("s", "k0") is None  # its key went with it
    assert registry.by_key("s", "k2") is ended[2]
    assert registry.get("other", ended[2].turn_id) is None  # a turn of another session


def test_ended_turns_are_forgotten_after_their_time() -> None:
    registry = TurnRegistry(keep_s=0.0)
    turn = registry.create("s", SAY, key="k")
    assert registry.get("s", turn.turn_id) is turn
    turn.end("failed", "error", {"code": "model_error"})
    registry.ended(turn)
    assert registry.get("s", turn.turn_id) is None and registry.by_key("s", "k") is None


def test_followers_get_every_event_or_after_an_id_and_a_late_one_the_last() -> None:
    async def scenario() -> tuple[list[str], list[str], list[str], list[str]]:
        turn = TurnRegistry().create("s", SAY)
        turn.publish("turn", {})
        turn.publish("token", {"text": "a"})

        async def read(after: int | None) -> list[str]:
            return [f"{event.id}:{event.event}" async for event in turn.follow(after)]

        from_start = asyncio.create_task(read(None))
        after_one = asyncio.create_task(read(1))
        await asyncio.sleep(0)  # both follow now
        turn.publish("token", {"text": "b"})
        await asyncio.sleep(0)
        turn.end("done", "node", {"node": {}})
        late = await read(None)
        beyond = await read(3)
        return await from_start, await after_one, late, beyond

    from_start, after_one, late, beyond = asyncio.run(scenario())
    assert from_start == ["0:turn", "1:token", "2:token", "3:node"]
    assert after_one == ["2:token", "3:node"]
    assert late == ["3:node"]  # once ended, only its last event is kept
    assert beyond == []


def test_the_last_follower_leaving_a_running_turn_is_told() -> None:
    async def scenario() -> list[str]:
        turn = TurnRegistry().create("s", SAY)
        told: list[str] = []
        turn.on_abandoned = lambda: told.append("left")
        turn.publish("turn", {})
        first, second = turn.follow(), turn.follow()
        await anext(first)
        await anext(second)
        await first.aclose()
        assert told == []  # one still follows
        await second.aclose()
        return told

    assert asyncio.run(scenario()) == ["left"]


def test_a_follower_behind_when_the_turn_ends_still_gets_every_event() -> None:
    async def scenario() -> tuple[list[str], int]:
        turn = TurnRegistry().create("s", SAY)
        turn.publish("turn", {})
        follower = turn.follow()
        seen = [(await anext(follower)).event or ""]
        for word in ("a", "b", "c"):
            turn.publish("token", {"text": word})
        turn.end("done", "node", {})  # the follower has read one event of five
        seen += [event.event or "" async for event in follower]
        return seen, len([event async for event in turn.follow()])

    seen, later = asyncio.run(scenario())
    assert seen == ["turn", "token", "token", "token", "node"]
    assert later == 1  # once it has gone, only the last event is kept
