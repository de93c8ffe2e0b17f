"""Fixtures for workflow tests: a fresh worker (uuid task queue, uuid store namespace) per
test on the session's dev server and simulator (see ``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig
from agent_failover.testing.harness import (  # noqa: F401  (fixtures and tests use them)
    Harness,
    build_harness,
    make_harness,
    running,
)
from agent_failover.testing.sim.admin import SimAdmin


@pytest_asyncio.fixture
async def harness(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    """A running worker on the dev server with in-memory stores, for one test."""
    h, workers = await make_harness(dev_env.client, policy)
    async with running(workers):
        yield h
