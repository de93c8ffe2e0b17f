"""A probe's short Retry-After does not steal the primary from the next user call (issue 22
§1.7), on the time-skipping server: the probe meets a 429 with Retry-After 1.5 s (under
``rate_limit.max_wait_ms``), and the call right after it waits that out and is answered
by the primary instead of failing over. A long one still fails over.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from agent_failover.activities.health_models import ProbeInput
from agent_failover.resilience.config import PolicyConfig
from agent_failover.testing.sim.admin import SimAdmin
from tests.workflows.conftest import Harness, make_harness, running

PRIMARY = "anthropic-us-east"


@pytest_asyncio.fixture
async def ts(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    h, workers = await make_harness(ts_env.client, policy)
    async with running(workers):
        yield h


async def _probe_meets_429(ts_env: WorkflowEnvironment, h: Harness, admin: SimAdmin, s: float):
    """The monitor's probe of the primary meets a 429 saying Retry-After ``s``."""
    await admin.set_faults(PRIMARY, [{"kind": "rate_limit", "retry_after": s}])
    now = (await ts_env.get_current_time()).timestamp()
    result = await h.activities.probes.probe_endpoint(
        ProbeInput(route=PRIMARY, now=now, interval_s=10)
    )
    assert result.error_class == "rate_limited"
    assert (await h.health.breaker(PRIMARY)).cooldown_until is not None
    await admin.clear()


async def _attempts_on_primary(admin: SimAdmin) -> int:
    return Counter(a["endpoint"] for a in await admin.attempts())[PRIMARY]


async def test_a_probes_short_retry_after_is_waited_out_by_the_next_call(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """Attempts on the primary: the probe's and the call's (before: the probe's only, and
    the call was answered by a standby)."""
    short = ts.policy.rate_limit.max_wait_ms / 1000 * 0.75
    await _probe_meets_429(ts_env, ts, sim_admin, short)
    out = await ts.call(env=ts_env)
    assert out.route == PRIMARY and out.tier == 0, out.reason_codes
    assert await _attempts_on_primary(sim_admin) == 2


async def test_a_probes_long_retry_after_still_fails_over(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """Longer than max_wait_ms: the call does not wait, it is answered by a standby."""
    long = ts.policy.rate_limit.max_wait_ms / 1000 + 2.0
    await _probe_meets_429(ts_env, ts, sim_admin, long)
    out = await ts.call(env=ts_env)
    assert out.route != PRIMARY
    assert await _attempts_on_primary(sim_admin) == 1
