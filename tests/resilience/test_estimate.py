"""The token estimator: ~4 ASCII chars per token, corrected for non-ASCII text."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.estimate import (
    WIDE_SCRIPT_START,
    estimate_request_tokens,
    estimate_tokens,
)
from agent_failover.resilience.models import ChatRequest, Message, ToolCall


def test_empty_and_tiny():
    """Empty text is 0 tokens; any non-empty text is at least 1."""
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1


def test_ascii_is_four_chars_per_token():
    """English-like ASCII costs about a token per four characters."""
    assert estimate_tokens("x" * 400) == 100


def test_cjk_costs_a_token_per_character():
    """CJK text costs about one token per character, far more than len/4."""
    assert estimate_tokens("世界" * 50) == 100


def test_accented_text_costs_more_than_ascii():
    """Non-ASCII letters outside the wide scripts cost a token per two characters."""
    assert estimate_tokens("é" * 100) == 50 > estimate_tokens("e" * 100)


def _per_character(text: str) -> int:
    """The estimate counted one character at a time, as the rule states it."""
    if not text:
        return 0
    ascii_chars = wide = other = 0
    for ch in text:
        if ord(ch) < 0x80:
            ascii_chars += 1
        elif ord(ch) >= WIDE_SCRIPT_START:
            wide += 1
        else:
            other += 1
    return max(1, math.ceil(ascii_chars / 4 + other / 2 + wide))


_EDGES = "\x00\x7f\x80\u00e9\u2e7f\u2e80\u4e16\ud800\udfff\uffff\U00010000\U0010ffff"


@given(st.text(alphabet=st.sampled_from(_EDGES) | st.characters(), max_size=300))
def test_estimate_counts_as_the_rule_per_character(text):
    """The estimate counted in C (ASCII fast path, wide runs by regex) is the per-character
    rule's, at every class boundary, lone surrogates included."""
    assert estimate_tokens(text) == _per_character(text)


@given(st.text(max_size=200), st.text(max_size=200))
def test_estimate_is_roughly_additive(a, b):
    """The estimate of a concatenation is within rounding of the sum of the parts."""
    assert estimate_tokens(a) + estimate_tokens(b) - 2 <= estimate_tokens(a + b)
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)


def test_request_estimate_counts_every_part():
    """System, messages, tool calls, prefill and schema all add to the request estimate."""
    base = ChatRequest(messages=[Message(role="user", content="hello there")])
    bigger = base.model_copy(
        update={
            "system": "x" * 400,
            "prefill": "y" * 40,
            "json_schema": {"type": "object"},
            "messages": [
                *base.messages,
                Message(
                    role="assistant", tool_calls=[ToolCall(id="1", name="f", arguments={"a": 1})]
                ),
            ],
        }
    )
    assert estimate_request_tokens(bigger) > estimate_request_tokens(base) + 100
