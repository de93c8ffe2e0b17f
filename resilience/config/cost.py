"""Cost efficiency: demote a route whose tokens per dollar fell well below its own baseline.

Evaluated by :mod:`resilience.cost_efficiency` over what the health store keeps per route
(useful tokens and the spend of every billed attempt, current window and 7-day baseline).
Off by default; when on, a route under ``min_share`` of its baseline is demoted exactly as
an SLA breach is, and restored only above ``min_share / hysteresis_margin`` of it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent_failover.resilience.config.validation import STRICT

#: The seed's number: a route under half of its baseline tokens per dollar is demoted.
DEFAULT_COST_MIN_SHARE = 0.5
#: Billed attempts each of the current window and the baseline needs before they count.
DEFAULT_COST_MIN_SAMPLES = 20


class CostEfficiencySettings(BaseModel):
    """When a route's tokens per dollar, against its own 7-day baseline, demotes it."""

    model_config = STRICT

    enabled: bool = Field(
        default=False,
        description="Demote a route whose tokens per dollar over the store's recent window "
        "(10 minutes by default) is below `min_share` of its 7-day baseline, exactly as an "
        "SLA breach demotes it (moved behind the healthy routes, still tried last). Off: the "
        "figures are still tracked and shown by `failover status`.",
    )
    min_share: float = Field(
        default=DEFAULT_COST_MIN_SHARE,
        gt=0.0,
        lt=1.0,
        description="Share of the route's baseline tokens per dollar under which it is "
        "demoted. A demoted route is restored only at or above `min_share / "
        "hysteresis_margin` of its baseline (0.625 with the defaults); between the two "
        "lines the previous verdict holds.",
    )
    min_samples: int = Field(
        default=DEFAULT_COST_MIN_SAMPLES,
        ge=1,
        le=100_000,
        description="Billed attempts the current window and the baseline each need before "
        "the ratio can change a verdict. A demoted route whose recent window holds no "
        "billed attempt at all is restored: the evidence that demoted it has aged out.",
    )
