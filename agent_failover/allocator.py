"""The service worker's memory: start-up objects frozen out of the cyclic GC, and a
bounded number of glibc malloc arenas.

A finished workflow run leaves its instance (sandbox globals, event loop, tasks, decoded
payloads) in reference cycles that only CPython's full collection frees. That collection
runs when the objects waiting for it exceed a quarter of the long-lived ones, and a
worker's long-lived heap is mostly what start-up built (modules, the policy's models,
the SDK's tables): tens of finished runs piled up between collections, and the
allocator kept its high-water mark. :func:`freeze_startup_objects` moves everything
alive at start-up into the permanent generation (:func:`gc.freeze`), so full
collections come after a few runs, and each walks only what is not frozen.

glibc gives each thread that allocates under contention its own arena (up to 8 per
core), and memory freed into an arena is rarely handed back to the system; a worker's
threads (the Temporal core's runtime, the SDK's activity and heartbeat threads, the event
loop's executor) each grow their own. :func:`limit_arenas` keeps the process to two (a
process running Python under one GIL has little contention for more to spare). With both,
a 60-minute soak's RSS is flat over its last 30 minutes (``bench/soak.py``; the Soak
section of the measured figures).

Only the service worker (``failover worker``, ``worker.py``) calls these (the arena
limit before any thread starts, the freeze once the worker is built); a library user's
own worker keeps its process as it is. ``MALLOC_ARENA_MAX`` set in the environment wins
(glibc read it at start-up); ``FAILOVER_MALLOC_ARENA_MAX`` chooses the number (``0``
leaves glibc's default).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import sys
from collections.abc import Mapping

#: Arenas the service worker keeps by default.
DEFAULT_ARENAS = 2
#: glibc's ``mallopt`` parameter for the arena limit (malloc.h: ``M_ARENA_MAX``).
M_ARENA_MAX = -8
ENV = "FAILOVER_MALLOC_ARENA_MAX"


def arenas_from_env(env: Mapping[str, str] | None = None) -> int:
    """``FAILOVER_MALLOC_ARENA_MAX`` as a number of arenas (0: glibc's default).

    Raises ValueError naming the variable for anything but an integer from 0 to 64.
    """
    env = os.environ if env is None else env
    raw = env.get(ENV, "").strip()
    if not raw:
        return DEFAULT_ARENAS
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if not 0 <= n <= 64:
        raise ValueError(
            f"{ENV}: expected a number of malloc arenas from 0 (glibc's default) to 64, got {raw!r}"
        )
    return n


def limit_arenas(env: Mapping[str, str] | None = None) -> str:
    """Bound glibc's malloc arenas for this process; what was done, for the start-up log."""
    env = os.environ if env is None else env
    n = arenas_from_env(env)
    if env.get("MALLOC_ARENA_MAX"):
        return f"MALLOC_ARENA_MAX={env['MALLOC_ARENA_MAX']} (from the environment)"
    if n == 0:
        return "glibc default"
    libc = _glibc()
    if libc is None:
        return "not glibc: unchanged"
    if libc.mallopt(M_ARENA_MAX, n) != 1:
        return "mallopt refused: unchanged"
    return f"{n} arenas"


def freeze_startup_objects() -> int:
    """Collect, then freeze what is alive (start-up's objects); how many were frozen.

    Call it once, when the worker is built and before it polls: later objects (runs,
    calls) stay in the generations the collector walks.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def _glibc() -> ctypes.CDLL | None:
    """The running glibc, or None (macOS, musl, Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it
    except (OSError, AttributeError):
        return None
    return libc
