"""The root of the errors a user fixes by changing how agent-failover is set up.

Every error raised while a worker or client is being set up (a bad policy file, a
namespace without the failover search attributes, an unreachable Temporal or Redis, a
missing extra) derives from :class:`SetupError`, so user code can catch them all in one
place. Each message is one line that says what is wrong and what to do; the tree::

    SetupError
    ├── PolicyError                 the policy file or object is invalid (file, field, fix)
    ├── SearchAttributesMissing     the namespace lacks the failover search attributes
    ├── TemporalUnreachable         no Temporal server answers at the address
    ├── RedisUnreachable            an explicitly set Redis does not answer
    └── MissingExtra                a command needs an optional dependency (pip command)

Provider call failures are not here: they are :class:`~agent_failover.resilience.errors.
ProviderError`, classified at the provider boundary.
"""

from __future__ import annotations


class SetupError(Exception):
    """Something about the setup is wrong; the message says what and how to fix it."""


class SearchAttributesMissing(SetupError):
    """The Temporal namespace lacks some failover search attributes (``missing`` names
    them; the message gives the exact ``temporal operator search-attribute create``)."""

    def __init__(self, message: str, missing: list[str]) -> None:
        super().__init__(message)
        self.missing = missing


class TemporalUnreachable(SetupError, RuntimeError):
    """No Temporal server answered at the address (a ``RuntimeError`` too, as the SDK's
    own connection error is)."""


class RedisUnreachable(SetupError):
    """The Redis the worker was told to use (``REDIS_URL`` / ``redis_url``) does not answer."""


class MissingExtra(SetupError):
    """An optional dependency is not installed; the message names the ``pip install``."""
