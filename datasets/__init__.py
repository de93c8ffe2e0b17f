"""Sample golden sets for the demo roles (``<role>.jsonl``), used by ``failover qualify``.

Each line is one golden item: ``{"id", "prompt", "expected"}`` and optionally ``scorer``
(a :class:`~agent_failover.resilience.quality.ScorerSpec`), ``system`` and ``max_tokens``.
The prompts use the task forms the provider simulator can compute
(:mod:`agent_failover.testing.sim.golden`), so qualifying the demo roles against the
simulator separates its endpoints by their configured accuracy.
"""

from pathlib import Path

DATASETS_DIR = Path(__file__).resolve().parent
