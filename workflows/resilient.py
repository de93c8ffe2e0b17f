"""``resilient_complete``: one agent call run through its failover plan, from workflow code.

Any workflow can ``await resilient_complete(role, request)``. Each attempt is its own
``call_model`` activity (so the Temporal UI shows one activity per route tried, with its
outcome); decisions come from :mod:`resilience` with values recorded in history, so
replay is deterministic. After the live tiers come the cache and the static fallback:
by default the call returns an :class:`AgentOutput` and never raises for a provider
failure; ``CallOptions(on_exhausted="raise")`` raises :class:`FailoverExhausted` instead.
A content-filter refusal comes back as a typed refusal (``output.refusal``) unless the
role (or the call) opts in to ``content_filter: failover``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.cache import CacheActivities
    from agent_failover.activities.failures import BULKHEAD_FULL, POLICY_ERROR
    from agent_failover.activities.model_call import ModelCallActivities
    from agent_failover.activities.models import (
        CacheLookupInput,
        CacheLookupResult,
        CacheStoreInput,
        CacheWrite,
        CallModelInput,
        CallModelResult,
        RoleContext,
        RoleContextInput,
    )
    from agent_failover.activities.role_context import RoleContextActivities
    from agent_failover.activities.snapshot_history import UNSTATED_TIME
    from agent_failover.resilience.cachekey import cache_key
    from agent_failover.resilience.config import (
        ContentFilterMode,
        PolicyConfig,
        PolicyError,
        RolePolicy,
    )
    from agent_failover.resilience.contracts import (
        AgentOutput,
        AttemptRecord,
        Capability,
        ReasonCode,
    )
    from agent_failover.resilience.degrade import cached_output, confidence_for, static_output
    from agent_failover.resilience.estimate import estimate_request_tokens
    from agent_failover.resilience.limits import MAX_REQUEST_BYTES
    from agent_failover.resilience.models import ChatRequest, FinishReason
    from agent_failover.resilience.options import (
        CallOptions,
        OnExhausted,
        apply_call_options,
        override_routes,
    )
    from agent_failover.resilience.outcomes import ATTEMPT_TIMEOUT, CallState, apply_failure
    from agent_failover.resilience.planner import (
        FailoverPlan,
        PlannedAttempt,
        RequestFacts,
        SkipReason,
        plan,
    )
    from agent_failover.resilience.prompts import (
        CALLER_VARIANT,
        StructuredPath,
        apply_prompt,
        choose_prompt,
        structured_path,
    )
    from agent_failover.resilience.triage import bound_request_bytes, minimal_input_tokens, triage
    from agent_failover.workflows import observe
    from agent_failover.workflows.errors import FailoverExhausted
    from agent_failover.workflows.shadow import maybe_shadow
    from agent_failover.workflows.summarize import SUMMARIZE_PATCH, summarize_context

#: Extra time Temporal allows beyond the activity's own budget before it times it out.
ACTIVITY_GRACE = timedelta(seconds=2)
#: Attempts Temporal may make on one route: the first, plus one same-route retry for a
#: RETRY-class error (a 500, after backoff) or a 429 whose Retry-After is short enough to
#: wait out (after exactly Retry-After: ``next_retry_delay``, a durable server timer).
SAME_ROUTE_ATTEMPTS = 2
#: Heartbeat timeout for model calls: hedge cancellation is delivered on heartbeats.
CALL_HEARTBEAT_TIMEOUT = timedelta(seconds=5)
ROLE_CONTEXT_TIMEOUT = timedelta(seconds=10)
#: workflow.patched id of the issue-8 planning rules (half-open routes take real calls only
#: when drawn; routes that cannot hold the request even after triage are skipped). Runs
#: recorded before them replay with the old rules, so an in-flight call keeps its routes.
DECISIONS_PATCH = "decisions-issue-8"
#: Retries of a local activity (role context, pipeline roles): a transient error is
#: retried for about half a minute, a recurring one then ends the call with its message
#: (the default policy would retry it, and hold the workflow task, forever).
LOCAL_ACTIVITY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=6,
)
#: Error type of a request too big to schedule even after triage.
REQUEST_TOO_LARGE = "request_too_large"
#: workflow.patched id of the issue-10 healthy path: ``call_model`` writes a full answer to
#: the cache itself (no ``cache_store`` activity after it). Runs recorded before it replay
#: with the separate activity.
CACHE_IN_CALL_PATCH = "cache-in-call-issue-10"
#: workflow.patched id of eager dispatch's overflow: an attempt refused by a full bulkhead
#: on the workflow's queue is scheduled again on the bulkhead's queue.
EAGER_OVERFLOW_PATCH = "eager-overflow-issue-10"


@dataclass
class _AttemptResult:
    attempt: PlannedAttempt
    record: AttemptRecord
    result: CallModelResult | None = None
    error_type: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    used_prefill: bool = False


@dataclass
class _Prepared:
    """What :meth:`_ResilientCall._prepare` chose for one route (recorded on its attempt)."""

    variant: str
    path: StructuredPath | None
    notes: list[str] = field(default_factory=list)


async def resilient_complete(
    role: str,
    request: ChatRequest,
    *,
    options: CallOptions | None = None,
    upstream_reasons: list[ReasonCode] | None = None,
) -> AgentOutput:
    """Run ``request`` for ``role`` through its failover plan and return the answer.

    Call it from workflow code. The result carries its degradation contract: capability,
    tier, route, model, reason codes, confidence, usage, the answering route's tool calls
    and finish reason, and every attempt (with the provider's status, error code and
    Retry-After for failed ones). ``options`` overrides the role's policy for this call
    (deadline, roster, exhaustion behaviour, content-filter handling);
    ``upstream_reasons`` marks the answer as resting on degraded inputs.

    Raises :class:`FailoverExhausted` only with ``on_exhausted="raise"``, and a
    non-retryable ``ApplicationError`` (type ``policy_error``) for an unknown role or route.
    """
    return await _ResilientCall(role, request, upstream_reasons or [], options).run()


class _ResilientCall:
    def __init__(
        self,
        role: str,
        request: ChatRequest,
        upstream: list[ReasonCode],
        options: CallOptions | None = None,
    ) -> None:
        self.role_name = role
        self.request = request
        self.upstream = upstream
        self.options = options
        self.attempts: list[AttemptRecord] = []
        self.state = CallState()
        self.hedges_used = 0
        self.cache_in_call = False
        self.obs = observe.CallTelemetry()
        self.prepared: dict[str, _Prepared] = {}
        self.own_system = request.system is not None
        #: Summarization before truncation: tried once per call, when triage first looms.
        self.summary_tried = False
        self.summarized: ChatRequest | None = None
        self.summary_note = ""
        self.summary_cost = 0.0

    async def run(self) -> AgentOutput:
        with observe.call_span(self):
            out = await self._run()
            observe.answered(self, out)
            return out

    async def _run(self) -> AgentOutput:
        started = workflow.now()
        self.started_at = started.timestamp()
        ctx, current = await self._load_context(started)
        role = ctx.role
        request = self._prepare_request(role)
        key = cache_key(self.role_name, request)
        self.cache_key = key
        self.cache_in_call = current or workflow.patched(CACHE_IN_CALL_PATCH)
        routes_by_model = _routes_by_family(ctx.policy)
        policy, floor, ticket = self._decision_rules(ctx.policy, request, current)
        input_tokens = estimate_request_tokens(request)
        first_plan: FailoverPlan | None = None
        while not self.state.stop_live:
            facts = RequestFacts(
                input_tokens=input_tokens,
                max_output_tokens=request.max_tokens,
                elapsed_ms=(workflow.now() - started).total_seconds() * 1000,
                exclude_routes=list(self.state.excluded),
                min_context_window=self.state.min_context_window,
                cooldowns=dict(self.state.cooldowns),
                min_input_tokens=floor,
                trial_ticket=ticket,
            )
            p = plan(role, policy, ctx.snapshot, facts, workflow.now().timestamp())
            if first_plan is None:
                first_plan = p
                self._record_skipped(p)
            if not p.attempts:
                break
            done = await self._round(p, role, key, started, routes_by_model)
            if done is not None:
                return done
        assert first_plan is not None
        if self.options is not None and self.options.on_exhausted is OnExhausted.RAISE:
            raise FailoverExhausted(self.role_name, self.attempts, list(self.state.reasons))
        return await self._degraded(first_plan, key, role, started)

    async def _load_context(self, started: datetime) -> tuple[RoleContext, bool]:
        """The role's policy and route health (one local activity), with the call's options
        applied; True when it is the issue-10 format (a policy ref)."""
        ctx: RoleContext = await workflow.execute_local_activity_method(
            RoleContextActivities.role_context,
            RoleContextInput(
                role=self.role_name,
                now=started.timestamp(),
                routes=override_routes(self.options),
                workflow_queue=workflow.info().task_queue,
            ),
            start_to_close_timeout=ROLE_CONTEXT_TIMEOUT,
            # Bounded: an error that keeps recurring ends the call with its reason
            # instead of retrying the local activity (and the workflow task) forever.
            retry_policy=LOCAL_ACTIVITY_RETRY,
            summary=f"{self.role_name}: route health",
        )
        try:
            role = apply_call_options(ctx.role, ctx.policy, self.options)
        except PolicyError as exc:
            raise ApplicationError(str(exc), type=POLICY_ERROR, non_retryable=True) from exc
        update: dict[str, Any] = {"role": role}
        if ctx.snapshot.taken_at == UNSTATED_TIME:  # it is the `now` this call sent
            update["snapshot"] = ctx.snapshot.model_copy(update={"taken_at": started.timestamp()})
        ctx = ctx.on_queue(workflow.info().task_queue).model_copy(update=update)
        self.ctx = ctx
        # A role context with a policy ref is the issue-10 format: the rules the two patches
        # gate apply to it without their markers (two events and two search-attribute
        # upserts per call); an older history replays through the patch markers it holds.
        return ctx, ctx.policy_ref is not None

    def _prepare_request(self, role: RolePolicy) -> ChatRequest:
        """The request with the role's default prompt and schema, bounded for history."""
        request = self.request
        # A caller's own system prompt is kept on every route (self.own_system); otherwise
        # each attempt gets the role's variant for its route (_prepare), the default here.
        if request.system is None and role.system_prompt:
            request = request.model_copy(update={"system": role.system_prompt})
        if role.output_schema is not None and request.json_schema is None:
            request = request.model_copy(update={"json_schema": role.output_schema})
        self.request = request = self._bounded(request)
        return request

    def _decision_rules(
        self, policy: PolicyConfig, request: ChatRequest, current: bool
    ) -> tuple[PolicyConfig, int | None, float]:
        """(policy, triage floor, trial ticket) under the decisions-issue rules, or the
        rules a run recorded before them replays with."""
        if current or workflow.patched(DECISIONS_PATCH):
            # What triage could at best shrink the request to: a route whose window cannot
            # hold even that is skipped (CONTEXT_TOO_SMALL), not sent a request it rejects.
            floor = minimal_input_tokens(request)
            # One draw per call decides whether it may be a half-open route's real-call
            # trial (breaker.half_open_call_fraction); workflow.random() replays exactly.
            return policy, floor, workflow.random().random()
        # A run recorded before these rules replays with them off: half-open routes
        # were always trials in their tier slot, and no triage floor was known.
        return _every_call_a_trial(policy), None, 0.0

    async def _round(
        self,
        p: FailoverPlan,
        role: RolePolicy,
        key: str,
        started: datetime,
        routes_by_model: dict[str, list[str]],
    ) -> AgentOutput | None:
        """One planned attempt (hedged when the plan says so): the answer, a refusal that
        ends the call, or None to plan again."""
        first = p.attempts[0]
        hedge = None
        if (
            len(p.attempts) > 1
            and p.attempts[1].hedge
            and self.hedges_used < role.hedging.max_hedges
        ):
            hedge = p.attempts[1]
        await self._summarize_before_triage(role, first, hedge, started)
        results = await (self._hedged(first, hedge) if hedge else self._single(first))
        winner = next((r for r in results if r.result is not None), None)
        for r in results:
            if r.error_type == POLICY_ERROR:
                # A worker that cannot serve a planned route is misconfigured; other
                # routes would hide that, so the call ends here with the worker's words.
                raise ApplicationError(
                    r.record.error or "policy error", type=POLICY_ERROR, non_retryable=True
                )
            self.attempts.append(r.record)
            if r.error_type is not None:
                self._fold_failure(r, routes_by_model)
        if winner is not None:
            return await self._success(winner, key, role)
        return self._refusal(results, role, started)

    def _bounded(self, request: ChatRequest) -> ChatRequest:
        """The request triaged to fit one activity input (:data:`MAX_REQUEST_BYTES`).

        A request built from earlier answers can outgrow Temporal's payload limit; one
        that cannot be cut down (its protected turns alone are too big) fails the call.
        """
        bounded = bound_request_bytes(request, MAX_REQUEST_BYTES)
        if not bounded.fits:
            raise ApplicationError(
                f"role {self.role_name!r}: request of {bounded.input_tokens_before} bytes "
                f"cannot be cut below {MAX_REQUEST_BYTES} bytes (the system prompt, latest "
                f"user turn, tool results and pinned messages alone are "
                f"{bounded.input_tokens_after} bytes)",
                type=REQUEST_TOO_LARGE,
                non_retryable=True,
            )
        if bounded.truncated:
            self.state.add_reason(ReasonCode.CONTEXT_TRUNCATED)
        return bounded.request

    async def _summarize_before_triage(
        self, role: RolePolicy, first: PlannedAttempt, hedge: PlannedAttempt | None, started: Any
    ) -> None:
        """Once per call, when an attempt needs triage and the role opts in: summarize what
        triage would drop (its own activity), for every attempt that needs triage."""
        need = [a for a in (first, hedge) if a and a.needs_triage and a.target_input_tokens]
        if self.summary_tried or not need or not role.summarize.enabled:
            return
        if not workflow.patched(SUMMARIZE_PATCH):
            return
        self.summary_tried = True
        left_ms = role.total_budget_ms - (workflow.now() - started).total_seconds() * 1000
        out = await summarize_context(
            role,
            self.ctx.policy,
            self.ctx.snapshot,
            self.request,
            target_tokens=min(a.target_input_tokens or 0 for a in need),
            time_left_ms=left_ms,
            # On the bulkhead's own queue: it waits for a slot rather than meeting a full one.
            task_queue=self.ctx.overflow_queue or self.ctx.task_queue,
            exclude=sorted({*self.state.excluded, first.route, *([hedge.route] if hedge else [])}),
        )
        if out is not None:
            self.summarized, self.summary_note, self.summary_cost = (
                out.request,
                out.note,
                out.cost_usd,
            )

    # -- attempts -----------------------------------------------------------------------

    def _prepare(self, attempt: PlannedAttempt) -> tuple[ChatRequest, bool]:
        request = self.request
        notes: list[str] = []
        if attempt.needs_triage and attempt.target_input_tokens:
            if self.summary_note:
                notes.append(self.summary_note)
            if self.summarized is not None:
                request = self.summarized
                self.state.add_reason(ReasonCode.CONTEXT_SUMMARIZED)
            tri = triage(request, attempt.target_input_tokens)
            request = tri.request
            if tri.truncated:
                self.state.add_reason(ReasonCode.CONTEXT_TRUNCATED)
        ep = self.ctx.policy.endpoints[attempt.route]
        use_prefill = bool(
            self.state.prefill_text
            and not self.state.prefill_blocked
            and ep.capabilities.assistant_prefill
            and request.json_schema is None
        )
        if use_prefill:
            request = request.model_copy(update={"prefill": self.state.prefill_text})
        choice = None if self.own_system else choose_prompt(self.ctx.role, ep)
        path = structured_path(ep, request.json_schema)
        request = apply_prompt(request, choice, path)
        if choice is not None and choice.note:
            notes.append(choice.note)
        variant = CALLER_VARIANT if choice is None else choice.variant
        self.prepared[attempt.route] = _Prepared(variant, path, notes)
        return request, use_prefill

    def _start(self, attempt: PlannedAttempt) -> tuple[asyncio.Task[Any], bool, float]:
        request, used_prefill = self._prepare(attempt)
        timeout = timedelta(milliseconds=attempt.timeout_ms)
        now = workflow.now().timestamp()
        # Temporal's own retry of a RETRY-class error must still end inside the role's budget.
        left_ms = self.ctx.role.total_budget_ms - (now - self.started_at) * 1000
        overall = max(timeout, timedelta(milliseconds=left_ms))
        token = observe.attempt_started(self, attempt, request.max_tokens)
        inp = CallModelInput(
            role=self.role_name,
            route=attempt.route,
            request=request,
            output_schema=self._output_schema(attempt),
            ttft_budget_ms=attempt.ttft_budget_ms,
            idle_budget_ms=attempt.idle_budget_ms,
            timeout_ms=attempt.timeout_ms,
            now=now,
            deadline_at=self.started_at + self.ctx.role.total_budget_ms / 1000,
            max_reply_bytes=self.ctx.role.max_reply_bytes,
            cache=self._cache_write(attempt),
        )

        def schedule(queue: str, summary: str = "") -> asyncio.Task[Any]:
            return workflow.start_activity_method(
                ModelCallActivities.call_model,
                inp,
                task_queue=queue,
                start_to_close_timeout=timeout + ACTIVITY_GRACE,
                schedule_to_close_timeout=overall + ACTIVITY_GRACE,
                heartbeat_timeout=CALL_HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=200),
                    backoff_coefficient=2.0,
                    maximum_attempts=SAME_ROUTE_ATTEMPTS,
                ),
                summary=f"{self.role_name} → {attempt.route} (tier {attempt.tier}){summary}",
            )

        handle = schedule(self.ctx.task_queue)
        if self.ctx.overflow_queue is not None:
            handle = asyncio.create_task(_overflowing(handle, schedule, self.ctx.overflow_queue))
            # A cancelled hedge loser is never awaited: its error is expected, not "lost".
            handle.add_done_callback(_retrieved)
        observe.attempt_scheduled(self, handle, token)
        return handle, used_prefill, now

    def _output_schema(self, attempt: PlannedAttempt) -> dict[str, Any] | None:
        """What the answer is validated against: the role's schema or, when the schema
        only went into the prompt, the caller's."""
        if self.prepared[attempt.route].path is StructuredPath.PROMPT:
            return self.ctx.role.output_schema or self.request.json_schema
        return self.ctx.role.output_schema

    def _cache_write(self, attempt: PlannedAttempt) -> CacheWrite | None:
        """Ask the attempt to cache its answer when that answer would be a full one.

        Mirrors :meth:`_success`: tiers 0 and 1 answer with full capability unless the
        context was truncated. Called after :meth:`_prepare`, which may truncate.
        """
        cache = self.ctx.role.roster.cache
        if (
            not self.cache_in_call
            or not cache.enabled
            or attempt.tier > 1
            or ReasonCode.CONTEXT_TRUNCATED in self.state.reasons
            or ReasonCode.CONTEXT_SUMMARIZED in self.state.reasons
        ):
            return None
        return CacheWrite(key=self.cache_key, ttl_s=cache.ttl_s)

    async def _collect(
        self, attempt: PlannedAttempt, handle: asyncio.Task[Any], used_prefill: bool, t0: float
    ) -> _AttemptResult:
        prep = self.prepared.get(attempt.route)
        rec = AttemptRecord(
            route=attempt.route,
            tier=attempt.tier,
            started_at=t0,
            hedge=attempt.hedge,
            outcome="pending",
            prompt_variant=prep.variant if prep else None,
            structured_output=prep.path.value if prep and prep.path else None,
            note="; ".join(prep.notes) if prep else "",
        )
        try:
            result: CallModelResult = await handle
        except ActivityError as err:
            error_type, details = _failure_of(err)
            rec.finished_at = workflow.now().timestamp()
            rec.outcome = error_type
            rec.error = str(err.cause or err)
            rec.latency_ms = details.get("latency_ms") or (rec.finished_at - t0) * 1000
            rec.http_status = details.get("status")
            rec.provider_code = details.get("provider_code")
            rec.retry_after_s = details.get("retry_after_s")
            r = _AttemptResult(attempt, rec, None, error_type, details, used_prefill)
            observe.attempt_finished(self, handle, r)
            return r
        if not result.reply.endpoint:  # left out of history: it is the attempt's route
            reply = result.reply.model_copy(update={"endpoint": attempt.route})
            result = result.model_copy(update={"reply": reply})
        rec.finished_at = workflow.now().timestamp()
        rec.outcome = "ok"
        rec.latency_ms = result.reply.latency_ms
        rec.ttft_ms = result.reply.ttft_ms
        if used_prefill:
            rec.note = f"{rec.note} continued from partial output (prefill)".strip()
        if result.attempt > 1:
            # A same-route retry inside the activity: a 500 after backoff, or a 429 whose
            # short Retry-After was waited out (the Temporal UI shows the failed attempt).
            rec.note = f"{rec.note} answered on same-route attempt {result.attempt}".strip()
        r = _AttemptResult(attempt, rec, result, None, {}, used_prefill)
        observe.attempt_finished(self, handle, r)
        return r

    async def _single(self, attempt: PlannedAttempt) -> list[_AttemptResult]:
        handle, used_prefill, t0 = self._start(attempt)
        return [await self._collect(attempt, handle, used_prefill, t0)]

    async def _hedge_due(
        self, h1: asyncio.Task[Any], first: PlannedAttempt, hedge: PlannedAttempt
    ) -> bool:
        """Wait for the first attempt or the hedge delay; True when the delay came first.

        The timer is a named one so the Temporal UI says what it waits for. Since rules 2
        (:attr:`RoleContext.rules`) it is started in the same step as the attempt it races.
        Started from a task of its own (rules 1), it came one loop step later, so a
        concurrent call resumed in the same activation put its commands in between; a
        worker replaying the run (one replacing a killed worker) could resume the calls in
        other activations and meet a timer where history had that call's activity. The
        rule travels in the role context, not in a patch marker: the replay that resumes
        the call earlier would not have seen the marker yet.
        """
        delay_s = hedge.start_offset_ms / 1000
        summary = f"hedge: {hedge.route} starts unless {first.route} answers first"
        if self.ctx.rules >= 2:
            try:
                await workflow.wait_condition(h1.done, timeout=delay_s, timeout_summary=summary)
            except TimeoutError:
                return not h1.done()  # both in one activation: the answer wins, as before
            return False
        delay = asyncio.create_task(workflow.sleep(delay_s, summary=summary))
        done, _ = await workflow.wait([h1, delay], return_when=asyncio.FIRST_COMPLETED)
        if h1 not in done:
            return True
        # Awaited so the timer's cancel command precedes whatever comes next.
        delay.cancel()
        await asyncio.gather(delay, return_exceptions=True)
        return False

    async def _hedged(self, first: PlannedAttempt, hedge: PlannedAttempt) -> list[_AttemptResult]:
        """Start ``first``; if it has not answered by the hedge delay, race ``hedge`` too."""
        h1, p1, t1 = self._start(first)
        if not await self._hedge_due(h1, first, hedge):
            r1 = await self._collect(first, h1, p1, t1)
            if r1.result is not None:
                return [r1]
            # The primary failed before the hedge was due: plain sequential failover.
            return [r1, *await self._single(hedge)]
        self.hedges_used += 1
        observe.hedge(self, "fired", h1, hedge)
        h2, p2, t2 = self._start(hedge)
        handles = {h1: (first, p1, t1), h2: (hedge, p2, t2)}
        results: list[_AttemptResult] = []
        pending = [h1, h2]
        while pending:
            done, pending = await workflow.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for h in done:
                a, p, t = handles[h]
                r = await self._collect(a, h, p, t)
                results.append(r)
                if r.result is not None:
                    for loser in pending:
                        la, _, lt = handles[loser]
                        loser.cancel()
                        observe.hedge(self, "cancelled", loser, la)
                        results.append(
                            _AttemptResult(
                                la,
                                AttemptRecord(
                                    route=la.route,
                                    tier=la.tier,
                                    started_at=lt,
                                    finished_at=workflow.now().timestamp(),
                                    outcome="cancelled",
                                    hedge=la.hedge,
                                    note="lost the hedge race",
                                ),
                            )
                        )
                    r.record.note = (r.record.note + " won the hedge race").strip()
                    observe.hedge(self, "won", h, a)
                    self.state.add_reason(ReasonCode.HEDGED)
                    return results
        return results

    def _fold_failure(self, r: _AttemptResult, routes_by_model: dict[str, list[str]]) -> None:
        ep = self.ctx.policy.endpoints[r.attempt.route]
        learned = self.ctx.snapshot.get(r.attempt.route).context_window
        self.state = apply_failure(
            self.state,
            route=r.attempt.route,
            model=ep.family,
            context_window=learned or ep.context_window,
            stated_context_window=r.details.get("context_window"),
            error_type=r.error_type or "",
            retry_after_s=r.details.get("retry_after_s"),
            partial_text=r.details.get("partial_text") or "",
            partial_truncated=bool(r.details.get("partial_truncated")),
            used_prefill=r.used_prefill,
            now=workflow.now().timestamp(),
            routes_by_model=routes_by_model,
        )

    def _record_skipped(self, p: FailoverPlan) -> None:
        """Put health-driven skips in the history; budget skips only clutter it."""
        now = workflow.now().timestamp()
        for s in p.skipped:
            if s.code in (
                SkipReason.BREAKER_OPEN,
                SkipReason.FORCED_OPEN,
                SkipReason.COOLING_DOWN,
                SkipReason.HALF_OPEN,
            ):
                observe.skipped(self, s.route, s.tier, s.code.value)
                self.state.add_reason(ReasonCode.BREAKER_OPEN)
                self.state.add_reason(ReasonCode.MODEL_UNAVAILABLE)
            elif s.code is SkipReason.RATE_BUDGET:
                # Out of shared budget: planned like a cool-down, reported as such.
                observe.skipped(self, s.route, s.tier, s.code.value)
                self.state.add_reason(ReasonCode.RATE_BUDGET)
            elif s.code is SkipReason.SLA_DEMOTED:
                # Demoted routes stay in the plan, moved last: a reason, not a skip.
                self.state.add_reason(ReasonCode.SLA_DEMOTED)
                observe.sla_demoted(self, s.route, s.reason)
                continue
            elif s.code is SkipReason.QUALITY_REGRESSION:
                self.state.add_reason(ReasonCode.QUALITY_REGRESSION)
                observe.quality_demoted(self, s.route, s.reason)
                continue
            elif s.code is SkipReason.UNQUALIFIED and s.tier > 0:
                # Below the role's min_quality in the qualification lock. Only a skipped
                # primary is recorded on every call (it is why a standby answers); a
                # fallback's skip is in the plan's explanation, not each call's history.
                continue
            elif s.code not in (SkipReason.CONTEXT_TOO_SMALL, SkipReason.UNQUALIFIED):
                continue
            self.attempts.append(
                AttemptRecord(
                    route=s.route,
                    tier=s.tier,
                    started_at=now,
                    finished_at=now,
                    outcome="skipped",
                    note=s.reason,
                )
            )

    # -- outputs ------------------------------------------------------------------------

    async def _success(self, winner: _AttemptResult, key: str, role: RolePolicy) -> AgentOutput:
        assert winner.result is not None
        reply = winner.result.reply
        tier = winner.attempt.tier
        reasons = list(self.state.reasons)
        if tier == 1:
            reasons.append(ReasonCode.STANDBY_ROUTE)
        if tier >= 2:
            reasons.append(ReasonCode.SMALLER_MODEL)
        if winner.used_prefill:
            reasons.append(ReasonCode.PREFILL_CONTINUATION)
        if self.upstream:
            reasons.append(ReasonCode.UPSTREAM_DEGRADED)
        # Tier 0/1 serve the role's intended model class; tier 2 is a smaller model.
        capability = Capability.FULL if tier <= 1 else Capability.DEGRADED
        if ReasonCode.CONTEXT_TRUNCATED in reasons or ReasonCode.CONTEXT_SUMMARIZED in reasons:
            capability = Capability.DEGRADED
        reasons = list(dict.fromkeys(reasons))
        output = AgentOutput(
            role=self.role_name,
            # With a prefill the adapter already returns prefill + continuation.
            content=reply.text,
            data=winner.result.data,
            capability=capability,
            tier=tier,
            route=winner.attempt.route,
            model=reply.model,
            reason_codes=reasons,
            confidence=confidence_for(capability, tier, reasons),
            attempts=self.attempts,
            usage=reply.usage,
            cost_usd=reply.cost_usd + self.summary_cost,
            latency_ms=sum(a.latency_ms or 0.0 for a in self.attempts),
            tool_calls=list(reply.tool_calls),
            finish_reason=reply.finish_reason,
        )
        if capability is Capability.FULL and role.roster.cache.enabled and not self.cache_in_call:
            await workflow.execute_activity_method(
                CacheActivities.cache_store,
                CacheStoreInput(
                    key=key,
                    role=self.role_name,
                    content=output.content,
                    data=output.data,
                    model=output.model,
                    route=output.route,
                    now=workflow.now().timestamp(),
                    ttl_s=role.roster.cache.ttl_s,
                ),
                task_queue=self.ctx.task_queue,
                start_to_close_timeout=timedelta(seconds=10),
                summary=f"{self.role_name}: cache the answer of {output.route}",
            )
        # Sampled calls are re-run on the reference route by a child nobody waits for.
        maybe_shadow(role, self.request, winner.attempt.route, reply.text, self.ctx.snapshot)
        return output

    def _refusal(
        self, results: list[_AttemptResult], role: RolePolicy, started: Any
    ) -> AgentOutput | None:
        """A content refusal returned as such, unless the role opted in to failing over.

        Shopping a refused prompt around until some model answers it defeats the filter's
        purpose and turns a policy decision into a lottery; the caller gets the refusal.
        """
        if role.content_filter is not ContentFilterMode.REFUSE:
            return None
        hit = next((r for r in results if r.error_type == "content_filter"), None)
        if hit is None:
            return None
        message = str(hit.details.get("message") or "refused by the provider's content filter")
        reasons = list(dict.fromkeys([*self.state.reasons, ReasonCode.CONTENT_FILTERED]))
        tier = hit.attempt.tier
        capability = Capability.FULL if tier <= 1 else Capability.DEGRADED
        return AgentOutput(
            role=self.role_name,
            content="",
            capability=capability,
            tier=tier,
            route=hit.attempt.route,
            model=self.ctx.policy.endpoints[hit.attempt.route].model,
            reason_codes=reasons,
            confidence=confidence_for(capability, tier, reasons),
            attempts=self.attempts,
            latency_ms=(workflow.now() - started).total_seconds() * 1000,
            finish_reason=FinishReason.CONTENT_FILTER,
            refusal=message[:4000],
        )

    async def _degraded(
        self, p: FailoverPlan, key: str, role: RolePolicy, started: Any
    ) -> AgentOutput:
        reasons = list(self.state.reasons)
        if ReasonCode.MODEL_UNAVAILABLE not in reasons:
            reasons.append(ReasonCode.MODEL_UNAVAILABLE)
        now = workflow.now().timestamp()
        if p.cache is not None and p.cache.enabled:
            lookup: CacheLookupResult | None = await workflow.execute_activity_method(
                CacheActivities.cache_lookup,
                CacheLookupInput(key=key, now=now, max_staleness_s=p.cache.max_staleness_s),
                task_queue=self.ctx.task_queue,
                start_to_close_timeout=timedelta(seconds=10),
                summary=f"{self.role_name}: cached answer after every live route failed",
            )
            # A null payload is how histories written before the explicit miss read.
            cached = lookup.answer if lookup else None
            self.attempts.append(
                AttemptRecord(
                    route="cache",
                    tier=3,
                    started_at=now,
                    finished_at=workflow.now().timestamp(),
                    outcome="ok" if cached else "miss",
                    note=f"age {cached.age_s:.0f}s"
                    if cached
                    else (lookup.miss_reason if lookup else None) or "no fresh entry",
                )
            )
            if cached is not None:
                observe.cache_served(self, cached.age_s)
                return cached_output(
                    role,
                    content=cached.content,
                    data=cached.data,
                    route=cached.route,
                    model=cached.model,
                    age_s=cached.age_s,
                    reasons=reasons,
                    attempts=self.attempts,
                    latency_ms=(workflow.now() - started).total_seconds() * 1000,
                )
        out = static_output(role, self.attempts)
        return out.model_copy(
            update={
                "reason_codes": list(dict.fromkeys([*reasons, *out.reason_codes])),
                "latency_ms": (workflow.now() - started).total_seconds() * 1000,
            }
        )


def _every_call_a_trial(policy: PolicyConfig) -> PolicyConfig:
    """The policy with ``half_open_call_fraction`` 1 everywhere: the rule before issue 8."""
    breaker = policy.breaker.model_copy(update={"half_open_call_fraction": 1.0})
    overrides = {
        r: o.model_copy(update={"half_open_call_fraction": None})
        for r, o in policy.breaker_overrides.items()
    }
    return policy.model_copy(update={"breaker": breaker, "breaker_overrides": overrides})


def _retrieved(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def _overflowing(
    first: asyncio.Task[Any], schedule: Callable[[str, str], asyncio.Task[Any]], queue: str
) -> Any:
    """An eagerly dispatched attempt; sent again to its bulkhead's queue if the worker's
    bulkhead was full (``bulkhead_full``: it never reached the provider)."""
    try:
        return await first
    except ActivityError as err:
        full = isinstance(err.cause, ApplicationError) and err.cause.type == BULKHEAD_FULL
        # Recorded only when a bulkhead overflows: the healthy path carries no marker.
        if not full or not workflow.patched(EAGER_OVERFLOW_PATCH):
            raise
    return await schedule(queue, " via its bulkhead queue")


def _failure_of(err: ActivityError) -> tuple[str, dict[str, Any]]:
    """The error type and AttemptFailure details of a failed ``call_model``."""
    cause = err.cause
    if isinstance(cause, TemporalTimeoutError):
        return ATTEMPT_TIMEOUT, {}
    if isinstance(cause, ApplicationError):
        details = cause.details[0] if cause.details else {}
        return cause.type or "unknown", details if isinstance(details, dict) else {}
    return "unknown", {}


def _routes_by_family(policy: PolicyConfig) -> dict[str, list[str]]:
    """Route names grouped by model family: Claude on Bedrock or Vertex is the model the
    Anthropic API serves, under another id, and refuses the same content."""
    routes: dict[str, list[str]] = {}
    for name, ep in policy.endpoints.items():
        routes.setdefault(ep.family, []).append(name)
    return routes
