"""Releasable: the sdist and wheel build and pass ``twine check``; the wheel, installed
into a fresh virtual environment, imports from there, reports the single-sourced version,
carries the licence, the policies and the schema, its ``failover`` command runs, and an
example copied out of it (``python -m agent_failover.examples``) imports and loads its policy.

Bounded: the build runs without isolation (this environment's setuptools, no download) and
the fresh venv gets the wheel with ``--no-deps --no-index``; its dependencies come from this
environment's site-packages through a ``.pth`` path entry (a plain directory on
``sys.path``: this environment's editable-install hook is not run there, so
``agent_failover`` can only come from the wheel).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
import zipfile
from pathlib import Path

import pytest

import agent_failover

ROOT = Path(__file__).resolve().parents[1]
#: The whole release check (build, check, venv, install, smoke) must stay well inside this.
BUDGET_S = 120


def _run(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=BUDGET_S
    )
    assert proc.returncode == 0, f"{argv}: {proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # Built from a copy: the suite's other wheel build (tests/test_package.py) writes the
    # tree's build/ and egg-info, possibly at the same time on another xdist worker, and
    # a build/ folder in the working directory would shadow the `build` module itself.
    src = tmp_path_factory.mktemp("src") / "agent-failover"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src, cwd=out)
    return out


#: What a source copy leaves out: environments, caches and earlier build output.
_NOT_SOURCE = (
    ".venv",
    ".git",
    ".failover",
    "build",
    "dist",
    "site",
    "__pycache__",
    "*.egg-info",
    ".*cache",
)


def test_version_is_single_sourced() -> None:
    """pyproject reads the version from ``agent_failover.__version__``; no second copy."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_build_and_twine_check(dist: Path) -> None:
    wheel = _wheel(dist)
    sdists = list(dist.glob("*.tar.gz"))
    assert wheel.name == f"agent_failover-{agent_failover.__version__}-py3-none-any.whl"
    assert len(sdists) == 1
    out = _run(sys.executable, "-m", "twine", "check", "--strict", wheel, *sdists).stdout
    assert out.count("PASSED") == 2
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in (
        f"agent_failover-{agent_failover.__version__}.dist-info/licenses/LICENSE",
        "agent_failover/config/policy.schema.json",
        "agent_failover/config/policy.yaml",
        "agent_failover/py.typed",
    ):
        assert shipped in names


def test_the_wheel_in_a_fresh_venv(dist: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
         "--no-index", _wheel(dist))  # fmt: skip
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    ours = sysconfig.get_paths()["purelib"]
    (Path(site.stdout.strip()) / "deps.pth").write_text(ours + "\n")
    smoke = _run(
        python,
        "-c",
        "import importlib.metadata as m, agent_failover as a; from agent_failover import "
        "FailoverPlugin, load_policy; from agent_failover.config import DEFAULT_POLICY_PATH;"
        "p = load_policy(DEFAULT_POLICY_PATH, env={'SIM_URL': 'http://sim'});"
        "print(a.__file__, a.__version__, m.version('agent-failover'), len(p.roles))",
        cwd=tmp_path,
    )
    where, version, meta, roles = smoke.stdout.split()
    assert where.startswith(str(venv)) and version == meta == agent_failover.__version__
    assert int(roles) > 0
    failover = venv / "bin" / "failover"
    assert "config" in _run(failover, "--help", cwd=tmp_path).stdout
    schema = json.loads(_run(failover, "config", "schema", cwd=tmp_path).stdout)
    assert schema["title"] == "agent-failover policy"
    _example_runs_from_the_wheel(python, tmp_path)
    assert time.monotonic() - started < BUDGET_S


def _example_runs_from_the_wheel(python: Path, tmp_path: Path) -> None:
    """The examples ship in the wheel: listed, one copied out as a project of its own whose
    modules import (the worker's policy loads) against the installed package."""
    listed = _run(python, "-m", "agent_failover.examples", cwd=tmp_path).stdout
    assert "support_triage: " in listed and "order_saga: " in listed
    _run(python, "-m", "agent_failover.examples", "support_triage", "triage", cwd=tmp_path)
    project = tmp_path / "triage"
    assert {"worker.py", "starter.py", "workflows.py", "README.md"} <= {
        p.name for p in project.iterdir()
    }
    check = (
        "import agent_failover, workflows, activities, config;"
        "from agent_failover import load_policy;"
        "p = load_policy(config.POLICY_PATH, env={'SIM_URL': 'http://sim'});"
        "print(agent_failover.__file__, workflows.__file__, sorted(p.roles))"
    )
    where, module, *roles = _run(python, "-c", check, cwd=project).stdout.split(maxsplit=2)
    assert where.startswith(str(python.parents[1])) and module.startswith(str(project))
    assert "triage" in roles[0]


def _wheel(dist: Path) -> Path:
    [wheel] = dist.glob("*.whl")
    return wheel
