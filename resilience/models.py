"""The normalized request and reply every adapter speaks, whatever the wire format."""

# No ``from __future__ import annotations`` here: pydantic would compile every field's
# annotation string when the module loads, and workflow files import these types
# (bench/import_cost.py). Forward references are quoted instead.
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Priority(StrEnum):
    """How much a message matters when the context has to be cut to fit a window."""

    CRITICAL = "critical"
    SUPPORTING = "supporting"
    BACKGROUND = "background"


class Reasoning(BaseModel):
    """Provider-opaque reasoning state a reply carried, which the next request must send back.

    Reasoning models require it in multi-turn tool use: Gemini 3's ``thoughtSignature`` on
    each ``functionCall`` part, Anthropic's ``thinking`` / ``redacted_thinking`` blocks with
    their signatures, an OpenAI-compatible server's ``reasoning_content``. It is valid only
    where it came from: ``origin`` (``"<wire>:<model>"``) names that, and a request to any
    other wire or model drops it, since one vendor's signature means nothing to another.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    origin: str = Field(description="'<wire>:<model>' that produced it; elsewhere it is dropped")
    signature: str | None = Field(default=None, description="Gemini's thoughtSignature")
    blocks: list[dict[str, Any]] = Field(
        default_factory=list, description="Anthropic thinking / redacted_thinking blocks, verbatim"
    )
    text: str | None = Field(default=None, description="OpenAI-compatible reasoning_content")


class ToolCall(BaseModel):
    """A tool call the model asked for (assistant side) with parsed JSON arguments."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # The arguments text exactly as the model sent it, kept only when it did not parse as a
    # JSON object: adapters record a malformed call instead of crashing, and
    # providers.validate turns it into MalformedToolCallError.
    raw_arguments: str | None = None
    #: Reasoning state attached to this call (Gemini's thoughtSignature), sent back with it.
    reasoning: Reasoning | None = None


class ToolSpec(BaseModel):
    """A tool the model may call: a name, what it does, and a JSON Schema for its arguments."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str = Field(
        pattern=r"^[a-zA-Z0-9_-]{1,64}$",
        description="The tool's name the model calls it by (letters, digits, _ and -).",
    )
    description: str = Field(default="", description="What the tool does, for the model.")
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the tool's arguments.",
    )


class Message(BaseModel):
    """One conversation turn. ``tool`` messages carry a tool result for ``tool_call_id``."""

    model_config = ConfigDict(defer_build=True)

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    #: An assistant turn's reasoning state (Anthropic thinking blocks, reasoning_content),
    #: copied from :attr:`ChatReply.reasoning`; sent back only to the wire and model it came from.
    reasoning: Reasoning | None = None
    priority: Priority = Priority.SUPPORTING
    #: A checkpoint (the task statement, a key decision): context triage never drops it,
    #: and summarization keeps it verbatim.
    pinned: bool = False


#: ``tool_choice`` values that are modes rather than a tool's name.
TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})


class ChatRequest(BaseModel):
    """A provider-neutral completion request.

    ``json_schema`` asks for structured output; ``prefill`` continues an assistant turn
    (used to resume a cut stream on routes that declare prefill support).
    """

    model_config = ConfigDict(defer_build=True)

    system: str | None = None
    messages: list[Message] = Field(min_length=1)
    max_tokens: int = Field(default=512, ge=1, le=200_000)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    stop: list[str] = Field(default_factory=list)
    json_schema: dict[str, Any] | None = None
    prefill: str | None = None
    stream: bool = True
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: str | None = Field(
        default=None,
        description="'auto', 'none', 'required' (some tool), or the name of one tool to call",
    )

    @model_validator(mode="after")
    def _check_tool_choice(self) -> "ChatRequest":
        choice = self.tool_choice
        if choice is None or choice in TOOL_CHOICE_MODES:
            return self
        if choice not in {t.name for t in self.tools}:
            raise ValueError(
                f"tool_choice {choice!r} is neither one of {sorted(TOOL_CHOICE_MODES)} "
                "nor the name of a tool in tools"
            )
        return self


class FinishReason(StrEnum):
    STOP = "stop"
    LENGTH = "length"
    TOOL_CALLS = "tool_calls"
    CONTENT_FILTER = "content_filter"


class Usage(BaseModel):
    """Tokens of one answer; ``estimated`` when the provider reported none and we counted."""

    model_config = ConfigDict(defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = Field(
        default=False, description="True when the provider sent no usage and it was estimated"
    )


class ChatReply(BaseModel):
    """A complete, successful reply. A cut or truncated stream is never a ChatReply."""

    model_config = ConfigDict(defer_build=True)

    text: str
    endpoint: str
    model: str
    finish_reason: FinishReason
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    ttft_ms: float | None = None
    latency_ms: float = 0.0
    tool_calls: list[ToolCall] = Field(default_factory=list)
    malformed_events_skipped: int = 0
    #: Reasoning state of the turn, to put on the assistant :class:`Message` that records it.
    reasoning: Reasoning | None = None
