"""The outage demo's script: what each phase breaks in the simulator and what it runs.

:func:`phases` lists them in order — all healthy, a specialist's tool call rolled back by
the saga, then an outage that widens step by step (one region, the whole primary
provider, the two big providers, everything) — each with the faults set on the simulator's
endpoints and the pipelines it starts. :mod:`agent_failover.cli.demo` runs them and checks
that every tier of the failover path was seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_failover.workflows.models import ActionSpec, AgentToolSpec

ANTHROPIC = ("anthropic-us-east", "anthropic-eu-west")
#: The primary's model behind other clouds' regional endpoints (tier-1 standbys).
CLAUDE_ON_CLOUDS = ("bedrock-us-west-2", "vertex-europe-west1")
OTHERS = ("openai-us", "cheap-mini", "gemini-flash")


@dataclass
class Phase:
    """One step of the demo: its story, the simulator's faults and the tasks it runs."""

    name: str
    story: str
    faults: dict[str, list[dict[str, Any]]]
    tasks: list[str]
    escalate: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    tool_faults: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


TASKS = [
    "Compare PostgreSQL and DynamoDB for a payments ledger",
    "Draft a rollout plan for a new rate limiter",
    "Assess the risks of moving CI to spot instances",
    "Summarize trade-offs of gRPC versus REST for internal APIs",
    "Propose an on-call rotation for a five-person team",
    "Explain how to shard a multi-tenant search index",
]


#: The specialists' side-effecting tool in the rollback phase (the simulator's tool server).
TICKET_TOOL = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
}
ROLLBACK_TASK = "Triage the checkout outage and notify #ops"


def _rollback_options() -> dict[str, Any]:
    """Specialists may open a ticket while they work; the answer is then posted to #ops."""
    return {
        "revision_rounds": 0,
        "agent_tools": [
            AgentToolSpec(
                role=role,
                name="create_ticket",
                description="Open an incident ticket for your subtask.",
                parameters=TICKET_TOOL,
            )
            for role in ("researcher", "analyst")
        ],
        "actions": [
            ActionSpec(
                tool="post_message", args={"channel": "#ops"}, answer_arg="text", max_attempts=1
            )
        ],
    }


#: Faults of each outage step, worst last; a route left out stays healthy.
OVERLOADED = [{"kind": "overloaded", "retry_after": 5}]
REGION_DOWN = {
    "anthropic-us-east": OVERLOADED,
    # Within a tier the score orders routes, and measured latencies differ by noise;
    # throttling the other same-organisation and other-model standbys makes the cloud
    # regions the only healthy choice.
    "anthropic-eu-west": [{"kind": "rate_limit", "retry_after": 5}],
    "openai-us": [{"kind": "rate_limit", "retry_after": 5}],
}
PROVIDER_DOWN = {
    "anthropic-us-east": OVERLOADED,
    "anthropic-eu-west": [{"kind": "connection_reset"}],
}
BIG_TWO_DOWN = {
    **PROVIDER_DOWN,
    "bedrock-us-west-2": [{"kind": "unavailable"}],
    "vertex-europe-west1": [{"kind": "overloaded"}],
    "openai-us": [{"kind": "unavailable"}],
}
EVERYTHING_DOWN = {
    name: [{"kind": "server_error"}] for name in (*ANTHROPIC, *CLAUDE_ON_CLOUDS, *OTHERS)
}


def phases() -> list[Phase]:
    """The demo's script: healthy, a tool rollback, then an outage that keeps widening."""
    return [
        Phase("1 healthy", "all routes healthy: every step on tier 0", {}, TASKS[:2]),
        Phase(
            "1b tool rollback",
            "a specialist opens a ticket with a tool call inside its step; posting the answer "
            "to #ops then fails (400) → the saga closes the ticket (compensation)",
            {},
            [ROLLBACK_TASK],
            options=_rollback_options(),
            tool_faults={"post_message": [{"status": 400}]},
        ),
        Phase(
            "2 region down",
            "anthropic-us-east answers 529, the Anthropic API's other region and openai-us "
            "throttle (429) → the same model in another cloud region (Claude on Bedrock / "
            "Vertex, tier 1)",
            REGION_DOWN,
            [TASKS[2]],
        ),
        Phase(
            "3 provider down",
            "the Anthropic API down in both regions (529 + resets) → the best-scored "
            "tier-1 standby at another organisation (Claude on a cloud, or OpenAI)",
            PROVIDER_DOWN,
            [TASKS[3]],
        ),
        Phase(
            "4 big two down",
            "Claude everywhere (API, Bedrock, Vertex) and OpenAI down → the cheaper model (tier 2)",
            BIG_TWO_DOWN,
            [TASKS[4]],
        ),
        Phase(
            "5 everything down",
            "every provider down → cached answers, then static fallbacks (a human is asked)",
            EVERYTHING_DOWN,
            [TASKS[0], TASKS[5]],
            escalate=True,
        ),
    ]
