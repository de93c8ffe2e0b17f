"""Output faults on real traffic: the upstream's reply replaced by the simulator's faulty one.

``invalid_json``, ``schema_violation``, ``empty_output``, ``oversized_output`` and
``content_filter`` with ``mode: finish`` are well-formed answers whose *content* is
unusable. The proxy cannot make a real model write such content, so when one of them
fires the request is answered in the upstream's place (not forwarded, like a terminal
fault) by the simulator's own renderer for the request's wire format: the request is
parsed as the simulator parses it, the reply built with the plan's faults, and streamed or
sent exactly as the simulator would (the plan's stream faults included). A request the
simulator cannot parse (a field it does not know) is forwarded unchanged instead.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from agent_failover.resilience.endpoint import Cloud, ProviderKind
from agent_failover.testing.sim.clock import Clock
from agent_failover.testing.sim.config import LatencyModel, SimConfig, SimEndpoint
from agent_failover.testing.sim.content import ParsedRequest, build_reply
from agent_failover.testing.sim.faults import AttemptPlan
from agent_failover.testing.sim.handler import CompletionHandler
from agent_failover.testing.sim.state import SimState
from agent_failover.testing.sim.wire import SimError

#: provider name -> (wire kind, cloud) of the stand-in endpoint the simulator renders as.
_KINDS: dict[str, tuple[ProviderKind, Cloud | None]] = {
    "anthropic": (ProviderKind.ANTHROPIC, None),
    "openai": (ProviderKind.OPENAI, None),
    "gemini": (ProviderKind.GEMINI, None),
    "bedrock": (ProviderKind.BEDROCK, Cloud.AWS),
    "azure": (ProviderKind.OPENAI, Cloud.AZURE),
    "vertex": (ProviderKind.GEMINI, Cloud.GCP),
}
STAND_IN = "chaos-proxy"


def stand_in_endpoint(provider: str, model: str, variant: str | None) -> SimEndpoint:
    """A simulator endpoint serving ``model`` in ``provider``'s wire, with no base latency."""
    kind, cloud = _KINDS[provider]
    if provider == "vertex" and (variant or "").startswith("anthropic@"):
        kind = ProviderKind.ANTHROPIC
    return SimEndpoint(
        name=STAND_IN,
        kind=kind,
        cloud=cloud,
        organisation=STAND_IN,
        models=[model],
        context_window=10_000_000,
        max_output_tokens=1_000_000,
        latency=LatencyModel(ttft_median_ms=0.0),
    )


def parse_for_simulator(info: Any, body: bytes) -> ParsedRequest | None:
    """The request as the simulator reads it (None: not a completion it can parse)."""
    if info.provider is None or info.op is None or info.op.name != "complete" or not info.model:
        return None
    try:
        doc = json.loads(body) if body else None
        endpoint = stand_in_endpoint(info.provider, info.model, info.op.variant)
        parsed = info.wire.parse(doc, info.op, endpoint)
    except (ValueError, SimError):
        return None
    if info.op.path_stream and not info.op.sse:
        parsed.stream = False  # Gemini without alt=sse: the whole stream as one JSON array
    return parsed


async def answer_with_faulty_reply(
    request: web.Request, info: Any, parsed: ParsedRequest, plan: AttemptPlan, clock: Clock
) -> tuple[web.StreamResponse, str]:
    """Answer as the simulator would with ``plan`` applied; the response and its outcome."""
    endpoint = stand_in_endpoint(info.provider, info.model, info.op.variant)
    state = SimState(SimConfig(endpoints=[endpoint]), clock=clock)
    handler = CompletionHandler(state)
    entry = state.begin_attempt(STAND_IN)
    entry.request_id = f"req_chaos_{entry.seq:08d}"
    try:
        reply = build_reply(
            parsed,
            plan=plan,
            reply_id=f"chaos-{parsed.seed() & 0xFFFFFFFF:08x}",
            created=int(clock.now()),
            max_output_tokens=endpoint.max_output_tokens,
        )
        tps = plan.tokens_per_sec or endpoint.tokens_per_sec
        if parsed.stream:
            resp = await handler._stream(request, info.wire, reply, parsed, plan, entry, tps)
        else:
            resp = await handler._respond(request, info.wire, info.op, reply, plan, entry, tps)
        return resp, f"substituted_{entry.outcome.value}"
    finally:
        state.end_attempt(entry)
