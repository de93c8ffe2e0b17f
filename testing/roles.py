"""Test roles derived from the demo policy, shared by tests, benchmarks and users' tests."""

from __future__ import annotations

from agent_failover.resilience.config import PolicyConfig


def with_test_roles(base: PolicyConfig, *, hedge_delay_ms: float = 200.0) -> PolicyConfig:
    """The policy plus three roles derived from ``analyst`` for tests and benchmarks.

    ``plain`` never hedges (one route at a time, so conduct is exact); ``hedged`` hedges
    after ``hedge_delay_ms``; ``tight-sla`` is ``plain`` with a 250/400 ms p95/p99 SLA.
    """
    analyst = base.role("analyst")
    plain = analyst.model_copy(
        update={"name": "plain", "hedging": analyst.hedging.model_copy(update={"enabled": False})}
    )
    hedged = analyst.model_copy(
        update={
            "name": "hedged",
            "hedging": analyst.hedging.model_copy(
                update={"enabled": True, "delay_ms": hedge_delay_ms, "max_hedges": 1}
            ),
        }
    )
    tight = plain.model_copy(
        update={
            "name": "tight-sla",
            "sla": plain.sla.model_copy(
                update={"p95_ms": 250.0, "p99_ms": 400.0, "min_samples": 4}
            ),
        }
    )
    roles = {**base.roles, "plain": plain, "hedged": hedged, "tight-sla": tight}
    return base.model_copy(update={"roles": roles})


#: The prompt variant the ``quality`` role gives gpt-4.1 (tests look for it on the wire).
GPT_VARIANT_PROMPT = "GPT variant: answer as a JSON object with a summary field."
#: Schema of the ``quality`` role's answers.
QUALITY_SCHEMA = {
    "type": "object",
    "required": ["summary"],
    "properties": {"summary": {"type": "string"}},
}


def with_quality_roles(
    base: PolicyConfig, *, small_window: int = 2_000, summarize_budget_ms: float = 5_000.0
) -> PolicyConfig:
    """The policy plus two roles for the prompt registry and summarization.

    ``quality``: structured (``QUALITY_SCHEMA``), tier 0 anthropic-us-east, tier 1
    openai-us with a gpt-4.1 prompt variant, tier 2 cheap-mini declared without native
    structured output (so it gets prompt-and-validate, and no variant: the default).
    ``summarizing``: tier 0 openai-us configured with a ``small_window`` context window,
    tier 2 cheap-mini (the cheapest route, which summarizes), summarization enabled.
    """
    plain = base.role("analyst").model_copy(
        update={"hedging": base.role("analyst").hedging.model_copy(update={"enabled": False})}
    )
    eps = dict(base.endpoints)
    mini = eps["cheap-mini"]
    eps["cheap-mini"] = mini.model_copy(
        update={"capabilities": mini.capabilities.model_copy(update={"structured_output": False})}
    )
    eps["openai-us-small"] = eps["openai-us"].model_copy(
        update={"name": "openai-us-small", "context_window": small_window}
    )
    roster = plain.roster.model_copy(
        update={
            "tier0": ["anthropic-us-east"],
            "tier1": ["openai-us"],
            "tier2": ["cheap-mini"],
            "static": plain.roster.static.model_copy(update={"data": {"summary": "unavailable"}}),
        }
    )
    data = plain.model_dump(mode="json")
    data.update(
        name="quality",
        output_schema=QUALITY_SCHEMA,
        roster=roster.model_dump(mode="json"),
        prompts={"models": {"gpt-4.1": {"system_prompt": GPT_VARIANT_PROMPT}}},
    )
    data_s = plain.model_dump(mode="json")
    data_s.update(
        name="summarizing",
        roster={
            **plain.roster.model_dump(mode="json"),
            "tier0": ["openai-us-small"],
            "tier1": [],
            "tier2": ["cheap-mini"],
        },
        summarize={"enabled": True, "budget_ms": summarize_budget_ms, "max_tokens": 128},
    )
    out = base.model_dump(mode="json", exclude={"warnings"})
    out["endpoints"] = {k: v.model_dump(mode="json") for k, v in eps.items()}
    out["roles"] = {**out["roles"], "quality": data, "summarizing": data_s}
    return PolicyConfig.model_validate(out)
