"""The failover search attributes on a namespace: the keys, the check, the registration.

``FailoverCount``, ``WorstTier``, ``Degraded``, ``EscalationState`` and ``RevisionState``
must exist on a namespace before a workflow upserts them: an upsert of an unknown
attribute fails the workflow task, again at every retry. :func:`ensure_search_attributes`
is what :class:`~agent_failover.FailoverPlugin` runs when its worker starts: it lists the
namespace's attributes and registers the missing ones, refuses to start with the exact
``temporal operator search-attribute create`` command, or (``"warn"``) starts and notes
the namespace as lacking them (:func:`known_missing`), so that
``upsert_failover_search_attributes`` skips its upserts there instead of failing tasks.

This module is passed through the workflow sandbox (as all of ``activities``), so the
note a worker makes at start is the one its workflow code reads.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING, Any, Literal

from temporalio.common import SearchAttributeKey

from agent_failover.resilience.setup_errors import SearchAttributesMissing

if TYPE_CHECKING:
    from temporalio.client import Client

log = logging.getLogger("agent_failover.worker")

FAILOVER_COUNT = SearchAttributeKey.for_int("FailoverCount")
WORST_TIER = SearchAttributeKey.for_int("WorstTier")
DEGRADED = SearchAttributeKey.for_bool("Degraded")
ESCALATION_STATE = SearchAttributeKey.for_keyword("EscalationState")
#: Degraded re-runs of the run (``pending`` while waiting for a primary, then the worst
#: outcome: ``escalated``, ``revised``, ``failed`` or ``expired``); unset without re-runs.
REVISION_STATE = SearchAttributeKey.for_keyword("RevisionState")
#: Every key, for registering them on a namespace or a dev server.
SEARCH_ATTRIBUTES = (FAILOVER_COUNT, WORST_TIER, DEGRADED, ESCALATION_STATE, REVISION_STATE)

#: What a worker does when its namespace lacks the attributes: add them, refuse to start,
#: or start and skip the upserts (None: ``register`` on a loopback server, else ``require``).
SearchAttributeMode = Literal["register", "require", "warn"]
MODES: tuple[str, ...] = ("register", "require", "warn")

#: Namespaces a worker of this process found lacking the attributes (mode ``warn``).
_missing: set[str] = set()
#: Namespaces whose skipped upserts were already logged (one warning per namespace).
_warned: set[str] = set()


def search_attribute_types() -> dict[str, Any]:
    """Name -> indexed value type of every attribute, as the operator service takes them."""
    return {k.name: k._indexed_value_type for k in SEARCH_ATTRIBUTES}


def create_command(namespace: str, address: str, missing: list[str]) -> str:
    """The ``temporal`` CLI command that creates ``missing`` on ``namespace`` (one
    ``create`` per type: the CLI takes several ``--name`` but one ``--type``)."""
    by_type: dict[str, list[str]] = {}
    for key in SEARCH_ATTRIBUTES:
        if key.name in missing:
            by_type.setdefault(key._metadata_type, []).append(key.name)
    return " && ".join(
        f"temporal operator search-attribute create --address {address} "
        f"--namespace {namespace} " + " ".join(f"--name {n}" for n in names) + f" --type {kind}"
        for kind, names in by_type.items()
    )


def is_local(client: Client) -> bool:
    """Whether the client talks to a server on this machine (a local dev server)."""
    host = client.service_client.config.target_host.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def missing_search_attributes(client: Client) -> list[str]:
    """The failover attributes the client's namespace does not have (sorted)."""
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    present = set(listed.custom_attributes)
    return sorted(k.name for k in SEARCH_ATTRIBUTES if k.name not in present)


async def register_search_attributes(client: Client) -> list[str]:
    """Add the attributes to the client's namespace; returns the names it had to add.

    Idempotent: attributes already present are left alone. Needs operator rights (the
    dev server grants them; on Temporal Cloud create them in the UI or with tcld).
    """
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest

    missing = await missing_search_attributes(client)
    if missing:
        types = search_attribute_types()
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=client.namespace,
                search_attributes={n: types[n] for n in missing},
            )
        )
    return missing


async def ensure_search_attributes(client: Client, mode: SearchAttributeMode | None) -> bool | None:
    """Check the client's namespace at worker start; True when the attributes are there
    (or were registered now), False when missing and ``mode`` is ``warn``, None when the
    server cannot list them (the time-skipping test server, a restricted role).

    Raises :class:`SearchAttributesMissing` (mode ``require``) with the command to run.
    """
    if mode is not None and mode not in MODES:
        raise ValueError(f"search_attributes must be one of {', '.join(MODES)}; got {mode!r}")
    mode = mode or ("register" if is_local(client) else "require")
    from temporalio.service import RPCError, RPCStatusCode  # worker side

    namespace = client.namespace
    try:
        missing = await missing_search_attributes(client)
    except RPCError as exc:
        if exc.status not in (RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.PERMISSION_DENIED):
            raise
        log.info("search attributes of namespace %r not checked: %s", namespace, exc.message)
        return None
    if missing and mode == "register":
        added = await register_search_attributes(client)
        log.info("registered search attributes %s on namespace %r", ", ".join(added), namespace)
        missing = []
    if not missing:
        _missing.discard(namespace)
        return True
    command = create_command(namespace, client.service_client.config.target_host, missing)
    if mode == "warn":
        _missing.add(namespace)
        log.warning(
            "namespace %r lacks the search attributes %s: failover upserts are skipped "
            "until they exist; create them with: %s",
            namespace,
            ", ".join(missing),
            command,
        )
        return False
    raise SearchAttributesMissing(
        f"namespace {namespace!r} lacks the search attributes {', '.join(missing)}; create "
        f"them with: {command} (or FailoverPlugin(search_attributes='register') where the "
        "worker may add them, or 'warn' to start without them)",
        missing,
    )


def known_missing(namespace: str) -> bool:
    """Whether a worker of this process found ``namespace`` lacking the attributes."""
    return namespace in _missing


def first_warning(namespace: str) -> bool:
    """True the first time it is asked for ``namespace`` (one skipped-upsert warning)."""
    if namespace in _warned:
        return False
    _warned.add(namespace)
    return True


def forget_missing() -> None:
    """Forget every namespace noted as lacking the attributes (tests)."""
    _missing.clear()
    _warned.clear()
