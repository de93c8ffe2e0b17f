"""The one shared HTTP client of a worker process, its connection budgets and time budgets.

Every adapter call goes through one :class:`FailoverHTTPClient` (an ``httpx.AsyncClient``)
built by :func:`build_http_client`:

* **no retries anywhere** — the transport has ``retries=0`` and nothing in ``providers/``
  loops: Temporal owns retries, :mod:`resilience` owns failover;
* **explicit pool limits** — ``httpx.Limits`` sized from the endpoints' budgets;
* **bulkheads at two levels** — each distinct origin (provider host) gets its own mounted
  transport, hence its own socket pool, so one provider's slow sockets cannot starve
  another's; and each (*endpoint*, *bulkhead*) pair gets an ``asyncio.Semaphore`` of
  ``EndpointConfig.max_connections`` slots. The semaphore is the finer knob because
  several endpoints share one origin (two regions behind one gateway, or every endpoint of
  the simulator on one port), where a pool per origin cannot tell them apart. Slots are
  per bulkhead as the activity slots are: a burst in one agent tier queues behind its
  own connections and never takes the ones another tier needs for the same endpoint
  (the origin pools are sized for every bulkhead's share, so httpx's pool is not the
  tighter limit). Waiting for a slot counts against the connect budget and fails as
  :class:`~resilience.errors.LocalSaturationError`, exactly like an httpx pool timeout:
  our own saturation, which never counts against the route.

:class:`Budgets` are the per-call time limits. httpx's read timeout bounds one socket read
only; time to first token and total time span many reads, so the call pipeline enforces
them around every chunk itself (see :mod:`providers.pump`).
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import httpx
from pydantic import BaseModel, ConfigDict, Field

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.errors import LocalSaturationError

DEFAULT_CONNECT_S = 5.0
DEFAULT_TTFT_S = 20.0
DEFAULT_IDLE_S = 20.0
DEFAULT_TOTAL_S = 120.0
#: After the terminal chunk, how long to wait for a trailing usage chunk / ``[DONE]``.
DEFAULT_TRAILER_GRACE_S = 0.25
#: Pool size when no endpoints are known at build time.
DEFAULT_MAX_CONNECTIONS = 100
DEFAULT_KEEPALIVE_EXPIRY_S = 30.0


class Budgets(BaseModel):
    """Time limits of one call, in seconds, and the reply size limit.

    ``connect_s`` bounds opening a connection (and waiting for a connection slot);
    ``ttft_s`` the time from sending the request to the first content token of a stream;
    ``idle_s`` the gap between two chunks once tokens flow; ``total_s`` the whole call,
    whatever the phase. The earliest applicable limit wins, so a ``ttft_s`` above
    ``total_s`` simply never fires. Non-streaming calls use ``connect_s`` and ``total_s``.
    """

    model_config = ConfigDict(frozen=True)

    connect_s: float = Field(default=DEFAULT_CONNECT_S, gt=0)
    ttft_s: float = Field(default=DEFAULT_TTFT_S, gt=0)
    idle_s: float = Field(default=DEFAULT_IDLE_S, gt=0)
    total_s: float = Field(default=DEFAULT_TOTAL_S, gt=0)
    trailer_grace_s: float = Field(default=DEFAULT_TRAILER_GRACE_S, ge=0)
    #: Largest reply text accepted (UTF-8 bytes); a stream past it is abandoned at once
    #: as ``oversized_output``. None: unbounded (only for callers that bound it themselves).
    max_reply_bytes: int | None = Field(default=None, gt=0)
    #: The bulkhead whose connection slots the call takes ("" outside any bulkhead).
    bulkhead: str = ""

    def httpx_timeout(self) -> httpx.Timeout:
        """The per-request httpx timeout: a backstop; the adapters enforce the real budgets."""
        return httpx.Timeout(
            connect=self.connect_s, read=self.total_s, write=self.total_s, pool=self.connect_s
        )


class EndpointSlots:
    """Connection budget per (endpoint, bulkhead): at most ``max_connections`` calls of one
    bulkhead in flight to one endpoint."""

    def __init__(self) -> None:
        self._slots: dict[tuple[str, str], tuple[int, asyncio.Semaphore]] = {}

    def _semaphore(self, endpoint: EndpointConfig, bulkhead: str) -> asyncio.Semaphore:
        key = (endpoint.name, bulkhead)
        size, sem = self._slots.get(key, (0, None))  # type: ignore[arg-type]
        if sem is None or size != endpoint.max_connections:
            # A changed budget (config reload) starts a new semaphore; calls holding the
            # old one finish against it.
            sem = asyncio.Semaphore(endpoint.max_connections)
            self._slots[key] = (endpoint.max_connections, sem)
        return sem

    def in_use(self, endpoint: EndpointConfig, bulkhead: str | None = None) -> int:
        """How many slots of ``endpoint`` are taken right now (one bulkhead's, or all)."""
        taken = 0
        for (name, owner), (size, sem) in self._slots.items():
            if name == endpoint.name and bulkhead in (None, owner):
                taken += size - sem._value  # asyncio exposes no public counter
        return taken

    @asynccontextmanager
    async def acquire(
        self, endpoint: EndpointConfig, timeout_s: float, bulkhead: str = ""
    ) -> AsyncIterator[None]:
        """Hold one of ``bulkhead``'s slots of ``endpoint`` for the body; waiting longer than
        ``timeout_s`` fails as :class:`LocalSaturationError` (the request never left)."""
        sem = self._semaphore(endpoint, bulkhead)
        try:
            async with asyncio.timeout(timeout_s):
                await sem.acquire()
        except TimeoutError as exc:
            owner = f" of bulkhead {bulkhead!r}" if bulkhead else ""
            raise LocalSaturationError(
                f"all {endpoint.max_connections} connection slots{owner} busy for {timeout_s:.3g}s",
                endpoint=endpoint.name,
                bulkhead=bulkhead,
            ) from exc
        try:
            yield
        finally:
            sem.release()


class FailoverHTTPClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` that also carries the per-endpoint connection slots."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.endpoint_slots = EndpointSlots()


def _origin(endpoint: EndpointConfig) -> str:
    url = httpx.URL(endpoint.base())
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}"


def default_ssl_context() -> ssl.SSLContext:
    """One verifying TLS context shared by every pool of the process.

    httpx builds a context per transport, reading the CA bundle each time (about 20 ms,
    once per provider origin per client). A context is safe to share between connections
    and clients, and nothing changes it once built. ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``
    are honoured as httpx honours them, and a change of either builds a new context.
    """
    return _ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _ssl_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    del cert_file, cert_dir  # the cache key: httpx reads both from the environment
    return httpx.create_ssl_context()


def _origin_sizes(endpoints: list[EndpointConfig], bulkheads: int) -> dict[str, int]:
    """Connections per provider origin: every endpoint's slots, once per bulkhead."""
    sizes: dict[str, int] = {}
    for e in endpoints:
        sizes[_origin(e)] = sizes.get(_origin(e), 0) + e.max_connections * bulkheads
    return sizes


def build_http_client(
    endpoints: Iterable[EndpointConfig] = (),
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    max_connections: int | None = None,
    max_keepalive_connections: int | None = None,
    keepalive_expiry_s: float = DEFAULT_KEEPALIVE_EXPIRY_S,
    connect_timeout_s: float = DEFAULT_CONNECT_S,
    trust_env: bool = False,
    bulkheads: int = 1,
) -> FailoverHTTPClient:
    """The process-wide client: explicit limits, zero retries, a pool per provider origin.

    ``endpoints`` size the pools: each origin's pool holds the sum of its endpoints'
    ``max_connections`` times ``bulkheads`` (the number of bulkheads whose calls share the
    client: each has its own slots per endpoint); the default pool (unknown origins)
    holds ``max_connections`` or that same sum (at least :data:`DEFAULT_MAX_CONNECTIONS`
    when no endpoint is given).
    ``transport`` replaces every pool with one injected transport (``httpx.MockTransport``
    in tests). ``trust_env=True`` reads proxy settings from the environment; httpx then
    routes through its own proxy-aware pools, so the per-origin pools are not mounted
    (the per-endpoint slots still apply). Build it once per worker; close it on shutdown.
    """
    if bulkheads < 1:
        raise ValueError(f"bulkheads must be at least 1, got {bulkheads}")
    eps = list(endpoints)
    total = (
        max_connections
        or sum(e.max_connections for e in eps) * bulkheads
        or DEFAULT_MAX_CONNECTIONS
    )

    def limits(size: int) -> httpx.Limits:
        keep = max_keepalive_connections if max_keepalive_connections is not None else size
        return httpx.Limits(
            max_connections=size,
            max_keepalive_connections=min(keep, size),
            keepalive_expiry=keepalive_expiry_s,
        )

    common: dict[str, object] = {
        "timeout": httpx.Timeout(DEFAULT_TOTAL_S, connect=connect_timeout_s),
        "follow_redirects": False,  # a redirect from an LLM API is a misconfigured route
    }
    if transport is not None:
        return FailoverHTTPClient(transport=transport, **common)
    if trust_env:
        # httpx's own default transport is built with retries=0 as well.
        return FailoverHTTPClient(limits=limits(total), trust_env=True, **common)
    ssl_context = default_ssl_context()
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {
        origin: httpx.AsyncHTTPTransport(retries=0, limits=limits(size), verify=ssl_context)
        for origin, size in _origin_sizes(eps, bulkheads).items()
    }
    return FailoverHTTPClient(
        transport=httpx.AsyncHTTPTransport(retries=0, limits=limits(total), verify=ssl_context),
        mounts=mounts,
        trust_env=False,
        **common,
    )


def policy_http_client(policy: PolicyConfig) -> FailoverHTTPClient:
    """The worker's client for ``policy``: its endpoints' pools hold every bulkhead's slots
    (each bulkhead of the policy's roles has its own connection slots per endpoint)."""
    bulkheads = {role.bulkhead for role in policy.roles.values()}
    return build_http_client(policy.endpoints.values(), bulkheads=max(len(bulkheads), 1))
