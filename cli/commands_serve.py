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


@commands.command("worker")
def worker() -> None:
    """Run a worker (same as `python worker.py`); configured by environment variables."""
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
