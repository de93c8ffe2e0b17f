"""SIGINT and SIGTERM end long-running commands the same way: cleanly.

Without a handler, SIGTERM kills the Python process on the spot and nothing it started
is stopped. :func:`until_signalled` runs a command's main coroutine as a task and turns
the first SIGINT or SIGTERM into a cancellation of that task, so its ``finally`` blocks
(stopping workers, the dev server, Redis, the simulator) run to the end. Later signals
while it cleans up are ignored rather than cutting the cleanup short (a second Ctrl-C
would otherwise leave the very processes this exists to stop).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def until_signalled(
    main: Awaitable[T], *, on_signal: Callable[[int], None] | None = None
) -> tuple[T | None, int | None]:
    """Run ``main``; return ``(result, None)``, or ``(result or None, signum)`` if a
    signal cancelled it (the result is kept when ``main`` handles the cancellation
    itself and returns, as ``demo --serve`` does when asked to stop serving)."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(main)
    received: list[int] = []

    def handle(signum: int) -> None:
        if received:
            return  # already stopping; let the cleanup finish
        received.append(signum)
        if on_signal is not None:
            on_signal(signum)
        task.cancel()

    # Signal handlers can only be installed from the main thread (tests drive commands
    # from worker threads too; there, cancellation comes from the caller instead).
    installed = threading.current_thread() is threading.main_thread()
    if installed:
        for s in SIGNALS:
            loop.add_signal_handler(s, handle, s)
    try:
        try:
            result = await task
        except asyncio.CancelledError:
            if not received:
                raise
            return None, received[0]
        return result, received[0] if received else None
    finally:
        if installed:
            for s in SIGNALS:
                loop.remove_signal_handler(s)


def exit_code_for(signum: int) -> int:
    """The conventional exit status of a process stopped by ``signum`` (128 + n)."""
    return 128 + int(signum)
