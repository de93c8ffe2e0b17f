"""`failover status` shows each route's tokens per dollar against its 7-day baseline and,
when the policy demotes on it, the verdict: rendered from the table and read
`--from-store` from Redis."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import yaml
from rich.console import Console

from agent_failover.activities.health_models import cost_row
from agent_failover.cli.render import cost_table
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome, CostEfficiency
from agent_failover.resilience.errors import ErrorClass
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client
from tests.cli.conftest import invoke
from tests.stores.conftest import _delete_namespace, namespace, redis_url  # noqa: F401

NOW = 1_800_000_000.0
ROUTE = "anthropic-us-east"


def _cells(text: str, route: str) -> list[str]:
    line = next(x for x in text.splitlines() if f" {route} " in x)
    return [c.strip() for c in line.split("│") if c.strip()]


async def _now_inside_one_hour() -> tuple[float, float]:
    """(now, the start of its hour), waiting out an hour's last 10 s: the baseline counts
    completed hours only, so records and the read must fall in the same hour (a run 20 s
    past the hour once put three of the four records in the baseline)."""
    now = time.time()
    if 3600 - now % 3600 < 10:
        await asyncio.sleep(3600 - now % 3600 + 0.1)
        now = time.time()
    return now, now - now % 3600


def _policy(enabled: bool):
    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    data["cost_efficiency"] = {"enabled": enabled, "min_samples": 2}
    return data


def test_cost_table_shows_share_and_demotion() -> None:
    """Now and baseline tokens per dollar, the share, billed attempts, and DEMOTED with the
    restore line (min_share / hysteresis_margin) when the policy demotes; with demotion
    off the same figures are only tracked."""
    cost = CostEfficiency(
        current_attempts=4, current_tokens=2000, current_spend_usd=0.01,
        baseline_attempts=9, baseline_tokens=9000, baseline_spend_usd=0.01,
        window_s=600.0, computed_at=NOW, demoted=True, since=NOW - 90,
    )  # fmt: skip
    on = load_policy(DEFAULT_POLICY_PATH, env={"SIM_URL": "http://sim"})
    on = on.model_copy(
        update={"cost_efficiency": on.cost_efficiency.model_copy(update={"enabled": True})}
    )
    off = on.model_copy(
        update={"cost_efficiency": on.cost_efficiency.model_copy(update={"enabled": False})}
    )
    console = Console(width=220, record=True, color_system=None)
    console.print(cost_table([cost_row(ROUTE, cost, on)], now=NOW))
    cells = _cells(console.export_text(), ROUTE)
    share = (2000 / 0.01) / (9000 / 0.01)
    back = on.cost_efficiency.min_share / on.hysteresis_margin
    assert cells[:5] == [ROUTE, f"{2000 / 0.01:,.0f}", f"{9000 / 0.01:,.0f}", f"{share:.0%}", "4/9"]
    assert back == 0.5 / 0.8  # the seed's share over the default hysteresis margin
    assert cells[5] == "DEMOTED (90 s ago): under 50%, back at 62.5%"
    console = Console(width=220, record=True, color_system=None)
    console.print(cost_table([cost_row(ROUTE, cost, off)], now=NOW))
    assert _cells(console.export_text(), ROUTE)[5] == "tracked (demotion off)"


async def test_status_from_store_shows_tokens_per_dollar(
    tmp_path: Path,
    redis_url: str,  # noqa: F811
    namespace: str,  # noqa: F811
) -> None:
    """Answers and a billed rejection recorded by a worker's store are read back by
    `failover status --from-store`: tokens per dollar now (the rejection's spend counted,
    its tokens not), billed attempts, and the persisted demotion."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(_policy(True)))
    store = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    settings = BreakerSettings()
    try:
        now, hour = await _now_inside_one_hour()
        for i in range(3):
            at = max(now - 30 + i, hour)
            done = CallOutcome(route=ROUTE, at=at, ok=True, tokens=1000, cost_usd=0.002)
            await store.record(done, settings)
        bad = CallOutcome(
            route=ROUTE, at=max(now - 5, hour), ok=False, error_class=ErrorClass.INVALID_OUTPUT,
            semantic_failure=True, tokens=1000, cost_usd=0.002,
        )  # fmt: skip
        await store.record(bad, settings)
        await store.set_cost_demoted(ROUTE, True, at=max(now - 2, hour))
        args = ["status", "--from-store", "--redis-url", redis_url, "--namespace", namespace]
        result = await invoke([*args, "--policy", str(policy)], env={"SIM_URL": "http://sim"})
    finally:
        await store.close()
        await _delete_namespace(redis_url, namespace)
    assert result.exit_code == 0, result.output
    section = result.output.split("Cost efficiency")[1]
    cells = _cells(section, ROUTE)
    assert cells[1] == f"{3000 / (4 * 0.002):,.0f}" and cells[2:5] == ["-", "-", "4/0"]
    assert cells[5].startswith("DEMOTED")
    assert " openai-us " in section  # demotion on: every route is listed
