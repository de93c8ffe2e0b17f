"""``failover dev`` / ``demo`` use only the routes whose extras are installed: a route that
can never answer (Bedrock without botocore) would keep its breaker open and stall the
demo's recovery. Missing modules are simulated; the stack says which route it left out,
why, and what to install."""

from __future__ import annotations

import gc
import uuid

import pytest

from agent_failover.cli.devstack import start_stack
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.providers import extras
from agent_failover.testing.servers import free_port

BEDROCK = "bedrock-us-west-2"


def _without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """As if ``modules`` (and their submodules) were not installed."""
    real = extras._installed

    def installed(module: str) -> bool:
        gone = any(module == m or module.startswith(m + ".") for m in modules)
        return not gone and real(module)

    monkeypatch.setattr(extras, "_installed", installed)


def _routes(policy) -> set[str]:  # type: ignore[no-untyped-def]
    return {r for role in policy.roles.values() for r in role.roster.routes()}


def test_routes_without_their_extra_are_left_out_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = load_policy(DEFAULT_POLICY_PATH)
    assert BEDROCK in policy.endpoints and BEDROCK in _routes(policy)
    same, notes = extras.without_missing_extras(policy)
    assert same is policy and notes == []  # everything installed (the dev extra)
    _without(monkeypatch, "botocore")
    kept, notes = extras.without_missing_extras(policy)
    assert BEDROCK not in kept.endpoints and BEDROCK not in _routes(kept)
    assert set(kept.endpoints) == set(policy.endpoints) - {BEDROCK}
    assert len(notes) == 1 and notes[0].startswith(f"{BEDROCK}: ")
    assert "'botocore'" in notes[0] and "pip install 'agent-failover[bedrock]'" in notes[0]


async def test_the_dev_stack_serves_only_installed_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch, "botocore", "google.auth")
    gc.collect()  # see tests/cli/test_stackfile_state.py (temporalio/sdk-python#585)
    stack = await start_stack(
        temporal_port=free_port(), ui=False, clean=False, monitor=False, persist=False,
        namespace=f"extras-{uuid.uuid4().hex[:8]}", task_queue=f"extras-{uuid.uuid4().hex[:8]}",
    )  # fmt: skip
    try:
        assert BEDROCK not in stack.policy.endpoints and BEDROCK not in _routes(stack.policy)
        assert BEDROCK not in stack.deps.policy.endpoints  # what the workers serve
        assert [line.split(":")[0] for line in stack.left_out] == [BEDROCK]
    finally:
        await stack.stop()


async def test_the_dev_stack_runs_a_users_policy_without_the_pipeline() -> None:
    """``failover dev --policy`` with a policy lacking the pipeline's roles serves it
    (without the bundled pipeline) instead of refusing it."""
    user_policy = DEFAULT_POLICY_PATH.parents[1] / "examples" / "support_triage" / "config"
    gc.collect()
    stack = await start_stack(
        policy_path=user_policy / "policy.yaml", temporal_port=free_port(), ui=False,
        clean=False, monitor=False, persist=False, namespace=f"user-{uuid.uuid4().hex[:8]}",
        task_queue=f"user-{uuid.uuid4().hex[:8]}",
    )  # fmt: skip
    try:
        assert set(stack.policy.roles) == {"triage"} and stack.workers
    finally:
        await stack.stop()
