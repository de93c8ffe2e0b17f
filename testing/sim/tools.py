"""A side-effecting tool server, mounted under ``/_tools/<tool>``, for the saga.

Tools come in pairs, an effect and its compensation: ``create_ticket`` / ``close_ticket``,
``post_message`` / ``delete_message``, ``reserve_budget`` / ``release_budget``. An effect
creates an object and answers ``{"tool", "id", "status", "object"}``; its compensation
takes ``{"id": ...}`` and undoes it (404 unknown id, 409 already undone). A compensation
may instead name the effect by its idempotency key, ``{"effect_key": ...}`` (the saga
does so for an effect that *maybe* applied, whose id it never saw): the object that key
created is undone, and a key that applied nothing answers 404 with
``"nothing_applied": true`` — there is nothing to undo.

Every call must carry an ``Idempotency-Key`` header: the first request with a key is
applied and recorded in the effects log; any later request with the same key gets the
same answer (header ``Idempotent-Replayed: true``) and changes nothing — the same key
with different arguments is a 422. Faults per tool (``PUT /_admin/tool_faults/<tool>``)
make calls fail with a status, before or *after* applying the effect (a lost response),
or hang (``when="after"``: apply, then hang — the caller times out on an applied
effect); ``times`` limits a fault to the next N calls.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from aiohttp import web
from pydantic import BaseModel, Field

IDEMPOTENCY_HEADER = "Idempotency-Key"
#: Compensation argument naming the effect by its idempotency key instead of its id.
EFFECT_KEY_ARG = "effect_key"
REPLAYED_HEADER = "Idempotent-Replayed"


@dataclass(frozen=True)
class ToolSpec:
    """What a tool does: create an object of ``kind``, or undo one."""

    kind: str
    undo: bool
    prefix: str = ""


TOOLS: dict[str, ToolSpec] = {
    "create_ticket": ToolSpec("ticket", undo=False, prefix="T"),
    "close_ticket": ToolSpec("ticket", undo=True),
    "post_message": ToolSpec("message", undo=False, prefix="M"),
    "delete_message": ToolSpec("message", undo=True),
    "reserve_budget": ToolSpec("budget", undo=False, prefix="B"),
    "release_budget": ToolSpec("budget", undo=True),
}


class ToolFaultKind(StrEnum):
    ERROR = "error"  # answer with ``status`` (500 by default)
    HANG = "hang"  # accept and answer nothing for ``hold_s``


class ToolFault(BaseModel):
    """A fault on one tool; ``when="after"`` applies the effect, then loses the answer."""

    kind: ToolFaultKind = ToolFaultKind.ERROR
    status: int = Field(default=500, ge=400, le=599)
    when: str = Field(default="before", pattern="^(before|after)$")
    times: int | None = Field(default=None, ge=1, description="fire on the next N calls only")
    hold_s: float = Field(default=30.0, gt=0, le=3600)


@dataclass
class EffectRecord:
    """One applied effect (one per idempotency key), and how often its key was sent."""

    seq: int
    tool: str
    key: str
    object_id: str
    args: dict[str, Any]
    status: int
    response: dict[str, Any]
    requests: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ToolState:
    """Objects, effects log and faults of the tool server (one per simulator)."""

    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    effects: list[EffectRecord] = field(default_factory=list)
    by_key: dict[str, EffectRecord] = field(default_factory=dict)
    faults: dict[str, list[ToolFault]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    _ids: int = 0

    def reset(self) -> None:
        """No objects, no effects, no faults."""
        self.objects.clear()
        self.effects.clear()
        self.by_key.clear()
        self.faults.clear()
        self.calls.clear()
        self._ids = 0

    def set_faults(self, tool: str, faults: list[ToolFault]) -> None:
        _require(tool)
        self.faults[tool] = list(faults)

    def clear_faults(self, tool: str | None = None) -> None:
        if tool is None:
            self.faults.clear()
        else:
            self.faults.pop(_require(tool), None)

    def take_fault(self, tool: str) -> ToolFault | None:
        """The first fault on ``tool`` that fires now (a ``times`` budget is consumed)."""
        faults = self.faults.get(tool, [])
        for i, f in enumerate(faults):
            if f.times is not None:
                if f.times <= 1:
                    faults.pop(i)
                else:
                    faults[i] = f.model_copy(update={"times": f.times - 1})
            return f
        return None

    def apply(self, tool: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Apply one call's effect; the status and body of its answer."""
        spec = TOOLS[tool]
        if not spec.undo:
            self._ids += 1
            oid = f"{spec.prefix}-{self._ids}"
            obj = {"id": oid, "kind": spec.kind, "state": "open", "args": args}
            self.objects[oid] = obj
            return 201, {"tool": tool, "id": oid, "status": "created", "object": obj}
        oid = args.get("id")
        if oid is None and EFFECT_KEY_ARG in args:
            effect = self.by_key.get(str(args[EFFECT_KEY_ARG]))
            if effect is None or TOOLS[effect.tool].kind != spec.kind:
                return 404, {
                    "error": f"no {spec.kind} applied under key {args[EFFECT_KEY_ARG]!r}",
                    "nothing_applied": True,
                }
            oid = effect.object_id
        obj = self.objects.get(oid) if isinstance(oid, str) else None
        if obj is None or obj["kind"] != spec.kind:
            return 404, {"error": f"no {spec.kind} {oid!r}"}
        if obj["state"] != "open":
            return 409, {"error": f"{spec.kind} {oid} is already {obj['state']}"}
        obj["state"] = "undone"
        return 200, {"tool": tool, "id": oid, "status": "undone", "object": obj}

    def record(self, tool: str, key: str, args: dict[str, Any], status: int, body: dict) -> None:
        rec = EffectRecord(
            seq=len(self.effects) + 1,
            tool=tool,
            key=key,
            object_id=str(body.get("id", "")),
            args=args,
            status=status,
            response=body,
        )
        self.effects.append(rec)
        self.by_key[key] = rec


def _require(tool: str) -> str:
    if tool not in TOOLS:
        raise KeyError(f"unknown tool {tool!r}; known: {sorted(TOOLS)}")
    return tool


TOOLS_KEY: web.AppKey[ToolState] = web.AppKey("tool_state", ToolState)


def _json(status: int, body: dict[str, Any], replayed: bool = False) -> web.Response:
    headers = {REPLAYED_HEADER: "true"} if replayed else None
    return web.json_response(body, status=status, headers=headers)


async def handle_tool(request: web.Request) -> web.StreamResponse:
    """POST /_tools/{tool}: idempotent, recorded, fault-injectable."""
    state = request.app[TOOLS_KEY]
    tool = request.match_info["tool"]
    if tool not in TOOLS:
        return _json(404, {"error": f"unknown tool {tool!r}", "tools": sorted(TOOLS)})
    key = request.headers.get(IDEMPOTENCY_HEADER, "").strip()
    if not key:
        return _json(400, {"error": f"{IDEMPOTENCY_HEADER} header is required"})
    try:
        raw = await request.read()
        args = json.loads(raw) if raw else {}
    except ValueError as exc:
        return _json(400, {"error": f"body is not JSON: {exc}"})
    if not isinstance(args, dict):
        return _json(400, {"error": "body must be a JSON object of arguments"})
    state.calls[tool] = state.calls.get(tool, 0) + 1
    fault = state.take_fault(tool)
    if fault is not None and fault.kind is ToolFaultKind.HANG and fault.when == "before":
        await asyncio.sleep(fault.hold_s)
        return _json(504, {"error": "held"})
    if fault is not None and fault.when == "before":
        return _json(fault.status, {"error": f"injected {fault.status} on {tool}"})
    seen = state.by_key.get(key)
    if seen is not None:
        if seen.tool != tool or seen.args != args:
            return _json(422, {"error": f"{IDEMPOTENCY_HEADER} reused with other arguments"})
        seen.requests += 1
        status, body = seen.status, seen.response
        replayed = True
    else:
        status, body = state.apply(tool, args)
        replayed = False
        if status < 400:
            # Only applied effects are remembered: a rejected call may be fixed and re-sent.
            state.record(tool, key, args, status, body)
    if fault is not None and fault.kind is ToolFaultKind.HANG:  # applied, then no answer
        await asyncio.sleep(fault.hold_s)
        return _json(504, {"error": "held (after)"})
    if fault is not None:  # when == "after": the effect stands, the answer is lost
        return _json(fault.status, {"error": f"injected {fault.status} on {tool} (after)"})
    return _json(status, body, replayed=replayed)


def add_tool_routes(app: web.Application, state: ToolState) -> None:
    """Mount the tool server on ``app`` (before the catch-all endpoint route)."""
    app[TOOLS_KEY] = state
    app.router.add_post("/_tools/{tool}", handle_tool)
