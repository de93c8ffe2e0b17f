"""What a workflow asks before it plans: the role's policy, its routes' health, the roles.

``role_context`` runs as a local activity before each plan: the role's checked policy
subset (travelling by ref, published to the policy store first), a fresh health snapshot
(with, when the workflow asks, the call's in-flight lease on its first route taken in the
same round trip) with the SLA verdicts persisted (and, when enabled, the cost-efficiency
verdicts) and the rate budgets read, and the task queues its attempts go to.
``pipeline_roles`` says which roles of the worker's policy play which part of the pipeline.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_failover.activities.call_leases import first_lease_until
from agent_failover.activities.deps import ActivityDeps
from agent_failover.activities.failures import POLICY_ERROR
from agent_failover.activities.models import (
    HeldLease,
    PipelineRoles,
    PipelineRolesInput,
    RoleContext,
    RoleContextInput,
)
from agent_failover.resilience.budget import scopes_for
from agent_failover.resilience.config import PolicyConfig, PolicyError, RolePolicy
from agent_failover.resilience.contracts import HealthSnapshot
from agent_failover.resilience.cost_efficiency import evaluate_cost_efficiency
from agent_failover.resilience.first_attempt import plans_hedge
from agent_failover.resilience.pipeline import PIPELINE_STAGE_ROLES, pipeline_policy_errors
from agent_failover.resilience.sla import evaluate_sla
from agent_failover.stores.in_flight import LeaseTake
from agent_failover.telemetry import record

#: Hex digits of the id of a lease the role context takes (unique among a route's leases).
LEASE_ID_HEX = 16


def _first_lease(inp: RoleContextInput, role: RolePolicy, routes: list[str]) -> LeaseTake | None:
    """The call's in-flight lease on the route it tries first when healthy (the roster's
    first), taken in the snapshot's round trip, when the workflow asks: the monitor leaves
    that route alone from the call's very start, and the attempt there takes no lease of its
    own (:class:`~activities.call_leases.AttemptLeases`)."""
    if not inp.lease or not routes:
        return None
    until = round(first_lease_until(inp.now, role.attempt_timeout / 1000), 3)
    return LeaseTake(routes[0], uuid.uuid4().hex[:LEASE_ID_HEX], until)


class RoleContextActivities:
    """``role_context`` and ``pipeline_roles`` over one worker's :class:`ActivityDeps`."""

    def __init__(self, deps: ActivityDeps) -> None:
        self._deps = deps
        #: Per (policy role, subset): the role to send, the subset's own copy when equal,
        #: so writing the context finds it by identity instead of comparing it whole.
        self._sent_roles: dict[str, tuple[RolePolicy, PolicyConfig, RolePolicy]] = {}

    @activity.defn(name="role_context")
    async def role_context(self, inp: RoleContextInput) -> RoleContext:
        """The role's policy, its routes' endpoints and a fresh health snapshot.

        Runs as a local activity before each plan. SLA demotion is evaluated here with
        the pure :func:`resilience.sla.evaluate_sla` and persisted, so hysteresis state
        survives across calls and workers.
        """
        role, routes = self._role_and_routes(inp)
        lease = _first_lease(inp, role, routes)
        snap = await self._deps.health.snapshot(
            routes,
            now=inp.now,
            window_s=role.sla.window_s,
            min_calls=role.sla.min_samples,
            role=inp.role,
            lease=lease,
        )
        for route in routes:
            await self._judge_sla(inp, role, route, snap)
        if self._deps.policy.cost_efficiency.enabled:
            for route in routes:
                await self._judge_cost(inp, route, snap)
        await self._read_budgets(inp.role, routes, snap, inp.now)
        # A lease taken in a degraded store's local view is not the other workers': the
        # attempt (maybe elsewhere, Redis maybe back) takes its own; this one lapses.
        held = None
        if lease is not None and not snap.store_degraded:
            held = HeldLease(route=lease.route, id=lease.lease, until=lease.until)
        return await self._context(inp, role, snap, held)

    def _role_and_routes(self, inp: RoleContextInput) -> tuple[RolePolicy, list[str]]:
        policy = self._deps.policy
        try:
            role = policy.role(inp.role)
            routes = inp.routes or policy.routes_for(inp.role)
            for route in routes:
                policy.endpoint(route)
        except PolicyError as exc:
            # Retrying cannot make a role or route exist: fail the caller with the names.
            raise ApplicationError(str(exc), type=POLICY_ERROR, non_retryable=True) from exc
        return role, routes

    async def _judge_sla(
        self, inp: RoleContextInput, role: RolePolicy, route: str, snap: HealthSnapshot
    ) -> None:
        """Evaluate the route's SLA verdict, persist a change, keep what planning reads."""
        rh = snap.get(route)
        stats = rh.role_stats or rh.stats  # the role's own calls plus probes
        verdict = evaluate_sla(
            rh.sla_demoted,
            stats,
            role.sla,
            self._deps.policy.hysteresis_margin,
            recent=rh.recent,
            since=rh.sla_since,
            now=inp.now,
        )
        # The planner re-evaluates the verdict from the same inputs; the streaks only
        # ever read the newest restore_after observations, so only those enter history.
        update: dict[str, Any] = {"recent": rh.recent[-role.sla.restore_after :]}
        if verdict.demoted != rh.sla_demoted:
            record.sla_changed(inp.role, route, verdict.demoted, stats)
            await self._deps.health.set_sla_demoted(inp.role, route, verdict.demoted, at=inp.now)
            update |= {"sla_demoted": verdict.demoted, "sla_since": inp.now}
        snap.routes[route] = rh.model_copy(update=update)

    async def _judge_cost(self, inp: RoleContextInput, route: str, snap: HealthSnapshot) -> None:
        """Read the route's tokens per dollar against its baseline, judge it with the pure
        :func:`resilience.cost_efficiency.evaluate_cost_efficiency`, persist a change and
        put the figures in the snapshot (the planner judges them again, identically)."""
        policy = self._deps.policy
        eff = await self._deps.health.cost_efficiency(route, now=inp.now)
        verdict = evaluate_cost_efficiency(
            eff, policy.cost_efficiency, policy.hysteresis_margin, now=inp.now
        )
        if verdict.demoted != eff.demoted:
            await self._deps.health.set_cost_demoted(route, verdict.demoted, at=inp.now)
            eff = eff.model_copy(update={"demoted": verdict.demoted, "since": inp.now})
        snap.routes[route] = snap.get(route).model_copy(update={"cost": eff})

    async def _read_budgets(
        self, role: str, routes: list[str], snap: HealthSnapshot, now: float
    ) -> None:
        """Put each route's rate-budget buckets (endpoint and bulkhead) in the snapshot."""
        per_route = {r: scopes_for(self._deps.policy, role, r) for r in routes}
        scopes = list({s.name: s for ss in per_route.values() for s in ss}.values())
        if not scopes:
            return
        levels = await self._deps.health.budget_levels(scopes, now)
        for route, ss in per_route.items():
            names = {s.name for s in ss}
            mine = [lv for lv in levels if lv.scope in names]
            snap.routes[route] = snap.get(route).model_copy(update={"budgets": mine})

    async def _context(
        self, inp: RoleContextInput, role: RolePolicy, snap: HealthSnapshot, lease: HeldLease | None
    ) -> RoleContext:
        deps = self._deps
        try:
            subset, ref = deps.subset(inp.role, inp.routes)
            # The history names the subset by ref: the store must hold it first.
            await deps.policy_versions.publish(ref, subset)
            overflow = deps.overflow_queue_for(inp.role) if deps.overflow_queue_for else None
            return RoleContext(
                role=self._sent_role(role, subset),
                policy=subset,
                snapshot=snap,
                task_queue=deps.task_queue_for(inp.role),
                overflow_queue=overflow,
                policy_ref=ref,
                lease=lease,
            ).for_history(inp.newest_observation, own_queue=inp.workflow_queue)
        except (PolicyError, ValidationError) as exc:
            # A policy this worker cannot express is a configuration error: retrying the
            # local activity (and the workflow task) forever would hide it.
            raise ApplicationError(
                f"policy error building the role context: {exc}",
                type=POLICY_ERROR,
                non_retryable=True,
            ) from exc

    def _sent_role(self, role: RolePolicy, subset: PolicyConfig) -> RolePolicy:
        """``role``, or the subset's equal copy of it (the context then writes the role's
        name only, found by identity: see ``RoleContext._role_name``)."""
        known = self._sent_roles.get(role.name)
        if known is not None and known[0] is role and known[1] is subset:
            return known[2]
        own = subset.roles.get(role.name)
        sent = own if own is not None and own == role else role
        self._sent_roles[role.name] = (role, subset, sent)
        return sent

    @activity.defn(name="pipeline_roles")
    async def pipeline_roles(self, inp: PipelineRolesInput) -> PipelineRoles:
        """Which roles play planner, critic, synthesis and specialists; which are critical."""
        roles = self._deps.policy.roles
        unfit = pipeline_policy_errors(roles)
        if unfit:
            raise ApplicationError(
                "policy cannot serve the pipeline: "
                + "; ".join(f"{path}: {msg}" for path, msg in unfit),
                type=POLICY_ERROR,
                non_retryable=True,
            )
        specialists = [r for r in roles if r not in PIPELINE_STAGE_ROLES]
        return PipelineRoles(
            specialists=specialists,
            critical=[n for n, r in roles.items() if r.critical],
            min_confidence={
                n: r.min_confidence for n, r in roles.items() if r.critical and r.min_confidence > 0
            },
            rerun={n: r.rerun for n, r in roles.items() if r.rerun and r.rerun.enabled},
            hedged=[n for n, r in roles.items() if plans_hedge(r)],
        )
