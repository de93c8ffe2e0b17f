"""Shared fixtures for the pure resilience tests: the demo policy and a fake clock."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig

REPO = Path(__file__).resolve().parents[2]
DEMO_POLICY = REPO / "config" / "policy.yaml"
EXAMPLE_POLICY = REPO / "config" / "policy.example.yaml"


@dataclass
class FakeClock:
    """Epoch seconds that only move when a test says so."""

    now: float = 1_000_000.0

    def advance(self, seconds: float) -> float:
        """Move time forward and return the new ``now``."""
        self.now += seconds
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    """A fresh fake clock per test."""
    return FakeClock()


@pytest.fixture(scope="session")
def demo_policy() -> PolicyConfig:
    """The simulator demo policy, loaded once with an empty environment."""
    return load_policy(DEMO_POLICY, env={})
