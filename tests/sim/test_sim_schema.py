"""JSON-Schema conformity of generated instances, and that violations really violate."""

from __future__ import annotations

import random
from typing import Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from agent_failover.testing.sim.schema_gen import (
    generate_instance,
    normalize_schema,
    violate_schema,
)


class Subtask(BaseModel):
    id: str = Field(min_length=2, max_length=12)
    role: Literal["researcher", "coder", "analyst"]
    priority: int = Field(ge=1, le=5)
    depends_on: list[str] = Field(default_factory=list, max_length=3)
    estimate_h: float | None = Field(default=None, gt=0, lt=10)


class Plan(BaseModel):
    goal: str
    subtasks: list[Subtask] = Field(min_length=1, max_length=4)
    confidence: float = Field(ge=0.0, le=1.0)
    approved: bool


class Tree(BaseModel):
    name: str
    children: list[Tree] = Field(default_factory=list)


SCHEMAS = {
    "pydantic_plan_with_defs": Plan.model_json_schema(),
    "recursive_tree": Tree.model_json_schema(),
    "scalar_string": {"type": "string", "minLength": 40, "maxLength": 50},
    "integer_exclusive": {"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 5},
    "number_multiple": {"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.25},
    "enum_array_unique": {
        "type": "array",
        "items": {"enum": ["a", "b", "c"]},
        "minItems": 3,
        "uniqueItems": True,
    },
    "type_list_nullable": {
        "type": "object",
        "properties": {"x": {"type": ["string", "null"]}, "y": {"const": 7}},
        "required": ["x", "y"],
    },
    "all_of_merge": {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "boolean"}}, "required": ["b"]},
        ]
    },
    "formats": {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "who": {"type": "string", "format": "email"},
            "id": {"type": "string", "format": "uuid"},
        },
        "required": ["when", "who", "id"],
    },
    "prefix_items": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
    "required_without_properties": {"type": "object", "required": ["anything"]},
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_generated_instances_validate(name, seed):
    """Every generated instance satisfies its schema, for several seeds."""
    schema = SCHEMAS[name]
    jsonschema.validate(generate_instance(schema, random.Random(seed)), schema)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_generation_is_deterministic(name):
    """The same seed produces the same instance."""
    schema = SCHEMAS[name]
    assert generate_instance(schema, random.Random(9)) == generate_instance(
        schema, random.Random(9)
    )


@pytest.mark.parametrize(
    "name",
    sorted(n for n in SCHEMAS if n not in ("prefix_items",)),
)
def test_violations_do_not_validate(name):
    """violate_schema returns JSON that the schema rejects."""
    schema = SCHEMAS[name]
    bad = violate_schema(schema, random.Random(0))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_gemini_openapi_schema_is_normalised():
    """Upper-case OpenAPI types and 'nullable' become JSON Schema types."""
    gemini = {
        "type": "OBJECT",
        "properties": {"n": {"type": "INTEGER", "nullable": True}},
        "required": ["n"],
    }
    norm = normalize_schema(gemini)
    assert norm["type"] == "object"
    assert norm["properties"]["n"]["type"] == ["integer", "null"]
    jsonschema.validate(generate_instance(gemini, random.Random(0)), norm)
