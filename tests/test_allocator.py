"""``agent_failover.allocator``: the service worker's bounded glibc malloc arenas."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from agent_failover.allocator import (
    DEFAULT_ARENAS,
    _glibc,
    arenas_from_env,
    freeze_startup_objects,
    limit_arenas,
)

#: Starts threads that each malloc (every new thread gets its own arena until the limit),
#: then prints how many heaps (arenas) glibc reports in malloc_info.
_COUNT_ARENAS = """
import ctypes, ctypes.util, os, sys, tempfile, threading
from agent_failover.allocator import limit_arenas
if sys.argv[1] == "limit":
    print(limit_arenas({}), file=sys.stderr)
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.fopen.restype = ctypes.c_void_p
hold, gate = [], threading.Barrier(8)
def work():
    gate.wait()  # all alive at once: none can inherit a finished thread's arena
    hold.append(libc.malloc(4096))
    gate.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
path = tempfile.mktemp()
fp = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(fp))
libc.fclose(ctypes.c_void_p(fp))
print(open(path).read().count("<heap nr="))
os.unlink(path)
"""

glibc_only = pytest.mark.skipif(_glibc() is None, reason="malloc arenas are glibc's (Linux)")


def _arenas(mode: str) -> int:
    env = {"PATH": "/usr/bin:/bin"}  # no MALLOC_ARENA_MAX inherited
    out = subprocess.run(
        [sys.executable, "-c", _COUNT_ARENAS, mode],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=60,
    )
    return int(out.stdout.strip())


@glibc_only
def test_the_limit_bounds_the_arenas_threads_get() -> None:
    unlimited, limited = _arenas("default"), _arenas("limit")
    assert unlimited > DEFAULT_ARENAS  # eight threads at once get arenas of their own
    assert limited <= DEFAULT_ARENAS


def test_the_number_comes_from_the_environment() -> None:
    assert arenas_from_env({}) == DEFAULT_ARENAS
    assert arenas_from_env({"FAILOVER_MALLOC_ARENA_MAX": "4"}) == 4
    assert arenas_from_env({"FAILOVER_MALLOC_ARENA_MAX": "0"}) == 0


@pytest.mark.parametrize("bad", ["two", "-1", "65", "2.5"])
def test_a_bad_number_names_the_variable(bad: str) -> None:
    with pytest.raises(ValueError, match="FAILOVER_MALLOC_ARENA_MAX.*" + bad.replace(".", r"\.")):
        arenas_from_env({"FAILOVER_MALLOC_ARENA_MAX": bad})


def test_glibcs_own_variable_wins() -> None:
    said = limit_arenas({"MALLOC_ARENA_MAX": "3", "FAILOVER_MALLOC_ARENA_MAX": "2"})
    assert said == "MALLOC_ARENA_MAX=3 (from the environment)"


def test_start_up_objects_are_frozen_and_later_ones_are_walked() -> None:
    walked_before = len(gc.get_objects())
    try:
        frozen = freeze_startup_objects()
        later = [object()]  # a run's object, built after start-up
        walked = gc.get_objects()
        assert frozen >= walked_before > 0
        assert gc.get_freeze_count() == frozen
        assert len(walked) < walked_before / 10  # the collector no longer walks start-up
        assert any(o is later for o in walked)
    finally:
        gc.unfreeze()
    assert len(gc.get_objects()) >= walked_before
