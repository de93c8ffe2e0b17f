"""Wire the health store and response cache to Redis, starting an embedded one if needed.

:func:`connect_stores` is what the worker and the CLI call at start-up. It connects to
``redis_url`` (default: ``$REDIS_URL``, else ``redis://127.0.0.1:6379/0``); if nothing
answers there it starts :class:`~stores.embedded_redis.EmbeddedRedis` on a free loopback
port, so a laptop demo needs no setup. The returned :class:`Stores` owns whatever it
started: ``await stores.close()`` closes the clients and stops an embedded server.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

import redis.asyncio as aioredis
from temporalio.converter import PayloadCodec

from agent_failover.stores.cache import DEFAULT_NAMESPACE, RedisResponseCache, ResponseCache
from agent_failover.stores.embedded_redis import EmbeddedRedis
from agent_failover.stores.health import HealthStore, RedisHealthStore
from agent_failover.stores.policies import DEFAULT_POLICY_TTL_S, PolicyVersionStore
from agent_failover.stores.redis_link import REDIS_DOWN, describe, fail_fast_client
from agent_failover.stores.redis_policies import RedisPolicyStore

log = logging.getLogger(__name__)

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass
class Stores:
    """The stores a worker uses, and the Redis they share."""

    health: HealthStore
    cache: ResponseCache
    backend: str  # e.g. "redis://127.0.0.1:6379/0" or "embedded redis://127.0.0.1:40123/0"
    embedded: EmbeddedRedis | None = None
    #: Where policy versions are kept (``stores.policies``); None: the worker uses the
    #: directory store (``FAILOVER_POLICY_DIR``).
    policies: PolicyVersionStore | None = None

    async def close(self) -> None:
        """Close the stores, then stop the embedded server if this handle started one."""
        try:
            await self.health.close()
            await self.cache.close()
            if self.policies is not None:
                await self.policies.close()
        finally:
            if self.embedded is not None:
                await self.embedded.astop()


async def _reachable(client: aioredis.Redis) -> bool:
    try:
        await client.ping()
    except REDIS_DOWN:
        return False
    return True


async def connect_stores(
    redis_url: str | None = None,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    embedded_fallback: bool = True,
    codec: PayloadCodec | None = None,
) -> Stores:
    """Connect to ``redis_url`` (or ``$REDIS_URL``, or the local default) and build the stores.

    ``codec`` (the workers' payload codec) seals the response cache's entries in Redis.

    If the server does not answer and ``embedded_fallback`` is true, start an embedded
    ``redis-server`` and use it instead (logged at WARNING: state is then not shared with
    workers on other hosts). Raises ``redis.exceptions.ConnectionError`` otherwise.
    """
    url = redis_url or os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
    embedded: EmbeddedRedis | None = None
    probe = fail_fast_client(url)
    try:
        ok = await _reachable(probe)
    finally:
        await probe.aclose()
    if not ok:
        if not embedded_fallback:
            raise aioredis.ConnectionError(f"Redis at {url} is not reachable")
        embedded = await EmbeddedRedis().astart()
        log.warning("Redis at %s not reachable; started embedded %s", url, embedded.url)
        url = embedded.url
    health_client = fail_fast_client(url)
    cache_client = fail_fast_client(url)
    backend = describe(health_client)
    # An embedded Redis dies with this process: policy versions then go to the directory.
    policies = (
        None
        if embedded
        else RedisPolicyStore(fail_fast_client(url), namespace=namespace, ttl_s=policy_ttl_s())
    )
    return Stores(
        health=RedisHealthStore(health_client, namespace=namespace),
        cache=RedisResponseCache(cache_client, namespace=namespace, codec=codec),
        backend=f"embedded {backend}" if embedded else backend,
        embedded=embedded,
        policies=policies,
    )


def env_seconds(
    name: str,
    default: float,
    *,
    low: float = 0.0,
    high: float = 86_400.0 * 3650,
    low_open: bool = False,
    env: Mapping[str, str] | None = None,
) -> float:
    """A duration in seconds from the environment: ``default`` when unset or blank.

    ``ValueError`` naming the variable, the accepted range and the value it got when the
    value is not a number or outside ``[low, high]`` (``(low, high]`` with ``low_open``).
    """
    raw = (os.environ if env is None else env).get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    above_low = value > low if low_open else value >= low
    if not (above_low and value <= high):
        bound = f"> {low:g}" if low_open else f"from {low:g} to {high:g}"
        raise ValueError(f"{name}: expected seconds {bound}, got {raw!r}")
    return value


def policy_ttl_s(env: Mapping[str, str] | None = None) -> float:
    """``FAILOVER_POLICY_TTL_S`` (seconds > 0), default 30 days; ``ValueError`` if invalid."""
    return env_seconds("FAILOVER_POLICY_TTL_S", DEFAULT_POLICY_TTL_S, low_open=True, env=env)
