"""Session-wide fixtures shared by the workflow and chaos tiers: one simulator, one dev
server, one time-skipping server per test session; the simulator is reset between tests.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import shutil
import tempfile

# Cloud credential chains must never look for an instance metadata server from a test
# (the chains would try 169.254.169.254): read once at import by botocore / google-auth.
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
os.environ.setdefault("NO_GCE_CHECK", "true")
# Workers without a Redis policy store keep policy versions in a directory: a private one,
# not the user's ~/.local/state (tests must not leave state behind).
if "FAILOVER_POLICY_DIR" not in os.environ:
    os.environ["FAILOVER_POLICY_DIR"] = tempfile.mkdtemp(prefix="failover-test-policies-")
    atexit.register(shutil.rmtree, os.environ["FAILOVER_POLICY_DIR"], ignore_errors=True)
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig
from agent_failover.testing.servers import start_dev_server, start_time_skipping
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import RunningSimulator, start_simulator
from tests.workflows.helpers import with_test_roles

#: Test processes per core for ``-n auto``. The suite mostly waits (on real dev servers,
#: on child processes starting, on scenario timelines): measured on 2 cores, one process
#: per core left them half idle (9 min 47 s, CPU 10.5 min), two per core kept both busy
#: (7 min 21 s) with no test losing its margins.
PROCESSES_PER_CORE = 2
#: More processes than this only add dev servers and memory, not speed.
MAX_PROCESSES = 8


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the suite's default): two test processes per core, at most eight."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_PROCESSES, PROCESSES_PER_CORE * (cores or 1)))


@pytest.fixture(autouse=True)
def _collect_garbage_before_workers() -> None:
    """Finalize the previous tests' garbage before a test (which may build workers).

    On Python 3.10/3.11 a finalizer that imports (a never-awaited coroutine's warning) can
    run inside the workflow sandbox's module lock and fail validation with ``KeyError:
    <thread id>`` (temporalio/sdk-python#585, fix pending in #1833). Collecting first keeps
    such finalizers out of the sandbox's imports.

    A full collection walks every tracked object (about a million once the SDK, the
    simulator and the official clients are loaded): half a second per test, which was half
    of the workflow tier's CPU. So what survives a collection is frozen (``gc.freeze``) and
    the next collection walks only what has been allocated since: the garbage the previous
    test left is still finalized here, and a collection before a unit test costs little.
    """
    gc.collect()
    gc.freeze()


#: Loggers whose level an in-process CLI command sets (``failover`` quiets the SDK's
#: workflow and activity loggers): restored after every test, so no test depends on order.
_LEVELLED_LOGGERS = ("", "temporalio.workflow", "temporalio.activity", "agent_failover")


@pytest.fixture(autouse=True)
def _restore_logger_levels() -> Iterator[None]:
    """Put back the levels of the loggers a CLI invocation changes."""
    levels = {name: logging.getLogger(name).level for name in _LEVELLED_LOGGERS}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest_asyncio.fixture(scope="session")
async def simulator() -> AsyncIterator[RunningSimulator]:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    yield sim
    await sim.stop()


@pytest_asyncio.fixture
async def sim_admin(simulator: RunningSimulator) -> AsyncIterator[SimAdmin]:
    """Admin client; the simulator is reset (faults and attempt log) before each test."""
    admin = SimAdmin(simulator.url)
    await admin.reset()
    yield admin
    await admin.reset()
    await admin.aclose()


@pytest_asyncio.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server(ui=False)
    yield env
    await env.shutdown()


@pytest_asyncio.fixture
async def ts_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping test server of the test's own (it starts in about 0.1 s).

    Never shared: a workflow an earlier test left running (a monitor, a paused pipeline)
    would hold the server's clock at its next workflow task, and this test's
    ``env.sleep`` would wait out the RPC timeout instead of skipping.
    """
    env = await start_time_skipping()
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
def session_demo_policy(simulator: RunningSimulator) -> PolicyConfig:
    """The demo policy pointed at this session's simulator, parsed once per session
    (parsing and validating the file takes 0.1 s; hundreds of tests ask for it)."""
    return load_policy(DEFAULT_POLICY_PATH, env={**os.environ, "SIM_URL": simulator.url})


@pytest.fixture
def policy(session_demo_policy: PolicyConfig) -> PolicyConfig:
    """The demo policy pointed at this session's simulator, plus two test roles.

    ``plain`` is the analyst without hedging (one route at a time, so conduct is exact);
    ``hedged`` hedges after 200 ms; ``tight-sla`` is ``plain`` with a 250/400 ms p95/p99 SLA.
    A deep copy: a test that changes its policy changes only its own.
    """
    return with_test_roles(session_demo_policy.model_copy(deep=True))
