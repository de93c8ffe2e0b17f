"""``failover status``: the health table from the monitor, or straight from the store.

From the monitor (default) only Temporal access is needed; the command says so when the
monitor is not running or no worker answers, within seconds. The monitor's table is as
old as its last probe round, so the breaker column is then re-read live from the shared
store the table names (or ``--redis-url`` / ``REDIS_URL``) when this machine reaches it;
otherwise the line above the table says how old the breakers are. ``--from-store`` reads
Redis directly with the route list of the user's policy (``--policy`` /
``FAILOVER_POLICY``, as the worker's), for when no worker runs at all.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from rich.console import Console
from temporalio.client import Client

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError

#: Seconds the CLI gives the shared store to answer before showing the monitor's breakers.
LIVE_READ_TIMEOUT_S = 3.0


async def show_monitor_status(
    console: Console,
    client: Client,
    task_queue: str,
    redis_url: str | None = None,
    namespace: str | None = None,
) -> None:
    """Print the monitor's table (breakers re-read live when the store answers), the line
    saying where the breakers come from and how old the rest is, and the monitor's footer."""
    from agent_failover.cli.ops import monitor_table
    from agent_failover.cli.render import age, health_table, monitor_footer, status_extras

    table = await monitor_table(client, task_queue)
    if table.table is None:
        raise CliError(
            "the health monitor has not finished its first probe round yet: try again in "
            f"{table.interval_s or 10:g} s"
        )
    ht = table.table
    figures_age = age(time.time() - ht.taken_at)
    live = await live_breakers(ht, redis_url, namespace)
    if live is None:
        source = (
            f"breakers and figures: the monitor's probe round of {figures_age} (the store "
            f"is not reachable from here: --redis-url / REDIS_URL for live breakers)"
        )
    else:
        ht, where = live
        source = f"breakers: live from {where}; figures: the monitor's probe round of {figures_age}"
    console.print(f"task queue {task_queue} · {source}", highlight=False)
    console.print(health_table(ht, now=time.time()))
    for extra in status_extras(ht, now=time.time()):
        console.print(extra)
    console.print(monitor_footer(table, now=time.time()), highlight=False)


def _store_url(backend: str) -> str | None:
    """The Redis URL in a store description (``redis://...``, ``embedded redis://...``)."""
    for part in backend.split():
        if part.startswith(("redis://", "rediss://", "unix://")):
            return part
    return None


async def live_breakers(table, redis_url: str | None, namespace: str | None):
    """``table`` with its breakers read now from the shared store, and where from; None
    when the store does not answer within :data:`LIVE_READ_TIMEOUT_S` (or is in memory)."""
    import asyncio

    from redis.exceptions import RedisError

    from agent_failover.cli.stackfile import read_stack_file
    from agent_failover.resilience.setup_errors import RedisUnreachable
    from agent_failover.stores.factory import connect_stores

    stack = read_stack_file() or {}
    url = redis_url or _env_redis_url() or stack.get("redis_url") or _store_url(table.store)
    ns = (
        namespace
        or table.store_namespace
        or os.environ.get("FAILOVER_REDIS_NAMESPACE")
        or stack.get("redis_namespace")
        or "failover"
    )
    if url is None or table.store_degraded:
        return None  # a worker-local view: nothing shared to read
    try:
        stores = await asyncio.wait_for(
            connect_stores(url, if_unreachable="refuse", namespace=ns), LIVE_READ_TIMEOUT_S
        )
    except (TimeoutError, OSError, RedisError, RedisUnreachable):
        return None  # not reachable from here: the monitor's breakers, with their age
    try:
        live = {r.route: await stores.health.breaker(r.route) for r in table.rows}
    finally:
        await stores.close()
    rows = [
        r.model_copy(
            update={
                "breaker": live[r.route].state,
                "breaker_reason": live[r.route].reason.value if live[r.route].reason else None,
            }
        )
        for r in table.rows
    ]
    update = {"rows": rows, "breakers": list(live.values())}
    return table.model_copy(update=update), f"{url} (namespace {ns})"


async def table_from_store(
    redis_url: str | None, namespace: str | None, policy: Path | None, window_s: float
):
    """The health table read straight from the shared store (needs Redis access)."""
    from agent_failover.cli.policyfile import load_policy_for_cli
    from agent_failover.cli.stackfile import read_stack_file
    from agent_failover.stores.factory import connect_stores

    stack = read_stack_file() or {}
    env = dict(os.environ)
    if stack.get("sim_url") and not env.get("SIM_URL"):
        env["SIM_URL"] = stack["sim_url"]  # the demo policy's base URLs read it
    path = policy or env.get("FAILOVER_POLICY") or stack.get("policy")
    if not path:
        raise CliError(
            "--from-store needs the deployment's policy for its route list: pass --policy "
            "FILE or set FAILOVER_POLICY as for the worker",
            EXIT_BAD_INPUT,
        )
    pol = load_policy_for_cli(path, env)
    url = redis_url or _env_redis_url() or stack.get("redis_url")
    ns = namespace or os.environ.get("FAILOVER_REDIS_NAMESPACE") or stack.get("redis_namespace")
    try:
        stores = await connect_stores(url, if_unreachable="refuse", namespace=ns or "failover")
    except Exception as exc:
        from redis.exceptions import RedisError

        from agent_failover.resilience.setup_errors import RedisUnreachable

        if not isinstance(exc, RedisError | OSError | RedisUnreachable):
            raise
        raise CliError(
            f"cannot reach the health store at {url or 'redis://127.0.0.1:6379/0'}: "
            "pass --redis-url / set REDIS_URL, or ask the monitor (drop --from-store)"
        ) from None
    try:
        return await _table(stores, pol, window_s)
    finally:
        await stores.close()


async def _table(stores, pol, window_s: float):
    """The :class:`~activities.health_models.HealthTable` of every route of ``pol``."""
    from agent_failover.activities import health_models as hm
    from agent_failover.activities.health import cost_rows
    from agent_failover.activities.shadow import quality_rows
    from agent_failover.resilience.budget import all_scopes

    now = time.time()
    routes = sorted(pol.endpoints)
    snap = await stores.health.snapshot(routes, now=now, window_s=window_s, min_calls=1)
    status = await stores.health.status()
    return hm.HealthTable(
        taken_at=now,
        rows=[snap.get(r) for r in routes],
        breakers=[await stores.health.breaker(r) for r in routes],
        store=stores.backend,
        store_namespace=status.namespace,
        store_degraded=not status.healthy,
        store_error=status.last_error,
        store_degraded_since=status.degraded_since,
        context_windows=hm.context_windows(pol, snap),
        budgets=await stores.health.budget_levels(all_scopes(pol), now),
        quality=await quality_rows(stores.health, pol, now),
        qualification=hm.qualification_rows(pol),
        cost=await cost_rows(stores.health, pol, routes, now),
    )


def _env_redis_url() -> str | None:
    """``REDIS_URL``, unless it only asked a dev stack for its own Redis (``embedded``):
    then the stack's address is the one to read."""
    url = os.environ.get("REDIS_URL")
    return None if url == "embedded" else url
