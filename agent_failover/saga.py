"""Side effects inside workflows: compensations (saga) and tool calls inside an agent step.

For workflow code that changes the world. :class:`Saga` records an undo (an activity and
its input) after each side effect that succeeded and, on a failure or a cancellation,
runs them newest first; :func:`idempotency_key` keys an effect so a retried activity
applies it once; :func:`maybe_applied_failure` tells an ambiguous failure (the effect may
stand) from a declared "not applied". :func:`run_agent_loop` runs a bounded model → tools
→ model loop through ``resilient_complete``: each :class:`AgentTool` is an activity taking
a :class:`ToolCallInput` and returning a :class:`ToolCallResult`, its undo registered in
the saga; the loop returns an :class:`AgentLoopResult` that ends with a
:class:`StopReason`. Import inside ``workflow.unsafe.imports_passed_through()``::

    with workflow.unsafe.imports_passed_through():
        from agent_failover.saga import Saga, idempotency_key
"""

from agent_failover.activities.models import ToolCallInput, ToolCallResult
from agent_failover.resilience.saga import CompensationLog, idempotency_key
from agent_failover.workflows.agent_loop import (
    AgentLoopResult,
    AgentTool,
    StopReason,
    run_agent_loop,
)
from agent_failover.workflows.saga import Saga, maybe_applied_failure

__all__ = [
    "AgentLoopResult",
    "AgentTool",
    "CompensationLog",
    "Saga",
    "StopReason",
    "ToolCallInput",
    "ToolCallResult",
    "idempotency_key",
    "maybe_applied_failure",
    "run_agent_loop",
]
