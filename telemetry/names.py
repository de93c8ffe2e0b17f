"""Instrument and span names, in one place so dashboards and code agree."""

METER_NAME = "agent_failover"
TRACER_NAME = "agent_failover"

#: Counter: one per model call attempt, attributes route, role, outcome (ok or error class).
ATTEMPTS = "failover.attempts"
#: Histogram (ms): latency of a model call attempt, attributes route, role, outcome.
ATTEMPT_LATENCY = "failover.attempt.latency"
#: Histogram (ms): time to first token, attributes route.
TTFT = "failover.attempt.ttft"
#: Counter: breaker transitions, attributes route, from, to, reason.
BREAKER_TRANSITIONS = "failover.breaker.transitions"
#: Counter: health probes, attributes route, ok.
PROBES = "failover.probes"
#: Counter: probe rounds that sent nothing (recent real traffic, open, cooling down),
#: attributes route, reason.
PROBES_SKIPPED = "failover.probes.skipped"
#: Counter: cache lookups, attributes role, hit.
CACHE_LOOKUPS = "failover.cache.lookups"
#: Counter: store degradations (shared store unreachable), attributes store.
STORE_DEGRADED = "failover.store.degraded"
