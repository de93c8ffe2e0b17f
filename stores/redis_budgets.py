"""Rate-budget buckets in Redis, shared by every worker (:class:`stores.budgets.ScopeBackend`).

Layout: one hash per scope, ``NS:rb:{<scope>}`` (the braces are a Redis Cluster hash tag:
each script touches exactly that one declared key), fields ``<unit>:l`` (level) and
``<unit>:t`` (when the level was last written) for ``requests`` and ``tokens``. Levels are
written as ``%.17g`` strings, so Lua's doubles and Python's floats run the same arithmetic
(:mod:`resilience.budget`) bit for bit. A hash expires once every bucket in it would have
refilled (plus a margin): an expired scope reads as full, which is exactly its state.

A take refills and checks every bucket of the scope, and writes only if all of them
grant (atomic per scope); ``now`` comes from the caller (the workflow's clock), never the
server's, like every other timestamp in the health store.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis

from agent_failover.resilience.budget import (
    WINDOW_S,
    Bucket,
    BucketLevel,
    BucketState,
    Scope,
    Take,
    TakeResult,
    refill,
)

#: Margin on a scope hash's TTL beyond the time its buckets need to refill.
_TTL_MARGIN_MS = 5000

_COMMON_LUA = """
local function num(s) if s then return tonumber(s) end return nil end
local function fmt(x) return string.format('%.17g', x) end
-- Refill one bucket to now: returns level, at (a missing bucket is full).
local function refill(key, unit, cap, now)
  local l = num(redis.call('HGET', key, unit .. ':l'))
  local t = num(redis.call('HGET', key, unit .. ':t'))
  if l == nil or t == nil then return cap, now end
  local dt = now - t
  if dt < 0 then dt = 0 end
  l = math.min(cap, l + dt * (cap / @WINDOW@))
  if now > t then t = now end
  return l, t
end
-- Keep the hash until its emptiest bucket has refilled.
local function expire(key, pairs_)
  local ms = 0
  for _, p in ipairs(pairs_) do
    local need = (p[2] - p[1]) / (p[2] / @WINDOW@) * 1000
    if need > ms then ms = need end
  end
  redis.call('PEXPIRE', key, math.ceil(ms) + @MARGIN@)
end
""".replace("@WINDOW@", repr(WINDOW_S)).replace("@MARGIN@", str(_TTL_MARGIN_MS))

# KEYS[1] scope hash. ARGV: now, critical (0/1), n, then n x (unit, capacity, reserve, cost).
# Returns {granted 0/1, wait seconds, then n x (level, at)} as strings.
_TAKE_LUA = (
    _COMMON_LUA
    + """
local now = tonumber(ARGV[1])
local critical = ARGV[2] == '1'
local n = tonumber(ARGV[3])
local lv, at, longest = {}, {}, 0
for i = 1, n do
  local o = 3 + (i - 1) * 4
  local cap, res, cost = tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4])
  lv[i], at[i] = refill(KEYS[1], ARGV[o + 1], cap, now)
  local floor = res
  if critical then floor = 0 end
  local short = floor + math.min(cost, cap - floor) - lv[i]
  if short > 1e-9 then
    local w = short / (cap / @WINDOW@)
    if w > longest then longest = w end
  end
end
local out = {'0', fmt(longest)}
local granted = longest == 0
if granted then
  out[1] = '1'
  local caps = {}
  for i = 1, n do
    local o = 3 + (i - 1) * 4
    lv[i] = lv[i] - tonumber(ARGV[o + 4])
    redis.call('HSET', KEYS[1], ARGV[o + 1] .. ':l', fmt(lv[i]), ARGV[o + 1] .. ':t', fmt(at[i]))
    caps[i] = {lv[i], tonumber(ARGV[o + 2])}
  end
  expire(KEYS[1], caps)
end
for i = 1, n do out[#out + 1] = fmt(lv[i]); out[#out + 1] = fmt(at[i]) end
return out
""".replace("@WINDOW@", repr(WINDOW_S))
)

# KEYS[1] scope hash. ARGV: now, n, then n x (unit, capacity, delta). Charges delta
# (negative gives back) after refilling, capped at capacity.
_ADJUST_LUA = (
    _COMMON_LUA
    + """
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local caps = {}
for i = 1, n do
  local o = 2 + (i - 1) * 3
  local cap = tonumber(ARGV[o + 2])
  local l, t = refill(KEYS[1], ARGV[o + 1], cap, now)
  l = math.min(cap, l - tonumber(ARGV[o + 3]))
  redis.call('HSET', KEYS[1], ARGV[o + 1] .. ':l', fmt(l), ARGV[o + 1] .. ':t', fmt(t))
  caps[i] = {l, cap}
end
expire(KEYS[1], caps)
return 1
"""
)


def _f(x: float) -> str:
    return repr(float(x))


class RedisBudgets:
    """Per-scope bucket primitives in Redis (standalone, Sentinel or Cluster)."""

    def __init__(self, client: aioredis.Redis, *, namespace: str) -> None:
        self._r = client
        self.namespace = namespace
        self._take = client.register_script(_TAKE_LUA)
        self._adjust = client.register_script(_ADJUST_LUA)

    def key(self, scope: str) -> str:
        """The hash holding ``scope``'s buckets."""
        return f"{self.namespace}:rb:{{{scope}}}"

    async def take_scope(
        self, scope: str, takes: list[Take], *, critical: bool, now: float
    ) -> TakeResult:
        args: list[str | int] = [_f(now), int(critical), len(takes)]
        for t in takes:
            args += [t.bucket.unit.value, _f(t.bucket.capacity), _f(t.bucket.reserve), _f(t.cost)]
        raw = await self._take(keys=[self.key(scope)], args=args)
        states = [
            BucketState(level=float(raw[i]), at=float(raw[i + 1])) for i in range(2, len(raw), 2)
        ]
        return TakeResult(granted=raw[0] == b"1", wait_s=float(raw[1]), states=states)

    async def adjust_scope(
        self, scope: str, adjusts: list[tuple[Bucket, float]], now: float
    ) -> None:
        args: list[str | int] = [_f(now), len(adjusts)]
        for bucket, delta in adjusts:
            args += [bucket.unit.value, _f(bucket.capacity), _f(delta)]
        await self._adjust(keys=[self.key(scope)], args=args)

    async def read_scopes(self, scopes: Sequence[Scope], now: float) -> list[BucketLevel]:
        async with self._r.pipeline(transaction=False) as pipe:
            for scope in scopes:
                pipe.hgetall(self.key(scope.name))
            raw = await pipe.execute()
        out = []
        for scope, fields in zip(scopes, raw, strict=True):
            f = {k.decode(): float(v) for k, v in fields.items()}
            for b in scope.buckets:
                u = b.unit.value
                stored = (
                    BucketState(level=f[f"{u}:l"], at=f[f"{u}:t"])
                    if f"{u}:l" in f and f"{u}:t" in f
                    else None
                )
                state = refill(b, stored, now)
                out.append(BucketLevel(scope=scope.name, bucket=b, level=state.level, at=state.at))
        return out
