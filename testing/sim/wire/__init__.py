"""Wire formats the simulator speaks: one module per provider API, one shared interface.

Each module parses its provider's request into a :class:`sim.content.ParsedRequest`
and renders replies, SSE events and error bodies exactly as that provider does, so the
official SDKs and the project's adapters cannot tell the simulator from the real thing.
"""

from __future__ import annotations

from agent_failover.providers.endpoint import ProviderKind
from agent_failover.testing.sim.wire.anthropic import AnthropicWire
from agent_failover.testing.sim.wire.base import ErrorCategory, Operation, SimError, WireFormat
from agent_failover.testing.sim.wire.gemini import GeminiWire
from agent_failover.testing.sim.wire.openai import OpenAIWire

WIRES: dict[ProviderKind, WireFormat] = {
    ProviderKind.ANTHROPIC: AnthropicWire(),
    ProviderKind.OPENAI: OpenAIWire(),
    ProviderKind.GEMINI: GeminiWire(),
}

__all__ = ["WIRES", "ErrorCategory", "Operation", "SimError", "WireFormat"]
