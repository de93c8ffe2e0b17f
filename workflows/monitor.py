"""``HealthMonitorWorkflow``: active health probing, one per deployment.

Every ``interval_s`` it asks each route's ``probe_endpoint`` activity for a probe: a tiny
completion, sent only where passive evidence is missing (no real call for a whole
interval, an open breaker checking for recovery, or a half-open one that needs trials;
never into a 429 cool-down). The activity records the result: a good probe moves an open
breaker to half-open at once, and while any route is half-open the rounds come every
``half_open_interval_s`` (a quarter interval by default) until its good probes close it,
so a healed route takes traffic again within about 1.5 probe intervals. Rounds start an
interval apart however long their probes took (a round longer than the interval is
followed at once), and a probe of an open route gives up at the TTFT budget, so one probe
stuck in a brownout does not delay the good probe after recovery. A
latency-demoted route earns its way back the same way. It
continues-as-new every ``iterations_per_run`` rounds or when the server suggests it, so
its history stays bounded. The ``override_route`` update forces a route open or closed
or releases it; its validator refuses a route the monitor does not probe (naming the
known ones) before anything reaches history, and an override that fails fails the update,
never the monitor. The ``follow_policy`` update brings the monitor to a worker's policy
(:class:`MonitorPolicy`: routes, cadence, the policy's ref): a round with the new routes
starts at once and the next run continues with them; a policy from a worker that started
before the one followed is refused by its validator (the worker started last wins).
Signals pause or resume probing; the ``health`` query returns the table.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.health_models import (
        ForceRouteInput,
        HealthTable,
        HealthTableInput,
        ProbeInput,
        ProbeResult,
    )
    from agent_failover.resilience.breaker import Transition
    from agent_failover.resilience.contracts import BreakerState
    from agent_failover.workflows.inputs import workflow_input
    from agent_failover.workflows.models import (
        ForceRouteSignal,
        MonitorInput,
        MonitorPolicy,
        MonitorTable,
        RouteOverride,
    )


def monitor_workflow_id(task_queue: str) -> str:
    """The monitor's workflow id: one per deployment (task queue), so starting it is idempotent."""
    return f"{task_queue}-health-monitor"


PROBE_TIMEOUT = timedelta(seconds=30)
#: The half-open cadence when the input does not set one: a quarter of the interval.
HALF_OPEN_SPEEDUP = 4.0
MIN_HALF_OPEN_INTERVAL_S = 0.5


def _fast(inp: MonitorInput) -> float:
    if inp.half_open_interval_s is not None:
        return min(inp.half_open_interval_s, inp.interval_s)
    return max(MIN_HALF_OPEN_INTERVAL_S, inp.interval_s / HALF_OPEN_SPEEDUP)


FORCE_TIMEOUT = timedelta(seconds=10)
#: Error type of an override the health store could not apply (fails the update only).
OVERRIDE_FAILED = "override_failed"
# Probes are themselves the retry loop: a failed probe is data, not something to repeat.
_NO_RETRY = RetryPolicy(maximum_attempts=1)


@workflow.defn(name="HealthMonitorWorkflow")
class HealthMonitorWorkflow:
    @workflow.init
    def __init__(self, *args: Any) -> None:
        # The routes are read here, not in run(), so an update validator arriving in the
        # very first task already knows them. Leniently: a bad input is run()'s to report.
        first = args[0] if len(args) == 1 else None
        if isinstance(first, MonitorInput):
            first = first.model_dump()
        known = first.get("routes") if isinstance(first, dict) else None
        self._routes = [str(r) for r in known] if isinstance(known, list) else []
        interval = first.get("interval_s") if isinstance(first, dict) else None
        self._interval_s = float(interval) if isinstance(interval, int | float) else None
        self._paused = False
        self._results: dict[str, ProbeResult] = {}
        self._rounds = 0
        self._wake = False
        self._table: HealthTable | None = None
        # The input this run continues as new with: a follow_policy update replaces its
        # routes and cadence (set by run(); an update before that waits in _pending).
        self._inp: MonitorInput | None = None
        self._pending: MonitorPolicy | None = None

    @workflow.run
    async def run(self, *args: Any) -> None:
        # Untyped on purpose (see workflows.inputs): a bad start fails the run at once
        # instead of failing its workflow task forever. Callers pass a MonitorInput.
        inp = workflow_input(MonitorInput, args, workflow_name="HealthMonitorWorkflow")
        # An update may have arrived in the first task, before run(): it wins.
        cur = inp.following(self._pending) if self._pending else inp
        self._inp = cur
        self._routes, self._interval_s = list(cur.routes), cur.interval_s
        self._paused = inp.paused
        self._results = dict(inp.last_results)
        self._rounds = inp.rounds
        for _ in range(inp.iterations_per_run):
            # Cleared before the work, not after: a signal that lands while probes run
            # must still cut the following wait short.
            self._wake = False
            started = workflow.now()
            # Read every round: a follow_policy update changes the routes and cadence.
            cur = self._inp
            assert cur is not None
            if not self._paused:
                await self._probe_all(cur.routes, cur.interval_s, _fast(cur))
                self._rounds += 1
            await self._refresh_table(cur.routes)
            await self._until_next_round(cur, started)
            if workflow.info().is_continue_as_new_suggested():
                break
        # Wait for signal handlers to finish so nothing is lost across the boundary.
        await workflow.wait_condition(workflow.all_handlers_finished)
        # The next run starts from the policy followed now (an update may have come in
        # the last wait), not this run's first input.
        final = self._inp
        assert final is not None
        workflow.continue_as_new(
            final.model_copy(
                update={
                    "paused": self._paused,
                    "last_results": self._results,
                    "rounds": self._rounds,
                }
            )
        )

    async def _until_next_round(self, cur: MonitorInput, started: datetime) -> None:
        """Wait until the next round is due, or a signal or update wakes the monitor."""
        # Rounds start an interval apart: a slow probe must not push the next
        # one a whole interval after it finished.
        wait_s = self._next_wait(cur) - (workflow.now() - started).total_seconds()
        if wait_s > 0:
            try:
                await workflow.wait_condition(
                    lambda: self._wake,
                    timeout=timedelta(seconds=wait_s),
                    timeout_summary=f"next probe round in {wait_s:g}s",
                )
            except TimeoutError:
                pass

    def _next_wait(self, inp: MonitorInput) -> float:
        """The fast cadence while a route is half-open (probing), else the interval."""
        if not self._paused and any(
            r.breaker is BreakerState.HALF_OPEN for r in self._results.values()
        ):
            return _fast(inp)
        return inp.interval_s

    async def _probe_all(self, routes: list[str], interval_s: float, fast_s: float) -> None:
        # Every route gets its probe_endpoint activity each round; the activity decides
        # (resilience.probing) whether a probe is worth sending: only where real traffic
        # gave no evidence for a whole interval, or the breaker needs trials.
        now = workflow.now().timestamp()
        handles = [
            workflow.start_activity(
                "probe_endpoint",
                ProbeInput(route=r, now=now, interval_s=interval_s, half_open_interval_s=fast_s),
                result_type=ProbeResult,
                start_to_close_timeout=PROBE_TIMEOUT,
                summary=f"probe {r}",
                retry_policy=_NO_RETRY,
            )
            for r in routes
        ]
        for route, h in zip(routes, handles, strict=True):
            try:
                self._results[route] = await h
            except Exception as exc:
                workflow.logger.warning("probe of %s failed: %s", route, exc)

    async def _refresh_table(self, routes: list[str]) -> None:
        # The table is what `failover status` shows: operators see breaker state and
        # latency without needing credentials for the shared store.
        try:
            self._table = await workflow.execute_activity(
                "health_table",
                HealthTableInput(routes=routes, now=workflow.now().timestamp()),
                result_type=HealthTable,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=_NO_RETRY,
                summary=f"health table of {len(routes)} routes",
            )
        except Exception as exc:
            workflow.logger.warning("health table refresh failed: %s", exc)

    async def _force(self, sig: ForceRouteSignal) -> Transition:
        target = sig.state.value if sig.state else "released"
        return await workflow.execute_activity(
            "force_route",
            ForceRouteInput(route=sig.route, state=sig.state, now=workflow.now().timestamp()),
            result_type=Transition,
            start_to_close_timeout=FORCE_TIMEOUT,
            retry_policy=_NO_RETRY,
            summary=f"operator: {sig.route} → {target}",
        )

    @workflow.update(name="override_route")
    async def override_route(self, req: ForceRouteSignal) -> RouteOverride:
        """Force a route open/closed (``state``) or release it (``state`` null); wait until
        the health store applied it and return the breaker state before and after."""
        try:
            t = await self._force(req)
        except ActivityError as exc:
            raise ApplicationError(
                f"could not apply the override of {req.route}: {exc.cause or exc}",
                type=OVERRIDE_FAILED,
            ) from None
        # Refresh the table now rather than at the next round, so `status` shows it.
        self._wake = True
        return RouteOverride(
            route=req.route,
            from_state=t.from_state,
            to_state=t.to_state,
            changed=t.from_state is not t.to_state,
        )

    @override_route.validator
    def _known_route(self, req: ForceRouteSignal) -> None:
        # Rejected here, the request never enters history and the monitor never sees it.
        if req.route not in self._routes:
            raise ValueError(
                f"unknown route {req.route!r}; known routes: {', '.join(self._routes)}"
            )

    @workflow.update(name="follow_policy")
    def follow_policy(self, req: MonitorPolicy) -> MonitorTable:
        """Probe ``req``'s routes at its cadence from the next round, which starts now;
        the next run continues with them. Returns the monitor's table after the change."""
        if self._inp is None:
            self._pending = req
        else:
            self._inp = self._inp.following(req)
        self._routes, self._interval_s = list(req.routes), req.interval_s
        # Results of routes the policy dropped would show forever in `failover status`.
        self._results = {r: v for r, v in self._results.items() if r in req.routes}
        self._wake = True
        return self.health()

    @follow_policy.validator
    def _newer_policy(self, req: MonitorPolicy) -> None:
        # Rejected here, an old worker's policy never enters history: the worker started
        # last wins, so a rollout's old workers cannot take the monitor back.
        cur = self._inp
        if cur is None:
            return  # the first task: run() applies it
        if req.policy_ref is not None and req.policy_ref == cur.policy_ref:
            raise ValueError(f"the monitor already follows policy {req.policy_ref}")
        if req.since < cur.policy_since:
            raise ValueError(
                f"policy {req.policy_ref} is older (worker started at {req.since:.3f}) than "
                f"the policy {cur.policy_ref} the monitor follows (from {cur.policy_since:.3f})"
            )

    @workflow.signal(name="pause")
    def pause(self) -> None:
        self._paused = True

    @workflow.signal(name="resume")
    def resume(self) -> None:
        self._paused = False
        self._wake = True

    @workflow.query(name="health")
    def health(self) -> MonitorTable:
        return MonitorTable(
            paused=self._paused,
            rounds=self._rounds,
            results=self._results,
            table=self._table,
            routes=self._routes,
            interval_s=self._interval_s,
            policy_ref=self._inp.policy_ref if self._inp else None,
            policy_since=self._inp.policy_since if self._inp else None,
        )
