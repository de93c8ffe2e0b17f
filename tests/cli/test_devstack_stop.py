"""``cli.devstack.stop_in_steps``: one step that hangs or fails does not keep the later
steps (the dev server, Redis, the simulator: their ports) from being stopped."""

from __future__ import annotations

import asyncio
import logging
import re
import time

import pytest

from agent_failover.cli.devstack import stop_in_steps


async def test_a_hanging_and_a_failing_step_do_not_stop_the_later_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []

    async def hangs() -> None:
        ran.append("workers")
        await asyncio.Event().wait()  # never set: a shutdown that never returns

    async def fails() -> None:
        ran.append("stores")
        raise RuntimeError("connection reset")

    async def stops() -> None:
        ran.append("Temporal dev server")

    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="agent_failover.cli.devstack"):
        await stop_in_steps(
            [("workers", hangs), ("stores", fails), ("Temporal dev server", stops)], limit_s=0.2
        )
    assert ran == ["workers", "stores", "Temporal dev server"]
    assert time.monotonic() - t0 < 5
    messages = [r.getMessage() for r in caplog.records]
    assert any("workers took over 0.2s" in m for m in messages), messages
    # Where it hung, for the next look: the step's own innermost frame.
    hung = re.compile(r"workers took over .* waiting in: \S+ at test_devstack_stop\.py:\d+ hangs")
    assert any(hung.search(m) for m in messages), messages
    assert any("stores failed: connection reset" in m for m in messages), messages
