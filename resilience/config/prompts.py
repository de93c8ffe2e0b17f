"""A role's prompt settings: its few-shot block, per-model and per-provider prompt variants,
and the summarization of context that triage would drop.

:class:`PromptRegistry` holds the role's default few-shot examples and the variants
(:class:`PromptVariant`) that replace the system prompt or the examples on routes serving
one model or at one provider; :mod:`resilience.prompts` picks the variant for a route.
:class:`SummarizeSettings` says whether dropped context is summarized on the cheapest
healthy route first. Every text enters workflow history, so each is bounded
(``MAX_PROMPT_*``, ``MAX_FEW_SHOT``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from agent_failover.resilience.config.validation import STRICT

#: Longest system prompt (or few-shot text) one prompt variant may hold: it enters history.
MAX_PROMPT_CHARS = 16_000
#: Most prompt variants (models plus providers) one role may define.
MAX_PROMPT_VARIANTS = 32
#: Most few-shot examples one variant may carry.
MAX_FEW_SHOT = 8
#: Time the summarization of dropped context may take before plain triage is used instead.
DEFAULT_SUMMARIZE_BUDGET_MS = 3_000.0
#: Tokens the summary of dropped context may use.
DEFAULT_SUMMARIZE_MAX_TOKENS = 256


class FewShotExample(BaseModel):
    """One worked example shown to the model in the system prompt (input, then answer)."""

    model_config = STRICT

    user: str = Field(
        min_length=1,
        max_length=MAX_PROMPT_CHARS,
        description="The example's input, shown as the user's turn.",
    )
    assistant: str = Field(
        min_length=1,
        max_length=MAX_PROMPT_CHARS,
        description="The example's good answer, shown as the assistant's turn.",
    )


class PromptVariant(BaseModel):
    """A role's system prompt for one model or provider (None: the role's default text)."""

    model_config = STRICT

    system_prompt: str | None = Field(
        default=None,
        max_length=MAX_PROMPT_CHARS,
        description="System prompt on the routes this variant applies to. Null: the role's "
        "`system_prompt`.",
    )
    few_shot: list[FewShotExample] = Field(
        default_factory=list,
        max_length=MAX_FEW_SHOT,
        description="Few-shot examples on the routes this variant applies to, at most 8. "
        "Empty: the role's `prompts.few_shot`.",
    )


class PromptRegistry(BaseModel):
    """Per-role prompt variants: the default few-shot block, then overrides.

    A call on a route uses the variant of the route's model (``models``, keyed by the
    endpoint's ``model`` or ``model_family``), else of its provider (``providers``,
    keyed by ``provider_name`` or ``provider``), else the role's default
    (``system_prompt`` plus ``few_shot``).
    """

    model_config = STRICT

    few_shot: list[FewShotExample] = Field(
        default_factory=list,
        max_length=MAX_FEW_SHOT,
        description="Default few-shot block: up to 8 worked examples appended to the system "
        'prompt as "Examples of good answers".',
    )
    models: dict[str, PromptVariant] = Field(
        default_factory=dict,
        description="Prompt variants for the routes serving a model, keyed by the endpoint's "
        "`model` or `model_family`; each key must name a model one of the role's routes "
        "serves.",
    )
    providers: dict[str, PromptVariant] = Field(
        default_factory=dict,
        description="Prompt variants for the routes at a provider, keyed by `provider_name` "
        "or the wire `provider`, used when no model variant fits. At most 32 variants per "
        "role, `models` included, and 16,000 characters per text.",
    )

    @model_validator(mode="after")
    def _check_size(self) -> PromptRegistry:
        n = len(self.models) + len(self.providers)
        if n > MAX_PROMPT_VARIANTS:
            raise ValueError(f"{n} prompt variants; at most {MAX_PROMPT_VARIANTS} per role")
        return self

    @property
    def has_variants(self) -> bool:
        return bool(self.models or self.providers)


class SummarizeSettings(BaseModel):
    """Summarize the context triage would drop, on the cheapest healthy route, first."""

    model_config = STRICT

    enabled: bool = Field(
        default=False,
        description="Before triage drops context that is not `background` to fit a smaller "
        "window, summarize exactly that context on the cheapest healthy roster route and "
        "send the summary in its place (reason `CONTEXT_SUMMARIZED`).",
    )
    budget_ms: float = Field(
        default=DEFAULT_SUMMARIZE_BUDGET_MS,
        gt=0.0,
        le=120_000.0,
        description="Milliseconds the summarization may take, never more than the call's "
        "budget left; on timeout or failure the call uses plain triage.",
    )
    max_tokens: int = Field(
        default=DEFAULT_SUMMARIZE_MAX_TOKENS,
        ge=16,
        le=4_096,
        description="Output tokens the summary may use.",
    )
