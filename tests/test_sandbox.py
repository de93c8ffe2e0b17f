"""Our package is passed through the workflow sandbox: safe only while importing it has no
effect a workflow could see and no module keeps state that workflow code changes."""

from __future__ import annotations

import ast
from pathlib import Path

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agent_failover.plugin import PASSTHROUGH_MODULES, STRICT_PASSTHROUGH_MODULES
from agent_failover.service import workflow_runner

ROOT = Path(__file__).resolve().parents[1]
#: The code that runs inside workflows: orchestration and the pure policy it calls.
WORKFLOW_SIDE = ("workflows", "resilience")
_MUTABLE_CALLS = {
    "list", "dict", "set", "defaultdict", "OrderedDict", "Counter", "deque",
    "WeakKeyDictionary", "WeakValueDictionary", "WeakSet",
}  # fmt: skip
#: Module-level state that is safe shared across runs, and why: keyed by the run itself.
PER_RUN_STATE = {
    # Weakly keyed by the workflow instance: one entry per live run, none shared between
    # runs; it memoizes the run's recorded skip-upserts decision (a history marker).
    ("workflows/search_attributes.py", "_skipping"),
}


def _module_state(tree: ast.Module) -> list[str]:
    """Module-level names bound to a mutable container, unless named as a constant."""
    found = []
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        mutable = isinstance(value, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name | ast.Attribute):
            name = value.func.id if isinstance(value.func, ast.Name) else value.func.attr
            mutable = mutable or name in _MUTABLE_CALLS
        for t in targets:
            if mutable and isinstance(t, ast.Name) and not t.id.isupper() and t.id != "__all__":
                found.append(t.id)
    return found


def _offenders(paths: list[Path], root: Path = ROOT) -> list[str]:
    offenders = []
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        rel = path.relative_to(root)
        offenders += [
            f"{rel}: module-level state {name!r}"
            for name in _module_state(tree)
            if (str(rel), name) not in PER_RUN_STATE
        ]
        offenders += [
            f"{rel}:{node.lineno}: `global {', '.join(node.names)}`"
            for node in ast.walk(tree)
            if isinstance(node, ast.Global)
        ]
    return offenders


def test_workflow_side_modules_keep_no_state() -> None:
    """No ``global`` statement and no lowercase module-level container in the code that runs
    inside workflows (constants are UPPER_CASE and only read)."""
    paths = [p for d in WORKFLOW_SIDE for p in sorted((ROOT / d).rglob("*.py"))]
    assert paths
    assert _offenders(paths) == []


def test_the_state_check_finds_state(tmp_path: Path) -> None:
    """The check above can fail: it names a cache dict and a ``global`` statement."""
    (tmp_path / "m.py").write_text(
        "LOOKUP = {'a': 1}\n_seen = set()\ncache: dict = {}\n"
        "import weakref\n_runs = weakref.WeakKeyDictionary()\n"
        "def f():\n    global counter\n    counter = 1\n"
    )
    assert _offenders([tmp_path / "m.py"], tmp_path) == [
        "m.py: module-level state '_seen'",
        "m.py: module-level state 'cache'",
        "m.py: module-level state '_runs'",
        "m.py:7: `global counter`",
    ]


def test_our_package_is_passed_through_and_user_packages_are_not() -> None:
    """Workers pass ``agent_failover`` through; a user's ``workflows`` or ``activities``
    package stays sandboxed; the strict runner passes through none of our modules."""
    runner = workflow_runner()
    assert isinstance(runner, SandboxedWorkflowRunner)
    passed = runner.restrictions.passthrough_modules
    assert "agent_failover" in passed
    assert not {"workflows", "activities", "config", "providers"} & passed
    strict = workflow_runner(strict=True).restrictions.passthrough_modules
    assert not any(m == "agent_failover" or m.startswith("agent_failover.") for m in strict)
    assert set(STRICT_PASSTHROUGH_MODULES) < set(PASSTHROUGH_MODULES)
