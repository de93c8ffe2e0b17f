"""Pure pipeline decisions: prompts per stage, plan checking, provenance and the summary.

The pipeline workflow calls these with values from history; nothing here does IO.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from agent_failover.resilience.contracts import AgentOutput, Capability, ReasonCode
from agent_failover.resilience.models import ChatRequest, Message, Priority

#: Confidence cap applied to the final answer per degraded section (uncertainty widens).
DEGRADED_SECTION_PENALTY = 0.15
#: Critic verdicts. ``unreviewed``: nobody could review (static critic, unusable verdict).
APPROVE, REVISE, UNREVIEWED = "approve", "revise", "unreviewed"


#: What "substitutions" means wherever a summary prints it.
SUBSTITUTIONS_LEGEND = (
    "substitutions = steps not answered by a tier-0 route "
    "(standby, smaller model, cache, static, human)"
)


class FailoverSummary(BaseModel):
    """Counts over a pipeline's finished steps.

    ``substitutions``: steps answered by anything but a tier-0 route (tier 1 or 2, the
    cache, the static fallback, an operator's text). ``failed_attempts``: attempts that
    failed on some route, whoever answered in the end. ``failover_count`` (the
    FailoverCount search attribute): steps that either failed an attempt or were
    substituted.
    """

    substitutions: int = 0
    worst_tier: int = 0
    degraded_steps: list[str] = Field(default_factory=list)
    failover_count: int = 0
    failed_attempts: int = 0


class Subtask(BaseModel):
    id: str
    role: str
    instruction: str


class PlanError(ValueError):
    """The planner's output is not a usable plan (names what was wrong)."""


#: A context item as the pipeline passes it on: (content, priority) or (content, priority,
#: pinned), pinned items being checkpoints that triage never drops.
ContextTuple = tuple[str, Priority] | tuple[str, Priority, bool]


def context_messages(context: list[ContextTuple]) -> list[Message]:
    """User turns for the context items, in order, with their priority and pin."""
    return [
        Message(role="user", content=c[0], priority=c[1], pinned=bool(c[2:] and c[2]))
        for c in context
    ]


def planner_request(task: str, context: list[ContextTuple], roles: list[str]) -> ChatRequest:
    """The planner's request: the task, the context items and the specialist roles on offer."""
    msgs = context_messages(context)
    msgs.append(
        Message(
            role="user",
            content=(
                f"Task: {task}\nSplit it into subtasks for these specialist roles: "
                f"{', '.join(roles)}. Answer with JSON: "
                '{"subtasks": [{"id": str, "role": str, "instruction": str}]}'
            ),
            priority=Priority.CRITICAL,
        )
    )
    return ChatRequest(messages=msgs, max_tokens=512)


def parse_plan(data: Any, *, known_roles: list[str], max_subtasks: int) -> list[Subtask]:
    """Check the planner's JSON and return the subtasks to run.

    Unknown roles are mapped onto the first known specialist rather than dropped, so a
    planner that invents a role name still gets its subtask done; duplicate ids are
    renumbered. Raises :class:`PlanError` when there is nothing usable.
    """
    if not isinstance(data, dict) or not isinstance(data.get("subtasks"), list):
        raise PlanError("plan must be an object with a 'subtasks' list")
    if not known_roles:
        raise PlanError("no specialist roles are configured")
    out: list[Subtask] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["subtasks"]):
        if not isinstance(raw, dict):
            raise PlanError(f"subtasks[{i}]: must be an object")
        instruction = str(raw.get("instruction") or "").strip()
        if not instruction:
            raise PlanError(f"subtasks[{i}].instruction: must not be empty")
        role = str(raw.get("role") or "")
        if role not in known_roles:
            role = known_roles[i % len(known_roles)]
        sid = str(raw.get("id") or f"s{i + 1}")
        if sid in seen:
            sid = f"{sid}-{i + 1}"
        seen.add(sid)
        out.append(Subtask(id=sid, role=role, instruction=instruction))
        if len(out) >= max_subtasks:
            break
    if not out:
        raise PlanError("plan has no subtasks")
    return out


def specialist_request(
    task: str, sub: Subtask, context: list[ContextTuple], feedback: list[str]
) -> ChatRequest:
    """A specialist's request: its instruction, the task, context, and critic feedback."""
    msgs = context_messages(context)
    text = f"Overall task: {task}\nYour subtask ({sub.id}): {sub.instruction}"
    if feedback:
        text += "\nA reviewer asked for a revision: " + "; ".join(feedback)
    msgs.append(Message(role="user", content=text, priority=Priority.CRITICAL))
    return ChatRequest(messages=msgs, max_tokens=400)


def _section_messages(
    sections: list[tuple[str, AgentOutput]], *, suppress_degraded: bool = False
) -> list[Message]:
    """One message per section, so triage can drop whole sections (oldest first) when the
    request outgrows its bound, instead of the request failing as too large."""
    msgs = []
    for step, out in sections:
        if suppress_degraded and is_section_degraded(out):
            text = f"[{step}] SUPPRESSED: {_flag(out)}"
        else:
            text = f"[{step}] {_flag(out)}\n{out.content}"
        msgs.append(Message(role="user", content=text, priority=Priority.SUPPORTING))
    return msgs


def critic_request(task: str, sections: list[tuple[str, AgentOutput]]) -> ChatRequest:
    """The critic sees every section with its degradation flags."""
    instruction = Message(
        role="user",
        content=(
            f"Task: {task}\nReview the sections above. Answer with JSON "
            '{"verdict": "approve" | "revise", "reasons": [str]}.'
        ),
        priority=Priority.CRITICAL,
    )
    return ChatRequest(messages=[*_section_messages(sections), instruction], max_tokens=300)


def parse_verdict(data: Any) -> tuple[str, list[str]]:
    """(verdict, reasons) from the critic's JSON; anything unusable is ``unreviewed``.

    Never ``approve`` by default: a verdict nobody gave must not pass work as reviewed.
    """
    if isinstance(data, dict) and data.get("verdict") in (APPROVE, REVISE):
        reasons = data.get("reasons") if isinstance(data.get("reasons"), list) else []
        return str(data["verdict"]), [str(r) for r in reasons][:10]
    return UNREVIEWED, []


def review_verdict(out: AgentOutput) -> tuple[str, list[str]]:
    """The critic's verdict on the sections, as far as anyone actually reviewed them.

    A static fallback is served when no model could review, so it is ``unreviewed``
    whatever its data says; a human's answer counts when it carries a verdict in ``data``
    (the pipeline parses a human's JSON answer into it).
    """
    if out.capability is Capability.STATIC or ReasonCode.STATIC_FALLBACK in out.reason_codes:
        return UNREVIEWED, []
    return parse_verdict(out.data)


def synthesis_request(
    task: str, sections: list[tuple[str, AgentOutput]], *, suppress_degraded: bool
) -> ChatRequest:
    """Synthesis sees each section's flags, so it can widen uncertainty or leave one out."""
    instruction = Message(
        role="user",
        content=(
            f"Task: {task}\nWrite the final answer from the sections above. Say which "
            "claims rest on degraded sections."
        ),
        priority=Priority.CRITICAL,
    )
    sections_msgs = _section_messages(sections, suppress_degraded=suppress_degraded)
    return ChatRequest(messages=[*sections_msgs, instruction], max_tokens=600)


def is_section_degraded(out: AgentOutput) -> bool:
    """A section is degraded when it was not served at full capability (``out.degraded``)."""
    return out.degraded


def _flag(out: AgentOutput) -> str:
    if not is_section_degraded(out):
        return "(full capability)"
    codes = ",".join(c.value for c in out.reason_codes)
    return f"(DEGRADED: {out.capability.value}, tier {out.tier}, {codes})"


def summarize(steps: list[tuple[str, AgentOutput]]) -> FailoverSummary:
    """Substitutions, failed attempts, worst tier and degraded steps over every step so far."""
    s = FailoverSummary()
    for step, out in steps:
        failed = out.substitutions  # attempts that failed on a route
        substituted = is_substituted(out)
        s.failed_attempts += failed
        s.substitutions += 1 if substituted else 0
        s.failover_count += 1 if (failed or substituted) else 0
        s.worst_tier = max(s.worst_tier, out.tier)
        if is_section_degraded(out):
            s.degraded_steps.append(step)
    return s


def is_substituted(out: AgentOutput) -> bool:
    """The step was not answered by one of its tier-0 routes."""
    return out.tier > 0 or out.capability is Capability.STATIC or out.route == "human"


def final_answer(
    synthesis: AgentOutput,
    sections: list[tuple[str, AgentOutput]],
    *,
    suppress_degraded: bool,
    verdict: str | None = None,
) -> tuple[str, float]:
    """The answer text with a provenance footer, and its confidence.

    Confidence is the synthesis's own, lowered for each degraded section it rests on,
    and once more when the work went unreviewed.
    """
    degraded = [(s, o) for s, o in sections if is_section_degraded(o)]
    penalties = len(degraded) + (1 if verdict == UNREVIEWED else 0)
    conf = synthesis.confidence * (1 - DEGRADED_SECTION_PENALTY) ** penalties
    lines = [synthesis.content.strip()]
    if is_section_degraded(synthesis):
        lines.append(f"\n[synthesis itself is degraded: {_flag(synthesis)}]")
    if verdict == UNREVIEWED:
        lines.append("\n[not reviewed: the critic could not review this work]")
    if degraded:
        verb = "left out" if suppress_degraded else "marked"
        lines.append(f"\nProvenance: {len(degraded)} section(s) degraded and {verb}:")
        for step, out in degraded:
            lines.append(f"  - {step}: {_flag(out)}")
    return "\n".join(lines), round(max(0.0, min(1.0, conf)), 4)


#: The roles the bundled pipeline's stages are answered by; every other role is a specialist.
PIPELINE_STAGE_ROLES = ("planner", "critic", "synthesis")


def pipeline_policy_errors(role_names: Iterable[str]) -> list[tuple[str, str]]:
    """Why a policy cannot serve the bundled pipeline (``[]``: it can): a missing stage
    role, or no specialist. A worker that registers the pipeline refuses such a policy at
    start-up rather than failing every run at its first step."""
    names = list(role_names)
    errors = [
        (f"roles.{stage}", f"missing: the pipeline's {stage} stage is answered by this role")
        for stage in PIPELINE_STAGE_ROLES
        if stage not in names
    ]
    if not [n for n in names if n not in PIPELINE_STAGE_ROLES]:
        errors.append(("roles", "no specialist role (any role besides planner/critic/synthesis)"))
    return errors


class EscalationTrigger(StrEnum):
    """Why a step cannot go on without a human."""

    #: A critical role could only be answered by its static fallback.
    STATIC_FALLBACK = "static_fallback"
    #: A critical role answered, but below its ``min_confidence``.
    LOW_CONFIDENCE = "low_confidence"
    #: A critical role could only be answered from the response cache: every model tier
    #: was down (the cache is read only then), however confident the cached answer is.
    CACHED_ONLY = "cached_only"
    #: An undo of a side effect could not complete.
    COMPENSATION_FAILED = "compensation_failed"


def escalation_trigger(
    out: AgentOutput, *, critical: bool, min_confidence: float = 0.0
) -> EscalationTrigger | None:
    """Whether (and why) a step's answer needs a human; only critical roles escalate."""
    if not critical:
        return None
    if out.capability is Capability.STATIC or ReasonCode.STATIC_FALLBACK in out.reason_codes:
        return EscalationTrigger.STATIC_FALLBACK
    if ReasonCode.HUMAN_PROVIDED in out.reason_codes:
        return None
    if out.confidence < min_confidence:
        return EscalationTrigger.LOW_CONFIDENCE
    if ReasonCode.CACHED_RESPONSE in out.reason_codes:
        return EscalationTrigger.CACHED_ONLY
    return None


def trigger_reason(
    trigger: EscalationTrigger, role: str, out: AgentOutput, min_confidence: float
) -> str:
    """One line an operator reads: which role, and why it is blocked."""
    if trigger is EscalationTrigger.STATIC_FALLBACK:
        return f"critical role {role!r} could only be answered by its static fallback"
    if trigger is EscalationTrigger.CACHED_ONLY:
        age = f", {out.cache_age_s:.0f}s old" if out.cache_age_s is not None else ""
        return (
            f"critical role {role!r} could only be answered from the response cache (every "
            f"model tier down; confidence {out.confidence:.2f}{age})"
        )
    return (
        f"critical role {role!r} answered with confidence {out.confidence:.2f}, below its "
        f"min_confidence {min_confidence:.2f} ({out.capability.value}, tier {out.tier})"
    )


def dumps_plan(subtasks: list[Subtask]) -> list[dict[str, Any]]:
    return [json.loads(s.model_dump_json()) for s in subtasks]
