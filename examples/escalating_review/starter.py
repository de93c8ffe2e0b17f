"""Review a change twice: once healthy, then with every model tier down.

    python starter.py                 # the second review is answered from the cache and
                                      # waits for `failover resolve ID accept_degraded`

The first review fills the response cache. Then every reviewer endpoint of the simulator
answers 529, so the second review of the same change can only be answered from the cache:
the run escalates and this script prints its id and waits for the decision.
"""

from __future__ import annotations

import os
import uuid

from review_workflows import ChangeReviewWorkflow, ReviewInput, ReviewResult

from agent_failover import connect_client, run_and_exit
from agent_failover.testing import SimAdmin
from worker import TASK_QUEUE

CHANGE = "Drain one region at a time during the rollout, keeping a rollback for each step."
ENDPOINTS = ("anthropic-us-east", "anthropic-eu-west", "openai-us", "cheap-mini")


async def review(client, label: str) -> ReviewResult:
    wid = f"review-{label}-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        ChangeReviewWorkflow.run, ReviewInput(change=CHANGE), id=wid, task_queue=TASK_QUEUE
    )
    print(f"{label}: started {wid}")
    print(f"  (if it escalates: failover escalations show {wid}; failover resolve {wid} ...)")
    result = await handle.result()
    out = result.answer
    print(
        f"  -> tier {out.tier} {out.capability.value} via {out.route}; decision "
        f"{result.decision or 'none needed'}; {', '.join(c.value for c in out.reason_codes)}"
    )
    return result


async def main() -> None:
    client = await connect_client()
    await review(client, "healthy")
    async with SimAdmin(os.environ.get("SIM_URL", "http://127.0.0.1:8400")) as admin:
        for ep in ENDPOINTS:
            await admin.set_faults(ep, [{"kind": "overloaded"}])
        try:
            await review(client, "outage")
        finally:
            for ep in ENDPOINTS:
                await admin.clear(ep)


if __name__ == "__main__":
    run_and_exit(main())
