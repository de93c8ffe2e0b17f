"""Amazon Bedrock runtime: Converse / ConverseStream, and InvokeModel for Anthropic bodies.

Paths (after ``/<endpoint>/``): ``model/{modelId}/converse``, ``…/converse-stream``,
``…/invoke`` and ``…/invoke-with-response-stream`` (the last two with the Anthropic
Messages body and an ``anthropic_version`` such as ``bedrock-2023-05-31``, as
``AnthropicBedrock`` sends). Streams use the binary AWS event-stream framing: ConverseStream sends
``messageStart``, ``contentBlockStart`` / ``Delta`` / ``Stop``, ``messageStop`` and a
``metadata`` trailer with usage; InvokeModel streams ``chunk`` events whose ``bytes``
are the base64 of Anthropic's stream events. Errors are AWS's: the name in the
``x-amzn-ErrorType`` header and ``{"message"}`` in the body (``ThrottlingException``
429, ``ServiceUnavailableException`` 503, ``ValidationException`` 400, …); an error
inside a stream is an ``exception`` frame (``throttlingException``,
``modelStreamErrorException``, ``serviceUnavailableException``).

Auth: a request's ``Authorization`` must be a well-formed SigV4 header (algorithm,
credential scope for this endpoint's region and service ``bedrock``, signed headers
including ``host`` and ``x-amz-date``, a 64-hex signature, an ``X-Amz-Date`` matching
the scope's day) or a Bedrock API key (``Bearer``); signatures are checked for shape,
not recomputed. A missing header is refused only when the simulator requires auth.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import agent_failover.testing.sim.wire.eventstream as es
from agent_failover.resilience.endpoint import ProviderKind
from agent_failover.testing.sim.config import SimEndpoint
from agent_failover.testing.sim.content import Finish, ForcedTool, ParsedRequest, Reply
from agent_failover.testing.sim.wire.anthropic import AnthropicWire
from agent_failover.testing.sim.wire.base import (
    ErrorCategory,
    Operation,
    SimError,
    WireFormat,
    text_of_blocks,
)

_PATH = re.compile(
    r"^model/(?P<model>.+)/(?P<api>converse|converse-stream|invoke|invoke-with-response-stream)$"
)
_SIGV4 = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[A-Z0-9]{16,128})/(?P<day>\d{8})/(?P<region>[a-z0-9-]+)"
    r"/(?P<service>[a-z0-9-]+)/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?"
    r"Signature=(?P<sig>[0-9a-f]{64})$"
)
_AMZ_DATE = re.compile(r"^\d{8}T\d{6}Z$")
_STOP = {
    Finish.STOP: "end_turn",
    Finish.LENGTH: "max_tokens",
    Finish.TOOL: "tool_use",
    Finish.REFUSAL: "content_filtered",
}
# (status, x-amzn-ErrorType) per category, as the runtime API documents them.
_ERRORS: dict[ErrorCategory, tuple[int, str]] = {
    ErrorCategory.RATE_LIMIT: (429, "ThrottlingException"),
    ErrorCategory.QUOTA: (400, "ServiceQuotaExceededException"),
    ErrorCategory.OVERLOADED: (503, "ServiceUnavailableException"),
    ErrorCategory.SERVER: (500, "InternalServerException"),
    ErrorCategory.UNAVAILABLE: (503, "ServiceUnavailableException"),
    ErrorCategory.AUTH: (403, "UnrecognizedClientException"),
    ErrorCategory.PERMISSION: (403, "AccessDeniedException"),
    ErrorCategory.INVALID_REQUEST: (400, "ValidationException"),
    ErrorCategory.NOT_FOUND: (404, "ResourceNotFoundException"),
    ErrorCategory.CONTEXT_LENGTH: (400, "ValidationException"),
    ErrorCategory.CONTENT_FILTER: (400, "ValidationException"),
}
_BY_STATUS = {
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_STREAM_EXCEPTIONS = {
    ErrorCategory.OVERLOADED: "serviceUnavailableException",
    ErrorCategory.SERVER: "modelStreamErrorException",
    ErrorCategory.RATE_LIMIT: "throttlingException",
}
_TYPE_URL = ":http://internal.amazon.com/coral/com.amazon.bedrock/"


def _invalid(message: str) -> SimError:
    return SimError(ErrorCategory.INVALID_REQUEST, message)


def sigv4_problem(headers: Any, region: str) -> str | None:
    """Why an ``Authorization: AWS4-HMAC-SHA256 …`` header is malformed, or ``None``."""
    match = _SIGV4.match(str(headers.get("authorization", "")))
    if match is None:
        return "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature'."
    amz_date = str(headers.get("x-amz-date", ""))
    if not _AMZ_DATE.match(amz_date):
        return "Authorization header requires existence of either a 'X-Amz-Date' header."
    if amz_date[:8] != match["day"]:
        return "Date in Credential scope does not match YYYYMMDD from X-Amz-Date."
    if match["region"] != region:
        return f"Credential should be scoped to a valid region: '{region}'."
    if match["service"] != "bedrock":
        return "Credential should be scoped to correct service: 'bedrock'."
    signed = set(match["signed"].split(";"))
    if not {"host", "x-amz-date"} <= signed:
        return "'Host' and 'X-Amz-Date' must be signed headers."
    return None


class _AwsErrors:
    """AWS's error rendering, shared by the Converse and InvokeModel wires."""

    #: AWS says no wait in any header: a ThrottlingException is all there is.
    reset_style = "none"

    def status_for(self, err: SimError) -> int:
        """AWS's status for ``err``."""
        return err.status or _ERRORS[err.category][0]

    def error_type(self, err: SimError) -> str:
        """The exception name for ``err`` (status-specific for arbitrary http_error faults)."""
        if err.detail.get("aws_type"):
            return str(err.detail["aws_type"])
        generic = (ErrorCategory.SERVER, ErrorCategory.INVALID_REQUEST, ErrorCategory.NOT_FOUND)
        if err.status in _BY_STATUS and err.category in generic:
            return _BY_STATUS[err.status]
        return _ERRORS[err.category][1]

    def error_body(self, err: SimError, status: int, model: str | None) -> dict[str, Any]:
        """``{"message": ...}`` (the type travels in a header)."""
        message = err.message
        if err.category is ErrorCategory.CONTEXT_LENGTH:
            message = "Input is too long for requested model."
        elif err.category is ErrorCategory.NOT_FOUND and model:
            message = f"The provided model identifier is invalid: {model}"
        return {"message": message}

    def error_headers(self, err: SimError) -> dict[str, str]:
        """``x-amzn-ErrorType`` plus Retry-After when known."""
        headers = WireFormat.error_headers(self, err)  # type: ignore[arg-type]
        headers["x-amzn-ErrorType"] = self.error_type(err) + _TYPE_URL
        return headers

    def request_id_header(self) -> str:
        """AWS's request id header."""
        return "x-amzn-RequestId"

    def auth_error(
        self, headers: Any, query: dict[str, str], endpoint: SimEndpoint, required: bool
    ) -> SimError | None:
        """SigV4 checked for shape whenever present; presence only when auth is required."""
        auth = str(headers.get("authorization", ""))
        if auth.startswith("AWS4-"):
            problem = sigv4_problem(headers, endpoint.region)
            if problem is not None:
                kind = {"aws_type": "InvalidSignatureException"}
                return SimError(ErrorCategory.AUTH, problem, status=403, detail=kind)
            return None
        if auth.lower().startswith("bearer ") and len(auth) > len("bearer "):
            return None  # a Bedrock API key
        if required:
            kind = {"aws_type": "MissingAuthenticationTokenException"}
            return SimError(
                ErrorCategory.AUTH, "Missing Authentication Token", status=403, detail=kind
            )
        return None


def _converse_text(block: Any) -> str:
    if not isinstance(block, dict):
        raise _invalid("content blocks must be objects")
    if isinstance(block.get("text"), str):
        return block["text"]
    if isinstance(block.get("toolUse"), dict):
        return json.dumps(block["toolUse"].get("input", {}))
    if isinstance(block.get("toolResult"), dict):
        return text_of_blocks(block["toolResult"].get("content"))
    return ""


class BedrockWire(_AwsErrors, WireFormat):
    """Bedrock Converse / ConverseStream (InvokeModel goes to :class:`BedrockInvokeWire`)."""

    kind = ProviderKind.BEDROCK
    stream_content_type = es.CONTENT_TYPE

    def route(self, method: str, tail: str, query: dict[str, str]) -> Operation | None:
        """``POST model/{id}/(converse|converse-stream|invoke|invoke-with-response-stream)``."""
        m = _PATH.match(tail)
        if method != "POST" or m is None:
            return None
        api = m["api"]
        return Operation("complete", path_model=m["model"], variant=api)

    def for_operation(self, op: Operation) -> WireFormat:
        """InvokeModel speaks the Anthropic body; Converse is this wire."""
        if op.variant in ("invoke", "invoke-with-response-stream"):
            return BEDROCK_INVOKE
        return self

    def authenticated(self, headers: Any, query: dict[str, str]) -> bool:
        """A SigV4 or bearer ``Authorization`` header."""
        return bool(headers.get("authorization"))

    def parse(self, body: Any, op: Operation, endpoint: SimEndpoint) -> ParsedRequest:
        """Validate a Converse request (model and streaming come from the path)."""
        if not isinstance(body, dict):
            raise _invalid("Malformed input request, please reformat your input and try again.")
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise _invalid("1 validation error detected: Value at 'messages' must not be empty")
        messages: list[tuple[str, str]] = []
        for i, m in enumerate(raw):
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
                raise _invalid(f"messages.{i}.role: must be one of [user, assistant]")
            content = m.get("content")
            if not isinstance(content, list):
                raise _invalid(f"messages.{i}.content: must be a list of content blocks")
            messages.append((m["role"], "\n".join(_converse_text(b) for b in content)))
        system = "\n".join(_converse_text(b) for b in body.get("system") or [])
        config = body.get("inferenceConfig") or {}
        max_tokens = config.get("maxTokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise _invalid("inferenceConfig.maxTokens: must be greater than or equal to 1")
        tool = self._forced_tool(body.get("toolConfig"))
        schema = self._output_schema(body.get("outputConfig"))
        json_mode = (
            tool is not None or schema is not None or "json" in (system + (messages[-1][1])).lower()
        )
        return ParsedRequest(
            model=op.path_model or endpoint.default_model,
            messages=messages,
            system=system,
            max_tokens=max_tokens or endpoint.max_output_tokens,
            stream=op.variant == "converse-stream",
            include_usage=True,
            json_mode=json_mode,
            schema=schema,
            tool=tool,
        )

    @staticmethod
    def _output_schema(config: Any) -> dict[str, Any] | None:
        """``outputConfig.textFormat`` of type ``json_schema``: the schema, sent as a string."""
        fmt = config.get("textFormat") if isinstance(config, dict) else None
        if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
            return None
        raw = ((fmt.get("structure") or {}).get("jsonSchema") or {}).get("schema")
        try:
            schema = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            schema = None
        if not isinstance(schema, dict):
            raise _invalid(
                "outputConfig.textFormat.structure.jsonSchema.schema: invalid JSON schema"
            )
        return schema

    @staticmethod
    def _forced_tool(config: Any) -> ForcedTool | None:
        if not isinstance(config, dict):
            return None
        specs = [
            t["toolSpec"]
            for t in config.get("tools") or []
            if isinstance(t, dict) and isinstance(t.get("toolSpec"), dict)
        ]
        choice = config.get("toolChoice") or {}
        if not specs or not isinstance(choice, dict):
            return None
        if isinstance(choice.get("tool"), dict):
            wanted = choice["tool"].get("name")
            match = next((t for t in specs if t.get("name") == wanted), None)
            if match is None:
                raise _invalid(f"toolChoice: tool {wanted} is not among the provided tools")
        elif "any" in choice:
            match = specs[0]
        else:
            return None
        schema = (match.get("inputSchema") or {}).get("json") or {"type": "object"}
        return ForcedTool(str(match["name"]), schema)

    def _content(self, reply: Reply) -> list[dict[str, Any]]:
        if reply.tool is not None:
            use = {"toolUseId": reply.tool_call_id, "name": reply.tool.name}
            return [{"toolUse": {**use, "input": reply.tool_input}}]
        return [{"text": reply.text}] if reply.text else []

    def _usage(self, reply: Reply) -> dict[str, int]:
        return {
            "inputTokens": reply.input_tokens,
            "outputTokens": reply.output_tokens,
            "totalTokens": reply.input_tokens + reply.output_tokens,
        }

    def response(self, reply: Reply) -> dict[str, Any]:
        """A ConverseResponse."""
        return {
            "output": {"message": {"role": "assistant", "content": self._content(reply)}},
            "stopReason": _STOP[reply.finish],
            "usage": self._usage(reply),
            "metrics": {"latencyMs": 10},
        }

    def stream_prelude(self, reply: Reply) -> list[bytes]:
        """``messageStart`` and, for a tool call, its ``contentBlockStart``."""
        events = [es.event("messageStart", {"role": "assistant", "p": "abcd"})]
        if reply.tool is not None:
            start = {"toolUse": {"toolUseId": reply.tool_call_id, "name": reply.tool.name}}
            events.append(es.event("contentBlockStart", {"contentBlockIndex": 0, "start": start}))
        return events

    def stream_piece(self, reply: Reply, index: int, sent_tokens: int) -> bytes:
        """One ``contentBlockDelta`` (text, or tool input JSON)."""
        piece = reply.pieces[index]
        delta = {"toolUse": {"input": piece}} if reply.tool is not None else {"text": piece}
        # Bedrock pads events with "p" so sizes do not leak content; clients ignore it.
        return es.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": delta, "p": "ab"})

    def stream_finale(self, reply: Reply, include_usage: bool) -> list[bytes]:
        """``contentBlockStop`` and ``messageStop`` with the stop reason."""
        return [
            es.event("contentBlockStop", {"contentBlockIndex": 0}),
            es.event("messageStop", {"stopReason": _STOP[reply.finish]}),
        ]

    def _metadata(self, reply: Reply) -> bytes:
        return es.event("metadata", {"usage": self._usage(reply), "metrics": {"latencyMs": 10}})

    def stream_terminal(self) -> list[bytes]:
        """Not used: the ``metadata`` trailer needs the reply (see :meth:`stream_trailer`)."""
        return []

    def stream_trailer(self, reply: Reply) -> list[bytes]:
        """The ``metadata`` event with usage, after ``messageStop`` (withheld by no_done)."""
        return [self._metadata(reply)]

    def stream_error(self, err: SimError, model: str | None) -> bytes:
        """An ``exception`` frame."""
        name = _STREAM_EXCEPTIONS.get(err.category, "internalServerException")
        return es.exception(name, err.message)

    def malformed_event(self, reply: Reply) -> bytes:
        """A well-framed ``contentBlockDelta`` whose JSON payload is cut off."""
        return es.event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":"tru')

    def models(self, endpoint: SimEndpoint) -> dict[str, Any]:
        """The runtime API lists no models (that is the control plane)."""
        return {}


class BedrockInvokeWire(_AwsErrors, AnthropicWire):
    """InvokeModel / InvokeModelWithResponseStream with an Anthropic Messages body."""

    kind = ProviderKind.BEDROCK
    stream_content_type = es.CONTENT_TYPE

    def parse(self, body: Any, op: Operation, endpoint: SimEndpoint) -> ParsedRequest:
        """The Messages body: ``model`` is in the path, ``anthropic_version`` is required."""
        if not isinstance(body, dict):
            raise _invalid("Malformed input request, please reformat your input and try again.")
        # The SDKs send their own version strings; what Bedrock insists on is presence.
        if not isinstance(body.get("anthropic_version"), str) or not body["anthropic_version"]:
            raise _invalid("#: required key [anthropic_version] not found")
        parsed = AnthropicWire.parse(self, {**body, "model": op.path_model}, op, endpoint)
        parsed.stream = op.variant == "invoke-with-response-stream"
        return parsed

    def _chunk(self, data: dict[str, Any]) -> bytes:
        raw = base64.b64encode(json.dumps(data).encode()).decode()
        return es.event("chunk", {"bytes": raw, "p": "abc"})

    def stream_prelude(self, reply: Reply) -> list[bytes]:
        """Anthropic's opening events, each in a ``chunk`` frame."""
        return [self._chunk(data) for _, data in self.prelude_events(reply)]

    def stream_piece(self, reply: Reply, index: int, sent_tokens: int) -> bytes:
        """One ``content_block_delta`` chunk."""
        return self._chunk(self.piece_event(reply, index)[1])

    def stream_finale(self, reply: Reply, include_usage: bool) -> list[bytes]:
        """``content_block_stop`` and ``message_delta`` chunks."""
        return [self._chunk(data) for _, data in self.finale_events(reply)]

    def stream_terminal(self) -> list[bytes]:
        """The ``message_stop`` chunk."""
        return [self._chunk({"type": "message_stop"})]

    def stream_error(self, err: SimError, model: str | None) -> bytes:
        """An ``exception`` frame."""
        name = _STREAM_EXCEPTIONS.get(err.category, "internalServerException")
        return es.exception(name, err.message)

    def malformed_event(self, reply: Reply) -> bytes:
        """A chunk whose bytes are not JSON."""
        raw = base64.b64encode(b'{"type":"content_block_delta","index":0,"delta":{"te').decode()
        return es.event("chunk", {"bytes": raw})


BEDROCK_INVOKE = BedrockInvokeWire()
