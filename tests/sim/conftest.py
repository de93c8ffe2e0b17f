"""Fixtures for the simulator tests: one real-socket simulator per session, reset per test.

``sim`` is the wall-clock simulator on a free loopback port; ``fake_sim`` runs on a
``FakeClock`` so latency, pacing and timeline behaviour are checked without waiting.
Both are reset before every test that uses them, so faults never leak between tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from agent_failover.testing.sim.clock import FakeClock
from agent_failover.testing.sim.config import load_sim_config
from agent_failover.testing.sim.server import RunningSimulator, start_simulator


@pytest.fixture(scope="session")
async def _sim_server() -> AsyncIterator[RunningSimulator]:
    server = await start_simulator()
    yield server
    await server.stop()


@pytest.fixture(scope="session")
async def _fake_sim_server() -> AsyncIterator[RunningSimulator]:
    server = await start_simulator(clock=FakeClock())
    yield server
    await server.stop()


@pytest.fixture(scope="session")
async def _auth_sim_server() -> AsyncIterator[RunningSimulator]:
    config = load_sim_config().model_copy(update={"require_auth": True})
    server = await start_simulator(config=config)
    yield server
    await server.stop()


@pytest.fixture
def auth_sim(_auth_sim_server: RunningSimulator) -> RunningSimulator:
    """A wall-clock simulator that refuses requests without credentials (reset)."""
    _auth_sim_server.state.reset()
    return _auth_sim_server


@pytest.fixture
def sim(_sim_server: RunningSimulator) -> RunningSimulator:
    """The wall-clock simulator, with no faults and an empty attempts log."""
    _sim_server.state.reset()
    return _sim_server


@pytest.fixture
def fake_sim(_fake_sim_server: RunningSimulator) -> RunningSimulator:
    """The fake-clock simulator, reset, with its clock's sleep record cleared."""
    _fake_sim_server.state.reset()
    clock = _fake_sim_server.state.clock
    assert isinstance(clock, FakeClock)
    clock.slept.clear()
    return _fake_sim_server


@pytest.fixture(scope="session")
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """A plain httpx client with a short timeout (a hung test fails fast)."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0)) as client:
        yield client
