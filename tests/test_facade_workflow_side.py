"""Workflow-side names load without worker-side code.

A workflow file imports ``resilient_complete`` and the request and result types; that
must not pull in what only a worker runs: the provider adapters and their HTTP client, the
Redis stores, the OpenTelemetry SDK, the policy file loader, the plugin. Checked as the
set of modules a fresh interpreter loaded (a test of the module set, not of time:
``bench/import_cost.py`` measures the time).
"""

from __future__ import annotations

import json
import subprocess
import sys

import agent_failover

#: The names workflow code uses (the call, its options and errors, request/result types).
WORKFLOW_SIDE = sorted(
    name
    for name, module in agent_failover._EXPORTS.items()
    if module.startswith(("agent_failover.workflows.", "agent_failover.resilience."))
    and name not in ("load_policy",)
)
#: Worker-side modules (and packages) none of which a workflow-side import may load.
WORKER_SIDE = (
    # the provider adapters and their HTTP client (``providers.validate``, the pure
    # parsing and schema checks the escalation reads, may load; its jsonschema may not)
    "agent_failover.providers.client",
    "agent_failover.providers.registry",
    "agent_failover.providers.base",
    "agent_failover.providers.pipeline",
    "agent_failover.providers.anthropic",
    "agent_failover.providers.openai",
    "agent_failover.stores.redis_link",
    "agent_failover.stores.cache",
    "agent_failover.stores.health",
    "agent_failover.plugin",
    "agent_failover.supervisor",
    "agent_failover.service",
    "agent_failover.config.loader",
    "agent_failover.activities.policy_versions",
    "agent_failover.telemetry.setup",
    "httpx",
    "httpcore",
    "redis",
    "hiredis",
    "cryptography",
    "opentelemetry.sdk",
    "temporalio.client",
    "temporalio.contrib.opentelemetry",
    "jsonschema",
    "yaml",
    "rich",
    "click",
    "typer",
    "aiohttp",
)


#: What a workflow file imports (``bench/import_cost.py``'s workflow side).
WORKFLOW_FILE = (
    "from agent_failover import resilient_complete, ChatRequest, Message, AgentOutput, CallOptions"
)
#: Loaded only once a call runs (or a worker starts), never by :data:`WORKFLOW_FILE`: the
#: call's loop, the policy's model graph and the activities the loop schedules.
RUN_TIME_ONLY = (
    "agent_failover.workflows.resilient_loop",
    "agent_failover.resilience.config",
    "agent_failover.activities",
)


def _loaded_by(statement: str) -> set[str]:
    code = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return set(json.loads(out))


def _worker_side(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == w or m.startswith(w + ".") for w in WORKER_SIDE))


def test_workflow_side_names_load_no_worker_side_module() -> None:
    assert {"resilient_complete", "ChatRequest", "AgentOutput", "CallOptions"} <= set(WORKFLOW_SIDE)
    loaded = _loaded_by(f"from agent_failover import {', '.join(WORKFLOW_SIDE)}")
    assert "agent_failover.workflows.resilient" in loaded
    assert _worker_side(loaded) == []


def test_the_worker_side_check_sees_worker_code() -> None:
    """The same check on the plugin finds what it must (so it can fail)."""
    found = _worker_side(_loaded_by("from agent_failover import FailoverPlugin"))
    for expected in ("httpx", "redis", "agent_failover.plugin", "agent_failover.providers.client"):
        assert expected in found


def test_a_worker_loads_the_loop_up_front() -> None:
    """The plugin loads ``workflows.resilient_loop`` (and so the policy graph and the
    activities) before any workflow task: a first call never imports it during one."""
    loaded = _loaded_by("from agent_failover import FailoverPlugin")
    assert set(RUN_TIME_ONLY) <= loaded


def _under(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_a_workflow_file_loads_neither_the_loop_nor_the_policy_graph() -> None:
    """``resilient_complete`` and the request/result types load no policy model, no
    activity and not the call's loop (``workflows.resilient_loop``, loaded on the first
    call): importing a workflow file costs little more than Temporal and pydantic do."""
    loaded = _loaded_by(WORKFLOW_FILE)
    assert "agent_failover.resilience.models" in loaded
    assert _under(loaded, RUN_TIME_ONLY) == []


def test_the_request_and_result_models_build_on_first_use() -> None:
    """Every pydantic model a workflow file's import defines defers its schema build
    (``defer_build=True``) to first use: building them is most of what importing them
    would cost. A new model on this path needs ``defer_build=True`` too."""
    code = (
        f"import json, sys; {WORKFLOW_FILE}\n"
        "from pydantic import BaseModel\n"
        "def subs(c):\n"
        "    for s in c.__subclasses__():\n"
        "        yield s\n"
        "        yield from subs(s)\n"
        "built = sorted({f'{c.__module__}.{c.__qualname__}' for c in subs(BaseModel)\n"
        "    if c.__module__.startswith('agent_failover') and c.__pydantic_complete__})\n"
        "ok = ChatRequest(messages=[Message(role='user', content='hi')])\n"
        "print(json.dumps([built, ChatRequest.__pydantic_complete__]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    built_at_import, built_after_use = json.loads(out)
    assert built_at_import == []
    assert built_after_use is True
