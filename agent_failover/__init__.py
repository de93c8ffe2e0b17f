"""agent-failover: failover and graceful degradation for multi-agent LLM pipelines on Temporal.

The public surface is the names in ``__all__``; every other module is private and may
change. Workflow code::

    from agent_failover import ChatRequest, Message, resilient_complete

    out = await resilient_complete("analyst", ChatRequest(messages=[Message(role="user",
                                                                           content=task)]))
    out.content, out.capability, out.tier, out.reason_codes, out.attempts

Worker::

    Worker(client, task_queue="my-app", workflows=[MyWorkflow],
           plugins=[FailoverPlugin("policy.yaml")])

Names load on first use (PEP 562), so importing ``agent_failover`` inside Temporal's
workflow sandbox stays cheap and never pulls worker-side code into a workflow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    # the call, from workflow code
    "resilient_complete": "agent_failover.workflows.resilient",
    "CallOptions": "agent_failover.resilience.options",
    "RosterOverride": "agent_failover.resilience.options",
    "OnExhausted": "agent_failover.resilience.options",
    "ContentFilterMode": "agent_failover.resilience.config",
    "FailoverExhausted": "agent_failover.workflows.errors",
    "settle_shadows": "agent_failover.workflows.shadow",
    # side effects: the saga and tool calls inside an agent step, from workflow code
    "Saga": "agent_failover.workflows.saga",
    "idempotency_key": "agent_failover.resilience.saga",
    "maybe_applied_failure": "agent_failover.workflows.saga",
    "run_agent_loop": "agent_failover.workflows.agent_loop",
    "AgentTool": "agent_failover.workflows.agent_loop",
    "AgentLoopResult": "agent_failover.workflows.agent_loop",
    "ToolCallInput": "agent_failover.activities.models",
    "ToolCallResult": "agent_failover.activities.models",
    # request types
    "ChatRequest": "agent_failover.resilience.models",
    "Message": "agent_failover.resilience.models",
    "ToolSpec": "agent_failover.resilience.models",
    "ToolCall": "agent_failover.resilience.models",
    "Priority": "agent_failover.resilience.models",
    # result types
    "AgentOutput": "agent_failover.resilience.contracts",
    "AttemptRecord": "agent_failover.resilience.contracts",
    "Capability": "agent_failover.resilience.contracts",
    "ReasonCode": "agent_failover.resilience.contracts",
    "FinishReason": "agent_failover.resilience.models",
    "Usage": "agent_failover.resilience.models",
    # search attributes
    "upsert_failover_search_attributes": "agent_failover.workflows.search_attributes",
    "register_search_attributes": "agent_failover.workflows.search_attributes",
    "SEARCH_ATTRIBUTES": "agent_failover.workflows.search_attributes",
    "set_failover_details": "agent_failover.workflows.search_attributes",
    "pipeline_summary": "agent_failover.workflows.search_attributes",
    # escalation webhooks: check a notification's X-Failover-Signature in your receiver
    "verify_webhook_signature": "agent_failover.resilience.notify",
    # telemetry (OTEL_* environment; off unless configured)
    "setup_telemetry": "agent_failover.telemetry.setup",
    # the worker side
    "FailoverPlugin": "agent_failover.plugin",
    "connect_client": "agent_failover.connect",
    "run_and_exit": "agent_failover.connect",
    "AesGcmCodec": "agent_failover.codec",
    # policy
    "load_policy": "agent_failover.config.loader",
    "PolicyConfig": "agent_failover.resilience.config",
    "PolicyError": "agent_failover.resilience.config",
}

__all__ = [
    "SEARCH_ATTRIBUTES",
    "AesGcmCodec",
    "AgentLoopResult",
    "AgentOutput",
    "AgentTool",
    "AttemptRecord",
    "CallOptions",
    "Capability",
    "ChatRequest",
    "ContentFilterMode",
    "FailoverExhausted",
    "FailoverPlugin",
    "FinishReason",
    "Message",
    "OnExhausted",
    "PolicyConfig",
    "PolicyError",
    "Priority",
    "ReasonCode",
    "RosterOverride",
    "Saga",
    "ToolCall",
    "ToolCallInput",
    "ToolCallResult",
    "ToolSpec",
    "Usage",
    "__version__",
    "connect_client",
    "idempotency_key",
    "load_policy",
    "maybe_applied_failure",
    "pipeline_summary",
    "register_search_attributes",
    "resilient_complete",
    "run_agent_loop",
    "run_and_exit",
    "set_failover_details",
    "settle_shadows",
    "setup_telemetry",
    "upsert_failover_search_attributes",
    "verify_webhook_signature",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from agent_failover.activities.models import ToolCallInput, ToolCallResult
    from agent_failover.codec import AesGcmCodec
    from agent_failover.config.loader import load_policy
    from agent_failover.connect import connect_client, run_and_exit
    from agent_failover.plugin import FailoverPlugin
    from agent_failover.resilience.config import ContentFilterMode, PolicyConfig, PolicyError
    from agent_failover.resilience.contracts import (
        AgentOutput,
        AttemptRecord,
        Capability,
        ReasonCode,
    )
    from agent_failover.resilience.models import (
        ChatRequest,
        FinishReason,
        Message,
        Priority,
        ToolCall,
        ToolSpec,
        Usage,
    )
    from agent_failover.resilience.notify import verify_webhook_signature
    from agent_failover.resilience.options import CallOptions, OnExhausted, RosterOverride
    from agent_failover.resilience.saga import idempotency_key
    from agent_failover.telemetry.setup import setup_telemetry
    from agent_failover.workflows.agent_loop import AgentLoopResult, AgentTool, run_agent_loop
    from agent_failover.workflows.errors import FailoverExhausted
    from agent_failover.workflows.resilient import resilient_complete
    from agent_failover.workflows.saga import Saga, maybe_applied_failure
    from agent_failover.workflows.search_attributes import (
        SEARCH_ATTRIBUTES,
        pipeline_summary,
        register_search_attributes,
        set_failover_details,
        upsert_failover_search_attributes,
    )
    from agent_failover.workflows.shadow import settle_shadows


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'agent_failover' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return __all__
