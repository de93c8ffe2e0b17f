"""``failover init [DIR]``: a minimal working user project, small enough to read in a minute.

Five files: ``policy.yaml`` (one role, three live tiers on the simulator, a static answer),
``workflows.py`` (a workflow that calls ``resilient_complete``), ``worker.py`` (a Temporal
worker with ``FailoverPlugin``), ``starter.py`` (asks one question and prints who answered)
and ``test_workflows.py`` (the primary down, the standby answers: the simulator and the
time-skipping server of ``agent_failover.testing``), plus a README with the commands.
The worker, the starter and the ``failover`` commands all read the task queue from
``FAILOVER_TASK_QUEUE`` (default: the project's name) and the policy from
``FAILOVER_POLICY``, so ``failover status`` finds the project's health monitor.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError

POLICY = """\
# This project's failover policy (`failover config schema` prints every field).
# The endpoints are the agent-failover simulator's (SIM_URL); for a real provider set
# base_url to the vendor's URL and api_key_env to the variable that holds the key.
version: 1
endpoints:
  claude-us:
    provider: anthropic
    region: us-east
    base_url: ${SIM_URL:-http://127.0.0.1:8400}/anthropic-us-east
    model: claude-sonnet-4-5
  gpt-us:
    provider: openai
    region: us
    base_url: ${SIM_URL:-http://127.0.0.1:8400}/openai-us/v1
    model: gpt-4.1
  mistral-eu:
    provider: openai
    provider_name: mistral
    region: eu
    base_url: ${SIM_URL:-http://127.0.0.1:8400}/cheap-mini/v1
    model: mistral-small-latest
probes:
  interval_s: 5
roles:
  assistant:
    ttft_budget_ms: 2000
    total_budget_ms: 15000
    system_prompt: You answer in one short paragraph.
    roster:
      tier0: [claude-us]
      tier1: [gpt-us]
      tier2: [mistral-eu]
      static:
        content: The assistant is unavailable right now; please try again later.
"""

WORKFLOWS = '''\
"""This project's workflow: one LLM call that fails over instead of failing."""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover import AgentOutput, ChatRequest, Message, resilient_complete
    from agent_failover.visibility import upsert_failover_search_attributes


@workflow.defn
class AskWorkflow:
    @workflow.run
    async def run(self, question: str) -> AgentOutput:
        request = ChatRequest(messages=[Message(role="user", content=question)], max_tokens=200)
        answer = await resilient_complete("assistant", request)  # a role of policy.yaml
        upsert_failover_search_attributes([answer])  # Degraded, WorstTier... in the Web UI
        return answer
'''

WORKER = '''\
"""This project's worker: `python worker.py` (Ctrl-C or SIGTERM drains and stops it).

Temporal from TEMPORAL_ADDRESS (default 127.0.0.1:7233), health state in REDIS_URL
(default redis://127.0.0.1:6379/0), the task queue FAILOVER_TASK_QUEUE, the policy
FAILOVER_POLICY (default policy.yaml here): the `failover` commands read the same ones.
"""

import asyncio
import os
import signal
from pathlib import Path

from temporalio.worker import Worker

from agent_failover import FailoverPlugin, connect_client, run_and_exit
from workflows import AskWorkflow

TASK_QUEUE = os.environ.get("FAILOVER_TASK_QUEUE", "{queue}")
POLICY = os.environ.get("FAILOVER_POLICY", str(Path(__file__).with_name("policy.yaml")))


async def main() -> None:
    client = await connect_client()
    plugin = FailoverPlugin(POLICY, include_pipeline=False)
    worker = Worker(client, task_queue=TASK_QUEUE, workflows=[AskWorkflow], plugins=[plugin])
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with worker:  # leaving it drains the worker
        print(f"worker ready on task queue {{TASK_QUEUE}}", flush=True)
        await stop.wait()
    await plugin.aclose()


if __name__ == "__main__":
    run_and_exit(main())
'''

STARTER = '''\
"""Ask one question: `python starter.py "Why is the sky blue?"`."""

import sys
import uuid

from agent_failover import connect_client, run_and_exit
from worker import TASK_QUEUE
from workflows import AskWorkflow


async def main(question: str) -> None:
    client = await connect_client()
    answer = await client.execute_workflow(
        AskWorkflow.run, question, id=f"ask-{{uuid.uuid4().hex[:8]}}", task_queue=TASK_QUEUE
    )
    print(f"answered by {{answer.route}} (tier {{answer.tier}}, {{answer.capability.value}})")
    for attempt in answer.attempts:
        print(f"  tried {{attempt.route}}: {{attempt.outcome}}")
    print(answer.content)


if __name__ == "__main__":
    run_and_exit(main(" ".join(sys.argv[1:]) or "Why is the sky blue?"))
'''

TEST = '''\
"""The primary is overloaded: the standby answers (simulator + Temporal's test server).

python -m pytest -q   (needs: pip install 'agent-failover[testing]' pytest)
"""

import asyncio
import os
import uuid

from temporalio.worker import Worker

from agent_failover import FailoverPlugin
from agent_failover.testing import SimAdmin, start_simulator, start_time_skipping
from worker import POLICY
from workflows import AskWorkflow


async def ask_with_primary_down(question: str):
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url  # the policy's base URLs read it
    env = await start_time_skipping()
    plugin = FailoverPlugin(POLICY, stores="memory", start_monitor=False, include_pipeline=False)
    try:
        async with SimAdmin(sim.url) as admin:
            await admin.set_faults("anthropic-us-east", [{{"kind": "overloaded"}}])
        queue = f"test-{{uuid.uuid4().hex[:8]}}"
        async with Worker(env.client, task_queue=queue, workflows=[AskWorkflow], plugins=[plugin]):
            return await env.client.execute_workflow(
                AskWorkflow.run, question, id=queue, task_queue=queue
            )
    finally:
        await plugin.aclose()
        await env.shutdown()
        await sim.stop()


def test_the_standby_answers_when_the_primary_is_down():
    answer = asyncio.run(ask_with_primary_down("hello"))
    assert (answer.route, answer.tier, answer.capability.value) == ("gpt-us", 1, "full")
    assert answer.attempts[0].route == "claude-us"
    assert answer.attempts[0].outcome == "overloaded"
'''

README = """\
# {name}

A Temporal workflow whose LLM call fails over (agent-failover). Try it on the simulator:

```bash
failover dev                                   # terminal 1: Temporal, Redis, simulator
export FAILOVER_TASK_QUEUE={queue} FAILOVER_POLICY=policy.yaml
python worker.py                               # terminal 2
python starter.py "Why is the sky blue?"       # terminal 3: answered by claude-us (tier 0)
failover sim fault claude-us overloaded --for 60s
python starter.py "Why is the sky blue?"       # answered by gpt-us (tier 1)
failover status                                # breakers of this project's routes
python -m pytest -q                            # the same outage, in a test
```
"""

#: File name -> template (``{queue}`` and ``{name}`` filled in; ``{{``/``}}`` are braces).
FILES = {
    "policy.yaml": POLICY,
    "workflows.py": WORKFLOWS,
    "worker.py": WORKER,
    "starter.py": STARTER,
    "test_workflows.py": TEST,
    "README.md": README,
}
#: Templates written as they are (no placeholders).
LITERAL = {"policy.yaml", "workflows.py"}


def queue_name(directory: Path) -> str:
    """The project's task queue: its directory name, lower-case, dashes for the rest."""
    slug = re.sub(r"[^a-z0-9]+", "-", directory.resolve().name.lower()).strip("-")
    return slug or "my-app"


def write_project(directory: Path, *, force: bool = False) -> list[tuple[Path, int]]:
    """Write the project into ``directory`` (created if missing); returns (file, lines).

    Refuses (exit 2) to overwrite an existing file unless ``force``."""
    existing = [n for n in FILES if (directory / n).exists()]
    if existing and not force:
        raise CliError(
            f"{directory} already has {', '.join(existing)}: pick an empty directory or "
            "pass --force to overwrite",
            EXIT_BAD_INPUT,
        )
    directory.mkdir(parents=True, exist_ok=True)
    queue = queue_name(directory)
    written = []
    for name, template in FILES.items():
        text = template if name in LITERAL else template.format(queue=queue, name=queue)
        (directory / name).write_text(text)
        written.append((directory / name, text.count("\n")))
    return written
