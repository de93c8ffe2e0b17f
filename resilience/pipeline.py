"""Pure pipeline decisions: prompts per stage, plan checking, provenance and the summary.

The pipeline workflow calls these with values from history; nothing here does IO.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from agent_failover.providers.models import ChatRequest, Message, Priority
from agent_failover.resilience.contracts import AgentOutput, Capability, ReasonCode

#: Confidence cap applied to the final answer per degraded section (uncertainty widens).
DEGRADED_SECTION_PENALTY = 0.15


class FailoverSummary(BaseModel):
    substitutions: int = 0
    worst_tier: int = 0
    degraded_steps: list[str] = Field(default_factory=list)
    failover_count: int = 0


class Subtask(BaseModel):
    id: str
    role: str
    instruction: str


class PlanError(ValueError):
    """The planner's output is not a usable plan (names what was wrong)."""


def planner_request(
    task: str, context: list[tuple[str, Priority]], roles: list[str]
) -> ChatRequest:
    """The planner's request: the task, the context items and the specialist roles on offer."""
    msgs = [Message(role="user", content=c, priority=p) for c, p in context]
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
    task: str, sub: Subtask, context: list[tuple[str, Priority]], feedback: list[str]
) -> ChatRequest:
    """A specialist's request: its instruction, the task, context, and critic feedback."""
    msgs = [Message(role="user", content=c, priority=p) for c, p in context]
    text = f"Overall task: {task}\nYour subtask ({sub.id}): {sub.instruction}"
    if feedback:
        text += "\nA reviewer asked for a revision: " + "; ".join(feedback)
    msgs.append(Message(role="user", content=text, priority=Priority.CRITICAL))
    return ChatRequest(messages=msgs, max_tokens=400)


def critic_request(task: str, sections: list[tuple[str, AgentOutput]]) -> ChatRequest:
    """The critic sees every section with its degradation flags."""
    body = "\n\n".join(f"[{step}] {_flag(out)}\n{out.content}" for step, out in sections)
    return ChatRequest(
        messages=[
            Message(
                role="user",
                content=(
                    f"Task: {task}\nReview these sections. Answer with JSON "
                    '{"verdict": "approve" | "revise", "reasons": [str]}.\n\n' + body
                ),
                priority=Priority.CRITICAL,
            )
        ],
        max_tokens=300,
    )


def parse_verdict(data: Any) -> tuple[str, list[str]]:
    """(verdict, reasons) from the critic's JSON; anything unusable counts as approve."""
    if isinstance(data, dict) and data.get("verdict") in ("approve", "revise"):
        reasons = data.get("reasons") if isinstance(data.get("reasons"), list) else []
        return str(data["verdict"]), [str(r) for r in reasons][:10]
    return "approve", []


def synthesis_request(
    task: str, sections: list[tuple[str, AgentOutput]], *, suppress_degraded: bool
) -> ChatRequest:
    """Synthesis sees each section's flags, so it can widen uncertainty or leave one out."""
    parts = []
    for step, out in sections:
        if suppress_degraded and is_section_degraded(out):
            parts.append(f"[{step}] SUPPRESSED: {_flag(out)}")
        else:
            parts.append(f"[{step}] {_flag(out)}\n{out.content}")
    return ChatRequest(
        messages=[
            Message(
                role="user",
                content=(
                    f"Task: {task}\nWrite the final answer from these sections. Say which "
                    "claims rest on degraded sections.\n\n" + "\n\n".join(parts)
                ),
                priority=Priority.CRITICAL,
            )
        ],
        max_tokens=600,
    )


def is_section_degraded(out: AgentOutput) -> bool:
    """A section is degraded when it was not served at full capability (``out.degraded``)."""
    return out.degraded


def _flag(out: AgentOutput) -> str:
    if not is_section_degraded(out):
        return "(full capability)"
    codes = ",".join(c.value for c in out.reason_codes)
    return f"(DEGRADED: {out.capability.value}, tier {out.tier}, {codes})"


def summarize(steps: list[tuple[str, AgentOutput]]) -> FailoverSummary:
    """Substitutions, worst tier and degraded steps over every step so far."""
    s = FailoverSummary()
    for step, out in steps:
        subs = out.substitutions
        s.substitutions += subs
        s.failover_count += 1 if (subs or out.tier > 0) else 0
        s.worst_tier = max(s.worst_tier, out.tier)
        if is_section_degraded(out):
            s.degraded_steps.append(step)
    return s


def final_answer(
    synthesis: AgentOutput, sections: list[tuple[str, AgentOutput]], *, suppress_degraded: bool
) -> tuple[str, float]:
    """The answer text with a provenance footer, and its confidence.

    Confidence is the synthesis's own, lowered for each degraded section it rests on.
    """
    degraded = [(s, o) for s, o in sections if is_section_degraded(o)]
    conf = synthesis.confidence * (1 - DEGRADED_SECTION_PENALTY) ** len(degraded)
    lines = [synthesis.content.strip()]
    if is_section_degraded(synthesis):
        lines.append(f"\n[synthesis itself is degraded: {_flag(synthesis)}]")
    if degraded:
        verb = "left out" if suppress_degraded else "marked"
        lines.append(f"\nProvenance: {len(degraded)} section(s) degraded and {verb}:")
        for step, out in degraded:
            lines.append(f"  - {step}: {_flag(out)}")
    return "\n".join(lines), round(max(0.0, min(1.0, conf)), 4)


def needs_escalation(out: AgentOutput, *, critical: bool) -> bool:
    """A critical role that could only be answered by the static fallback needs a human."""
    return critical and (
        out.capability is Capability.STATIC or ReasonCode.STATIC_FALLBACK in out.reason_codes
    )


def dumps_plan(subtasks: list[Subtask]) -> list[dict[str, Any]]:
    return [json.loads(s.model_dump_json()) for s in subtasks]
