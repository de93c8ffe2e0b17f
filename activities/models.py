"""Inputs and outputs of a resilient call's activities (role context, model attempt,
cache), the pipeline's roles and its tools: pydantic models, no IO imports.

Workflows import this module directly (it is deterministic), so the shapes that go into
history are defined once (the health activities' are in :mod:`activities.health_models`).
No model here ever holds a secret: routes are named, keys are resolved inside the worker.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    ValidatorFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from agent_failover.activities.policy_registry import POLICY_REGISTRY
from agent_failover.activities.snapshot_history import (
    SNAPSHOT_DECIMALS,
    UNSTATED_TIME,
    compact_snapshot,
    expand_snapshot,
)
from agent_failover.resilience.cachekey import cache_key
from agent_failover.resilience.config import (
    DEFAULT_MAX_REPLY_BYTES,
    PolicyConfig,
    RerunSettings,
    RolePolicy,
)
from agent_failover.resilience.contracts import HealthSnapshot
from agent_failover.resilience.models import ChatReply, ChatRequest


class RoleContextInput(BaseModel):
    role: str
    now: float
    #: A per-call roster override's routes (``CallOptions.roster``); None: the role's roster.
    routes: list[str] | None = None
    #: Keep each route's newest observation in history even when no SLA streak reads it:
    #: a degraded re-run asks whether the primary is back (``primary_restored``).
    newest_observation: bool = False
    #: The calling workflow's task queue (a local activity's input is not in history): the
    #: context leaves ``task_queue`` out of history when it is this one.
    workflow_queue: str | None = None
    #: Take the call's in-flight lease on the role's first route in the snapshot's round
    #: trip (:class:`HeldLease`): a resilient call asks, before its first plan; a context
    #: no attempt follows (a degraded re-run's check) does not.
    lease: bool = False


class HeldLease(BaseModel):
    """An in-flight lease (:mod:`stores.in_flight`) the role context took on ``route`` for
    the call's first attempt, in its snapshot's round trip: the attempt on ``route`` holds
    it instead of taking its own (one round trip less); any other attempt gives it back."""

    route: str
    id: str
    #: When it lapses by itself (workflow clock): the role's attempt timeout, the lease
    #: grace and the time an attempt may take to start, after the snapshot.
    until: float


#: ``task_queue`` / ``overflow_queue`` of a context whose history left out the workflow's
#: own queue: :meth:`RoleContext.on_queue` fills them in.
OWN_QUEUE = ""


def llm_task_queue(base: str, bulkhead: str) -> str:
    """The task queue of one bulkhead's model calls."""
    return f"{base}-llm-{bulkhead}"


class RoleContext(BaseModel):
    """Everything the workflow needs to plan one call: the role's policy and its routes' health.

    It is a local activity's result, so it is written to history on every call: it is kept
    small. ``policy`` (the policy cut down to the role and its routes) travels as its
    ``policy_ref`` only: a content hash of the subset, which every worker writes to its
    policy store (:mod:`stores.policies`) and loads from there at start, so replay on a
    worker with another policy finds the version its history names. ``role`` travels as its
    name only (it is ``policy.roles[name]``, re-expanded on decode); the snapshot drops its
    defaults, the routes' repeated names, the fields planning does not read and float
    digits beyond :data:`SNAPSHOT_DECIMALS` (:mod:`activities.snapshot_history`). Decoding
    restores the values planning reads.
    """

    role: RolePolicy
    policy: PolicyConfig
    snapshot: HealthSnapshot
    task_queue: str
    #: Eager dispatch: ``task_queue`` is the workflow's own and this is the bulkhead's
    #: queue, where an attempt goes when the worker's bulkhead is full. None: queue dispatch.
    overflow_queue: str | None = None
    policy_ref: str
    #: The call's lease on its first route, taken with the snapshot (asked for only).
    lease: HeldLease | None = None
    _newest_observation: bool = PrivateAttr(default=True)
    _own_queue: str | None = PrivateAttr(default=None)

    def for_history(self, newest_observation: bool, own_queue: str | None = None) -> RoleContext:
        """This context, written to history with routes' newest observation only when
        asked (see :class:`RoleContextInput`; streaks in progress are always kept) and
        without ``task_queue`` when it is ``own_queue``, the calling workflow's."""
        self._newest_observation = newest_observation
        self._own_queue = own_queue
        return self

    def on_queue(self, queue: str) -> RoleContext:
        """This context with the workflow's own ``queue`` where history left it out."""
        if self.task_queue != OWN_QUEUE:
            return self
        overflow = self.overflow_queue
        if overflow == OWN_QUEUE:
            overflow = llm_task_queue(queue, self.role.bulkhead)
        return self.model_copy(update={"task_queue": queue, "overflow_queue": overflow})

    def as_read(self, queue: str, started: float) -> RoleContext:
        """This context as a call reads it: on the workflow's own ``queue`` where history
        left the queue out, its snapshot dated ``started`` (the call's start, which the
        call sent as ``now``) where the activity left the date unstated."""
        ctx = self.on_queue(queue)
        if ctx.snapshot.taken_at == UNSTATED_TIME:
            snapshot = ctx.snapshot.model_copy(update={"taken_at": started})
            ctx = ctx.model_copy(update={"snapshot": snapshot})
        return ctx

    @model_validator(mode="before")
    @classmethod
    def _expand(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "policy" not in data and data.get("policy_ref"):
            known = POLICY_REGISTRY.lookup(data["policy_ref"], data.get("role"))
            data = {**data, "policy": known}
        data = _implied_by_ref(data)
        if isinstance(data.get("role"), str):
            policy = data.get("policy")
            roles = policy.get("roles", {}) if isinstance(policy, dict) else policy.roles
            data = {**data, "role": roles[data["role"]]}
        if data.get("overflow_queue") is True:  # the role's bulkhead queue (see _by_ref)
            role = _role_policy(data["role"])
            data = {**data, "overflow_queue": llm_task_queue(data["task_queue"], role.bulkhead)}
        snap = data.get("snapshot")
        if isinstance(snap, dict):
            policy = data["policy"]
            eps = policy.get("endpoints", {}) if isinstance(policy, dict) else policy.endpoints
            window = _role_policy(data["role"]).sla.window_s
            data = {**data, "snapshot": expand_snapshot({"window_s": window, **snap}, list(eps))}
        return data

    @field_validator("role", "policy", mode="wrap")
    @classmethod
    def _checked_once(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """A role or policy already built was checked then (the worker's subset, the
        registry's version): pydantic would run its cross-checks again on every context,
        in the activity and on every decode in the workflow."""
        if type(value) in (RolePolicy, PolicyConfig):
            return value
        return handler(value)

    @model_validator(mode="after")
    def _remember_policy(self) -> RoleContext:
        POLICY_REGISTRY.register(self.policy_ref, self.policy)
        return self

    @field_serializer("role", when_used="json")
    def _role_name(self, role: RolePolicy) -> Any:
        known = self.policy.roles.get(role.name)
        if known is role or known == role:
            return role.name
        return role.model_dump(mode="json")

    @field_serializer("policy", when_used="json")
    def _policy_left_out(self, policy: PolicyConfig) -> None:
        return None  # it travels by ref (see _by_ref): no need to serialize it first

    @field_serializer("snapshot", when_used="json")
    def _compact_snapshot(self, snap: HealthSnapshot) -> Any:
        return compact_snapshot(snap, self._newest_observation)

    @model_serializer(mode="wrap", when_used="json")
    def _by_ref(self, handler: Any) -> Any:
        out = handler(self)
        if out.get("lease", True) is None:
            del out["lease"]
        if out.get("overflow_queue") is None:
            out.pop("overflow_queue", None)
        elif self.overflow_queue == llm_task_queue(self.task_queue, self.role.bulkhead):
            out["overflow_queue"] = True  # derived again from the queue and the role
        del out["policy"]  # the policy travels by ref: the store holds it
        _leave_out_implied(self, out)
        return out


def _leave_out_implied(ctx: RoleContext, out: dict[str, Any]) -> None:
    """Drop from a by-ref context what :func:`_implied_by_ref` restores: the workflow's own
    queue with its bulkhead's overflow queue, the role's SLA window, an empty snapshot.
    (The role stays: a missing policy version's error names it.)"""
    overflow = out.get("overflow_queue")
    if ctx._own_queue is not None and out.get("task_queue") == ctx._own_queue:
        if overflow is True:  # eager dispatch's usual case: both implied
            del out["task_queue"], out["overflow_queue"]
        elif overflow is None:
            del out["task_queue"]
            out["overflow_queue"] = False
    snap = out.get("snapshot")
    if isinstance(snap, dict):
        if snap.get("window_s") == ctx.role.sla.window_s:
            del snap["window_s"]
        if snap == {"routes": {}}:
            del out["snapshot"]


def _role_policy(role: Any) -> RolePolicy:
    """``role`` as a :class:`RolePolicy`: as it is when it is one (checked when built)."""
    return role if type(role) is RolePolicy else RolePolicy.model_validate(role)


def _implied_by_ref(data: dict[str, Any]) -> dict[str, Any]:
    """A by-ref context with what :func:`_leave_out_implied` dropped put back; the
    workflow's own queue, which only the workflow knows, as :data:`OWN_QUEUE` (see
    :meth:`RoleContext.on_queue`)."""
    out = dict(data)
    out.setdefault("snapshot", {"routes": {}})
    if "task_queue" not in out:
        out["task_queue"] = OWN_QUEUE
        # Implied with it (eager dispatch): the role's bulkhead queue beside it; False: none.
        overflow = out.get("overflow_queue", True)
        out["overflow_queue"] = OWN_QUEUE if overflow is True else None
    return out


class CacheWrite(BaseModel):
    """Where ``call_model`` caches a successful answer (instead of a second activity)."""

    key: str
    keep_s: float = Field(
        gt=0,
        description="how long the store keeps the answer: the role's max_staleness_s, so a "
        "stale answer is still there when an outage outlasts the freshness ttl_s",
    )


def without_default_fields(model: BaseModel, out: dict[str, Any]) -> dict[str, Any]:
    """``out`` (the model's JSON) without the top-level fields left at their defaults."""
    for name, default in _field_defaults(type(model)):
        if name in out and getattr(model, name) == default:
            del out[name]
    return out


@functools.lru_cache(maxsize=32)
def _field_defaults(cls: type[BaseModel]) -> tuple[tuple[str, Any], ...]:
    """Each field's default (a factory's called once per class: it is only compared with,
    never handed out), instead of asking pydantic for every field of every payload. A
    required field has none: it is always written, so it is not compared at all."""
    return tuple(
        (name, info.get_default(call_default_factory=True))
        for name, info in cls.model_fields.items()
        if not info.is_required()
    )


class CallModelInput(BaseModel):
    """One attempt's input; written to history without its defaults (they decode back)."""

    role: str
    route: str
    request: ChatRequest
    output_schema: dict[str, Any] | None = None
    ttft_budget_ms: float = Field(gt=0)
    idle_budget_ms: float = Field(gt=0)
    timeout_ms: float = Field(gt=0)
    now: float = Field(description="workflow time when scheduled; activities keep health on it")
    deadline_at: float | None = Field(
        default=None,
        description="workflow time the whole call must end by: bounds a same-route 429 wait",
    )
    max_reply_bytes: int = Field(
        default=DEFAULT_MAX_REPLY_BYTES, gt=0, description="larger replies: oversized_output"
    )
    cache: CacheWrite | None = Field(
        default=None,
        description="write a successful answer to the response cache under this key",
    )
    lease: HeldLease | None = Field(
        default=None,
        description="the call's lease its role context took: held on its route, else ended",
    )

    @field_serializer("request", when_used="json")
    def _request_without_defaults(self, request: ChatRequest) -> Any:
        return request.model_dump(mode="json", exclude_defaults=True)

    @model_serializer(mode="wrap", when_used="json")
    def _compact(self, handler: Any) -> Any:
        out = without_default_fields(self, handler(self))
        if self.cache is not None and self.cache.key == cache_key(self.role, self.request):
            # The usual case (the attempt's request is the call's): the activity derives
            # the same key from the same request, so history holds only the keep time.
            out["cache"] = {"keep_s": self.cache.keep_s}
        if self.idle_budget_ms == self.ttft_budget_ms:
            del out["idle_budget_ms"]  # the usual case: one budget for first and later tokens
        if self.lease is not None and self.lease.route == self.route:
            del out["lease"]["route"]  # the usual case: the lease is on the attempt's route
        return out

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        """Restore what the compact shape leaves out: the idle budget equal to the TTFT
        budget, the cache key the request derives, the lease's route when it is the
        attempt's."""
        if isinstance(data, dict) and "idle_budget_ms" not in data and "ttft_budget_ms" in data:
            data = {**data, "idle_budget_ms": data["ttft_budget_ms"]}
        lease = data.get("lease") if isinstance(data, dict) else None
        if isinstance(lease, dict) and "route" not in lease and "route" in data:
            data = {**data, "lease": {**lease, "route": data["route"]}}
        cache = data.get("cache") if isinstance(data, dict) else None
        if isinstance(cache, dict) and "key" not in cache and "request" in data:
            request = ChatRequest.model_validate(data["request"])
            data = {**data, "request": request}
            data["cache"] = {**cache, "key": cache_key(data["role"], request)}
        return data


class CallModelResult(BaseModel):
    """One attempt's answer; written to history without what the workflow already knows:
    the reply's ``endpoint`` when it is the attempt's route (the workflow restores it from
    the attempt) and a ``stop`` finish reason (the usual one; a reply always has one, so
    its absence is unambiguous)."""

    reply: ChatReply
    data: Any = None
    trial: bool = False
    #: Temporal's attempt number that answered: 2 after a same-route retry (a 500 after
    #: backoff, or a 429 whose short Retry-After was waited out).
    attempt: int = 1
    _route: str | None = PrivateAttr(default=None)

    def for_route(self, route: str) -> CallModelResult:
        """This result, written to history without the reply's endpoint if it is ``route``."""
        self._route = route
        return self

    @model_validator(mode="before")
    @classmethod
    def _restore(cls, data: Any) -> Any:
        reply = data.get("reply") if isinstance(data, dict) else None
        if isinstance(reply, dict) and ("endpoint" not in reply or "finish_reason" not in reply):
            reply = {"endpoint": "", "finish_reason": "stop", **reply}
            data = {**data, "reply": reply}
        return data

    @field_serializer("reply", when_used="json")
    def _reply_without_defaults(self, reply: ChatReply) -> Any:
        out = reply.model_dump(mode="json", exclude_defaults=True)
        for key in ("ttft_ms", "latency_ms"):  # sub-microsecond digits are noise
            if isinstance(out.get(key), float):
                out[key] = round(out[key], SNAPSHOT_DECIMALS)
        if self._route is not None and out.get("endpoint") == self._route:
            del out["endpoint"]
        if out.get("finish_reason") == "stop":
            del out["finish_reason"]
        return out

    @model_serializer(mode="wrap", when_used="json")
    def _compact(self, handler: Any) -> Any:
        return without_default_fields(self, handler(self))


class AttemptFailure(BaseModel):
    """Details attached to a failed ``call_model`` (the ApplicationError's first detail)."""

    route: str
    error_class: str
    decision: str
    message: str
    status: int | None = None
    provider_code: str | None = None
    retry_after_s: float | None = None
    #: The tail of the text streamed before the failure (at most PARTIAL_TEXT_TAIL_CHARS).
    partial_text: str = ""
    #: Characters streamed in all; more than ``partial_text`` holds when it was cut.
    partial_chars: int = 0
    partial_truncated: bool = False
    latency_ms: float = 0.0
    #: A context-length rejection's stated window and prompt size, when the provider said.
    context_window: int | None = None
    prompt_tokens: int | None = None
    #: Why a 429 was or was not waited out on the same route (resilience.ratelimit).
    rate_limit_wait: str | None = None


class CacheLookupInput(BaseModel):
    key: str
    now: float
    ttl_s: float = Field(gt=0, description="the role's freshness: older answers are stale")
    max_staleness_s: float = Field(gt=0, description="the oldest answer that may be served")


class CachedAnswer(BaseModel):
    content: str
    data: Any = None
    model: str | None = None
    route: str | None = None
    age_s: float
    fresh: bool = Field(default=True, description="younger than the role's ttl_s")


class CacheLookupResult(BaseModel):
    """What ``cache_lookup`` found: a hit with its answer, or an explicit miss and why.

    A miss is a value, not a null payload, so the Temporal UI shows what happened.
    """

    hit: bool
    answer: CachedAnswer | None = None
    miss_reason: str | None = Field(default=None, description="'no entry' or 'too old: ...'")


class PipelineRolesInput(BaseModel):
    """No fields: the worker's policy decides (kept as a model so it can grow)."""


class PipelineRoles(BaseModel):
    planner: str = "planner"
    critic: str = "critic"
    synthesis: str = "synthesis"
    specialists: list[str]
    critical: list[str] = Field(default_factory=list)
    #: ``min_confidence`` of critical roles that set one (an answer below it escalates).
    min_confidence: dict[str, float] = Field(default_factory=dict)
    #: Roles whose degraded steps are re-run once their primary is back (``rerun``).
    rerun: dict[str, RerunSettings] = Field(default_factory=dict)
    #: Roles whose plans hedge: their calls read the role context with the local activity
    #: (their first attempt is the workflow's to run). Absent in runs recorded before.
    hedged: list[str] = Field(default_factory=list)


class ToolCallInput(BaseModel):
    """One call of a side-effecting tool (or of a compensation), keyed for idempotency."""

    tool: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    args: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str = Field(min_length=1, max_length=200)
    step: str = ""
    timeout_s: float = Field(default=10.0, gt=0, le=300)


class ToolCallResult(BaseModel):
    tool: str
    idempotency_key: str
    status: int
    result: dict[str, Any] = Field(default_factory=dict)
    replayed: bool = Field(default=False, description="the server had already applied this key")
    latency_ms: float = 0.0


class ToolFailure(BaseModel):
    """Details attached to a failed ``run_tool`` / ``compensate`` (first error detail)."""

    tool: str
    idempotency_key: str
    error_class: str
    message: str
    status: int | None = None
