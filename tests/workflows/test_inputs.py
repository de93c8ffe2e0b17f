"""workflow_input: one argument, a JSON object, valid fields — or a clear, final error."""

from __future__ import annotations

import pytest

from agent_failover.workflows.inputs import InvalidWorkflowInput, workflow_input
from agent_failover.workflows.models import MonitorInput, PipelineInput


def _error(args: tuple, **kw) -> InvalidWorkflowInput:
    with pytest.raises(InvalidWorkflowInput) as info:
        workflow_input(PipelineInput, args, workflow_name="AgentPipelineWorkflow", **kw)
    assert info.value.non_retryable
    return info.value


def test_model_or_object_is_accepted() -> None:
    """The typed model passes through; a JSON object is validated into it."""
    inp = PipelineInput(task="t")
    assert workflow_input(PipelineInput, (inp,), workflow_name="w") is inp
    assert workflow_input(MonitorInput, ({"routes": ["a"]},), workflow_name="w").routes == ["a"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("hello",), ["a string", "'hello'"]),
        (([1, 2],), ["an array"]),
        ((None,), ["null"]),
        (({"task": "t"}, "extra"), ["got 2"]),
        ((), ["got 0"]),
    ],
)
def test_shape_errors_say_what_was_given(args: tuple, words: list[str]) -> None:
    """Wrong arity and non-object input name the workflow and what arrived."""
    err = _error(args)
    assert err.type == "invalid_workflow_input"
    assert "AgentPipelineWorkflow takes one PipelineInput argument" in str(err)
    assert all(w in str(err) for w in words), str(err)


def test_field_errors_name_every_path_with_the_callers_type() -> None:
    """Invalid fields are listed with their dotted paths, under the chosen error type."""
    err = _error(
        ({"task": " ", "options": {"max_subtasks": 99}},), error_type="invalid_pipeline_input"
    )
    assert err.type == "invalid_pipeline_input"
    assert "task:" in str(err) and "options.max_subtasks:" in str(err)
