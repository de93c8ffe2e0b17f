"""Wire the health store and response cache to Redis (or, opt-in, an embedded one).

:func:`connect_stores` is what the worker and the CLI call at start-up. It connects to
``redis_url`` (default: ``$REDIS_URL``, else ``redis://127.0.0.1:6379/0``). When nothing
answers there, what happens is explicit, never a silent substitute:

* ``if_unreachable="refuse"`` (default): :class:`RedisUnreachable`, one line naming the URL;
* ``if_unreachable="degraded"``: the Redis stores start in their local view (this worker's
  own breakers and windows, one warning, the ``failover.store.degraded`` metric, shown by
  ``failover status``) and write back once Redis answers;
* ``embedded_fallback=True`` (``failover dev`` / ``demo`` only) and no URL set anywhere:
  :class:`~stores.embedded_redis.EmbeddedRedis` on a free loopback port. An explicit
  ``REDIS_URL`` is never replaced by it; ``REDIS_URL=embedded`` asks for it by name
  (dev and demo only; a worker refuses it).

The returned :class:`Stores` owns whatever it started: ``await stores.close()`` closes
the clients and stops an embedded server.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import redis.asyncio as aioredis
from temporalio.converter import PayloadCodec

from agent_failover.resilience.setup_errors import RedisUnreachable
from agent_failover.stores.cache import DEFAULT_NAMESPACE, RedisResponseCache, ResponseCache
from agent_failover.stores.embedded_redis import EmbeddedRedis
from agent_failover.stores.health import HealthStore, RedisHealthStore
from agent_failover.stores.policies import DEFAULT_POLICY_TTL_S, PolicyVersionStore
from agent_failover.stores.redis_link import REDIS_DOWN, describe, fail_fast_client
from agent_failover.stores.redis_policies import RedisPolicyStore

log = logging.getLogger(__name__)

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: ``REDIS_URL`` value that asks ``failover dev`` / ``demo`` for their own embedded Redis.
EMBEDDED = "embedded"
#: What a worker does when its Redis does not answer at start (``FAILOVER_REDIS_UNREACHABLE``).
IfUnreachable = Literal["refuse", "degraded"]
IF_UNREACHABLE: tuple[str, ...] = ("refuse", "degraded")


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
    embedded_fallback: bool = False,
    if_unreachable: IfUnreachable | None = None,
    codec: PayloadCodec | None = None,
) -> Stores:
    """Connect to ``redis_url`` (or ``$REDIS_URL``, or the local default) and build the stores.

    ``codec`` (the workers' payload codec) seals the response cache's entries in Redis.
    When the server does not answer: see the module doc (``if_unreachable`` None reads
    ``FAILOVER_REDIS_UNREACHABLE``, default ``refuse``; ``embedded_fallback`` applies only
    when no URL was set).
    """
    explicit = redis_url or os.environ.get("REDIS_URL")
    mode = unreachable_mode(if_unreachable)
    if explicit == EMBEDDED:  # asked for by name: dev and demo only
        return await _embedded_by_name(namespace, codec, allowed=embedded_fallback)
    url = explicit or DEFAULT_REDIS_URL
    embedded = None
    probe = fail_fast_client(url)
    try:
        ok = await _reachable(probe)
    finally:
        await probe.aclose()
    if not ok and embedded_fallback and not explicit:
        embedded = await EmbeddedRedis().astart()
        log.warning("Redis at %s not reachable; started embedded %s", url, embedded.url)
        url = embedded.url
    elif not ok and mode == "refuse":
        raise _unreachable(url, redis_url)
    stores = _redis_stores(url, namespace, codec, embedded, shared_policies=ok or bool(embedded))
    if not ok and not embedded:
        log.warning(
            "Redis at %s is not reachable: degraded local-state mode (breakers, windows and "
            "budgets are this worker's own until Redis answers, then written back)",
            url,
        )
        # One call now, so the store enters its local view at once: the outage metric and
        # `failover status` show it from the start, not at the first model call.
        await stores.health.breaker("__startup__")
    return stores


def _unreachable(url: str, redis_url: str | None) -> RedisUnreachable:
    """The one-line refusal, naming the URL and where it came from."""
    env = os.environ.get("REDIS_URL")
    source = "REDIS_URL" if env and (redis_url or env) == env else "redis_url"
    if not redis_url and not env:
        source = "the default URL"
    return RedisUnreachable(
        f"Redis at {url} ({source}) is not reachable: start it or point REDIS_URL at one; "
        "FAILOVER_REDIS_UNREACHABLE=degraded starts with worker-local health state instead"
    )


async def _embedded_by_name(namespace: str, codec: PayloadCodec | None, *, allowed: bool) -> Stores:
    """``REDIS_URL=embedded``: an embedded server for dev and demo; refused elsewhere."""
    if not allowed:
        raise RedisUnreachable(
            f"REDIS_URL={EMBEDDED} starts a redis-server for `failover dev` / `demo` "
            "only: point REDIS_URL at a Redis for a worker"
        )
    embedded = await EmbeddedRedis().astart()
    log.info("started embedded %s (REDIS_URL=%s)", embedded.url, EMBEDDED)
    return _redis_stores(embedded.url, namespace, codec, embedded, shared_policies=True)


def unreachable_mode(value: str | None, env: Mapping[str, str] | None = None) -> IfUnreachable:
    """``value``, else ``FAILOVER_REDIS_UNREACHABLE``, else ``refuse``; ``ValueError`` if
    neither ``refuse`` nor ``degraded``."""
    raw = value or (os.environ if env is None else env).get("FAILOVER_REDIS_UNREACHABLE", "")
    raw = raw.strip().lower() or "refuse"
    if raw not in IF_UNREACHABLE:
        raise ValueError(
            f"FAILOVER_REDIS_UNREACHABLE / if_unreachable: expected 'refuse' or 'degraded', "
            f"got {raw!r}"
        )
    return raw  # type: ignore[return-value]


def _redis_stores(
    url: str,
    namespace: str,
    codec: PayloadCodec | None,
    embedded: EmbeddedRedis | None,
    *,
    shared_policies: bool,
) -> Stores:
    health_client = fail_fast_client(url)
    cache_client = fail_fast_client(url)
    backend = describe(health_client)
    # An embedded Redis dies with this process (and an unreachable one holds nothing):
    # policy versions then go to the directory.
    policies = (
        RedisPolicyStore(fail_fast_client(url), namespace=namespace, ttl_s=policy_ttl_s())
        if shared_policies and not embedded
        else None
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
