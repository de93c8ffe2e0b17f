"""The framework extras are ranges, tested at both ends.

Upper end: the suite's own environment has the newest releases in range, and the other
tests of this folder run on them (checked here to lie in the range). Lower end: the
lower bound of each range (read from pyproject.toml, so the test follows the file) is
installed with ``pip install --no-deps --target`` into a directory prepended to
``sys.path`` of a subprocess that runs that framework's contrib tests: only the framework
packages change, the rest of the venv is shared (a venv with ``--system-site-packages``
would see the newer framework first). The install is cached under the temp directory,
keyed by the versions, so only the first run pays for it (from the configured package
index); each run is bounded by ``LOWER_BOUND_TIMEOUT_S``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOWER_BOUND_TIMEOUT_S = 150
#: extra -> (the contrib test file, packages released in lockstep with the framework).
EXTRAS = {
    "pydantic-ai": (
        "tests/contrib/test_pydantic_ai_model.py",
        {"pydantic-ai-slim": ["pydantic-graph"]},
    ),
    "openai-agents": ("tests/contrib/test_openai_agents_model.py", {}),
}


def _requirements(extra: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["optional-dependencies"][extra]]


def _lower(req: Requirement) -> Version:
    lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=")]
    assert lows, f"{req} has no lower bound"
    return max(lows)


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_extra_is_a_range_and_the_suite_runs_its_upper_end(extra: str) -> None:
    for req in _requirements(extra):
        uppers = [s for s in req.specifier if s.operator == "<"]
        assert uppers and _lower(req) < Version(uppers[0].version), f"{req} is not a range"
        installed = importlib.metadata.version(req.name)
        assert req.specifier.contains(installed), f"{req.name} {installed} is outside {req}"


def _installed_lower_bounds(extra: str) -> tuple[Path, dict[str, str]]:
    """The lower bounds of ``extra``'s packages in a cached ``--target`` directory."""
    pins: dict[str, str] = {}
    for req in _requirements(extra):
        low = str(_lower(req))
        pins[req.name] = low
        for sibling in EXTRAS[extra][1].get(req.name, []):
            pins[sibling] = low
    key = "-".join(f"{n}{v}" for n, v in sorted(pins.items()))
    target = Path(tempfile.gettempdir()) / "agent-failover-lower-bounds" / key
    if not target.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=target.parent.mkdir(
            parents=True, exist_ok=True) or target.parent))  # fmt: skip
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(staging)]
        cmd += [f"{n}=={v}" for n, v in pins.items()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=LOWER_BOUND_TIMEOUT_S)
        assert proc.returncode == 0, f"pip could not install {pins}: {proc.stderr[-2000:]}"
        try:
            staging.rename(target)  # atomic: a parallel worker's copy may have won
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return target, pins


@pytest.mark.timeout(LOWER_BOUND_TIMEOUT_S * 2)
@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_contrib_tests_pass_at_the_lower_bound(extra: str) -> None:
    target, pins = _installed_lower_bounds(extra)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)])}
    check = "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) "
    check += "for n in sys.argv[1:]}))"
    probe = subprocess.run(
        [sys.executable, "-c", check, *pins], env=env, capture_output=True, text=True, check=True
    )
    seen = json.loads(probe.stdout)
    assert {n: Version(v) for n, v in seen.items()} == {n: Version(v) for n, v in pins.items()}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:randomly", "-p",
         "no:cacheprovider", EXTRAS[extra][0]],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=LOWER_BOUND_TIMEOUT_S,
    )  # fmt: skip
    assert proc.returncode == 0, f"at {pins}:\n{proc.stdout[-3000:]}"
