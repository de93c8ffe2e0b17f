"""Loading a policy file: every malformed file is a PolicyError naming the field or the
position (exit 2 in the CLI), never a traceback or a silently wrong policy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import MAX_NESTING, MAX_NODES, check_policy_file, load_policy
from agent_failover.resilience.config import PolicyError

BASE = DEFAULT_POLICY_PATH.read_text()
ENV = {"SIM_URL": "http://sim.test"}


def _errors(tmp_path: Path, text: str | bytes) -> list[tuple[str, str]]:
    p = tmp_path / "policy.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(PolicyError) as exc:
        load_policy(p, env=ENV)
    return exc.value.errors


def test_duplicate_endpoint_is_an_error_with_its_path_and_lines(tmp_path: Path) -> None:
    """A second `openai-us:` no longer silently replaces the first."""
    start = BASE.index("  openai-us:\n")
    end = BASE.index("\n  cheap-mini:")
    text = BASE[:end] + "\n" + BASE[start:end] + BASE[end:]
    (path, msg), *_ = _errors(tmp_path, text)
    assert path == "endpoints.openai-us" and msg.startswith("duplicate key (lines ")


def test_duplicate_nested_key(tmp_path: Path) -> None:
    text = BASE.replace("  interval_s: 3", "  interval_s: 3\n  interval_s: 4", 1)
    assert _errors(tmp_path, text)[0][0] == "probes.interval_s"


def test_non_utf8_names_the_line_and_byte(tmp_path: Path) -> None:
    text = BASE.replace("You plan research work", "Vous planifiez le travail \xe9").encode(
        "latin-1"
    )
    (path, msg), *_ = _errors(tmp_path, text)
    line = BASE[: BASE.index("You plan research work")].count("\n") + 1
    assert path.endswith(f"policy.yaml:{line}")
    assert "not UTF-8: byte 0xe9" in msg


def test_nul_byte_names_the_position_without_a_traceback(tmp_path: Path) -> None:
    """A NUL byte is a PolicyError naming line and column (before: yaml's ReaderError
    escaped from the loader's constructor, outside the error handling)."""
    text = BASE.replace("You plan research work", "You plan\x00 research work")
    (path, msg), *_ = _errors(tmp_path, text)
    line = BASE[: BASE.index("You plan research work")].count("\n") + 1
    assert f"policy.yaml:{line}:" in path and msg.startswith("a NUL byte")


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    p = tmp_path / "bom.yaml"
    p.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert load_policy(p, env=ENV).endpoints


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 5000 + "]" * 5000 + "\n",
        "".join("  " * i + f"k{i}:\n" for i in range(MAX_NESTING + 5)) + "  " * 40 + "x: 1\n",
    ],
    ids=["flow", "block"],
)
def test_deep_nesting_is_refused_with_a_position(tmp_path: Path, text: str) -> None:
    (path, msg), *_ = _errors(tmp_path, text)
    assert f"nested deeper than {MAX_NESTING} levels" in msg and path.count(":") == 2


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for i in range(9):
        prev, cur = chr(97 + i), chr(98 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    (_, msg), *_ = _errors(tmp_path, "\n".join(lines) + "\n")
    assert f"over {MAX_NODES} nodes" in msg


def _at_line(errors: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The errors without the ``(<file>:<line>)`` each message ends with."""
    return [(path, re.sub(r" \(\S+policy\.yaml:\d+\)$", "", msg)) for path, msg in errors]


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_booleans_where_numbers_are_expected(tmp_path: Path) -> None:
    """`true`/`false` are not 1/0: each is named, and not also reported as out of range."""
    text = BASE.replace("interval_s: 3", "interval_s: true").replace(
        "context_window: 32000", "context_window: false", 1
    )
    errors = _at_line(_errors(tmp_path, text))
    assert ("probes.interval_s", "expected a number, got a boolean (true)") in errors
    assert ("endpoints.cheap-mini.context_window", "expected a number, got a boolean (false)") in (
        errors
    )
    assert len(errors) == 2


def test_boolean_in_a_role_is_found_too(tmp_path: Path) -> None:
    text = BASE.replace("ttft_budget_ms: 2000", "ttft_budget_ms: yes", 1)
    assert ("roles.planner.ttft_budget_ms", "expected a number, got a boolean (true)") in (
        _at_line(_errors(tmp_path, text))
    )


def test_a_misspelt_field_gets_the_one_meant_and_its_line(tmp_path: Path) -> None:
    """``ttft_budget`` for ``ttft_budget_ms``: the field meant, the file and the line."""
    text = BASE.replace("ttft_budget_ms: 2000", "ttft_budget: 2000", 1)
    (path, msg), *_ = _errors(tmp_path, text)
    assert path == "roles.planner.ttft_budget"
    line = _line_of(text, "ttft_budget: 2000")
    assert (
        msg == f"unknown field; did you mean `ttft_budget_ms`? ({tmp_path / 'policy.yaml'}:{line})"
    )


def test_a_field_like_none_says_where_the_fields_are_listed(tmp_path: Path) -> None:
    text = BASE.replace("ttft_budget_ms: 2000", "zzzz: 2000", 1)
    (_, msg), *_ = _errors(tmp_path, text)
    assert msg.startswith("unknown field (`failover config schema` lists the fields)")


def test_an_unknown_roster_endpoint_lists_the_known_ones(tmp_path: Path) -> None:
    text = BASE.replace("tier0: [anthropic-us-east]", "tier0: [anthropic-us-eats]", 1)
    (path, msg), *_ = _errors(tmp_path, text)
    assert path == "roles.planner.roster.tier0[0]"
    known = ", ".join(sorted(load_policy(DEFAULT_POLICY_PATH, env=ENV).endpoints))
    line = _line_of(text, "tier0: [anthropic-us-eats]")
    assert msg == (
        "unknown endpoint 'anthropic-us-eats'; did you mean 'anthropic-us-east'? "
        f"known endpoints: {known} ({tmp_path / 'policy.yaml'}:{line})"
    )


def test_check_policy_file_reports_lines_without_raising(tmp_path: Path) -> None:
    p = tmp_path / "x.yaml"
    p.write_bytes(b"\xff\xfe")
    ok, lines = check_policy_file(p, env=ENV)
    assert not ok and "not UTF-8" in lines[1]
