"""Gemini structured output keeps the structure of pydantic-generated schemas.

Written from the Gemini API's structured-output guide and ``GenerationConfig`` reference
(https://ai.google.dev/gemini-api/docs/structured-output, "JSON Schema support";
https://ai.google.dev/api/generate-content#generationconfig, ``responseJsonSchema``):
the field takes JSON Schema with ``$ref``/``$defs``, ``anyOf``/``oneOf``, ``enum``,
``additionalProperties``, ``items`` and ``required``. Each shape below is what pydantic
emits; the test checks that the schema sent still validates exactly the instances the
original does (the same accepted and rejected examples), which a lossy conversion fails.
"""

from __future__ import annotations

import json
from enum import IntEnum
from typing import Annotated, Literal

import httpx
import jsonschema
import pytest
from pydantic import BaseModel, Field

from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.resilience.models import ChatRequest, Message
from tests.providers.wire import endpoint, gemini_json

EP = endpoint("gemini-flash")


class Node(BaseModel):
    """A recursive model."""

    name: str
    children: list[Node] = []


class Item(BaseModel):
    sku: str
    qty: int


class Order(BaseModel):
    """Nested models in a list."""

    items: list[Item]


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Pet(BaseModel):
    """A discriminated union."""

    pet: Annotated[Cat | Dog, Field(discriminator="kind")]


class Level(IntEnum):
    LOW = 1
    HIGH = 3


class Ticket(BaseModel):
    """An integer enum."""

    level: Level


class Scores(BaseModel):
    """A dict field."""

    by_name: dict[str, int]


CASES = {
    "recursive": (
        Node,
        [{"name": "a", "children": [{"name": "b", "children": []}]}],
        [{"name": "a", "children": [{"children": []}]}],
    ),
    "nested-list": (
        Order,
        [{"items": [{"sku": "x", "qty": 2}]}],
        [{"items": [{"sku": "x", "qty": "two"}]}, {"items": [{}]}],
    ),
    "discriminated-union": (
        Pet,
        [{"pet": {"kind": "cat", "lives": 9}}, {"pet": {"kind": "dog", "good": True}}],
        [{"pet": {"kind": "cow", "lives": 1}}, {"pet": {"kind": "cat", "good": True}}],
    ),
    "int-enum": (Ticket, [{"level": 1}, {"level": 3}], [{"level": 2}, {"level": "LOW"}]),
    "dict": (Scores, [{"by_name": {"a": 1}}], [{"by_name": {"a": "x"}}, {"by_name": []}]),
}


async def _sent_schema(mock_client, schema: dict) -> dict:
    client, rec = mock_client(lambda _: httpx.Response(200, json=gemini_json("{}")))
    request = ChatRequest(
        messages=[Message(role="user", content="q")], json_schema=schema, stream=False
    )
    async with client:
        await complete(client, EP, request, Budgets(total_s=5))
    config = json.loads(rec.requests[0].content)["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    return config["responseJsonSchema"]


@pytest.mark.parametrize("name", list(CASES))
async def test_pydantic_schema_keeps_its_structure(mock_client, name):
    """The schema on the wire accepts and rejects the same instances as pydantic's own."""
    model, good, bad = CASES[name]
    original = model.model_json_schema()
    sent = await _sent_schema(mock_client, original)
    for instance in good:
        model.model_validate(instance)  # the examples are right about the model
        jsonschema.validate(instance, sent)
    for instance in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(instance, sent)


async def test_refs_and_defs_are_kept(mock_client):
    """A recursive model is sent with its ``$ref`` into ``$defs``, not flattened to a title."""
    sent = await _sent_schema(mock_client, Node.model_json_schema())
    assert sent["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
