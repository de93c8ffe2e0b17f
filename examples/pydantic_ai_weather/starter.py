"""Chat with the weather assistant: two questions, optionally with an outage between them.

    python starter.py                                     # two turns, healthy providers
    python starter.py --outage-between-turns anthropic-us-east

``--outage-between-turns ENDPOINT`` makes that simulator endpoint answer 529 (overloaded)
after the first turn, so the second turn's model requests fail over. The script prints each
answer with its tool calls and the route of every model request, the run's activities as
the Temporal UI lists them, and the turns as JSON on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import uuid

from agent_failover import connect_client, run_and_exit
from agent_failover.testing import SimAdmin, activity_rows, format_rows
from worker import TASK_QUEUE
from workflows import Turn, WeatherChatWorkflow

QUESTIONS = ("What's the weather in Lyon right now?", "And how about Paris?")


def show(turn: Turn) -> None:
    print(f"\nQ: {turn.question}\nA: {turn.answer}")
    for call in turn.tool_calls:
        print(f"   tool {call.name}({json.dumps(call.args)})  id={call.id}")
    for out in turn.model_calls:
        tried = ", ".join(f"{a.route}:{a.outcome}" for a in out.attempts)
        print(
            f"   model request -> {out.route} (tier {out.tier}, {out.capability.value}) [{tried}]"
        )


async def main(outage: str | None) -> list[Turn]:
    client = await connect_client()
    handle = await client.start_workflow(
        WeatherChatWorkflow.run, id=f"weather-chat-{uuid.uuid4().hex[:8]}", task_queue=TASK_QUEUE
    )
    turns = [await handle.execute_update(WeatherChatWorkflow.ask, QUESTIONS[0])]
    show(turns[0])
    if outage:
        async with SimAdmin(os.environ.get("SIM_URL", "http://127.0.0.1:8400")) as admin:
            await admin.set_faults(outage, [{"kind": "overloaded"}])
        print(f"\n-- {outage} is now overloaded (529) --")
    turns.append(await handle.execute_update(WeatherChatWorkflow.ask, QUESTIONS[1]))
    show(turns[1])
    await handle.signal(WeatherChatWorkflow.close)
    await handle.result()
    print(f"\nActivities of workflow {handle.id} (as the Temporal UI lists them):")
    print(format_rows(await activity_rows(handle)))
    print(json.dumps([t.model_dump(mode="json") for t in turns]))
    return turns


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-between-turns", metavar="ENDPOINT", default=None)
    run_and_exit(main(parser.parse_args().outage_between_turns))
