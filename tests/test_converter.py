"""The plugin's payload converter: the SDK's pydantic converter byte for byte, built once."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import (
    PydanticJSONPlainPayloadConverter,
    PydanticPayloadConverter,
    pydantic_data_converter,
)
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    DefaultPayloadConverter,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)

from agent_failover.activities.models import (
    CacheWrite,
    CallModelInput,
    HeldLease,
    RoleContext,
)
from agent_failover.activities.policy_registry import policy_ref
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.converter import (
    SHARED_ADAPTERS,
    FailoverPayloadConverter,
    failover_pydantic_data_converter,
)
from agent_failover.plugin import with_pydantic
from agent_failover.resilience.cachekey import cache_key
from agent_failover.resilience.contracts import (
    AgentOutput,
    Capability,
    HealthSnapshot,
    RecentSample,
    RouteHealth,
    WindowStats,
)
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.testing.roles import with_test_roles

_CONTEXT = ActivitySerializationContext(
    namespace="default",
    activity_id="1",
    activity_type="call_model",
    activity_task_queue="q",
    workflow_id="wf",
    workflow_type="W",
    is_local=False,
)


def _role_context() -> RoleContext:
    sub = with_test_roles(load_policy(DEFAULT_POLICY_PATH)).subset_for("plain")
    first = next(iter(sub.endpoints))
    routes = {
        r: RouteHealth(route=r, stats=WindowStats(window_s=60.0, p95_ms=120.1256, calls=3))
        for r in sub.endpoints
    }
    routes[first] = RouteHealth(
        route=first,
        stats=WindowStats(window_s=60.0, latency_samples=3),
        recent=[RecentSample(at=1.5, latency_ms=99.25, ok=True)],
        sla_since=1.0,
    )
    return RoleContext(
        role=sub.role("plain"),
        policy=sub,
        snapshot=HealthSnapshot(taken_at=2.0, routes=routes),
        task_queue="q",
        overflow_queue="q-llm-core",
        policy_ref=policy_ref(sub),
        lease=HeldLease(route=first, id="l1", until=9.0),
    ).for_history(newest_observation=False, own_queue="q")


def _values() -> list[tuple[Any, Any]]:
    """Our models and plain values, each with the hint it decodes with."""
    request = ChatRequest(system="Be brief.", messages=[Message(role="user", content="hï")])
    attempt = CallModelInput(
        role="plain",
        route="r1",
        request=request,
        ttft_budget_ms=2000.0,
        idle_budget_ms=2000.0,
        timeout_ms=10000.0,
        now=1.0,
        cache=CacheWrite(key=cache_key("plain", request), keep_s=1800.0),
        lease=HeldLease(route="r1", id="l1", until=9.0),
    )
    output = AgentOutput(
        role="plain", content="ok", capability=Capability.FULL, tier=0, confidence=0.9
    )
    return [
        (output, AgentOutput),
        (attempt, CallModelInput),
        (_role_context(), RoleContext),
        (request, ChatRequest),
        ("text ✓", str),
        ({"a": [1, 2.5, None], "b": "c"}, dict[str, Any]),
        ({"a": 1}, None),
        (None, None),
        (b"\x00bytes", bytes),
    ]


def test_payloads_are_the_sdks_byte_for_byte_and_round_trip() -> None:
    """Every value encodes to the SDK converter's exact payload (encoding and JSON), and
    each side decodes the other's payloads to the same values."""
    sdk, ours = PydanticPayloadConverter(), FailoverPayloadConverter()
    assert list(ours.converters) == list(sdk.converters)  # same encodings, same order
    for value, hint in _values():
        [theirs] = sdk.to_payloads([value])
        [mine] = ours.to_payloads([value])
        assert mine.SerializeToString(deterministic=True) == theirs.SerializeToString(
            deterministic=True
        ), value
        hints = [hint] if hint is not None else None
        assert ours.from_payloads([theirs], hints) == sdk.from_payloads([theirs], hints)
        assert sdk.from_payloads([mine], hints) == ours.from_payloads([mine], hints)


@pytest.fixture
def counted() -> Iterator[dict[str, int]]:
    """Constructions of the SDK's JSON converter and of TypeAdapters while the test runs."""
    counts = {"json": 0, "adapters": 0}
    patched = []
    for cls, key in (
        (PydanticJSONPlainPayloadConverter, "json"),
        (pydantic.TypeAdapter, "adapters"),
    ):
        original = cls.__init__

        def init(self: Any, *args: Any, _o: Any = original, _k: str = key, **kw: Any) -> None:
            counts[_k] += 1
            _o(self, *args, **kw)

        patched.append((cls, original))
        cls.__init__ = init  # type: ignore[method-assign]
    yield counts
    for cls, original in patched:
        cls.__init__ = original  # type: ignore[method-assign]


class _ContextCodec(PayloadCodec, WithSerializationContext):
    """A codec that takes a serialization context: the data converter clones itself."""

    async def encode(self, payloads: Any) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Any) -> list[Payload]:
        return list(payloads)

    def with_context(self, context: SerializationContext) -> _ContextCodec:
        return _ContextCodec()


def test_a_context_clone_builds_no_json_converter(counted: dict[str, int]) -> None:
    """``with_context`` clones the data converter (its codec takes a context), and the
    clone's payload converter builds no JSON converter; the SDK's builds one per clone."""
    for cls, built in ((PydanticPayloadConverter, 1), (FailoverPayloadConverter, 0)):
        conv = DataConverter(payload_converter_class=cls, payload_codec=_ContextCodec())
        counted["json"] = 0
        clones = [conv.with_context(_CONTEXT) for _ in range(5)]
        assert all(c is not conv for c in clones)
        assert counted["json"] == 5 * built, cls


def test_one_type_adapter_per_type_across_runs(counted: dict[str, int]) -> None:
    """A converter per workflow run (the worker's factory) decodes without a type hint,
    with plain hints and with our models: one TypeAdapter per plain hint for the process,
    none for a model; the SDK's builds them again in every run."""
    SHARED_ADAPTERS.clear()
    payloads = {hint: FailoverPayloadConverter().to_payload(v) for v, hint in _values()}
    conv = failover_pydantic_data_converter()
    for _ in range(20):
        per_run = conv._new_payload_converter()
        for hint, payload in payloads.items():
            per_run.from_payloads([payload], [hint] if hint is not None else None)
    plain_hints = {str, dict[str, Any], bytes, None}  # bytes and None: binary encodings
    assert counted["adapters"] == len(plain_hints) - 2  # Any (no hint), str, dict[str, Any]
    counted["adapters"] = 0
    for _ in range(3):
        PydanticPayloadConverter().from_payloads([payloads[str]], [str])
    assert counted["adapters"] == 3


def test_a_users_own_type_is_cached_per_converter_not_for_the_process() -> None:
    """A type from a user's module (the sandbox may re-create it every run) is never kept
    process-wide, so a run's classes are never kept alive by the shared cache."""

    @dataclasses.dataclass
    class Mine:
        x: int

    conv = FailoverPayloadConverter()
    payload = conv.to_payload(Mine(1))
    assert conv.from_payload(payload, Mine) == Mine(1)
    assert conv.from_payload(payload, list[Mine] | Mine) == Mine(1)
    assert SHARED_ADAPTERS.get(Mine) is None and SHARED_ADAPTERS.get(list[Mine] | Mine) is None


def test_with_pydantic_installs_ours_and_keeps_a_custom_converter() -> None:
    """The SDK's default and pydantic converters become ours (codec kept); ours stays as it
    is; a user's own payload converter is left alone."""

    class Custom(DefaultPayloadConverter):
        pass

    codec = _ContextCodec()
    for given in (None, DataConverter(payload_codec=codec), pydantic_data_converter):
        assert with_pydantic(given).payload_converter_class is FailoverPayloadConverter
    assert with_pydantic(DataConverter(payload_codec=codec)).payload_codec is codec
    ours = failover_pydantic_data_converter()
    assert with_pydantic(ours) is ours
    custom = DataConverter(payload_converter_class=Custom)
    assert with_pydantic(custom) is custom


def test_pickles_like_the_sdks() -> None:
    """The converter and a data converter holding it pickle and decode after (the SDK's
    pickles too, without its adapters)."""
    conv = pickle.loads(pickle.dumps(failover_pydantic_data_converter()))
    assert isinstance(conv.payload_converter._inner_payload_converter, FailoverPayloadConverter)  # type: ignore[attr-defined]
    for value, hint in _values()[-5:]:
        payload = conv.payload_converter.to_payload(value)
        assert conv.payload_converter.from_payload(payload, hint) == value
    again = pickle.loads(pickle.dumps(FailoverPayloadConverter()))
    assert list(again.converters) == list(PydanticPayloadConverter().converters)


def test_follows_the_sdks_default_converters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built from ``DefaultPayloadConverter.default_encoding_payload_converters`` as the
    SDK's is, so a process that changes them gets the same encodings in both."""
    defaults = DefaultPayloadConverter.default_encoding_payload_converters
    monkeypatch.setattr(
        DefaultPayloadConverter, "default_encoding_payload_converters", defaults[::-1][:3]
    )
    ours, sdk = FailoverPayloadConverter(), PydanticPayloadConverter()
    assert (
        list(ours.converters) == list(sdk.converters) == [b"json/plain", *list(ours.converters)[1:]]
    )
    assert [type(c) for c in ours.converters.values()][1:] == [
        type(c) for c in sdk.converters.values()
    ][1:]


def test_a_deferred_model_is_built_by_its_first_decode(counted: dict[str, int]) -> None:
    """A ``defer_build`` model decodes with its own validator (built on first use, as by
    ``model_validate_json``), without a TypeAdapter."""

    class Later(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(defer_build=True)
        x: int

    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'{"x": 1}')
    back = FailoverPayloadConverter().from_payload(payload, Later)
    assert counted["adapters"] == 0
    assert back == Later(x=1)
    with pytest.raises(pydantic.ValidationError):
        FailoverPayloadConverter().from_payload(
            Payload(metadata=payload.metadata, data=b"{}"), Later
        )
