"""``run_agent_loop``: a bounded model → tools → model loop inside one agent step.

Each model turn is one :func:`workflows.resilient.resilient_complete` call, so a provider
outage mid-loop fails over between turns: the next route gets the whole conversation,
tool results included, and the tools already run are never run again (their results live
in workflow state and in the messages; a call the model repeats with the same arguments
at the same step gets the recorded result, not a second effect). Each tool call is an
activity keyed by :func:`resilience.saga.idempotency_key` (workflow id, step, tool,
arguments); a side-effecting tool's undo is registered in the :class:`Saga` as soon as it
succeeds, or as ``maybe_applied`` when its call failed ambiguously (timeout, retries
exhausted: the effect may stand with its answer lost), its undo keyed by the call's
idempotency key. Tool results go back as ``tool`` messages carrying the call's id (each provider
adapter maps them: OpenAI ``tool_call_id``, Anthropic ``tool_use_id``, Bedrock
``toolUseId``, Gemini ``functionResponse`` by name).

The loop ends with a reason (:class:`StopReason`): the model answered, the turn limit,
or the token / cost budget. A tool's activity takes a ``ToolCallInput`` and returns a
``ToolCallResult``; a failure is sent back to the model as the tool's result (an
``error`` object) rather than failing the step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.models import ToolCallInput, ToolCallResult
    from agent_failover.resilience.contracts import AgentOutput, ReasonCode
    from agent_failover.resilience.models import ChatRequest, Message, ToolCall, ToolSpec
    from agent_failover.resilience.options import CallOptions
    from agent_failover.resilience.saga import (
        EFFECT_ID_FIELD,
        EFFECT_KEY_FIELD,
        CompensationStatus,
        compensation_key,
    )
    from agent_failover.workflows.resilient import resilient_complete
    from agent_failover.workflows.saga import (
        Saga,
        _cause,
        maybe_applied_failure,
        workflow_idempotency_key,
    )

#: Bytes of one tool result sent back to the model (and kept in history).
MAX_TOOL_RESULT_BYTES = 8_000
DEFAULT_TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=3,
    non_retryable_error_types=["tool_rejected", "tool_bad_reply"],
)


class StopReason(StrEnum):
    ANSWERED = "answered"  # the model answered without asking for a tool
    TURN_LIMIT = "turn_limit"  # max_turns model turns, the last still asking for tools
    BUDGET = "budget"  # max_tokens or max_cost_usd spent


@dataclass
class AgentTool:
    """A tool the model may call, and the activities that run and undo it.

    ``activity`` takes a ``ToolCallInput`` (tool name, arguments, idempotency key, step)
    and returns a ``ToolCallResult``. With ``compensation`` the tool has a side effect:
    on success the saga registers ``compensation`` with a ``ToolCallInput`` for
    ``undo_tool`` whose arguments carry the created object's ``id``.
    """

    spec: ToolSpec
    activity: Callable[..., Any] | str
    compensation: Callable[..., Any] | str | None = None
    undo_tool: str | None = None
    retry_policy: RetryPolicy | None = None
    timeout: timedelta = timedelta(seconds=30)
    compensation_retry_policy: RetryPolicy | None = None


class ToolRun(BaseModel):
    """One tool call the loop ran (or refused), as kept in workflow state."""

    call_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str = ""
    turn: int
    ok: bool
    result: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    reused: bool = Field(default=False, description="same key seen earlier: not run again")


class AgentLoopResult(BaseModel):
    """The step's final output and how the loop went."""

    output: AgentOutput
    stop_reason: StopReason
    turns: int
    tool_runs: list[ToolRun] = Field(default_factory=list)
    total_tokens: int = 0
    cost_usd: float = 0.0


async def run_agent_loop(
    role: str,
    request: ChatRequest,
    *,
    tools: Sequence[AgentTool],
    saga: Saga | None = None,
    step: str | None = None,
    max_turns: int = 4,
    max_tokens: int | None = None,
    max_cost_usd: float | None = None,
    options: CallOptions | None = None,
    upstream_reasons: list[ReasonCode] | None = None,
) -> AgentLoopResult:
    """Run ``role`` with ``tools`` until it answers, ``max_turns`` or the budget ends it."""
    if max_turns < 1:
        raise ValueError("max_turns must be at least 1")
    by_name = {t.spec.name: t for t in tools}
    step = step or role
    messages = list(request.messages)
    base = request.model_copy(
        update={"tools": [t.spec for t in tools], "tool_choice": request.tool_choice or "auto"}
    )
    runs: list[ToolRun] = []
    seen: dict[str, ToolRun] = {}
    tokens, cost = 0, 0.0
    for turn in range(1, max_turns + 1):
        out = await resilient_complete(
            role,
            base.model_copy(update={"messages": list(messages)}),
            options=options,
            upstream_reasons=upstream_reasons,
        )
        tokens += out.usage.input_tokens + out.usage.output_tokens
        cost += out.cost_usd
        reason = _stop_reason(out, turn, max_turns, tokens, cost, max_tokens, max_cost_usd)
        if reason is not None:
            return AgentLoopResult(
                output=out,
                stop_reason=reason,
                turns=turn,
                tool_runs=runs,
                total_tokens=tokens,
                cost_usd=cost,
            )
        messages.append(_assistant_turn(out))
        for call in out.tool_calls:
            run = await _run_tool(call, by_name.get(call.name), step, turn, seen, saga)
            runs.append(run)
            messages.append(_tool_message(call, run))
    raise AssertionError("unreachable: the last turn always returns")  # pragma: no cover


def _stop_reason(
    out: AgentOutput,
    turn: int,
    max_turns: int,
    tokens: int,
    cost: float,
    max_tokens: int | None,
    max_cost_usd: float | None,
) -> StopReason | None:
    if not out.tool_calls:
        return StopReason.ANSWERED
    if (max_tokens is not None and tokens >= max_tokens) or (
        max_cost_usd is not None and cost >= max_cost_usd
    ):
        return StopReason.BUDGET
    if turn >= max_turns:
        return StopReason.TURN_LIMIT
    return None


async def _run_tool(
    call: ToolCall,
    tool: AgentTool | None,
    step: str,
    turn: int,
    seen: dict[str, ToolRun],
    saga: Saga | None,
) -> ToolRun:
    """Run one call once: a repeated (step, tool, arguments) reuses the recorded success."""
    key = workflow_idempotency_key(step, call.name, call.arguments)
    base = {"call_id": call.id, "tool": call.name, "arguments": call.arguments, "turn": turn}
    if tool is None:
        return ToolRun(**base, idempotency_key=key, ok=False, error=f"unknown tool {call.name}")
    if key in seen:
        return seen[key].model_copy(update={**base, "reused": True})
    try:
        inp = ToolCallInput(
            tool=call.name,
            args=call.arguments,
            idempotency_key=key,
            step=f"{step}/{call.name}",
            timeout_s=min(tool.timeout.total_seconds(), 300.0),
        )
    except ValueError as exc:  # a tool name ToolCallInput cannot carry
        return ToolRun(**base, idempotency_key=key, ok=False, error=f"bad tool call: {exc}")
    try:
        res: ToolCallResult = await workflow.execute_activity(
            tool.activity,
            inp,
            result_type=ToolCallResult,
            start_to_close_timeout=tool.timeout + timedelta(seconds=5),
            retry_policy=tool.retry_policy or DEFAULT_TOOL_RETRY,
            summary=f"{step}: tool {call.name}",
        )
    except ActivityError as exc:
        if saga is not None and tool.compensation is not None:
            _register_maybe(saga, tool, call, key, step, exc)
        return ToolRun(**base, idempotency_key=key, ok=False, error=_cause(exc))
    run = ToolRun(**base, idempotency_key=key, ok=True, result=res.result)
    if saga is not None and tool.compensation is not None:
        _register(saga, tool, call, key, step, res.result)
    seen[key] = run  # only successes are reused: a failed call may be asked for again
    return run


def _register(
    saga: Saga, tool: AgentTool, call: ToolCall, key: str, step: str, result: dict[str, Any]
) -> None:
    assert tool.compensation is not None
    for e in saga.log.entries:
        if e.effect.idempotency_key == key:
            # The same effect, asked again: one undo is enough (it is applied after all).
            if e.status is CompensationStatus.MAYBE_APPLIED:
                saga.log.confirm(key, result)
            return
    args = {EFFECT_ID_FIELD: result[EFFECT_ID_FIELD]} if EFFECT_ID_FIELD in result else {}
    _add(saga, tool, call, key, step, args, result, maybe_applied=False)


def _register_maybe(
    saga: Saga, tool: AgentTool, call: ToolCall, key: str, step: str, exc: ActivityError
) -> None:
    """The call failed ambiguously: its effect may stand, so log its undo (keyed by ``key``)."""
    policy = tool.retry_policy or DEFAULT_TOOL_RETRY
    if not maybe_applied_failure(exc, policy.non_retryable_error_types):
        return  # the tool declared "not applied" (a validation error): nothing to undo
    if any(e.effect.idempotency_key == key for e in saga.log.entries):
        return
    _add(saga, tool, call, key, step, {EFFECT_KEY_FIELD: key}, {}, maybe_applied=True)


def _add(
    saga: Saga,
    tool: AgentTool,
    call: ToolCall,
    key: str,
    step: str,
    args: dict[str, Any],
    result: dict[str, Any],
    *,
    maybe_applied: bool,
) -> None:
    assert tool.compensation is not None
    undo = tool.undo_tool or call.name
    saga.add(
        tool.compensation,
        ToolCallInput(
            tool=undo,
            args=args,
            idempotency_key=compensation_key(key, undo),
            step=f"{step}/{call.name}/compensate",
        ),
        step=f"{step}/{call.name}",
        tool=call.name,
        args=call.arguments,
        result=result,
        key=key,
        compensation_name=undo,
        compensation_args=args,
        retry_policy=tool.compensation_retry_policy,
        maybe_applied=maybe_applied,
    )


def _assistant_turn(out: AgentOutput) -> Message:
    """The answer as the assistant turn the next request carries, with its reasoning state."""
    return Message(
        role="assistant", content=out.content, tool_calls=out.tool_calls, reasoning=out.reasoning
    )


def _tool_message(call: ToolCall, run: ToolRun) -> Message:
    """The ``tool`` message answering ``call``: its result (or error), by the call's id."""
    return Message(
        role="tool", tool_call_id=call.id, tool_name=call.name, content=_tool_content(run)
    )


def _tool_content(run: ToolRun) -> str:
    """The tool message's text: the result object, or ``{"error": ...}``; bounded."""
    body: dict[str, Any] = run.result if run.ok else {"error": run.error or "failed"}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False)
    if len(text.encode()) > MAX_TOOL_RESULT_BYTES:
        text = json.dumps({"truncated": text[: MAX_TOOL_RESULT_BYTES // 2]})
    return text
