"""Facts of the shipped demo policy that many tests need, read from the policy itself so a
route added to (or renamed in) ``config/policy.yaml`` cannot leave a test's list behind."""

from __future__ import annotations

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy

#: Every endpoint of the shipped policy, in its order (all down: the planner escalates).
ALL_ENDPOINTS: tuple[str, ...] = tuple(load_policy(DEFAULT_POLICY_PATH).endpoints)
