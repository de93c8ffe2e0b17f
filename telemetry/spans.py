"""Spans and span events of the failover path, following the GenAI semantic conventions.

Workflow code asks :func:`workflow_tracer` for its tracer: the real one only when the
replay-safe provider that ``FailoverPlugin``'s tracing interceptor needs is installed,
else OpenTelemetry's no-op tracer (a user's own, non-replay-safe provider must not see
workflow spans repeated on every replay). :func:`event` adds an event to the current
span if it records, and costs one context lookup when nothing does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, NoOpTracer, Span, SpanKind, Status, StatusCode

from agent_failover.telemetry import names

#: ``gen_ai.provider.name`` well-known values by (wire kind, cloud).
_PROVIDER_NAMES = {
    ("anthropic", None): "anthropic",
    ("anthropic", "gcp"): "gcp.vertex_ai",
    ("openai", None): "openai",
    ("openai", "azure"): "azure.ai.openai",
    ("gemini", None): "gcp.gemini",
    ("gemini", "gcp"): "gcp.vertex_ai",
    ("bedrock", "aws"): "aws.bedrock",
}
#: The tracer of a run without tracing (callers compare against it to skip work).
NOOP_TRACER = NoOpTracer()
_NOOP = NOOP_TRACER


def workflow_tracer() -> trace.Tracer:
    """The tracer for workflow code: real only under the replay-safe provider."""
    # The installed provider itself (None until one is set): get_tracer_provider() reads
    # the environment on every call, which the hot path of a no-telemetry run should not.
    provider = trace._TRACER_PROVIDER  # type: ignore[attr-defined]
    if provider is not None:
        # Imported only once a provider is installed: workflow-side imports stay free of
        # Temporal's client and the OpenTelemetry SDK.
        from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider

        if type(provider) is ReplaySafeTracerProvider:
            return provider.get_tracer(names.TRACER_NAME)
    return _NOOP


def provider_name(kind: str, cloud: str | None) -> str:
    """The ``gen_ai.provider.name`` of an endpoint's wire kind and cloud."""
    return _PROVIDER_NAMES.get((kind, cloud)) or _PROVIDER_NAMES.get((kind, None)) or kind


def start_attempt_span(
    *,
    role: str,
    route: str,
    model: str,
    provider: str,
    tier: int,
    attempt: int,
    hedge: bool,
    max_tokens: int | None = None,
    parent: Span | None = None,
) -> Span:
    """The span of one attempt: ``chat {gen_ai.request.model}``, a client span (the
    no-op span, built for nothing, when tracing is off)."""
    tracer = workflow_tracer()
    if tracer is _NOOP:
        return INVALID_SPAN
    attrs: dict[str, Any] = {
        names.GEN_AI_OPERATION_NAME: names.OPERATION_CHAT,
        names.GEN_AI_PROVIDER_NAME: provider,
        names.GEN_AI_REQUEST_MODEL: model,
        names.ATTR_ROLE: role,
        names.ATTR_ROUTE: route,
        names.ATTR_TIER: tier,
        names.ATTR_ATTEMPT: attempt,
        names.ATTR_HEDGE: hedge,
    }
    if max_tokens:
        attrs[names.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
    context = trace.set_span_in_context(parent) if parent is not None else None
    return tracer.start_span(
        f"{names.OPERATION_CHAT} {model}", context=context, kind=SpanKind.CLIENT, attributes=attrs
    )


def end_attempt_span(
    span: Span,
    *,
    outcome: str,
    response_model: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    finish_reason: str | None = None,
    reason_codes: list[str] | None = None,
) -> None:
    """Close an attempt span with its response (or ``error.type`` when it failed)."""
    if span.is_recording():
        attrs: dict[str, Any] = {names.ATTR_OUTCOME: outcome}
        if response_model:
            attrs[names.GEN_AI_RESPONSE_MODEL] = response_model
        if input_tokens is not None:
            attrs[names.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
        if output_tokens is not None:
            attrs[names.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
        if finish_reason:
            attrs[names.GEN_AI_RESPONSE_FINISH_REASONS] = [finish_reason]
        if reason_codes:
            attrs[names.ATTR_REASON_CODES] = reason_codes
        if outcome not in ("ok", "cancelled"):
            attrs[names.ERROR_TYPE] = outcome
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.set_attributes(attrs)
    span.end()


def event(name: str, attributes: Mapping[str, Any] | None = None, span: Span | None = None) -> None:
    """Add ``name`` to ``span`` (default: the current span) if it records; None values dropped."""
    target = span if span is not None else trace.get_current_span()
    if target.is_recording():
        target.add_event(name, {k: v for k, v in (attributes or {}).items() if v is not None})
