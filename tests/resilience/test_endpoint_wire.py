"""``EndpointConfig.wire``: the API that validates a request (the 400 rule of issue 22 §2.3)."""

from __future__ import annotations

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy


def test_wire_is_format_at_organisation() -> None:
    """Regions of one API share a wire; the same format at another organisation does not."""
    eps = load_policy(DEFAULT_POLICY_PATH, env={}).endpoints
    assert eps["anthropic-us-east"].wire == eps["anthropic-eu-west"].wire == "anthropic@anthropic"
    assert eps["vertex-europe-west1"].wire == "anthropic@google"
    assert eps["bedrock-us-west-2"].wire == "bedrock@aws"
    assert eps["openai-us"].wire != eps["cheap-mini"].wire == "openai@mistral"
