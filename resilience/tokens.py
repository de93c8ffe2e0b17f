"""Token estimates for fitting a request into a context window, without a tokenizer.

Triage and the planner only need a conservative size, not an exact count, and a real
tokenizer per vendor would be IO-heavy and model-specific. The default heuristic:

* text costs ``ceil(ascii_chars / 4)`` tokens plus one token per non-ASCII character
  (CJK, emoji and accented text tokenize far worse than English);
* every message adds ``MESSAGE_OVERHEAD_TOKENS`` for role markers, the request adds
  ``REQUEST_OVERHEAD_TOKENS``; tool calls count their name and JSON arguments as text;
  the system prompt, JSON schema and prefill count as text too.

:func:`estimate_tokens` is ``resilience.estimate.estimate_request_tokens`` (part of the
pure provider vocabulary the core may import), so the size the workflow puts in the
planner's facts and the size triage cuts to agree. :func:`heuristic_tokens` is the
simpler per-message estimate triage uses to rank messages.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from agent_failover.resilience.estimate import estimate_request_tokens
from agent_failover.resilience.models import ChatRequest, Message

MESSAGE_OVERHEAD_TOKENS = 4
REQUEST_OVERHEAD_TOKENS = 3
CHARS_PER_TOKEN = 4

Estimator = Callable[[ChatRequest], int]


def text_tokens(text: str | None) -> int:
    """Estimated tokens of a text: ~4 ASCII chars per token, 1 token per non-ASCII char."""
    if not text:
        return 0
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    return math.ceil((len(text) - non_ascii) / CHARS_PER_TOKEN) + non_ascii


def message_tokens(message: Message) -> int:
    """Estimated tokens of one message including its role overhead and tool calls."""
    total = MESSAGE_OVERHEAD_TOKENS + text_tokens(message.content)
    for call in message.tool_calls:
        total += text_tokens(call.name) + text_tokens(json.dumps(call.arguments, sort_keys=True))
    if message.tool_name:
        total += text_tokens(message.tool_name)
    return total


def heuristic_tokens(request: ChatRequest) -> int:
    """The documented heuristic over the whole request (system, messages, schema, prefill)."""
    total = REQUEST_OVERHEAD_TOKENS + sum(message_tokens(m) for m in request.messages)
    if request.system:
        total += MESSAGE_OVERHEAD_TOKENS + text_tokens(request.system)
    if request.json_schema is not None:
        total += text_tokens(json.dumps(request.json_schema, sort_keys=True))
    total += text_tokens(request.prefill)
    return total


def estimate_tokens(request: ChatRequest) -> int:
    """Estimated input tokens of ``request``: the one estimator the providers use too."""
    return estimate_request_tokens(request)
