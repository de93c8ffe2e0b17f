"""The shared health store: running aggregates and breakers in Redis, for every worker.

Layout (``NS`` is the namespace; the literal braces around the route are a Redis
Cluster hash tag, so one route's keys share a slot and the Lua scripts may touch them
on a cluster; every key a script touches is passed in ``KEYS``):

* ``NS:h:{route}:s:<second>`` hash of the counts of the outcomes that finished in that
  second (:mod:`resilience.aggregates`: ``c e s p``), and ``NS:h:{route}:h:<tens>`` hash
  of their latency and TTFT bins (``l<bin>``/``t<bin>``) per ten seconds; TTL
  ``horizon_s`` + 60 s. A window is the sum of its buckets, merged server-side in Lua, so
  the client parses a few dozen counters whatever the traffic: record and snapshot cost
  do not grow with calls per second.
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
* ``NS:h:{route}:q:<role>`` list of the route's newest shadow-evaluation samples for the
  role (``at|score``, oldest first, capped at ``MAX_QUALITY_SAMPLES``; TTL ``ttl_s``), and
  ``NS:h:{route}:qr`` hash role -> ``regressed|since|delta``, the quality verdict (no TTL,
  like the breaker: a regression must not silently lift because a key expired).

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

import asyncio
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from agent_failover.resilience.aggregates import (
    baseline_bin,
    breaker_epoch,
    breaker_stats_from,
    bucket_fields,
    decode_recent,
    encode_recent,
    hist_buckets,
    minute_buckets,
    minute_of,
    second_of,
    short_baseline_p95,
    split_fields,
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
from agent_failover.resilience.budget import BucketLevel, Scope
from agent_failover.resilience.config import MAX_QUALITY_SAMPLES, MAX_SLA_STREAK, BreakerSettings
from agent_failover.resilience.contracts import (
    BreakerState,
    CallOutcome,
    HealthSnapshot,
    RouteHealth,
)
from agent_failover.resilience.shadow import QualitySample, QualityState
from agent_failover.resilience.windows import DEFAULT_HORIZON_S
from agent_failover.stores.budgets import BudgetBuckets, BudgetGrant
from agent_failover.stores.memory_health import (
    DEFAULT_BASELINE_REFRESH_S,
    RECENT_KEPT,
    MemoryHealthStore,
    RouteFacts,
    route_health,
)
from agent_failover.stores.redis_budgets import RedisBudgets
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

# Server-side merging of aggregate buckets: the client gets one small string of summed
# counters per window instead of every bucket. Every script declares the route's breaker
# key (KEYS[1]) and derives the route's other keys from ARGV[1], its key prefix
# ``NS:h:{route}:``: they share the hash tag, so they are in the declared key's slot and
# the scripts run on Redis Cluster, while a call sends a few short arguments instead of
# one key name per second of window.
_MERGE_LUA = """
-- One "field=count,field=count" bulk string: the client splits it in one call instead of
-- parsing hundreds of RESP elements in Python (the pure-Python parser costs ~10 us each).
local function flat(acc)
  local out = {}
  for k, v in pairs(acc) do out[#out + 1] = k .. '=' .. v end
  return table.concat(out, ',')
end
-- Sum the buckets prefix..part..(newest - i) for i < max(n1, n2) into two windows: the
-- newest n1 and the newest n2 buckets.
local function merge2(prefix, part, newest, n1, n2)
  local a, b = {}, {}
  for i = 0, math.max(n1, n2) - 1 do
    local f = redis.call('HGETALL', prefix .. part .. (newest - i))
    for j = 1, #f, 2 do
      local v = tonumber(f[j + 1])
      if i < n1 then a[f[j]] = (a[f[j]] or 0) + v end
      if i < n2 then b[f[j]] = (b[f[j]] or 0) + v end
    end
  end
  return flat(a), flat(b)
end
"""

# Read one route for a snapshot. KEYS: breaker. ARGV: prefix, newest second, seconds in
# the window, how many recent entries to return, newest histogram bucket, how many.
# Returns {breaker JSON or nil, probe at, probe ok, last call at, context window,
#          recent entries joined by ';', merged counts, merged histograms}.
_READ_LUA = (
    _MERGE_LUA
    + """
local p = ARGV[1]
local probe = redis.call('HMGET', p .. 'p', 'at', 'ok', 'c')
local w = merge2(p, 's:', tonumber(ARGV[2]), tonumber(ARGV[3]), 0)
local recent = redis.call('LRANGE', p .. 'r', 0, tonumber(ARGV[4]) - 1)
local h = merge2(p, 'h:', tonumber(ARGV[5]), tonumber(ARGV[6]), 0)
return {redis.call('HGET', KEYS[1], 'b'), probe[1], probe[2], probe[3],
        redis.call('GET', p .. 'cw'), table.concat(recent, ';'), w, h}
"""
)

# The breaker and its two windows. KEYS: breaker. ARGV: prefix, newest second, seconds of
# the error window, of the semantic window, newest histogram bucket, how many.
_BREAKER_READ_LUA = (
    _MERGE_LUA
    + """
local e, s = merge2(ARGV[1], 's:', tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]))
local h = merge2(ARGV[1], 'h:', tonumber(ARGV[5]), tonumber(ARGV[6]), 0)
return {redis.call('HGET', KEYS[1], 'b'), e, s, h}
"""
)

# The short baseline's minute buckets summed. KEYS: breaker. ARGV: prefix, newest minute,
# how many minutes.
_SUM_LUA = (
    _MERGE_LUA
    + """
local a = merge2(ARGV[1], 'm:', tonumber(ARGV[2]), tonumber(ARGV[3]), 0)
return a
"""
)

# Every hourly bucket of the long horizon in one round trip (run at most every
# baseline_refresh_s). KEYS: the bucket hashes. Returns one "bin=count,..." string per key.
_HOURLY_LUA = (
    _MERGE_LUA
    + """
local out = {}
for i, k in ipairs(KEYS) do
  local f = redis.call('HGETALL', k)
  local acc = {}
  for j = 1, #f, 2 do acc[f[j]] = f[j + 1] end
  out[i] = flat(acc)
end
return out
"""
)

# Count one outcome and read what the breaker needs, atomically, in one round trip.
# KEYS: breaker. ARGV: 1 prefix, 2 at, 3 ttl ms, 4 is probe, 5 probe ok, 6 hour,
#   7 hourly bin or '', 8 hourly ttl ms, 9 minute, 10 minute bin or '', 11 bucket ttl ms,
#   12 recent entry or '', 13 recent cap, 14 second, 15 error-window seconds,
#   16 semantic-window seconds, 17 nonce, 18 histogram bucket, 19 histogram buckets of
#   the error window, 20 how many count pairs follow, 21.. field, increment pairs: the
#   counts for the second's bucket, then the bins for the histogram bucket.
# Returns {breaker JSON or nil, error-window counts, semantic-window counts,
#          error-window histograms, baseline or nil}.
_RECORD_LUA = (
    _MERGE_LUA
    + """
local p = ARGV[1]
local nonces = p .. 'n:' .. ARGV[9]
if redis.call('SADD', nonces, ARGV[17]) == 1 then
  redis.call('PEXPIRE', nonces, ARGV[11])
  local split = 21 + 2 * tonumber(ARGV[20])
  if split > 21 then
    local bucket = p .. 's:' .. ARGV[14]
    for i = 21, split - 1, 2 do redis.call('HINCRBY', bucket, ARGV[i], ARGV[i + 1]) end
    redis.call('PEXPIRE', bucket, ARGV[11])
  end
  if #ARGV >= split then
    local hist = p .. 'h:' .. ARGV[18]
    for i = split, #ARGV, 2 do redis.call('HINCRBY', hist, ARGV[i], ARGV[i + 1]) end
    redis.call('PEXPIRE', hist, ARGV[11])
  end
  if ARGV[4] == '1' then
    redis.call('HSET', p .. 'p', 'at', ARGV[2], 'ok', ARGV[5])
  else
    local last = tonumber(redis.call('HGET', p .. 'p', 'c') or '-1')
    if tonumber(ARGV[2]) > last then redis.call('HSET', p .. 'p', 'c', ARGV[2]) end
  end
  redis.call('PEXPIRE', p .. 'p', ARGV[3])
  if ARGV[7] ~= '' then
    redis.call('HINCRBY', p .. 'lh:' .. ARGV[6], ARGV[7], 1)
    redis.call('PEXPIRE', p .. 'lh:' .. ARGV[6], ARGV[8])
  end
  if ARGV[10] ~= '' then
    redis.call('HINCRBY', p .. 'm:' .. ARGV[9], ARGV[10], 1)
    redis.call('PEXPIRE', p .. 'm:' .. ARGV[9], ARGV[11])
  end
  if ARGV[12] ~= '' then
    redis.call('LPUSH', p .. 'r', ARGV[12])
    redis.call('LTRIM', p .. 'r', 0, tonumber(ARGV[13]) - 1)
    redis.call('PEXPIRE', p .. 'r', ARGV[3])
  end
end
local e, s = merge2(p, 's:', tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16]))
local h = merge2(p, 'h:', tonumber(ARGV[18]), tonumber(ARGV[19]), 0)
return {redis.call('HGET', KEYS[1], 'b'), e, s, h, redis.call('GET', p .. 'base')}
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


@dataclass(frozen=True)
class _PendingQuality:
    role: str
    route: str
    sample: QualitySample | None  # a sample to append, or None: a verdict to write
    verdict: tuple[bool, float, float | None] | None = None


_Pending = _PendingRecord | _PendingForce | _PendingSla | _PendingWindow | _PendingQuality


def _encode_verdict(regressed: bool, since: float, delta: float | None) -> str:
    return f"{int(regressed)}|{since!r}|{'' if delta is None else repr(delta)}"


def _decode_verdict(raw: bytes | None) -> QualityState | None:
    if not raw:
        return None
    flag, since, delta = raw.decode().split("|")
    return QualityState(
        regressed=flag == "1", since=float(since), delta=float(delta) if delta else None
    )


def _nonce() -> str:
    return os.urandom(_NONCE_LEN // 2).hex()


def _fields(blob: bytes) -> dict[str, int]:
    """A merged window as the merge scripts return it: ``b"c=3,e=1,l120=2"``."""
    if not blob:
        return {}
    out = {}
    for kv in blob.decode().split(","):
        k, _, v = kv.partition("=")
        out[k] = int(v)
    return out


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
        raw_b, p_at, p_ok, c_at, cw, recent, counts, hists = raw
        entries = recent.decode().split(";") if recent else []
        facts = RouteFacts(
            last_probe_at=_float(p_at),
            last_probe_ok=bool(int(p_ok)) if p_ok is not None else None,
            last_call_at=_float(c_at),
            context_window=int(cw) if cw is not None else None,
        )
        window = _fields(counts) | _fields(hists)
        return cls(_parse_breaker(route, raw_b), window, facts, entries)


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
        self._budgets = BudgetBuckets(RedisBudgets(client, namespace=namespace))
        self._cluster = isinstance(client, RedisCluster)
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
        self._seen_quality: dict[tuple[str, str], QualityState] = {}

    # --- keys ---------------------------------------------------------------------------

    def _k(self, route: str, part: str) -> str:
        # The braces are a Redis Cluster hash tag: one route's keys share a slot, so the
        # scripts that touch several of them also work on a cluster.
        return f"{self.namespace}:h:{{{route}}}:{part}"

    def bucket_key(self, route: str, second: int) -> str:
        """The hash of ``route``'s aggregates for one second (for tests and operators)."""
        return self._k(route, f"s:{second}")

    def breaker_key(self, route: str) -> str:
        """The hash holding ``route``'s breaker."""
        return self._k(route, "b")

    def _sla_key(self, role: str) -> str:
        return f"{self.namespace}:sla:{role}"

    def _sla_since_key(self, role: str) -> str:
        return f"{self.namespace}:slat:{role}"

    def quality_key(self, route: str, role: str) -> str:
        """The list of ``route``'s shadow samples for ``role`` (for tests and operators)."""
        return self._k(route, f"q:{role}")

    def quality_verdict_key(self, route: str) -> str:
        """The hash role -> quality verdict of ``route``."""
        return self._k(route, "qr")

    def _hour_key(self, route: str, hour: int) -> str:
        return self._k(route, f"lh:{hour}")

    # --- degradation plumbing -----------------------------------------------------------

    async def _use_redis(self) -> bool:
        if not self._link.degraded:
            try:
                await self._link.ready()
            except REDIS_DOWN as exc:
                self._go_local(exc)
                return False
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
            for (role, route), state in self._seen_quality.items():
                local.load_quality(role, route, state)
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
            elif isinstance(op, _PendingQuality):
                await self._quality_write_redis(op)
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
        n_err = len(window_seconds(now, settings.error_window_s, self.horizon_s))
        n_sem = len(window_seconds(now, settings.semantic_window_s, self.horizon_s))
        hists = hist_buckets(now, settings.error_window_s, self.horizon_s)
        counts, bins = split_fields(bucket_fields(outcome))
        hourly_bin = latency_bin(outcome.latency_ms) if feeds_baseline(outcome) else ""
        short_bin = baseline_bin(outcome)
        bkey, prefix = self.breaker_key(route), self._k(route, "")
        args = [
            prefix,
            repr(now),
            self._ttl_ms,
            int(outcome.probe),
            int(outcome.ok),
            hour_of(now),
            hourly_bin,
            _HOURLY_TTL_MS,
            minute_of(now),
            "" if short_bin is None else short_bin,
            self._bucket_ttl_ms,
            encode_recent(outcome),
            RECENT_KEPT,
            second_of(now),
            n_err,
            n_sem,
            nonce,
            hists.start,
            len(hists),
            len(counts),
            *(x for kv in counts.items() for x in kv),
            *(x for kv in bins.items() for x in kv),
        ]
        raw_b, err_w, sem_w, hist_w, raw_base = await self._append(keys=[bkey], args=args)
        self._remember_record(outcome)
        baseline = (await self._baseline(route, raw_base, settings.min_calls, now)).used_ms
        for _ in range(MAX_CAS_ATTEMPTS):
            current = _parse_breaker(route, raw_b)
            epoch = breaker_epoch(current.state, current.since)
            if epoch is not None and epoch > now - max(
                settings.error_window_s, settings.semantic_window_s
            ):
                # Closed inside the window: only what came after counts (rare, so a
                # second read rather than the breaker's epoch in every record).
                raw_b, err_w, sem_w, hist_w = await self._breaker_read(
                    keys=[bkey], args=[prefix, *self._epoch_args(now, settings, epoch)]
                )
                current = _parse_breaker(route, raw_b)
            err, sem = _fields(err_w) | _fields(hist_w), _fields(sem_w)
            self._seen_windows[route] = (second_of(now), sem if n_sem >= n_err else err)
            stats = breaker_stats_from(err, sem, settings, baseline_p95_ms=baseline)
            new, transition = on_outcome(current, outcome, stats, settings, now)
            if new == current or await self._cas_write(bkey, current, new):
                self._seen_breakers[route] = new
                return transition
            raw_b, err_w, sem_w, hist_w = await self._breaker_read(
                keys=[bkey], args=[prefix, second_of(now), n_err, n_sem, hists.start, len(hists)]
            )
        raise StoreContentionError(f"breaker {route!r}: {MAX_CAS_ATTEMPTS} lost compare-and-sets")

    def _epoch_args(self, now: float, settings: BreakerSettings, epoch: float) -> list[int]:
        """_BREAKER_READ_LUA's window arguments, counting only what came after ``epoch``."""
        h = self.horizon_s
        hists = hist_buckets(now, settings.error_window_s, h, epoch)
        return [
            second_of(now),
            len(window_seconds(now, settings.error_window_s, h, epoch)),
            len(window_seconds(now, settings.semantic_window_s, h, epoch)),
            hists.start,
            len(hists),
        ]

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
        minutes = minute_buckets(now, self.horizon_s)
        args = [self._k(route, ""), minutes.start, len(minutes)]
        summed = await self._sum(keys=[self.breaker_key(route)], args=args)
        short_hist = {int(k): n for k, n in _fields(summed).items()}
        short = short_baseline_p95(short_hist, min_samples=min_samples)
        hours = list(completed_hours(now))
        flat = await self._hourly(keys=[self._hour_key(route, h) for h in hours])
        buckets = {
            h: {int(b): n for b, n in _fields(f).items()}
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
        res = await self._read_routes(routes, now=now, window_s=window_s, role=role)
        demoted: set[str] = set()
        since: dict[str, float] = {}
        quality: dict[str, QualityState] = {}
        if role is not None:
            n = len(routes)
            demoted = {m.decode() for m in res[n]}
            since = {k.decode(): float(v) for k, v in res[n + 1].items()}
            self._seen_sla[role] = (demoted, since)
            for route, raw_q in zip(routes, res[n + 2 :], strict=True):
                if (state := _decode_verdict(raw_q)) is not None:
                    quality[route] = self._seen_quality[(role, route)] = state
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
                quality=quality.get(route),
            )
        return HealthSnapshot(taken_at=now, routes=out)

    async def _read_routes(
        self, routes: Sequence[str], *, now: float, window_s: float, role: str | None
    ) -> list:
        """``_READ_LUA`` per route, then the role's SLA set and times and each route's
        quality verdict for the role, in one round trip.

        On Redis Cluster scripts cannot be pipelined (redis-py blocks it): the per-route
        reads run concurrently instead, each sent to its route's slot.
        """
        n = len(window_seconds(now, window_s, self.horizon_s))
        hists = hist_buckets(now, window_s, self.horizon_s)

        def args(route: str) -> list:
            return [self._k(route, ""), second_of(now), n, RECENT_KEPT, hists.start, len(hists)]

        if self._cluster:
            reads = [self._read(keys=[self.breaker_key(r)], args=args(r)) for r in routes]
            if role is not None:
                reads += [self._r.smembers(self._sla_key(role))]
                reads += [self._r.hgetall(self._sla_since_key(role))]
                reads += [self._r.hget(self.quality_verdict_key(r), role) for r in routes]
            return list(await asyncio.gather(*reads))
        async with self._r.pipeline(transaction=False) as pipe:
            for route in routes:
                # Awaiting with client=pipe only queues the EVALSHA (scripts load on execute).
                await self._read(keys=[self.breaker_key(route)], args=args(route), client=pipe)
            if role is not None:
                pipe.smembers(self._sla_key(role))
                pipe.hgetall(self._sla_since_key(role))
                for route in routes:
                    pipe.hget(self.quality_verdict_key(route), role)
            return await pipe.execute()

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
        # The set and the times are two slots on a cluster, where MULTI cannot span them.
        async with self._r.pipeline(transaction=not self._cluster) as pipe:
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

    # --- shadow evaluation ----------------------------------------------------------------

    async def record_quality(self, role: str, route: str, sample: QualitySample) -> None:
        """Append one shadow sample of ``route`` for ``role``, for every worker."""
        await self._quality_write(_PendingQuality(role, route, sample))

    async def set_quality_regressed(
        self, role: str, route: str, regressed: bool, *, at: float, delta: float | None = None
    ) -> None:
        """Mark or clear ``route`` as quality-regressed for ``role``, for every worker."""
        await self._quality_write(_PendingQuality(role, route, None, (regressed, at, delta)))

    async def _quality_write(self, op: _PendingQuality) -> None:
        if await self._use_redis():
            try:
                await self._quality_write_redis(op)
                return
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        if op.sample is not None:
            await local.record_quality(op.role, op.route, op.sample)
        elif op.verdict is not None:
            regressed, at, delta = op.verdict
            await local.set_quality_regressed(op.role, op.route, regressed, at=at, delta=delta)
        self._queue(op)

    async def _quality_write_redis(self, op: _PendingQuality) -> None:
        if op.sample is not None:
            key = self.quality_key(op.route, op.role)
            # One key, one slot; redis-py's cluster pipeline takes no MULTI, so plain there.
            async with self._r.pipeline(transaction=not self._cluster) as pipe:
                pipe.rpush(key, op.sample.encode())
                pipe.ltrim(key, -MAX_QUALITY_SAMPLES, -1)
                pipe.pexpire(key, self._ttl_ms)
                await pipe.execute()
            return
        assert op.verdict is not None
        regressed, at, delta = op.verdict
        raw = _encode_verdict(regressed, at, delta)
        await self._r.hset(self.quality_verdict_key(op.route), op.role, raw)
        self._seen_quality[(op.role, op.route)] = QualityState(
            regressed=regressed, since=at, delta=delta
        )

    async def quality(self, role: str, route: str) -> QualityState:
        """The route's shadow samples for ``role`` (oldest first) and its quality verdict."""
        if await self._use_redis():
            try:
                async with self._r.pipeline(transaction=False) as pipe:
                    pipe.lrange(self.quality_key(route, role), 0, -1)
                    pipe.hget(self.quality_verdict_key(route), role)
                    raw_samples, raw_verdict = await pipe.execute()
                state = _decode_verdict(raw_verdict) or QualityState()
                state.samples = [QualitySample.decode(x.decode()) for x in raw_samples]
                return state
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        return await local.quality(role, route)

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

    # --- rate budgets (stores.budgets) -------------------------------------------------
    # Buckets are not replayed after an outage: while Redis is away each worker enforces
    # every budget alone in its local view (so N workers may together use up to N times
    # it), and once Redis is back the shared buckets, which refilled meanwhile, take over.

    async def take_budget(
        self, scopes: Sequence[Scope], tokens: int, *, critical: bool, now: float
    ) -> BudgetGrant:
        """Reserve one request and ``tokens`` from every scope for all workers, or nothing."""
        if await self._use_redis():
            try:
                return await self._budgets.take(scopes, tokens, critical=critical, now=now)
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        return await local.take_budget(scopes, tokens, critical=critical, now=now)

    async def settle_budget(self, grant: BudgetGrant, actual_tokens: int, now: float) -> None:
        """Charge (or give back) the difference between the reservation and the usage."""
        if await self._use_redis():
            try:
                await self._budgets.settle(grant, actual_tokens, now)
                return
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        await local.settle_budget(grant, actual_tokens, now)

    async def budget_levels(self, scopes: Sequence[Scope], now: float) -> list[BucketLevel]:
        """Every bucket of ``scopes`` refilled to ``now``, as all workers share them."""
        if await self._use_redis():
            try:
                return await self._budgets.levels(scopes, now)
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        return await local.budget_levels(scopes, now)

    # --- lifecycle ----------------------------------------------------------------------

    async def status(self) -> StoreStatus:
        """Report Redis reachability (trying to reconnect if due) and the replay backlog."""
        await self._use_redis()
        return self._link.status(pending=len(self._pending), dropped=self._dropped)

    async def close(self) -> None:
        """Close the Redis client's connections."""
        await self._r.aclose()
