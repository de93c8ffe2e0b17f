"""Key names of the shared health store, and how long each kind of key lives.

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
* ``NS:h:{route}:b``  hash ``{v: version, b: breaker JSON}``, TTL ``IDLE_TTL_MS``
  (7 days + 2 hours) renewed by every write and by every outcome or probe recorded on the
  route: a route still in a policy is probed every few seconds, so its breaker never
  expires, while one no worker touches any more is dropped after a week. A forced
  breaker has no TTL (an operator's decision lasts until released): at most one such
  key per route.
* ``NS:h:{route}:p``  hash ``{at, ok}`` of the last probe and ``c``, when the last real
  call finished (TTL ``ttl_s``).
* ``NS:h:{route}:base`` the route's baselines (JSON) and when they were computed (TTL ``ttl_s``).
* ``NS:h:{route}:lh:<hour>`` hash latency bin -> count of the successful real calls that
  finished in that hour (:mod:`resilience.baseline`), TTL 7 days + 2 hours: the rolling
  7-day baseline costs at most 170 small hashes per route.
* ``NS:h:{route}:cm:<minute>`` and ``NS:h:{route}:ch:<hour>`` hashes ``b k n`` (billed
  attempts, useful tokens, nano-dollars: :mod:`resilience.cost_efficiency`), TTL as the
  minute buckets and the hourly latency buckets; ``NS:h:{route}:cb`` the 7-day cost
  baseline as ``hour|b=..,k=..,n=..`` (summed once an hour, TTL ``ttl_s``) and
  ``NS:h:{route}:cv`` the cost-efficiency verdict ``demoted|since`` (TTL 7 days + 2 hours).
* ``NS:h:{route}:cw`` the context window the provider stated in a rejection (TTL 30 days).
* ``NS:sla:<role>``   set of routes latency-demoted for the role; ``NS:slat:<role>`` hash
  route -> when the verdict last changed. TTL ``IDLE_TTL_MS``, renewed by every change:
  the verdict is judged again from the route's window at every step, so a week-old
  demotion that expires is re-made at once if the route is still slow.
* ``NS:h:{route}:q:<role>`` list of the route's newest shadow-evaluation samples for the
  role (``at|score``, oldest first, capped at ``MAX_QUALITY_SAMPLES``; TTL ``ttl_s``), and
  ``NS:h:{route}:qr`` hash role -> ``regressed|since|delta``, the quality verdict, TTL
  ``IDLE_TTL_MS`` renewed by every verdict and every shadow sample of the route.

Every key has a TTL except a forced breaker: nothing grows with time or traffic
(:mod:`tests.stores.test_redis_keys_ttl` enumerates the keys after a burst of activity).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agent_failover.resilience.aggregates import HIST_BUCKET_S
from agent_failover.resilience.baseline import BUCKET_S, HORIZON_HOURS

#: How long a learned context window is kept without being stated again.
CONTEXT_WINDOW_TTL_S = 30 * 86400.0
#: Hourly latency buckets live for the horizon plus a margin for the hour in progress.
HOURLY_TTL_MS = int((HORIZON_HOURS + 2) * BUCKET_S * 1000)
#: How long a route's or a role's lasting state (breaker, quality verdict, SLA demotion)
#: is kept without being written or, for a breaker, without an outcome or probe recorded.
IDLE_TTL_MS = HOURLY_TTL_MS
#: Aggregate buckets outlive the horizon by this margin (wall clock vs outcome time).
BUCKET_TTL_MARGIN_S = 60.0


#: The keys of a route that are one of a kind: b p r base cb cv cw qr f.
SINGLE_KEYS_PER_ROUTE = 9


def max_keys_per_route(horizon_s: float, roles: int) -> int:
    """The most keys one route can have at once, whatever the traffic: the aggregate
    buckets live ``horizon_s`` + a margin (one key a second, a ten seconds, a minute for
    each of ``m n cm``), the hourly ones a week (``lh ch``), plus one shadow-sample list
    per role and the one-of-a-kind keys."""
    live_s = horizon_s + BUCKET_TTL_MARGIN_S
    seconds = math.ceil(live_s) + 1
    tens = math.ceil(live_s / HIST_BUCKET_S) + 1
    minutes = 3 * (math.ceil(live_s / 60) + 1)
    hours = 2 * (math.ceil(HOURLY_TTL_MS / 1000 / BUCKET_S) + 1)
    return seconds + tens + minutes + hours + roles + SINGLE_KEYS_PER_ROUTE


@dataclass(frozen=True)
class HealthKeys:
    """The key names of one namespace."""

    namespace: str

    def prefix(self, route: str) -> str:
        """``NS:h:{route}:``, which the scripts append a key's part to."""
        # The braces are a Redis Cluster hash tag: one route's keys share a slot, so the
        # scripts that touch several of them also work on a cluster.
        return f"{self.namespace}:h:{{{route}}}:"

    def bucket(self, route: str, second: int) -> str:
        """The hash of ``route``'s aggregates for one second."""
        return f"{self.prefix(route)}s:{second}"

    def breaker(self, route: str) -> str:
        """The hash holding ``route``'s breaker."""
        return f"{self.prefix(route)}b"

    def hour(self, route: str, hour: int) -> str:
        """The hash of ``route``'s latency bins for one hour (the long baseline)."""
        return f"{self.prefix(route)}lh:{hour}"

    def baseline(self, route: str) -> str:
        """The route's cached baselines."""
        return f"{self.prefix(route)}base"

    def context_window(self, route: str) -> str:
        """The context window ``route``'s provider stated."""
        return f"{self.prefix(route)}cw"

    def quality(self, route: str, role: str) -> str:
        """The list of ``route``'s shadow samples for ``role``."""
        return f"{self.prefix(route)}q:{role}"

    def quality_verdict(self, route: str) -> str:
        """The hash role -> quality verdict of ``route``."""
        return f"{self.prefix(route)}qr"

    def sla(self, role: str) -> str:
        """The set of routes latency-demoted for ``role``."""
        return f"{self.namespace}:sla:{role}"

    def sla_since(self, role: str) -> str:
        """The hash route -> when ``role``'s SLA verdict on it last changed."""
        return f"{self.namespace}:slat:{role}"
