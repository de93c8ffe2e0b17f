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
