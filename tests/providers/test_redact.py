"""Credential redaction of free text: query values, header dumps, key-shaped tokens."""

from __future__ import annotations

import pytest

from agent_failover.providers.redact import REDACTED, is_secret, redact_text

KEY = "SENTINEL-k3y-value-42"


@pytest.mark.parametrize(
    "text",
    [
        f'HTTP Request: POST http://h/v1beta/models/m:generateContent?alt=sse&key={KEY} "200 OK"',
        f"https://h/x?api_key={KEY}",
        f"https://h/x?api-key={KEY}&b=1",
        f"https://h/x?access_token={KEY}",
        f"https://h/x?token={KEY}#frag",
        f"https://blob/c?sv=2024&sig={KEY}",
        f"https://s3/o?X-Amz-Credential={KEY}&X-Amz-Signature={KEY}",
        f"Authorization: Bearer {KEY}",
        f"{{'authorization': 'Bearer {KEY}', 'accept': '*/*'}}",
        f"[(b'x-api-key', b'{KEY}'), (b'accept', b'*/*')]",
        f"Headers({{'x-goog-api-key': '{KEY}'}})",
        f"api-key: {KEY}",
        f'"Proxy-Authorization": "Basic {KEY}"',
    ],
)
def test_named_secrets_are_masked(text: str) -> None:
    out = redact_text(text)
    assert KEY not in out and REDACTED in out


def test_other_values_and_names_stay() -> None:
    text = "GET https://h/v1/models?alt=sse&page=2 accept: */* cache key: abc"
    assert redact_text(text) == text


def test_key_shaped_and_literal_secrets() -> None:
    out = redact_text("echoed sk-ant-abcdef123456 and AIzaSyA1234567890abc", ())
    assert "sk-ant" not in out and "AIza" not in out
    assert redact_text("value plainsecret99 here", ["plainsecret99"]) == "value <redacted> here"
    assert redact_text("short abc", ["abc"]) == "short abc"  # too short to mask verbatim


def test_is_secret_names() -> None:
    assert is_secret("sig") and is_secret("X-Amz-Signature") and is_secret("Authorization")
    assert not is_secret("alt") and not is_secret("page")
