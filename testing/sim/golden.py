"""Golden-set tasks whose right answer the simulator can compute, answered with an accuracy.

Qualification (``failover qualify``) needs endpoints that differ in *quality*, not only
in latency and errors. A simulated endpoint has an ``accuracy`` (and optionally a lower
``accuracy_under_load`` above ``load_threshold`` requests in flight on it); when the last
user message is one of these task forms, the endpoint answers it correctly with that
probability and wrongly otherwise:

* ``Reply with exactly: TOKEN`` — the answer is ``TOKEN`` (rest of that line);
* ``Compute 17 * 23`` (also ``calculate`` / ``what is``; ``+ - * x`` or the
  multiplication sign) — the integer;
* ``Claim: 17 * 23 = 391`` — ``approve`` when the arithmetic holds, else ``revise``;
* in JSON mode, ``Put the answer in "subtasks.0.role"`` places the computed answer at
  that dotted path of the schema instance the simulator generates anyway (without that
  line a JSON-mode request gets its usual schema instance);
* a judge request (system prompt carrying ``resilience.quality.JUDGE_MARKER``) is graded
  by comparing the quoted expected and candidate answers, and answered as the verdict
  JSON ``{"score": 0 or 1, "reason": ...}`` (a wrong judge flips the score).

Whether an answer is right is a deterministic draw from (simulator seed, endpoint,
system prompt, task text): the same golden item gets the same verdict on every run, and
the items an endpoint gets right under load are a subset of those it gets right idle.
A wrong answer is plausible: the other verdict or enum value, an off-by-some number, a
token with one character changed.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

from agent_failover.resilience.quality import JUDGE_MARKER, normalize_text

_EXACT = re.compile(r"reply with exactly:\s*(\S[^\n]*?)\s*$", re.I | re.M)
_OP = r"(-?\d+)\s*([-+*x×])\s*(-?\d+)"
_COMPUTE = re.compile(rf"\b(?:compute|calculate|what is)\s+{_OP}", re.I)
_CLAIM = re.compile(rf"\bclaim:\s*{_OP}\s*=\s*(-?\d+)", re.I)
_PLACE = re.compile(r'\bput the answer in "([\w.]+)"', re.I)
_QUOTED = re.compile(r"(Expected|Candidate) answer:\n<<<\n(.*?)\n>>>", re.S)
_FLIP = {
    "approve": "revise", "revise": "approve", "researcher": "analyst", "analyst": "researcher",
    "yes": "no", "no": "yes", "true": "false", "false": "true",
}  # fmt: skip


def _apply(a: int, op: str, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    return a * b


def oracle_answer(task: str) -> str | None:
    """The right answer to a golden task in ``task``, or None if it is not one."""
    if m := _EXACT.search(task):
        return m.group(1)
    if m := _CLAIM.search(task):
        holds = _apply(int(m.group(1)), m.group(2), int(m.group(3))) == int(m.group(4))
        return "approve" if holds else "revise"
    if m := _COMPUTE.search(task):
        return str(_apply(int(m.group(1)), m.group(2), int(m.group(3))))
    return None


def is_judge(system: str) -> bool:
    """True when the request is a qualification judge's."""
    return JUDGE_MARKER in system


def answers_correctly(seed: int, endpoint: str, system: str, task: str, accuracy: float) -> bool:
    """Deterministic draw: True with probability ``accuracy`` for this endpoint and task."""
    digest = hashlib.sha256(f"{seed}\x00{endpoint}\x00{system}\x00{task}".encode()).digest()
    draw = int.from_bytes(digest[:8], "big") / 2**64
    return draw < accuracy


def wrong_answer(right: str, rng: random.Random, choices: list[Any] | None = None) -> str:
    """A plausible wrong answer: another enum value, a flipped verdict, an off number."""
    others = [str(c) for c in choices or [] if str(c) != right]
    if others:
        return rng.choice(others)
    if right.lower() in _FLIP:
        return _FLIP[right.lower()]
    if re.fullmatch(r"-?\d+", right):
        return str(int(right) + rng.choice([1, 2, 3, 7, -1, -2, 10]))
    if not right:
        return "unknown"
    i = rng.randrange(len(right))
    swap = "x" if right[i].lower() != "x" else "q"
    return right[:i] + swap + right[i + 1 :]


def judge_verdict(task: str, correct: bool) -> str:
    """The judge's JSON verdict for a judge request (score flipped when ``correct`` is False)."""
    quoted = {kind.lower(): text for kind, text in _QUOTED.findall(task)}
    same = normalize_text(quoted.get("expected", "")) == normalize_text(
        quoted.get("candidate", "x")
    )
    if not correct:
        same = not same
    reason = "same answer" if same else "different answer"
    return json.dumps({"score": 1.0 if same else 0.0, "reason": reason})


def golden_text(
    task: str, system: str, schema: dict[str, Any] | None, instance: Any, correct: bool,
    rng: random.Random, *, json_mode: bool,
) -> str | None:  # fmt: skip
    """The reply text for a golden task or a judge request, or None for any other request.

    ``instance`` is the JSON value the simulator generated for the schema (JSON mode).
    """
    if is_judge(system):
        return judge_verdict(task, correct)
    right = oracle_answer(task)
    if right is None:
        return None
    place = _PLACE.search(task)
    if not json_mode:
        return right if correct else wrong_answer(right, rng)
    if place is None:
        # JSON was asked for but not where the answer goes: the usual schema instance.
        return None
    path = place.group(1).split(".")
    sub = _schema_at(schema or {}, path)
    answer = right if correct else wrong_answer(right, rng, sub.get("enum"))
    numeric = sub.get("type") in ("integer", "number") and re.fullmatch(r"-?\d+", answer)
    value: Any = int(answer) if numeric else answer
    target = instance if isinstance(instance, dict) else {}
    return json.dumps(_set_path(target, path, value))


def _schema_at(schema: dict[str, Any], path: list[str]) -> dict[str, Any]:
    for part in path:
        if part.isdigit():
            schema = schema.get("items", {}) if isinstance(schema.get("items"), dict) else {}
        else:
            schema = schema.get("properties", {}).get(part, {})
    return schema


def _set_path(data: Any, path: list[str], value: Any) -> Any:
    """``data`` with ``value`` at ``path`` (containers created or extended as needed)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if head.isdigit():
        items = list(data) if isinstance(data, list) else []
        index = int(head)
        while len(items) <= index:
            items.append({})
        items[index] = _set_path(items[index], rest, value)
        return items
    obj = dict(data) if isinstance(data, dict) else {}
    obj[head] = _set_path(obj.get(head, {}), rest, value)
    return obj
