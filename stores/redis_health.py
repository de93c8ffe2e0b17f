"""The shared health store: outcome windows and breakers in Redis, for every worker.

Layout (``NS`` is the namespace; the literal braces around the route are a Redis
Cluster hash tag, so one route's keys share a slot and the Lua scripts may touch them):

* ``NS:h:{route}:o``  sorted set of outcomes scored by ``at``; each member is a 16-hex
  nonce, ``|`` and the outcome's JSON, so equal outcomes from two workers both count and
  a replayed outcome is idempotent. Trimmed on every write to ``max_samples``
  (``ZREMRANGEBYRANK``) and to ``horizon_s`` behind the newest, with a ``ttl_s`` key TTL:
  at most ``max_samples`` x ~200 bytes per route, and idle routes vanish.
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

Concurrency: ``record`` appends the outcome and reads the breaker and the breaker window
in one Lua script (one round trip), lets :mod:`resilience.breaker` decide, and persists a
changed breaker with a Lua compare-and-set on its version; a lost race re-reads and
re-decides. So no outcome is lost (the append is unconditional) and a transition happens
once (the second writer sees the new state and ``on_outcome`` has nothing to do).
``admit``/``release_trial``/``force`` use the same compare-and-set, which makes half-open
trial slots atomic across workers.

Redis loss: any ``ConnectionError``/``TimeoutError`` switches the store to a local
:class:`~stores.memory_health.MemoryHealthStore` seeded with the last state this process
read from Redis; ``status()`` reports the outage, one warning is logged, and writes are
queued (bounded by ``max_pending``, oldest dropped and counted). At most every
``reconnect_interval_s`` the store pings Redis; once it answers, breakers Redis lost
(e.g. a restarted server without persistence) are restored from the local view,
queued outcomes are replayed through the normal record path (as non-trial outcomes:
trial slots taken locally do not exist in Redis), then forced states and SLA flags.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import redis.asyncio as aioredis
from pydantic import TypeAdapter

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
from agent_failover.resilience.windows import DEFAULT_HORIZON_S, DEFAULT_MAX_SAMPLES, breaker_stats
from agent_failover.stores.memory_health import (
    DEFAULT_BASELINE_REFRESH_S,
    MemoryHealthStore,
    RouteFacts,
    baseline_p95,
    breaker_window_s,
    recent_samples,
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
#: Newest members read for the SLA streaks: twice what they need, since probes and
#: outcomes that do not count against the route are filtered out client-side.
_RECENT_READ = 2 * MAX_SLA_STREAK
#: Compare-and-set attempts before giving up; each failure means another worker changed
#: the breaker in between, so this only runs out under pathological contention.
MAX_CAS_ATTEMPTS = 64
_NONCE_LEN = 16

# KEYS[1] breaker hash; ARGV[1] expected version; ARGV[2] new version; ARGV[3] JSON.
# A missing hash has version 0, so expected=0 doubles as "set if absent".
_CAS_LUA = """
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'b', ARGV[3])
return 1
"""

# Joining the window into one JSON array server-side returns a single bulk string, so
# the client decodes it with one pydantic call instead of parsing hundreds of RESP
# elements in Python (measured: about 3x cheaper per record at 300 samples).
_WINDOW_LUA = """
local function window_json(key, lo, hi)
  local members = redis.call('ZRANGEBYSCORE', key, lo, hi)
  for i, m in ipairs(members) do members[i] = string.sub(m, SKIP) end
  return '[' .. table.concat(members, ',') .. ']'
end
""".replace("SKIP", str(_NONCE_LEN + 2))

# Read one route. KEYS: outcomes, breaker, probe, context window.
# ARGV: window start, window end, how many of the newest members to return as "recent".
# Returns {breaker JSON or nil, outcomes JSON array, probe at or nil, probe ok or nil,
#          last call at or nil, context window or nil, newest outcomes JSON array}.
_READ_LUA = (
    _WINDOW_LUA
    + """
local probe = redis.call('HMGET', KEYS[3], 'at', 'ok', 'c')
local newest = redis.call('ZRANGE', KEYS[1], -tonumber(ARGV[3]), -1)
for i, m in ipairs(newest) do newest[i] = string.sub(m, SKIP) end
return {redis.call('HGET', KEYS[2], 'b'), window_json(KEYS[1], ARGV[1], ARGV[2]),
        probe[1], probe[2], probe[3], redis.call('GET', KEYS[4]),
        '[' .. table.concat(newest, ',') .. ']'}
""".replace("SKIP", str(_NONCE_LEN + 2))
)

# Every hourly bucket of the long horizon in one round trip. KEYS: the bucket hashes.
# Returns one flat {bin, count, ...} array per key.
_HOURLY_LUA = """
local out = {}
for i, k in ipairs(KEYS) do out[i] = redis.call('HGETALL', k) end
return out
"""

# Append one outcome and read what the breaker needs, atomically, in one round trip.
# KEYS: outcomes, breaker, baseline, probe, hourly latency bucket of the outcome's hour.
# ARGV: member, at, max_samples, horizon cutoff, ttl ms, window start, is probe, probe ok,
#       latency bin ('' when the outcome does not feed the baseline), bucket ttl ms.
# Returns {breaker JSON or nil, outcomes JSON array, baseline or nil}.
_RECORD_LUA = (
    _WINDOW_LUA
    + """
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[3]) + 1))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if ARGV[7] == '1' then
  redis.call('HSET', KEYS[4], 'at', ARGV[2], 'ok', ARGV[8])
else
  local last = tonumber(redis.call('HGET', KEYS[4], 'c') or '-1')
  if tonumber(ARGV[2]) > last then redis.call('HSET', KEYS[4], 'c', ARGV[2]) end
end
redis.call('PEXPIRE', KEYS[4], ARGV[5])
if ARGV[9] ~= '' then
  redis.call('HINCRBY', KEYS[5], ARGV[9], 1)
  redis.call('PEXPIRE', KEYS[5], ARGV[10])
end
return {redis.call('HGET', KEYS[2], 'b'), window_json(KEYS[1], ARGV[6], ARGV[2]),
        redis.call('GET', KEYS[3])}
"""
)

_OUTCOMES = TypeAdapter(list[CallOutcome])


class StoreContentionError(RuntimeError):
    """A breaker compare-and-set kept losing races; the breaker was left unchanged."""


@dataclass(frozen=True)
class _PendingRecord:
    outcome: CallOutcome
    settings: BreakerSettings
    member: bytes


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


def _member(outcome: CallOutcome) -> bytes:
    return (
        os.urandom(_NONCE_LEN // 2).hex().encode()
        + b"|"
        + outcome.model_dump_json(exclude_defaults=True).encode()
    )


def _parse_outcomes(blob: bytes) -> list[CallOutcome]:
    return _OUTCOMES.validate_json(blob)


def _parse_breaker(route: str, raw: bytes | None) -> Breaker:
    return Breaker.model_validate_json(raw) if raw else Breaker(route=route)


def _float(raw: bytes | None) -> float | None:
    return float(raw) if raw is not None else None


@dataclass(frozen=True)
class _RouteRead:
    """One route as ``_READ_LUA`` returns it, parsed."""

    breaker: Breaker
    outcomes: list[CallOutcome]
    facts: RouteFacts
    newest: list[CallOutcome]

    @classmethod
    def parse(cls, route: str, raw: list[bytes | None]) -> _RouteRead:
        raw_b, blob, p_at, p_ok, c_at, cw, newest = raw
        facts = RouteFacts(
            last_probe_at=_float(p_at),
            last_probe_ok=bool(int(p_ok)) if p_ok is not None else None,
            last_call_at=_float(c_at),
            context_window=int(cw) if cw is not None else None,
        )
        return cls(
            _parse_breaker(route, raw_b), _parse_outcomes(blob), facts, _parse_outcomes(newest)
        )


class RedisHealthStore:
    """A :class:`~stores.health.HealthStore` shared by all workers through Redis."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        ttl_s: float = DEFAULT_TTL_S,
        max_samples: int = DEFAULT_MAX_SAMPLES,
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
        if max_samples < 1:
            raise ValueError("max_samples must be >= 1")
        self._r = client
        self.namespace = namespace
        self.ttl_s = ttl_s
        self.max_samples = max_samples
        self.horizon_s = horizon_s
        self.baseline_refresh_s = baseline_refresh_s
        self._ttl_ms = int(ttl_s * 1000)
        self._cas = client.register_script(_CAS_LUA)
        self._read = client.register_script(_READ_LUA)
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
        self._seen_outcomes: dict[str, list[CallOutcome]] = {}
        self._seen_facts: dict[str, RouteFacts] = {}
        self._seen_sla: dict[str, tuple[set[str], dict[str, float]]] = {}

    # --- keys ---------------------------------------------------------------------------

    def _k(self, route: str, part: str) -> str:
        # The braces are a Redis Cluster hash tag: one route's keys share a slot, so the
        # scripts that touch several of them also work on a cluster.
        return f"{self.namespace}:h:{{{route}}}:{part}"

    def outcomes_key(self, route: str) -> str:
        """The sorted set holding ``route``'s outcomes (for tests and operators)."""
        return self._k(route, "o")

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
                max_samples=self.max_samples,
                horizon_s=self.horizon_s,
                baseline_refresh_s=self.baseline_refresh_s,
            )
            for route, b in self._seen_breakers.items():
                local.load_route(route, breaker=b)
            for route, outs in self._seen_outcomes.items():
                local.load_route(route, outcomes=outs)
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
                await self._record_redis(replay, op.settings, op.member)
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
        member = _member(outcome)
        if await self._use_redis():
            try:
                return await self._record_redis(outcome, settings, member)
            except REDIS_DOWN as exc:
                local = self._go_local(exc)
        else:
            local = self._local_view()
        self._queue(_PendingRecord(outcome, settings, member))
        return await local.record(outcome, settings)

    def _local_view(self) -> MemoryHealthStore:
        assert self._local is not None, "degraded without a local view"
        return self._local

    async def _record_redis(
        self, outcome: CallOutcome, settings: BreakerSettings, member: bytes
    ) -> Transition | None:
        route, now = outcome.route, outcome.at
        okey, bkey, basekey = self._k(route, "o"), self._k(route, "b"), self._k(route, "base")
        pkey, hkey = self._k(route, "p"), self._hour_key(route, hour_of(now))
        window_start = now - breaker_window_s(settings)
        raw_b, blob, raw_base = await self._append(
            keys=[okey, bkey, basekey, pkey, hkey],
            args=[
                member,
                repr(now),
                self.max_samples,
                repr(now - self.horizon_s),
                self._ttl_ms,
                repr(window_start),
                int(outcome.probe),
                int(outcome.ok),
                latency_bin(outcome.latency_ms) if feeds_baseline(outcome) else "",
                _HOURLY_TTL_MS,
            ],
        )
        self._remember_record(outcome)
        baseline = (await self._baseline(route, raw_base, settings.min_calls, now)).used_ms
        for _ in range(MAX_CAS_ATTEMPTS):
            current = _parse_breaker(route, raw_b)
            recent = _parse_outcomes(blob)
            self._seen_outcomes[route] = recent
            stats = breaker_stats(recent, settings, now=now, baseline_p95_ms=baseline)
            new, transition = on_outcome(current, outcome, stats, settings, now)
            if new == current or await self._cas_write(bkey, current, new):
                self._seen_breakers[route] = new
                return transition
            read = await self._read_route(route, window_start, now)
            raw_b, blob = read[0], read[1]
        raise StoreContentionError(f"breaker {route!r}: {MAX_CAS_ATTEMPTS} lost compare-and-sets")

    def _remember_record(self, outcome: CallOutcome) -> None:
        """Keep the probe / last-call facts this process wrote, for the local view."""
        f = self._seen_facts.get(outcome.route, RouteFacts())
        if outcome.probe:
            f = replace(f, last_probe_at=outcome.at, last_probe_ok=outcome.ok)
        elif f.last_call_at is None or outcome.at > f.last_call_at:
            f = replace(f, last_call_at=outcome.at)
        self._seen_facts[outcome.route] = f

    async def _read_route(self, route: str, start: float, end: float) -> list[bytes | None]:
        keys = [self._k(route, "o"), self._k(route, "b"), self._k(route, "p"), self._k(route, "cw")]
        return list(await self._read(keys=keys, args=[repr(start), repr(end), _RECENT_READ]))

    async def _baseline(
        self, route: str, raw: bytes | None, min_samples: int, now: float
    ) -> LatencyBaseline:
        """The route's baselines, recomputed from the horizon and the hourly buckets when stale."""
        if raw:
            value, _, at = raw.decode().rpartition("|")
            if value.startswith("{") and now - float(at) < self.baseline_refresh_s:
                # Anything else is the older bare-number encoding: recompute it.
                return LatencyBaseline.model_validate_json(value)
        read = await self._read_route(route, now - self.horizon_s, now)
        short = baseline_p95(_parse_outcomes(read[1]), min_samples=min_samples)
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
                keys = [self._k(route, p) for p in ("o", "b", "p", "cw")]
                # Awaiting with client=pipe only queues the EVALSHA (scripts load on execute).
                args = [repr(now - window_s), repr(now), _RECENT_READ]
                await self._read(keys=keys, args=args, client=pipe)
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
            self._seen_outcomes[route] = read.outcomes
            self._seen_facts[route] = read.facts
            out[route] = route_health(
                route,
                read.breaker,
                read.outcomes,
                now=now,
                window_s=window_s,
                min_calls=min_calls,
                sla=(route in demoted, since.get(route)),
                facts=read.facts,
                recent=recent_samples(read.newest, now=now),
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
