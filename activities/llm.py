"""The IO side of one resilient call: model attempts, role context, cache, probes.

``LLMActivities`` receives the policy, the shared HTTP client and the stores at
construction (nothing global to patch). Every health observation is timestamped on the
workflow's clock (``input.now`` plus the real time the activity took), so the same code
is exact in production and under the time-skipping test server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import httpx
from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from agent_failover.activities.models import (
    CURRENT_RULES,
    AttemptFailure,
    CachedAnswer,
    CacheLookupInput,
    CacheLookupResult,
    CacheStoreInput,
    CallModelInput,
    CallModelResult,
    ForceRouteInput,
    HealthTable,
    HealthTableInput,
    PipelineRoles,
    PipelineRolesInput,
    ProbeInput,
    ProbeResult,
    RoleContext,
    RoleContextInput,
    context_windows,
    policy_ref,
)
from agent_failover.activities.policy_versions import PolicyPublisher
from agent_failover.activities.shadow import quality_rows
from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.providers.validate import validate_reply
from agent_failover.resilience.breaker import Admission, Transition
from agent_failover.resilience.budget import all_scopes, scopes_for
from agent_failover.resilience.config import (
    DEFAULT_MAX_REPLY_BYTES,
    BreakerSettings,
    EndpointConfig,
    PolicyConfig,
    PolicyError,
    RateLimitSettings,
)
from agent_failover.resilience.contracts import CallOutcome, HealthSnapshot
from agent_failover.resilience.errors import (
    ContextLengthError,
    Decision,
    ErrorClass,
    ProviderError,
)
from agent_failover.resilience.estimate import estimate_request_tokens
from agent_failover.resilience.limits import clip, tail
from agent_failover.resilience.models import ChatReply, ChatRequest, Message
from agent_failover.resilience.outcomes import BREAKER_REJECTED, RATE_BUDGET
from agent_failover.resilience.probing import (
    ProbeDecision,
    ProbeReason,
    probe_decision,
    probe_first_token_s,
)
from agent_failover.resilience.ratelimit import RateLimitWait, cooldown_s, same_route_wait_s
from agent_failover.resilience.sla import evaluate_sla
from agent_failover.stores.budgets import BudgetGrant
from agent_failover.stores.cache import CachedEntry, ResponseCache
from agent_failover.stores.health import HealthStore
from agent_failover.telemetry import record

log = logging.getLogger(__name__)

#: Error type when a workflow names a role or route the worker's policy does not have.
POLICY_ERROR = "policy_error"
#: Heartbeat cadence of a model call, the first one this long after it starts
#: (cancellation rides on heartbeats; the worker's core sends at most one every 4 s of
#: the 5 s heartbeat timeout anyway), so a call that answers within it sends none.
HEARTBEAT_EVERY_S = 1.0
#: Characters of partial text a heartbeat carries (the tail).
HEARTBEAT_TAIL_CHARS = 400
#: Prompt of the health probe: tiny, deterministic, cheap.
PROBE_PROMPT = "Reply with the single word: pong"
#: Smallest same-route retry delay for a 429 waited out (a Retry-After of 0 still yields).
MIN_RETRY_DELAY_S = 0.05
#: Error type of an eagerly dispatched attempt whose bulkhead had no free slot: the
#: workflow sends it again to the bulkhead's own task queue, where it waits for a slot.
BULKHEAD_FULL = "bulkhead_full"


class LLMActivities:
    """Activities bound to one worker's policy, HTTP client and stores."""

    def __init__(
        self,
        policy: PolicyConfig,
        http: httpx.AsyncClient,
        health: HealthStore | None,
        cache: ResponseCache | None,
        *,
        task_queue_for: Callable[[str], str],
        connect_timeout_s: float = 5.0,
        overflow_queue_for: Callable[[str], str | None] | None = None,
        bulkhead_slots: Mapping[str, int] | None = None,
    ) -> None:
        self._policy = policy
        self._http = http
        self._health = health
        self._cache = cache
        self._task_queue_for = task_queue_for
        self._connect_s = connect_timeout_s
        # Eager dispatch: attempts run on the workflow's own queue (``task_queue_for``) and
        # the bulkhead is a semaphore per bulkhead here; a full one overflows to the
        # bulkhead's queue (``overflow_queue_for``), whose worker shares these semaphores.
        self._overflow_queue_for = overflow_queue_for
        self._gates = {b: asyncio.Semaphore(n) for b, n in (bulkhead_slots or {}).items()}
        self._subsets: dict[tuple[str, tuple[str, ...] | None], tuple[PolicyConfig, str]] = {}
        self.policy_versions = PolicyPublisher()

    async def publish_policies(self) -> list[str]:
        """Write the subset of every role this worker serves to the policy store (bound on
        ``policy_versions``); their refs. Idempotent: the worker calls it at start."""
        refs = []
        for role in self._policy.roles:
            subset, ref = self._subset(role, None)
            await self.policy_versions.publish(ref, subset)
            refs.append(ref)
        return refs

    def bind_stores(self, health: HealthStore, cache: ResponseCache) -> None:
        """Attach the stores when they are connected after construction (the plugin's case:
        workers are configured synchronously, Redis is connected when the worker starts)."""
        self._health = health
        self._cache = cache

    # -- role context -----------------------------------------------------------------

    @activity.defn(name="role_context")
    async def role_context(self, inp: RoleContextInput) -> RoleContext:
        """The role's policy, its routes' endpoints and a fresh health snapshot.

        Runs as a local activity before each plan. SLA demotion is evaluated here with
        the pure :func:`resilience.sla.evaluate_sla` and persisted, so hysteresis state
        survives across calls and workers.
        """
        try:
            role = self._policy.role(inp.role)
            routes = inp.routes or self._policy.routes_for(inp.role)
            for route in routes:
                self._policy.endpoint(route)
        except PolicyError as exc:
            # Retrying cannot make a role or route exist: fail the caller with the names.
            raise ApplicationError(str(exc), type=POLICY_ERROR, non_retryable=True) from exc
        snap = await self._health.snapshot(
            routes,
            now=inp.now,
            window_s=role.sla.window_s,
            min_calls=role.sla.min_samples,
            role=inp.role,
        )
        for route in routes:
            rh = snap.get(route)
            verdict = evaluate_sla(
                rh.sla_demoted,
                rh.stats,
                role.sla,
                self._policy.hysteresis_margin,
                recent=rh.recent,
                since=rh.sla_since,
                now=inp.now,
            )
            # The planner re-evaluates the verdict from the same inputs; the streaks only
            # ever read the newest restore_after observations, so only those enter history.
            update: dict[str, Any] = {"recent": rh.recent[-role.sla.restore_after :]}
            if verdict.demoted != rh.sla_demoted:
                record.sla_changed(inp.role, route, verdict.demoted, rh.stats)
                await self._health.set_sla_demoted(inp.role, route, verdict.demoted, at=inp.now)
                update |= {"sla_demoted": verdict.demoted, "sla_since": inp.now}
            snap.routes[route] = rh.model_copy(update=update)
        await self._read_budgets(inp.role, routes, snap, inp.now)
        try:
            subset, ref = self._subset(inp.role, inp.routes)
            # The history names the subset by ref: the store must hold it first.
            await self.policy_versions.publish(ref, subset)
            overflow = self._overflow_queue_for(inp.role) if self._overflow_queue_for else None
            return RoleContext(
                role=role,
                policy=subset,
                snapshot=snap,
                task_queue=self._task_queue_for(inp.role),
                overflow_queue=overflow,
                policy_ref=ref,
                rules=CURRENT_RULES,
            ).for_history(inp.newest_observation, own_queue=inp.workflow_queue)
        except (PolicyError, ValidationError) as exc:
            # A policy this worker cannot express is a configuration error: retrying the
            # local activity (and the workflow task) forever would hide it.
            raise ApplicationError(
                f"policy error building the role context: {exc}",
                type=POLICY_ERROR,
                non_retryable=True,
            ) from exc

    async def _read_budgets(
        self, role: str, routes: list[str], snap: HealthSnapshot, now: float
    ) -> None:
        """Put each route's rate-budget buckets (endpoint and bulkhead) in the snapshot."""
        per_route = {r: scopes_for(self._policy, role, r) for r in routes}
        scopes = list({s.name: s for ss in per_route.values() for s in ss}.values())
        if not scopes:
            return
        levels = await self._health.budget_levels(scopes, now)
        for route, ss in per_route.items():
            names = {s.name for s in ss}
            mine = [lv for lv in levels if lv.scope in names]
            snap.routes[route] = snap.get(route).model_copy(update={"budgets": mine})

    def _subset(self, role: str, routes: list[str] | None) -> tuple[PolicyConfig, str]:
        """The role's checked policy subset and its ref (the same for every call: cached)."""
        key = (role, tuple(routes) if routes else None)
        if key not in self._subsets:
            subset = self._policy.checked_subset_for(role, routes)
            self._subsets[key] = (subset, policy_ref(subset))
        return self._subsets[key]

    @activity.defn(name="pipeline_roles")
    async def pipeline_roles(self, inp: PipelineRolesInput) -> PipelineRoles:
        """Which roles play planner, critic, synthesis and specialists; which are critical."""
        stages = {"planner", "critic", "synthesis"}
        missing = sorted(stages - set(self._policy.roles))
        if missing:
            raise ApplicationError(
                f"policy has no role(s) {missing}; "
                "the pipeline needs planner, critic and synthesis",
                type=POLICY_ERROR,
                non_retryable=True,
            )
        specialists = [r for r in self._policy.roles if r not in stages]
        if not specialists:
            raise ApplicationError(
                "policy defines no specialist role (any role besides planner/critic/synthesis)",
                type=POLICY_ERROR,
                non_retryable=True,
            )
        return PipelineRoles(
            specialists=specialists,
            critical=[n for n, r in self._policy.roles.items() if r.critical],
            min_confidence={
                n: r.min_confidence
                for n, r in self._policy.roles.items()
                if r.critical and r.min_confidence > 0
            },
            rerun={
                n: r.rerun for n, r in self._policy.roles.items() if r.rerun and r.rerun.enabled
            },
        )

    # -- one model attempt --------------------------------------------------------------

    @activity.defn(name="call_model")
    async def call_model(self, inp: CallModelInput) -> CallModelResult:
        """One attempt on one route, inside its bulkhead's slot limit when dispatched eagerly.

        On the workflow's queue a full bulkhead fails at once (``bulkhead_full``, before
        admission: not the route's fault), so a saturated bulkhead never holds more of the
        shared worker's slots than its own limit; on the bulkhead's queue it waits there.
        """
        gate = self._gate_for(inp.role)
        if gate is None:
            return await self._call_model(inp)
        if gate.locked() and not self._on_overflow_queue(inp.role):
            raise ApplicationError(
                f"bulkhead {self._policy.role(inp.role).bulkhead!r} is full on this worker",
                type=BULKHEAD_FULL,
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,
            )
        async with gate:
            return await self._call_model(inp)

    def _gate_for(self, role: str) -> asyncio.Semaphore | None:
        if not self._gates or role not in self._policy.roles:
            return None
        return self._gates.get(self._policy.role(role).bulkhead)

    def _on_overflow_queue(self, role: str) -> bool:
        try:
            queue = activity.info().task_queue
        except RuntimeError:
            return False  # called directly (tests)
        return self._overflow_queue_for is not None and queue == self._overflow_queue_for(role)

    async def _call_model(self, inp: CallModelInput) -> CallModelResult:
        """One attempt on one route: admit, stream, validate, record, classify."""
        endpoint = self._endpoint(inp.route)
        settings = self._policy.trial_settings(inp.route, inp.role)
        base = _attempt_base(inp.now)
        started = time.monotonic()
        admission = await self._admit(inp.route, settings, self._now(base, started))
        reserved = estimate_request_tokens(inp.request) + inp.request.max_tokens
        grant = await self._take_budget(inp, reserved, admission.trial, self._now(base, started))
        progress = _Progress()
        beat = asyncio.create_task(_heartbeat_loop(progress))
        try:
            reply = await complete(
                self._http, endpoint, inp.request, self._budgets(inp), on_progress=progress.update
            )
            data = validate_reply(
                reply, inp.output_schema, endpoint=inp.route, max_reply_bytes=inp.max_reply_bytes
            )
        except ProviderError as err:
            elapsed_ms = (time.monotonic() - started) * 1000
            at = self._now(base, started)
            await self._settle_unanswered(inp, grant, at)
            await self._record_failure(inp, err, elapsed_ms, admission.trial, at, settings)
            wait = self._rate_limit_wait(inp, err, at)
            raise _to_application_error(inp.route, err, elapsed_ms, wait) from err
        except asyncio.CancelledError:
            # A hedge loser or a workflow cancel: not the route's fault, free the trial slot.
            await self._settle_unanswered(inp, grant, self._now(base, started))
            if admission.trial:
                await self._health.release_trial(inp.route, self._now(base, started))
            raise
        finally:
            beat.cancel()
        outcome = CallOutcome(
            route=inp.route,
            at=self._now(base, started),
            ok=True,
            latency_ms=reply.latency_ms,
            ttft_ms=reply.ttft_ms,
            trial=admission.trial,
        )
        await self._on_answer(inp, endpoint, reply, data, outcome, grant, settings)
        return CallModelResult(
            reply=reply, data=data, trial=admission.trial, attempt=_attempt_number()
        ).for_route(inp.route)

    def _endpoint(self, route: str) -> EndpointConfig:
        try:
            return self._policy.endpoint(route)
        except PolicyError as exc:
            # The workflow planned with a policy this worker does not share: a deployment
            # configuration error that no retry and no other route can fix.
            raise ApplicationError(
                f"this worker's policy cannot serve the call: {exc}",
                type=POLICY_ERROR,
                non_retryable=True,
            ) from exc

    async def _admit(self, route: str, settings: BreakerSettings, now: float) -> Admission:
        """The breaker's admission, or a non-retryable ``breaker_rejected`` error."""
        admission = await self._health.admit(route, settings, now)
        if not admission.permitted:
            raise ApplicationError(
                f"breaker for route {route!r} rejected the call "
                f"({admission.reason.value if admission.reason else 'open'})",
                type=BREAKER_REJECTED,
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,
            )
        return admission

    def _budgets(self, inp: CallModelInput) -> Budgets:
        return Budgets(
            connect_s=min(self._connect_s, inp.timeout_ms / 1000),
            ttft_s=inp.ttft_budget_ms / 1000,
            idle_s=inp.idle_budget_ms / 1000,
            total_s=inp.timeout_ms / 1000,
            max_reply_bytes=inp.max_reply_bytes,
        )

    async def _on_answer(
        self,
        inp: CallModelInput,
        endpoint: EndpointConfig,
        reply: ChatReply,
        data: Any,
        outcome: CallOutcome,
        grant: BudgetGrant,
        settings: BreakerSettings,
    ) -> None:
        """Record the success, settle the rate budget, write the cache when it qualifies."""
        await self._record(outcome, settings)
        if grant.limited:
            used = reply.usage.input_tokens + reply.usage.output_tokens
            await self._health.settle_budget(grant, used, outcome.at)
        # A turn that asks for tools is not an answer: served from the cache later it would
        # read as an empty reply (the cache keeps text, not tool calls).
        if inp.cache is not None and not reply.tool_calls:
            await self._cache_answer(inp, reply, data, outcome.at)
        record.attempt_answered(inp.role, endpoint, reply)

    async def _take_budget(
        self, inp: CallModelInput, tokens: int, trial: bool, now: float
    ) -> BudgetGrant:
        """Reserve the call's request and token estimate from its shared rate budgets.

        A refusal ends the attempt without calling the provider (``rate_budget``, not a
        route failure: nothing is recorded against the route) and says when it refills.
        """
        scopes = scopes_for(self._policy, inp.role, inp.route)
        if not scopes:
            return BudgetGrant(granted=True)
        critical = self._policy.role(inp.role).critical
        grant = await self._health.take_budget(scopes, tokens, critical=critical, now=now)
        if grant.granted:
            return grant
        if trial:
            await self._health.release_trial(inp.route, now)
        bulkhead = self._policy.role(inp.role).bulkhead
        record.budget_refused(inp.role, inp.route, bulkhead, grant.refused_by or "")
        raise ApplicationError(
            f"rate budget {grant.refused_by} has no room for route {inp.route!r} "
            f"({tokens} tokens) for {grant.wait_s:.1f}s",
            {"retry_after_s": grant.wait_s, "scope": grant.refused_by, "latency_ms": 0.0},
            type=RATE_BUDGET,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        )

    async def _settle_unanswered(self, inp: CallModelInput, grant: BudgetGrant, at: float) -> None:
        """An attempt without an answer keeps its input estimate charged (the provider may
        have read the prompt) and gives back the output reservation."""
        if grant.limited:
            await self._health.settle_budget(grant, estimate_request_tokens(inp.request), at)

    async def _cache_answer(
        self, inp: CallModelInput, reply: ChatReply, data: Any, at: float
    ) -> None:
        """Write the answer to the response cache (the workflow asked: it is a full answer).

        Done here rather than in a second activity, which cost a whole Temporal round trip
        per successful call. A cache that fails must not fail an answer already obtained.
        """
        assert inp.cache is not None
        entry = CachedEntry(
            role=inp.role,
            content=reply.text,
            data=data,
            model=reply.model,
            route=inp.route,
            stored_at=at,
        )
        try:
            await self._cache.put(inp.cache.key, entry, ttl_s=inp.cache.ttl_s)
        except Exception as exc:  # any cache fault; cancellation is not an Exception
            log.warning("response cache write for role %r failed: %s", inp.role, exc)

    def _rate_limit_wait(
        self, inp: CallModelInput, err: ProviderError, at: float
    ) -> RateLimitWait | None:
        """For a 429: wait it out on this route (a Temporal retry) or fail over now."""
        if err.error_class is not ErrorClass.RATE_LIMITED:
            return None
        return same_route_wait_s(
            err.retry_after,
            self._policy.rate_limit,
            now=at,
            deadline=inp.deadline_at,
            min_attempt_ms=inp.ttft_budget_ms,
            retry_left=_retry_left(),
        )

    async def _record_failure(
        self,
        inp: CallModelInput,
        err: ProviderError,
        elapsed_ms: float,
        trial: bool,
        at: float,
        settings: BreakerSettings,
    ) -> None:
        outcome = _failed_outcome(
            inp.route, err, at, elapsed_ms, trial=trial, rate_limit=self._policy.rate_limit
        )
        await self._record(outcome, settings)
        if isinstance(err, ContextLengthError) and err.context_window is not None:
            # The provider's statement beats the configured window, for every worker.
            await self._health.learn_context_window(inp.route, err.context_window, at)
        record.attempt_failed(
            inp.role,
            self._policy.endpoint(inp.route),
            err.error_class.value,
            elapsed_ms,
            semantic=err.classification.semantic,
        )

    async def _record(self, outcome: CallOutcome, settings: Any) -> Transition | None:
        transition = await self._health.record(outcome, settings)
        if transition is not None:
            log.warning(
                "breaker %s: %s -> %s (%s)",
                transition.route,
                transition.from_state.value,
                transition.to_state.value,
                transition.reason.value,
            )
            record.breaker_transition(transition)
        return transition

    @staticmethod
    def _now(base: float, started_monotonic: float) -> float:
        return base + (time.monotonic() - started_monotonic)

    # -- health probes ------------------------------------------------------------------

    @activity.defn(name="probe_endpoint")
    async def probe_endpoint(self, inp: ProbeInput) -> ProbeResult:
        """Send a tiny completion to one endpoint and record it as a probe (or trial).

        Only where passive evidence is missing (:func:`resilience.probing.probe_decision`):
        a route with recent real traffic, an open breaker before its ``open_until``, a
        forced-open route and a route cooling down after a 429 are not probed. A probe
        that meets a 429 cools the route down; it never trips or re-opens its breaker.
        """
        endpoint = self._policy.endpoint(inp.route)
        settings = self._policy.trial_settings(inp.route)
        interval = inp.interval_s or self._policy.probes.interval_s
        half_open = inp.half_open_interval_s or min(
            interval, self._policy.probes.half_open_interval()
        )
        snap = await self._health.snapshot([inp.route], now=inp.now, window_s=interval, min_calls=1)
        decision = probe_decision(
            snap.get(inp.route), now=inp.now, interval_s=interval, half_open_interval_s=half_open
        )
        if not decision.probe:
            return self._skipped_probe(inp.route, snap.get(inp.route).breaker, decision)
        started = time.monotonic()
        trial = False
        if decision.reason is not ProbeReason.OPEN_RECOVERY_CHECK:
            # Half-open (or due to be): the probe takes a trial slot like a real call would.
            # An open route's recovery check is not a trial: it needs no slot, and only a
            # good one changes the breaker (to half-open).
            admission = await self._health.admit(inp.route, settings, inp.now)
            if not admission.permitted:
                b = await self._health.breaker(inp.route)
                return ProbeResult(
                    route=inp.route, ok=False, skipped=True, breaker=b.state, reason="not_admitted"
                )
            trial = admission.trial
        ttft_s = probe_first_token_s(
            decision.reason, settings.trial_latency_ms, self._policy.probes.timeout_s
        )
        # A probe is stamped when it was sent: the cadence (resilience.probing) counts
        # from there, so a probe that waited out a slow first token does not make the
        # next round skip the route.
        at = self._now(inp.now, started)
        reply, err = await self._send_probe(endpoint, inp.route, ttft_s)
        if err is None and reply is not None:
            outcome = CallOutcome(
                route=inp.route,
                at=at,
                ok=True,
                latency_ms=reply.latency_ms,
                ttft_ms=reply.ttft_ms,
                probe=True,
                trial=trial,
            )
        else:
            assert err is not None
            elapsed_ms = (time.monotonic() - started) * 1000
            outcome = _failed_outcome(
                inp.route,
                err,
                at,
                elapsed_ms,
                trial=trial,
                probe=True,
                rate_limit=self._policy.rate_limit,
            )
        transition = await self._record(outcome, settings)
        b = await self._health.breaker(inp.route)
        record.probe(inp.route, outcome.ok, b.state.value)
        return ProbeResult(
            route=inp.route,
            ok=outcome.ok,
            error_class=err.error_class.value if err else None,
            latency_ms=outcome.latency_ms,
            ttft_ms=outcome.ttft_ms,
            trial=trial,
            breaker=b.state,
            transition=transition,
            reason=decision.reason.value,
        )

    def _skipped_probe(self, route: str, state: Any, decision: ProbeDecision) -> ProbeResult:
        record.probe_skipped(route, decision.reason.value, getattr(state, "value", str(state)))
        return ProbeResult(
            route=route, ok=False, skipped=True, breaker=state, reason=decision.reason.value
        )

    async def _send_probe(
        self, endpoint: Any, route: str, ttft_s: float
    ) -> tuple[ChatReply | None, ProviderError | None]:
        probes = self._policy.probes
        request = ChatRequest(
            messages=[Message(role="user", content=PROBE_PROMPT)],
            max_tokens=probes.max_tokens,
            temperature=0.0,
        )
        budgets = Budgets(
            connect_s=min(self._connect_s, probes.timeout_s),
            ttft_s=ttft_s,
            idle_s=probes.timeout_s,
            total_s=probes.timeout_s,
            max_reply_bytes=DEFAULT_MAX_REPLY_BYTES,
        )
        try:
            reply = await complete(self._http, endpoint, request, budgets)
            validate_reply(reply, None, endpoint=route, max_reply_bytes=DEFAULT_MAX_REPLY_BYTES)
        except ProviderError as exc:
            return None, exc
        return reply, None

    @activity.defn(name="force_route")
    async def force_route(self, inp: ForceRouteInput) -> Transition:
        """Operator override: force a route open or closed, or release it."""
        self._policy.endpoint(inp.route)  # unknown route → clear error before touching state
        return await self._health.force(inp.route, inp.state, inp.now)

    @activity.defn(name="health_table")
    async def health_table(self, inp: HealthTableInput) -> HealthTable:
        """Breaker state and rolling stats of the given routes (all routes when empty)."""
        routes = inp.routes or list(self._policy.endpoints)
        snap = await self._health.snapshot(
            routes, now=inp.now, window_s=inp.window_s, min_calls=1, role=None
        )
        breakers = [await self._health.breaker(r) for r in routes]
        for b in breakers:
            record.breaker_state(b.route, b.state.value)
        status = await self._health.status()
        windows = context_windows(self._policy, snap)
        scopes = all_scopes(self._policy)
        levels = await self._health.budget_levels(scopes, inp.now) if scopes else []
        quality = await quality_rows(self._health, self._policy, inp.now)
        return HealthTable(
            taken_at=inp.now,
            # Recent samples are for SLA streaks, not for the status table (and this table
            # enters the monitor's history every round).
            rows=[snap.get(r).model_copy(update={"recent": []}) for r in routes],
            breakers=breakers,
            store=status.backend,
            store_degraded=not status.healthy,
            store_error=status.last_error,
            store_degraded_since=status.degraded_since,
            context_windows={r: windows[r] for r in routes if r in windows},
            budgets=levels,
            quality=[q for q in quality if q.route in routes],
        )

    # -- response cache -----------------------------------------------------------------

    @activity.defn(name="cache_lookup")
    async def cache_lookup(self, inp: CacheLookupInput) -> CacheLookupResult:
        """The cached answer for this key if it is younger than the staleness budget,
        else an explicit miss saying why (no entry, or too old)."""
        entry = await self._cache.get(inp.key, now=inp.now)
        if entry is None:
            record.cache_lookup(False)
            return CacheLookupResult(hit=False, miss_reason="no entry")
        age_s = max(0.0, inp.now - entry.stored_at)
        hit = age_s <= inp.max_staleness_s
        record.cache_lookup(hit)
        if not hit:
            return CacheLookupResult(
                hit=False,
                miss_reason=f"stale: {age_s:.0f}s old > {inp.max_staleness_s:.0f}s allowed",
            )
        return CacheLookupResult(
            hit=True,
            answer=CachedAnswer(
                content=entry.content,
                data=entry.data,
                model=entry.model,
                route=entry.route,
                age_s=age_s,
            ),
        )

    @activity.defn(name="cache_store")
    async def cache_store(self, inp: CacheStoreInput) -> None:
        """Remember a full-capability answer for the degraded tier."""
        entry = CachedEntry(
            role=inp.role,
            content=inp.content,
            data=inp.data,
            model=inp.model,
            route=inp.route,
            stored_at=inp.now,
        )
        await self._cache.put(inp.key, entry, ttl_s=inp.ttl_s)

    def all(self) -> list[Callable[..., Any]]:
        """Every activity of this class, for worker registration."""
        return [
            self.role_context,
            self.pipeline_roles,
            self.call_model,
            self.probe_endpoint,
            self.force_route,
            self.health_table,
            self.cache_lookup,
            self.cache_store,
        ]


class _Progress:
    """Latest streamed text, shared between the provider callback and the heartbeat loop.

    Only the loop heartbeats: one heartbeat per progress report cost an asyncio task, a
    payload encoding and a call into the worker's core each (three per healthy call),
    while the core sends at most one per throttle interval and only the newest counts.
    """

    def __init__(self) -> None:
        self.text = ""
        self.tokens = 0

    def update(self, text: str, tokens: int) -> None:
        self.text = text
        self.tokens = tokens


def _safe_heartbeat(progress: _Progress) -> None:
    # Heartbeats carry the tail of the partial text so an operator can see how far a
    # stream got; never the whole text, which an endless stream would grow without bound.
    try:
        activity.heartbeat(
            {"tokens": progress.tokens, "partial": progress.text[-HEARTBEAT_TAIL_CHARS:]}
        )
    except RuntimeError:
        pass  # not inside an activity (direct calls in tests)


async def _heartbeat_loop(progress: _Progress) -> None:
    # Cancellation reaches an activity only through heartbeats, and a route that never
    # sends its first token would otherwise never heartbeat. The first beat waits one
    # interval: a call that answers sooner costs no heartbeat at all, and a hedge loser
    # cancelled in its first second learns it at that first beat (not the core's next
    # throttled one, 4 s on).
    while True:
        await asyncio.sleep(HEARTBEAT_EVERY_S)
        _safe_heartbeat(progress)


def _attempt_base(scheduled_now: float) -> float:
    """Workflow time at which this attempt was scheduled.

    ``scheduled_now`` is the workflow's clock when it scheduled the activity; a Temporal
    retry (a 500, or a 429 waited out) reuses that input, so add the server time between
    the first schedule and this attempt's, keeping health timestamps on the workflow clock.
    """
    try:
        info = activity.info()
    except RuntimeError:
        return scheduled_now  # called directly (tests), not as an activity
    if info.attempt <= 1:
        return scheduled_now
    return (
        scheduled_now + (info.current_attempt_scheduled_time - info.scheduled_time).total_seconds()
    )


def _attempt_number() -> int:
    """Temporal's attempt number of this activity (1 outside an activity)."""
    try:
        return activity.info().attempt
    except RuntimeError:
        return 1


def _retry_left() -> bool:
    """Whether Temporal will run this activity again if it fails retryably."""
    try:
        info = activity.info()
    except RuntimeError:
        return True
    policy = info.retry_policy
    if policy is None or not policy.maximum_attempts:
        return True
    return info.attempt < policy.maximum_attempts


def _failed_outcome(
    route: str,
    err: ProviderError,
    at: float,
    elapsed_ms: float,
    *,
    trial: bool,
    probe: bool = False,
    rate_limit: RateLimitSettings | None = None,
) -> CallOutcome:
    """The health observation of a classified failure, as its classification counts it.

    A 429 carries its cool-down as ``retry_after_s`` (the provider's Retry-After, else the
    policy's default) so the breaker records ``cooldown_until``.
    """
    cls = err.classification
    retry_after = err.retry_after
    if err.error_class is ErrorClass.RATE_LIMITED:
        retry_after = cooldown_s(err.retry_after, rate_limit or RateLimitSettings())
    return CallOutcome(
        route=route,
        at=at,
        ok=False,
        error_class=err.error_class,
        latency_ms=elapsed_ms,
        semantic_failure=cls.semantic,
        counts_against_route=cls.counts_against_route,
        retry_after_s=retry_after,
        trial=trial,
        probe=probe,
    )


def _to_application_error(
    route: str, err: ProviderError, elapsed_ms: float, wait: RateLimitWait | None = None
) -> ApplicationError:
    """Map a classified provider error to what Temporal retries (or not) and the workflow reads.

    Only two things are retried on the same route, by Temporal: a RETRY-class error (a
    500) after the retry policy's backoff, and a 429 whose Retry-After is short enough to
    wait out (``wait``), after exactly that delay. Everything else is the workflow's to
    fail over, so it must not be blindly repeated.
    """
    # Failure details enter history: the partial text keeps only its tail, so a runaway
    # stream fails its attempt cleanly instead of exceeding the gRPC message limit.
    partial, cut = tail(err.partial_text)
    failure = AttemptFailure(
        route=route,
        error_class=err.error_class.value,
        decision=err.decision.value,
        message=clip(err.message),
        status=err.status,
        provider_code=err.provider_code,
        retry_after_s=err.retry_after,
        partial_text=partial,
        partial_chars=len(err.partial_text),
        partial_truncated=cut,
        latency_ms=elapsed_ms,
        context_window=getattr(err, "context_window", None),
        prompt_tokens=getattr(err, "prompt_tokens", None),
        rate_limit_wait=wait.verdict.value if wait is not None else None,
    )
    if wait is not None and wait.wait and wait.delay_s is not None:
        return ApplicationError(
            clip(str(err)),
            failure.model_dump(mode="json"),
            type=err.error_class.value,
            non_retryable=False,
            next_retry_delay=timedelta(seconds=max(wait.delay_s, MIN_RETRY_DELAY_S)),
        )
    retry_same_route = err.decision is Decision.RETRY and err.retryable
    return ApplicationError(
        clip(str(err)),
        failure.model_dump(mode="json"),
        type=err.error_class.value,
        non_retryable=not retry_same_route,
        next_retry_delay=timedelta(seconds=err.retry_after) if err.retry_after else None,
        # A classified provider failure is what failover expects: the SDK then logs it at
        # DEBUG instead of a WARNING with a traceback per attempt (breaker transitions
        # and the failover history say what matters).
        category=ApplicationErrorCategory.BENIGN,
    )
