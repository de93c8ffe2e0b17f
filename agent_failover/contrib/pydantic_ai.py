"""agent-failover as a PydanticAI model, and its Temporal paths (capability and agent).

``FailoverModel(role)`` is a ``pydantic_ai.models.Model`` whose requests run
``resilient_complete(role, ...)`` from workflow code: each attempt is one ``call_model``
activity (route, tier and outcome in the Temporal UI), breakers and latency are shared by
every worker, and the answer carries its degradation contract in
``ModelResponse.provider_details["agent_failover"]`` (read it back with
:func:`failover_outputs`). Streaming (``request_stream``) is served from the completed
answer: one stream that replays the finished response's parts (no token-by-token deltas;
the attempts stream inside their activities).

``FailoverDurability`` is PydanticAI's current Temporal path, its ``TemporalDurability``
capability, with one difference: a request whose model is a ``FailoverModel`` runs in
workflow code instead of in PydanticAI's model activity (ours are the activities); tools
still run as PydanticAI's tool activities, and any other model keeps PydanticAI's activity::

    agent = Agent(FailoverModel("support"), name="support", tools=[...],
                  capabilities=[FailoverDurability()])   # was: TemporalDurability()

``FailoverTemporalAgent`` is PydanticAI's deprecated ``TemporalAgent`` with the same
difference: model
requests are NOT wrapped in PydanticAI's own model activity (ours are the activities);
tools still run as PydanticAI's tool activities. A plain ``TemporalAgent`` around a
``FailoverModel`` would call it inside that one activity, where no workflow runs::

    agent = Agent(FailoverModel("support"), name="support", tools=[...])
    temporal_agent = FailoverTemporalAgent(agent)      # was: TemporalAgent(agent)

The worker carries ``PydanticAIPlugin`` (or ``AgentPlugin``) and ``FailoverPlugin``.
Message mapping rules are in :mod:`agent_failover.contrib._pydantic_ai_mapping`.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

try:
    from pydantic_ai.durable_exec.temporal import TemporalAgent, TemporalDurability
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models import (
        CompletedStreamedResponse,
        Model,
        ModelRequestContext,
        ModelRequestParameters,
        StreamedResponse,
    )
    from pydantic_ai.models.wrapper import WrapperModel
    from pydantic_ai.profiles import ModelProfile, ModelProfileSpec
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import RunContext
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agent_failover.contrib.pydantic_ai needs PydanticAI with its Temporal support: "
        "pip install 'agent-failover[pydantic-ai]'"
    ) from exc
from temporalio import workflow

from agent_failover.contrib._pydantic_ai_mapping import (
    PROVIDER_NAME,
    UnsupportedMessagePart,
    contract_of,
    to_chat_request,
    to_model_response,
)
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest
from agent_failover.resilience.options import CallOptions

__all__ = [
    "FailoverDurability",
    "FailoverModel",
    "FailoverTemporalAgent",
    "UnsupportedMessagePart",
    "failover_outputs",
]

#: ``complete(role, request, options)``: ``resilient_complete`` by default; tests inject fakes.
Complete = Callable[[str, ChatRequest, CallOptions | None], Awaitable[AgentOutput]]

#: What agent-failover's request can carry: tools, JSON-schema output (validated per
#: attempt, so native structured output is the default), text only.
FAILOVER_PROFILE = ModelProfile(
    supports_tools=True,
    supports_json_schema_output=True,
    supports_json_object_output=False,
    default_structured_output_mode="native",
    supports_image_output=False,
    supports_inline_system_prompts=False,
)


async def _resilient_complete(
    role: str, request: ChatRequest, options: CallOptions | None
) -> AgentOutput:
    if not workflow.in_workflow():
        raise UserError(
            "FailoverModel answers from Temporal workflow code only (each attempt is an "
            "activity): give the agent capabilities=[FailoverDurability()] (not "
            "TemporalDurability) or wrap it in FailoverTemporalAgent, or pass complete= for "
            "use elsewhere"
        )
    from agent_failover.workflows.resilient import resilient_complete

    return await resilient_complete(role, request, options=options)


class FailoverModel(Model):
    """A PydanticAI model answering through agent-failover's plan for ``role``."""

    # agent-failover's request carries text only: PydanticAI then replaces a tool's file
    # with a note instead of sending something the mapping would refuse.
    _unsupported_file_inputs = frozenset({"image", "document", "audio", "video"})

    def __init__(
        self,
        role: str,
        *,
        options: CallOptions | None = None,
        complete: Complete | None = None,
        settings: ModelSettings | None = None,
        profile: ModelProfileSpec | None = None,
    ) -> None:
        if not role:
            raise UserError("FailoverModel needs the agent's role (a role of the policy)")
        self.role = role
        self.options = options
        self._complete = complete or _resilient_complete
        super().__init__(settings=settings, profile=profile)

    @property
    def model_name(self) -> str:
        """``failover:<role>``; each answer names the model of the route that answered."""
        return f"failover:{self.role}"

    @property
    def system(self) -> str:
        return PROVIDER_NAME

    def _provider_model_profile(self) -> ModelProfile:
        return FAILOVER_PROFILE

    def __repr__(self) -> str:
        return f"FailoverModel(role={self.role!r})"

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """One agent turn through ``resilient_complete`` (attempts are activities)."""
        model_settings, params = self.prepare_request(model_settings, model_request_parameters)
        instructions = [p.content for p in self._get_instruction_parts(messages, params) or []]
        request = to_chat_request(messages, model_settings, params, instructions)
        out = await self._complete(self.role, request, self.options)
        now = workflow.now() if workflow.in_workflow() else datetime.now(tz=UTC)
        name = out.model or out.route or f"{out.capability.value}:{self.role}"
        return to_model_response(out, model_name=name, timestamp=now)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        """The completed answer as one event stream (its parts replayed as events)."""
        response = await self.request(messages, model_settings, model_request_parameters)
        _, params = self.prepare_request(model_settings, model_request_parameters)
        yield CompletedStreamedResponse(
            response, model_request_parameters=params, replay_events=True
        )


class _WorkflowSideModel(WrapperModel):
    """TemporalAgent's model, except that FailoverModel requests run in workflow code."""

    def __init__(self, temporal_model: Model, failover: FailoverModel) -> None:
        super().__init__(temporal_model)
        self._failover = failover

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        return await self._failover.request(messages, model_settings, model_request_parameters)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        async with self._failover.request_stream(
            messages, model_settings, model_request_parameters, run_context
        ) as stream:
            yield stream


# PydanticAI deprecates TemporalAgent in favour of its TemporalDurability capability and
# warns on every subclass definition; that warning is about our base class, not user code.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")

    class _TemporalAgentBase(TemporalAgent):  # type: ignore[misc]
        def __init_subclass__(cls, **kwargs: Any) -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                super().__init_subclass__(**kwargs)


class FailoverTemporalAgent(_TemporalAgentBase):
    """A ``TemporalAgent`` whose ``FailoverModel`` runs in workflow code, not in one activity.

    Same arguments as ``TemporalAgent``; the wrapped agent's model must be a
    :class:`FailoverModel` and ``models=`` (run-time model switching) is refused — choose
    routes per call with ``FailoverModel(role, options=CallOptions(roster=...))``.
    PydanticAI's model activities are not registered; tool (and MCP) activities are.
    """

    def __init__(self, wrapped: Any, **kwargs: Any) -> None:
        model = wrapped.model
        if not isinstance(model, FailoverModel):
            raise UserError(
                f"FailoverTemporalAgent needs an agent whose model is a FailoverModel, "
                f"got {type(model).__name__}: Agent(FailoverModel('<role>'), ...)"
            )
        if kwargs.get("models"):
            raise UserError(
                "FailoverTemporalAgent does not switch models at run time: the role's policy "
                "picks routes (per call: FailoverModel(role, options=CallOptions(roster=...)))"
            )
        super().__init__(wrapped, **kwargs)
        pydantic_model_activities = set(self._temporal_model.temporal_activities)
        self._temporal_activities = [
            a for a in self._temporal_activities if a not in pydantic_model_activities
        ]
        self._temporal_model = _WorkflowSideModel(self._temporal_model, model)


def _failover_model_in(model: Model | None) -> FailoverModel | None:
    """The ``FailoverModel`` ``model`` is or wraps (an ``InstrumentedModel``, ...), if any."""
    while model is not None:
        if isinstance(model, FailoverModel):
            return model
        model = model.wrapped if isinstance(model, WrapperModel) else None
    return None


class FailoverDurability(TemporalDurability):  # type: ignore[misc]
    """PydanticAI's ``TemporalDurability``; ``FailoverModel`` requests stay in the workflow.

    Same arguments as ``TemporalDurability``. Inside a workflow, PydanticAI would wrap each
    model request in one model activity; a request whose model is (or wraps) a
    :class:`FailoverModel` is instead sent from workflow code, where ``resilient_complete``
    runs each attempt as its own ``call_model`` activity. Requests on any other model (say,
    one registered with ``models=`` and picked at run time) keep PydanticAI's activity; tools
    run as PydanticAI's tool activities either way. Register the worker's activities with
    ``AgentPlugin(agent)`` or ``PydanticAIPlugin`` (``__pydantic_ai_agents__``): PydanticAI's
    model activities stay registered but a ``FailoverModel`` never calls them.
    """

    # Both durable entry points (``wrap_model_request`` and the repair in
    # ``before_model_request`` / ``prepare_model_request``) build the durable model here,
    # in every release of the extra's range (the contrib tests run at both ends).
    async def _build_durable_model(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> Model:
        if _failover_model_in(request_context.model) is None:
            return await super()._build_durable_model(ctx, request_context)
        self._validate_model_request_parameters(request_context.model_request_parameters)
        return request_context.model


def failover_outputs(source: Any) -> list[AgentOutput]:
    """The degradation contract of every agent-failover answer in a run, oldest first.

    ``source`` is a run result (``AgentRunResult``: its ``all_messages()``) or a message list.
    """
    messages: Iterable[Any] = source.all_messages() if hasattr(source, "all_messages") else source
    outputs = []
    for message in messages:
        if isinstance(message, ModelResponse) and (out := contract_of(message)) is not None:
            outputs.append(out)
    return outputs
