"""Prompt registry and structured-output path: what one attempt on one route is sent.

Pure functions of the role's policy and the route's endpoint, so the workflow picks the
same prompt on replay and the activity input carries only the chosen text:

* :func:`choose_prompt` picks the role's variant for the route's model, else for its
  provider, else the default; when the role defines variants but none fits the route, the
  default is used and the choice carries a note saying so.
* :func:`structured_path` decides how a JSON schema is asked for: ``native`` (the wire's
  own schema support, when the endpoint declares ``capabilities.structured_output``) or
  ``prompt`` (the schema is written into the system prompt and the answer validated).
* :func:`apply_prompt` builds the request for the attempt from both decisions.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from agent_failover.resilience.config import FewShotExample, PromptVariant, RolePolicy
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.models import ChatRequest

DEFAULT_VARIANT = "default"
#: The variant id of a call whose caller set ``request.system`` itself (never replaced).
CALLER_VARIANT = "caller"
#: How the schema is introduced in the prompt-and-validate path.
SCHEMA_INSTRUCTION = "Answer with JSON only, valid against this JSON Schema:"


class StructuredPath(StrEnum):
    NATIVE = "native"
    PROMPT = "prompt"


class PromptChoice(BaseModel):
    """The prompt one route gets: its id (``model:<m>``, ``provider:<p>``, ``default``)."""

    variant: str
    system: str | None = None
    few_shot: list[FewShotExample] = []
    note: str | None = None


def choose_prompt(role: RolePolicy, endpoint: EndpointConfig) -> PromptChoice:
    """The role's prompt variant for ``endpoint`` (model, then provider, then default)."""
    reg = role.prompts
    for key in dict.fromkeys((endpoint.model, endpoint.family)):
        if key in reg.models:
            return _choice(f"model:{key}", reg.models[key], role)
    for key in dict.fromkeys(p for p in (endpoint.provider_name, endpoint.provider.value) if p):
        if key in reg.providers:
            return _choice(f"provider:{key}", reg.providers[key], role)
    note = None
    if reg.has_variants:
        note = (
            f"no prompt variant for model {endpoint.model!r} or provider "
            f"{endpoint.provider_name or endpoint.provider.value!r}; default prompt used"
        )
    return PromptChoice(
        variant=DEFAULT_VARIANT, system=role.system_prompt, few_shot=list(reg.few_shot), note=note
    )


def _choice(variant: str, v: PromptVariant, role: RolePolicy) -> PromptChoice:
    return PromptChoice(
        variant=variant,
        system=v.system_prompt if v.system_prompt is not None else role.system_prompt,
        few_shot=list(v.few_shot or role.prompts.few_shot),
    )


def structured_path(
    endpoint: EndpointConfig, schema: dict[str, Any] | None
) -> StructuredPath | None:
    """``native`` when the endpoint declares schema support, ``prompt`` otherwise; None
    when no schema is asked for."""
    if schema is None:
        return None
    if endpoint.capabilities.structured_output:
        return StructuredPath.NATIVE
    return StructuredPath.PROMPT


def render_system(choice: PromptChoice) -> str | None:
    """The variant's system prompt with its few-shot block appended."""
    if not choice.few_shot:
        return choice.system
    shots = "\n\n".join(
        f"Example {i}\nInput: {ex.user}\nAnswer: {ex.assistant}"
        for i, ex in enumerate(choice.few_shot, 1)
    )
    head = f"{choice.system}\n\n" if choice.system else ""
    return f"{head}Examples of good answers:\n\n{shots}"


def schema_instruction(schema: dict[str, Any]) -> str:
    """The text that asks for ``schema`` in the prompt-and-validate path."""
    return f"{SCHEMA_INSTRUCTION}\n{json.dumps(schema, sort_keys=True)}"


def apply_prompt(
    request: ChatRequest,
    choice: PromptChoice | None,
    path: StructuredPath | None,
) -> ChatRequest:
    """``request`` as sent on the route: the chosen system prompt (``choice`` None keeps
    the caller's) and, on the prompt path, the schema moved from the wire into the text."""
    system = request.system if choice is None else render_system(choice)
    update: dict[str, Any] = {"system": system}
    if path is StructuredPath.PROMPT and request.json_schema is not None:
        extra = schema_instruction(request.json_schema)
        update = {"system": f"{system}\n\n{extra}" if system else extra, "json_schema": None}
    return request.model_copy(update=update)
