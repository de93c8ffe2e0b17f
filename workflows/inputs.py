"""Workflow input checked in the first workflow task, so a bad start fails the run at once.

Temporal decodes a workflow's arguments before any workflow code runs. If that fails (a
bare string where a model was expected) or the call does not match the ``run`` signature
(extra arguments, none at all), the SDK fails the *workflow task*, and Temporal retries
it forever: the run never ends and never says why. So our workflows take their arguments
untyped (``*args``: decoding plain JSON cannot fail) and hand them to
:func:`workflow_input`, which raises a non-retryable :class:`InvalidWorkflowInput` naming
every bad field. Callers still pass the typed model (``PipelineInput``...).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.exceptions import ApplicationError

#: ApplicationError type of a workflow started with input it cannot use.
INVALID_WORKFLOW_INPUT = "invalid_workflow_input"
#: Longest input excerpt quoted in the error.
_QUOTE_CHARS = 80

M = TypeVar("M", bound=BaseModel)


class InvalidWorkflowInput(ApplicationError):
    """A workflow's input cannot be used: wrong arity, not an object, or invalid fields."""

    def __init__(self, message: str, *, error_type: str = INVALID_WORKFLOW_INPUT) -> None:
        super().__init__(message, type=error_type, non_retryable=True)


def workflow_input(
    model: type[M],
    args: tuple[Any, ...],
    *,
    workflow_name: str,
    error_type: str = INVALID_WORKFLOW_INPUT,
) -> M:
    """The single argument of a workflow start, validated as ``model``.

    Raises :class:`InvalidWorkflowInput` (non-retryable, type ``error_type``) that names
    the workflow and what was wrong: the number of arguments, the JSON type given, or
    each invalid field with its path.
    """
    expected = f"{workflow_name} takes one {model.__name__} argument"
    if len(args) != 1:
        raise InvalidWorkflowInput(f"{expected}, got {len(args)}", error_type=error_type)
    value = args[0]
    if isinstance(value, model):
        return value
    if not isinstance(value, dict):
        quote = repr(value)[:_QUOTE_CHARS]
        raise InvalidWorkflowInput(
            f"{expected} (a JSON object), got {_json_type(value)} {quote}",
            error_type=error_type,
        )
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidWorkflowInput(
            f"invalid {workflow_name} input: {fields}", error_type=error_type
        ) from None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__
