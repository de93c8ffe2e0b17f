"""Wire formats the simulator speaks: one module per provider API, one shared interface.

Each module parses its provider's request into a :class:`sim.content.ParsedRequest`
and renders replies, stream events and error bodies exactly as that provider does, so
the official SDKs and the project's adapters cannot tell the simulator from the real
thing. Cloud-hosted endpoints speak their cloud's variant: Azure OpenAI deployments,
Bedrock (Converse and InvokeModel, AWS event-stream framing), Vertex AI (Gemini and
Claude publishers); :func:`wire_for` picks the wire for an endpoint.
"""

from __future__ import annotations

from agent_failover.resilience.endpoint import Cloud, ProviderKind
from agent_failover.testing.sim.config import SimEndpoint
from agent_failover.testing.sim.wire.anthropic import AnthropicWire
from agent_failover.testing.sim.wire.azure import AzureOpenAIWire
from agent_failover.testing.sim.wire.base import ErrorCategory, Operation, SimError, WireFormat
from agent_failover.testing.sim.wire.bedrock import BedrockWire
from agent_failover.testing.sim.wire.gemini import GeminiWire
from agent_failover.testing.sim.wire.openai import OpenAIWire
from agent_failover.testing.sim.wire.vertex import VertexWire

#: The vendors' own APIs, by wire format.
WIRES: dict[ProviderKind, WireFormat] = {
    ProviderKind.ANTHROPIC: AnthropicWire(),
    ProviderKind.OPENAI: OpenAIWire(),
    ProviderKind.GEMINI: GeminiWire(),
    ProviderKind.BEDROCK: BedrockWire(),
}
#: Cloud-hosted variants.
CLOUD_WIRES: dict[Cloud, WireFormat] = {
    Cloud.AZURE: AzureOpenAIWire(),
    Cloud.AWS: WIRES[ProviderKind.BEDROCK],
    Cloud.GCP: VertexWire(),
}


def wire_for(endpoint: SimEndpoint) -> WireFormat:
    """The wire ``endpoint`` speaks: its cloud's variant, else its provider's own API."""
    if endpoint.cloud is not None:
        return CLOUD_WIRES[endpoint.cloud]
    return WIRES[endpoint.kind]


__all__ = [
    "CLOUD_WIRES",
    "WIRES",
    "ErrorCategory",
    "Operation",
    "SimError",
    "WireFormat",
    "wire_for",
]
