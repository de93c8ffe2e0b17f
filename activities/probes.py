"""Health probes: a tiny completion sent to a route only where passive evidence is missing.

``probe_endpoint`` is what the health monitor runs each round for every route. Whether a
route is probed at all is the pure :func:`resilience.probing.probe_decision`; the probe
itself is a deterministic, cheap request whose outcome the breaker records as a probe (or
as a half-open trial).
"""

from __future__ import annotations

import time
from typing import Any

from temporalio import activity

from agent_failover.activities.deps import ActivityDeps, workflow_now
from agent_failover.activities.failures import failed_outcome
from agent_failover.activities.health_models import ProbeInput, ProbeResult
from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.providers.validate import validate_reply
from agent_failover.resilience.config import DEFAULT_MAX_REPLY_BYTES, BreakerSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.errors import ProviderError
from agent_failover.resilience.models import ChatReply, ChatRequest, Message
from agent_failover.resilience.probing import (
    ProbeDecision,
    ProbeReason,
    probe_decision,
    probe_first_token_s,
)
from agent_failover.telemetry import record

#: Prompt of the health probe: tiny, deterministic, cheap.
PROBE_PROMPT = "Reply with the single word: pong"


class ProbeActivities:
    """``probe_endpoint`` over one worker's :class:`ActivityDeps`."""

    def __init__(self, deps: ActivityDeps) -> None:
        self._deps = deps

    @activity.defn(name="probe_endpoint")
    async def probe_endpoint(self, inp: ProbeInput) -> ProbeResult:
        """Send a tiny completion to one endpoint and record it as a probe (or trial).

        Only where passive evidence is missing (:func:`resilience.probing.probe_decision`):
        a route with recent real traffic, an open breaker before its ``open_until``, a
        forced-open route and a route cooling down after a 429 are not probed. A probe
        that meets a 429 cools the route down; it never trips or re-opens its breaker.
        """
        health = self._deps.health
        endpoint = self._deps.policy.endpoint(inp.route)
        settings = self._deps.policy.trial_settings(inp.route)
        decision, state = await self._decide(inp)
        if not decision.probe:
            return self._skipped_probe(inp.route, state, decision)
        started = time.monotonic()
        trial = False
        if decision.reason is not ProbeReason.OPEN_RECOVERY_CHECK:
            # Half-open (or due to be): the probe is a trial, admitted apart from real
            # calls. It never takes or waits for one of their trial slots, so slots held
            # by calls that never report cannot keep a healed route from closing. An open
            # route's recovery check needs no admission: only a good one changes the
            # breaker (to half-open).
            admission = await health.admit(inp.route, settings, inp.now, probe=True)
            if not admission.permitted:
                b = await health.breaker(inp.route)
                return ProbeResult(
                    route=inp.route, ok=False, skipped=True, breaker=b.state, reason="not_admitted"
                )
            trial = admission.trial
        outcome, err = await self._probe(inp, endpoint, settings, decision, started)
        transition = await self._deps.record(outcome, settings)
        b = await health.breaker(inp.route)
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

    async def _decide(self, inp: ProbeInput) -> tuple[ProbeDecision, Any]:
        """Whether to probe the route now, and its breaker state as the snapshot saw it."""
        probes = self._deps.policy.probes
        interval = inp.interval_s or probes.interval_s
        half_open = inp.half_open_interval_s or min(interval, probes.half_open_interval())
        snap = await self._deps.health.snapshot(
            [inp.route], now=inp.now, window_s=interval, min_calls=1
        )
        health = snap.get(inp.route)
        decision = probe_decision(
            health, now=inp.now, interval_s=interval, half_open_interval_s=half_open
        )
        if decision.probe and decision.reason is not ProbeReason.OPEN_RECOVERY_CHECK:
            # Only a probe about to go asks for the leases (one more read, off the calls'
            # path): a user call in flight is traffic, and must not be joined.
            calls = await self._deps.health.in_flight.count(inp.route, inp.now)
            decision = probe_decision(
                health,
                now=inp.now,
                interval_s=interval,
                half_open_interval_s=half_open,
                in_flight=calls,
            )
        return decision, health.breaker

    async def _probe(
        self,
        inp: ProbeInput,
        endpoint: Any,
        settings: BreakerSettings,
        decision: ProbeDecision,
        started: float,
    ) -> tuple[CallOutcome, ProviderError | None]:
        """Send the probe; the outcome the breaker records, and the error if it failed."""
        ttft_s = probe_first_token_s(
            decision.reason, settings.trial_latency_ms, self._deps.policy.probes.timeout_s
        )
        # A probe is stamped when it was sent: the cadence (resilience.probing) counts
        # from there, so a probe that waited out a slow first token does not make the
        # next round skip the route.
        at = workflow_now(inp.now, started)
        reply, err = await self._send_probe(endpoint, inp.route, ttft_s)
        if err is None and reply is not None:
            outcome = CallOutcome(
                route=inp.route,
                at=at,
                ok=True,
                latency_ms=reply.latency_ms,
                ttft_ms=reply.ttft_ms,
                probe=True,
            )
            return outcome, None
        assert err is not None
        elapsed_ms = (time.monotonic() - started) * 1000
        outcome = failed_outcome(
            inp.route,
            err,
            at,
            elapsed_ms,
            trial=False,  # a probe holds no trial lease (admit_probe)
            probe=True,
            rate_limit=self._deps.policy.rate_limit,
        )
        return outcome, err

    def _skipped_probe(self, route: str, state: Any, decision: ProbeDecision) -> ProbeResult:
        record.probe_skipped(route, decision.reason.value, getattr(state, "value", str(state)))
        return ProbeResult(
            route=route, ok=False, skipped=True, breaker=state, reason=decision.reason.value
        )

    async def _send_probe(
        self, endpoint: Any, route: str, ttft_s: float
    ) -> tuple[ChatReply | None, ProviderError | None]:
        probes = self._deps.policy.probes
        request = ChatRequest(
            messages=[Message(role="user", content=PROBE_PROMPT)],
            max_tokens=probes.max_tokens,
            temperature=0.0,
        )
        budgets = Budgets(
            connect_s=min(self._deps.connect_s, probes.timeout_s),
            ttft_s=ttft_s,
            idle_s=probes.timeout_s,
            total_s=probes.timeout_s,
            max_reply_bytes=DEFAULT_MAX_REPLY_BYTES,
        )
        try:
            reply = await complete(self._deps.http, endpoint, request, budgets)
            validate_reply(reply, None, endpoint=route, max_reply_bytes=DEFAULT_MAX_REPLY_BYTES)
        except ProviderError as exc:
            return None, exc
        return reply, None
