"""On-call notifications of escalations as values: the notice, its JSON payload, its signature.

The pipeline workflow builds an :class:`EscalationNotice` when an escalation opens and when
it is resolved (or times out); the ``notify_escalation`` activity turns it into the JSON
body of :func:`notification_payload` and posts it, signed with :func:`sign` when a secret
is configured. The notice carries no secret and no URL: the webhook URL, its secret and
the Web UI's base URL are read from the worker's environment when the activity runs, so
none of them reaches history.

The signature (Stripe/GitHub style) is one header,
``X-Failover-Signature: t=<unix seconds>,v1=<hex>``, where ``v1`` is
HMAC-SHA256(secret, ``"<t>." + body``); a receiver recomputes it over the raw body and
rejects a timestamp older than its tolerance (replays). :func:`verify_webhook_signature` does both.
Pure: no IO, the clock is passed in.
"""

from __future__ import annotations

import hashlib
import hmac
import shlex
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, Field

SIGNATURE_HEADER = "X-Failover-Signature"
EVENT_HEADER = "X-Failover-Event"
DELIVERY_HEADER = "X-Failover-Delivery"
#: Payload format version, in the body (``version``): bumped on an incompatible change.
PAYLOAD_VERSION = 1
#: Seconds a receiver accepts between the signature's timestamp and its own clock.
DEFAULT_TOLERANCE_S = 300.0
OPENED, RESOLVED = "escalation.opened", "escalation.resolved"
#: Bounds of what enters history with a notice.
MAX_TEXT = 500
MAX_STEPS = 20
#: Every decision the ``resolve`` update takes; ``provide_output`` needs ``--output TEXT``.
ALL_OPTIONS = ("retry", "accept_degraded", "provide_output", "abort")
SAGA_OPTIONS = ("retry", "accept_degraded", "abort")

NoticeEvent = Literal["escalation.opened", "escalation.resolved"]


class SignatureError(ValueError):
    """A webhook body whose signature is missing, malformed, stale or wrong."""


class NoticeStep(BaseModel):
    """One blocked step as the on-call engineer reads it."""

    step: str = Field(max_length=MAX_TEXT)
    role: str = Field(max_length=MAX_TEXT)
    trigger: str = Field(max_length=100)
    reason: str = Field(max_length=MAX_TEXT)
    confidence: float | None = None


class NoticeDecision(BaseModel):
    """The decision that resolved an escalation (never the human's output text)."""

    action: str
    operator: str = Field(default="", max_length=200)
    note: str = Field(default="", max_length=MAX_TEXT)


class EscalationNotice(BaseModel):
    """What the workflow knows about one escalation event; the activity's input."""

    event: NoticeEvent
    namespace: str
    workflow_id: str
    run_id: str
    workflow_type: str = "AgentPipelineWorkflow"
    task_queue: str = ""
    round: int = Field(ge=1)
    occurred_at: float = Field(description="workflow time of the event (unix seconds)")
    reason: str = Field(max_length=MAX_TEXT)
    blocked_steps: list[NoticeStep] = Field(default_factory=list, max_length=MAX_STEPS)
    timeout_s: float | None = None
    timeout_action: str | None = None
    options: list[str] = Field(default_factory=lambda: list(ALL_OPTIONS))
    #: ``escalation.resolved`` only: the decision, or None when nobody answered in time.
    decision: NoticeDecision | None = None
    outcome: str | None = Field(default=None, description="the action, or timed_out")


class NotifyResult(BaseModel):
    """What one notification did: delivered (HTTP status) or skipped (no URL), and why."""

    event: str
    round: int = 0
    delivered: bool
    skipped: bool = False
    status: int | None = None
    attempt: int = 1
    detail: str = ""


def delivery_id(notice: EscalationNotice) -> str:
    """Stable id of one notification (the same on every retry): receivers dedupe on it."""
    kind = notice.event.rsplit(".", 1)[-1]
    return f"{notice.workflow_id}/{notice.run_id}/{notice.round}/{kind}"


def ui_link(notice: EscalationNotice, ui_base: str | None) -> str | None:
    """The run in the Temporal Web UI, or None without a configured base URL."""
    if not ui_base:
        return None
    ns, wid = quote(notice.namespace, safe=""), quote(notice.workflow_id, safe="")
    return f"{ui_base.rstrip('/')}/namespaces/{ns}/workflows/{wid}/{notice.run_id}/history"


def resolve_command(workflow_id: str, action: str = "accept_degraded") -> str:
    """The command line that answers the escalation with ``action``."""
    extra = " --output TEXT" if action == "provide_output" else ""
    return f"failover resolve {shlex.quote(workflow_id)} {action}{extra}"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def notification_payload(notice: EscalationNotice, ui_base: str | None = None) -> dict[str, Any]:
    """The documented JSON body of a notification (see the README's Escalation section)."""
    deadline = (
        _iso(notice.occurred_at + notice.timeout_s)
        if notice.event == OPENED and notice.timeout_s is not None
        else None
    )
    return {
        "version": PAYLOAD_VERSION,
        "event": notice.event,
        "delivery_id": delivery_id(notice),
        "occurred_at": _iso(notice.occurred_at),
        "namespace": notice.namespace,
        "workflow_id": notice.workflow_id,
        "run_id": notice.run_id,
        "workflow_type": notice.workflow_type,
        "task_queue": notice.task_queue,
        "round": notice.round,
        "reason": notice.reason,
        "blocked_steps": [s.model_dump(mode="json") for s in notice.blocked_steps],
        "timeout_s": notice.timeout_s,
        "timeout_action": notice.timeout_action,
        "deadline": deadline,
        "options": list(notice.options),
        "decision": notice.decision.model_dump(mode="json") if notice.decision else None,
        "outcome": notice.outcome,
        "ui_url": ui_link(notice, ui_base),
        "resolve_command": resolve_command(notice.workflow_id) if notice.event == OPENED else None,
        "show_command": f"failover escalations show {shlex.quote(notice.workflow_id)}",
    }


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The ``X-Failover-Signature`` value of ``body`` sent at ``timestamp``."""
    return f"t={timestamp},v1={_mac(secret, timestamp, body)}"


def verify_webhook_signature(
    secret: str,
    header: str | None,
    body: bytes,
    *,
    now: float,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> int:
    """Check ``header`` against the raw ``body``; return its timestamp or raise
    :class:`SignatureError` saying what is wrong (missing, malformed, stale, mismatch)."""
    if not header:
        raise SignatureError(f"no {SIGNATURE_HEADER} header")
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields.setdefault(key, []).append(value)
    try:
        timestamp = int(fields["t"][0])
    except (KeyError, ValueError):
        raise SignatureError("malformed signature header: no t=<unix seconds>") from None
    if abs(now - timestamp) > tolerance_s:
        raise SignatureError(
            f"signature timestamp is {abs(now - timestamp):.0f}s away from now "
            f"(tolerance {tolerance_s:g}s): a replay, or a clock out of sync"
        )
    expected = _mac(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, v) for v in fields.get("v1", [])):
        raise SignatureError("signature does not match the body (wrong secret, or body altered)")
    return timestamp
