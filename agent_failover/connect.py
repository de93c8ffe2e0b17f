"""Connecting to Temporal the way Temporal's own tools do: ``temporalio.envconfig``.

The address, namespace, TLS material and API key come from a profile in the Temporal
config file (``TEMPORAL_CONFIG_FILE``, default ``~/.config/temporalio/temporal.toml``) and
the standard environment variables (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``, ``TEMPORAL_PROFILE``), so the worker and the CLI
reach Temporal Cloud or a TLS cluster with the same settings as the ``temporal`` CLI.
Explicit arguments win over both. The client always uses the pydantic data converter,
with the AES-GCM payload codec when ``FAILOVER_CODEC_KEYS`` is set (see
:mod:`agent_failover.codec`), so the CLI and user code read and write encrypted history.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, NoReturn

from temporalio.client import Client, Plugin
from temporalio.converter import PayloadCodec
from temporalio.envconfig import ClientConfig

from agent_failover.codec import AesGcmCodec, codec_from_env, failover_data_converter
from agent_failover.report_errors import exit_now, install_hook, report
from agent_failover.resilience.setup_errors import SetupError, TemporalUnreachable
from agent_failover.telemetry.setup import tracing_enabled

#: Where ``failover dev`` serves Temporal; used when no profile or variable names one.
DEFAULT_TEMPORAL_ADDRESS = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"


def connect_config(
    address: str | None = None,
    namespace: str | None = None,
    *,
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The keyword arguments for ``Client.connect``: profile + environment + overrides."""
    environ = os.environ if env is None else env
    cfg: dict[str, Any] = dict(
        ClientConfig.load_client_connect_config(
            profile=profile or environ.get("TEMPORAL_PROFILE"),
            override_env_vars=dict(environ),
        )
    )
    cfg.setdefault("target_host", DEFAULT_TEMPORAL_ADDRESS)
    cfg.setdefault("namespace", DEFAULT_NAMESPACE)
    if address:
        cfg["target_host"] = address
    if namespace:
        cfg["namespace"] = namespace
    return cfg


async def connect_client(
    address: str | None = None,
    namespace: str | None = None,
    *,
    profile: str | None = None,
    plugins: Sequence[Plugin] = (),
    env: Mapping[str, str] | None = None,
    codec: PayloadCodec | bool | None = None,
) -> Client:
    """A Temporal client with the pydantic data converter (see the module doc for sources).

    ``codec``: None (the environment's codec, if ``FAILOVER_CODEC_KEYS`` is set), True
    (the environment's, an error if unset), False (none), or a ``PayloadCodec``.
    """
    cfg = connect_config(address, namespace, profile=profile, env=env)
    if codec is None:
        codec = codec_from_env(env)
    elif codec is True:
        codec = AesGcmCodec.from_env(env)
    converter = failover_data_converter(codec or None)
    install_hook()
    try:
        return await Client.connect(
            **cfg,
            data_converter=converter,
            plugins=list(plugins),
            interceptors=tracing_interceptors(),
        )
    except RuntimeError as exc:
        if "connect" not in str(exc).lower():
            raise
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TemporalUnreachable(
            f"cannot reach Temporal at {cfg['target_host']} (namespace {cfg['namespace']}): "
            f"{reason}; start one with `failover dev`, or set TEMPORAL_ADDRESS (or a "
            "TEMPORAL_PROFILE) to your cluster"
        ) from exc


def tracing_interceptors() -> list[Any]:
    """Temporal's tracing interceptor when tracing is on (a replay-safe tracer provider is
    installed, see :mod:`agent_failover.telemetry.setup`): workflow starts, signals and
    queries join the trace, and the client's workers trace without another interceptor."""
    if not tracing_enabled():
        return []
    from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor

    return [OpenTelemetryInterceptor(add_temporal_spans=True)]


def run_and_exit(main: Coroutine[Any, Any, object] | Callable[[], object]) -> NoReturn:
    """Run a Temporal client process's ``main`` to its end, then exit without finalizing.

    A process that used a Temporal client or worker can abort while the interpreter
    finalizes (temporalio/sdk-python#300: the core's native threads call back into Python
    after teardown began): exit 134 and ``Fatal Python error: PyGILState_Release`` on
    stderr although the work succeeded. This runs ``main`` (a coroutine through
    ``asyncio.run``, or a plain callable such as a Typer app), flushes logging and the
    standard streams, and leaves with ``os._exit`` and the code Python would have used:
    0; ``SystemExit``'s code (a message is printed to stderr, code 1); 130 on Ctrl-C; 1,
    with the traceback, on any other exception; a set-up error (``SetupError``: a bad
    policy, Temporal or Redis unreachable...) prints one line, ``error: ...``, and exits 2
    for a policy, 1 otherwise (its traceback only with ``-v`` or logging at DEBUG). Use
    it as a starter script's last line::

        if __name__ == "__main__":
            run_and_exit(main(sys.argv[1]))
    """
    code = 0
    try:
        if inspect.iscoroutine(main):
            asyncio.run(main)
        else:
            main()  # type: ignore[operator]
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:
        code = 130
    except SetupError as exc:
        code = report(exc)
    except BaseException:
        traceback.print_exc()
        code = 1
    exit_now(code)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1
