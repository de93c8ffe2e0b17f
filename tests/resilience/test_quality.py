"""Answer-quality scorer: exact / normalized / JSON scoring and the judge helpers."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agent_failover.resilience.quality import (
    JUDGE_MARKER,
    MAX_DETAIL_CHARS,
    ScorerSpec,
    judge_request,
    normalize_text,
    parse_judge,
    score_local,
)
from agent_failover.resilience.scoring import ScorerSpec as ReExported

VERDICT_SCHEMA = {
    "type": "object",
    "required": ["verdict"],
    "properties": {"verdict": {"enum": ["approve", "revise"]}, "reasons": {"type": "array"}},
}


def test_scoring_module_reexports_the_quality_scorer() -> None:
    """``resilience.scoring`` exposes the same ScorerSpec as ``resilience.quality``."""
    assert ReExported is ScorerSpec


def test_exact_match_ignores_only_surrounding_whitespace() -> None:
    """Exact: equal after strip passes with score 1; a case difference fails with score 0."""
    spec = ScorerSpec(kind="exact")
    assert score_local(spec, "ZEBRA-42", "  ZEBRA-42\n").passed
    miss = score_local(spec, "ZEBRA-42", "zebra-42")
    assert (miss.score, miss.passed) == (0.0, False)
    assert "expected 'ZEBRA-42'" in miss.detail


@pytest.mark.parametrize(
    ("expected", "answer", "ok"),
    [
        ("Paris", '"Paris."', True),
        ("391", " 391 ", True),
        ("New   York", "new york!", True),
        ("3.14", "314", False),
        ("approve", "revise", False),
    ],
)
def test_normalized_match(expected: str, answer: str, ok: bool) -> None:
    """Normalized: case, spacing and edge punctuation do not matter; inner punctuation does."""
    result = score_local(ScorerSpec(kind="normalized"), expected, answer)
    assert result.passed is ok
    assert result.score == (1.0 if ok else 0.0)


def test_normalize_text_folds_unicode() -> None:
    """NFKC + casefold: full-width letters and ß compare equal to their plain forms."""
    assert normalize_text("ＳＴＲＡßE") == normalize_text("strasse")


def test_json_scores_field_share_and_validates_schema() -> None:
    """JSON: the score is the share of matching fields once the schema holds."""
    spec = ScorerSpec(kind="json", json_schema=VERDICT_SCHEMA, fields=["verdict", "reasons.0"])
    expected = {"verdict": "approve", "reasons": ["ok"]}
    full = score_local(spec, expected, json.dumps({"verdict": "approve", "reasons": ["OK."]}))
    half = score_local(spec, expected, json.dumps({"verdict": "approve", "reasons": ["no"]}))
    assert (full.score, full.passed) == (1.0, True)
    assert half.score == 0.5 and "wrong: reasons.0" in half.detail
    bad = score_local(spec, expected, json.dumps({"verdict": "maybe"}))
    assert bad.score == 0.0 and "schema violation at verdict" in bad.detail


def test_json_defaults_to_top_level_keys_and_tolerates_a_fence() -> None:
    """Without ``fields`` every top-level expected key counts; a ```json fence is accepted."""
    spec = ScorerSpec(kind="json", pass_threshold=1.0)
    answer = '```json\n{"a": 1, "b": 2.0, "c": 3}\n```'
    assert score_local(spec, {"a": 1, "b": 2}, answer).passed
    result = score_local(spec, '{"a": 1, "b": 3}', answer)
    assert result.score == 0.5 and not result.passed


def test_json_garbage_and_missing_fields_score_zero() -> None:
    """Non-JSON scores 0 saying so; a missing field never matches (not even a None one)."""
    spec = ScorerSpec(kind="json", fields=["x"])
    assert score_local(spec, {"x": 1}, "I think x is 1").detail.startswith("not JSON")
    assert score_local(spec, {"x": None}, "{}").score == 0.0
    assert score_local(spec, {"x": True}, '{"x": 1}').score == 0.0


def test_schema_only_json_scores_validity() -> None:
    """JSON with a schema and no expected fields: valid = 1, invalid = 0."""
    spec = ScorerSpec(kind="json", json_schema=VERDICT_SCHEMA)
    assert score_local(spec, None, '{"verdict": "revise"}').score == 1.0
    assert score_local(spec, None, '{"reasons": []}').score == 0.0


def test_spec_rejects_a_bad_schema_and_empty_field_paths() -> None:
    """A broken json_schema or an empty field path fails on construction, naming the field."""
    with pytest.raises(ValidationError, match="json_schema"):
        ScorerSpec(kind="json", json_schema={"type": 12})
    with pytest.raises(ValidationError, match="fields"):
        ScorerSpec(kind="json", fields=[" "])
    with pytest.raises(ValidationError, match="pass_threshold"):
        ScorerSpec(pass_threshold=1.5)


def test_judge_kind_is_not_scored_locally() -> None:
    """score_local refuses ``judge``: that needs a model call."""
    with pytest.raises(ValueError, match="judge"):
        score_local(ScorerSpec(kind="judge", judge_route="x"), "a", "b")


def test_judge_request_quotes_both_answers_bounded() -> None:
    """The judge request carries the marker, both answers (bounded), T=0, no streaming."""
    req = judge_request("What is 2+2?", "4", "four" * 10_000)
    assert JUDGE_MARKER in (req.system or "")
    body = req.messages[0].content
    assert "Expected answer:\n<<<\n4\n>>>" in body
    assert len(body) < 9_000 * 3
    assert req.temperature == 0.0 and req.stream is False and req.json_schema is not None
    assert judge_request("q", "a", "b", structured=False).json_schema is None


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ('{"score": 0.8, "reason": "close"}', 0.8),
        ('```json\n{"score": 1, "reason": "same"}\n```', 1.0),
        ('Sure! Here is my verdict: {"score": 0.25, "reason": "partly"} Hope it helps', 0.25),
        ("Score: 7/10", 0.7),
        ("score = 85%", 0.85),
        ("score: 9", 0.9),
    ],
)
def test_parse_judge_reads_verdicts(text: str, score: float) -> None:
    """Verdicts in JSON, fenced, in prose, or as a score line on other scales."""
    result = parse_judge(text)
    assert result.score == pytest.approx(score)
    assert result.passed is (score >= 0.5)


@pytest.mark.parametrize(
    "text", ["", "I cannot grade this.", '{"score": "high"}', "score: 1e9", "score: 250"]
)
def test_parse_judge_garbage_scores_zero_with_a_reason(text: str) -> None:
    """Garbage from a judge is a failed grade with a detail, never an exception."""
    result = parse_judge(text)
    assert (result.score, result.passed) == (0.0, False)
    assert "judge" in result.detail


def test_parse_judge_threshold_and_detail_bound() -> None:
    """``pass_threshold`` decides ``passed``; a huge reason is clipped to the detail bound."""
    text = json.dumps({"score": 0.6, "reason": "x" * 5_000})
    assert not parse_judge(text, pass_threshold=0.7).passed
    assert parse_judge(text, pass_threshold=0.6).passed
    assert len(parse_judge(text).detail) <= MAX_DETAIL_CHARS
