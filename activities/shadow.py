"""Shadow evaluation, the IO side: re-run a sampled call on the reference route and grade.

``shadow_evaluate`` runs on the deployment's low-priority ``<queue>-shadow`` task queue
(started by a :class:`~workflows.shadow.ShadowEvaluationWorkflow`, never awaited by the
pipeline). It asks the role's reference route the same request, grades the answering
route's answer against the reference answer with the role's scorer (the qualification
scorer, :mod:`resilience.quality`), appends the agreement to the route's rolling quality
window in the health store, and re-evaluates the route's ``QUALITY_REGRESSION`` verdict
(:func:`resilience.shadow.evaluate_quality`), persisting and announcing a change. Routes
already regressed are asked too (their only traffic while demoted), so they can earn
their way back. Shadow calls never enter the routes' breaker windows: they are not the
pipeline's traffic, and a reference route that is down just skips the comparison.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field
from temporalio import activity

from agent_failover.activities.health_models import QualityRow
from agent_failover.resilience.config import (
    DEFAULT_MAX_REPLY_BYTES,
    PolicyConfig,
    ShadowSettings,
    role_scorer,
)
from agent_failover.resilience.contracts import BreakerState
from agent_failover.resilience.errors import ProviderError
from agent_failover.resilience.limits import clip
from agent_failover.resilience.models import ChatRequest
from agent_failover.resilience.quality import (
    ScoreResult,
    ScorerSpec,
    judge_request,
    parse_judge,
    score_local,
)
from agent_failover.resilience.shadow import QualitySample, evaluate_quality
from agent_failover.telemetry import record

if TYPE_CHECKING:
    import httpx

    from agent_failover.stores.health import HealthStore

log = logging.getLogger(__name__)

#: Characters of an answer carried in a shadow input or result (they enter history).
MAX_SHADOW_TEXT_CHARS = 16_000
CONNECT_TIMEOUT_S = 5.0


class ShadowInput(BaseModel):
    """One sampled call to compare: the request, who answered and what it said."""

    role: str
    request: ChatRequest
    answered_by: str
    answer: str = Field(description="the answering route's text (clipped)")
    targets: list[str] = Field(description="routes to grade: the answering one, regressed ones")
    now: float = Field(description="workflow time the evaluation started")
    timeout_s: float = Field(default=60.0, gt=0.0, description="each call's timeout")


class ShadowSample(BaseModel):
    """One route graded against the reference, and the verdict it left."""

    route: str
    score: float | None = None
    detail: str = ""
    regressed: bool = False
    changed: bool = False


class ShadowResult(BaseModel):
    """What one shadow evaluation did (``skipped`` says why nothing was compared)."""

    role: str
    reference_route: str
    samples: list[ShadowSample] = Field(default_factory=list)
    skipped: str | None = None


class ShadowActivities:
    """The shadow-evaluation activity, bound to one worker's policy, HTTP client and store."""

    def __init__(
        self, policy: PolicyConfig, http: httpx.AsyncClient, health: HealthStore | None
    ) -> None:
        self._policy = policy
        self._http = http
        self._health = health

    def bind_store(self, health: HealthStore) -> None:
        """Attach the health store once it is connected (the plugin connects it at run)."""
        self._health = health

    @activity.defn(name="shadow_evaluate")
    async def shadow_evaluate(self, inp: ShadowInput) -> ShadowResult:
        """Ask the reference route, grade every target against it, update the verdicts."""
        role = self._policy.role(inp.role)
        shadow = role.shadow
        if shadow is None:
            return ShadowResult(role=inp.role, reference_route="", skipped="no shadow settings")
        ref = shadow.reference_route
        started = time.monotonic()
        ref_breaker = await self._health.breaker(ref)
        if ref_breaker.state in (BreakerState.OPEN, BreakerState.FORCED_OPEN):
            why = f"reference route {ref!r} is {ref_breaker.state.value}"
            return ShadowResult(role=inp.role, reference_route=ref, skipped=why)
        ask = (shadow.timeout_s, role.max_reply_bytes)
        reference, err = await self._ask(ref, inp.request, *ask)
        if reference is None:
            return ShadowResult(role=inp.role, reference_route=ref, skipped=f"reference: {err}")
        spec = role_scorer(role, shadow.scorer)
        out = ShadowResult(role=inp.role, reference_route=ref)
        for route in inp.targets:
            answer: str | None = inp.answer
            if route != inp.answered_by:
                answer, err = await self._ask(route, inp.request, *ask)
            if answer is None:
                out.samples.append(ShadowSample(route=route, detail=f"no answer: {err}"))
                continue
            graded = await self._grade(spec, inp.request, reference, answer, shadow)
            at = inp.now + (time.monotonic() - started)
            out.samples.append(await self._note(inp.role, route, graded, at, shadow))
        return out

    async def _ask(
        self, route: str, request: ChatRequest, timeout_s: float, max_bytes: int
    ) -> tuple[str | None, str]:
        """One call on ``route`` within ``timeout_s``; (text, "") or (None, the error)."""
        from agent_failover.providers.client import Budgets  # worker side
        from agent_failover.providers.registry import complete
        from agent_failover.providers.validate import validate_reply

        budgets = Budgets(
            connect_s=min(CONNECT_TIMEOUT_S, timeout_s),
            ttft_s=timeout_s,
            idle_s=timeout_s,
            total_s=timeout_s,
            max_reply_bytes=max_bytes,
        )
        try:
            reply = await complete(self._http, self._policy.endpoint(route), request, budgets)
            validate_reply(reply, request.json_schema, endpoint=route, max_reply_bytes=max_bytes)
        except ProviderError as exc:
            return None, clip(f"{exc.error_class.value}: {exc}", 300)
        return reply.text, ""

    async def _grade(
        self,
        spec: ScorerSpec,
        request: ChatRequest,
        reference: str,
        answer: str,
        shadow: ShadowSettings,
    ) -> ScoreResult:
        """The answer graded against the reference (a judge route for ``judge``)."""
        if spec.kind != "judge":
            return score_local(spec, reference, answer)
        assert spec.judge_route is not None
        prompt = request.messages[-1].content if request.messages else ""
        judge = self._policy.endpoint(spec.judge_route)
        text, err = await self._ask(
            spec.judge_route,
            judge_request(
                str(prompt),
                reference,
                answer,
                structured=bool(judge.capabilities.structured_output),
            ),
            shadow.timeout_s,
            DEFAULT_MAX_REPLY_BYTES,
        )
        if text is None:
            return ScoreResult(score=0.0, passed=False, detail=f"judge failed: {err}")
        return parse_judge(text, spec.pass_threshold)

    async def _note(
        self, role_name: str, route: str, graded: ScoreResult, at: float, shadow: ShadowSettings
    ) -> ShadowSample:
        """Record the sample, re-evaluate the route's verdict, persist and announce a change."""
        await self._health.record_quality(
            role_name, route, QualitySample(at=at, score=graded.score)
        )
        record.shadow_sample(role_name, route, graded.score, graded.passed)
        state = await self._health.quality(role_name, route)
        verdict = evaluate_quality(state, shadow, self._policy.hysteresis_margin, now=at)
        changed = verdict.regressed != state.regressed
        if changed:
            await self._health.set_quality_regressed(
                role_name, route, verdict.regressed, at=at, delta=verdict.delta
            )
            record.quality_changed(
                role_name, route, verdict.regressed, verdict.reason, verdict.delta
            )
            log.warning(
                "route %s for role %s: %s (%s)",
                route,
                role_name,
                "QUALITY_REGRESSION" if verdict.regressed else "quality restored",
                verdict.reason,
            )
        return ShadowSample(
            route=route,
            score=graded.score,
            detail=graded.detail,
            regressed=verdict.regressed,
            changed=changed,
        )

    def all(self) -> list[Any]:
        """Every activity of this class, for worker registration."""
        return [self.shadow_evaluate]


async def quality_rows(health: HealthStore, policy: PolicyConfig, now: float) -> list[QualityRow]:
    """Every shadowed role's quality verdict per roster route (the reference excluded), with
    the window's delta and sample count as :func:`evaluate_quality` sees them at ``now``."""
    rows: list[QualityRow] = []
    for name, role in policy.roles.items():
        shadow = role.shadow
        if shadow is None:
            continue
        for route in role.roster.routes():
            if route == shadow.reference_route:
                continue
            state = await health.quality(name, route)
            verdict = evaluate_quality(state, shadow, policy.hysteresis_margin, now=now)
            rows.append(
                QualityRow(
                    role=name,
                    route=route,
                    regressed=state.regressed,
                    since=state.since,
                    delta=verdict.delta,
                    verdict_delta=state.delta,
                    samples=verdict.samples,
                    min_samples=shadow.min_samples,
                    tolerance=shadow.tolerance,
                )
            )
    return rows
