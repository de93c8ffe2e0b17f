"""Fault definitions and the pure planner that turns active faults into one attempt's plan.

A :class:`Fault` is a value (set through the admin API or a scenario timeline); each has
an optional ``probability`` and ``model`` filter. :func:`plan_attempt` rolls the dice
once per fault, with the simulator's seeded RNG, and folds the ones that fire into an
:class:`AttemptPlan`: latencies add up, while within each other family (a terminal
answer such as 529 or a reset; a stream disruption; an output corruption) the first
fault in list order that fires wins. Nothing here does IO, so plans are unit-testable.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class FaultKind(StrEnum):
    """Every failure mode the simulator can inject."""

    # latency family: these add up
    LATENCY = "latency"  # fixed delay before the response starts
    LOGNORMAL_LATENCY = "lognormal_latency"  # delay drawn around median_s with sigma
    SLOW_FIRST_TOKEN = "slow_first_token"  # headers sent, then a delay before the first byte
    TOKENS_PER_SEC = "tokens_per_sec"  # generation speed override
    # terminal family: the attempt ends with this instead of a reply
    RATE_LIMIT = "rate_limit"  # 429, Retry-After when retry_after is set
    QUOTA_EXHAUSTED = "quota_exhausted"  # 429 insufficient_quota / RESOURCE_EXHAUSTED
    SERVER_ERROR = "server_error"  # 500
    UNAVAILABLE = "unavailable"  # 503
    OVERLOADED = "overloaded"  # 529 on Anthropic, 503 "overloaded" elsewhere
    HTTP_ERROR = "http_error"  # any status, with the provider's error body
    AUTH_ERROR = "auth_error"  # 401
    CONNECTION_RESET = "connection_reset"  # TCP reset before any header
    HANG = "hang"  # accept and never answer (until the client leaves or hold_s passes)
    CONTEXT_LENGTH = "context_length"  # 400 context too long
    CONTENT_FILTER = "content_filter"  # mode=error: 400; mode=finish: refusal finish reason
    # stream family (streaming requests; stream_cut also truncates a non-stream body)
    STREAM_CUT = "stream_cut"
    STREAM_STALL = "stream_stall"
    MALFORMED_CHUNK = "malformed_chunk"
    NO_DONE = "no_done"
    STREAM_ERROR_EVENT = "stream_error_event"
    # output family: a well-formed reply whose content is wrong
    INVALID_JSON = "invalid_json"
    SCHEMA_VIOLATION = "schema_violation"
    EMPTY_OUTPUT = "empty_output"
    OVERSIZED_OUTPUT = "oversized_output"  # a reply of size_bytes, whatever max_tokens says


LATENCY_KINDS = frozenset(
    {
        FaultKind.LATENCY,
        FaultKind.LOGNORMAL_LATENCY,
        FaultKind.SLOW_FIRST_TOKEN,
        FaultKind.TOKENS_PER_SEC,
    }
)
TERMINAL_KINDS = frozenset(
    {
        FaultKind.RATE_LIMIT,
        FaultKind.QUOTA_EXHAUSTED,
        FaultKind.SERVER_ERROR,
        FaultKind.UNAVAILABLE,
        FaultKind.OVERLOADED,
        FaultKind.HTTP_ERROR,
        FaultKind.AUTH_ERROR,
        FaultKind.CONNECTION_RESET,
        FaultKind.HANG,
        FaultKind.CONTEXT_LENGTH,
    }
)
STREAM_ONLY_KINDS = frozenset(
    {
        FaultKind.STREAM_STALL,
        FaultKind.MALFORMED_CHUNK,
        FaultKind.NO_DONE,
        FaultKind.STREAM_ERROR_EVENT,
    }
)
OUTPUT_KINDS = frozenset(
    {
        FaultKind.INVALID_JSON,
        FaultKind.SCHEMA_VIOLATION,
        FaultKind.EMPTY_OUTPUT,
        FaultKind.OVERSIZED_OUTPUT,
    }
)
JSON_ONLY_KINDS = frozenset({FaultKind.INVALID_JSON, FaultKind.SCHEMA_VIOLATION})

StreamErrorType = Literal["overloaded", "server_error", "rate_limit"]


class Fault(BaseModel):
    """One injectable fault. Only the parameters its ``kind`` uses are read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: FaultKind
    probability: float = Field(default=1.0, ge=0.0, le=1.0)
    model: str | None = Field(default=None, description="only requests for this model")
    seconds: float | None = Field(
        default=None,
        ge=0.0,
        description="latency / slow_first_token delay, stall length, hang or no_done hold",
    )
    median_s: float | None = Field(default=None, gt=0.0)
    sigma: float = Field(default=0.5, ge=0.0, le=3.0)
    rate: float | None = Field(default=None, gt=0.0, description="tokens per second")
    retry_after: float | None = Field(default=None, ge=0.0)
    status: int | None = Field(default=None, ge=400, le=599)
    after_tokens: int = Field(default=0, ge=0)
    mode: Literal["error", "finish"] = "error"
    error_type: StreamErrorType = "overloaded"
    message: str | None = None
    finish_reason: str | None = Field(
        default=None,
        description="content_filter mode=finish: the wire's own refusal reason to send "
        "(e.g. MODEL_ARMOR on Gemini / Vertex); default the wire's usual one",
    )
    hint: Literal["retry_after", "reset"] = Field(
        default="retry_after",
        description="rate_limit: say the wait as retry-after / retry-after-ms, or only as "
        "the vendor's rate-limit reset headers (anthropic-ratelimit-*-reset, "
        "x-ratelimit-reset-*)",
    )
    size_bytes: int | None = Field(
        default=None,
        ge=1,
        le=256 * 1024 * 1024,
        description="oversized_output: length of the reply text (a runaway generation)",
    )
    ramp_to: float | None = Field(
        default=None,
        ge=0.0,
        description="in a scenario, the magnitude (seconds, median_s or rate) at the event's end",
    )

    @model_validator(mode="after")
    def _params(self) -> Fault:
        k = self.kind
        if k in (FaultKind.LATENCY, FaultKind.SLOW_FIRST_TOKEN) and self.seconds is None:
            raise ValueError(f"{k.value} needs 'seconds'")
        if k is FaultKind.LOGNORMAL_LATENCY and self.median_s is None:
            raise ValueError("lognormal_latency needs 'median_s'")
        if k is FaultKind.TOKENS_PER_SEC and self.rate is None:
            raise ValueError("tokens_per_sec needs 'rate'")
        if k is FaultKind.HTTP_ERROR and self.status is None:
            raise ValueError("http_error needs 'status'")
        if k is FaultKind.STREAM_STALL and self.seconds is None:
            raise ValueError("stream_stall needs 'seconds'")
        if k is FaultKind.OVERSIZED_OUTPUT and self.size_bytes is None:
            raise ValueError("oversized_output needs 'size_bytes'")
        return self

    def applies_to(self, model: str) -> bool:
        """Whether the model filter admits ``model``."""
        return self.model is None or self.model == model

    @property
    def label(self) -> str:
        """Short name recorded in the attempts log (status-bearing faults show it)."""
        if self.kind is FaultKind.HTTP_ERROR:
            return f"http_error_{self.status}"
        if self.kind is FaultKind.CONTENT_FILTER:
            return f"content_filter_{self.mode}"
        return self.kind.value


@dataclass
class AttemptPlan:
    """What the server will do to one attempt, decided before it answers."""

    applied: list[Fault] = field(default_factory=list)
    latency_s: float = 0.0
    first_byte_delay_s: float = 0.0
    tokens_per_sec: float | None = None
    terminal: Fault | None = None
    stream_cut: Fault | None = None
    stream_stall: Fault | None = None
    malformed_chunk: Fault | None = None
    no_done: Fault | None = None
    stream_error_event: Fault | None = None
    output: Fault | None = None  # invalid_json, schema_violation, empty_output, oversized
    refusal: Fault | None = None  # content_filter mode=finish

    @property
    def labels(self) -> list[str]:
        """Labels of every fault that fired, in the order they were applied."""
        return [f.label for f in self.applied]


def _fires(fault: Fault, rng: random.Random) -> bool:
    # Certain faults do not consume randomness, so a fixed fault set keeps the
    # latency draws of the rest of the run unchanged.
    if fault.probability >= 1.0:
        return True
    if fault.probability <= 0.0:
        return False
    return rng.random() < fault.probability


def plan_attempt(
    faults: list[Fault],
    *,
    model: str,
    stream: bool,
    json_mode: bool,
    rng: random.Random,
) -> AttemptPlan:
    """Fold the faults that fire for this request into one :class:`AttemptPlan`."""
    plan = AttemptPlan()
    for fault in faults:
        if not _eligible(fault, plan, model=model, stream=stream, json_mode=json_mode):
            continue
        if _fires(fault, rng) and _apply(plan, fault, rng):
            plan.applied.append(fault)
    return plan


def _eligible(
    fault: Fault, plan: AttemptPlan, *, model: str, stream: bool, json_mode: bool
) -> bool:
    """Whether ``fault`` may fire for this request, given what the plan already holds."""
    k = fault.kind
    if not fault.applies_to(model):
        return False
    if k in STREAM_ONLY_KINDS and not stream:
        return False
    if k in JSON_ONLY_KINDS and not json_mode:
        return False
    if k in TERMINAL_KINDS and plan.terminal is not None:
        return False
    return not (k in OUTPUT_KINDS and plan.output is not None)


def _apply(plan: AttemptPlan, fault: Fault, rng: random.Random) -> bool:
    """Fold a fault that fired into ``plan``; False if its slot was already taken."""
    k = fault.kind
    if k is FaultKind.LATENCY:
        plan.latency_s += fault.seconds or 0.0
    elif k is FaultKind.LOGNORMAL_LATENCY:
        median = fault.median_s or 0.0
        plan.latency_s += rng.lognormvariate(math.log(median), fault.sigma)
    elif k is FaultKind.SLOW_FIRST_TOKEN:
        plan.first_byte_delay_s += fault.seconds or 0.0
    elif k is FaultKind.TOKENS_PER_SEC:
        plan.tokens_per_sec = fault.rate
    elif k is FaultKind.CONTENT_FILTER:
        if fault.mode == "error":
            if plan.terminal is not None:
                return False
            plan.terminal = fault
        elif plan.refusal is None:
            plan.refusal = fault
        else:
            return False
    elif k in TERMINAL_KINDS:
        plan.terminal = fault
    elif k in OUTPUT_KINDS:
        plan.output = fault
    else:
        slot = k.value
        if getattr(plan, slot) is not None:
            return False
        setattr(plan, slot, fault)
    return True
