"""Chaos: providers answer garbage at random (invalid JSON, schema violations, empty
output, malformed SSE chunks, error events mid-stream) on every endpoint. Pipelines must
complete, and no garbage or truncated text may pass as a successful step."""

from __future__ import annotations

import json

import jsonschema
import pytest

from agent_failover.resilience.contracts import Capability
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.content import END_MARKER
from tests.chaos.conftest import build_worker
from tests.chaos.helpers import (
    ENDPOINTS,
    assert_conduct,
    assert_consistent,
    results_of,
    start_pipeline,
)
from tests.workflows.conftest import running

pytestmark = [pytest.mark.chaos, pytest.mark.devserver]

GARBAGE = [
    {"kind": "invalid_json", "probability": 0.15},
    {"kind": "schema_violation", "probability": 0.15},
    {"kind": "empty_output", "probability": 0.05},
    {"kind": "malformed_chunk", "after_tokens": 2, "probability": 0.2},
    {"kind": "stream_error_event", "after_tokens": 4, "probability": 0.1},
]
JSON_ROLES = ("planner", "critic")


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


async def test_garbage_never_passes_as_an_answer(dev_env, policy, sim_admin: SimAdmin) -> None:
    """Structured outputs validate against their schema; prose is complete or not used."""
    for ep in ENDPOINTS:
        await sim_admin.set_faults(ep, GARBAGE)
    h, workers = build_worker(dev_env.client, policy)
    async with running(workers):
        # Half the runs allow two revision rounds, so step naming across rounds is covered.
        handles = [
            await start_pipeline(
                h,
                f"garbage task {i}",
                escalate_on_critical_degraded=bool(i % 2),
                escalation_timeout_s=0.5,
                revision_rounds=1 + (i // 4),
            )
            for i in range(8)
        ]
        results = await results_of(handles, timeout_s=25)
    checked_json = 0
    for r in results:
        assert_consistent(r)
        for s in r.steps:
            out = s.output
            if out.role in JSON_ROLES and out.capability is not Capability.STATIC:
                schema = policy.role(out.role).output_schema
                assert out.data is not None, f"{s.step}: structured role answered without data"
                jsonschema.validate(out.data, schema)
                assert json.loads(out.content) == out.data
                checked_json += out.capability is Capability.FULL
            if out.tier <= 2 and out.route is not None:
                assert out.content.endswith(END_MARKER) or _is_json(out.content), (
                    f"{s.step} on {out.route} returned truncated or garbled text: "
                    f"{out.content[-80:]!r}"
                )
    assert checked_json, "no full-capability structured output was produced to check"
    seen = await sim_admin.attempts()
    got = assert_conduct(results, seen)
    assert any(a.faults for a in seen), "no garbage was injected"
    print(f"\nattempts per route {dict(got)}")
    print("worst tiers", [r.summary.worst_tier for r in results])
    print("faults", sorted({f for a in seen for f in a.faults}))
    print("escalations", [r.escalation.value for r in results])
