"""Deterministic reply content and token accounting for every wire format.

A request is first normalised to a :class:`ParsedRequest`; :func:`build_reply` then
derives the reply from a hash of the model and the conversation, so the same request
always gets the same text. Prose replies start with ``[echo: <first words of the last
user message>]`` and end with ``[end]`` so a test can tell a complete reply from a cut
one. JSON-mode requests get a JSON instance of the requested schema; a forced tool gets
tool arguments. Tools offered with ``tool_choice`` auto (or none given) make an agent loop:
the reply calls the first offered tool not yet called since the last user turn, and once
every offered tool has a call the model answers (in text, or JSON in JSON mode). Token
counts are estimated at ~4 characters per token and a stream sends exactly one
4-character piece per token, so streamed and non-streamed usage agree.
Output faults (empty, invalid JSON, schema violation, refusal) are applied here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from agent_failover.testing.sim.faults import AttemptPlan, FaultKind
from agent_failover.testing.sim.golden import golden_text
from agent_failover.testing.sim.schema_gen import generate_instance, violate_schema, words

CHARS_PER_TOKEN = 4
#: Characters per streamed piece of an oversized reply: one piece per token would make a
#: megabyte reply a quarter of a million SSE events.
OVERSIZED_PIECE_CHARS = 16 * 1024
END_MARKER = "[end]"
_MARKER_WORDS = 6


# Cloud decorations of a model id: Bedrock's inference-profile geography and vendor
# prefixes and version suffix, Vertex's @version.
_PROFILE = re.compile(r"^(?:us|eu|apac|jp|au|ca|us-gov|global)\.")
_VENDOR = re.compile(r"^(?:anthropic|meta|mistral|amazon|cohere|ai21|deepseek|openai)\.")
_BEDROCK_VERSION = re.compile(r"-\d{8}-v\d+(?::\d+)?$|-v\d+(?::\d+)?$")
_VERTEX_VERSION = re.compile(r"@[\w.-]+$")


def model_family(model: str) -> str:
    """The vendor's name of a cloud model id (``us.anthropic.claude-x-20250929-v1:0`` and
    ``claude-x@20250929`` are both ``claude-x``)."""
    name = _PROFILE.sub("", model.rsplit("/", 1)[-1])
    name = _VENDOR.sub("", name)
    name = _VERTEX_VERSION.sub("", name)
    return _BEDROCK_VERSION.sub("", name)


def estimate_tokens(text: str) -> int:
    """Tokens in ``text`` at ~4 characters per token (0 for empty text)."""
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class ForcedTool:
    """A tool the request forces the model to call, with its input JSON Schema."""

    name: str
    schema: dict[str, Any]


def first_uncalled(tools: Sequence[ForcedTool], called: Collection[str]) -> ForcedTool | None:
    """The first of ``tools`` with no call since the last user turn, else None."""
    return next((t for t in tools if t.name not in called), None)


@dataclass
class ParsedRequest:
    """A request in any wire format, reduced to what the simulator needs."""

    model: str
    messages: list[tuple[str, str]]  # (role, text) with role user/assistant/tool
    system: str = ""
    max_tokens: int = 1024
    stream: bool = False
    include_usage: bool = False
    json_mode: bool = False
    schema: dict[str, Any] | None = None
    tool: ForcedTool | None = None
    # Tools the model may call on its own (tool_choice auto or absent), and the names of the
    # tools the assistant already called since the last user turn: an agent loop's state.
    offered_tools: tuple[ForcedTool, ...] = ()
    called_tools: tuple[str, ...] = ()

    @property
    def prompt_tokens(self) -> int:
        """Estimated input tokens: system, every message, and any schema sent along."""
        chars = len(self.system) + sum(len(text) for _, text in self.messages)
        if self.schema is not None:
            chars += len(json.dumps(self.schema))
        if self.tool is not None:
            chars += len(self.tool.name) + len(json.dumps(self.tool.schema))
        return -(-chars // CHARS_PER_TOKEN)

    @property
    def prefill(self) -> str:
        """Text of a trailing assistant turn (a prefill the reply must continue), else ''."""
        if self.messages and self.messages[-1][0] == "assistant":
            return self.messages[-1][1]
        return ""

    @property
    def last_user_text(self) -> str:
        """Text of the last user turn ('' if there is none)."""
        for role, text in reversed(self.messages):
            if role == "user":
                return text
        return ""

    def seed(self) -> int:
        """Stable 64-bit seed from the model family and the whole conversation.

        The family, not the cloud's id: the same model answers the same request alike on
        the vendor's API, on Bedrock and on Vertex, so a cut answer resumed on another
        cloud continues where it stopped, as it would for real.
        """
        canonical = json.dumps(
            {
                "model": model_family(self.model),
                "system": self.system,
                "messages": self.messages,
                "json": self.json_mode,
                "schema": self.schema,
                "tool": None if self.tool is None else [self.tool.name, self.tool.schema],
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        return int.from_bytes(hashlib.sha256(canonical.encode()).digest()[:8], "big")


class Finish(StrEnum):
    """Provider-neutral finish reason; each wire module maps it to its own vocabulary."""

    STOP = "stop"
    LENGTH = "length"
    TOOL = "tool"
    REFUSAL = "refusal"


@dataclass
class Reply:
    """The reply the simulator will send, streamed or not."""

    id: str
    model: str
    created: int
    text: str
    finish: Finish
    input_tokens: int
    tool: ForcedTool | None = None  # set when ``text`` is the tool's JSON arguments
    tool_call_id: str = ""
    #: A refusal's wire-specific reason when a fault names one (Gemini ``MODEL_ARMOR``).
    refusal_reason: str | None = None
    piece_chars: int = CHARS_PER_TOKEN
    pieces: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        step = self.piece_chars
        self.pieces = [self.text[i : i + step] for i in range(0, len(self.text), step)]

    @property
    def output_tokens(self) -> int:
        """Output tokens (~4 characters each); the number of streamed pieces unless the
        reply streams in larger pieces (:attr:`tokens_per_piece`)."""
        return estimate_tokens(self.text)

    @property
    def tokens_per_piece(self) -> int:
        """Tokens one streamed piece stands for (pacing is per token)."""
        return max(self.piece_chars // CHARS_PER_TOKEN, 1)

    @property
    def tool_input(self) -> dict[str, Any]:
        """The tool arguments as an object (non-stream tool replies need one)."""
        value = json.loads(self.text) if self.text else {}
        return value if isinstance(value, dict) else {"value": value}


def echo_marker(text: str) -> str:
    """The recognisable prefix a reply echoes: the first words of ``text``."""
    first = re.sub(r"\s+", " ", text).strip().split(" ")[:_MARKER_WORDS]
    marker = " ".join(first)[:80]
    return marker or "(empty)"


def prose(request: ParsedRequest, rng: random.Random) -> str:
    """Deterministic prose between ~24 and ~96 tokens, echo marker first, END_MARKER last."""
    target_chars = (24 + rng.randrange(72)) * CHARS_PER_TOKEN
    parts = [f"[echo: {echo_marker(request.last_user_text)}]"]
    length = len(parts[0])
    while length < target_chars - len(END_MARKER) - 1:
        sentence = words(rng, rng.randint(5, 12)).capitalize() + "."
        parts.append(sentence)
        length += len(sentence) + 1
    parts.append(END_MARKER)
    return " ".join(parts)


#: A JSON Schema written into the system prompt ("... JSON Schema:" then the schema last).
_PROMPTED_SCHEMA = re.compile(r"JSON Schema:\s*(\{.*\})\s*$", re.DOTALL | re.IGNORECASE)


def follow_prompted_schema(request: ParsedRequest) -> ParsedRequest:
    """A request whose system prompt ends with a JSON Schema is answered in JSON mode
    with that schema, as an instruction-following model would (prompt-and-validate)."""
    if request.schema is not None or request.tool is not None:
        return request
    match = _PROMPTED_SCHEMA.search(request.system)
    if match is None:
        return request
    try:
        schema = json.loads(match.group(1))
    except ValueError:
        return request
    if not isinstance(schema, dict):
        return request
    return dataclasses.replace(request, json_mode=True, schema=schema)


def default_json(request: ParsedRequest, rng: random.Random) -> dict[str, Any]:
    """The object a schemaless JSON-mode request gets."""
    return {
        "echo": echo_marker(request.last_user_text),
        "answer": words(rng, 8).capitalize() + ".",
        "points": [words(rng, 3) for _ in range(3)],
        "confidence": round(rng.uniform(0.5, 0.99), 2),
    }


#: A reply being built: its text, the tool it calls (if any) and why it finishes.
_Draft = tuple[str, ForcedTool | None, Finish]


def build_reply(
    request: ParsedRequest,
    *,
    plan: AttemptPlan,
    reply_id: str,
    created: int,
    max_output_tokens: int,
    correct: bool = True,
) -> Reply:
    """Build the reply for ``request`` with the plan's output faults applied.

    A trailing assistant turn is a prefill: like a real model, the reply continues it. The
    answer is generated for the conversation without the prefill and, when it starts with
    the prefill (the partial output of the same model, resumed elsewhere), only the rest is
    sent; the caller then holds prefill + continuation = the complete answer. A golden-set
    task or a judge request (:mod:`testing.sim.golden`) is answered right when ``correct``.
    """
    prefill = request.prefill
    if prefill:
        request = dataclasses.replace(request, messages=request.messages[:-1])
    rng = random.Random(request.seed())
    text, tool, finish = _answer(request, rng, correct)
    if prefill and tool is None and text.startswith(prefill):
        text = text[len(prefill) :]
    draft = _output_faults(plan, request, rng, (text, tool, finish))
    (text, tool, finish), piece_chars = _fit(
        plan, draft, min(request.max_tokens, max_output_tokens)
    )
    return Reply(
        id=reply_id,
        model=request.model,
        created=created,
        text=text,
        finish=finish,
        input_tokens=request.prompt_tokens,
        tool=tool,
        tool_call_id=f"toolu_{reply_id[-12:]}" if tool is not None else "",
        refusal_reason=plan.refusal.finish_reason if plan.refusal is not None else None,
        piece_chars=piece_chars,
    )


def _answer(request: ParsedRequest, rng: random.Random, correct: bool) -> _Draft:
    """The fault-free answer: a tool call, a JSON object or prose."""
    tool = request.tool or first_uncalled(request.offered_tools, request.called_tools)
    if tool is not None:
        value = generate_instance(tool.schema, rng)
        text = json.dumps(value)
        if request.tool is not None:
            # A forced tool is how some wires ask for structured output.
            text = _golden(request, rng, correct, value, schema=tool.schema) or text
        return text, tool, Finish.TOOL
    if request.json_mode:
        value = generate_instance(request.schema, rng) if request.schema else None
        text = json.dumps(value if value is not None else default_json(request, rng))
        return (
            _golden(request, rng, correct, value, schema=request.schema) or text,
            None,
            Finish.STOP,
        )
    return (
        _golden(request, rng, correct, None, schema=None) or prose(request, rng),
        None,
        Finish.STOP,
    )


def _output_faults(
    plan: AttemptPlan, request: ParsedRequest, rng: random.Random, draft: _Draft
) -> _Draft:
    """The plan's output fault and refusal applied to the answer."""
    text, tool, finish = draft
    out = plan.output
    if out is not None and out.kind is FaultKind.EMPTY_OUTPUT:
        text, tool, finish = "", None, Finish.STOP
    elif out is not None and out.kind is FaultKind.INVALID_JSON:
        # The usual real failure: chatter before the JSON and a missing closing brace.
        text, tool, finish = (
            "Sure! Here is the JSON you asked for:\n" + text[:-1],
            None,
            Finish.STOP,
        )
    elif out is not None and out.kind is FaultKind.SCHEMA_VIOLATION:
        schema = tool.schema if tool is not None else (request.schema or {"type": "object"})
        text = json.dumps(violate_schema(schema, rng))
    if plan.refusal is not None:
        text = text[: len(text) // 3]
        tool, finish = None, Finish.REFUSAL
    return text, tool, finish


def _fit(plan: AttemptPlan, draft: _Draft, limit: int) -> tuple[_Draft, int]:
    """The reply cut to ``limit`` tokens (or blown up by an oversized-output fault), and
    how many characters each streamed piece carries."""
    text = draft[0]
    out = plan.output
    if out is not None and out.kind is FaultKind.OVERSIZED_OUTPUT:
        # A runaway generation ignores max_tokens: that is the fault.
        return (oversized_text(text, out.size_bytes or 0), None, Finish.STOP), OVERSIZED_PIECE_CHARS
    if estimate_tokens(text) > limit:
        # A cut-off tool call cannot be an object; real APIs then return plain text.
        return (text[: limit * CHARS_PER_TOKEN], None, Finish.LENGTH), CHARS_PER_TOKEN
    return draft, CHARS_PER_TOKEN


def _golden(
    request: ParsedRequest,
    rng: random.Random,
    correct: bool,
    value: Any,
    *,
    schema: dict[str, Any] | None,
) -> str | None:
    return golden_text(
        request.last_user_text,
        request.system,
        schema,
        value,
        correct,
        rng,
        json_mode=value is not None or request.json_mode,
    )


def oversized_text(text: str, size: int) -> str:
    """``text`` padded (or cut) to exactly ``size`` ASCII characters, ending in END_MARKER."""
    filler = " all work and no play makes a dull model."
    body = text.removesuffix(END_MARKER)
    room = max(size - len(END_MARKER), 0)
    if len(body) < room:
        body += (filler * (-(-(room - len(body)) // len(filler))))[: room - len(body)]
    return (body[:room] + END_MARKER)[:size]
