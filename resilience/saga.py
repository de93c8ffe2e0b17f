"""The side-effect saga as values: idempotency keys, side effects and the compensation log.

A pipeline that applies side effects (create a ticket, post a message, reserve budget)
runs each one as an activity carrying an idempotency key derived from the workflow id,
the step, the tool and its declared arguments, so a retried or re-run step maps onto the
same effect. Each success appends its compensation to a :class:`CompensationLog`; a hard
failure undoes the log in reverse (:meth:`CompensationLog.to_compensate`). The log is a
state machine per entry (``applied → compensated | failed | left``, ``maybe_applied →
applied | compensated | failed | left``, ``failed → compensated | failed | left``);
illegal moves raise :class:`IllegalCompensationMove`.

An effect whose activity failed *ambiguously* (a timeout, or a retryable error after its
last attempt: the effect may have been applied and its answer lost) is logged as
``maybe_applied`` (:func:`failure_may_have_applied`) and undone like an applied one. Its
compensation receives the effect's idempotency key (:data:`EFFECT_KEY_FIELD`), since no
created id is known; a compensation that finds nothing under that key answers "not
found", which counts as compensated with ``nothing_applied`` set.
Pure: no IO, no clock, no Temporal — the workflow decides, activities act.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

#: The compensation of each tool the simulator's tool server knows; an action may name
#: its own compensation instead. A tool missing here with none declared is not undone.
DEFAULT_COMPENSATIONS: dict[str, str] = {
    "create_ticket": "close_ticket",
    "post_message": "delete_message",
    "reserve_budget": "release_budget",
}
#: Result field that names the created object; compensations receive it as ``id``.
EFFECT_ID_FIELD = "id"
#: Compensation argument carrying the effect's own idempotency key: a compensation
#: resolves the effect by it (an effect that maybe applied has no created id).
EFFECT_KEY_FIELD = "effect_key"
#: Non-retryable error types that still mean "the effect may be applied" (a 2xx whose
#: body could not be read): every other non-retryable error declares "not applied".
APPLIED_ERROR_TYPES: frozenset[str] = frozenset({"tool_bad_reply"})
#: Version prefix of the key, so a change to the canonical form cannot collide with old keys.
KEY_VERSION = "v1"


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no whitespace, UTF-8 kept (the key's input)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def idempotency_key(workflow_id: str, step: str, tool: str, args: dict[str, Any]) -> str:
    """sha256 of the canonical form of (workflow id, step, tool, args), hex, versioned.

    Same inputs → same key in any process, so a retried activity or a re-run of the same
    workflow id lands on the effect already applied instead of applying it again.
    """
    payload = canonical_json({"workflow": workflow_id, "step": step, "tool": tool, "args": args})
    return f"{KEY_VERSION}-{hashlib.sha256(payload.encode()).hexdigest()}"


def compensation_key(effect_key: str, tool: str) -> str:
    """The idempotency key of the compensation of the effect keyed ``effect_key``."""
    return idempotency_key(effect_key, "compensate", tool, {})


class SideEffect(BaseModel):
    """One applied side effect and how to undo it."""

    step: str
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str
    compensation_tool: str | None = None
    compensation_args: dict[str, Any] = Field(default_factory=dict)
    result: dict[str, Any] = Field(default_factory=dict)


class CompensationStatus(StrEnum):
    APPLIED = "applied"  # effect in place, not undone
    MAYBE_APPLIED = "maybe_applied"  # its call failed ambiguously: may be in place
    COMPENSATED = "compensated"  # undone
    FAILED = "failed"  # an undo was tried and could not complete
    LEFT = "left"  # an operator accepted leaving it in place


_MOVES: dict[CompensationStatus, frozenset[CompensationStatus]] = {
    CompensationStatus.APPLIED: frozenset(
        {CompensationStatus.COMPENSATED, CompensationStatus.FAILED, CompensationStatus.LEFT}
    ),
    CompensationStatus.MAYBE_APPLIED: frozenset(
        {
            CompensationStatus.APPLIED,
            CompensationStatus.COMPENSATED,
            CompensationStatus.FAILED,
            CompensationStatus.LEFT,
        }
    ),
    CompensationStatus.FAILED: frozenset(
        {CompensationStatus.COMPENSATED, CompensationStatus.FAILED, CompensationStatus.LEFT}
    ),
    CompensationStatus.COMPENSATED: frozenset(),
    CompensationStatus.LEFT: frozenset(),
}


_OUTSTANDING = (
    CompensationStatus.APPLIED,
    CompensationStatus.MAYBE_APPLIED,
    CompensationStatus.FAILED,
)


class IllegalCompensationMove(ValueError):
    """A log entry was asked to move where its state machine does not allow."""


class CompensationEntry(BaseModel):
    """One line of the log: the effect, where its undo stands, the last error."""

    effect: SideEffect
    status: CompensationStatus = CompensationStatus.APPLIED
    error: str | None = None
    attempts: int = 0
    maybe_applied: bool = Field(
        default=False, description="logged after an ambiguous failure, not a success"
    )
    nothing_applied: bool = Field(
        default=False, description="compensated, and the undo found nothing to undo"
    )

    def label(self) -> str:
        """The status as shown to people: ``compensated (nothing applied)`` etc."""
        if self.status is CompensationStatus.COMPENSATED and self.nothing_applied:
            return "compensated (nothing applied)"
        return self.status.value


class CompensationLog(BaseModel):
    """Effects in the order they were applied, each with its compensation state."""

    entries: list[CompensationEntry] = Field(default_factory=list)

    def append(self, effect: SideEffect, *, maybe_applied: bool = False) -> CompensationEntry:
        """Record a successful effect, or one that ``maybe_applied`` (its key must be new)."""
        if any(e.effect.idempotency_key == effect.idempotency_key for e in self.entries):
            raise IllegalCompensationMove(f"effect {effect.idempotency_key} already logged")
        status = CompensationStatus.MAYBE_APPLIED if maybe_applied else CompensationStatus.APPLIED
        entry = CompensationEntry(effect=effect, status=status, maybe_applied=maybe_applied)
        self.entries.append(entry)
        return entry

    def to_compensate(self) -> list[CompensationEntry]:
        """Entries still to undo, newest first (applied, maybe applied, or failed)."""
        return [
            e
            for e in reversed(self.entries)
            if e.status in _OUTSTANDING and e.effect.compensation_tool is not None
        ]

    def confirm(self, key: str, result: dict[str, Any]) -> CompensationEntry:
        """A ``maybe_applied`` effect was seen applied after all (a later call answered)."""
        entry = self._move(key, CompensationStatus.APPLIED)
        entry.effect.result = dict(result)
        return entry

    def mark_compensated(self, key: str, *, nothing_applied: bool = False) -> CompensationEntry:
        """The undo of ``key`` completed (``nothing_applied``: it found nothing to undo)."""
        entry = self._move(key, CompensationStatus.COMPENSATED)
        entry.attempts += 1
        entry.error = None
        entry.nothing_applied = nothing_applied
        return entry

    def mark_failed(self, key: str, error: str) -> CompensationEntry:
        """The undo of ``key`` could not complete (escalate it)."""
        entry = self._move(key, CompensationStatus.FAILED)
        entry.attempts += 1
        entry.error = error
        return entry

    def mark_left(self, key: str) -> CompensationEntry:
        """An operator accepted leaving the effect of ``key`` in place."""
        return self._move(key, CompensationStatus.LEFT)

    def get(self, key: str) -> CompensationEntry:
        """The entry of the effect keyed ``key`` (KeyError if none)."""
        for e in self.entries:
            if e.effect.idempotency_key == key:
                return e
        raise KeyError(key)

    def with_status(self, status: CompensationStatus) -> list[CompensationEntry]:
        """Entries currently in ``status``, in log order."""
        return [e for e in self.entries if e.status is status]

    def _move(self, key: str, to: CompensationStatus) -> CompensationEntry:
        entry = self.get(key)
        if to not in _MOVES[entry.status]:
            raise IllegalCompensationMove(
                f"effect {key}: {entry.status.value} -> {to.value} is not allowed"
            )
        entry.status = to
        return entry


def failure_may_have_applied(
    *, timed_out: bool, error_type: str | None, non_retryable: bool
) -> bool:
    """Whether a failed effect call may still have applied its effect (log it ``maybe_applied``).

    A timeout (start-to-close, heartbeat, schedule-to-close) or a retryable error that
    ran out of attempts is ambiguous: the effect may stand with its answer lost. A
    non-retryable error is the tool declaring "not applied" (a 4xx validation error),
    except the types in :data:`APPLIED_ERROR_TYPES`.
    """
    if timed_out or not non_retryable:
        return True
    return error_type in APPLIED_ERROR_TYPES


def compensation_for(
    tool: str,
    declared: str | None,
    result: dict[str, Any],
    extra_args: dict[str, Any],
    effect_key: str | None = None,
) -> tuple[str | None, dict[str, Any]]:
    """Which tool undoes an effect of ``tool`` and with what arguments.

    ``declared`` (the action's own choice) wins over :data:`DEFAULT_COMPENSATIONS`; the
    arguments are ``extra_args`` plus the created object's ``id`` from the tool's result
    and, given ``effect_key``, the effect's idempotency key (``effect_key``).
    """
    comp = declared or DEFAULT_COMPENSATIONS.get(tool)
    if comp is None:
        return None, {}
    args = dict(extra_args)
    if EFFECT_ID_FIELD in result:
        args[EFFECT_ID_FIELD] = result[EFFECT_ID_FIELD]
    if effect_key is not None:
        args[EFFECT_KEY_FIELD] = effect_key
    return comp, args


def render_args(args: dict[str, Any], answer_arg: str | None, answer: str) -> dict[str, Any]:
    """The arguments actually sent: the declared ones, plus the answer under ``answer_arg``."""
    out = dict(args)
    if answer_arg:
        out[answer_arg] = answer
    return out
