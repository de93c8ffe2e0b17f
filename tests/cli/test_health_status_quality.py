"""`failover status` shows shadow-evaluation verdicts: per role and route,
QUALITY_REGRESSION or ok, the agreement drop against the tolerance and the samples the
verdict counts, rendered from the table and read `--from-store` from Redis."""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from rich.console import Console

from agent_failover.activities.health_models import QualityRow
from agent_failover.cli.render import quality_table
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.resilience.shadow import QualitySample
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client
from tests.cli.conftest import invoke
from tests.stores.conftest import _delete_namespace, namespace, redis_url  # noqa: F401

NOW = 1_800_000_000.0
REGRESSED, REFERENCE = "cheap-mini", "openai-us"


def _cells(text: str, route: str) -> list[str]:
    line = next(x for x in text.splitlines() if f" {route} " in x)
    return [c.strip() for c in line.split("│") if c.strip()]


def test_quality_table_flags_the_regressed_route() -> None:
    """A regressed route: the verdict, the window's delta, tolerance, samples/min, age of
    the verdict; a route under min_samples shows the delta recorded at its verdict."""
    rows = [
        QualityRow(role="analyst", route=REGRESSED, regressed=True, since=NOW - 90,
                   delta=0.62, verdict_delta=0.4, samples=5, min_samples=3, tolerance=0.25),
        QualityRow(role="analyst", route="gemini-flash", since=NOW - 10, verdict_delta=0.05,
                   samples=1, min_samples=3, tolerance=0.25),
        QualityRow(role="analyst", route="anthropic-us-east", min_samples=3, tolerance=0.25),
    ]  # fmt: skip
    console = Console(width=200, record=True, color_system=None)
    console.print(quality_table(rows, now=NOW))
    text = console.export_text()
    assert _cells(text, REGRESSED) == [
        "analyst", REGRESSED, "QUALITY_REGRESSION", "0.62", "0.25", "5/3", "90 s ago",
    ]  # fmt: skip
    assert _cells(text, "gemini-flash")[2:] == ["ok", "0.05 at verdict", "0.25", "1/3", "10 s ago"]
    assert _cells(text, "anthropic-us-east")[2:] == ["ok", "-", "0.25", "0/3", "-"]


async def test_status_from_store_shows_quality_verdicts(
    tmp_path: Path,
    redis_url: str,  # noqa: F811
    namespace: str,  # noqa: F811
) -> None:
    """A verdict and samples written by a worker's store are read back by
    `failover status --from-store`: the regressed route, its delta and samples; the
    reference route is not graded, so not listed."""
    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    data["roles"]["analyst"]["shadow"] = {
        "reference_route": REFERENCE,
        "min_samples": 2,
        "tolerance": 0.25,
    }
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(data))
    store = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    try:
        now = time.time()
        await store.set_quality_regressed("analyst", REGRESSED, True, at=now - 60, delta=0.7)
        for at in (now - 30, now - 20, now - 10):
            await store.record_quality("analyst", REGRESSED, QualitySample(at=at, score=0.2))
        args = ["status", "--from-store", "--redis-url", redis_url, "--namespace", namespace]
        result = await invoke([*args, "--policy", str(policy)], env={"SIM_URL": "http://sim"})
    finally:
        await store.close()
        await _delete_namespace(redis_url, namespace)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Shadow quality" in out
    cells = _cells(out.split("Shadow quality")[1], REGRESSED)
    assert cells[:6] == ["analyst", REGRESSED, "QUALITY_REGRESSION", "0.80", "0.25", "3/2"]
    assert _cells(out.split("Shadow quality")[1], "gemini-flash")[2:6] == ["ok", "-", "0.25", "0/2"]
    assert f" {REFERENCE} " not in out.split("Shadow quality")[1]
