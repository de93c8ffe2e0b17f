"""What one provider endpoint is: wire kind, URL, model, key env var, window and prices.

This is the wire-level description shared by the adapters, the simulator and the
policy config (:mod:`resilience.config` embeds it). It holds the *name* of the
environment variable with the key, never the key.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, field_validator


class ProviderKind(StrEnum):
    ANTHROPIC = "anthropic"
    OPENAI = "openai"  # also every OpenAI-compatible server (DeepSeek, Mistral, vLLM, Ollama)
    GEMINI = "gemini"


class Prices(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(frozen=True)

    input_per_mtok: float = Field(default=0.0, ge=0.0)
    output_per_mtok: float = Field(default=0.0, ge=0.0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


class Capabilities(BaseModel):
    model_config = ConfigDict(frozen=True)

    streaming: bool = True
    structured_output: bool = True
    assistant_prefill: bool = False


class EndpointConfig(BaseModel):
    """One route: a model at a provider in a region."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    provider: ProviderKind
    provider_name: str = Field(default="", description="Organisation, e.g. 'anthropic', 'openai'")
    base_url: HttpUrl
    region: str = "global"
    model: str
    api_key_env: str | None = None
    context_window: int = Field(default=128_000, ge=256)
    max_output_tokens: int = Field(default=8192, ge=1)
    prices: Prices = Field(default_factory=Prices)
    capabilities: Capabilities = Field(default_factory=Capabilities)
    max_connections: int = Field(default=20, ge=1, le=1000)

    @field_validator("provider_name")
    @classmethod
    def _default_org(cls, v: str) -> str:
        return v

    @property
    def organisation(self) -> str:
        """Who operates the endpoint; failover across organisations survives a provider outage."""
        return self.provider_name or self.provider.value

    def base(self) -> str:
        return str(self.base_url).rstrip("/")
