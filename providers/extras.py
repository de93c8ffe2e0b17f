"""Optional libraries the cloud routes need, imported lazily with a clear install hint.

The core install stays small: ``botocore`` (Bedrock: SigV4 and the event-stream parser),
``google-auth`` (Vertex AI OAuth tokens) and ``azure-identity`` (Entra ID tokens) are
extras. An adapter asks :func:`require` for a module at call time; when it is missing
the caller gets a :class:`MissingExtraError` naming the extra to install, which the
adapter turns into an ``AuthError`` for that route. :func:`missing_extras` lets
``failover config check`` warn about it before a worker ever starts.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from types import ModuleType

from agent_failover.resilience.config import PolicyConfig, PolicyError
from agent_failover.resilience.endpoint import AuthMethod, EndpointConfig, ProviderKind
from agent_failover.resilience.setup_errors import MissingExtra

#: module → (extra, what needs it)
BOTOCORE = ("botocore", "bedrock")
GOOGLE_AUTH = ("google.auth", "vertex")
GOOGLE_AUTH_REQUESTS = ("google.auth.transport.requests", "vertex")
AZURE_IDENTITY = ("azure.identity", "azure")


class MissingExtraError(MissingExtra, ImportError):
    """An optional dependency is not installed; the message says which extra brings it
    (a :class:`~agent_failover.resilience.setup_errors.SetupError` too)."""

    def __init__(self, module: str, extra: str, feature: str) -> None:
        self.module = module
        self.extra = extra
        self.feature = feature
        super().__init__(
            f"{feature} needs the Python package {module.split('.')[0]!r}, which is not "
            f"installed: pip install 'agent-failover[{extra}]'"
        )


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(module, extra, feature) from exc


def require_installed(feature: str, extra: str, modules: Sequence[str]) -> None:
    """Raise :class:`MissingExtraError` for the first of ``modules`` not installed (checked
    without importing them), naming ``extra``; a command calls it before its imports."""
    for module in modules:
        if not _installed(module):
            raise MissingExtraError(module, extra, feature)


def needed_modules(endpoint: EndpointConfig) -> list[tuple[str, str, str, str]]:
    """``(field, module, extra, feature)`` for every optional module ``endpoint`` uses."""
    needs: list[tuple[str, str, str, str]] = []
    if endpoint.provider is ProviderKind.BEDROCK:
        needs.append(("provider", *BOTOCORE, "the Bedrock event-stream parser"))
    if endpoint.auth is AuthMethod.AWS_SIGV4:
        needs.append(("auth", *BOTOCORE, "AWS SigV4 signing"))
    if endpoint.auth is AuthMethod.GOOGLE_OAUTH:
        needs.append(("auth", *GOOGLE_AUTH_REQUESTS, "Google OAuth tokens"))
    if endpoint.auth is AuthMethod.ENTRA_ID:
        needs.append(("auth", *AZURE_IDENTITY, "Entra ID tokens"))
    return needs


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package raises instead
        return False


def missing_extras(endpoint: EndpointConfig) -> list[tuple[str, str]]:
    """``(field, message)`` for each optional module ``endpoint`` needs and cannot import."""
    out: list[tuple[str, str]] = []
    for field, module, extra, feature in needed_modules(endpoint):
        if not _installed(module):
            out.append((field, str(MissingExtraError(module, extra, feature))))
    return list(dict.fromkeys(out))


def without_missing_extras(policy: PolicyConfig) -> tuple[PolicyConfig, list[str]]:
    """``policy`` without the routes whose optional modules are not installed (taken out of
    ``endpoints`` and every roster), and one line per route left out saying why and what
    to install. For local stacks (``failover dev`` / ``demo``): a route that could never
    answer would hold its breaker open forever. A policy that would not validate without
    them (a roster left with no primary) is returned unchanged, with the same lines."""
    missing = {name: missing_extras(ep) for name, ep in policy.endpoints.items()}
    missing = {name: problems for name, problems in missing.items() if problems}
    if not missing:
        return policy, []
    notes = [f"{name}: {problems[0][1]}" for name, problems in sorted(missing.items())]
    data = policy.model_dump(mode="python", by_alias=True, exclude_unset=True)
    for name in missing:
        data["endpoints"].pop(name, None)
    for role in data.get("roles", {}).values():
        roster = role.get("roster", {})
        for tier in ("tier0", "tier1", "tier2"):
            if tier in roster:
                roster[tier] = [r for r in roster[tier] if r not in missing]
    try:
        return type(policy).model_validate(data), notes
    except (ValueError, PolicyError):
        return policy, notes
