"""The simulator's notion of time: a ``Clock`` protocol with a wall clock and a fake one.

Every timestamp the simulator records (attempt arrival, scenario load time) and every
finite delay it injects (latency, stalls, token pacing) goes through a clock, so the
timeline logic and the fault plans can be exercised by advancing a ``FakeClock`` instead
of sleeping. Unbounded holds (a request that is never answered) do not use the clock:
they wait on cancellation or on the server's shutdown event.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Epoch-seconds time source with an awaitable sleep."""

    def now(self) -> float:
        """Return the current time in epoch seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


class SystemClock:
    """Wall-clock time and real ``asyncio.sleep``."""

    def now(self) -> float:
        """Return ``time.time()``."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Sleep for real; non-positive delays only yield to the loop."""
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A manually driven clock for tests.

    ``sleep`` advances the clock by the requested amount and yields once, so code that
    injects latency finishes instantly while still observing time pass.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self.slept: list[float] = []

    def now(self) -> float:
        """Return the fake current time."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward; moving it backwards is a test bug."""
        if seconds < 0:
            raise ValueError("a FakeClock cannot go backwards")
        self._now += seconds

    def set(self, epoch_s: float) -> None:
        """Jump to an absolute time (must not be in the past)."""
        self.advance(epoch_s - self._now)

    async def sleep(self, seconds: float) -> None:
        """Record the delay, advance by it and yield once to the event loop."""
        seconds = max(0.0, seconds)
        self.slept.append(seconds)
        self._now += seconds
        await asyncio.sleep(0)
