"""Deterministic JSON-Schema instance generation, and its deliberate opposite.

:func:`generate_instance` builds a value that satisfies a JSON Schema (the subset LLM
structured-output APIs use: objects, arrays, strings, numbers, booleans, null, enum,
const, ``$ref`` into ``$defs``/``definitions``, ``anyOf``/``oneOf``/``allOf``, type
lists and Gemini's upper-case OpenAPI types with ``nullable``). ``pattern`` and
``uniqueItems`` on non-enum items are not solved. :func:`violate_schema` returns a value
that breaks the schema in the way models usually do: a missing required field or a
wrong type. Both are driven by a seeded ``random.Random`` so replies are reproducible.
"""

from __future__ import annotations

import copy
import random
from typing import Any

_MAX_DEPTH = 6
WORDS = (
    "amber basalt cedar delta ember fjord granite harbor iris juniper kestrel lagoon meadow "
    "nectar orchid prairie quartz river summit tundra upland valley willow xenon yarrow zephyr "
    "anchor beacon canyon dune estuary falcon glacier heron island jasper kelp lantern marble "
    "nimbus oasis pebble quiver reef sierra tide umber vista wren yonder zenith atlas bramble "
    "cobalt drift echo flint grove hollow indigo jade knoll lumen mesa north onyx pine ridge "
    "slate thistle ursa vale wharf yew zinc alder birch coral dawn elm fern gale hazel ivy"
).split()


def words(rng: random.Random, n: int) -> str:
    """``n`` words from the simulator's vocabulary, space separated."""
    return " ".join(rng.choice(WORDS) for _ in range(max(0, n)))


def normalize_schema(schema: Any) -> Any:
    """Lower-case Gemini/OpenAPI type names and turn ``nullable`` into a type list."""
    if isinstance(schema, list):
        return [normalize_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: normalize_schema(v) for k, v in schema.items()}
    t = out.get("type")
    if isinstance(t, str):
        out["type"] = t.lower()
    elif isinstance(t, list):
        out["type"] = [x.lower() if isinstance(x, str) else x for x in t]
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while "$ref" in schema and seen < 32:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise ValueError(f"only local $ref is supported, got {ref!r}")
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        merged = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **merged}
        seen += 1
    return schema


def _merge_all_of(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    if "allOf" not in schema:
        return schema
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        part = _merge_all_of(_resolve(part, root), root)
        for k, v in part.items():
            if k == "properties":
                merged.setdefault("properties", {}).update(v)
            elif k == "required":
                merged["required"] = sorted({*merged.get("required", []), *v})
            else:
                merged.setdefault(k, v)
    return merged


def _types(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type")
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    if isinstance(t, str):
        return [t]
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return ["object"]
    if "items" in schema or "prefixItems" in schema:
        return ["array"]
    return []


def generate_instance(schema: dict[str, Any], rng: random.Random) -> Any:
    """Return a value that validates against ``schema``."""
    schema = normalize_schema(schema)
    return _gen(schema, schema, rng, 0)


def _gen(schema: Any, root: dict[str, Any], rng: random.Random, depth: int) -> Any:
    if schema is True or schema is None or schema == {}:
        return words(rng, 2)
    if schema is False:
        raise ValueError("schema 'false' admits no instance")
    schema = _merge_all_of(_resolve(schema, root), root)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if "enum" in schema:
        return copy.deepcopy(rng.choice(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_resolve(o, root) for o in schema[key]]
            non_null = [o for o in options if _types(o) != ["null"]]
            # Deep in a recursive schema prefer null so generation terminates.
            pick = options[0] if depth >= _MAX_DEPTH or not non_null else non_null[0]
            return _gen(pick, root, rng, depth + 1)
    types = _types(schema)
    non_null = [t for t in types if t != "null"]
    if "null" in types and (depth >= _MAX_DEPTH or not non_null):
        return None
    kind = non_null[0] if non_null else "string"
    return _GENERATORS[kind](schema, root, rng, depth)


def _gen_object(schema: dict[str, Any], root: dict[str, Any], rng: random.Random, depth: int):
    props: dict[str, Any] = schema.get("properties", {})
    required = list(schema.get("required", []))
    out: dict[str, Any] = {}
    for name, sub in props.items():
        if depth >= _MAX_DEPTH and name not in required:
            continue
        out[name] = _gen(sub, root, rng, depth + 1)
    for name in required:
        if name not in out:
            extra = schema.get("additionalProperties")
            out[name] = _gen(extra if isinstance(extra, dict) else {}, root, rng, depth + 1)
    return out


def _gen_array(schema: dict[str, Any], root: dict[str, Any], rng: random.Random, depth: int):
    prefix = schema.get("prefixItems", [])
    lo = int(schema.get("minItems", 0))
    hi = int(schema.get("maxItems", max(lo, 3)))
    n = max(lo, min(hi, 0 if depth >= _MAX_DEPTH else 2))
    n = max(n, min(len(prefix), hi))
    items = schema.get("items", {})
    out = [_gen(prefix[i], root, rng, depth + 1) for i in range(min(len(prefix), n))]
    item_schema = _resolve(items, root) if isinstance(items, dict) else {}
    if schema.get("uniqueItems") and "enum" in item_schema:
        pool = [v for v in item_schema["enum"] if v not in out]
        rng.shuffle(pool)
        return out + pool[: n - len(out)]
    while len(out) < n:
        out.append(_gen(items if isinstance(items, dict) else {}, root, rng, depth + 1))
    return out


_FORMATS = {
    "date-time": "2025-01-15T12:00:00Z",
    "date": "2025-01-15",
    "time": "12:00:00Z",
    "email": "agent@example.com",
    "uri": "https://example.com/resource",
    "url": "https://example.com/resource",
    "uuid": "123e4567-e89b-42d3-a456-426614174000",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
}


def _gen_string(schema: dict[str, Any], root: dict[str, Any], rng: random.Random, depth: int):
    fmt = schema.get("format")
    if fmt in _FORMATS:
        return _FORMATS[fmt]
    lo = int(schema.get("minLength", 0))
    hi = schema.get("maxLength")
    text = words(rng, rng.randint(2, 6))
    while len(text) < lo:
        text += " " + words(rng, 3)
    if hi is not None:
        text = text[: int(hi)].rstrip() or text[: int(hi)]
        text = text.ljust(lo, "x")
    return text


def _gen_number(schema: dict[str, Any], root: dict[str, Any], rng: random.Random, depth: int):
    integer = "integer" in _types(schema) and "number" not in _types(schema)
    lo = schema.get("minimum")
    hi = schema.get("maximum")
    xlo = schema.get("exclusiveMinimum")
    xhi = schema.get("exclusiveMaximum")
    # draft-4 style boolean exclusives
    if xlo is True:
        xlo, lo = lo, None
    if xhi is True:
        xhi, hi = hi, None
    if xlo is False:
        xlo = None
    if xhi is False:
        xhi = None
    low = lo if lo is not None else (xlo if xlo is not None else None)
    high = hi if hi is not None else (xhi if xhi is not None else None)
    if low is None and high is None:
        low, high = 0, 100
    elif low is None:
        low = high - 100
    elif high is None:
        high = low + 100
    step = schema.get("multipleOf")
    if integer:
        ilo = int(low) + (1 if xlo is not None and int(low) == xlo else 0)
        ihi = int(high) - (1 if xhi is not None and int(high) == xhi else 0)
        value: float = rng.randint(ilo, max(ilo, ihi))
        if step:
            value = (value // step) * step
            if value < ilo:
                value += step
            value = int(value)
        return value
    value = rng.uniform(float(low), float(high))
    if step:
        value = round(value / step) * step
        if value < low or (xlo is not None and value <= xlo):
            value += step
        if value > high or (xhi is not None and value >= xhi):
            value -= step
        return value
    value = round(value, 3)
    if xlo is not None and value <= xlo:
        value = (float(low) + float(high)) / 2
    if xhi is not None and value >= xhi:
        value = (float(low) + float(high)) / 2
    return value


def _gen_boolean(schema: dict[str, Any], root: dict[str, Any], rng: random.Random, depth: int):
    return rng.random() < 0.5


def _gen_null(schema: dict[str, Any], root: dict[str, Any], rng: random.Random, depth: int):
    return None


_GENERATORS = {
    "object": _gen_object,
    "array": _gen_array,
    "string": _gen_string,
    "integer": _gen_number,
    "number": _gen_number,
    "boolean": _gen_boolean,
    "null": _gen_null,
}


def violate_schema(schema: dict[str, Any], rng: random.Random) -> Any:
    """Return a JSON value that does *not* validate against ``schema``.

    Prefers the realistic failures: drop a required field, else give the first property
    the wrong type, else return a value of a type the schema does not allow.
    """
    schema = normalize_schema(schema)
    resolved = _merge_all_of(_resolve(schema, schema), schema)
    types = _types(resolved)
    if "object" in types or not types:
        instance = _gen(resolved, schema, rng, 0)
        if isinstance(instance, dict):
            required = [r for r in resolved.get("required", []) if r in instance]
            if required:
                del instance[required[0]]
                return instance
            for name, sub in resolved.get("properties", {}).items():
                wrong = _wrong_value(_resolve(sub, schema))
                if wrong is not _NO_WRONG_VALUE:
                    instance[name] = wrong
                    return instance
        if types:
            return ["schema", "violation"]
    wrong = _wrong_value(resolved)
    return "schema violation" if wrong is _NO_WRONG_VALUE else wrong


_NO_WRONG_VALUE = object()
_CANDIDATES: tuple[tuple[str, Any], ...] = (
    ("number", 12345),
    ("string", "schema-violation"),
    ("boolean", True),
    ("object", {"unexpected": True}),
    ("array", ["unexpected"]),
    ("null", None),
)


def _wrong_value(schema: dict[str, Any]) -> Any:
    """A value whose JSON type the (resolved) sub-schema does not allow, if there is one."""
    if "enum" in schema or "const" in schema:
        return "__not_an_allowed_value__"
    allowed = set(_types(schema))
    if not allowed:
        return _NO_WRONG_VALUE
    if "integer" in allowed:
        allowed.add("number")
    for json_type, value in _CANDIDATES:
        if json_type not in allowed:
            return value
    return _NO_WRONG_VALUE
