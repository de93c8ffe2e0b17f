"""Policy versions in Redis, shared by every worker of a deployment (:mod:`stores.policies`).

Layout (``NS`` is the namespace): ``NS:policy:<ref>`` holds a version's JSON body with a
long TTL (:data:`~stores.policies.DEFAULT_POLICY_TTL_S`, configurable) that every ``put``
refreshes, so a version lives as long as some worker serves it, plus that TTL for the runs
still replaying it; ``NS:policies`` is the set of refs (an index, so loading needs no
``SCAN`` across a cluster's nodes), pruned of refs whose key expired when read.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from agent_failover.stores.policies import DEFAULT_POLICY_TTL_S, check_version
from agent_failover.stores.redis_link import describe


class RedisPolicyStore:
    """Content-addressed policy subsets in Redis (:class:`~stores.policies.PolicyVersionStore`)."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        namespace: str = "failover",
        ttl_s: float = DEFAULT_POLICY_TTL_S,
    ) -> None:
        if ttl_s <= 0:
            raise ValueError(f"policy version TTL must be > 0 s, got {ttl_s}")
        self._r = client
        self._ns = namespace
        self._ttl_ms = int(ttl_s * 1000)
        self.where = f"redis {describe(client)} namespace {namespace!r}"

    def _key(self, ref: str) -> str:
        return f"{self._ns}:policy:{ref}"

    @property
    def _index(self) -> str:
        return f"{self._ns}:policies"

    async def put(self, ref: str, body: str) -> None:
        check_version(ref, body)
        # SET with a fresh TTL either way: the body under a ref never changes.
        await self._r.set(self._key(ref), body, px=self._ttl_ms)
        await self._r.sadd(self._index, ref)
        await self._r.pexpire(self._index, self._ttl_ms)

    async def get(self, ref: str) -> str | None:
        raw = await self._r.get(self._key(ref))
        return raw.decode() if isinstance(raw, bytes) else raw

    async def all(self) -> dict[str, str]:
        members = await self._r.smembers(self._index)
        refs = sorted(r.decode() if isinstance(r, bytes) else r for r in members)
        out: dict[str, str] = {}
        gone: list[str] = []
        for ref in refs:  # one GET each: the keys may sit in different cluster slots
            body = await self.get(ref)
            if body is None:
                gone.append(ref)
            else:
                out[ref] = body
        if gone:
            await self._r.srem(self._index, *gone)
        return out

    async def close(self) -> None:
        await self._r.aclose()
