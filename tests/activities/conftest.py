"""Fixtures shared with the store tests (a real Redis, or an embedded one, and a key
namespace), and a fresh policy registry for every test."""

from collections.abc import Iterator

import pytest

from agent_failover.activities.policy_registry import POLICY_REGISTRY
from tests.stores.conftest import (  # noqa: F401  (fixtures re-exported)
    embedded_redis,
    namespace,
    redis_url,
)


@pytest.fixture(autouse=True)
def fresh_policy_registry() -> Iterator[None]:
    """Each test sees the policy registry of a fresh process, and leaves none behind."""
    POLICY_REGISTRY.reset()
    yield
    POLICY_REGISTRY.reset()
