"""``failover status``: the health table from the monitor, or straight from the store.

From the monitor (default) only Temporal access is needed; the command says so when the
monitor is not running or no worker answers, within seconds. ``--from-store`` reads
Redis directly with the policy's route list, for when no worker runs at all.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from rich.console import Console
from temporalio.client import Client

from agent_failover.cli.errors import CliError


async def show_monitor_status(console: Console, client: Client, task_queue: str) -> None:
    """Print the monitor's table and a footer on probing (rounds, interval, age)."""
    from agent_failover.cli.ops import monitor_table
    from agent_failover.cli.render import health_table, monitor_footer, status_extras

    table = await monitor_table(client, task_queue)
    if table.table is None:
        raise CliError(
            "the health monitor has not finished its first probe round yet: try again in "
            f"{table.interval_s or 10:g} s"
        )
    console.print(health_table(table.table, now=time.time()))
    for extra in status_extras(table.table, now=time.time()):
        console.print(extra)
    console.print(monitor_footer(table, now=time.time()), highlight=False)


async def table_from_store(
    redis_url: str | None, namespace: str | None, policy: Path | None, window_s: float
):
    """The health table read straight from the shared store (needs Redis access)."""
    from agent_failover.cli.policyfile import load_policy_for_cli
    from agent_failover.cli.stackfile import read_stack_file
    from agent_failover.config import DEFAULT_POLICY_PATH
    from agent_failover.stores.factory import connect_stores

    stack = read_stack_file() or {}
    env = dict(os.environ)
    if stack.get("sim_url") and not env.get("SIM_URL"):
        env["SIM_URL"] = stack["sim_url"]  # the demo policy's base URLs read it
    pol = load_policy_for_cli(policy or env.get("FAILOVER_POLICY", DEFAULT_POLICY_PATH), env)
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
