"""What a benchmark records about its run: the machine's load, Redis round trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def loadavg() -> str | None:
    """``/proc/loadavg``'s three averages (the machine is shared: record how busy it was)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:  # pragma: no cover - not Linux
        return None


class RedisRoundTrips:
    """Counts the writes redis-py sends (one per command, one per pipeline or script
    call): each is one round trip to the server. Installed only with ``--redis``."""

    def __init__(self) -> None:
        self.count = 0
        self._orig: Any = None

    def install(self) -> RedisRoundTrips:
        from redis.asyncio.connection import AbstractConnection

        orig = self._orig = AbstractConnection.send_packed_command
        counter = self

        async def counted(conn: Any, command: Any, check_health: bool = True) -> None:
            counter.count += 1
            await orig(conn, command, check_health)

        AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]
        return self

    def uninstall(self) -> None:
        from redis.asyncio.connection import AbstractConnection

        if self._orig is not None:
            AbstractConnection.send_packed_command = self._orig  # type: ignore[method-assign]
