"""Size limits that keep every module readable at once: no production module over 500
lines (the simulator included), no class over 20 methods, no function over 50 lines
(docstrings not counted; Typer commands, whose length is their option block, exempt)."""

from __future__ import annotations

from tests.structure import (
    MAX_FUNCTION_LINES,
    ROOT,
    Offender,
    production_files,
    size_offenders,
)


def test_no_module_class_or_function_over_its_limit() -> None:
    """Every offender is named with its size, so the failure says what to split."""
    assert [str(o) for o in size_offenders()] == []


def test_the_size_check_sees_an_oversized_function() -> None:
    """The checker itself can fail: a generated 60-line function is reported."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 10))
    path = ROOT / "tests" / "_generated_oversized.py"
    path.write_text(f"def big():\n{body}\n")
    try:
        found = size_offenders([path])
    finally:
        path.unlink()
    assert [o.kind for o in found] == ["function"]
    assert isinstance(found[0], Offender) and found[0].size == MAX_FUNCTION_LINES + 11


def test_production_files_include_the_simulator_wires() -> None:
    names = {str(p.relative_to(ROOT)) for p in production_files()}
    assert "testing/sim/wire/openai.py" in names and "workflows/pipeline.py" in names
