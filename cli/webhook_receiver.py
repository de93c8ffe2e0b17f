"""``failover webhook-receiver``: a local on-call webhook for trying escalation notifications.

It runs the test helpers' :class:`~agent_failover.testing.webhook_receiver.WebhookReceiver`
(the ``[sim]`` extra) until Ctrl-C or SIGTERM, printing one line per notification with its
signature check against ``FAILOVER_ESCALATION_WEBHOOK_SECRET``. A dev tool: the command
imports this module only when it runs.
"""

from __future__ import annotations

import asyncio

from agent_failover.cli.errors import CliError


def received_line(r) -> str:
    """One line per notification: event, run, what it says, and the signature check."""
    p = r.payload or {}
    check = {None: "unsigned", True: "signature ok", False: f"REFUSED: {r.error}"}[r.verified]
    if r.status >= 300 and r.verified is not False:
        check = f"answered {r.status}: {r.error}"
    what = p.get("reason", "") if p.get("event") == "escalation.opened" else p.get("outcome", "")
    return f"{r.event} {p.get('workflow_id', '?')} round {p.get('round', '?')}: {what} ({check})"


async def serve_receiver(console, host: str, port: int, path: str) -> None:
    """Run :class:`WebhookReceiver` until Ctrl-C or SIGTERM, printing what arrives."""
    import os

    from agent_failover.activities.notify import WEBHOOK_SECRET_ENV, WEBHOOK_URL_ENV
    from agent_failover.cli.lifecycle import until_signalled

    try:
        from agent_failover.testing.webhook_receiver import WebhookReceiver
    except ImportError:
        raise CliError("the receiver needs aiohttp: pip install 'agent-failover[sim]'") from None
    secret = os.environ.get(WEBHOOK_SECRET_ENV) or None
    receiver = WebhookReceiver(
        secret, path=path, on_receive=lambda r: console.print(received_line(r), markup=False)
    )
    url = await receiver.start(host, port)
    console.print(
        f"receiving escalation notifications at {url} "
        f"({'checking signatures' if secret else f'unsigned: {WEBHOOK_SECRET_ENV} is not set'})"
        f"; point workers at it with {WEBHOOK_URL_ENV}={url} · Ctrl-C to stop",
        highlight=False,
    )
    try:
        await until_signalled(asyncio.Event().wait())
    finally:
        await receiver.stop()
