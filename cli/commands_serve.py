"""The long-running processes of a deployment: ``worker`` and ``codec-server``.

``worker`` is ``python worker.py`` (:mod:`agent_failover.service`); ``codec-server``
decrypts payloads for the Temporal UI and CLI (:mod:`agent_failover.cli.codec_server`).
Neither loads the dev stack or the test helpers. :mod:`agent_failover.cli.main` registers
them on the app.
"""

from __future__ import annotations

from typing import Annotated

import typer

from agent_failover.cli.shared import err

#: This module's commands; main lists them in the app's help order.
commands = typer.Typer()

#: What ``failover worker`` reads from the environment (its ``--help`` lists them).
WORKER_ENVIRONMENT = (
    ("FAILOVER_POLICY", "the policy file (required)"),
    ("FAILOVER_TASK_QUEUE", "the task queue (default agent-failover); the CLI reads it too"),
    ("TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_PROFILE",
     "Temporal, as the temporal CLI reads them (default 127.0.0.1:7233, namespace default)"),
    ("REDIS_URL", "the shared health store (default redis://127.0.0.1:6379/0)"),
    ("FAILOVER_REDIS_NAMESPACE", "prefix of every Redis key (default failover)"),
    ("FAILOVER_REDIS_UNREACHABLE", "refuse (default) or degraded: start with worker-local state"),
    ("FAILOVER_WORKER_ROLE", "all (default), main, shadow, bulkhead:NAME, or a comma list"),
    ("FAILOVER_DISPATCH", "eager or queue: where model calls run"),
    ("FAILOVER_SHUTDOWN_GRACE_S", "seconds in-flight activities get after SIGTERM (default 30)"),
    ("FAILOVER_CODEC_KEYS", "turn on the AES-GCM payload codec"),
    ("FAILOVER_ESCALATION_WEBHOOK_URL, FAILOVER_ESCALATION_WEBHOOK_SECRET", "on-call webhook"),
    ("OTEL_*, FAILOVER_METRICS_PORT, FAILOVER_METRICS_HOST", "traces and metrics export"),
    ("LOG_LEVEL", "INFO (default) or DEBUG"),
)  # fmt: skip


def _worker_epilog() -> str:
    lines = "\n".join(f"  {name}: {meaning}" for name, meaning in WORKER_ENVIRONMENT)
    return f"Environment variables it reads:\n\n{lines}"


@commands.command("worker", epilog=_worker_epilog())
def worker() -> None:
    """Run a worker (same as `python worker.py`), configured by environment variables.

    Those below; provider API keys from the variables the policy names."""
    from agent_failover.service import run as run_worker

    run_worker()


@commands.command("codec-server")
def codec_server(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 = any free port).")] = 8081,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="Temporal UI origin allowed to call it (repeatable; default "
            "FAILOVER_CODEC_CORS_ORIGINS, else localhost:8080 and :8233)."
        ),
    ] = None,
) -> None:
    """Decrypt payloads for the Temporal UI and CLI (keys: FAILOVER_CODEC_KEYS; bearer token:
    FAILOVER_CODEC_SERVER_TOKEN)."""
    from agent_failover.codec import AesGcmCodec, CodecConfigError

    try:
        codec = AesGcmCodec.from_env()
    except CodecConfigError as exc:
        err.print(f"[red]cannot start the codec server[/]: {exc}")
        raise typer.Exit(2) from exc
    from agent_failover.cli.codec_server import CodecServerSettings, serve

    serve(codec, CodecServerSettings.from_env(cors_origin), host=host, port=port)
