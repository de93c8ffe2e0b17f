"""agent-failover for the OpenAI Agents SDK on Temporal: ``FailoverRunner`` and its model.

The Temporal integration (``temporalio-openai-agents``; temporalio 1.35's
``temporalio.contrib.openai_agents`` only forwards to it) replaces every agent's model with
a stub that runs the whole model call as ONE activity (``invoke_model_activity``), with any
fallback inside it. It cannot take a model that plans in the workflow, so this module is the
other option the integration leaves: a runner. ``FailoverRunner().run(agent, input)`` runs
the SDK's own agent loop in workflow code with every agent's model resolved by
:class:`FailoverModelProvider`: an agent's ``model`` string names its agent-failover role
(``Agent(name="triage", model="triage")``; ``None`` means the runner's ``default_role``), and
each model call is ``resilient_complete(role, ...)``: one ``call_model`` activity per
attempt. Tools made with ``activity_as_tool`` stay activities; handoffs work as usual::

    result = await FailoverRunner().run(triage_agent, input)    # was: Runner.run(...)

Keep ``OpenAIAgentsPlugin`` on the worker (sandbox passthrough, tracing, converter, tool
activities) and put ``FailoverPlugin`` after it. Each ``RunResult.raw_responses`` item is a
``FailoverModelResponse`` whose ``.failover`` is the degradation contract
(:func:`failover_outputs` collects them). Streaming (``stream_response``) is served from the
completed answer as one ``response.completed`` event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

try:
    from agents import Agent, Handoff, ModelSettings, RunConfig, RunResult, Tool
    from agents.agent_output import AgentOutputSchemaBase
    from agents.exceptions import UserError
    from agents.items import TResponseInputItem, TResponseStreamEvent
    from agents.models.fake_id import FAKE_RESPONSES_ID
    from agents.models.interface import Model, ModelProvider, ModelTracing
    from agents.run import AgentRunner
    from openai.types.responses import Response, ResponseCompletedEvent, ResponseUsage
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agent_failover.contrib.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'agent-failover[openai-agents]'"
    ) from exc
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from agent_failover.contrib._openai_agents_mapping import (
    FailoverModelResponse,
    UnsupportedInputItem,
    to_chat_request,
    to_model_response,
)
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest
from agent_failover.resilience.options import CallOptions

__all__ = [
    "FailoverModel",
    "FailoverModelProvider",
    "FailoverModelResponse",
    "FailoverRunner",
    "UnsupportedInputItem",
    "failover_outputs",
]

#: ``complete(role, request, options)``: ``resilient_complete`` by default; tests inject fakes.
Complete = Callable[[str, ChatRequest, CallOptions | None], Awaitable[AgentOutput]]


async def _resilient_complete(
    role: str, request: ChatRequest, options: CallOptions | None
) -> AgentOutput:
    if not workflow.in_workflow():
        raise UserError(
            "FailoverModel answers from Temporal workflow code only (each attempt is an "
            "activity): run the agent with FailoverRunner in a workflow, or pass complete="
        )
    from agent_failover.workflows.resilient import resilient_complete

    return await resilient_complete(role, request, options=options)


class FailoverModel(Model):
    """An Agents SDK model answering through agent-failover's plan for ``role``."""

    def __init__(
        self, role: str, *, options: CallOptions | None = None, complete: Complete | None = None
    ) -> None:
        if not role:
            raise UserError("FailoverModel needs a role of the policy")
        self.role = role
        self.options = options
        self._complete = complete or _resilient_complete

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> FailoverModelResponse:
        """One model call through ``resilient_complete`` (the attempts are activities)."""
        if prompt is not None:
            raise UnsupportedInputItem("stored prompts (prompt=) are OpenAI-only; not supported")
        request = to_chat_request(
            system_instructions, input, model_settings, tools, output_schema, handoffs
        )
        return to_model_response(await self._complete(self.role, request, self.options))

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The completed answer as one ``response.completed`` event."""
        answer = await self.get_response(
            system_instructions, input, model_settings, tools, output_schema, handoffs, tracing,
            previous_response_id=previous_response_id, conversation_id=conversation_id,
            prompt=prompt,
        )  # fmt: skip
        yield ResponseCompletedEvent(
            type="response.completed", sequence_number=0, response=self._response(answer)
        )

    def _response(self, answer: FailoverModelResponse) -> Response:
        now = workflow.now().timestamp() if workflow.in_workflow() else 0.0
        out = answer.failover
        usage = answer.usage
        return Response(
            id=FAKE_RESPONSES_ID,
            created_at=now,
            model=(out.model if out and out.model else f"failover:{self.role}"),
            object="response",
            output=answer.output,
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
            usage=ResponseUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.total_tokens,
                # the SDK's own zero details, valid for its openai version
                input_tokens_details=usage.input_tokens_details,
                output_tokens_details=usage.output_tokens_details,
            ),
        )


class FailoverModelProvider(ModelProvider):
    """Resolves an agent's ``model`` string to the :class:`FailoverModel` of that role."""

    def __init__(
        self,
        default_role: str | None = None,
        *,
        options: CallOptions | None = None,
        complete: Complete | None = None,
    ) -> None:
        self.default_role = default_role
        self.options = options
        self._complete = complete

    def get_model(self, model_name: str | None) -> Model:
        role = model_name or self.default_role
        if not role:
            raise UserError(
                "an agent has no model: set Agent(model='<role>') or FailoverRunner(default_role=)"
            )
        return FailoverModel(role, options=self.options, complete=self._complete)


class FailoverRunner:
    """Runs an agent (and its handoffs) with every model call through agent-failover.

    ``default_role`` answers for agents whose ``model`` is None; ``options`` apply to every
    call. Raises ``ApplicationError`` (type ``agents_user_error``, non-retryable) in a
    workflow for an SDK usage error, so the run fails instead of retrying its task forever.
    """

    def __init__(
        self,
        default_role: str | None = None,
        *,
        options: CallOptions | None = None,
        complete: Complete | None = None,
    ) -> None:
        self.provider = FailoverModelProvider(default_role, options=options, complete=complete)

    async def run(
        self,
        starting_agent: Agent[Any],
        input: str | list[TResponseInputItem],
        **kwargs: Any,
    ) -> RunResult:
        """``Runner.run`` with agent-failover as every agent's model (kwargs as for Runner.run)."""
        config = kwargs.pop("run_config", None) or RunConfig()
        if isinstance(config, dict):
            config = RunConfig(**config)
        if config.model is not None and not isinstance(config.model, str):
            raise UserError("RunConfig.model must be a role name (str) with FailoverRunner")
        _check_models(starting_agent, set())
        config = dataclasses.replace(config, model_provider=self.provider)
        try:
            return await AgentRunner().run(starting_agent, input, run_config=config, **kwargs)
        except UserError as exc:
            if not workflow.in_workflow():
                raise
            raise ApplicationError(
                f"{type(exc).__name__}: {exc}", type="agents_user_error", non_retryable=True
            ) from exc


def _check_models(agent: Agent[Any], seen: set[int]) -> None:
    """Every agent reachable by direct handoff names a role (or is already ours)."""
    if id(agent) in seen:
        return
    seen.add(id(agent))
    if agent.model is not None and not isinstance(agent.model, str | FailoverModel):
        raise UserError(
            f"agent {agent.name!r} has a {type(agent.model).__name__} model instance; with "
            "FailoverRunner an agent's model is its role name, e.g. Agent(model='triage')"
        )
    for target in agent.handoffs:
        if isinstance(target, Agent):
            _check_models(target, seen)


def failover_outputs(result: RunResult) -> list[AgentOutput]:
    """The degradation contract of every model call of a run, oldest first."""
    return [
        r.failover
        for r in result.raw_responses
        if isinstance(r, FailoverModelResponse) and r.failover is not None
    ]
