"""Inputs, outputs, signals and queries of the pipeline and health-monitor workflows."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field, field_validator

from agent_failover.activities.health_models import HealthTable, ProbeResult
from agent_failover.resilience.config import DEFAULT_PROBE_INTERVAL_S
from agent_failover.resilience.contracts import AgentOutput, AttemptRecord, BreakerState
from agent_failover.resilience.limits import MAX_RESULT_BYTES, clip
from agent_failover.resilience.models import Priority
from agent_failover.resilience.notify import NotifyResult
from agent_failover.resilience.pipeline import FailoverSummary
from agent_failover.resilience.saga import CompensationEntry, CompensationLog
from agent_failover.resilience.shadow import StepRevision


class ContextItem(BaseModel):
    """A piece of context handed to every agent, tagged for triage."""

    content: str = Field(min_length=1, max_length=200_000)
    priority: Priority = Priority.SUPPORTING
    source: str | None = None
    #: A checkpoint (the task statement, a key decision): never dropped by triage.
    pinned: bool = False


class ActionSpec(BaseModel):
    """A side effect to apply after synthesis, e.g. open a ticket carrying the answer.

    The idempotency key covers the workflow id, the step (``action#N``), ``tool`` and the
    declared ``args`` — not the answer filled into ``answer_arg`` — so a re-run of the same
    workflow id lands on the effect already applied even if the answer changed.
    """

    tool: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    args: dict[str, Any] = Field(default_factory=dict)
    answer_arg: str | None = Field(
        default=None, description="argument that receives the final answer (none: not sent)"
    )
    compensation: str | None = Field(
        default=None,
        pattern=r"^[a-z][a-z0-9_]*$",
        description="tool that undoes it (default: resilience.saga.DEFAULT_COMPENSATIONS)",
    )
    compensation_args: dict[str, Any] = Field(default_factory=dict)
    max_attempts: int = Field(default=3, ge=1, le=10)
    timeout_s: float = Field(default=10.0, gt=0, le=300)


class AgentToolSpec(BaseModel):
    """A tool-server tool a role's model may call inside its step (an agent loop).

    Each call is a ``run_tool`` activity keyed by workflow id + step + tool + arguments;
    a tool with a compensation (``compensation`` or ``DEFAULT_COMPENSATIONS``) is logged
    in the run's saga and undone if the run later fails, is cancelled or aborted.
    """

    role: str = Field(min_length=1, max_length=100)
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = Field(default="", max_length=2_000)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    compensation: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]*$")
    max_attempts: int = Field(default=3, ge=1, le=10)
    timeout_s: float = Field(default=10.0, gt=0, le=300)


class ActionStatus(StrEnum):
    APPLIED = "applied"  # the effect stands
    FAILED = "failed"  # failed hard (non-retryable, or retries exhausted)
    SKIPPED = "skipped"  # not tried: an earlier action failed
    COMPENSATED = "compensated"  # applied, then undone after a later failure
    LEFT = "left"  # applied, its undo failed and an operator left it in place


class ActionResult(BaseModel):
    step: str
    tool: str
    idempotency_key: str
    status: ActionStatus
    result: dict[str, Any] = Field(default_factory=dict)
    replayed: bool = False
    error: str | None = None


class EscalationTimeoutAction(StrEnum):
    """What a workflow does when nobody answers its escalation in time."""

    #: Fail the run with the reason (the blocked steps and why): never a guessed answer.
    FAIL = "fail"
    #: Continue with the degraded answers, for this and every later blocked step.
    ACCEPT_DEGRADED = "accept_degraded"
    #: Undo every side effect applied so far (the saga's compensation log), then fail.
    ABORT = "abort"


class PipelineOptions(BaseModel):
    max_subtasks: int = Field(default=4, ge=1, le=8)
    revision_rounds: int = Field(default=1, ge=0, le=2)
    suppress_degraded_sections: bool = False
    escalate_on_critical_degraded: bool = True
    escalation_timeout_s: float = Field(default=900.0, ge=0.0, le=7 * 86400)
    escalation_timeout_action: EscalationTimeoutAction = EscalationTimeoutAction.FAIL
    actions: list[ActionSpec] = Field(default_factory=list, max_length=20)
    agent_tools: list[AgentToolSpec] = Field(default_factory=list, max_length=20)
    max_tool_turns: int = Field(default=4, ge=1, le=16)
    tool_budget_tokens: int | None = Field(
        default=None, ge=1, description="tokens one agent loop may spend (none: turns only)"
    )


class PipelineInput(BaseModel):
    task: str = Field(min_length=1, max_length=20_000)
    context: list[ContextItem] = Field(default_factory=list, max_length=200)
    options: PipelineOptions = Field(default_factory=PipelineOptions)

    @field_validator("task")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("task must not be blank")
        return v


#: Characters of a step's output kept when the result has to be trimmed to fit.
TRIMMED_PREVIEW_CHARS = 2000


class StepResult(BaseModel):
    step: str
    output: AgentOutput


class Section(BaseModel):
    """One specialist's contribution as it appears in the final answer."""

    step: str
    role: str
    degraded: bool
    suppressed: bool
    capability: str
    tier: int
    reason_codes: list[str]


class EscalationAction(StrEnum):
    RETRY = "retry"
    ACCEPT_DEGRADED = "accept_degraded"
    PROVIDE_OUTPUT = "provide_output"
    ABORT = "abort"


class EscalationDecision(BaseModel):
    """What a human decided about a paused pipeline (the ``resolve`` update's input)."""

    action: EscalationAction
    output: str | None = None
    operator: str = "unknown"
    note: str = ""

    @field_validator("output")
    @classmethod
    def _strip(cls, v: str | None) -> str | None:
        return v.strip() if v is not None else None


class EscalationReceipt(BaseModel):
    """The answer of the ``resolve`` update: the decision was accepted for this step."""

    workflow_id: str
    step: str
    role: str
    action: EscalationAction


class EscalationState(StrEnum):
    NONE = "none"
    PENDING = "pending"
    RESOLVED = "resolved"
    TIMED_OUT = "timed_out"
    ABORTED = "aborted"


class BlockedStep(BaseModel):
    """A step that cannot go on without a human: which, why, and how sure its answer is."""

    step: str
    role: str
    trigger: str = Field(
        description="static_fallback, low_confidence, cached_only, compensation_failed, "
        "rerun_disagreed or requested (a workflow's own reason)"
    )
    reason: str
    confidence: float | None = None


class PendingEscalation(BaseModel):
    """The serialized state of a workflow (a pipeline, or any workflow that calls
    :func:`~agent_failover.escalate`) paused for a human.

    ``step``/``role``/``reason``/``output`` describe the step that opened the escalation;
    ``blocked_steps`` every step waiting on it (one decision resolves them all).
    """

    step: str
    role: str
    reason: str
    output: AgentOutput
    completed_steps: list[str]
    pending_steps: list[str]
    failover_history: dict[str, list[AttemptRecord]]
    compensation_log: CompensationLog | None = None
    blocked_steps: list[BlockedStep] = Field(default_factory=list)
    opened_at: float | None = Field(default=None, description="workflow time it opened")
    timeout_s: float | None = None
    timeout_action: EscalationTimeoutAction | None = None
    #: The workflow's own state as ``escalate(..., state)`` passed it (JSON, bounded).
    state: Any = None


class EscalationStatus(BaseModel):
    """The ``escalation`` query's answer, the same for a pipeline and any other workflow."""

    workflow_type: str
    escalation: EscalationState
    pending_escalation: PendingEscalation | None = None
    #: Where the run is (a pipeline's phase); empty for a workflow that does not say.
    phase: str = ""
    notifications: list[NotifyResult] = Field(default_factory=list)


class EscalationOutcome(BaseModel):
    """What :func:`~agent_failover.escalate` returns: the answer that stands, and why.

    ``decision`` is None when no human was needed (no trigger), else the decision that
    answered the step (a human's, or the acceptance a timeout stands in for). ``output``
    is the answer to go on with: unchanged, marked ``ESCALATED``/``ACCEPTED_DEGRADED``, or
    the human's (``HUMAN_PROVIDED``). With ``retry`` the workflow runs its step again.
    """

    output: AgentOutput
    decision: EscalationDecision | None = None
    trigger: str | None = None

    @property
    def escalated(self) -> bool:
        return self.decision is not None

    @property
    def retry(self) -> bool:
        return self.decision is not None and self.decision.action is EscalationAction.RETRY


class PipelineResult(BaseModel):
    answer: str
    confidence: float
    degraded: bool
    sections: list[Section]
    steps: list[StepResult]
    summary: FailoverSummary
    escalation: EscalationState = EscalationState.NONE
    critic_verdict: str | None = None
    plan: list[dict[str, Any]] = Field(default_factory=list)
    actions: list[ActionResult] = Field(default_factory=list)
    #: Effects undone after an action failed hard, in the order they were undone.
    compensated: list[CompensationEntry] = Field(default_factory=list)
    compensation_log: CompensationLog | None = None
    #: Steps whose output text was cut so the result fits one Temporal payload.
    trimmed_steps: list[str] = Field(default_factory=list)
    #: On-call notifications of the run's escalations: delivered, skipped or failed.
    notifications: list[NotifyResult] = Field(default_factory=list)
    #: Degraded steps re-run once their primary was back (roles with ``rerun`` settings).
    revisions: list[StepRevision] = Field(default_factory=list)

    def bounded(self, limit: int = MAX_RESULT_BYTES) -> PipelineResult:
        """This result, small enough to be one workflow result payload.

        Step outputs repeat what the answer and ``sections`` already say, so the biggest
        ones lose their text (a preview stays) until the result fits; a result that is
        already small comes back unchanged.
        """
        size = len(self.model_dump_json())
        if size <= limit:
            return self
        steps, size, trimmed = _trim_steps(list(self.steps), size, limit)
        revisions, size, revised = _trim_revisions(list(self.revisions), size, limit)
        answer = self.answer
        if size > limit:
            answer = clip(answer, max(limit // 2, TRIMMED_PREVIEW_CHARS))
        return self.model_copy(
            update={
                "steps": steps,
                "answer": answer,
                "trimmed_steps": trimmed + revised,
                "revisions": revisions,
            }
        )


def _trim_steps(
    steps: list[StepResult], size: int, limit: int
) -> tuple[list[StepResult], int, list[str]]:
    """Biggest step outputs first lose their text (a preview stays) until ``size`` fits:
    the steps, the size left and the names of the steps trimmed."""
    trimmed: list[str] = []
    by_size = sorted(range(len(steps)), key=lambda i: -len(steps[i].output.model_dump_json()))
    for i in by_size:
        if size <= limit:
            break
        out = steps[i].output
        before = len(out.model_dump_json())
        cut = out.model_copy(
            update={
                "content": clip(out.content, TRIMMED_PREVIEW_CHARS),
                "data": None,
                "tool_calls": [],
            }
        )
        steps[i] = steps[i].model_copy(update={"output": cut})
        size -= before - len(cut.model_dump_json())
        trimmed.append(steps[i].step)
    return steps, size, trimmed


def _trim_revisions(
    revisions: list[StepRevision], size: int, limit: int
) -> tuple[list[StepRevision], int, list[str]]:
    """Revised answers, in order, lose their text (a preview stays) until ``size`` fits."""
    trimmed: list[str] = []
    for i, rev in enumerate(revisions):
        if size <= limit:
            break
        if rev.revised is not None:
            before = len(rev.model_dump_json())
            cut = rev.revised.model_copy(
                update={"content": clip(rev.revised.content, TRIMMED_PREVIEW_CHARS), "data": None}
            )
            revisions[i] = rev.model_copy(update={"revised": cut})
            size -= before - len(revisions[i].model_dump_json())
            trimmed.append(f"{rev.step} (revision)")
    return revisions, size, trimmed


class PipelineStatus(BaseModel):
    phase: str
    completed_steps: list[str]
    pending_steps: list[str]
    summary: FailoverSummary
    escalation: EscalationState
    pending_escalation: PendingEscalation | None = None
    compensation_log: CompensationLog | None = None
    notifications: list[NotifyResult] = Field(default_factory=list)


#: Most routes one monitor probes (bounds the inputs and updates entering its history).
MAX_MONITOR_ROUTES = 256


class MonitorPolicy(BaseModel):
    """What the monitor takes from a worker's policy: its routes and cadence, named by the
    policy's ref. The input of the ``follow_policy`` update and part of ``MonitorInput``."""

    routes: list[str] = Field(min_length=1, max_length=MAX_MONITOR_ROUTES)
    interval_s: float = Field(default=DEFAULT_PROBE_INTERVAL_S, ge=0.5, le=3600)
    half_open_interval_s: float | None = Field(default=None, ge=0.5, le=3600)
    #: Content hash of the worker's policy (None: started by hand, no policy named).
    policy_ref: str | None = Field(default=None, pattern=r"^[0-9a-f]{16}$")
    #: When the worker serving that policy started (epoch seconds): a newer start wins,
    #: so an old worker still running in a rollout never takes the monitor back.
    since: float = 0.0


class MonitorInput(BaseModel):
    routes: list[str] = Field(min_length=1, max_length=MAX_MONITOR_ROUTES)
    interval_s: float = Field(default=DEFAULT_PROBE_INTERVAL_S, ge=0.5, le=3600)
    #: Round cadence while any route is half-open (its probes are the trials that close
    #: it). None: interval_s / 4, at least 0.5 s.
    half_open_interval_s: float | None = Field(default=None, ge=0.5, le=3600)
    iterations_per_run: int = Field(default=200, ge=1, le=10_000)
    paused: bool = False
    last_results: dict[str, ProbeResult] = Field(default_factory=dict)
    rounds: int = 0
    #: The policy the routes and cadence came from (see :class:`MonitorPolicy`).
    policy_ref: str | None = Field(default=None, pattern=r"^[0-9a-f]{16}$")
    policy_since: float = 0.0

    def following(self, p: MonitorPolicy) -> MonitorInput:
        """This input with ``p``'s routes, cadence and policy."""
        return self.model_copy(
            update={
                "routes": list(p.routes),
                "interval_s": p.interval_s,
                "half_open_interval_s": p.half_open_interval_s,
                "policy_ref": p.policy_ref,
                "policy_since": p.since,
            }
        )


class ForceRouteSignal(BaseModel):
    """An operator override of one route: forced open/closed, or released (``state`` null).

    The input of the monitor's ``override_route`` update.
    """

    route: str
    state: BreakerState | None = None


class RouteOverride(BaseModel):
    """What an ``override_route`` update did: the breaker state before and after."""

    route: str
    from_state: BreakerState
    to_state: BreakerState
    changed: bool


class MonitorTable(BaseModel):
    paused: bool
    rounds: int
    results: dict[str, ProbeResult]
    table: HealthTable | None = None
    routes: list[str] = Field(default_factory=list)
    interval_s: float | None = None
    policy_ref: str | None = None
    policy_since: float | None = None


def iso_time(ts: float | None) -> str | None:
    """Epoch seconds as an ISO 8601 UTC timestamp with milliseconds (None stays None)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds")


class AttemptView(BaseModel):
    """One attempt of a step as the ``failover_history`` query shows it (ISO times)."""

    route: str
    tier: int
    outcome: str
    started_at: str
    finished_at: str | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None
    hedge: bool = False
    error: str | None = None
    note: str = ""

    @classmethod
    def of(cls, a: AttemptRecord) -> AttemptView:
        return cls(
            route=a.route,
            tier=a.tier,
            outcome=a.outcome,
            started_at=iso_time(a.started_at) or "",
            finished_at=iso_time(a.finished_at),
            latency_ms=a.latency_ms,
            ttft_ms=a.ttft_ms,
            hedge=a.hedge,
            error=a.error,
            note=a.note,
        )


class StepHistory(BaseModel):
    """One finished step in the ``failover_history`` query: who answered, why, and every
    attempt in order (skipped routes, failures, the cache lookup)."""

    step: str
    role: str
    tier: int
    capability: str
    route: str | None
    reason_codes: list[str]
    confidence: float
    attempts: list[AttemptView]

    @classmethod
    def of(cls, step: str, out: AgentOutput) -> StepHistory:
        return cls(
            step=step,
            role=out.role,
            tier=out.tier,
            capability=out.capability.value,
            route=out.route,
            reason_codes=[c.value for c in out.reason_codes],
            confidence=out.confidence,
            attempts=[AttemptView.of(a) for a in out.attempts],
        )
