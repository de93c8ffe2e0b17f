"""What one provider endpoint is: wire kind, cloud, URL, model, auth method, window and prices.

This is the wire-level description shared by the adapters, the simulator and the
policy config (:mod:`resilience.config` embeds it). It holds the *names* of the
environment variables with keys or secret headers, never a key: credentials come from
the environment or from the cloud's own credential chain at call time.

``provider`` names the wire format (Anthropic Messages, OpenAI Chat Completions, Gemini
``generateContent``, Bedrock Converse); ``cloud`` says who hosts it and therefore how
the URL is built and the request authenticated:

===========  ==========================  ==========================================
cloud        provider                    URL and auth
===========  ==========================  ==========================================
``null``     any but ``bedrock``         the provider's own API (or a compatible
                                         server); key from ``api_key_env``
``azure``    ``openai``                  ``{base}/openai/deployments/{deployment}/…``
                                         ``?api-version=``; ``api-key`` or Entra ID
``aws``      ``bedrock``                 ``bedrock-runtime.{region}.amazonaws.com``,
                                         Converse / ConverseStream; SigV4
``gcp``      ``anthropic`` / ``gemini``  ``{region}-aiplatform.googleapis.com``,
                                         rawPredict / generateContent; OAuth token
===========  ==========================  ==========================================

Every rule is a field validator, so a bad combination fails with its field path
(``endpoints.x.deployment: required when cloud is azure``).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    HttpUrl,
    ValidationInfo,
    field_validator,
)


class ProviderKind(StrEnum):
    """The wire format an endpoint speaks."""

    ANTHROPIC = "anthropic"
    OPENAI = "openai"  # also every OpenAI-compatible server (DeepSeek, Mistral, vLLM, Ollama)
    GEMINI = "gemini"
    BEDROCK = "bedrock"  # Amazon Bedrock Converse / ConverseStream (Claude, Llama, Mistral, Nova)


class Cloud(StrEnum):
    """Who hosts the model, when it is not the model vendor's own API."""

    AZURE = "azure"
    AWS = "aws"
    GCP = "gcp"


class AuthMethod(StrEnum):
    """How a request proves who sends it."""

    NONE = "none"  # unauthenticated: the simulator, or a gateway that signs for you
    API_KEY = "api_key"  # the provider's key header, value from api_key_env
    ENTRA_ID = "entra_id"  # Azure: bearer token from azure-identity's credential chain
    AWS_SIGV4 = "aws_sigv4"  # AWS: SigV4 with botocore's credential chain
    GOOGLE_OAUTH = "google_oauth"  # GCP: OAuth access token from google-auth (ADC)


#: The Azure OpenAI data-plane API version used when an endpoint names none (GA).
DEFAULT_AZURE_API_VERSION = "2024-10-21"
#: Largest context window a policy may state: 100 M tokens, ten times the largest model
#: offered today; beyond it the number is a typo, and token arithmetic on it is nonsense.
MAX_CONTEXT_WINDOW_TOKENS = 100_000_000
#: Which wire formats each cloud serves.
CLOUD_PROVIDERS: dict[Cloud, frozenset[ProviderKind]] = {
    Cloud.AZURE: frozenset({ProviderKind.OPENAI}),
    Cloud.AWS: frozenset({ProviderKind.BEDROCK}),
    Cloud.GCP: frozenset({ProviderKind.ANTHROPIC, ProviderKind.GEMINI}),
}
#: Auth methods each cloud accepts (``None``: the vendor's own API).
CLOUD_AUTH: dict[Cloud | None, frozenset[AuthMethod]] = {
    None: frozenset({AuthMethod.NONE, AuthMethod.API_KEY}),
    Cloud.AZURE: frozenset({AuthMethod.NONE, AuthMethod.API_KEY, AuthMethod.ENTRA_ID}),
    # Bedrock API keys are bearer tokens (AWS_BEARER_TOKEN_BEDROCK style).
    Cloud.AWS: frozenset({AuthMethod.NONE, AuthMethod.API_KEY, AuthMethod.AWS_SIGV4}),
    Cloud.GCP: frozenset({AuthMethod.NONE, AuthMethod.GOOGLE_OAUTH}),
}
#: Organisation of a cloud-hosted route when ``provider_name`` is not given.
CLOUD_ORGANISATION = {Cloud.AZURE: "microsoft", Cloud.AWS: "aws", Cloud.GCP: "google"}
#: Headers that carry credentials: never written literally in a policy file.
CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "x-amz-security-token",
        "ocp-apim-subscription-key",
        "cf-aig-authorization",
    }
)
#: Headers the HTTP client or the signer owns.
RESERVED_HEADERS = frozenset({"host", "content-length", "content-type", "x-amz-date"})

_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_AWS_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_GCP_REGION = re.compile(r"^([a-z]+-[a-z]+\d+|global)$")


class Prices(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(frozen=True)

    input_per_mtok: float = Field(
        default=0.0,
        ge=0.0,
        description="USD per million input tokens, for the cost score and `cost_usd`.",
    )
    output_per_mtok: float = Field(
        default=0.0, ge=0.0, description="USD per million output tokens."
    )

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


class Capabilities(BaseModel):
    """What the route's wire and model support beyond a plain completion."""

    model_config = ConfigDict(frozen=True)

    streaming: bool = Field(default=True, description="The route can stream its answer.")
    structured_output: bool = Field(
        default=True,
        description="The route honours a JSON schema natively, so a role's `output_schema` "
        "goes on the wire (OpenAI `response_format`, Gemini `responseSchema`, on Anthropic "
        "and Bedrock their own structured output or a forced tool: see "
        "`native_json_schema`). False: the schema is written into the system prompt and "
        "the answer validated against it.",
    )
    assistant_prefill: bool = Field(
        default=False,
        description="The route can continue an assistant turn, which resumes a cut stream.",
    )
    stream_usage: bool = Field(
        default=True,
        description="OpenAI-style routes only: streamed requests ask for token usage with "
        "`stream_options: {include_usage: true}` (compatible servers report it only when "
        "asked). False for a server that rejects the field; usage is then estimated.",
    )
    native_json_schema: bool | None = Field(
        default=None,
        description="Anthropic and Bedrock routes: a role's object `output_schema` goes on "
        "the wire as the API's own structured output (Anthropic `output_config.format`, "
        "Bedrock Converse `outputConfig.textFormat`; constrained decoding) instead of a "
        "forced `structured_output` tool, so the caller's tools stay callable under "
        "`tool_choice: auto`; the answer is JSON text, still validated. Null: on for the "
        "Claude models Anthropic lists as supporting it (on the Claude API: Opus 4.5 to "
        "4.7, Sonnet 4.5 and 4.6, Haiku 4.5, Mythos; on Bedrock: Opus 4.5 and 4.6, Sonnet "
        "4.5 and 4.6, Haiku 4.5), off elsewhere (Vertex, older or other models). False: "
        "the tool path.",
    )


def _only_for(value: Any, info: ValidationInfo, cloud: Cloud) -> None:
    if value is not None and info.data.get("cloud") is not cloud:
        raise ValueError(f"only used with cloud: {cloud.value}")


class EndpointConfig(BaseModel):
    """One route: a model at a provider (or on a cloud) in a region.

    Field order matters: validators read the fields declared before them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9._-]*$",
        description="The route's name, filled in from its key in `endpoints` by the loader; "
        "if written, it must equal the key.",
    )
    provider: ProviderKind = Field(
        description="Wire format: `anthropic`, `openai` (also OpenAI-compatible servers such "
        "as Mistral, DeepSeek, vLLM, Ollama, OpenRouter), `gemini`, or `bedrock` (the "
        "Bedrock Converse API, which implies `cloud: aws`)."
    )
    cloud: Cloud | None = Field(
        default=None,
        validate_default=True,
        description="Who hosts the model, which decides the URL layout and the auth methods: "
        "`aws` (with `bedrock`), `gcp` (with `anthropic` or `gemini`), `azure` (with "
        "`openai`). Null: the vendor's own API.",
    )
    provider_name: str = Field(
        default="",
        description="Organisation operating the endpoint, e.g. `anthropic` or `mistral`, used "
        "for the standby diversity warning. Empty: the cloud's operator (`aws`, `google`, "
        "`microsoft`), else `provider`.",
    )
    region: str = Field(
        default="global",
        validate_default=True,
        description="Where the endpoint runs, part of the diversity warning. On `aws` it is "
        "the SigV4 signing region (e.g. `us-west-2`), on `gcp` the Vertex location in the "
        "URL (e.g. `europe-west1`, or `global`).",
    )
    base_url: HttpUrl | None = Field(
        default=None,
        validate_default=True,
        description="The endpoint's URL: for Anthropic and Gemini the host root, for "
        "OpenAI-style servers including `/v1`, on Azure the resource "
        "(`https://NAME.openai.azure.com`). Required except on `aws` and `gcp`, where it is "
        "derived from the region when omitted.",
    )
    model: str = Field(
        min_length=1,
        description="Model id sent on the wire: on Bedrock a model id, inference profile or "
        "ARN, on Vertex e.g. `claude-sonnet-4-5@20250929`, on Azure the model behind the "
        "deployment (informational).",
    )
    model_family: str | None = Field(
        default=None,
        description="The vendor's name for the model when a cloud's id differs (e.g. "
        "`claude-sonnet-4-5`): routes of one family refuse the same content, so a "
        "content-filter failure skips all of them. Null: `model`.",
    )
    deployment: str | None = Field(
        default=None,
        validate_default=True,
        description="The Azure OpenAI deployment name: required with `cloud: azure`, not "
        "allowed otherwise.",
    )
    api_version: str | None = Field(
        default=None,
        description="The Azure OpenAI `api-version` query parameter, only with `cloud: "
        "azure`. Null: `2024-10-21`.",
    )
    project: str | None = Field(
        default=None,
        validate_default=True,
        description="The Google Cloud project id: required with `cloud: gcp`, not allowed "
        "otherwise (`${GOOGLE_CLOUD_PROJECT}` works).",
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key; the key itself "
        "never appears in the file or in workflow history. Null: the simulator, or a cloud "
        "credential chain.",
    )
    auth: AuthMethod | None = Field(
        default=None,
        validate_default=True,
        description="How requests authenticate: `none`, `api_key`, `aws_sigv4` (aws), "
        "`google_oauth` (gcp) or `entra_id` (azure); credential chains are read from the "
        "platform at call time. Null: `api_key` when `api_key_env` is set, else `none`, "
        "`aws_sigv4`, `google_oauth` or `entra_id` by cloud.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Extra request headers (header to value), e.g. OpenRouter's "
        "`HTTP-Referer`; never a credential header and none the client sets itself.",
    )
    headers_from_env: dict[str, str] = Field(
        default_factory=dict,
        description="Secret headers (header to environment variable name), read at call "
        "time; an unset variable is an `auth` failure naming it.",
    )
    query: dict[str, str] = Field(
        default_factory=dict,
        description="Extra query parameters merged into the adapter's own; not "
        "`api-version` on azure.",
    )
    context_window: int | None = Field(
        default=None,
        ge=256,
        le=MAX_CONTEXT_WINDOW_TOKENS,
        description="Tokens of input plus output the model accepts (at most 100,000,000); "
        "the planner skips or "
        "triages requests that do not fit. Null: unknown, and the route is tried as-is. "
        "Either way a window the provider states in a context-length rejection is learned "
        "and wins over this value.",
    )
    max_output_tokens: int = Field(
        default=8192,
        ge=1,
        description="Largest completion the model produces; the planner reserves the smaller "
        "of this and the request's `max_tokens` of the window for output.",
    )
    prices: Prices = Field(
        default_factory=Prices, description="What the route charges per million tokens."
    )
    capabilities: Capabilities = Field(
        default_factory=Capabilities,
        description="What the route supports: streaming, native structured output, "
        "assistant prefill.",
    )
    max_connections: int = Field(
        default=20,
        ge=1,
        le=1000,
        description="Connections one worker keeps open to this endpoint per bulkhead: "
        "each bulkhead has its own slots (a burst in one agent tier never takes another's); "
        "a call that finds them all busy for the connect budget fails as local_saturation, "
        "which never counts against the route.",
    )

    @field_validator("cloud")
    @classmethod
    def _cloud(cls, v: Cloud | None, info: ValidationInfo) -> Cloud | None:
        provider = info.data.get("provider")
        if provider is ProviderKind.BEDROCK and v is None:
            return Cloud.AWS  # Converse exists only on AWS
        if v is not None and provider is not None and provider not in CLOUD_PROVIDERS[v]:
            allowed = ", ".join(sorted(p.value for p in CLOUD_PROVIDERS[v]))
            raise ValueError(f"cloud {v.value} serves provider {allowed}, not {provider.value}")
        return v

    @field_validator("region")
    @classmethod
    def _region(cls, v: str, info: ValidationInfo) -> str:
        cloud = info.data.get("cloud")
        if cloud is Cloud.AWS and not _AWS_REGION.match(v):
            raise ValueError(f"{v!r} is not an AWS region (e.g. us-west-2, eu-central-1)")
        if cloud is Cloud.GCP and not _GCP_REGION.match(v):
            raise ValueError(f"{v!r} is not a Vertex AI location (e.g. us-east5, europe-west1)")
        return v

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: HttpUrl | None, info: ValidationInfo) -> HttpUrl | None:
        if v is None and info.data.get("cloud") not in (Cloud.AWS, Cloud.GCP):
            raise ValueError("required (only aws and gcp routes derive it from the region)")
        return v

    @field_validator("deployment")
    @classmethod
    def _deployment(cls, v: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("cloud") is Cloud.AZURE and not v:
            raise ValueError("required when cloud is azure (the Azure OpenAI deployment name)")
        _only_for(v, info, Cloud.AZURE)
        return v

    @field_validator("api_version")
    @classmethod
    def _api_version(cls, v: str | None, info: ValidationInfo) -> str | None:
        _only_for(v, info, Cloud.AZURE)
        return v

    @field_validator("project")
    @classmethod
    def _project(cls, v: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("cloud") is Cloud.GCP and not v:
            raise ValueError("required when cloud is gcp (the Google Cloud project id)")
        _only_for(v, info, Cloud.GCP)
        return v

    @field_validator("api_key_env")
    @classmethod
    def _api_key_env(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_NAME.match(v):
            raise ValueError(f"{v!r} is not an environment variable name (put keys in the env)")
        return v

    @field_validator("auth")
    @classmethod
    def _auth(cls, v: AuthMethod | None, info: ValidationInfo) -> AuthMethod:
        cloud = info.data.get("cloud")
        has_key = bool(info.data.get("api_key_env"))
        if v is None:
            v = _default_auth(cloud, has_key)
        if v not in CLOUD_AUTH[cloud]:
            where = f"cloud {cloud.value}" if cloud else "a provider's own API"
            allowed = ", ".join(sorted(a.value for a in CLOUD_AUTH[cloud]))
            raise ValueError(f"{v.value} is not available for {where} (use one of: {allowed})")
        if v is AuthMethod.API_KEY and not has_key:
            raise ValueError("api_key needs api_key_env (the variable holding the key)")
        return v

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            _check_header_name(name)
            if name.lower() in CREDENTIAL_HEADERS:
                raise ValueError(
                    f"{name!r} carries a credential: name its variable in headers_from_env"
                )
        return v

    @field_validator("headers_from_env")
    @classmethod
    def _headers_from_env(cls, v: dict[str, str]) -> dict[str, str]:
        for name, env in v.items():
            _check_header_name(name)
            if not _ENV_NAME.match(env):
                raise ValueError(f"{name}: {env!r} is not an environment variable name")
        return v

    @field_validator("query")
    @classmethod
    def _query(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if "api-version" in v and info.data.get("cloud") is Cloud.AZURE:
            raise ValueError("set api_version instead of query.api-version")
        return v

    @property
    def organisation(self) -> str:
        """Who operates the endpoint; failover across organisations survives a provider outage."""
        if self.provider_name:
            return self.provider_name
        if self.cloud is not None:
            return CLOUD_ORGANISATION[self.cloud]
        return self.provider.value

    @property
    def wire(self) -> str:
        """The API that validates a request sent here: wire format at organisation
        (``anthropic@anthropic``, ``anthropic@google``, ``bedrock@aws``, ``openai@mistral``).

        Regions of one API accept and refuse the same requests; another vendor's API, even
        speaking the same format, may not: a 400 from one wire says nothing about another.
        """
        return f"{self.provider.value}@{self.organisation}"

    @property
    def family(self) -> str:
        """The model as the vendor names it, whatever the cloud's id (``model_family``).

        Routes of one family refuse the same content: a content-filter failure skips them all.
        """
        return self.model_family or self.model

    def base(self) -> str:
        """The base URL, derived from the region for aws and gcp routes that name none."""
        if self.base_url is not None:
            return str(self.base_url).rstrip("/")
        if self.cloud is Cloud.AWS:
            return f"https://bedrock-runtime.{self.region}.amazonaws.com"
        if self.region == "global":
            return "https://aiplatform.googleapis.com"
        return f"https://{self.region}-aiplatform.googleapis.com"


def _default_auth(cloud: Cloud | None, has_key: bool) -> AuthMethod:
    if has_key:
        return AuthMethod.API_KEY
    return {
        None: AuthMethod.NONE,
        Cloud.AZURE: AuthMethod.ENTRA_ID,
        Cloud.AWS: AuthMethod.AWS_SIGV4,
        Cloud.GCP: AuthMethod.GOOGLE_OAUTH,
    }[cloud]


def _check_header_name(name: str) -> None:
    if not _HEADER_NAME.match(name):
        raise ValueError(f"{name!r} is not a valid HTTP header name")
    if name.lower() in RESERVED_HEADERS:
        raise ValueError(f"{name!r} is set by the client itself")
