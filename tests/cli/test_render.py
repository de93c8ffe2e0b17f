"""What `failover status` and `failover run` print: units on every figure, probe ages,
the degraded store, context windows (learned, else configured), the substitutions legend."""

from __future__ import annotations

from rich.console import Console

from agent_failover.activities.health_models import ContextWindow, HealthTable
from agent_failover.cli.render import age, health_table, monitor_footer
from agent_failover.resilience.breaker import Breaker
from agent_failover.resilience.contracts import RouteHealth, WindowStats
from agent_failover.workflows.models import MonitorTable

NOW = 1_800_000_000.0


def _text(renderable) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def _table(**kw) -> HealthTable:
    row = RouteHealth(
        route="openai-us",
        stats=WindowStats(calls=4, p50_ms=20.0, p95_ms=41.0, p99_ms=50.0),
        last_probe_at=NOW - 3,
        last_probe_ok=True,
    )
    return HealthTable(
        taken_at=NOW - 1,
        rows=[row],
        breakers=[Breaker(route="openai-us")],
        store="redis://127.0.0.1:6379/0",
        **kw,
    )


def test_percentiles_have_units_and_the_probe_its_age() -> None:
    text = _text(health_table(_table(), now=NOW))
    for header in ("p50 ms", "p95 ms", "p99 ms", "err %", "last probe", "context window"):
        assert header in text
    assert "ok, 3 s ago" in text and "DEGRADED" not in text


def test_degraded_store_is_said_in_the_title() -> None:
    table = _table(
        store_degraded=True,
        store_error="ConnectionError: refused",
        store_degraded_since=NOW - 42,
    )
    text = _text(health_table(table, now=NOW))
    assert "store DEGRADED: Redis unreachable for 42 s (ConnectionError: refused)" in text
    assert "local view" in text


def test_context_window_learned_else_configured() -> None:
    configured = _table(context_windows={"openai-us": ContextWindow(configured=128_000)})
    assert "128,000" in _text(health_table(configured, now=NOW))
    learned = _table(
        context_windows={"openai-us": ContextWindow(configured=128_000, learned=32_768)}
    )
    assert "32,768 learned (128,000 configured)" in _text(health_table(learned, now=NOW))


def test_ages_read_naturally() -> None:
    assert [age(3), age(-1), age(600), age(10_000)] == [
        "3 s ago",
        "0 s ago",
        "10 min ago",
        "3 h ago",
    ]


def test_monitor_footer_says_running_interval_rounds_and_table_age() -> None:
    mt = MonitorTable(paused=False, rounds=7, results={}, table=_table(), interval_s=3)
    line = monitor_footer(mt, now=NOW)
    assert line == "health monitor: running, probing active every 3 s, 7 rounds; table from 1 s ago"
    following = mt.model_copy(update={"policy_ref": "0123456789abcdef"})
    assert ", 7 rounds, policy 0123456789abcdef;" in monitor_footer(following, now=NOW)


def test_context_window_not_configured_is_never_assumed() -> None:
    unknown = _table(context_windows={"openai-us": ContextWindow()})
    assert "unknown" in _text(health_table(unknown, now=NOW))
    learned = _table(context_windows={"openai-us": ContextWindow(learned=64_000)})
    assert "64,000 learned (not configured)" in _text(health_table(learned, now=NOW))


def test_budget_table_projects_the_refill_to_now() -> None:
    """`failover status` shows each budget's level refilled to now, its rate and reserve."""
    from agent_failover.cli.render import budget_table
    from agent_failover.resilience.budget import Bucket, BucketLevel, BudgetUnit

    req = Bucket(unit=BudgetUnit.REQUESTS, capacity=600, reserve=60)
    tok = Bucket(unit=BudgetUnit.TOKENS, capacity=90_000)
    levels = [
        BucketLevel(scope="endpoint:openai-us", bucket=req, level=0.0, at=NOW - 3),
        BucketLevel(scope="bulkhead:specialists", bucket=tok, level=90_000, at=NOW),
    ]
    lines = _text(budget_table(levels, now=NOW)).splitlines()
    ep = next(line for line in lines if "endpoint:openai-us" in line)
    # 3 s at 10 requests a second: 30 left, 57 s to full.
    cells = lambda line: [c.strip() for c in line.split("│") if c.strip()]  # noqa: E731
    assert cells(ep) == ["endpoint:openai-us", "requests", "30", "600", "60", "57 s"]
    bh = next(line for line in lines if "bulkhead:specialists" in line)
    assert cells(bh) == ["bulkhead:specialists", "tokens", "90,000", "90,000", "-", "-"]


def test_local_saturations_get_their_own_column_only_when_there_are_some() -> None:
    """Calls that found our own connection slots busy are shown beside, not in, the route's
    calls and error rate; a table without any has no such column."""
    assert "saturated" not in _text(health_table(_table(), now=NOW))
    table = _table()
    table.rows[0] = table.rows[0].model_copy(
        update={"stats": WindowStats(calls=4, local_saturations=37)}
    )
    text = _text(health_table(table, now=NOW))
    header = next(line for line in text.splitlines() if "saturated" in line)
    row = next(line for line in text.splitlines() if line.strip().startswith("│ openai-us"))
    cells = [c.strip() for c in row.split("│")]
    names = [c.strip() for c in header.split("┃")]
    assert cells[names.index("saturated")] == "37"
    assert cells[names.index("err %")] == "0"


def test_half_open_trial_slots_held_are_shown_with_their_lapse() -> None:
    """A half-open route whose trial slots are held says how many and when the first
    lease lapses (else calls refused as trial_slots_full look like an unexplained refusal)."""
    from agent_failover.resilience.breaker import BreakerReason, TrialLease
    from agent_failover.resilience.contracts import BreakerState

    leases = (TrialLease(id="a", expires_at=NOW + 12), TrialLease(id="b", expires_at=NOW + 30))
    breaker = Breaker(
        route="openai-us",
        state=BreakerState.HALF_OPEN,
        reason=BreakerReason.OPEN_DURATION_ELAPSED,
        trial_leases=(*leases, TrialLease(id="dead", expires_at=NOW - 1)),
    )
    table = _table()
    table.rows[0] = table.rows[0].model_copy(
        update={"breaker": BreakerState.HALF_OPEN, "breaker_reason": "open_duration_elapsed"}
    )
    table.breakers = [breaker]
    text = _text(health_table(table, now=NOW))
    assert "2 trial slot(s) held, first lapses in 12 s" in text
