"""The weighted route score that orders routes within a tier.

``score = w_health * health + w_latency * latency + w_cost * cost``, each component in
``[0, 1]`` with 1 best, so the score is in ``[0, 1]`` too (weights sum to 1):

* **health** ``= 1 - min(1, error_rate + semantic_failure_rate)`` over the route's
  rolling window; a route with no calls yet counts as healthy (1.0).
* **latency** ``= max(0, 1 - p95 / sla.p95_ms)``: 1 for an instant route, 0 at or above
  the role's SLA. A route without latency samples gets ``UNKNOWN_LATENCY_SCORE`` (0.5)
  so a new route neither jumps the queue nor is buried.
* **cost** ``= 1 - (this - cheapest) / (dearest - cheapest)`` over the role's roster,
  each route priced for the request at hand (input tokens x input price + max output
  tokens x output price): the cheapest route scores 1, the dearest 0, and all score 1
  when they cost the same. Min-max keeps premium routes distinguishable even when the
  roster also holds a route a hundred times cheaper.

Tier order always wins over score: the score only breaks ties inside a tier.

The other score, an *answer's* quality against an expected answer (qualification,
shadow evaluation), lives in :mod:`resilience.quality` and is re-exported here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from agent_failover.resilience.config import LatencySLA, ScoringWeights
from agent_failover.resilience.contracts import WindowStats
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.quality import ScoreResult as ScoreResult
from agent_failover.resilience.quality import ScorerSpec as ScorerSpec
from agent_failover.resilience.quality import judge_request as judge_request
from agent_failover.resilience.quality import parse_judge as parse_judge
from agent_failover.resilience.quality import score_local as score_local

UNKNOWN_LATENCY_SCORE = 0.5


class RouteScore(BaseModel):
    """A route's score and its components, kept for the plan's explanation."""

    model_config = ConfigDict(frozen=True)

    route: str
    health: float
    latency: float
    cost: float
    total: float

    def describe(self) -> str:
        """One-line breakdown, e.g. ``score 0.91 (health 1.00, latency 0.80, cost 0.50)``."""
        return (
            f"score {self.total:.2f} (health {self.health:.2f}, latency {self.latency:.2f}, "
            f"cost {self.cost:.2f})"
        )


def health_score(stats: WindowStats) -> float:
    """``1 - (error rate + semantic failure rate)``, clamped to ``[0, 1]``."""
    return 1.0 - min(1.0, max(0.0, stats.error_rate + stats.semantic_failure_rate))


def latency_score(stats: WindowStats, sla: LatencySLA) -> float:
    """``1 - p95 / SLA p95`` clamped to ``[0, 1]``; 0.5 without samples."""
    if stats.p95_ms is None:
        return UNKNOWN_LATENCY_SCORE
    return max(0.0, 1.0 - stats.p95_ms / sla.p95_ms)


def request_cost(endpoint: EndpointConfig, input_tokens: int, output_tokens: int) -> float:
    """USD the request would cost on ``endpoint`` at its list prices (worst case output)."""
    return endpoint.prices.cost(input_tokens, output_tokens)


def cost_score(cost: float, cheapest: float, dearest: float) -> float:
    """Min-max normalized price in ``[0, 1]``: 1 for the cheapest, 0 for the dearest."""
    span = dearest - cheapest
    if span <= 0.0:
        return 1.0
    return min(1.0, max(0.0, 1.0 - (cost - cheapest) / span))


def score_route(
    route: str,
    stats: WindowStats,
    sla: LatencySLA,
    weights: ScoringWeights,
    cost: float,
    cheapest: float,
    dearest: float,
) -> RouteScore:
    """Combine the three components with the policy's weights."""
    h = health_score(stats)
    lat = latency_score(stats, sla)
    c = cost_score(cost, cheapest, dearest)
    total = weights.health * h + weights.latency * lat + weights.cost * c
    return RouteScore(route=route, health=h, latency=lat, cost=c, total=total)
