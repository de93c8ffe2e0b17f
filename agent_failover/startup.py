"""What :class:`~agent_failover.FailoverPlugin` settles before its worker runs.

The plugin's arguments turned into values (the policy, the tracing interceptor, the
payload codec, the search-attribute mode), and the namespace check its worker runs first
(:func:`ensure_search_attributes`). Kept apart from the plugin, which only configures.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor
from temporalio.converter import PayloadCodec

from agent_failover.activities.search_attributes import (
    MODES,
    SearchAttributeMode,
    ensure_search_attributes,
)
from agent_failover.codec import AesGcmCodec, codec_from_env
from agent_failover.config.loader import load_policy
from agent_failover.report_errors import install_hook
from agent_failover.resilience.config import PolicyConfig, PolicyError
from agent_failover.resilience.pipeline import pipeline_policy_errors
from agent_failover.stores.policies import content_ref
from agent_failover.telemetry.setup import tracing_enabled

__all__ = [
    "NamespaceCheck",
    "ensure_search_attributes",
    "resolve_codec",
    "resolve_policy",
    "resolve_tracing",
]


class NamespaceCheck:
    """The search-attribute check a plugin's workers run once per namespace at start.

    ``mode``: see :func:`ensure_search_attributes` (None: ``register`` on a loopback
    server, else ``require``); ``ValueError`` naming the accepted values otherwise.
    """

    def __init__(self, mode: SearchAttributeMode | None) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(
                f"FailoverPlugin(search_attributes=...) must be one of {', '.join(MODES)} "
                f"or None; got {mode!r}"
            )
        self.mode = mode
        self._checked: set[str] = set()

    async def run(self, client: Client) -> None:
        """Check ``client``'s namespace unless done already (raises
        :class:`~agent_failover.resilience.setup_errors.SearchAttributesMissing`)."""
        if client.namespace not in self._checked:
            await ensure_search_attributes(client, self.mode)
            self._checked.add(client.namespace)


def resolve_tracing(tracing: bool | None) -> OpenTelemetryInterceptor | None:
    """Temporal's replay-safe tracing interceptor, when tracing is on.

    None (default): on when :func:`agent_failover.telemetry.setup_telemetry` (or the user)
    installed Temporal's replay-safe tracer provider, else off at no cost. True: on, an
    error if that provider is missing (the interceptor would fail every workflow task).
    """
    enabled = tracing_enabled()
    if tracing is True and not enabled:
        raise ValueError(
            "FailoverPlugin(tracing=True) needs Temporal's replay-safe tracer provider: "
            "call agent_failover.telemetry.setup.setup_telemetry() (OTEL_TRACES_EXPORTER) "
            "or trace.set_tracer_provider(temporalio.contrib.opentelemetry."
            "create_tracer_provider()) first"
        )
    if not (tracing if tracing is not None else enabled):
        return None
    # Temporal's own spans (StartWorkflow, RunWorkflow, StartActivity, RunActivity) join the
    # failover spans: one trace from the client's start to every model attempt.
    return OpenTelemetryInterceptor(add_temporal_spans=True)


def resolve_codec(codec: PayloadCodec | bool | None) -> PayloadCodec | None:
    if codec is None:
        return codec_from_env()
    if codec is True:
        return AesGcmCodec.from_env()
    if codec is False:
        return None
    return codec


#: What to do when no policy is given (the message of the error).
NO_POLICY_HINT = (
    "no policy given: pass FailoverPlugin('policy.yaml') or set FAILOVER_POLICY to a "
    "policy file (`failover config schema` prints its format), or try the bundled demo "
    "with `failover dev`"
)


def resolve_policy(
    policy: PolicyConfig | str | os.PathLike[str] | None,
    env: Mapping[str, str] | None = None,
) -> tuple[PolicyConfig, str]:
    """The policy (itself, loaded from its path, or from ``FAILOVER_POLICY``) and where it
    came from; a :class:`PolicyError` when there is none (the demo policy is never a
    default). From here on, a set-up error that ends the script prints one line."""
    install_hook()
    if isinstance(policy, PolicyConfig):
        return policy, "a PolicyConfig object"
    environ = os.environ if env is None else env
    path = policy if policy is not None else environ.get("FAILOVER_POLICY", "").strip()
    if not path:
        raise PolicyError([("", NO_POLICY_HINT)])
    return load_policy(Path(path)), str(Path(path).resolve())


def check_pipeline_policy(plugin: Any, include_pipeline: bool) -> bool:
    """``include_pipeline``, once the plugin's policy can serve the bundled pipeline: else
    a one-line :class:`PolicyError` (``FailoverPlugin(include_pipeline=True)`` refuses it
    at construction, not at the first step of every run)."""
    policy: PolicyConfig = plugin.policy
    source: str = plugin.policy_source
    unfit = pipeline_policy_errors(policy.roles) if include_pipeline else []
    if unfit:
        problems = "; ".join(f"{where}: {msg}" for where, msg in unfit)
        raise PolicyError([(
            "",
            f"policy {source} cannot serve the bundled pipeline (include_pipeline=True): "
            f"{problems}; add those roles, or leave include_pipeline off to run only your "
            "own workflows",
        )])  # fmt: skip
    return include_pipeline


def policy_version(policy: PolicyConfig) -> str:
    """The policy's content hash (16 hex digits of SHA-256 over its JSON)."""
    return content_ref(policy.model_dump_json())


def startup_line(
    *,
    source: str,
    policy: PolicyConfig,
    store: str,
    task_queue: str,
    bulkheads: Mapping[str, tuple[str, int]],
    dispatch: str,
) -> str:
    """The one line a worker logs when it starts: policy file and version hash, the Redis
    target, the task queues and the bulkheads (name, queue, slots)."""
    heads = ", ".join(f"{b} ({q}, {n} slots)" for b, (q, n) in sorted(bulkheads.items()))
    return (
        f"agent-failover worker on task queue {task_queue}: policy {source} (version "
        f"{policy_version(policy)}), store {store}, bulkheads {heads or 'none'}, "
        f"model calls dispatched {dispatch}"
    )
