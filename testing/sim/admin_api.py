"""The simulator's admin API under ``/_admin/``: faults, scenarios, the attempts log.

JSON in, JSON out. Invalid fault or scenario definitions get a 400 with pydantic's
field paths, unknown endpoints a 404, so a chaos script fails loudly instead of
silently testing nothing.

    GET    /_admin/health                      liveness, in-flight count, TCP_NODELAY check
    GET    /_admin/endpoints                   endpoints with base URLs and active faults
    GET    /_admin/faults                      runtime faults per endpoint
    PUT    /_admin/faults/{endpoint}           replace an endpoint's faults (POST: same)
    DELETE /_admin/faults[/{endpoint}]         clear one endpoint, or all faults + scenario
    POST   /_admin/scenario                    load a timeline (JSON or YAML body)
    GET    /_admin/scenario  DELETE ...        its status / unload it
    GET    /_admin/attempts?endpoint=&since=&after_seq=
    DELETE /_admin/attempts
    POST   /_admin/reset                       faults, scenario, log and RNG back to start
    GET    /_admin/tool_faults                 faults per tool of the tool server (/_tools/)
    PUT    /_admin/tool_faults/{tool}          replace a tool's faults (POST: same)
    DELETE /_admin/tool_faults[/{tool}]        clear one tool's faults, or all
    GET    /_admin/effects?tool=&key=          effects applied by the tool server, in order
    GET    /_admin/accuracy                    golden-set accuracy per endpoint
    PUT    /_admin/accuracy/{endpoint}         replace it ({"accuracy", "accuracy_under_load",
                                               "load_threshold"}; POST: same)
    DELETE /_admin/accuracy[/{endpoint}]       back to the configured accuracy
"""

from __future__ import annotations

import json
import socket
from typing import Any

import yaml
from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from agent_failover.testing.sim.config import AccuracySettings
from agent_failover.testing.sim.faults import Fault
from agent_failover.testing.sim.scenario import Scenario
from agent_failover.testing.sim.state import SimState
from agent_failover.testing.sim.tools import TOOLS, ToolFault

_FAULT_LIST = TypeAdapter(list[Fault])
_TOOL_FAULT_LIST = TypeAdapter(list[ToolFault])
STATE_KEY: web.AppKey[SimState] = web.AppKey("sim_state", SimState)


def _state(request: web.Request) -> SimState:
    return request.app[STATE_KEY]


def _bad_request(message: str, errors: Any = None) -> web.Response:
    body: dict[str, Any] = {"error": message}
    if errors is not None:
        body["details"] = errors
    return web.json_response(body, status=400)


def _validation_details(exc: ValidationError) -> list[dict[str, Any]]:
    return [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]


async def _json_body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return None
    ctype = request.content_type
    if "yaml" in ctype or ctype.startswith("text/"):
        return yaml.safe_load(raw)
    return json.loads(raw)


def _server_url(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


async def health(request: web.Request) -> web.Response:
    """Liveness plus whether Nagle is off on this very connection."""
    state = _state(request)
    nodelay = None
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is not None:
        nodelay = bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    return web.json_response(
        {
            "ok": True,
            "now": state.clock.now(),
            "uptime_s": state.clock.now() - state.started_at,
            "inflight": state.inflight,
            "tcp_nodelay": nodelay,
        }
    )


async def endpoints(request: web.Request) -> web.Response:
    """Every hosted endpoint with its SDK base URL and the faults active right now."""
    state = _state(request)
    url = _server_url(request)
    out = []
    for ep in state.config.endpoints:
        out.append(
            {
                "name": ep.name,
                "kind": ep.kind.value,
                "organisation": ep.organisation,
                "region": ep.region,
                "models": ep.models,
                "context_window": ep.context_window,
                "max_output_tokens": ep.max_output_tokens,
                "tokens_per_sec": ep.tokens_per_sec,
                "base_url": ep.base_url(url),
                "faults": [f.model_dump(mode="json") for f in state.faults[ep.name]],
                "active_faults": [f.model_dump(mode="json") for f in state.active_faults(ep.name)],
            }
        )
    return web.json_response({"endpoints": out})


async def get_faults(request: web.Request) -> web.Response:
    """Runtime faults per endpoint (scenario faults are under /_admin/endpoints)."""
    state = _state(request)
    return web.json_response(
        {name: [f.model_dump(mode="json") for f in fs] for name, fs in state.faults.items()}
    )


async def _fault_list(
    request: web.Request, adapter: TypeAdapter[Any], what: str
) -> tuple[Any, web.Response | None]:
    """Parse a posted fault list: a list, ``{"faults": [...]}``, or one fault object."""
    try:
        body = await _json_body(request)
    except (ValueError, yaml.YAMLError) as exc:
        return None, _bad_request(f"body is not valid JSON/YAML: {exc}")
    if isinstance(body, dict) and "faults" in body:
        body = body["faults"]
    if isinstance(body, dict):
        body = [body]
    try:
        return adapter.validate_python(body if body is not None else []), None
    except ValidationError as exc:
        return None, _bad_request(f"invalid {what}", _validation_details(exc))


async def set_faults(request: web.Request) -> web.Response:
    """Replace the endpoint's runtime faults with the posted list."""
    state = _state(request)
    name = request.match_info["endpoint"]
    if name not in state.endpoints:
        return web.json_response({"error": f"unknown endpoint {name!r}"}, status=404)
    faults, error = await _fault_list(request, _FAULT_LIST, "fault list")
    if error is not None:
        return error
    state.set_faults(name, faults)
    return web.json_response(
        {"endpoint": name, "faults": [f.model_dump(mode="json") for f in faults]}
    )


async def clear_faults(request: web.Request) -> web.Response:
    """Clear one endpoint's faults, or (no endpoint) every fault and the scenario."""
    state = _state(request)
    name = request.match_info.get("endpoint")
    if name is not None and name not in state.endpoints:
        return web.json_response({"error": f"unknown endpoint {name!r}"}, status=404)
    state.clear_faults(name)
    return web.json_response({"cleared": name or "all"})


async def load_scenario(request: web.Request) -> web.Response:
    """Validate and start a scenario timeline; times count from now."""
    state = _state(request)
    try:
        body = await _json_body(request)
        scenario = Scenario.model_validate(body)
        active = state.load_scenario(scenario)
    except (ValueError, yaml.YAMLError) as exc:
        # pydantic's ValidationError is a ValueError; keep its field paths when present
        details = _validation_details(exc) if isinstance(exc, ValidationError) else None
        return _bad_request(
            f"invalid scenario: {exc}" if details is None else "invalid scenario", details
        )
    return web.json_response(active.status(state.clock.now()))


async def get_scenario(request: web.Request) -> web.Response:
    """The loaded scenario's status, or ``{"scenario": null}``."""
    state = _state(request)
    if state.scenario is None:
        return web.json_response({"scenario": None})
    return web.json_response(state.scenario.status(state.clock.now()))


async def clear_scenario(request: web.Request) -> web.Response:
    """Unload the scenario (runtime faults stay)."""
    _state(request).scenario = None
    return web.json_response({"cleared": "scenario"})


async def attempts(request: web.Request) -> web.Response:
    """The attempts log, filtered by ``endpoint``, ``since`` (epoch s) and ``after_seq``."""
    state = _state(request)
    q = request.query
    try:
        since = float(q["since"]) if q.get("since") else None
        after_seq = int(q["after_seq"]) if q.get("after_seq") else None
    except ValueError:
        return _bad_request("'since' must be a number and 'after_seq' an integer")
    endpoint = q.get("endpoint") or None
    rows = state.list_attempts(endpoint=endpoint, since=since, after_seq=after_seq)
    return web.json_response({"attempts": [a.to_dict() for a in rows]})


async def clear_attempts(request: web.Request) -> web.Response:
    """Empty the attempts log."""
    _state(request).clear_attempts()
    return web.json_response({"cleared": "attempts"})


async def reset(request: web.Request) -> web.Response:
    """Back to the start-up state."""
    _state(request).reset()
    return web.json_response({"reset": True})


async def get_tool_faults(request: web.Request) -> web.Response:
    """Faults per tool."""
    tools = _state(request).tools
    return web.json_response(
        {t: [f.model_dump(mode="json") for f in fs] for t, fs in tools.faults.items()}
    )


async def set_tool_faults(request: web.Request) -> web.Response:
    """Replace one tool's faults with the posted list (one object is a list of one)."""
    tools = _state(request).tools
    name = request.match_info["tool"]
    if name not in TOOLS:
        return web.json_response({"error": f"unknown tool {name!r}"}, status=404)
    faults, error = await _fault_list(request, _TOOL_FAULT_LIST, "tool fault list")
    if error is not None:
        return error
    tools.set_faults(name, faults)
    return web.json_response({"tool": name, "faults": [f.model_dump(mode="json") for f in faults]})


async def clear_tool_faults(request: web.Request) -> web.Response:
    """Clear one tool's faults, or every tool's."""
    name = request.match_info.get("tool")
    if name is not None and name not in TOOLS:
        return web.json_response({"error": f"unknown tool {name!r}"}, status=404)
    _state(request).tools.clear_faults(name)
    return web.json_response({"cleared": name or "all"})


async def effects(request: web.Request) -> web.Response:
    """Effects the tool server applied (one per idempotency key), filtered by tool / key."""
    tools = _state(request).tools
    tool, key = request.query.get("tool") or None, request.query.get("key") or None
    rows = [
        e.to_dict()
        for e in tools.effects
        if (tool is None or e.tool == tool) and (key is None or e.key == key)
    ]
    return web.json_response({"effects": rows, "calls": dict(tools.calls)})


async def get_accuracy(request: web.Request) -> web.Response:
    """Golden-set accuracy per endpoint (see testing.sim.golden)."""
    state = _state(request)
    return web.json_response({n: a.model_dump(mode="json") for n, a in state.accuracy.items()})


async def set_accuracy(request: web.Request) -> web.Response:
    """Replace one endpoint's golden-set accuracy."""
    state = _state(request)
    name = request.match_info["endpoint"]
    if name not in state.endpoints:
        return web.json_response({"error": f"unknown endpoint {name!r}"}, status=404)
    try:
        settings = AccuracySettings.model_validate(await _json_body(request) or {})
    except (ValueError, yaml.YAMLError) as exc:
        if isinstance(exc, ValidationError):
            return _bad_request("invalid accuracy", _validation_details(exc))
        return _bad_request(f"body is not valid JSON/YAML: {exc}")
    state.set_accuracy(name, settings)
    return web.json_response({"endpoint": name, **settings.model_dump(mode="json")})


async def reset_accuracy(request: web.Request) -> web.Response:
    """Back to the configured accuracy (one endpoint, or all)."""
    state = _state(request)
    name = request.match_info.get("endpoint")
    if name is not None and name not in state.endpoints:
        return web.json_response({"error": f"unknown endpoint {name!r}"}, status=404)
    state.reset_accuracy(name)
    return web.json_response({"reset": name or "all"})


def add_admin_routes(app: web.Application) -> None:
    """Mount the admin API on ``app``."""
    app.router.add_get("/_admin/health", health)
    app.router.add_get("/_admin/endpoints", endpoints)
    app.router.add_get("/_admin/faults", get_faults)
    app.router.add_put("/_admin/faults/{endpoint}", set_faults)
    app.router.add_post("/_admin/faults/{endpoint}", set_faults)
    app.router.add_delete("/_admin/faults", clear_faults)
    app.router.add_delete("/_admin/faults/{endpoint}", clear_faults)
    app.router.add_post("/_admin/scenario", load_scenario)
    app.router.add_get("/_admin/scenario", get_scenario)
    app.router.add_delete("/_admin/scenario", clear_scenario)
    app.router.add_get("/_admin/attempts", attempts)
    app.router.add_delete("/_admin/attempts", clear_attempts)
    app.router.add_post("/_admin/reset", reset)
    app.router.add_get("/_admin/tool_faults", get_tool_faults)
    app.router.add_put("/_admin/tool_faults/{tool}", set_tool_faults)
    app.router.add_post("/_admin/tool_faults/{tool}", set_tool_faults)
    app.router.add_delete("/_admin/tool_faults", clear_tool_faults)
    app.router.add_delete("/_admin/tool_faults/{tool}", clear_tool_faults)
    app.router.add_get("/_admin/effects", effects)
    app.router.add_get("/_admin/accuracy", get_accuracy)
    app.router.add_put("/_admin/accuracy/{endpoint}", set_accuracy)
    app.router.add_post("/_admin/accuracy/{endpoint}", set_accuracy)
    app.router.add_delete("/_admin/accuracy", reset_accuracy)
    app.router.add_delete("/_admin/accuracy/{endpoint}", reset_accuracy)
