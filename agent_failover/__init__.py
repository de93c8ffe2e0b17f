"""agent-failover: failover and graceful degradation for multi-agent LLM pipelines on Temporal.

The public surface is the names in ``__all__`` plus four documented submodules; every
other module is private and may change. Workflow code::

    from agent_failover import ChatRequest, Message, resilient_complete

    out = await resilient_complete("analyst", ChatRequest(messages=[Message(role="user",
                                                                           content=task)]))
    out.content, out.capability, out.tier, out.reason_codes, out.attempts
    out = (await escalate("analysis", out, state={"task": task})).output  # a human if needed

Worker::

    Worker(client, task_queue="my-app", workflows=[MyWorkflow],
           plugins=[FailoverPlugin("policy.yaml")])

Specialised names live in submodules: :mod:`agent_failover.saga` (compensations and tool
calls inside an agent step), :mod:`agent_failover.visibility` (search attributes and the
``failover_history`` query's types), :mod:`agent_failover.testing` (the simulator and test
workers) and :mod:`agent_failover.contrib` (PydanticAI and OpenAI Agents SDK models).

Names load on first use (PEP 562), so importing ``agent_failover`` inside Temporal's
workflow sandbox stays cheap and never pulls worker-side code into a workflow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: The one list of the public names: name -> the private module that defines it.
#: ``__all__`` is built from it. The ``TYPE_CHECKING`` imports below mirror it for type
#: checkers and IDEs, as explicit re-exports (``X as X``) since ``__all__`` is computed;
#: tests/test_facade.py checks that they match the mapping exactly.
_EXPORTS: dict[str, str] = {
    # the call, from workflow code
    "resilient_complete": "agent_failover.workflows.resilient",
    "CallOptions": "agent_failover.resilience.options",
    "RosterOverride": "agent_failover.resilience.options",
    "OnExhausted": "agent_failover.resilience.options",
    "ContentFilterMode": "agent_failover.resilience.config",
    "FailoverExhausted": "agent_failover.workflows.errors",
    "settle_shadows": "agent_failover.workflows.shadow",
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
    # escalation for any workflow: pause for a human, resolve by update, page on-call
    "escalate": "agent_failover.workflows.escalate",
    "EscalationHandlers": "agent_failover.workflows.escalate",
    "EscalationOutcome": "agent_failover.workflows.models",
    "EscalationDecision": "agent_failover.workflows.models",
    "EscalationAction": "agent_failover.workflows.models",
    "EscalationTimeoutAction": "agent_failover.workflows.models",
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
    # set-up errors (policy, search attributes, Temporal, Redis, extras): one root
    "SetupError": "agent_failover.resilience.setup_errors",
}

__all__ = ["__version__", *sorted(_EXPORTS)]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from agent_failover.codec import AesGcmCodec as AesGcmCodec
    from agent_failover.config.loader import load_policy as load_policy
    from agent_failover.connect import connect_client as connect_client
    from agent_failover.connect import run_and_exit as run_and_exit
    from agent_failover.plugin import FailoverPlugin as FailoverPlugin
    from agent_failover.resilience.config import ContentFilterMode as ContentFilterMode
    from agent_failover.resilience.config import PolicyConfig as PolicyConfig
    from agent_failover.resilience.config import PolicyError as PolicyError
    from agent_failover.resilience.contracts import AgentOutput as AgentOutput
    from agent_failover.resilience.contracts import AttemptRecord as AttemptRecord
    from agent_failover.resilience.contracts import Capability as Capability
    from agent_failover.resilience.contracts import ReasonCode as ReasonCode
    from agent_failover.resilience.models import ChatRequest as ChatRequest
    from agent_failover.resilience.models import FinishReason as FinishReason
    from agent_failover.resilience.models import Message as Message
    from agent_failover.resilience.models import Priority as Priority
    from agent_failover.resilience.models import ToolCall as ToolCall
    from agent_failover.resilience.models import ToolSpec as ToolSpec
    from agent_failover.resilience.models import Usage as Usage
    from agent_failover.resilience.notify import (
        verify_webhook_signature as verify_webhook_signature,
    )
    from agent_failover.resilience.options import CallOptions as CallOptions
    from agent_failover.resilience.options import OnExhausted as OnExhausted
    from agent_failover.resilience.options import RosterOverride as RosterOverride
    from agent_failover.resilience.setup_errors import SetupError as SetupError
    from agent_failover.telemetry.setup import setup_telemetry as setup_telemetry
    from agent_failover.workflows.errors import FailoverExhausted as FailoverExhausted
    from agent_failover.workflows.escalate import EscalationHandlers as EscalationHandlers
    from agent_failover.workflows.escalate import escalate as escalate
    from agent_failover.workflows.models import EscalationAction as EscalationAction
    from agent_failover.workflows.models import EscalationDecision as EscalationDecision
    from agent_failover.workflows.models import EscalationOutcome as EscalationOutcome
    from agent_failover.workflows.models import (
        EscalationTimeoutAction as EscalationTimeoutAction,
    )
    from agent_failover.workflows.resilient import resilient_complete as resilient_complete
    from agent_failover.workflows.shadow import settle_shadows as settle_shadows


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
