"""The payload converter :class:`~agent_failover.plugin.FailoverPlugin` installs.

Temporal's ``PydanticPayloadConverter`` on the wire: the same encodings in the same order
and the same bytes (``json/plain`` from ``pydantic_core.to_json``), so histories and
clients on the SDK's ``pydantic_data_converter`` interoperate both ways. What differs is
what it costs per payload:

* The worker builds a payload converter per workflow run (its factory is the data
  converter's ``_new_payload_converter``), and ``DataConverter.with_context`` builds and
  throws one away whenever a codec or failure converter takes a serialization context.
  The SDK's builds a ``SchemaSerializer`` and an empty TypeAdapter cache each time, so
  every run builds its adapters again (the workflow's input, each activity result).
  Here the constructor builds nothing: every instance uses one process-wide JSON converter.
* A pydantic model (or pydantic dataclass) decodes with its own validator, which is what
  ``TypeAdapter(Model).validate_json`` calls, so no adapter is built for it, and a model
  class the sandbox re-creates per run (a user's workflow module) is never kept alive.
* Other hints share one bounded cache of TypeAdapters when everything they name comes from
  the standard library, pydantic or temporalio (``Any``, ``str``, ``dict[str, Any]``...).
  A hint naming anything else (a user's dataclass, which the sandbox may re-create per
  run) keeps a cache per converter instance, as the SDK does, so it is never pinned.

It is not a ``PydanticPayloadConverter`` subclass on purpose: PydanticAI's plugin keeps a
subclass as it is, and would then lose its own converter's validation context.
"""

from __future__ import annotations

import functools
import sys
import threading
import typing
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic_core import SchemaValidator, to_json
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
)

#: Type adapters kept for process-wide hints (the SDK's default per-instance bound).
MAX_SHARED_ADAPTERS = 1024
#: Per converter instance, for hints that name a type from anywhere else.
MAX_LOCAL_ADAPTERS = 1024
#: Where a type must come from for its adapter to be kept process-wide: modules the
#: workflow sandbox never re-creates per run.
_STABLE_ROOTS = frozenset(sys.stdlib_module_names) | {
    "builtins",
    "pydantic",
    "pydantic_core",
    "temporalio",
    "typing_extensions",
    "annotated_types",
}
_ENCODING = b"json/plain"
_MAX_DEPTH = 8


def _stable(hint: Any, depth: int = 0) -> bool:
    """Whether everything ``hint`` names comes from :data:`_STABLE_ROOTS` (``Annotated``
    never: its metadata may hold a user's validator functions)."""
    if depth > _MAX_DEPTH:
        return False
    if hint is None or hint is Ellipsis:
        return True
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return False
    if origin is not None:
        args = typing.get_args(hint)
        return _stable(origin, depth + 1) and all(_stable(a, depth + 1) for a in args)
    module = getattr(hint, "__module__", None)
    if not isinstance(module, str):
        module = type(hint).__module__
    return module.partition(".")[0] in _STABLE_ROOTS


def _own_validator(hint: Any) -> Any:
    """A pydantic model's (or pydantic dataclass's) own validator: the one
    ``TypeAdapter(hint)`` would use (pydantic reads it without inheriting it). A model
    whose build was deferred (``defer_build``) hands its placeholder, which builds the
    model on first use, as ``model_validate_json`` would."""
    if not isinstance(hint, type):
        return None
    try:
        validator = hint.__dict__.get("__pydantic_validator__")
    except AttributeError:
        return None
    if isinstance(validator, SchemaValidator):
        return validator
    if validator is not None and issubclass(hint, BaseModel):
        return validator
    return None


class _SharedAdapters:
    """One bounded map of hint -> TypeAdapter for the process (oldest out first)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.built = 0
        self._adapters: dict[Any, TypeAdapter[Any]] = {}
        self._lock = threading.Lock()

    def get(self, hint: Any) -> TypeAdapter[Any] | None:
        return self._adapters.get(hint)

    def add(self, hint: Any) -> TypeAdapter[Any]:
        adapter: TypeAdapter[Any] = TypeAdapter(hint)
        with self._lock:
            self.built += 1
            known = self._adapters.get(hint)
            if known is not None:  # another thread built it meanwhile
                return known
            while len(self._adapters) >= self.maxsize:
                del self._adapters[next(iter(self._adapters))]
            self._adapters[hint] = adapter
        return adapter

    def clear(self) -> None:
        with self._lock:
            self._adapters.clear()


SHARED_ADAPTERS = _SharedAdapters(MAX_SHARED_ADAPTERS)


class FailoverJSONPlainPayloadConverter(PydanticJSONPlainPayloadConverter):
    """``PydanticJSONPlainPayloadConverter`` (default options) without its per-instance
    cost: nothing built in the constructor, adapters shared (see the module)."""

    def __init__(self) -> None:  # no SchemaSerializer, no cache: nothing to build
        self._to_json_options = None
        self._local: functools._lru_cache_wrapper[TypeAdapter[Any]] | None = None

    def __reduce__(self) -> Any:
        return (type(self), ())

    def to_payload(self, value: Any) -> Payload | None:
        """``pydantic_core.to_json``, as the SDK's converter does without options."""
        return Payload(metadata={"encoding": _ENCODING}, data=to_json(value))

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        """``TypeAdapter(type_hint).validate_json`` (``Any`` without a hint), with the
        model's own validator for a model and a kept adapter otherwise."""
        validator = _own_validator(type_hint)
        if validator is not None:
            return validator.validate_json(payload.data)
        return self._adapter(Any if type_hint is None else type_hint).validate_json(payload.data)

    def _adapter(self, hint: Any) -> TypeAdapter[Any]:
        try:
            adapter = SHARED_ADAPTERS.get(hint)
        except TypeError:  # unhashable: valid for pydantic, never cached (as the SDK)
            return TypeAdapter(hint)
        if adapter is not None:
            return adapter
        if _stable(hint):
            return SHARED_ADAPTERS.add(hint)
        if self._local is None:
            self._local = functools.lru_cache(maxsize=MAX_LOCAL_ADAPTERS)(TypeAdapter)
        return self._local(hint)


@functools.lru_cache(maxsize=4)
def _template(
    defaults: tuple[EncodingPayloadConverter, ...],
) -> dict[bytes, EncodingPayloadConverter | None]:
    """The SDK's default converters by encoding, in their order, None where the JSON one
    goes: worked out once per tuple of defaults (``isinstance`` is slow in the sandbox,
    where the worker builds a converter per run)."""
    return {
        c.encoding.encode(): None if isinstance(c, JSONPlainPayloadConverter) else c
        for c in defaults
    }


class FailoverPayloadConverter(CompositePayloadConverter):
    """The SDK's default encodings with :class:`FailoverJSONPlainPayloadConverter` for JSON,
    in ``PydanticPayloadConverter``'s order. Nullary and cheap: the data converter builds
    one per workflow run and per context clone."""

    def __init__(self) -> None:  # CompositePayloadConverter's, without the per-run work
        template = _template(DefaultPayloadConverter.default_encoding_payload_converters)
        self.converters = {
            k: FailoverJSONPlainPayloadConverter() if c is None else c for k, c in template.items()
        }


@functools.cache
def failover_pydantic_data_converter() -> DataConverter:
    """``pydantic_data_converter`` with :class:`FailoverPayloadConverter`: one per process."""
    return DataConverter(payload_converter_class=FailoverPayloadConverter)
