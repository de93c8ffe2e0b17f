"""Escalation notifications as values: the documented payload, the signature, its checks."""

from __future__ import annotations

import json

import pytest

from agent_failover.resilience.notify import (
    PAYLOAD_VERSION,
    EscalationNotice,
    NoticeDecision,
    NoticeStep,
    SignatureError,
    delivery_id,
    notification_payload,
    resolve_command,
    sign,
    verify_webhook_signature,
)

SECRET = "whsec-test"
NOW = 1_790_000_000


def _notice(**kw: object) -> EscalationNotice:
    base: dict[str, object] = {
        "event": "escalation.opened",
        "namespace": "default",
        "workflow_id": "pipe 1",
        "run_id": "r-1",
        "task_queue": "q",
        "round": 2,
        "occurred_at": 1_790_000_000.0,
        "reason": "planner: static fallback",
        "blocked_steps": [
            NoticeStep(step="planner", role="planner", trigger="static_fallback", reason="x")
        ],
        "timeout_s": 900.0,
        "timeout_action": "fail",
    }
    return EscalationNotice.model_validate({**base, **kw})


def test_opened_payload_carries_what_on_call_needs() -> None:
    """Run id, reason, blocked steps, deadline, UI link and the resolve command."""
    p = notification_payload(_notice(), "http://ui:8233/")
    assert p["version"] == PAYLOAD_VERSION and p["event"] == "escalation.opened"
    assert (p["workflow_id"], p["run_id"], p["round"]) == ("pipe 1", "r-1", 2)
    assert p["blocked_steps"][0]["step"] == "planner" and p["reason"].startswith("planner")
    assert p["occurred_at"] == "2026-09-21T14:13:20Z" and p["deadline"] == "2026-09-21T14:28:20Z"
    assert p["ui_url"] == "http://ui:8233/namespaces/default/workflows/pipe%201/r-1/history"
    assert p["resolve_command"] == "failover resolve 'pipe 1' accept_degraded"
    assert p["decision"] is None and p["delivery_id"] == "pipe 1/r-1/2/opened"
    json.dumps(p)  # serializable as is


def test_resolved_payload_names_the_decision_and_no_command() -> None:
    """A resolved event says who decided what; no deadline, no resolve command."""
    n = _notice(
        event="escalation.resolved",
        decision=NoticeDecision(action="abort", operator="alice", note="drill"),
        outcome="abort",
    )
    p = notification_payload(n, None)
    assert p["decision"] == {"action": "abort", "operator": "alice", "note": "drill"}
    assert p["outcome"] == "abort" and p["resolve_command"] is None and p["deadline"] is None
    assert p["ui_url"] is None and delivery_id(n).endswith("/resolved")


def test_resolve_command_quotes_the_id_and_asks_for_output() -> None:
    assert (
        resolve_command("a;b", "provide_output")
        == "failover resolve 'a;b' provide_output --output TEXT"
    )


def test_signature_round_trip_and_every_refusal() -> None:
    """A signed body verifies; a wrong secret, altered body, stale stamp or bad header do not."""
    body = b'{"event":"escalation.opened"}'
    header = sign(SECRET, body, NOW)
    assert header.startswith(f"t={NOW},v1=")
    assert verify_webhook_signature(SECRET, header, body, now=NOW + 10) == NOW
    cases = {
        "does not match": (sign("other", body, NOW), body, NOW),
        "altered": (header, body + b" ", NOW),
        "away from now": (header, body, NOW + 301),
        "no t=": ("v1=abc", body, NOW),
        "no X-Failover-Signature": (None, body, NOW),
    }
    for fragment, (h, b, now) in cases.items():
        with pytest.raises(SignatureError, match=fragment):
            verify_webhook_signature(SECRET, h, b, now=now)


def test_a_rotated_header_with_two_signatures_verifies() -> None:
    """Several v1 entries (a sender signing with old and new secret) verify if one matches."""
    body = b"{}"
    header = sign("old", body, NOW) + "," + sign(SECRET, body, NOW).split(",")[1]
    assert verify_webhook_signature(SECRET, header, body, now=NOW) == NOW


def test_notice_bounds_what_enters_history() -> None:
    """Over-long reasons and too many steps are refused by the model (callers clip first)."""
    with pytest.raises(ValueError):
        _notice(reason="x" * 501)
    step = NoticeStep(step="s", role="r", trigger="t", reason="x")
    with pytest.raises(ValueError):
        _notice(blocked_steps=[step] * 21)
