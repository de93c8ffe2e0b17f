"""Answer-quality activities: grade an answer, run one golden item on one route.

``score_answer`` grades an answer with a :class:`~resilience.quality.ScorerSpec`:
``exact`` / ``normalized`` / ``json`` in-process, ``judge`` by one model call to the
judge route (the spec's ``judge_route``, else the policy's ``qualification.judge_route``)
through the same provider adapters as every other call. ``qualify_item`` sends one golden
item to one candidate route — with the route's own prompt variant and structured-output
path, as a real call would get — checks the reply against the role's output schema, grades
it and returns a small :class:`~resilience.qualification.ItemResult`: the answer itself
never enters workflow history beyond a short excerpt.

Qualification traffic does not feed the health store or the breakers: it measures a
route's quality on purpose, including routes a breaker keeps out of real traffic.
Transient provider errors (429, 5xx, overload, timeouts) are raised for Temporal to
retry while attempts remain (``max_attempts``); on the last attempt the error becomes
the item's result (``ok`` false, score 0), so a dead route is measured, not retried forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.providers.validate import validate_reply
from agent_failover.resilience.config import PolicyConfig, PolicyError, RolePolicy
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.errors import ProviderError, SemanticError
from agent_failover.resilience.limits import clip
from agent_failover.resilience.models import ChatReply, ChatRequest, Message
from agent_failover.resilience.prompts import apply_prompt, choose_prompt, structured_path
from agent_failover.resilience.qualification import (
    ANSWER_EXCERPT_CHARS,
    MAX_GOLDEN_PROMPT_CHARS,
    GoldenItem,
    ItemResult,
)
from agent_failover.resilience.quality import (
    ScoreResult,
    ScorerSpec,
    judge_request,
    parse_judge,
    score_local,
)

#: Error type of a scorer/judge configuration problem (no retry can fix it).
QUALITY_CONFIG_ERROR = "quality_config_error"
#: Largest answer an activity input may carry to be graded (characters).
MAX_SCORED_ANSWER_CHARS = 64_000
DEFAULT_JUDGE_TIMEOUT_S = 30.0


class ScoreAnswerInput(BaseModel):
    """An answer to grade against its expected answer."""

    spec: ScorerSpec
    prompt: str = Field(default="", max_length=MAX_GOLDEN_PROMPT_CHARS)
    expected: Any = None
    answer: str = Field(max_length=MAX_SCORED_ANSWER_CHARS)
    timeout_s: float = Field(default=DEFAULT_JUDGE_TIMEOUT_S, gt=0, le=600)


class QualifyItemInput(BaseModel):
    """One golden item to run on one candidate route of a role."""

    role: str
    route: str
    item: GoldenItem
    scorer: ScorerSpec = Field(description="the set's scorer; item.scorer overrides it")
    timeout_s: float = Field(gt=0, le=600)
    max_attempts: int = Field(default=3, ge=1, le=10)


class QualityActivities:
    """Grading activities bound to one worker's policy and HTTP client."""

    def __init__(
        self, policy: PolicyConfig, http: httpx.AsyncClient, *, connect_timeout_s: float = 5.0
    ) -> None:
        self._policy = policy
        self._http = http
        self._connect_s = connect_timeout_s

    def all(self) -> list[Callable[..., Any]]:
        """Every activity of this class, for worker registration."""
        return [self.score_answer, self.qualify_item]

    @activity.defn(name="score_answer")
    async def score_answer(self, inp: ScoreAnswerInput) -> ScoreResult:
        """Grade one answer: locally, or by the judge route for ``kind: judge``."""
        return await self._score(inp.spec, inp.prompt, inp.expected, inp.answer, inp.timeout_s)

    @activity.defn(name="qualify_item")
    async def qualify_item(self, inp: QualifyItemInput) -> ItemResult:
        """Run one golden item on one route and grade the answer."""
        endpoint, role = self._resolve(inp.route, inp.role)
        spec = inp.item.scorer or inp.scorer
        schema = spec.json_schema or role.output_schema
        request = ChatRequest(
            system=inp.item.system,
            messages=[Message(role="user", content=inp.item.prompt)],
            max_tokens=inp.item.max_tokens,
            temperature=0.0,
            json_schema=schema,
            tools=list(role.tools),
        )
        # The route gets what it would get in production: its prompt variant (unless the
        # item sets its own system prompt) and native or prompted structured output.
        choice = None if inp.item.system is not None else choose_prompt(role, endpoint)
        request = apply_prompt(request, choice, structured_path(endpoint, schema))
        started = time.monotonic()
        try:
            reply = await complete(self._http, endpoint, request, self._budgets(inp.timeout_s))
        except ProviderError as err:
            return self._failed(inp, err)
        latency_ms = reply.latency_ms or (time.monotonic() - started) * 1000
        schema_ok = _schema_ok(reply, schema, inp.route, role.max_reply_bytes)
        score = await self._score(
            spec, inp.item.prompt, inp.item.expected, reply.text, inp.timeout_s
        )
        return ItemResult(
            item_id=inp.item.id,
            route=inp.route,
            ok=True,
            latency_ms=round(latency_ms, 1),
            schema_ok=schema_ok,
            score=score.score,
            passed=score.passed,
            detail=score.detail,
            answer_excerpt=clip(reply.text, ANSWER_EXCERPT_CHARS),
        )

    # -- helpers ------------------------------------------------------------------------

    def _resolve(self, route: str, role_name: str) -> tuple[EndpointConfig, RolePolicy]:
        try:
            return self._policy.endpoint(route), self._policy.role(role_name)
        except PolicyError as exc:
            raise ApplicationError(str(exc), type=QUALITY_CONFIG_ERROR, non_retryable=True) from exc

    def _endpoint(self, route: str) -> EndpointConfig:
        try:
            return self._policy.endpoint(route)
        except PolicyError as exc:
            raise ApplicationError(str(exc), type=QUALITY_CONFIG_ERROR, non_retryable=True) from exc

    def _budgets(self, timeout_s: float) -> Budgets:
        return Budgets(
            connect_s=min(self._connect_s, timeout_s),
            ttft_s=timeout_s,
            idle_s=timeout_s,
            total_s=timeout_s,
        )

    def _failed(self, inp: QualifyItemInput, err: ProviderError) -> ItemResult:
        """Raise a transient error for Temporal to retry; on the last attempt record it."""
        if err.retryable and not err.classification.semantic:
            if activity.info().attempt < inp.max_attempts:
                delay = timedelta(seconds=err.retry_after) if err.retry_after else None
                raise ApplicationError(
                    str(err), type=err.error_class.value, next_retry_delay=delay
                ) from err
        return ItemResult(
            item_id=inp.item.id,
            route=inp.route,
            ok=False,
            error_class=err.error_class.value,
            detail=clip(str(err), 200),
        )

    async def _score(
        self, spec: ScorerSpec, prompt: str, expected: Any, answer: str, timeout_s: float
    ) -> ScoreResult:
        if spec.kind != "judge":
            return score_local(spec, expected, answer)
        route = spec.judge_route or self._policy.qualification.judge_route
        if route is None:
            raise ApplicationError(
                "scorer kind 'judge' needs a judge route: set qualification.judge_route in "
                "the policy or judge_route in the scorer",
                type=QUALITY_CONFIG_ERROR,
                non_retryable=True,
            )
        endpoint = self._endpoint(route)
        request = judge_request(
            prompt, expected, answer, structured=endpoint.capabilities.structured_output
        )
        try:
            reply = await complete(self._http, endpoint, request, self._budgets(timeout_s))
        except ProviderError as err:
            # The judge failing says nothing about the answer: let Temporal retry it.
            raise ApplicationError(
                f"judge route {route!r} failed: {err}", type=err.error_class.value
            ) from err
        return parse_judge(reply.text, spec.pass_threshold)


def _schema_ok(
    reply: ChatReply, schema: dict[str, Any] | None, route: str, max_bytes: int
) -> bool | None:
    """Schema compliance of the reply (None when the role asks for no schema)."""
    if schema is None:
        return None
    try:
        validate_reply(reply, schema, endpoint=route, max_reply_bytes=max_bytes)
    except SemanticError:
        return False
    return True
