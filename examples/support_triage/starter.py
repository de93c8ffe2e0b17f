"""Start one triage and print the answer with its failover history.

python starter.py ent-42 "Checkout returns 500 for every EU customer"
"""

from __future__ import annotations

import sys
import uuid

from agent_failover import connect_client, run_and_exit
from config import TASK_QUEUE
from workflows import TicketInput, TriageResult, TriageWorkflow


async def main(customer_id: str, text: str) -> TriageResult:
    client = await connect_client()
    result = await client.execute_workflow(
        TriageWorkflow.run,
        TicketInput(customer_id=customer_id, text=text),
        id=f"triage-{uuid.uuid4().hex[:8]}",
        task_queue=TASK_QUEUE,
    )
    a = result.answer
    print(f"severity={result.severity} team={result.team}")
    print(f"answered by {a.route} (tier {a.tier}, {a.capability.value}); reasons {a.reason_codes}")
    for att in a.attempts:
        facts = (
            f" HTTP {att.http_status} {att.provider_code or ''}".rstrip() if att.http_status else ""
        )
        print(f"  tier {att.tier} {att.route}: {att.outcome}{facts}")
    print(result.model_dump_json())
    return result


if __name__ == "__main__":
    run_and_exit(main(sys.argv[1], " ".join(sys.argv[2:]) or "Login page is slow"))
