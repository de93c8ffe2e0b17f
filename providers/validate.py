"""Pure output validation: is a well-formed reply also a usable answer?

Runs after every successful call. A reply can be a perfectly valid HTTP exchange and
still be useless: empty, cut at ``max_tokens`` where complete JSON was required, not
JSON, not matching the schema, carrying a tool call whose arguments do not parse, or too
big to enter workflow history (``max_reply_bytes``).
Each of those raises its :class:`~resilience.errors.SemanticError` so the route's
semantic-failure rate sees it and the caller fails over. No IO, no clock.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agent_failover.resilience.errors import (
    EmptyOutputError,
    InvalidOutputError,
    InvalidRequestError,
    MalformedToolCallError,
    OversizedOutputError,
    TruncatedOutputError,
)
from agent_failover.resilience.models import ChatReply, FinishReason, Reasoning

#: How much of the offending output an error quotes in its message.
MAX_QUOTE_CHARS = 120
# Models often wrap JSON in a Markdown fence even when told not to; the JSON inside is
# still the answer, so one enclosing fence is tolerated.
_FENCE_RE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


if TYPE_CHECKING:
    import jsonschema


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def _quote(text: str) -> str:
    short = " ".join(text.split())
    return short[:MAX_QUOTE_CHARS] + ("…" if len(short) > MAX_QUOTE_CHARS else "")


def parse_json_output(text: str) -> Any:
    """The JSON value in ``text`` (one enclosing Markdown fence allowed); ValueError if none."""
    match = _FENCE_RE.match(text)
    return json.loads(match.group(1) if match else text)


def reply_bytes(reply: ChatReply) -> int:
    """UTF-8 bytes of what a reply carries into history: its text, tool-call arguments and
    the reasoning state (thinking blocks, signatures) the next turn must send back."""
    size = len(reply.text.encode("utf-8", errors="replace")) + _reasoning_bytes(reply.reasoning)
    for call in reply.tool_calls:
        args = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
        size += len(args.encode("utf-8", errors="replace")) + len(call.name) + len(call.id)
        size += _reasoning_bytes(call.reasoning)
    return size


def _reasoning_bytes(reasoning: Reasoning | None) -> int:
    return 0 if reasoning is None else len(reasoning.model_dump_json().encode("utf-8"))


def _check_size_and_tool_calls(
    reply: ChatReply, max_reply_bytes: int | None, kw: dict[str, Any]
) -> None:
    """Whether the reply fits ``max_reply_bytes`` and every tool call is usable."""
    if max_reply_bytes is not None:
        size = reply_bytes(reply)
        if size > max_reply_bytes:
            raise OversizedOutputError(
                f"reply of {size} bytes is above max_reply_bytes {max_reply_bytes}",
                status=200,
                **kw,
            )
    for call in reply.tool_calls:
        if call.raw_arguments is not None or not call.name:
            what = f"arguments {_quote(call.raw_arguments or '')!r}" if call.name else "no name"
            raise MalformedToolCallError(
                f"tool call {call.id or '?'} ({call.name or '?'}) has unusable {what}", **kw
            )


def validate_reply(
    reply: ChatReply,
    json_schema: dict[str, Any] | None,
    *,
    endpoint: str,
    max_reply_bytes: int | None = None,
) -> Any:
    """Check ``reply`` and return its parsed JSON when a schema was asked for, else ``None``.

    Order: size (above ``max_reply_bytes`` it could not enter workflow history), a
    malformed tool call, then emptiness, then (with a schema) truncation, JSON syntax and
    the schema itself. A reply that stops to call tools has no final answer yet, so the
    schema is not applied to it. An invalid *schema* is the caller's bug and raises
    :class:`InvalidRequestError`.
    """
    kw: dict[str, Any] = {"endpoint": endpoint, "partial_text": reply.text}
    _check_size_and_tool_calls(reply, max_reply_bytes, kw)
    if not reply.text.strip() and not reply.tool_calls:
        raise EmptyOutputError(f"empty output (finish_reason={reply.finish_reason.value})", **kw)
    if json_schema is None:
        return None
    if reply.finish_reason is FinishReason.TOOL_CALLS and reply.tool_calls:
        return None
    # Imported for a schema only: workflow code imports this module (parse_json_output).
    import jsonschema
    from jsonschema.exceptions import SchemaError

    if reply.finish_reason is FinishReason.LENGTH:
        raise TruncatedOutputError(
            f"output cut at the token limit ({reply.usage.output_tokens} tokens) "
            "where complete JSON was required",
            **kw,
        )
    try:
        validator = _validator(json.dumps(json_schema, sort_keys=True))
    except SchemaError as exc:
        raise InvalidRequestError(
            f"the output schema itself is invalid: {exc.message}", endpoint=endpoint
        ) from exc
    try:
        data = parse_json_output(reply.text)
    except (ValueError, RecursionError) as exc:
        raise InvalidOutputError(f"output is not JSON: {_quote(reply.text)!r}", **kw) from exc
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise InvalidOutputError(
            f"output violates the schema at {where}: {_quote(error.message)}", **kw
        )
    return data
