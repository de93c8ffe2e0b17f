"""The monitor keeper's follow step against a client whose update outlives its RPC timeout."""

from __future__ import annotations

from typing import Any

from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError

from agent_failover.supervisor import follow_policy
from agent_failover.workflows.models import MonitorPolicy


class _SlowHandle:
    """A handle whose update never completes within its RPC timeout; counts the queries."""

    def __init__(self) -> None:
        self.queries = 0
        self.updates = 0

    async def query(self, *args: Any, **kwargs: Any) -> Any:
        self.queries += 1
        raise AssertionError("the keeper sends the update without a query first")

    async def execute_update(self, *args: Any, **kwargs: Any) -> Any:
        self.updates += 1
        raise WorkflowUpdateRPCTimeoutOrCancelledError()


class _Client:
    def __init__(self, handle: _SlowHandle) -> None:
        self.handle = handle

    def get_workflow_handle(self, wid: str) -> _SlowHandle:
        return self.handle


async def test_an_update_past_its_rpc_timeout_is_retried_later_not_raised() -> None:
    """``follow_policy`` answers False (the keeper tries again at its next check) instead of
    raising out of the keeper, which ended it for good; and it asks with the update alone."""
    handle = _SlowHandle()
    mp = MonitorPolicy(routes=["a"], interval_s=3, policy_ref="0123456789abcdef", since=1.0)
    assert await follow_policy(_Client(handle), "wf", mp) is False  # type: ignore[arg-type]
    assert handle.updates == 1 and handle.queries == 0
