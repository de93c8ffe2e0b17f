"""What a benchmark records about its run: the machine's load, Redis round trips."""

from __future__ import annotations

import os
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


class ChildCPU:
    """CPU seconds (user + system) of this process's children whose command line contains
    a marker, read from ``/proc`` (Linux): what the dev server and the simulator spend, so a
    benchmark on a shared machine can say where a saturated machine's time went."""

    def __init__(self, markers: dict[str, str]) -> None:
        self._pids = {name: self._find(marker) for name, marker in markers.items()}
        self._tick = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _find(marker: str) -> int | None:
        me = os.getpid()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, IndexError, UnicodeDecodeError):
                continue
            if int(fields[1]) == me and marker in cmd:
                return int(stat.parent.name)
        return None

    def seconds(self) -> dict[str, float | None]:
        """Each named child's CPU seconds so far (None: not found or gone)."""
        out: dict[str, float | None] = {}
        for name, pid in self._pids.items():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                out[name] = (int(fields[11]) + int(fields[12])) / self._tick
            except (OSError, IndexError, TypeError, ValueError):
                out[name] = None
        return out
