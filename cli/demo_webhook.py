"""The demo's on-call pager: a local webhook receiver the demo's worker notifies.

:func:`on_call_receiver` starts a :class:`WebhookReceiver` on a free port of 127.0.0.1 with
a fresh secret and points the in-process worker at it through the same environment
variables a deployed worker reads (``FAILOVER_ESCALATION_WEBHOOK_URL``, ``..._SECRET``,
``TEMPORAL_UI_URL``), restoring them afterwards. Each notification is printed as it
arrives; :meth:`OnCall.check` prints the tally and says whether every escalation's
opened and resolved notifications arrived with a valid signature.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from rich.console import Console

from agent_failover.activities.notify import UI_URL_ENV, WEBHOOK_SECRET_ENV, WEBHOOK_URL_ENV
from agent_failover.cli.devstack import DevStack, _set_env
from agent_failover.resilience.notify import OPENED, RESOLVED
from agent_failover.testing.webhook_receiver import Received, WebhookReceiver


@dataclass
class OnCall:
    receiver: WebhookReceiver

    def check(self, console: Console) -> bool:
        """Print what on-call received; True when every escalation was paged and closed."""
        got = self.receiver.received
        opened = {(r.payload or {}).get("workflow_id") for r in self.receiver.accepted(OPENED)}
        resolved = {(r.payload or {}).get("workflow_id") for r in self.receiver.accepted(RESOLVED)}
        bad = [r for r in got if r.verified is not True or r.status >= 300]
        ok = bool(opened) and opened <= resolved and not bad
        console.print(
            f"on-call webhook {self.receiver.url} received {len(got)} notification(s): "
            f"{len(opened)} escalation(s) opened, {len(resolved)} resolved, "
            + ("every signature verified" if not bad else f"[red]{len(bad)} refused[/]")
            + ("" if ok else " [red](an escalation was not paged or not closed)[/]")
        )
        return ok


def _print(console: Console, r: Received) -> None:
    p = r.payload or {}
    what = p.get("reason") if r.event == OPENED else f"decision {p.get('outcome')}"
    check = "signature verified" if r.verified else f"[red]refused: {r.error}[/]"
    console.print(
        f"    [cyan]on-call webhook[/] got {r.event} for {p.get('workflow_id')}: {what} ({check})",
        highlight=False,
    )


@asynccontextmanager
async def on_call_receiver(stack: DevStack, console: Console) -> AsyncIterator[OnCall]:
    """A signed local webhook the stack's worker notifies, for the body of the block."""
    secret = secrets.token_hex(16)
    receiver = WebhookReceiver(secret, on_receive=lambda r: _print(console, r))
    url = await receiver.start("127.0.0.1", 0)
    settings = {WEBHOOK_URL_ENV: url, WEBHOOK_SECRET_ENV: secret, UI_URL_ENV: stack.ui}
    saved = {name: _set_env(name, value) for name, value in settings.items()}
    try:
        yield OnCall(receiver)
    finally:
        for name, value in saved.items():
            _set_env(name, value)
        await receiver.stop()
