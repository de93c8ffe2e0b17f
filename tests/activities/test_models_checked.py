"""A role context built from a checked policy and role does not check them again (the
activity builds one per call, the workflow decodes one per call), and one built from data
still is; compact payloads leave out each class's own defaults."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter

import agent_failover.resilience.config.policy as policy_module
from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import (
    CallModelInput,
    CallModelResult,
    RoleContext,
    RoleContextInput,
)
from agent_failover.activities.policy_registry import policy_ref
from agent_failover.resilience.config import PolicyConfig, PolicyError
from agent_failover.resilience.contracts import HealthSnapshot
from agent_failover.resilience.models import ChatReply, ChatRequest, Message
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore
from tests.activities.test_models import _ctx

ROLE = "analyst"


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[PolicyConfig]:
    """The policies whose cross-references were checked from now on."""
    seen: list[PolicyConfig] = []
    real = policy_module._cross_reference_errors

    def counted(p: PolicyConfig) -> Any:
        seen.append(p)
        return real(p)

    monkeypatch.setattr(policy_module, "_cross_reference_errors", counted)
    return seen


def test_built_and_decoded_contexts_do_not_check_the_policy_again(
    policy: PolicyConfig, checks: list[PolicyConfig]
) -> None:
    """The activity's context (from the worker's checked subset) and the workflow's decoded
    one (from the registry's version) check nothing: the policy was checked once, when built."""
    sub = policy.subset_for(ROLE)
    PolicyConfig.model_validate(json.loads(sub.model_dump_json()))
    assert len(checks) == 1  # validating a policy from data checks it (the counter counts)
    checks.clear()
    ctx = RoleContext(
        role=sub.role(ROLE),
        policy=sub,
        snapshot=HealthSnapshot(taken_at=1.0),
        task_queue="q",
        policy_ref=policy_ref(sub),
    )
    assert ctx.policy is sub
    [payload] = pydantic_data_converter.payload_converter.to_payloads([ctx])
    [back] = pydantic_data_converter.payload_converter.from_payloads([payload], [RoleContext])
    assert back.policy == sub and back.role == sub.role(ROLE)
    assert checks == []


def test_a_policy_given_as_data_is_still_checked(policy: PolicyConfig) -> None:
    """A policy (or role) that arrives as data is validated as before: a roster naming an
    endpoint the policy lacks is refused."""
    ctx = _ctx(policy)
    data = json.loads(ctx.policy.model_dump_json())
    del data["endpoints"][ctx.role.roster.tier0[0]]
    base = {"role": ROLE, "snapshot": {"routes": {}}, "task_queue": "q", "policy_ref": "x"}
    with pytest.raises((PolicyError, ValidationError)):
        RoleContext.model_validate({**base, "policy": data})
    role = json.loads(ctx.role.model_dump_json()) | {"total_budget_ms": -1}
    with pytest.raises(ValidationError):
        RoleContext.model_validate({**base, "policy": ctx.policy, "role": role})


def test_history_never_holds_the_policy(policy: PolicyConfig) -> None:
    """The policy travels by ref (it is no longer serialized first): the payload has none,
    and the same payload as a context whose policy is dumped and dropped."""
    ctx = _ctx(policy)
    [payload] = pydantic_data_converter.payload_converter.to_payloads([ctx])
    data = json.loads(payload.data)
    assert "policy" not in data and data["policy_ref"] == ctx.policy_ref
    assert data["role"] == ROLE


def test_each_model_leaves_out_its_own_defaults_only() -> None:
    """Top-level defaults are known per class (worked out once): a result's default
    ``attempt`` and an input's unset ``output_schema`` are left out, a value that differs
    from the default travels, whichever class was written before."""
    reply = ChatReply(text="ok", endpoint="r", model="m", finish_reason="stop")
    request = ChatRequest(messages=[Message(role="user", content="hi")])
    inp = CallModelInput(
        role="plain",
        route="r",
        request=request,
        ttft_budget_ms=2000.0,
        idle_budget_ms=2000.0,
        timeout_ms=10000.0,
        now=1.0,
    )
    for _ in range(2):  # alternating classes
        plain = json.loads(CallModelResult(reply=reply).model_dump_json())
        retried = json.loads(CallModelResult(reply=reply, attempt=2, trial=True).model_dump_json())
        assert "attempt" not in plain and "trial" not in plain and "data" not in plain
        assert retried["attempt"] == 2 and retried["trial"] is True
        data = json.loads(inp.model_dump_json())
        assert "output_schema" not in data and "cache" not in data and data["route"] == "r"
        schema = {"type": "object"}
        with_schema = inp.model_copy(update={"output_schema": schema})
        assert json.loads(with_schema.model_dump_json())["output_schema"] == schema


async def test_the_activity_sends_its_role_by_name_call_after_call(policy: PolicyConfig) -> None:
    """The activity hands the context the subset's own copy of the role (found again by
    identity on the next call), so history names the role; the role is the policy's."""
    acts = LLMActivitySet(
        policy,
        httpx.AsyncClient(),
        MemoryHealthStore(),
        MemoryResponseCache(),
        task_queue_for=lambda r: "q",
    )
    for now in (1.0, 2.0):
        ctx = await acts.context.role_context(RoleContextInput(role=ROLE, now=now))
        [payload] = pydantic_data_converter.payload_converter.to_payloads([ctx])
        assert json.loads(payload.data)["role"] == ROLE
        assert ctx.role == policy.role(ROLE)
