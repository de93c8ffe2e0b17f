"""Production commands never load the test helpers; dev commands load them only when run.

``run``, ``status``, ``force``, ``resolve``, ``report``, ``worker``, ``codec-server``,
``qualify``, ``escalations`` and ``config`` run against real deployments: neither their
``--help`` nor their modules may reach :mod:`agent_failover.testing` (the simulator, the
dev server, the harness), not even through a lazy import.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from agent_failover.cli import main
from tests.structure import ROOT, module_import_graph

PRODUCTION_COMMANDS = [
    ["run"], ["status"], ["force"], ["resolve"], ["report"], ["worker"], ["codec-server"],
    ["qualify"], ["escalations"], ["escalations", "list"], ["escalations", "show"],
    ["config"], ["config", "check"], ["init"],
]  # fmt: skip
DEV_COMMANDS = [
    ["sim"], ["sim", "fault"], ["sim", "clear"], ["dev"], ["demo"], ["drill"], ["chaos-proxy"],
    ["replay"], ["webhook-receiver"],
]  # fmt: skip
#: The modules that implement the production commands (main itself is checked apart: it
#: also registers the dev commands, whose module imports the helpers inside each body).
PRODUCTION_MODULES = [
    "agent_failover.cli.commands_ops",
    "agent_failover.cli.commands_serve",
    "agent_failover.cli.commands_config",
    "agent_failover.cli.commands_init",
]
TESTING = "agent_failover.testing"


def _loaded_after_help(commands: list[list[str]]) -> list[str]:
    """The ``agent_failover.testing`` modules a fresh process holds after ``--help`` of
    each command (in-process through Typer's runner, like the console script)."""
    code = (
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from agent_failover.cli.main import app\n"
        f"for args in {commands!r}:\n"
        "    result = CliRunner().invoke(app, [*args, '--help'])\n"
        "    assert result.exit_code == 0, (args, result.output)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({TESTING!r}))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_production_commands_help_loads_no_test_helper() -> None:
    """``failover --help`` and every production command's ``--help`` leave
    ``agent_failover.testing`` unloaded."""
    assert _loaded_after_help([[], *PRODUCTION_COMMANDS]) == []


def test_dev_commands_load_the_helpers_only_when_they_run() -> None:
    """Even the dev commands' ``--help`` loads none of the helpers: they import them in
    the command body."""
    assert _loaded_after_help(DEV_COMMANDS) == []


def _reachable(graph: dict[str, set[str]], roots: list[str]) -> set[str]:
    seen, todo = set(), list(roots)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def test_production_command_modules_never_import_the_helpers() -> None:
    """No import of ``agent_failover.testing`` anywhere (lazy ones included) in the
    production commands' modules or in any module of ours they import."""
    graph = module_import_graph()
    reached = _reachable(graph, PRODUCTION_MODULES)
    bad = {
        m: sorted(t for t in graph[m] if t.startswith(TESTING))
        for m in reached
        if any(t.startswith(TESTING) for t in graph[m])
    }
    assert bad == {}
    assert not any(m.startswith(TESTING) for m in reached)


def test_main_and_the_dev_module_import_the_helpers_in_command_bodies_only() -> None:
    """``main`` imports no helper at all; the dev commands' module only inside functions
    (so registering them costs nothing)."""
    for name, lazy_ok in (("main", False), ("commands_dev", True)):
        tree = ast.parse((ROOT / "cli" / f"{name}.py").read_text())
        top = [
            n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)
        ]  # module-level statements only
        everywhere = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        for node in top if lazy_ok else everywhere:
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names]
            assert not any(n.startswith(TESTING) for n in names), (name, ast.unparse(node))


def test_every_declared_command_is_on_the_app() -> None:
    """A command declared in a group's module is listed in the app's help order, in a panel."""
    groups = (
        main.commands_ops, main.commands_serve, main.commands_config, main.commands_dev,
        main.commands_init,
    )  # fmt: skip
    declared = {info.name for group in groups for info in group.commands.registered_commands}
    assert declared == set(main.HELP_ORDER)
    assert [c.name for c in main.app.registered_commands] == list(main.HELP_ORDER)
    assert {g.name for g in main.app.registered_groups} == {"config", "escalations", "sim"}
    panels = set(main.HELP_PANELS)
    assert all(c.rich_help_panel in panels for c in main.app.registered_commands)
    assert all(g.rich_help_panel in panels for g in main.app.registered_groups)


def test_modules_listed_exist() -> None:
    """The production module list names real files (a rename would empty the check)."""
    for module in PRODUCTION_MODULES:
        assert (ROOT / "cli" / f"{module.rsplit('.', 1)[1]}.py").is_file()
