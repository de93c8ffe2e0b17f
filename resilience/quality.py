"""Answer-quality scoring: how good is one answer against its expected answer (pure).

The qualification scorer (``failover qualify``) and shadow evaluation both grade an
answer with a :class:`ScorerSpec`:

* ``exact``: the answer equals the expected text (surrounding whitespace ignored);
* ``normalized``: equal after Unicode NFKC, case folding, collapsing whitespace and
  stripping punctuation at word edges and wrapping quotes (``"Paris."`` = ``paris``);
* ``json``: the answer parses as JSON (a Markdown code fence around it is tolerated),
  is valid for ``json_schema`` when one is given, and then scores the share of
  ``fields`` (dotted paths, ``a.b.0.c``; default: every top-level key of the expected
  object) whose value equals the expected one (strings compared normalized);
* ``judge``: free text graded by another model, the judge route. This module only
  builds the judge's request (:func:`judge_request`) and reads its verdict
  (:func:`parse_judge`); the call itself is an activity.

Every result is a :class:`ScoreResult` in ``[0, 1]`` with ``passed`` (score at or above
``pass_threshold``) and a short ``detail`` saying why, bounded so it can enter history.
Nothing here does IO or reads a clock.
"""

from __future__ import annotations

import json
import math
import re
import string
import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_failover.resilience.models import ChatRequest, Message

#: An item passes when its score is at least this (exact/normalized score 0 or 1).
DEFAULT_PASS_THRESHOLD = 0.5
#: Longest ``detail`` kept on a result (it is stored in workflow history).
MAX_DETAIL_CHARS = 300
#: Longest expected/candidate text quoted to a judge (each), so a judge call stays small.
MAX_JUDGE_QUOTE_CHARS = 8_000
#: Marks a judge request; the simulator recognises it and grades like a judge would.
JUDGE_MARKER = "[failover-judge]"
JUDGE_SYSTEM_PROMPT = (
    f"{JUDGE_MARKER} You grade a candidate answer against the expected answer. "
    'Reply with JSON only: {"score": <number from 0 to 1>, "reason": "<one sentence>"}. '
    "1 means the candidate says the same thing as the expected answer, 0 means it is wrong "
    "or unrelated; style and length do not matter."
)
#: The verdict schema sent to judges that honour structured output.
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["score"],
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string"},
    },
}
ScorerKind = Literal["exact", "normalized", "json", "judge"]


class ScorerSpec(BaseModel):
    """How answers of one golden set (or one shadow-evaluated role) are graded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ScorerKind = Field(
        default="normalized",
        description="How an answer is graded: `exact` (equal text, surrounding whitespace "
        "ignored), `normalized` (equal after Unicode, case, whitespace and punctuation "
        "normalization), `json` (the share of `fields` equal to the expected values) or "
        "`judge` (graded by another model, the judge route).",
    )
    json_schema: dict[str, Any] | None = Field(
        default=None,
        description="For kind `json`: a JSON Schema (2020-12) the answer must be valid for, "
        "else it scores 0. Null: any JSON is compared.",
    )
    fields: list[str] | None = Field(
        default=None,
        description="For kind `json`: the dotted field paths compared (e.g. `verdict`, "
        "`subtasks.0.role`). Null: every top-level key of the expected answer.",
    )
    judge_route: str | None = Field(
        default=None,
        description="For kind `judge`: the endpoint that grades the answer. Null: the "
        "policy's `qualification.judge_route`.",
    )
    pass_threshold: float = Field(
        default=DEFAULT_PASS_THRESHOLD,
        ge=0.0,
        le=1.0,
        description="Score at or above which an answer passes.",
    )

    @model_validator(mode="after")
    def _check(self) -> ScorerSpec:
        if self.json_schema is not None:
            try:
                import jsonschema  # only for a schema: workflow-side imports stay light

                jsonschema.Draft202012Validator.check_schema(self.json_schema)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"json_schema is not a valid JSON Schema: {exc.message}") from exc
        if self.fields is not None and any(not f.strip() for f in self.fields):
            raise ValueError("fields: every field path must be non-empty (e.g. 'verdict')")
        return self


class ScoreResult(BaseModel):
    """One graded answer: ``score`` in [0, 1], whether it passed, and why."""

    model_config = ConfigDict(frozen=True)

    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    detail: str = Field(default="", max_length=MAX_DETAIL_CHARS)


def _result(score: float, threshold: float, detail: str) -> ScoreResult:
    score = min(1.0, max(0.0, score))
    return ScoreResult(score=score, passed=score >= threshold, detail=_clip(detail))


def _clip(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def normalize_text(text: str) -> str:
    """NFKC, case-folded, single-spaced, with punctuation stripped at word edges."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    edge = string.punctuation + "“”‘’«»"
    words = (w.strip(edge) for w in folded.split())
    return " ".join(w for w in words if w)


def score_local(spec: ScorerSpec, expected: Any, answer: str) -> ScoreResult:
    """Grade ``answer`` in-process (``exact``, ``normalized``, ``json``).

    Raises ValueError for ``judge``: that needs a model call (:func:`judge_request`).
    """
    if spec.kind == "exact":
        ok = answer.strip() == _as_text(expected).strip()
        return _result(
            1.0 if ok else 0.0,
            spec.pass_threshold,
            "exact match"
            if ok
            else f"expected {_as_text(expected)[:80]!r}, got {answer.strip()[:80]!r}",
        )
    if spec.kind == "normalized":
        want, got = normalize_text(_as_text(expected)), normalize_text(answer)
        ok = want == got
        return _result(
            1.0 if ok else 0.0,
            spec.pass_threshold,
            "normalized match" if ok else f"expected {want[:80]!r}, got {got[:80]!r} (normalized)",
        )
    if spec.kind == "json":
        return _score_json(spec, expected, answer)
    raise ValueError("kind 'judge' is scored by a judge model: use judge_request/parse_judge")


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def parse_json_text(text: str) -> Any:
    """JSON in ``text``, tolerating one Markdown code fence around it (ValueError if none)."""
    fenced = _FENCE.match(text)
    return json.loads(fenced.group(1) if fenced else text)


def _score_json(spec: ScorerSpec, expected: Any, answer: str) -> ScoreResult:
    try:
        data = parse_json_text(answer)
    except ValueError as exc:
        return _result(0.0, spec.pass_threshold, f"not JSON: {exc}")
    if spec.json_schema is not None:
        import jsonschema
        import jsonschema.exceptions

        validator = jsonschema.Draft202012Validator(spec.json_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(data))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            return _result(
                0.0, spec.pass_threshold, f"schema violation at {where}: {error.message}"
            )
    expected = parse_json_text(expected) if isinstance(expected, str) else expected
    paths = _field_paths(spec, expected)
    if not paths:
        return _result(
            1.0, spec.pass_threshold, "valid JSON" + (" for the schema" if spec.json_schema else "")
        )
    misses = [p for p in paths if not _same(_lookup(data, p), _lookup(expected, p))]
    score = (len(paths) - len(misses)) / len(paths)
    detail = f"{len(paths) - len(misses)}/{len(paths)} fields match"
    return _result(
        score, spec.pass_threshold, detail + (f"; wrong: {', '.join(misses)}" if misses else "")
    )


def _field_paths(spec: ScorerSpec, expected: Any) -> list[str]:
    if spec.fields is not None:
        return list(spec.fields)
    return sorted(expected) if isinstance(expected, dict) else []


_MISSING = object()


def _lookup(data: Any, path: str) -> Any:
    """Value at dotted ``path`` (``subtasks.0.role``), or a sentinel when absent."""
    for part in path.split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return _MISSING
    return data


def _same(got: Any, want: Any) -> bool:
    if got is _MISSING or want is _MISSING:
        return False
    if isinstance(got, str) and isinstance(want, str):
        return normalize_text(got) == normalize_text(want)
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        return not isinstance(got, bool) and not isinstance(want, bool) and math.isclose(got, want)
    return got == want


def _quote(text: str) -> str:
    return _clip(text, MAX_JUDGE_QUOTE_CHARS)


def judge_request(
    prompt: str, expected: Any, answer: str, *, max_tokens: int = 200, structured: bool = True
) -> ChatRequest:
    """The request that asks a judge model to grade ``answer`` (non-streaming, T=0).

    ``structured``: ask for the verdict schema natively (routes whose
    ``capabilities.structured_output`` is true); otherwise the prompt alone asks for JSON.
    """
    body = (
        f"Task given to the candidate:\n<<<\n{_quote(prompt)}\n>>>\n"
        f"Expected answer:\n<<<\n{_quote(_as_text(expected))}\n>>>\n"
        f"Candidate answer:\n<<<\n{_quote(answer)}\n>>>\n"
        "Grade the candidate answer."
    )
    return ChatRequest(
        system=JUDGE_SYSTEM_PROMPT,
        messages=[Message(role="user", content=body)],
        max_tokens=max_tokens,
        temperature=0.0,
        stream=False,
        json_schema=JUDGE_SCHEMA if structured else None,
    )


_SCORE_RE = re.compile(
    r'"?score"?\s*[:=]\s*"?(-?\d+(?:\.\d+)?)(?![\d.eE])\s*(%|/\s*(?:10|100)\b)?', re.I
)
_JSON_OBJ = re.compile(r"\{.*\}", re.DOTALL)


def parse_judge(text: str, pass_threshold: float = DEFAULT_PASS_THRESHOLD) -> ScoreResult:
    """Read a judge's verdict; garbage scores 0 with a detail saying what was wrong.

    Accepts the JSON verdict (also inside a code fence or surrounding prose) or a
    ``score: 0.8`` line; a score on a 0-10 or 0-100 scale (``7/10``, ``85%``) is rescaled.
    """
    raw = _judge_score(text)
    if raw is None:
        return _result(
            0.0, pass_threshold, f"judge reply unparseable (no score): {text.strip()[:120]!r}"
        )
    value, reason = raw
    if not math.isfinite(value) or value < 0 or value > 100:
        return _result(0.0, pass_threshold, f"judge score {value} outside 0..1: reply ignored")
    score = value if value <= 1 else value / (10 if value <= 10 else 100)
    return _result(
        score, pass_threshold, f"judge: {reason}" if reason else "judge: no reason given"
    )


def _judge_score(text: str) -> tuple[float, str] | None:
    for candidate in (text, *(m.group(0) for m in _JSON_OBJ.finditer(text))):
        try:
            data = parse_json_text(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("score"), (int, float)):
            if not isinstance(data["score"], bool):
                return float(data["score"]), str(data.get("reason", ""))[:200]
    match = _SCORE_RE.search(text)
    if match is None:
        return None
    value = float(match.group(1))
    scale = (match.group(2) or "").replace(" ", "")
    if scale in ("%", "/100"):
        value = value / 100
    elif scale == "/10":
        value = value / 10
    return value, ""
