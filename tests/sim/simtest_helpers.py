"""Helpers shared by the simulator tests: request bodies, URLs and an SSE parser."""

from __future__ import annotations

import json
from typing import Any

from agent_failover.testing.sim.server import RunningSimulator


def parse_sse(raw: str) -> list[tuple[str | None, str]]:
    """Split an SSE body into (event, data) pairs."""
    events: list[tuple[str | None, str]] = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[len("event:") :].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:") :].strip())
        events.append((event, "\n".join(data)))
    return events


def json_events(raw: str) -> list[tuple[str | None, Any]]:
    """SSE events whose data is JSON, decoded (``[DONE]`` and bad lines are skipped)."""
    out = []
    for event, data in parse_sse(raw):
        try:
            out.append((event, json.loads(data)))
        except ValueError:
            continue
    return out


ANTHROPIC_MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-4.1"
GEMINI_MODEL = "gemini-2.5-flash"


def anthropic_body(text: str = "Tell me about rivers", **extra: Any) -> dict[str, Any]:
    """A minimal Messages request."""
    return {
        "model": ANTHROPIC_MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


def openai_body(text: str = "Tell me about rivers", **extra: Any) -> dict[str, Any]:
    """A minimal Chat Completions request."""
    return {"model": OPENAI_MODEL, "messages": [{"role": "user", "content": text}], **extra}


def gemini_body(text: str = "Tell me about rivers", **extra: Any) -> dict[str, Any]:
    """A minimal generateContent request."""
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], **extra}


def anthropic_url(sim: RunningSimulator, name: str = "anthropic-us-east") -> str:
    """The Messages URL of an Anthropic endpoint."""
    return f"{sim.base_url(name)}/v1/messages"


def openai_url(sim: RunningSimulator, name: str = "openai-us") -> str:
    """The Chat Completions URL of an OpenAI-style endpoint."""
    return f"{sim.base_url(name)}/chat/completions"


def gemini_url(sim: RunningSimulator, stream: bool = False, model: str = GEMINI_MODEL) -> str:
    """The generateContent (or SSE stream) URL of the Gemini endpoint."""
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"{sim.base_url('gemini-flash')}/v1beta/models/{model}:{method}"
