"""An async client for the simulator's admin API, so tests and the CLI never build URLs.

::

    async with SimAdmin(sim.url) as admin:
        await admin.set_faults("anthropic-us-east", [Fault(kind=FaultKind.OVERLOADED)])
        ...
        rows = await admin.attempts(endpoint="anthropic-us-east")

Errors from the admin API raise ``httpx.HTTPStatusError`` with the server's explanation
in the response body.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

import httpx
from pydantic import BaseModel

from agent_failover.providers.client import default_ssl_context
from agent_failover.testing.sim.config import DEFAULT_LOAD_THRESHOLD, AccuracySettings
from agent_failover.testing.sim.faults import Fault
from agent_failover.testing.sim.scenario import Scenario, load_scenario
from agent_failover.testing.sim.tools import ToolFault


class AttemptInfo(BaseModel):
    """One row of the simulator's attempts log."""

    seq: int
    endpoint: str
    arrival: float
    model: str | None = None
    stream: bool = False
    faults: list[str] = []
    outcome: str
    status: int | None = None
    tokens_sent: int = 0
    input_tokens: int = 0
    duration_s: float | None = None
    request_id: str = ""
    system: str = ""
    native_schema: bool = False

    def __getitem__(self, key: str) -> Any:
        """Mapping-style access (``row["endpoint"]``) for callers that treat rows as dicts."""
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)


class EffectInfo(BaseModel):
    """One effect the tool server applied (one per idempotency key)."""

    seq: int
    tool: str
    key: str
    object_id: str
    args: dict[str, Any] = {}
    status: int
    response: dict[str, Any] = {}
    requests: int = 1


class AdminTransport:
    """The HTTP side of the admin client: one ``httpx`` client, ``/_admin/`` paths, and
    errors that keep the server's explanation."""

    def __init__(self, url: str, *, timeout: float = 10.0, client: httpx.AsyncClient | None = None):
        self.url = url.rstrip("/")
        self._own_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout, verify=default_ssl_context())

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._own_client:
            await self._client.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        resp = await self._client.request(method, f"{self.url}/_admin/{path}", **kwargs)
        if resp.is_error:
            # Keep the server's reason: raise_for_status alone drops the body.
            raise httpx.HTTPStatusError(
                f"{method} /_admin/{path} -> {resp.status_code}: {resp.text}",
                request=resp.request,
                response=resp,
            )
        return resp.json()


class SimAdmin(AdminTransport):
    """Admin client bound to one simulator URL (``http://127.0.0.1:PORT``)."""

    async def health(self) -> dict[str, Any]:
        """Liveness, in-flight attempts, TCP_NODELAY of the admin connection."""
        return await self._call("GET", "health")

    async def endpoints(self) -> list[dict[str, Any]]:
        """Hosted endpoints with base URLs and active faults."""
        return (await self._call("GET", "endpoints"))["endpoints"]

    async def set_faults(self, endpoint: str, faults: list[Fault | dict[str, Any]]) -> list[Fault]:
        """Replace ``endpoint``'s runtime faults; returns them as the server stored them."""
        body = [
            f.model_dump(mode="json", exclude_none=True) if isinstance(f, Fault) else f
            for f in faults
        ]
        data = await self._call("PUT", f"faults/{endpoint}", json=body)
        return [Fault.model_validate(f) for f in data["faults"]]

    async def clear(self, endpoint: str | None = None) -> None:
        """Clear one endpoint's faults, or every fault and the scenario."""
        await self._call("DELETE", f"faults/{endpoint}" if endpoint else "faults")

    async def set_accuracy(
        self,
        endpoint: str,
        accuracy: float,
        *,
        accuracy_under_load: float | None = None,
        load_threshold: int = DEFAULT_LOAD_THRESHOLD,
    ) -> AccuracySettings:
        """Set how often ``endpoint`` answers golden-set tasks right (testing.sim.golden)."""
        body = {
            "accuracy": accuracy,
            "accuracy_under_load": accuracy_under_load,
            "load_threshold": load_threshold,
        }
        data = await self._call("PUT", f"accuracy/{endpoint}", json=body)
        data.pop("endpoint", None)
        return AccuracySettings.model_validate(data)

    async def accuracy(self) -> dict[str, AccuracySettings]:
        """Golden-set accuracy per endpoint."""
        data = await self._call("GET", "accuracy")
        return {name: AccuracySettings.model_validate(a) for name, a in data.items()}

    async def reset_accuracy(self, endpoint: str | None = None) -> None:
        """Back to the configured accuracy (one endpoint, or all)."""
        await self._call("DELETE", f"accuracy/{endpoint}" if endpoint else "accuracy")

    async def load_scenario(self, scenario: str | Path | Scenario | dict[str, Any]) -> dict:
        """Load a timeline from a file path, a :class:`Scenario` or a plain dict."""
        if isinstance(scenario, str | Path):
            scenario = load_scenario(scenario)
        if isinstance(scenario, Scenario):
            scenario = scenario.model_dump(mode="json", by_alias=True, exclude_none=True)
        return await self._call("POST", "scenario", json=scenario)

    async def scenario_status(self) -> dict[str, Any]:
        """Elapsed time and active events of the loaded scenario."""
        return await self._call("GET", "scenario")

    async def clear_scenario(self) -> None:
        """Unload the scenario."""
        await self._call("DELETE", "scenario")

    async def attempts(
        self,
        endpoint: str | None = None,
        since: float | None = None,
        after_seq: int | None = None,
    ) -> list[AttemptInfo]:
        """Attempts received, oldest first, optionally filtered."""
        params: dict[str, Any] = {}
        if endpoint:
            params["endpoint"] = endpoint
        if since is not None:
            params["since"] = since
        if after_seq is not None:
            params["after_seq"] = after_seq
        data = await self._call("GET", "attempts", params=params)
        return [AttemptInfo.model_validate(a) for a in data["attempts"]]

    async def clear_attempts(self) -> None:
        """Empty the attempts log."""
        await self._call("DELETE", "attempts")

    async def reset(self) -> None:
        """Faults, scenario, attempts log and RNG back to the start-up state."""
        await self._call("POST", "reset")

    async def set_tool_faults(
        self, tool: str, faults: list[ToolFault | dict[str, Any]]
    ) -> list[ToolFault]:
        """Replace ``tool``'s faults on the tool server; returns them as stored."""
        body = [
            f.model_dump(mode="json", exclude_none=True) if isinstance(f, ToolFault) else f
            for f in faults
        ]
        data = await self._call("PUT", f"tool_faults/{tool}", json=body)
        return [ToolFault.model_validate(f) for f in data["faults"]]

    async def clear_tool_faults(self, tool: str | None = None) -> None:
        """Clear one tool's faults, or every tool's."""
        await self._call("DELETE", f"tool_faults/{tool}" if tool else "tool_faults")

    async def effects(self, tool: str | None = None, key: str | None = None) -> list[EffectInfo]:
        """Effects the tool server applied, oldest first, optionally filtered."""
        params = {k: v for k, v in {"tool": tool, "key": key}.items() if v}
        data = await self._call("GET", "effects", params=params)
        return [EffectInfo.model_validate(e) for e in data["effects"]]

    async def tool_calls(self) -> dict[str, int]:
        """Requests received per tool (applied, replayed or failed)."""
        return (await self._call("GET", "effects"))["calls"]
