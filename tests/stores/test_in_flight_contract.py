"""In-flight leases (issue 22 §1.7), against the in-memory store and real Redis: a lease
counts until it ends or expires, several calls on one route count apart, and routes do not
mix. What the health monitor reads to leave a route with a user call in flight alone.
"""

from __future__ import annotations

from agent_failover.stores.health import HealthStore
from agent_failover.stores.in_flight import LeaseTake

ROUTE = "anthropic-us-east"
NOW = 1_000_000.0


async def test_a_lease_counts_until_it_ends(health_store: HealthStore) -> None:
    leases = health_store.in_flight
    assert await leases.count(ROUTE, NOW) == 0
    await leases.start(ROUTE, "a", now=NOW, until=NOW + 30)
    await leases.start(ROUTE, "b", now=NOW + 1, until=NOW + 31)
    assert await leases.count(ROUTE, NOW + 2) == 2
    assert await leases.count("openai-us", NOW + 2) == 0
    await leases.end(ROUTE, "a")
    await leases.end(ROUTE, "never-taken")
    assert await leases.count(ROUTE, NOW + 2) == 1
    await leases.end(ROUTE, "b")
    assert await leases.count(ROUTE, NOW + 2) == 0


async def test_a_lease_nobody_gives_back_expires(health_store: HealthStore) -> None:
    """A worker killed mid-call never ends its lease: it stops counting at ``until``, and
    a later lease drops it."""
    leases = health_store.in_flight
    await leases.start(ROUTE, "dead", now=NOW, until=NOW + 10)
    assert await leases.count(ROUTE, NOW + 9.9) == 1
    assert await leases.count(ROUTE, NOW + 10) == 0
    await leases.start(ROUTE, "live", now=NOW + 20, until=NOW + 50)
    assert await leases.count(ROUTE, NOW + 20) == 1


async def test_a_lease_taken_with_a_snapshot_counts_until_it_ends(
    health_store: HealthStore,
) -> None:
    """The role context's lease rides in its snapshot's read (one round trip on Redis,
    concurrent reads on Cluster): it counts from the read on, ends by its id and lapses at
    its ``until`` as any lease; the snapshot reads as without it."""
    routes = [ROUTE, "openai-us"]
    plain = await health_store.snapshot(routes, now=NOW, window_s=60.0, min_calls=1, role="r")
    take = LeaseTake(ROUTE, "first", NOW + 30)
    snap = await health_store.snapshot(
        routes, now=NOW, window_s=60.0, min_calls=1, role="r", lease=take
    )
    assert snap == plain
    leases = health_store.in_flight
    assert await leases.count(ROUTE, NOW + 1) == 1
    assert await leases.count("openai-us", NOW + 1) == 0
    assert await leases.count(ROUTE, NOW + 30) == 0  # lapses by itself
    await leases.end(ROUTE, "first")
    assert await leases.count(ROUTE, NOW + 1) == 0
