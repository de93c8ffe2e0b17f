"""Errors a workflow can raise or catch when it calls ``resilient_complete``.

They are ``ApplicationError`` subclasses on purpose: an exception that is not a Temporal
failure would fail the *workflow task* and retry it forever; these fail the call (and,
uncaught, the workflow) with a type the Temporal UI shows and a caller can match.
"""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError

#: ApplicationError type of :class:`FailoverExhausted`.
FAILOVER_EXHAUSTED = "failover_exhausted"


class FailoverExhausted(ApplicationError):
    """Every live tier of a call failed and the caller asked to be told (``on_exhausted``).

    ``attempts`` is the failover history (the same records an ``AgentOutput`` carries);
    ``reason_codes`` what was learned on the way (``MODEL_UNAVAILABLE``, ``RATE_LIMITED``...).
    """

    def __init__(self, role: str, attempts: list[Any], reason_codes: list[str]) -> None:
        tried = ", ".join(f"{a.route}: {a.outcome}" for a in attempts if a.outcome != "skipped")
        super().__init__(
            f"role {role!r}: every live route failed ({tried or 'none could be tried'})",
            {
                "role": role,
                "attempts": [a.model_dump(mode="json") for a in attempts],
                "reason_codes": [str(c) for c in reason_codes],
            },
            type=FAILOVER_EXHAUSTED,
            non_retryable=True,
        )
        self.role = role
        self.attempts = list(attempts)
        self.reason_codes = list(reason_codes)
