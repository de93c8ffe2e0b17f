"""The side-effect saga as values: idempotency keys, side effects and the compensation log.

A pipeline that applies side effects (create a ticket, post a message, reserve budget)
runs each one as an activity carrying an idempotency key derived from the workflow id,
the step, the tool and its declared arguments, so a retried or re-run step maps onto the
same effect. Each success appends its compensation to a :class:`CompensationLog`; a hard
failure undoes the log in reverse (:meth:`CompensationLog.to_compensate`). The log is a
state machine per entry (``applied → compensated | failed | left``, ``failed →
compensated | failed | left``); illegal moves raise :class:`IllegalCompensationMove`.
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
    COMPENSATED = "compensated"  # undone
    FAILED = "failed"  # an undo was tried and could not complete
    LEFT = "left"  # an operator accepted leaving it in place


_MOVES: dict[CompensationStatus, frozenset[CompensationStatus]] = {
    CompensationStatus.APPLIED: frozenset(
        {CompensationStatus.COMPENSATED, CompensationStatus.FAILED, CompensationStatus.LEFT}
    ),
    CompensationStatus.FAILED: frozenset(
        {CompensationStatus.COMPENSATED, CompensationStatus.FAILED, CompensationStatus.LEFT}
    ),
    CompensationStatus.COMPENSATED: frozenset(),
    CompensationStatus.LEFT: frozenset(),
}


class IllegalCompensationMove(ValueError):
    """A log entry was asked to move where its state machine does not allow."""


class CompensationEntry(BaseModel):
    """One line of the log: the effect, where its undo stands, the last error."""

    effect: SideEffect
    status: CompensationStatus = CompensationStatus.APPLIED
    error: str | None = None
    attempts: int = 0


class CompensationLog(BaseModel):
    """Effects in the order they were applied, each with its compensation state."""

    entries: list[CompensationEntry] = Field(default_factory=list)

    def append(self, effect: SideEffect) -> CompensationEntry:
        """Record a successful effect (its key must be new: one entry per effect)."""
        if any(e.effect.idempotency_key == effect.idempotency_key for e in self.entries):
            raise IllegalCompensationMove(f"effect {effect.idempotency_key} already logged")
        entry = CompensationEntry(effect=effect)
        self.entries.append(entry)
        return entry

    def to_compensate(self) -> list[CompensationEntry]:
        """Entries still to undo, newest first (applied, or failed and not yet left)."""
        return [
            e
            for e in reversed(self.entries)
            if e.status in (CompensationStatus.APPLIED, CompensationStatus.FAILED)
            and e.effect.compensation_tool is not None
        ]

    def mark_compensated(self, key: str) -> CompensationEntry:
        """The undo of ``key`` completed."""
        entry = self._move(key, CompensationStatus.COMPENSATED)
        entry.attempts += 1
        entry.error = None
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


def compensation_for(
    tool: str, declared: str | None, result: dict[str, Any], extra_args: dict[str, Any]
) -> tuple[str | None, dict[str, Any]]:
    """Which tool undoes an effect of ``tool`` and with what arguments.

    ``declared`` (the action's own choice) wins over :data:`DEFAULT_COMPENSATIONS`; the
    arguments are ``extra_args`` plus the created object's ``id`` from the tool's result.
    """
    comp = declared or DEFAULT_COMPENSATIONS.get(tool)
    if comp is None:
        return None, {}
    args = dict(extra_args)
    if EFFECT_ID_FIELD in result:
        args[EFFECT_ID_FIELD] = result[EFFECT_ID_FIELD]
    return comp, args


def render_args(args: dict[str, Any], answer_arg: str | None, answer: str) -> dict[str, Any]:
    """The arguments actually sent: the declared ones, plus the answer under ``answer_arg``."""
    out = dict(args)
    if answer_arg:
        out[answer_arg] = answer
    return out
