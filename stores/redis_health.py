"""The shared health store: running aggregates and breakers in Redis, for every worker.

Layout (``NS`` is the namespace; the literal braces around the route are a Redis
Cluster hash tag, so one route's keys share a slot and the Lua scripts may touch them
on a cluster; every key a script touches is passed in ``KEYS``):

* ``NS:h:{route}:s:<second>`` hash of the running aggregates of the outcomes that finished
  in that second (:mod:`resilience.aggregates`: counts ``c e s p`` and histogram bins
  ``l<bin>``/``t<bin>``), TTL ``horizon_s`` + 60 s. A window is the sum of its seconds,
  merged server-side in Lua, so the client parses a few dozen counters whatever the
  traffic: record and snapshot cost do not grow with calls per second.
* ``NS:h:{route}:m:<minute>`` hash latency bin -> count of the successful calls of that
  minute (the short baseline), same TTL.
* ``NS:h:{route}:n:<minute>`` set of the nonces recorded in that minute, so an outcome
  replayed after a Redis hiccup (its first write may have landed) is counted once.
* ``NS:h:{route}:r`` list of the newest observations (``at|latency|ok``), capped.
* ``NS:h:{route}:b``  hash ``{v: version, b: breaker JSON}``, no TTL: an open or
  forced breaker must not silently close because its key expired.
* ``NS:h:{route}:p``  hash ``{at, ok}`` of the last probe and ``c``, when the last real
  call finished (TTL ``ttl_s``).
* ``NS:h:{route}:base`` the route's baselines (JSON) and when they were computed (TTL ``ttl_s``).
* ``NS:h:{route}:lh:<hour>`` hash latency bin -> count of the successful real calls that
  finished in that hour (:mod:`resilience.baseline`), TTL 7 days + 2 hours: the rolling
  7-day baseline costs at most 170 small hashes per route.
* ``NS:h:{route}:cw`` the context window the provider stated in a rejection (TTL 30 days).
* ``NS:sla:<role>``   set of routes latency-demoted for the role; ``NS:slat:<role>`` hash
  route -> when the verdict last changed.

Concurrency: ``record`` increments the outcome's bucket and reads the breaker and the
two merged breaker windows in one Lua script (one round trip), lets
:mod:`resilience.breaker` decide, and persists a changed breaker with a Lua
compare-and-set on its version; a lost race re-reads and re-decides. So no outcome is
lost (the increment is unconditional) and a transition happens once (the second writer
sees the new state and ``on_outcome`` has nothing to do). ``admit``/``release_trial``/
``force`` use the same compare-and-set, which makes half-open trial slots atomic across
workers.

Redis loss: any ``ConnectionError``/``TimeoutError`` switches the store to a local
:class:`~stores.memory_health.MemoryHealthStore` seeded with the last state this process
read from Redis (breakers, facts, newest observations, and the last merged window as one
bucket); ``status()`` reports the outage, one warning is logged, and writes are queued
(bounded by ``max_pending``, oldest dropped and counted). At most every
``reconnect_interval_s`` the store pings Redis; once it answers, breakers Redis lost
(e.g. a restarted server without persistence) are restored from the local view, queued
outcomes are replayed through the normal record path (idempotently: each carries the
nonce of its first attempt; as non-trial outcomes: trial slots taken locally do not
exist in Redis), then forced states and SLA flags.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import redis.asyncio as aioredis

from agent_failover.resilience.aggregates import (
    baseline_bin,
    breaker_stats_from,
    bucket_fields,
    decode_recent,
    encode_recent,
    minute_buckets,
    minute_of,
    second_of,
    short_baseline_p95,
    window_seconds,
)
from agent_failover.resilience.baseline import (
    BUCKET_S,
    HORIZON_HOURS,
    LatencyBaseline,
    choose_baseline,
    completed_hours,
    feeds_baseline,
    hour_of,
    latency_bin,
    long_horizon_p95,
)
from agent_failover.resilience.breaker import (
    Admission,
    Breaker,
    IllegalTransition,
    Transition,
    admit,
    force,
    on_outcome,
    release_trial,
)
from agent_failover.resilience.config import MAX_SLA_STREAK, BreakerSettings
from agent_failover.resilience.contracts import (
    BreakerState,
    CallOutcome,
    HealthSnapshot,
    RouteHealth,
)
from agent_failover.resilience.windows import DEFAULT_HORIZON_S
from agent_failover.stores.memory_health import (
    DEFAULT_BASELINE_REFRESH_S,
    RECENT_KEPT,
    MemoryHealthStore,
    RouteFacts,
    breaker_window_s,
    route_health,
)
from agent_failover.stores.redis_link import DEFAULT_RECONNECT_INTERVAL_S, REDIS_DOWN, RedisLink
from agent_failover.stores.status import StoreStatus

DEFAULT_NAMESPACE = "failover"
DEFAULT_TTL_S = 3600.0
DEFAULT_MAX_PENDING = 2048
#: How long a learned context window is kept without being stated again.
CONTEXT_WINDOW_TTL_S = 30 * 86400.0
#: Hourly latency buckets live for the horizon plus a margin for the hour in progress.
_HOURLY_TTL_MS = int((HORIZON_HOURS + 2) * BUCKET_S * 1000)
#: Compare-and-set attempts before giving up; each failure means another worker changed
#: the breaker in between, so this only runs out under pathological contention.
MAX_CAS_ATTEMPTS = 64
_NONCE_LEN = 16
#: Aggregate buckets outlive the horizon by this margin (wall clock vs outcome time).
_BUCKET_TTL_MARGIN_S = 60.0

# KEYS[1] breaker hash; ARGV[1] expected version; ARGV[2] new version; ARGV[3] JSON.
# A missing hash has version 0, so expected=0 doubles as "set if absent".
_CAS_LUA = """
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'b', ARGV[3])
return 1
"""

# Server-side merging of aggregate buckets: the client gets one small flat array of
# summed counters per window instead of every bucket.
_MERGE_LUA = """
local function flat(acc)
  local out = {}
  for k, v in pairs(acc) do out[#out + 1] = k; out[#out + 1] = v end
  return out
end
-- Sum KEYS[first .. first+n-1] into two windows: the newest n1 and the newest n2 buckets.
local function merge2(first, n1, n2)
  local a, b = {}, {}
  for i = 0, math.max(n1, n2) - 1 do
    local f = redis.call('HGETALL', KEYS[first + i])
    for j = 1, #f, 2 do
      local v = tonumber(f[j + 1])
      if i < n1 then a[f[j]] = (a[f[j]] or 0) + v end
      if i < n2 then b[f[j]] = (b[f[j]] or 0) + v end
    end
  end
  return flat(a), flat(b)
end
"""

# Read one route for a snapshot. KEYS: breaker, probe, context window, recent list, then
# the window's second buckets. ARGV: how many recent entries to return.
# Returns {breaker JSON or nil, probe at, probe ok, last call at, context window,
#          recent entries, merged window}.
_READ_LUA = (
    _MERGE_LUA
    + """
local probe = redis.call('HMGET', KEYS[2], 'at', 'ok', 'c')
local n = #KEYS - 4
local w = merge2(5, n, 0)
return {redis.call('HGET', KEYS[1], 'b'), probe[1], probe[2], probe[3],
        redis.call('GET', KEYS[3]), redis.call('LRANGE', KEYS[4], 0, tonumber(ARGV[1]) - 1), w}
"""
)

# The breaker and its two windows. KEYS: breaker, then second buckets newest first.
# ARGV: buckets of the error window, of the semantic window.
_BREAKER_READ_LUA = (
    _MERGE_LUA
    + """
local e, s = merge2(2, tonumber(ARGV[1]), tonumber(ARGV[2]))
return {redis.call('HGET', KEYS[1], 'b'), e, s}
"""
)

# Sum all KEYS (the short baseline's minute buckets) into one flat array.
_SUM_LUA = (
    _MERGE_LUA
    + """
local a = merge2(1, #KEYS, 0)
return a
"""
)

# Every hourly bucket of the long horizon in one round trip. KEYS: the bucket hashes.
# Returns one flat {bin, count, ...} array per key.
_HOURLY_LUA = """
local out = {}
for i, k in ipairs(KEYS) do out[i] = redis.call('HGETALL', k) end
return out
"""

# Count one outcome and read what the breaker needs, atomically, in one round trip.
# KEYS: 1 breaker, 2 baseline, 3 probe, 4 hourly bucket, 5 minute bucket, 6 recent list,
#       7 nonce set of the minute, 8.. second buckets newest first (8 = the outcome's).
# ARGV: 1 at, 2 ttl ms, 3 is probe, 4 probe ok, 5 hourly bin or '', 6 hourly ttl ms,
#       7 minute bin or '', 8 bucket ttl ms, 9 recent entry or '', 10 recent cap,
#       11 error-window buckets, 12 semantic-window buckets, 13 nonce,
#       14.. field, increment pairs for the outcome's bucket.
# Returns {breaker JSON or nil, error window, semantic window, baseline or nil}.
_RECORD_LUA = (
    _MERGE_LUA
    + """
if redis.call('SADD', KEYS[7], ARGV[13]) == 1 then
  redis.call('PEXPIRE', KEYS[7], ARGV[8])
  for i = 14, #ARGV, 2 do redis.call('HINCRBY', KEYS[8], ARGV[i], ARGV[i + 1]) end
  if #ARGV >= 14 then redis.call('PEXPIRE', KEYS[8], ARGV[8]) end
  if ARGV[3] == '1' then
    redis.call('HSET', KEYS[3], 'at', ARGV[1], 'ok', ARGV[4])
  else
    local last = tonumber(redis.call('HGET', KEYS[3], 'c') or '-1')
    if tonumber(ARGV[1]) > last then redis.call('HSET', KEYS[3], 'c', ARGV[1]) end
  end
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
  if ARGV[5] ~= '' then
    redis.call('HINCRBY', KEYS[4], ARGV[5], 1)
    redis.call('PEXPIRE', KEYS[4], ARGV[6])
  end
  if ARGV[7] ~= '' then
    redis.call('HINCRBY', KEYS[5], ARGV[7], 1)
    redis.call('PEXPIRE', KEYS[5], ARGV[8])
  end
  if ARGV[9] ~= '' then
    redis.call('LPUSH', KEYS[6], ARGV[9])
    redis.call('LTRIM', KEYS[6], 0, tonumber(ARGV[10]) - 1)
    redis.call('PEXPIRE', KEYS[6], ARGV[2])
  end
end
local e, s = merge2(8, tonumber(ARGV[11]), tonumber(ARGV[12]))
return {redis.call('HGET', KEYS[1], 'b'), e, s, redis.call('GET', KEYS[2])}
"""
)


class StoreContentionError(RuntimeError):
    """A breaker compare-and-set kept losing races; the breaker was left unchanged."""


@dataclass(frozen=True)
class _PendingRecord:
    outcome: CallOutcome
    settings: BreakerSettings
    nonce: str


@dataclass(frozen=True)
class _PendingForce:
    route: str
    target: BreakerState | None
    now: float


@dataclass(frozen=True)
class _PendingSla:
    role: str
    route: str
    demoted: bool
    at: float | None


@dataclass(frozen=True)
class _PendingWindow:
    route: str
    tokens: int


_Pending = _PendingRecord | _PendingForce | _PendingSla | _PendingWindow


def _nonce() -> str:
    return os.urandom(_NONCE_LEN // 2).hex()


def _fields(flat: list[bytes]) -> dict[str, int]:
    """A flat ``[field, count, ...]`` array as returned by the merge scripts."""
    return {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}


def _parse_breaker(route: str, raw: bytes | None) -> Breaker:
    return Breaker.model_validate_json(raw) if raw else Breaker(route=route)


def _float(raw: bytes | None) -> float | None:
    return float(raw) if raw is not None else None


@dataclass(frozen=True)
class _RouteRead:
    """One route as ``_READ_LUA`` returns it, parsed."""

    breaker: Breaker
    window: dict[str, int]
    facts: RouteFacts
    recent: list[str]

    @classmethod
    def parse(cls, route: str, raw: list) -> _RouteRead:
        raw_b, p_at, p_ok, c_at, cw, recent, window = raw
        facts = RouteFacts(
            last_probe_at=_float(p_at),
            last_probe_ok=bool(int(p_ok)) if p_ok is not None else None,
            last_call_at=_float(c_at),
            context_window=int(cw) if cw is not None else None,
        )
        return cls(
            _parse_breaker(route, raw_b), _fields(window), facts, [e.decode() for e in recent]
        )


class RedisHealthStore:
    """A :class:`~stores.health.HealthStore` shared by all workers through Redis."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        ttl_s: float = DEFAULT_TTL_S,
        horizon_s: float = DEFAULT_HORIZON_S,
        baseline_refresh_s: float = DEFAULT_BASELINE_REFRESH_S,
        max_pending: int = DEFAULT_MAX_PENDING,
        reconnect_interval_s: float = DEFAULT_RECONNECT_INTERVAL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Use ``client`` (see :func:`stores.redis_link.fail_fast_client`) under ``namespace``.

        ``ttl_s`` must exceed ``horizon_s`` so a route's window outlives its samples;
        ``clock`` only paces reconnect attempts and stamps ``degraded_since``.
        """
        if ttl_s < horizon_s:
            raise ValueError(f"ttl_s ({ttl_s}) must be >= horizon_s ({horizon_s})")
        self._r = client
        self.namespace = namespace
        self.ttl_s = ttl_s
        self.horizon_s = horizon_s
        self.baseline_refresh_s = baseline_refresh_s
        self._ttl_ms = int(ttl_s * 1000)
        self._bucket_ttl_ms = int((horizon_s + _BUCKET_TTL_MARGIN_S) * 1000)
        self._cas = client.register_script(_CAS_LUA)
        self._read = client.register_script(_READ_LUA)
        self._breaker_read = client.register_script(_BREAKER_READ_LUA)
        self._sum = client.register_script(_SUM_LUA)
        self._append = client.register_script(_RECORD_LUA)
        self._hourly = client.register_script(_HOURLY_LUA)
        self._link = RedisLink(
            client,
            name=f"health store [{namespace}]",
            reconnect_interval_s=reconnect_interval_s,
            clock=clock,
        )
        self._pending: deque[_Pending] = deque(maxlen=max_pending)
        self._dropped = 0
        self._local: MemoryHealthStore | None = None
        # The last state read from Redis, to seed the local view if Redis goes away.
        self._seen_breakers: dict[str, Breaker] = {}
        self._seen_windows: dict[str, tuple[int, dict[str, int]]] = {}
        self._seen_recent: dict[str, list[str]] = {}
        self._seen_facts: dict[str, RouteFacts] = {}
        self._seen_sla: dict[str, tuple[set[str], dict[str, float]]] = {}

    # --- keys ---------------------------------------------------------------------------

    def _k(self, route: str, part: str) -> str:
        # The braces are a Redis Cluster hash tag: one route's keys share a slot, so the
        # scripts that touch several of them also work on a cluster.
        return f"{self.namespace}:h:{{{route}}}:{part}"

    def bucket_key(self, route: str, second: int) -> str:
        """The hash of ``route``'s aggregates for one second (for tests and operators)."""
        return self._k(route, f"s:{second}")

    def _bucket_keys(self, route: str, now: float, window_s: float) -> list[str]:
        return [self.bucket_key(route, s) for s in window_seconds(now, window_s, self.horizon_s)]

    def breaker_key(self, route: str) -> str:
        """The hash holding ``route``'s breaker."""
        return self._k(route, "b")

    def _sla_key(self, role: str) -> str:
        return f"{self.namespace}:sla:{role}"

    def _sla_since_key(self, role: str) -> str:
        return f"{self.namespace}:slat:{role}"

    def _hour_key(self, route: str, hour: int) -> str:
        return self._k(route, f"lh:{hour}")

    # --- degradation plumbing -----------------------------------------------------------

    async def _use_redis(self) -> bool:
        if not self._link.degraded:
            return True
        return await self._link.recover(self._resync)

    def _go_local(self, exc: BaseException) -> MemoryHealthStore:
        self._link.mark_down(exc)
        if self._local is None:
            local = MemoryHealthStore(
                horizon_s=self.horizon_s,
                baseline_refresh_s=self.baseline_refresh_s,
            )
            for route, b in self._seen_breakers.items():
                local.load_route(route, breaker=b)
            for route, window in self._seen_windows.items():
                local.load_route(route, window=window)
            for route, recent in self._seen_recent.items():
                # LRANGE returns newest first; the local deque appends oldest first.
                local.load_route(route, recent=reversed(recent))
            for route, facts in self._seen_facts.items():
                local.load_route(route, facts=facts)
            for role, (demoted, since) in self._seen_sla.items():
                local.load_sla(role, demoted, since)
            self._local = local
        return self._local

    def _queue(self, op: _Pending) -> None:
        if len(self._pending) == self._pending.maxlen:
            self._dropped += 1
        self._pending.append(op)

    async def _resync(self) -> None:
        """Push the local view back into Redis; raises REDIS_DOWN if Redis fails again."""
        local = self._local
        if local is not None:
            for route, b in local.breakers().items():
                if b.version > 0:
                    # Only where Redis has no breaker at all (a restarted, empty server):
                    # otherwise other workers kept Redis current and it wins.
                    args = [0, b.version, b.model_dump_json()]
                    await self._cas(keys=[self.breaker_key(route)], args=args)
            for route, tokens in local.context_windows().items():
                # NX: a window another worker learned meanwhile is as good as ours.
                ttl = int(CONTEXT_WINDOW_TTL_S * 1000)
                await self._r.set(self._k(route, "cw"), str(tokens), px=ttl, nx=True)
        while self._pending:
            op = self._pending[0]
            if isinstance(op, _PendingRecord):
                replay = op.outcome
                if replay.trial:
                    replay = replay.model_copy(update={"trial": False})
                await self._record_redis(replay, op.settings, op.nonce)
            elif isinstance(op, _PendingForce):
                try:
                    await self._force_redis(op.route, op.target, op.now)
                except IllegalTransition:
                    pass  # Redis already holds that state (another worker, or step one)
            elif isinstance(op, _PendingWindow):
                await self._learn_window_redis(op.route, op.tokens)
            else:
                await self._set_sla_redis(op.role, op.route, op.demoted, op.at)
            self._pending.popleft()
        self._local = None

    # --- record -------------------------------------------------------------------------

    async def record(self, outcome: CallOutcome, settings: BreakerSettings) -> Transition | None:
        """Append ``outcome`` and apply the breaker, atomically per route across workers."""
        nonce = _nonce()
        if await self._use_redis():
            try:
                return await self._record_redis(outcome, settings, nonce)
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        self._queue(_PendingRecord(outcome, settings, nonce))
        return await local.record(outcome, settings)

    def _local_view(self) -> MemoryHealthStore:
        assert self._local is not None, "degraded without a local view"
        return self._local

    async def _record_redis(
        self, outcome: CallOutcome, settings: BreakerSettings, nonce: str
    ) -> Transition | None:
        route, now = outcome.route, outcome.at
        n_err, n_sem, buckets = self._breaker_buckets(route, settings, now)
        hourly_bin = latency_bin(outcome.latency_ms) if feeds_baseline(outcome) else ""
        short_bin = baseline_bin(outcome)
        inc = [x for kv in bucket_fields(outcome).items() for x in kv]
        keys = [self._k(route, p) for p in ("b", "base", "p")] + [
            self._hour_key(route, hour_of(now)),
            self._k(route, f"m:{minute_of(now)}"),
            self._k(route, "r"),
            self._k(route, f"n:{minute_of(now)}"),
            *buckets,
        ]
        args = [
            repr(now),
            self._ttl_ms,
            int(outcome.probe),
            int(outcome.ok),
            hourly_bin,
            _HOURLY_TTL_MS,
            "" if short_bin is None else short_bin,
            self._bucket_ttl_ms,
            encode_recent(outcome),
            RECENT_KEPT,
            n_err,
            n_sem,
            nonce,
            *inc,
        ]
        raw_b, err_w, sem_w, raw_base = await self._append(keys=keys, args=args)
        self._remember_record(outcome)
        baseline = (await self._baseline(route, raw_base, settings.min_calls, now)).used_ms
        for _ in range(MAX_CAS_ATTEMPTS):
            current = _parse_breaker(route, raw_b)
            err, sem = _fields(err_w), _fields(sem_w)
            self._seen_windows[route] = (second_of(now), sem if n_sem >= n_err else err)
            stats = breaker_stats_from(err, sem, settings, baseline_p95_ms=baseline)
            new, transition = on_outcome(current, outcome, stats, settings, now)
            if new == current or await self._cas_write(keys[0], current, new):
                self._seen_breakers[route] = new
                return transition
            raw_b, err_w, sem_w = await self._breaker_read(
                keys=[keys[0], *buckets], args=[n_err, n_sem]
            )
        raise StoreContentionError(f"breaker {route!r}: {MAX_CAS_ATTEMPTS} lost compare-and-sets")

    def _breaker_buckets(
        self, route: str, settings: BreakerSettings, now: float
    ) -> tuple[int, int, list[str]]:
        """Bucket counts of the error and semantic windows and the longer one's keys."""
        n_err = len(window_seconds(now, settings.error_window_s, self.horizon_s))
        n_sem = len(window_seconds(now, settings.semantic_window_s, self.horizon_s))
        return n_err, n_sem, self._bucket_keys(route, now, breaker_window_s(settings))

    def _remember_record(self, outcome: CallOutcome) -> None:
        """Keep the probe / last-call facts this process wrote, for the local view."""
        f = self._seen_facts.get(outcome.route, RouteFacts())
        if outcome.probe:
            f = replace(f, last_probe_at=outcome.at, last_probe_ok=outcome.ok)
        elif f.last_call_at is None or outcome.at > f.last_call_at:
            f = replace(f, last_call_at=outcome.at)
        self._seen_facts[outcome.route] = f

    async def _baseline(
        self, route: str, raw: bytes | None, min_samples: int, now: float
    ) -> LatencyBaseline:
        """The route's baselines, recomputed from the horizon and the hourly buckets when stale."""
        if raw:
            value, _, at = raw.decode().rpartition("|")
            if value.startswith("{") and now - float(at) < self.baseline_refresh_s:
                # Anything else is the older bare-number encoding: recompute it.
                return LatencyBaseline.model_validate_json(value)
        minutes = [self._k(route, f"m:{m}") for m in minute_buckets(now, self.horizon_s)]
        short_hist = {int(k): n for k, n in _fields(await self._sum(keys=minutes)).items()}
        short = short_baseline_p95(short_hist, min_samples=min_samples)
        hours = list(completed_hours(now))
        flat = await self._hourly(keys=[self._hour_key(route, h) for h in hours])
        buckets = {
            h: {int(f[i]): int(f[i + 1]) for i in range(0, len(f), 2)}
            for h, f in zip(hours, flat, strict=True)
            if f
        }
        long, n = long_horizon_p95(buckets, now=now, min_samples=min_samples)
        baseline = choose_baseline(short, long, n)
        encoded = f"{baseline.model_dump_json()}|{now!r}"
        await self._r.set(self._k(route, "base"), encoded, px=self._ttl_ms)
        return baseline

    async def latency_baseline(
        self, route: str, *, now: float, min_samples: int
    ) -> LatencyBaseline:
        """The route's short and long-horizon baselines and the one slow calls compare to."""
        if await self._use_redis():
            try:
                return await self._baseline(route, None, min_samples, now)
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        return await local.latency_baseline(route, now=now, min_samples=min_samples)

    async def _cas_write(self, bkey: str, current: Breaker, new: Breaker) -> bool:
        return bool(
            await self._cas(keys=[bkey], args=[current.version, new.version, new.model_dump_json()])
        )

    async def _update(
        self, route: str, step: Callable[[Breaker], tuple[Breaker, object]]
    ) -> object:
        """Read the breaker, apply ``step``, compare-and-set; retry on a lost race."""
        bkey = self._k(route, "b")
        for _ in range(MAX_CAS_ATTEMPTS):
            current = _parse_breaker(route, await self._r.hget(bkey, "b"))
            new, result = step(current)
            if new == current or await self._cas_write(bkey, current, new):
                self._seen_breakers[route] = new
                return result
        raise StoreContentionError(f"breaker {route!r}: {MAX_CAS_ATTEMPTS} lost compare-and-sets")

    # --- breaker operations -------------------------------------------------------------

    async def admit(self, route: str, settings: BreakerSettings, now: float) -> Admission:
        """Ask the breaker; a half-open trial slot is taken by compare-and-set."""
        if await self._use_redis():
            try:
                return await self._admit_redis(route, settings, now)
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        return await local.admit(route, settings, now)

    async def _admit_redis(self, route: str, settings: BreakerSettings, now: float) -> Admission:
        def step(b: Breaker) -> tuple[Breaker, Admission]:
            new, admission, _ = admit(b, settings, now)
            return new, admission

        result = await self._update(route, step)
        assert isinstance(result, Admission)
        return result

    async def release_trial(self, route: str, now: float) -> None:
        """Give back a trial slot (locally only while degraded: Redis never saw it taken)."""
        if await self._use_redis():
            try:
                await self._update(route, lambda b: (release_trial(b, now), None))
                return
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        await local.release_trial(route, now)

    async def force(self, route: str, target: BreakerState | None, now: float) -> Transition:
        """Force or release the breaker; raises ``IllegalTransition`` for rejected moves."""
        if await self._use_redis():
            try:
                return await self._force_redis(route, target, now)
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        transition = await local.force(route, target, now)
        self._queue(_PendingForce(route, target, now))
        return transition

    async def _force_redis(self, route: str, target: BreakerState | None, now: float) -> Transition:
        result = await self._update(route, lambda b: force(b, target, now))
        assert isinstance(result, Transition)
        return result

    async def breaker(self, route: str) -> Breaker:
        """Return the route's breaker (CLOSED if never seen)."""
        if await self._use_redis():
            try:
                b = _parse_breaker(route, await self._r.hget(self._k(route, "b"), "b"))
                self._seen_breakers[route] = b
                return b
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        return await local.breaker(route)

    # --- snapshot and SLA ---------------------------------------------------------------

    async def snapshot(
        self,
        routes: Sequence[str],
        *,
        now: float,
        window_s: float,
        min_calls: int,
        role: str | None = None,
    ) -> HealthSnapshot:
        """Read all ``routes`` in one round trip; marks the snapshot if served locally."""
        if await self._use_redis():
            try:
                return await self._snapshot_redis(
                    routes, now=now, window_s=window_s, min_calls=min_calls, role=role
                )
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        snap = await local.snapshot(
            routes, now=now, window_s=window_s, min_calls=min_calls, role=role
        )
        return snap.model_copy(update={"store_degraded": True})

    async def _snapshot_redis(
        self,
        routes: Sequence[str],
        *,
        now: float,
        window_s: float,
        min_calls: int,
        role: str | None,
    ) -> HealthSnapshot:
        async with self._r.pipeline(transaction=False) as pipe:
            for route in routes:
                keys = [self._k(route, p) for p in ("b", "p", "cw", "r")]
                keys += self._bucket_keys(route, now, window_s)
                # Awaiting with client=pipe only queues the EVALSHA (scripts load on execute).
                await self._read(keys=keys, args=[RECENT_KEPT], client=pipe)
            if role is not None:
                pipe.smembers(self._sla_key(role))
                pipe.hgetall(self._sla_since_key(role))
            res = await pipe.execute()
        demoted: set[str] = set()
        since: dict[str, float] = {}
        if role is not None:
            demoted = {m.decode() for m in res[-2]}
            since = {k.decode(): float(v) for k, v in res[-1].items()}
            self._seen_sla[role] = (demoted, since)
        out: dict[str, RouteHealth] = {}
        for route, raw in zip(routes, res, strict=False):
            read = _RouteRead.parse(route, raw)
            self._seen_breakers[route] = read.breaker
            self._seen_windows[route] = (second_of(now), read.window)
            self._seen_recent[route] = read.recent
            self._seen_facts[route] = read.facts
            out[route] = route_health(
                route,
                read.breaker,
                read.window,
                window_s=window_s,
                min_calls=min_calls,
                sla=(route in demoted, since.get(route)),
                facts=read.facts,
                recent=decode_recent(read.recent, now=now, keep=MAX_SLA_STREAK),
            )
        return HealthSnapshot(taken_at=now, routes=out)

    async def set_sla_demoted(
        self, role: str, route: str, demoted: bool, *, at: float | None = None
    ) -> None:
        """Mark or clear the role's latency demotion of ``route`` for every worker."""
        if await self._use_redis():
            try:
                await self._set_sla_redis(role, route, demoted, at)
                return
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        await local.set_sla_demoted(role, route, demoted, at=at)
        self._queue(_PendingSla(role, route, demoted, at))

    async def _set_sla_redis(self, role: str, route: str, demoted: bool, at: float | None) -> None:
        seen, since = self._seen_sla.setdefault(role, (set(), {}))
        async with self._r.pipeline(transaction=True) as pipe:
            if demoted:
                pipe.sadd(self._sla_key(role), route)
            else:
                pipe.srem(self._sla_key(role), route)
            if at is not None:
                pipe.hset(self._sla_since_key(role), route, repr(at))
            await pipe.execute()
        if demoted:
            seen.add(route)
        else:
            seen.discard(route)
        if at is not None:
            since[route] = at

    async def learn_context_window(self, route: str, tokens: int, now: float) -> None:
        """Remember the window ``route``'s provider stated, for every worker."""
        if await self._use_redis():
            try:
                await self._learn_window_redis(route, tokens)
                return
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        await local.learn_context_window(route, tokens, now)
        self._queue(_PendingWindow(route, tokens))

    async def _learn_window_redis(self, route: str, tokens: int) -> None:
        await self._r.set(self._k(route, "cw"), str(tokens), px=int(CONTEXT_WINDOW_TTL_S * 1000))
        f = self._seen_facts.get(route, RouteFacts())
        self._seen_facts[route] = replace(f, context_window=tokens)

    # --- lifecycle ----------------------------------------------------------------------

    async def status(self) -> StoreStatus:
        """Report Redis reachability (trying to reconnect if due) and the replay backlog."""
        await self._use_redis()
        return self._link.status(pending=len(self._pending), dropped=self._dropped)

    async def close(self) -> None:
        """Close the Redis client's connections."""
        await self._r.aclose()
