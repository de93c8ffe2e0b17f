"""``FailoverPlugin``: agent-failover on any Temporal worker, the way Temporal integrations ship.

A ``temporalio.plugin.SimplePlugin`` that, on the worker it is given to (or on every
worker of a client it is given to):

* sets our payload converter (:mod:`agent_failover.converter`; codec, failure converter
  kept) and, with ``codec=`` on (default: when ``FAILOVER_CODEC_KEYS`` is set), the AES-GCM
  codec (:mod:`agent_failover.codec`) with encoded failure attributes, Redis cache included;
* when tracing is on (``tracing=``, default: on when Temporal's replay-safe tracer provider
  is installed, e.g. by ``setup_telemetry``), adds Temporal's ``OpenTelemetryInterceptor``
  to the worker and its bulkhead workers (unless their client already traces);
* adds our modules to the workflow sandbox's passthrough list (ours only: a user module
  that happens to be called ``activities`` is never passed through);
* registers the failover activities (``role_context``, ``call_model``, cache, probes...),
  the tool-server activities of the saga and the agent loop (``run_tool`` /
  ``compensate``), ``escalate``'s on-call notification (``notify_escalation``), the
  ``HealthMonitorWorkflow`` and ``QualifyWorkflow`` (``failover qualify``) with its
  ``qualify_item`` / ``score_answer`` activities; and, only when asked
  (``include_pipeline=True``: ``failover worker`` / ``dev`` / ``demo``), the bundled
  ``AgentPipelineWorkflow``, refusing a policy the pipeline cannot serve;
* when the worker runs: connects the stores (Redis at ``REDIS_URL``), starts one extra
  worker per bulkhead (``<task queue>-llm-<bulkhead>``, its own slot limit; ``bulkheads=``
  picks which, so other processes can serve the rest: :meth:`FailoverPlugin.bulkhead_worker`;
  they drain for the worker's ``graceful_shutdown_timeout``), keeps the health monitor running
  once per deployment (idempotent by workflow id; started again if it ever ends), and on
  shutdown drains them and closes the HTTP client and the stores (those lifecycles live in
  :mod:`agent_failover.supervisor`: the plugin configures, the supervisor runs);
* bounds the sticky queue timeout of the workers it configures
  (``sticky_queue_timeout=``, default 2 s; None keeps the SDK's 10 s; a worker's own
  ``sticky_queue_schedule_to_start_timeout`` other than the SDK default wins), so a run
  whose worker was killed waits that long, not 10 s, for another worker to take its next
  step;
* when a role of the policy has ``shadow`` settings (``shadow=``: None = then, True, False),
  runs one more worker on ``<task queue>-shadow``: the low-priority shadow evaluations
  (``ShadowEvaluationWorkflow`` and its ``shadow_evaluate`` activity, a few slots only), so
  they never take a slot a pipeline needs (:meth:`FailoverPlugin.shadow_worker` for a
  process of its own).

User workflows call ``resilient_complete`` from workflow code; nothing else is needed::

    worker = Worker(client, task_queue="my-app", workflows=[MyWorkflow],
                    plugins=[FailoverPlugin("policy.yaml")])
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, Literal

import httpx
from temporalio.client import Client
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, DefaultPayloadConverter, PayloadCodec
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

# resilient_complete imports its loop on first call; a worker loads it before any task
import agent_failover.workflows.resilient_loop  # noqa: F401
from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import llm_task_queue
from agent_failover.activities.notify import EscalationNotifier, build_webhook_client
from agent_failover.activities.quality import QualityActivities
from agent_failover.activities.search_attributes import SearchAttributeMode
from agent_failover.activities.shadow import ShadowActivities
from agent_failover.activities.tools import ToolActivities, tools_base_url
from agent_failover.codec import with_codec
from agent_failover.converter import FailoverPayloadConverter
from agent_failover.providers.client import policy_http_client
from agent_failover.resilience.config import PolicyConfig
from agent_failover.startup import (
    NamespaceCheck,
    check_pipeline_policy,
    resolve_codec,
    resolve_policy,
    resolve_tracing,
    startup_line,
)
from agent_failover.stores.factory import IfUnreachable, Stores
from agent_failover.supervisor import (
    DEFAULT_STICKY_QUEUE_TIMEOUT,
    SharedStores,
    bound_sticky_queue,
    bulkhead_workers,
    checked_sticky_timeout,
    keep_monitor_running,
    publish_policy_versions,
    run_beside,
    shadow_worker,
)
from agent_failover.workflows.monitor import HealthMonitorWorkflow
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from agent_failover.workflows.qualify import QualifyWorkflow
from agent_failover.workflows.shadow import ShadowEvaluationWorkflow, shadow_task_queue

log = logging.getLogger("agent_failover.plugin")

PLUGIN_NAME = "agent_failover.FailoverPlugin"
#: Activity slots per bulkhead; a failing tier exhausts only its own slots.
DEFAULT_BULKHEAD_SLOTS = {"core": 16, "specialists": 32}
#: Activity slots of the shadow queue: shadow evaluation is best effort, kept small.
DEFAULT_SHADOW_SLOTS = 4
#: Passed through the workflow sandbox: imported once per process instead of once per
#: workflow run (and per workflow validated at worker start), and pydantic classes stay
#: identical inside and outside workflows. The whole ``agent_failover`` package qualifies:
#: importing it has no side effect a workflow could see, and no module keeps state that
#: workflow code mutates (``tests/test_sandbox.py`` checks both, and replays
#: every committed history under the strict sandbox, where our own workflow code is
#: re-imported per run and every restriction applies to it). A user's modules are never
#: passed through: a package of theirs that happens to be called ``activities`` stays
#: sandboxed.
PASSTHROUGH_MODULES = (
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "httpx",
    "jsonschema",
    "opentelemetry",
    "agent_failover",
)
#: The sandbox before this project's modules were passed through: our third-party
#: dependencies only. Replays under it hold our workflow code to every restriction.
STRICT_PASSTHROUGH_MODULES = PASSTHROUGH_MODULES[:-1]

StoresArg = Stores | Literal["redis", "memory", "embedded"]
DispatchArg = Literal["eager", "queue"] | None
#: What a Temporal worker allows by default (``max_concurrent_activities=None``).
SDK_DEFAULT_ACTIVITY_SLOTS = 100
CodecArg = PayloadCodec | bool | None


def with_passthrough(
    runner: WorkflowRunner | None, modules: tuple[str, ...] = PASSTHROUGH_MODULES
) -> WorkflowRunner:
    """The sandboxed runner (the user's, if any) with our modules passed through."""
    if runner is None:
        return SandboxedWorkflowRunner(
            restrictions=SandboxedWorkflowRunner().restrictions.with_passthrough_modules(*modules)
        )
    if isinstance(runner, SandboxedWorkflowRunner):
        restrictions = runner.restrictions.with_passthrough_modules(*modules)
        return dataclasses.replace(runner, restrictions=restrictions)
    return runner  # unsandboxed: nothing to pass through


def with_pydantic(converter: DataConverter | None) -> DataConverter:
    """The user's converter (codec kept) on :class:`FailoverPayloadConverter` unless custom."""
    if converter is None:
        converter = DataConverter.default
    if converter.payload_converter_class in (DefaultPayloadConverter, PydanticPayloadConverter):
        return dataclasses.replace(converter, payload_converter_class=FailoverPayloadConverter)
    return converter  # ours, or a custom payload converter: the user knows what they are doing


class FailoverPlugin(SimplePlugin):
    """agent-failover's activities, workflows, converter and sandbox settings on a worker.

    ``policy`` is a loaded :class:`PolicyConfig`, a path to a policy YAML, or None
    (``FAILOVER_POLICY``; neither is a :class:`PolicyError`, never the demo policy).
    ``stores`` is ``"redis"`` (``redis_url`` / ``REDIS_URL``; if it does not answer,
    ``redis_unreachable``: ``"refuse"`` to start, the default, or ``"degraded"``: start
    with worker-local health state, logged, counted and shown by ``failover status``;
    None reads ``FAILOVER_REDIS_UNREACHABLE``), ``"embedded"`` (dev and demo: an embedded
    Redis when no URL is set and none runs locally), ``"memory"`` (one process only:
    tests) or a connected :class:`Stores`.
    ``codec``: None (on when ``FAILOVER_CODEC_KEYS`` is set), True (on, keys from the
    environment, an error if they are missing), False (off), or a ``PayloadCodec``.
    ``bulkheads``: which bulkhead task queues run beside the main worker (None: all of
    the policy's; ``()``: none, other processes serve them). ``tracing``: None (on when a
    replay-safe tracer provider is installed), True (on, an error without one), False.
    ``search_attributes``: when the namespace lacks the failover search attributes, add
    them (``"register"``), refuse to start with the command to run (``"require"``), or start
    and skip the upserts (``"warn"``); None: ``register`` on a loopback server, else ``require``.
    ``http`` is the providers' client (built here if None); ``notify_http`` the escalation
    webhook's (None: a proxy-aware :func:`build_webhook_client` built on first use).
    Clients built here are closed by :meth:`aclose`. ``sticky_queue_timeout``: the sticky
    queue timeout of the workers it configures that kept the SDK default (None: keep it).
    ``include_pipeline``: also register the bundled ``AgentPipelineWorkflow`` (off by
    default: a user's worker runs the user's workflows);
    a policy without the pipeline's roles is then a :class:`PolicyError`.
    """

    def __init__(
        self,
        policy: PolicyConfig | str | os.PathLike[str] | None = None,
        *,
        stores: StoresArg = "redis",
        redis_url: str | None = None,
        redis_namespace: str | None = None,
        redis_unreachable: IfUnreachable | None = None,
        include_pipeline: bool = False,
        start_monitor: bool = True,
        bulkhead_slots: Mapping[str, int] | None = None,
        bulkheads: Iterable[str] | None = None,
        codec: CodecArg = None,
        http: httpx.AsyncClient | None = None,
        notify_http: httpx.AsyncClient | None = None,
        tracing: bool | None = None,
        shadow: bool | None = None,
        shadow_slots: int = DEFAULT_SHADOW_SLOTS,
        dispatch: DispatchArg = None,
        search_attributes: SearchAttributeMode | None = None,
        sticky_queue_timeout: timedelta | None = DEFAULT_STICKY_QUEUE_TIMEOUT,
    ) -> None:
        self.sticky_queue_timeout = checked_sticky_timeout(sticky_queue_timeout)
        self.policy, self.policy_source = resolve_policy(policy)
        self._include_pipeline = check_pipeline_policy(self, include_pipeline)
        self.search_attributes = NamespaceCheck(search_attributes)
        self.shadow = _policy_has_shadows(self.policy) if shadow is None else shadow
        self._shadow_slots, self._start_monitor = shadow_slots, start_monitor
        self._shadow_acts: ShadowActivities | None = None
        self.tracing = resolve_tracing(tracing)
        self.codec = resolve_codec(codec)
        self._stores = SharedStores(stores, redis_url, redis_namespace, redis_unreachable)
        self._slots = {**DEFAULT_BULKHEAD_SLOTS, **(bulkhead_slots or {})}
        self.bulkheads = self._check_bulkheads(bulkheads)
        self.dispatch = self._resolve_dispatch(dispatch)
        self._own_http, self._own_notify_http = http is None, notify_http is None
        self.http = http or policy_http_client(self.policy)
        self._notify_http = notify_http  # honours the proxy env vars; built on first use
        self._acts: dict[str, LLMActivitySet] = {}
        self._internal_queues: set[str] = set()
        self._standalone: dict[str, str] = {}  # bulkhead queue -> its deployment's queue
        self._shadow_queues: set[str] = set()  # standalone shadow queues
        pipeline = [AgentPipelineWorkflow] if include_pipeline else []
        super().__init__(
            PLUGIN_NAME,
            data_converter=self._data_converter,
            workflows=[HealthMonitorWorkflow, QualifyWorkflow, *pipeline],
            workflow_runner=with_passthrough,
            interceptors=[self.tracing] if self.tracing is not None else None,
        )

    def policy_bulkheads(self) -> tuple[str, ...]:
        """Every bulkhead the policy's roles name, sorted."""
        return tuple(sorted({r.bulkhead for r in self.policy.roles.values()}))

    def _resolve_dispatch(self, dispatch: DispatchArg) -> Literal["eager", "queue"]:
        """``eager`` unless asked otherwise or some bulkhead is served by another process
        (then its calls belong on its queue, to its process)."""
        if dispatch not in (None, "eager", "queue"):
            raise ValueError(f"dispatch must be 'eager' or 'queue', got {dispatch!r}")
        if dispatch is not None:
            return dispatch
        return "eager" if set(self.bulkheads) == set(self.policy_bulkheads()) else "queue"

    def _check_bulkheads(self, names: Iterable[str] | None) -> tuple[str, ...]:
        """``names`` without repeats (None: every bulkhead of the policy); ``ValueError``
        for a bulkhead no role of the policy uses."""
        known = self.policy_bulkheads()
        if names is None:
            return known
        names = tuple(dict.fromkeys(names))
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(
                f"bulkhead(s) {', '.join(map(repr, unknown))} not in the policy; "
                f"its roles use: {', '.join(known)}"
            )
        return names

    def _data_converter(self, converter: DataConverter | None) -> DataConverter:
        return with_codec(with_pydantic(converter), self.codec)

    # -- configuration (sync) --------------------------------------------------------

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """Add our workflows, activities and sandbox settings (not to our bulkhead workers)."""
        task_queue = config["task_queue"]
        if task_queue in self._internal_queues:
            return config
        self._check_client_codec(config)
        if task_queue in self._shadow_queues:
            config["workflows"] = [*(config.get("workflows") or []), ShadowEvaluationWorkflow]
            config["activities"] = [
                *(config.get("activities") or []),
                *self._shadow_activities().all(),
            ]
            config["workflow_runner"] = with_passthrough(config.get("workflow_runner"))
            config["interceptors"] = [
                *(config.get("interceptors") or []),
                *self._tracing_for(config["client"]),
            ]
            bound_sticky_queue(config, self.sticky_queue_timeout)
            return config
        if task_queue in self._standalone:
            acts = self.activities_for(self._standalone[task_queue])
            config["activities"] = [*(config.get("activities") or []), *_bulkhead_acts(acts)]
            config["interceptors"] = [
                *(config.get("interceptors") or []),
                *self._tracing_for(config["client"]),
            ]
            return config
        config = super().configure_worker(config)
        bound_sticky_queue(config, self.sticky_queue_timeout)
        if self.tracing is not None and _client_traces(config["client"]):
            config["interceptors"] = [i for i in config["interceptors"] if i is not self.tracing]
        acts = self.activities_for(task_queue)
        if self.dispatch == "eager" and config.get("tuner") is None:
            # Model calls share this worker's slots: room for every bulkhead's limit on top
            # of what the worker was given, so a full bulkhead cannot starve the rest.
            own = config.get("max_concurrent_activities") or SDK_DEFAULT_ACTIVITY_SLOTS
            config["max_concurrent_activities"] = own + sum(
                self._slots.get(b, 16) for b in self.bulkheads
            )
        ours: list[Callable[..., Any]] = acts.all()
        ours += QualityActivities(self.policy, self.http).all()
        # Library features, not the pipeline's: the saga's and the agent loop's tool calls
        # (``run_tool``/``compensate``) and ``escalate``'s on-call webhook, whose URL and
        # secret are read from the environment at each call.
        ours += ToolActivities(self.http, tools_base_url()).all()
        ours += EscalationNotifier(self.notify_http).all()
        config["activities"] = [*(config.get("activities") or []), *ours]
        return config

    def _check_client_codec(self, config: WorkerConfig) -> None:
        # A worker's payloads go through its client's converter, which a worker plugin
        # cannot change: with the codec on and a plain client, history would be clear text.
        client = config.get("client")
        if self.codec is not None and client is not None:
            if client.data_converter.payload_codec is None:
                raise ValueError(
                    "FailoverPlugin: the payload codec is on but this worker's client has no "
                    "codec, so history would be clear text; connect with "
                    "agent_failover.connect_client() or Client.connect(..., plugins=[plugin])"
                )

    def _tracing_for(self, client: Client) -> list[OpenTelemetryInterceptor]:
        """Our tracing interceptor for a worker we configure by hand, unless its client
        already traces (a client's interceptors apply to its workers: twice would
        duplicate every span)."""
        if self.tracing is None or _client_traces(client):
            return []
        return [self.tracing]

    def activities_for(self, task_queue: str) -> LLMActivitySet:
        """The activities object serving workers on ``task_queue`` (one per queue)."""
        if task_queue not in self._acts:
            policy = self.policy

            # Eager: the bulkheads this worker runs beside it; others stay on their queues.
            local = set(self.bulkheads) if self.dispatch == "eager" else set()

            def bulkhead_queue(role: str) -> str:
                return llm_task_queue(task_queue, policy.role(role).bulkhead)

            def queue_for(role: str) -> str:
                return task_queue if policy.role(role).bulkhead in local else bulkhead_queue(role)

            def overflow_for(role: str) -> str | None:
                return bulkhead_queue(role) if policy.role(role).bulkhead in local else None

            self._acts[task_queue] = LLMActivitySet(
                policy,
                self.http,
                None,
                None,
                task_queue_for=queue_for,
                overflow_queue_for=overflow_for,
                bulkhead_slots={b: self._slots.get(b, 16) for b in local},
            )
            if self._stores.current is not None:
                stores = self._stores.current
                self._acts[task_queue].bind_stores(stores.health, stores.cache)
        return self._acts[task_queue]

    def bulkhead_worker(
        self, client: Client, task_queue: str, bulkhead: str, **worker_kwargs: Any
    ) -> Worker:
        """A worker serving only ``bulkhead``'s model calls for the deployment ``task_queue``.

        For processes that run one bulkhead on its own (``FAILOVER_WORKER_ROLE=bulkhead:<name>``):
        it connects the stores when it runs, with its own slot limit, and no workflows.
        """
        self._check_bulkheads([bulkhead])
        queue = llm_task_queue(task_queue, bulkhead)
        self._standalone[queue] = task_queue
        worker_kwargs.setdefault("max_concurrent_activities", self._slots.get(bulkhead, 16))
        # A plugin the client already carries applies to its workers; adding it twice would
        # run it twice.
        plugins = [] if self in client.config().get("plugins", []) else [self]
        return Worker(client, task_queue=queue, plugins=plugins, **worker_kwargs)

    # -- running (async) -------------------------------------------------------------

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Connect stores, run the bulkhead workers and the monitor beside ``worker``."""
        task_queue = worker.task_queue
        if task_queue in self._internal_queues:
            await next(worker)
            return
        client = worker.client
        standalone = task_queue in self._standalone
        if not standalone:
            await self.search_attributes.run(client)
        # Cached answers are as sensitive as history: the same codec protects both.
        stores = await self._stores.connect(self.codec or client.data_converter.payload_codec)
        acts = self.activities_for(self._standalone.get(task_queue, task_queue))
        acts.bind_stores(stores.health, stores.cache)
        policies = await publish_policy_versions(acts, stores)
        self._shadow_activities().bind_store(stores.health)
        companions = [] if standalone else self._companions(worker, acts)
        if not standalone:
            slots = {
                b: (llm_task_queue(task_queue, b), self._slots.get(b, 16)) for b in self.bulkheads
            }
            log.info(
                startup_line(source=self.policy_source, policy=self.policy, store=stores.backend,
                             task_queue=task_queue, bulkheads=slots, dispatch=self.dispatch)
            )  # fmt: skip
        keeper = None
        if self._start_monitor and not standalone:
            keeper = functools.partial(
                keep_monitor_running, client, self.policy, task_queue=task_queue
            )
        async with self._stores.held():
            await run_beside(lambda: next(worker), companions, policies, keeper)

    def _companions(self, worker: Worker, acts: LLMActivitySet) -> list[Worker]:
        """The bulkhead workers (and the shadow worker) that run beside ``worker``; they
        drain model calls for as long as the worker they serve does."""
        client, task_queue = worker.client, worker.task_queue
        grace = worker.config().get("graceful_shutdown_timeout")
        tracing = self._tracing_for(client)
        workers = bulkhead_workers(
            client,
            task_queue,
            _bulkhead_acts(acts),
            {b: self._slots.get(b, 16) for b in self.bulkheads},
            internal=self._internal_queues,
            grace=grace,
            interceptors=tracing,
        )
        if self.shadow:
            workers.append(
                shadow_worker(
                    client,
                    task_queue,
                    self._shadow_activities().all(),
                    self._shadow_slots,
                    internal=self._internal_queues,
                    runner=with_passthrough(None),
                    grace=grace,
                    interceptors=tracing,
                    sticky=self.sticky_queue_timeout,
                )
            )
        return workers

    def _shadow_activities(self) -> ShadowActivities:
        if self._shadow_acts is None:
            self._shadow_acts = ShadowActivities(self.policy, self.http, None)
        return self._shadow_acts

    def shadow_worker(self, client: Client, task_queue: str, **worker_kwargs: Any) -> Worker:
        """A worker serving only the shadow evaluations of the deployment ``task_queue``
        (``FAILOVER_WORKER_ROLE=shadow``); it connects the stores when it runs."""
        queue = shadow_task_queue(task_queue)
        self._standalone[queue] = task_queue
        self._shadow_queues.add(queue)
        worker_kwargs.setdefault("max_concurrent_activities", self._shadow_slots)
        plugins = [] if self in client.config().get("plugins", []) else [self]
        return Worker(client, task_queue=queue, plugins=plugins, **worker_kwargs)

    async def aclose(self) -> None:
        """Close the HTTP clients the plugin built (call once its workers have stopped)."""
        if self._own_http:
            await self.http.aclose()
        if self._own_notify_http and self._notify_http is not None:
            await self._notify_http.aclose()
            self._notify_http = None

    @property
    def notify_http(self) -> httpx.AsyncClient:
        """The escalation webhook's client (proxy-aware), separate from the providers'."""
        if self._notify_http is None:
            self._notify_http = build_webhook_client()
        return self._notify_http


def _bulkhead_acts(acts: LLMActivitySet) -> list[Callable[..., Any]]:
    """What a bulkhead queue serves: the model calls and the cache around them."""
    return acts.bulkhead()


def _client_traces(client: Client) -> bool:
    on_client = client.config(active_config=True).get("interceptors") or []
    return any(isinstance(i, OpenTelemetryInterceptor) for i in on_client)


def _policy_has_shadows(policy: PolicyConfig) -> bool:
    """Whether some role of the policy has shadow settings (the shadow queue's default)."""
    return any(r.shadow is not None for r in policy.roles.values())
