"""Inputs and outputs of every activity: pydantic models, no IO imports.

Workflows import this module directly (it is deterministic), so the shapes that go into
history are defined once. No model here ever holds a secret: routes are named, keys are
resolved inside the worker.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    field_serializer,
    model_serializer,
    model_validator,
)

from agent_failover.resilience.breaker import Breaker, Transition
from agent_failover.resilience.budget import BucketLevel
from agent_failover.resilience.cachekey import cache_key
from agent_failover.resilience.config import (
    DEFAULT_MAX_REPLY_BYTES,
    PolicyConfig,
    RerunSettings,
    RolePolicy,
)
from agent_failover.resilience.contracts import BreakerState, HealthSnapshot, RouteHealth
from agent_failover.resilience.models import ChatReply, ChatRequest


class RoleContextInput(BaseModel):
    role: str
    now: float
    #: A per-call roster override's routes (``CallOptions.roster``); None: the role's roster.
    routes: list[str] | None = None
    #: Unused since policies travel by ref only (kept so older callers still validate).
    known_policies: list[str] = Field(default_factory=list)
    #: Keep each route's newest observation in history even when no SLA streak reads it:
    #: a degraded re-run asks whether the primary is back (``primary_restored``).
    newest_observation: bool = False
    #: The calling workflow's task queue (a local activity's input is not in history): the
    #: context leaves ``task_queue`` out of history when it is this one.
    workflow_queue: str | None = None


#: Policies by ``policy_ref`` in this process: the subsets this worker built, those loaded
#: from the policy store (:mod:`stores.policies`) at start, and those decoded inline from
#: older histories. Content addressed (a ref names one subset), so sharing it across runs
#: and workers is safe.
_POLICIES_BY_REF: dict[str, PolicyConfig] = {}
#: Refs a decode looked for and did not find (fetched from the store in the background).
_MISSING_REFS: set[str] = set()
#: Where this process's policy versions come from (for the missing-version error).
_POLICY_STORES: list[str] = []
#: ``taken_at`` of a snapshot whose history left it out (the workflow sets its own ``now``).
UNSTATED_TIME = 0.0
#: ``task_queue`` / ``overflow_queue`` of a context whose history left out the workflow's
#: own queue: :meth:`RoleContext.on_queue` fills them in.
OWN_QUEUE = ""
#: The workflow rules role contexts written by this code ask for (see ``RoleContext.rules``).
CURRENT_RULES = 2
#: Decimals kept of the snapshot's floats in history (timestamps in s, latencies in ms).
SNAPSHOT_DECIMALS = 3


def llm_task_queue(base: str, bulkhead: str) -> str:
    """The task queue of one bulkhead's model calls."""
    return f"{base}-llm-{bulkhead}"


class PolicyVersionMissing(LookupError):
    """A history names a policy version this worker does not have.

    Not a ``ValueError`` on purpose: pydantic passes it through unwrapped, and Temporal turns
    it into a workflow-task failure (the task is retried, the run is kept) on a worker with
    the default ``workflow_failure_exception_types``.
    """


def policy_body(policy: PolicyConfig) -> str:
    """A policy subset as it is stored and hashed (defaults left out)."""
    return policy.model_dump_json(exclude_defaults=True)


def policy_ref(policy: PolicyConfig) -> str:
    """Content hash of a policy subset as it travels (defaults left out)."""
    return hashlib.sha256(policy_body(policy).encode()).hexdigest()[:16]


def register_policy(ref: str, policy: PolicyConfig) -> None:
    """Make ``policy`` (whose ref is ``ref``) decodable in this process."""
    _POLICIES_BY_REF.setdefault(ref, policy)
    _MISSING_REFS.discard(ref)


def register_policy_store(where: str) -> None:
    """Note a policy store this process loads versions from (named in decode errors)."""
    if where not in _POLICY_STORES:
        _POLICY_STORES.append(where)


def _missing_version(ref: str, role: Any) -> PolicyVersionMissing:
    _MISSING_REFS.add(ref)
    where = "; ".join(_POLICY_STORES) or "none configured in this process"
    return PolicyVersionMissing(
        f"policy version {ref} (role {role!r}) named by this run's history is not known to "
        f"this worker: not in its policy store ({where}) nor built from its current policy. "
        "The workflow task is retried and the run resumes once the version is found: restore "
        f"it (the file {ref}.json in FAILOVER_POLICY_DIR, or the Redis key "
        f"<namespace>:policy:{ref}), or point this worker at the policy store the worker that "
        "started the run used (the same REDIS_URL and FAILOVER_REDIS_NAMESPACE, or "
        "FAILOVER_POLICY_DIR)."
    )


class RoleContext(BaseModel):
    """Everything the workflow needs to plan one call: the role's policy and its routes' health.

    It is a local activity's result, so it is written to history on every call: it is kept
    small. ``policy`` (the policy cut down to the role and its routes) travels as its
    ``policy_ref`` only: a content hash of the subset, which every worker writes to its
    policy store (:mod:`stores.policies`) and loads from there at start, so replay on a
    worker with another policy finds the version its history names. ``role`` travels as its
    name only (it is ``policy.roles[name]``, re-expanded on decode); the snapshot drops its
    defaults, the routes' repeated names, the fields planning does not read
    (:data:`UNPLANNED_FIELDS`) and float digits beyond :data:`SNAPSHOT_DECIMALS`. Decoding
    restores the values planning reads.

    Older shapes decode too: the full policy inline (before issue 10), and the issue-10
    shape (policy inline on a run's first call for a role, by ref on later ones).
    ``policy_ref`` set means the issue-10 rules: those of the ``decisions-issue-8`` and
    ``cache-in-call-issue-10`` patches apply without their markers.
    """

    role: RolePolicy
    policy: PolicyConfig
    snapshot: HealthSnapshot
    task_queue: str
    #: Eager dispatch: ``task_queue`` is the workflow's own and this is the bulkhead's
    #: queue, where an attempt goes when the worker's bulkhead is full. None: queue dispatch.
    overflow_queue: str | None = None
    policy_ref: str | None = None
    #: Which workflow rules a run follows from this call on, carried by the data (not a
    #: patch marker): 1 before, 2 since the hedge timer starts in its attempt's own step
    #: (a patch marker cannot gate it: a replay may resolve the role context one workflow
    #: task before the marker, see ``ResilientCall._hedge_due``). Written only when not 1.
    rules: int = 1
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

    @model_validator(mode="before")
    @classmethod
    def _expand(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "policy" not in data and data.get("policy_ref"):
            known = _POLICIES_BY_REF.get(data["policy_ref"])
            if known is None:
                raise _missing_version(data["policy_ref"], data.get("role"))
            data = {**data, "policy": known}
        if data.get("policy_ref"):
            data = _implied_by_ref(data)
        if isinstance(data.get("role"), str):
            policy = data.get("policy")
            roles = policy.get("roles", {}) if isinstance(policy, dict) else policy.roles
            data = {**data, "role": roles[data["role"]]}
        if data.get("overflow_queue") is True:  # the role's bulkhead queue (see _by_ref)
            role = RolePolicy.model_validate(data["role"])
            data = {**data, "overflow_queue": llm_task_queue(data["task_queue"], role.bulkhead)}
        snap = data.get("snapshot")
        if isinstance(snap, dict) and (data.get("policy_ref") or "window_s" in snap):
            policy = data["policy"]
            eps = policy.get("endpoints", {}) if isinstance(policy, dict) else policy.endpoints
            window = RolePolicy.model_validate(data["role"]).sla.window_s
            data = {**data, "snapshot": _expand_snapshot({"window_s": window, **snap}, list(eps))}
        return data

    @model_validator(mode="after")
    def _remember_policy(self) -> RoleContext:
        if self.policy_ref is not None:
            register_policy(self.policy_ref, self.policy)
        return self

    @field_serializer("role", when_used="json")
    def _role_name(self, role: RolePolicy) -> Any:
        if self.policy.roles.get(role.name) == role:
            return role.name
        return role.model_dump(mode="json")

    @field_serializer("policy", when_used="json")
    def _without_defaults(self, value: BaseModel) -> Any:
        return value.model_dump(mode="json", exclude_defaults=True)

    @field_serializer("snapshot", when_used="json")
    def _compact_snapshot(self, snap: HealthSnapshot) -> Any:
        if self.policy_ref is None:  # the pre-issue-10 shape
            return snap.model_dump(mode="json", exclude_defaults=True)
        return _compact_snapshot(snap, self._newest_observation)

    @model_serializer(mode="wrap", when_used="json")
    def _by_ref(self, handler: Any) -> Any:
        out = handler(self)
        if out.get("rules") == 1:
            del out["rules"]
        if out.get("overflow_queue") is None:
            out.pop("overflow_queue", None)
        elif self.overflow_queue == llm_task_queue(self.task_queue, self.role.bulkhead):
            out["overflow_queue"] = True  # derived again from the queue and the role
        if out.get("policy_ref") is None:
            out.pop("policy_ref", None)
        else:  # the policy travels by ref: the store holds it
            out.pop("policy", None)
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


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, SNAPSHOT_DECIMALS)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


#: What planning in the workflow never reads of a route's health (the activity reads them
#: from the store; ``status`` and ``health`` show them): left out of history. Planning
#: reads the breaker, cool-down, budgets, learned context window, SLA and quality verdicts,
#: the recent streak, and the window's error/semantic rates, p95/p99, TTFT p95 and sample
#: counts (``resilience.planner``, ``.sla``, ``.scoring``, ``.shadow``, ``.summarize``).
UNPLANNED_FIELDS = frozenset({"last_probe_at", "last_probe_ok", "last_call_at"})
UNPLANNED_STATS = frozenset(
    {
        "errors",
        "semantic_failures",
        "slow_calls",
        "slow_call_rate",
        "p50_ms",
        "ttft_p50_ms",
        "ttft_p99_ms",
        "enough_samples",
        "probes",
    }
)

_UNPLANNED: dict[str, Any] = {
    "route": True,
    **dict.fromkeys(UNPLANNED_FIELDS, True),
    "stats": dict.fromkeys(UNPLANNED_STATS, True),
}


def _planned_route(rh: Any, newest_observation: bool) -> dict[str, Any]:
    """One route's health as planning reads it (see :data:`UNPLANNED_FIELDS`)."""
    d = rh.model_dump(
        mode="json",
        exclude_defaults=True,
        exclude=_UNPLANNED,
    )
    stats = d.get("stats", {})
    if stats.get("latency_samples"):
        stats.pop("calls", None)  # sla reads ``latency_samples or calls``
    if not rh.sla_demoted and rh.sla_since is None and rh.recent:
        # The streaks only count while demoted or after a change; a restored primary
        # (resilience.shadow.primary_restored, re-runs only) reads the newest observation.
        d["recent"] = d["recent"][-1:] if newest_observation else []
        if not d["recent"]:
            del d["recent"]
    return d


def _compact_snapshot(snap: HealthSnapshot, newest_observation: bool = True) -> dict[str, Any]:
    """The snapshot as planning reads it, without defaults, route names, one window
    repeated per route, or the routes with nothing to say (restored from the policy)."""
    windows = [rh.stats.window_s for rh in snap.routes.values()]
    window = max(set(windows), key=windows.count) if windows else 0.0
    routes: dict[str, Any] = {}
    for name, rh in snap.routes.items():
        d = _planned_route(rh, newest_observation)
        stats = d.get("stats", {})
        if stats.get("window_s") == window:
            stats.pop("window_s")
        if not stats:
            d.pop("stats", None)
        if d:
            routes[name] = _rounded(d)
    # ``taken_at`` is the role context's ``now``, the workflow's own clock: it restores it.
    out = snap.model_dump(mode="json", exclude_defaults=True, exclude={"routes", "taken_at"})
    return {**_rounded(out), "window_s": window, "routes": routes}


def _expand_snapshot(data: dict[str, Any], endpoints: list[str]) -> dict[str, Any]:
    window = data["window_s"]
    routes = {}
    given = data.get("routes") or {}
    # A route left out had nothing but defaults (and the shared window) to say.
    for name, d in {**given, **{n: {} for n in endpoints if n not in given}}.items():
        stats = {"window_s": window, **d.get("stats", {})}
        routes[name] = {**d, "route": name, "stats": stats}
    out = {k: v for k, v in data.items() if k != "window_s"} | {"routes": routes}
    return {"taken_at": UNSTATED_TIME, **out}


class CacheWrite(BaseModel):
    """Where ``call_model`` caches a successful answer (instead of a second activity)."""

    key: str
    ttl_s: float = Field(gt=0)


def _without_default_fields(model: BaseModel, out: dict[str, Any]) -> dict[str, Any]:
    """``out`` (the model's JSON) without the top-level fields left at their defaults."""
    for name, info in type(model).model_fields.items():
        if name in out and getattr(model, name) == info.get_default(call_default_factory=True):
            del out[name]
    return out


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

    @field_serializer("request", when_used="json")
    def _request_without_defaults(self, request: ChatRequest) -> Any:
        return request.model_dump(mode="json", exclude_defaults=True)

    @model_serializer(mode="wrap", when_used="json")
    def _compact(self, handler: Any) -> Any:
        out = _without_default_fields(self, handler(self))
        if self.cache is not None and self.cache.key == cache_key(self.role, self.request):
            # The usual case (the attempt's request is the call's): the activity derives
            # the same key from the same request, so history holds only the TTL.
            out["cache"] = {"ttl_s": self.cache.ttl_s}
        if self.idle_budget_ms == self.ttft_budget_ms:
            del out["idle_budget_ms"]  # the usual case: one budget for first and later tokens
        return out

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        """Restore what the compact shape leaves out: the idle budget equal to the TTFT
        budget, the cache key the request derives."""
        if isinstance(data, dict) and "idle_budget_ms" not in data and "ttft_budget_ms" in data:
            data = {**data, "idle_budget_ms": data["ttft_budget_ms"]}
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
        return _without_default_fields(self, handler(self))


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


class ProbeInput(BaseModel):
    route: str
    now: float
    #: The monitor's probe interval: a closed route with real traffic more recent than
    #: this is not probed (resilience.probing). None: the policy's probes.interval_s.
    interval_s: float | None = None
    #: The faster cadence of half-open routes. None: the policy's (at most interval_s).
    half_open_interval_s: float | None = None


class ProbeResult(BaseModel):
    route: str
    ok: bool
    skipped: bool = False
    error_class: str | None = None
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    trial: bool = False
    breaker: BreakerState
    transition: Transition | None = None
    #: Why the route was (or was not) probed (resilience.probing.ProbeReason).
    reason: str | None = None


class CacheLookupInput(BaseModel):
    key: str
    now: float
    max_staleness_s: float


class CachedAnswer(BaseModel):
    content: str
    data: Any = None
    model: str | None = None
    route: str | None = None
    age_s: float


class CacheLookupResult(BaseModel):
    """What ``cache_lookup`` found: a hit with its answer, or an explicit miss and why.

    A miss is a value, not a null payload, so the Temporal UI shows what happened.
    Histories written before this type hold a bare :class:`CachedAnswer` (a hit) or null;
    the first still decodes here (as a hit), the second decodes as ``None``.
    """

    hit: bool
    answer: CachedAnswer | None = None
    miss_reason: str | None = Field(default=None, description="'no entry' or 'stale: ...'")

    @model_validator(mode="before")
    @classmethod
    def _legacy_answer(cls, data: Any) -> Any:
        if isinstance(data, dict) and "hit" not in data and "content" in data:
            return {"hit": True, "answer": data}
        return data


class CacheStoreInput(BaseModel):
    key: str
    role: str
    content: str
    data: Any = None
    model: str | None = None
    route: str | None = None
    now: float
    ttl_s: float


class ForceRouteInput(BaseModel):
    route: str
    state: BreakerState | None = Field(
        default=None, description="forced_open, forced_closed, or null to release"
    )
    now: float


class HealthTableInput(BaseModel):
    routes: list[str]
    now: float
    window_s: float = 60.0


class ContextWindow(BaseModel):
    """A route's context window: as configured (None: not configured, so not assumed),
    and as learned from a provider's own "maximum context length is N tokens" (None until
    one was seen)."""

    configured: int | None = None
    learned: int | None = None

    @property
    def effective(self) -> int | None:
        """What the planner goes by: the learned window, else the configured one."""
        return self.learned if self.learned is not None else self.configured


class QualityRow(BaseModel):
    """One route's shadow-evaluation verdict for one role (roles with ``shadow`` only)."""

    role: str
    route: str
    #: Marked ``QUALITY_REGRESSION`` for the role (what the planner goes by).
    regressed: bool = False
    #: When the verdict last changed (None: never).
    since: float | None = None
    #: ``1 - mean agreement`` over the role's shadow window now (None: under min_samples).
    delta: float | None = None
    #: The delta recorded when the verdict last changed.
    verdict_delta: float | None = None
    #: Shadow samples the verdict counts (in the window, since the last change).
    samples: int = 0
    min_samples: int = 1
    tolerance: float = 0.0


class HealthTable(BaseModel):
    taken_at: float
    rows: list[RouteHealth]
    breakers: list[Breaker]
    store: str
    store_degraded: bool = False
    #: Why the shared store is degraded and since when (Redis lost: a local view is served).
    store_error: str | None = None
    store_degraded_since: float | None = None
    context_windows: dict[str, ContextWindow] = Field(default_factory=dict)
    #: Every rate-budget bucket of the policy (endpoints, then bulkheads), as all workers
    #: share them.
    budgets: list[BucketLevel] = Field(default_factory=list)
    #: Shadow-evaluation verdicts per role and route (roles with ``shadow`` settings).
    quality: list[QualityRow] = Field(default_factory=list)


def context_windows(policy: PolicyConfig, snapshot: HealthSnapshot) -> dict[str, ContextWindow]:
    """Per route: the configured window and, when the health store learned one, that."""
    return {
        route: ContextWindow(
            configured=ep.context_window,
            learned=snapshot.get(route).context_window,
        )
        for route, ep in policy.endpoints.items()
    }


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
