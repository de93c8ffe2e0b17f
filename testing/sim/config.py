"""The simulator's configuration: which endpoints it hosts and how fast they are.

``config/sim.yaml`` lists the endpoints (wire kind, organisation, region, models,
context window, base latency model, tokens per second). The models validate on
construction so a bad file fails at start-up with the field path and the reason. The
base-URL helpers follow the official SDKs' conventions, so a caller can hand
``base_url(...)`` straight to ``anthropic.AsyncAnthropic`` or ``openai.AsyncOpenAI``.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_failover.config import DEFAULT_SIM_CONFIG_PATH
from agent_failover.resilience.endpoint import (
    CLOUD_PROVIDERS,
    AuthMethod,
    Cloud,
    EndpointConfig,
    ProviderKind,
)

DEFAULT_TTFT_MEDIAN_MS = 10.0
DEFAULT_TTFT_SIGMA = 0.25
DEFAULT_TOKENS_PER_SEC = 2000.0
DEFAULT_MAX_ATTEMPTS_LOGGED = 50_000
#: In-flight requests on one endpoint above which ``accuracy_under_load`` applies.
DEFAULT_LOAD_THRESHOLD = 4
#: The Google Cloud project simulated Vertex routes are addressed under.
SIM_GCP_PROJECT = "sim-project"


class LatencyModel(BaseModel):
    """Base time to first byte: lognormal around a median, clamped to [min_ms, max_ms]."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_median_ms: float = Field(default=DEFAULT_TTFT_MEDIAN_MS, ge=0.0)
    ttft_sigma: float = Field(default=DEFAULT_TTFT_SIGMA, ge=0.0, le=3.0)
    min_ms: float = Field(default=0.0, ge=0.0)
    max_ms: float = Field(default=60_000.0, ge=0.0)

    @model_validator(mode="after")
    def _bounds(self) -> LatencyModel:
        if self.min_ms > self.max_ms:
            raise ValueError("min_ms must not exceed max_ms")
        return self

    def sample_s(self, rng: random.Random) -> float:
        """Draw one time-to-first-byte in seconds."""
        if self.ttft_median_ms <= 0:
            return self.min_ms / 1000.0
        ms = self.ttft_median_ms
        if self.ttft_sigma > 0:
            ms = rng.lognormvariate(math.log(self.ttft_median_ms), self.ttft_sigma)
        return min(max(ms, self.min_ms), self.max_ms) / 1000.0


class AccuracySettings(BaseModel):
    """How often an endpoint answers golden-set tasks right (:mod:`testing.sim.golden`).

    ``accuracy_under_load`` (when set) replaces ``accuracy`` while more than
    ``load_threshold`` requests are in flight on the endpoint, the request being
    answered included: a model that degrades silently when busy.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    accuracy: float = Field(default=1.0, ge=0.0, le=1.0)
    accuracy_under_load: float | None = Field(default=None, ge=0.0, le=1.0)
    load_threshold: int = Field(default=DEFAULT_LOAD_THRESHOLD, ge=1)

    def effective(self, inflight: int) -> float:
        """The accuracy that applies with ``inflight`` requests on the endpoint."""
        if self.accuracy_under_load is not None and inflight > self.load_threshold:
            return self.accuracy_under_load
        return self.accuracy


class SimEndpoint(BaseModel):
    """One simulated endpoint, mounted at ``/<name>/`` and speaking ``kind``'s wire format.

    ``cloud`` hosts the wire the way that cloud does: ``azure`` serves OpenAI deployments
    (``deployments`` maps each deployment name to a model; a model is also its own
    deployment), ``aws`` serves Bedrock Converse and InvokeModel, ``gcp`` serves Vertex AI
    (``kind`` is the default publisher; every model in ``models`` is served, Gemini ones
    by ``generateContent`` and Claude ones by ``rawPredict``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    kind: ProviderKind
    cloud: Cloud | None = None
    organisation: str
    region: str = "global"
    models: list[str] = Field(min_length=1)
    deployments: dict[str, str] = Field(default_factory=dict)
    context_window: int = Field(default=128_000, ge=256)
    max_output_tokens: int = Field(default=8192, ge=1)
    latency: LatencyModel = Field(default_factory=LatencyModel)
    tokens_per_sec: float = Field(default=DEFAULT_TOKENS_PER_SEC, gt=0.0)
    # Golden-set quality (testing.sim.golden); 1.0 = always right.
    accuracy: float = Field(default=1.0, ge=0.0, le=1.0)
    accuracy_under_load: float | None = Field(default=None, ge=0.0, le=1.0)
    load_threshold: int = Field(default=DEFAULT_LOAD_THRESHOLD, ge=1)

    @property
    def accuracy_settings(self) -> AccuracySettings:
        """The configured golden-set accuracy as one value (the admin API can replace it)."""
        return AccuracySettings(
            accuracy=self.accuracy,
            accuracy_under_load=self.accuracy_under_load,
            load_threshold=self.load_threshold,
        )

    @model_validator(mode="after")
    def _cloud_wire(self) -> SimEndpoint:
        if self.kind is ProviderKind.BEDROCK and self.cloud is not Cloud.AWS:
            raise ValueError("kind bedrock needs cloud: aws")
        if self.cloud is not None and self.kind not in CLOUD_PROVIDERS[self.cloud]:
            raise ValueError(f"cloud {self.cloud.value} does not serve kind {self.kind.value}")
        unknown = sorted(set(self.deployments.values()) - set(self.models))
        if unknown:
            raise ValueError(f"deployments name models not in models: {unknown}")
        return self

    @property
    def default_model(self) -> str:
        """The first listed model; the one a probe or demo should ask for."""
        return self.models[0]

    def deployment_model(self, deployment: str) -> str | None:
        """The model an Azure deployment name serves (a model is its own deployment)."""
        if deployment in self.deployments:
            return self.deployments[deployment]
        return deployment if deployment in self.models else None

    def base_url(self, server_url: str) -> str:
        """The base URL an official SDK expects for this endpoint on ``server_url``.

        OpenAI's includes ``/v1``; Azure's is the resource root (``azure_endpoint``);
        Bedrock's is boto3's ``endpoint_url``; Vertex's is the host the adapter and
        google-genai append ``/v1/...`` to (``AnthropicVertex`` wants ``{base}/v1``).
        """
        root = f"{server_url.rstrip('/')}/{self.name}"
        if self.kind is ProviderKind.OPENAI and self.cloud is None:
            return f"{root}/v1"
        return root

    def to_endpoint_config(self, server_url: str, **overrides: Any) -> EndpointConfig:
        """Describe this simulated endpoint as a shared :class:`EndpointConfig`.

        Cloud routes come unauthenticated (``auth: none``) unless ``overrides`` say
        otherwise: the simulator does not need credentials unless ``require_auth`` is set.
        """
        fields: dict[str, Any] = {
            "name": self.name,
            "provider": self.kind,
            "provider_name": self.organisation,
            "base_url": self.base_url(server_url),
            "region": self.region,
            "model": self.default_model,
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
        }
        if self.cloud is not None:
            fields.update(cloud=self.cloud, auth=AuthMethod.NONE)
        if self.cloud is Cloud.AZURE:
            fields["deployment"] = next(iter(self.deployments), self.default_model)
        if self.cloud is Cloud.GCP:
            fields["project"] = SIM_GCP_PROJECT
        fields.update(overrides)
        return EndpointConfig(**fields)


class SimConfig(BaseModel):
    """The whole simulator: its endpoints and global knobs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 1234
    require_auth: bool = False
    max_attempts_logged: int = Field(default=DEFAULT_MAX_ATTEMPTS_LOGGED, ge=1)
    endpoints: list[SimEndpoint] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> SimConfig:
        names = [e.name for e in self.endpoints]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate endpoint names: {dupes}")
        if "_admin" in names:
            raise ValueError("'_admin' is reserved for the admin API")
        return self

    def endpoint(self, name: str) -> SimEndpoint:
        """Look an endpoint up by name; ``KeyError`` if it is not hosted."""
        for ep in self.endpoints:
            if ep.name == name:
                return ep
        raise KeyError(name)

    @property
    def endpoint_names(self) -> list[str]:
        """Names of every hosted endpoint, in config order."""
        return [e.name for e in self.endpoints]


def load_sim_config(path: str | Path | None = None) -> SimConfig:
    """Read and validate a simulator YAML file (``config/sim.yaml`` by default)."""
    p = Path(path) if path is not None else DEFAULT_SIM_CONFIG_PATH
    with p.open(encoding="utf-8") as fh:
        raw = yaml.safe_load(fh) or {}
    return SimConfig.model_validate(raw)
