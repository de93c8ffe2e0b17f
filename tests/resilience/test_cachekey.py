"""Response-cache keys: equal for equivalent requests, different when the answer would differ."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.cachekey import cache_key, normalized_request
from agent_failover.resilience.models import ChatRequest, Message, Priority
from tests.resilience.helpers import PROPERTY


def req(text: str = "Summarise   the\nreport", **kw) -> ChatRequest:
    """A one-message request."""
    return ChatRequest(
        system="You are  terse.", messages=[Message(role="user", content=text)], **kw
    )


def test_ignores_whitespace_stream_and_priority() -> None:
    """Reformatted text, the stream flag and priorities do not change the key."""
    a = req()
    b = ChatRequest(
        system=" You are terse. ",
        messages=[Message(role="user", content="Summarise the report", priority=Priority.CRITICAL)],
        stream=False,
    )
    assert cache_key("critic", a) == cache_key("critic", b)
    assert len(cache_key("critic", a)) == 64


def test_changes_with_role_and_generation_parameters() -> None:
    """Role, text, max_tokens, temperature, schema and stop all change the key."""
    base = cache_key("critic", req())
    variants = [
        cache_key("planner", req()),
        cache_key("critic", req("Summarise the memo")),
        cache_key("critic", req(max_tokens=100)),
        cache_key("critic", req(temperature=0.5)),
        cache_key("critic", req(json_schema={"type": "object"})),
        cache_key("critic", req(stop=["END"])),
    ]
    assert base not in variants and len(set(variants)) == len(variants)


@PROPERTY
@given(st.dictionaries(st.text(max_size=5), st.integers(), max_size=6))
def test_schema_key_order_does_not_matter(schema: dict[str, int]) -> None:
    """JSON is hashed with sorted keys, so dict order is irrelevant."""
    reordered = dict(reversed(list(schema.items())))
    assert cache_key("r", req(json_schema=schema)) == cache_key("r", req(json_schema=reordered))


@PROPERTY
@given(
    st.text(max_size=40),
    st.dictionaries(
        st.text(max_size=5), st.one_of(st.integers(), st.floats(), st.text()), max_size=4
    ),
    st.lists(st.text(max_size=5), max_size=3),
)
def test_the_key_is_the_documented_hash(text: str, schema: dict, stop: list[str]) -> None:
    """The key is SHA-256 of ``json.dumps(normalized_request, sort_keys=True, separators=(",",
    ":"), ensure_ascii=False, default=str)``: entries written under it stay readable."""
    request = req(text, json_schema=schema or None, stop=stop, temperature=0.25)
    dumped = json.dumps(
        normalized_request("r", request),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    assert cache_key("r", request) == hashlib.sha256(dumped.encode("utf-8")).hexdigest()
