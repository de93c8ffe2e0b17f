"""The simulator's tool server: idempotent by key, effects recorded once, faults injectable."""

from __future__ import annotations

import httpx
import pytest

from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import RunningSimulator


async def _post(c: httpx.AsyncClient, sim: RunningSimulator, tool: str, key: str | None, **args):
    headers = {"Idempotency-Key": key} if key else {}
    return await c.post(f"{sim.url}/_tools/{tool}", json=args, headers=headers)


async def test_same_key_same_answer_one_effect(sim: RunningSimulator) -> None:
    """A repeated key replays the first answer; other args under that key are a 422."""
    async with httpx.AsyncClient() as c, SimAdmin(sim.url) as admin:
        first = await _post(c, sim, "create_ticket", "k1", title="x")
        again = await _post(c, sim, "create_ticket", "k1", title="x")
        other = await _post(c, sim, "create_ticket", "k1", title="y")
        assert first.status_code == again.status_code == 201
        assert first.json() == again.json() and again.headers["Idempotent-Replayed"] == "true"
        assert other.status_code == 422
        effects = await admin.effects()
        assert len(effects) == 1 and effects[0].requests == 2
        assert effects[0].object_id == first.json()["id"]


async def test_compensation_undoes_once_and_rejects_unknown_ids(sim: RunningSimulator) -> None:
    """close_ticket: 200 once, 409 under a new key, 404 for an unknown id; no key is a 400."""
    async with httpx.AsyncClient() as c:
        tid = (await _post(c, sim, "create_ticket", "k1", title="x")).json()["id"]
        assert (await _post(c, sim, "close_ticket", "c1", id=tid)).status_code == 200
        assert (await _post(c, sim, "close_ticket", "c1", id=tid)).status_code == 200
        assert (await _post(c, sim, "close_ticket", "c2", id=tid)).status_code == 409
        assert (await _post(c, sim, "close_ticket", "c3", id="T-999")).status_code == 404
        assert (await _post(c, sim, "delete_message", "c4", id=tid)).status_code == 404
        assert (await _post(c, sim, "close_ticket", None, id=tid)).status_code == 400
        assert (await _post(c, sim, "launch_rocket", "k9")).status_code == 404


async def test_faults_before_after_and_times(sim: RunningSimulator) -> None:
    """'before' applies nothing; 'after' applies then loses the answer; times counts down."""
    async with httpx.AsyncClient() as c, SimAdmin(sim.url) as admin:
        await admin.set_tool_faults("post_message", [{"status": 503, "times": 1}])
        assert (await _post(c, sim, "post_message", "m1", text="a")).status_code == 503
        assert await admin.effects() == []
        assert (await _post(c, sim, "post_message", "m1", text="a")).status_code == 201
        await admin.set_tool_faults("post_message", [{"when": "after", "times": 1}])
        assert (await _post(c, sim, "post_message", "m2", text="b")).status_code == 500
        replay = await _post(c, sim, "post_message", "m2", text="b")
        assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
        assert [e.key for e in await admin.effects(tool="post_message")] == ["m1", "m2"]
        assert (await admin.tool_calls())["post_message"] == 4
        await admin.reset()
        assert await admin.effects() == [] and await admin.tool_calls() == {}


async def test_admin_rejects_unknown_tools_and_bad_faults(sim: RunningSimulator) -> None:
    """Unknown tool → 404, invalid fault → 400 with the field path."""
    async with SimAdmin(sim.url) as admin:
        for tool, body in (("nope", [{}]), ("close_ticket", [{"status": 200}])):
            try:
                await admin.set_tool_faults(tool, body)
            except httpx.HTTPStatusError as exc:
                assert exc.response.status_code in (400, 404)
            else:
                raise AssertionError(f"{tool} {body} was accepted")
        await admin.set_tool_faults("close_ticket", [{"kind": "hang", "hold_s": 1}])
        await admin.clear_tool_faults("close_ticket")


async def test_undo_by_effect_key_and_nothing_applied(sim: RunningSimulator) -> None:
    """An undo may name the effect by its key: it undoes that object; a key that applied
    nothing (or another kind) is a 404 saying ``nothing_applied``."""
    async with httpx.AsyncClient() as c:
        tid = (await _post(c, sim, "create_ticket", "k1", title="x")).json()["id"]
        undone = await _post(c, sim, "close_ticket", "c1", effect_key="k1")
        assert undone.status_code == 200 and undone.json()["id"] == tid
        none = await _post(c, sim, "close_ticket", "c2", effect_key="never-sent")
        assert none.status_code == 404 and none.json()["nothing_applied"] is True
        other = await _post(c, sim, "delete_message", "c3", effect_key="k1")
        assert other.status_code == 404 and other.json()["nothing_applied"] is True


async def _held(c: httpx.AsyncClient, url: str, text: str, key: str) -> None:
    """Post one tool call that the simulator must hold past a 0.3 s client timeout."""
    with pytest.raises(httpx.TimeoutException):
        await c.post(url, json={"text": text}, headers={"Idempotency-Key": key}, timeout=0.3)


async def test_hang_after_applies_then_answers_nothing(sim: RunningSimulator) -> None:
    """A 'hang' fault with when='after' applies the effect, then holds the answer."""
    async with httpx.AsyncClient() as c, SimAdmin(sim.url) as admin:
        await admin.set_tool_faults(
            "post_message", [{"kind": "hang", "when": "after", "hold_s": 5, "times": 1}]
        )
        await _held(c, f"{sim.url}/_tools/post_message", "a", "m1")
        assert [e.key for e in await admin.effects(tool="post_message")] == ["m1"]
        await admin.set_tool_faults("post_message", [{"kind": "hang", "hold_s": 5, "times": 1}])
        await _held(c, f"{sim.url}/_tools/post_message", "b", "m2")
        assert [e.key for e in await admin.effects(tool="post_message")] == ["m1"]
