"""Golden-set tasks in the simulator: computable answers, per-endpoint accuracy, load drop."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from agent_failover.resilience.quality import ScorerSpec, judge_request, score_local
from agent_failover.testing.sim.config import AccuracySettings
from agent_failover.testing.sim.faults import Fault, FaultKind
from agent_failover.testing.sim.golden import (
    answers_correctly,
    golden_text,
    oracle_answer,
    wrong_answer,
)
from tests.sim.simtest_helpers import openai_body, openai_url

PLANNER_SCHEMA = {
    "type": "object",
    "required": ["subtasks"],
    "properties": {
        "subtasks": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "role"],
                "properties": {
                    "id": {"type": "string"},
                    "role": {"type": "string", "enum": ["researcher", "analyst"]},
                },
            },
        }
    },
}


@pytest.mark.parametrize(
    ("task", "answer"),
    [
        ("Reply with exactly: ZEBRA-42", "ZEBRA-42"),
        ("Say hi.\nreply with exactly:  blue whale  \nThanks", "blue whale"),
        ("Compute 17 * 23. Reply with the number only.", "391"),
        ("What is 100 - 58?", "42"),
        ("Claim: 6 x 7 = 42. Approve if it holds.", "approve"),
        ("Claim: 6 + 7 = 14.", "revise"),
        ("Tell me about rivers", None),
    ],
)
def test_oracle_answers_the_task_forms(task: str, answer: str | None) -> None:
    """Each documented task form yields its computable answer; other text yields None."""
    assert oracle_answer(task) == answer


def test_wrong_answers_differ_and_stay_plausible() -> None:
    """A wrong answer is never the right one: flipped verdict, other enum, off number."""
    rng = random.Random(3)
    assert wrong_answer("approve", rng) == "revise"
    assert wrong_answer("analyst", rng, ["researcher", "analyst"]) == "researcher"
    for right in ("391", "ZEBRA-42", "x"):
        assert wrong_answer(right, rng) != right


def test_draw_is_deterministic_and_monotone_in_accuracy() -> None:
    """Same inputs, same verdict; what is right at a low accuracy is right at a higher one."""
    tasks = [f"Compute {i} + {i}" for i in range(300)]
    low = [answers_correctly(1, "ep", "", t, 0.3) for t in tasks]
    high = [answers_correctly(1, "ep", "", t, 0.8) for t in tasks]
    assert low == [answers_correctly(1, "ep", "", t, 0.3) for t in tasks]
    assert all(h for lo, h in zip(low, high, strict=True) if lo)
    assert 0.15 < sum(low) / 300 < 0.45 and 0.65 < sum(high) / 300 < 0.95
    other = [answers_correctly(1, "other", "", t, 0.3) for t in tasks]
    assert other != low


def test_json_mode_places_the_answer_at_the_path() -> None:
    """In JSON mode the answer lands at the dotted path; a wrong one is another enum value."""
    task = 'Plan it. Reply with exactly: analyst\nPut the answer in "subtasks.0.role"'
    instance = {"subtasks": [{"id": "s1", "role": "researcher"}]}
    spec = ScorerSpec(kind="json", json_schema=PLANNER_SCHEMA, fields=["subtasks.0.role"])
    expected = {"subtasks": [{"role": "analyst"}]}
    rng = random.Random(1)
    right = golden_text(task, "", PLANNER_SCHEMA, instance, True, rng, json_mode=True)
    wrong = golden_text(task, "", PLANNER_SCHEMA, instance, False, rng, json_mode=True)
    assert right is not None and wrong is not None
    assert score_local(spec, expected, right).passed
    assert json.loads(wrong)["subtasks"][0]["role"] == "researcher"
    assert json.loads(right)["subtasks"][0]["id"] == "s1"


def test_judge_requests_get_a_verdict() -> None:
    """A judge request is graded by comparing expected and candidate; a wrong judge flips."""
    same = judge_request("q", "Paris", "paris.")
    diff = judge_request("q", "Paris", "Lyon")
    text = same.messages[0].content
    rng = random.Random(0)
    assert (
        json.loads(golden_text(text, same.system or "", None, None, True, rng, json_mode=True))[
            "score"
        ]
        == 1.0
    )
    verdict = golden_text(diff.messages[0].content, diff.system or "", None, None, True, rng,
                          json_mode=False)  # fmt: skip
    assert json.loads(verdict or "")["score"] == 0.0
    flipped = golden_text(text, same.system or "", None, None, False, rng, json_mode=False)
    assert json.loads(flipped or "")["score"] == 0.0


def test_accuracy_settings_apply_under_load_only_above_threshold() -> None:
    """``accuracy_under_load`` replaces ``accuracy`` only above ``load_threshold`` in flight."""
    settings = AccuracySettings(accuracy=0.9, accuracy_under_load=0.2, load_threshold=3)
    assert [settings.effective(n) for n in (1, 3, 4)] == [0.9, 0.9, 0.2]
    assert AccuracySettings(accuracy=0.7).effective(100) == 0.7


async def _ask(sim, http, task: str) -> str:
    resp = await http.post(openai_url(sim), json=openai_body(task))
    assert resp.status_code == 200, resp.text
    return resp.json()["choices"][0]["message"]["content"]


async def test_endpoint_accuracy_over_the_wire(sim, http) -> None:
    """Over HTTP an accuracy-0 endpoint is always wrong, accuracy 1 always right."""
    tasks = [f"Compute {i} * 3" for i in range(20)]
    async with sim.admin() as admin:
        await admin.set_accuracy("openai-us", 0.0)
        wrong = [await _ask(sim, http, t) for t in tasks]
        assert (await admin.accuracy())["openai-us"].accuracy == 0.0
        await admin.set_accuracy("openai-us", 1.0)
        right = [await _ask(sim, http, t) for t in tasks]
        await admin.reset_accuracy("openai-us")
        assert (await admin.accuracy())["openai-us"] == sim.config.endpoint(
            "openai-us"
        ).accuracy_settings
    assert right == [str(i * 3) for i in range(20)]
    assert all(w != r for w, r in zip(wrong, right, strict=True))
    assert (await _ask(sim, http, "Tell me about rivers")).endswith("[end]")


async def test_accuracy_drops_under_load(sim, http) -> None:
    """Above the in-flight threshold the endpoint answers with ``accuracy_under_load``."""
    tasks = [f"Compute {i} + 1000" for i in range(10)]
    async with sim.admin() as admin:
        await admin.set_accuracy("openai-us", 1.0, accuracy_under_load=0.0, load_threshold=3)
        sequential = [await _ask(sim, http, t) for t in tasks]
        # Held a moment so the burst overlaps: all ten are in flight together.
        await admin.set_faults("openai-us", [Fault(kind=FaultKind.LATENCY, seconds=0.3)])
        burst = await asyncio.gather(*(_ask(sim, http, t) for t in tasks))
    right = [str(i + 1000) for i in range(10)]
    assert sequential == right
    assert sum(b != r for b, r in zip(burst, right, strict=True)) >= 8


async def test_admin_rejects_bad_accuracy(sim, http) -> None:
    """An out-of-range accuracy is a 400 naming the field; an unknown endpoint a 404."""
    bad = await http.put(f"{sim.url}/_admin/accuracy/openai-us", json={"accuracy": 2})
    assert bad.status_code == 400 and "accuracy" in bad.text
    missing = await http.put(f"{sim.url}/_admin/accuracy/nope", json={"accuracy": 1})
    assert missing.status_code == 404


def test_json_mode_without_a_placement_keeps_the_schema_instance() -> None:
    """A golden task asked in JSON mode without 'Put the answer in' stays valid JSON."""
    rng = random.Random(2)
    assert golden_text("Reply with exactly: ALPHA", "", PLANNER_SCHEMA, {"subtasks": []},
                       True, rng, json_mode=True) is None  # fmt: skip
    assert golden_text("Reply with exactly: ALPHA", "", None, None, True, rng, json_mode=False) == (
        "ALPHA"
    )
