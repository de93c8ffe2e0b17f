"""``bench/cpu_breakdown.py``'s sorting of py-spy samples (the part that needs no py-spy)."""

from __future__ import annotations

import pytest

from tests.bench_modules import load_bench

cb = load_bench("cpu_breakdown")

LOOP = "thread (1): MainThread;run (asyncio/runners.py:190);Handle._run (asyncio/events.py:80)"
RAW = "\n".join(
    [
        f"{LOOP};_ActivityWorker._execute_activity (temporalio/worker/_activity.py:712);"
        "ModelCallActivities.call_model (activities/model_call.py:62);"
        "_pump (providers/base.py:10) 30",
        f"{LOOP};_ActivityWorker._execute_activity (temporalio/worker/_activity.py:712) 5",
        "thread (2): temporal_workflow__0;_Instance._run_code (x/_runner.py:1);"
        "Importer._import (x/_importer.py:3);<module> (testing/workflows.py:1) 10",
        "thread (2): temporal_workflow__0;_Instance._run_code (x/_runner.py:1);"
        "InSandbox.activate (x/_in_sandbox.py:5) 4",
        f"{LOOP};role_context (activities/role_context.py:41) 1",
        f"{LOOP} 10",
        "garbage line without a count",
    ]
)


def test_samples_go_to_the_first_matching_category_per_call() -> None:
    got = cb.breakdown(RAW, calls=2, rate_hz=100.0)  # 10 ms a sample, over 2 calls
    assert got == {
        "provider call (activity body)": 150.0,
        "sandbox: per-run module imports": 50.0,
        cb.OTHER: 50.0,
        "Temporal activity worker": 25.0,
        "workflow code": 20.0,
        "role context read": 5.0,
    }


def test_no_call_in_the_window_is_an_error_that_says_what_to_do() -> None:
    with pytest.raises(ValueError, match="--seconds"):
        cb.breakdown(RAW, calls=0, rate_hz=100.0)


def test_a_redis_store_frame_counts_as_the_stores_not_as_what_called_it() -> None:
    raw = "\n".join(
        [
            f"{LOOP};RoleContextActivities.role_context (activities/role_context.py:41);"
            "RedisHealthStore.snapshot (stores/redis_health.py:9);"
            "Pipeline.execute (redis/asyncio/client.py:1) 3",
            f"{LOOP};ModelCallActivities.call_model (activities/model_call.py:62);"
            "RedisOutcomes.record (stores/redis_outcomes.py:5) 2",
            f"{LOOP};RoleContextActivities.role_context (activities/role_context.py:41) 1",
        ]
    )
    got = cb.breakdown(raw, calls=1, rate_hz=100.0)
    assert got == {"Redis stores (client and decoding)": 50.0, "role context read": 10.0}


def test_planning_in_first_call_is_its_own_category_beside_the_attempt_it_runs() -> None:
    """``first_call``'s own frames (the plan made in the activity) are counted apart from
    the context read and the provider call it runs."""
    raw = "\n".join(
        [
            f"{LOOP};FirstCallActivities.first_call (activities/first_call.py:60);"
            "ModelCallActivities.call_model (activities/model_call.py:62) 4",
            f"{LOOP};FirstCallActivities.first_call (activities/first_call.py:60);"
            "RoleContextActivities.role_context (activities/role_context.py:41) 2",
            f"{LOOP};FirstCallActivities._plain (activities/first_call.py:90) 1",
        ]
    )
    got = cb.breakdown(raw, calls=1, rate_hz=100.0)
    assert got == {
        "provider call (activity body)": 40.0,
        "role context read": 20.0,
        "first_call: planning in the activity": 10.0,
    }
