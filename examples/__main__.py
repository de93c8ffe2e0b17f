"""``python -m agent_failover.examples [NAME [DEST]]``: list the examples, or copy one
into ``DEST`` (default ``./NAME``) as a project of its own, ready to run."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def examples() -> list[str]:
    """The shipped examples: every folder here with a README."""
    return sorted(p.name for p in HERE.iterdir() if (p / "README.md").is_file())


def _summary(name: str) -> str:
    lines = (HERE / name / "README.md").read_text(encoding="utf-8").splitlines()
    return lines[0].lstrip("# ").strip() if lines else ""


def copy_example(name: str, dest: Path) -> Path:
    """Copy example ``name`` into ``dest`` (which must not exist yet); returns ``dest``."""
    if name not in examples():
        raise SystemExit(f"no example {name!r}; the examples are: {', '.join(examples())}")
    if dest.exists():
        raise SystemExit(f"{dest} already exists: pick another destination")
    shutil.copytree(HERE / name, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def main(argv: list[str]) -> None:
    if not argv:
        for name in examples():
            print(f"{name}: {_summary(name)}")
        print("copy one: python -m agent_failover.examples NAME [DEST]")
        return
    dest = copy_example(argv[0], Path(argv[1] if len(argv) > 1 else argv[0]))
    print(f"copied {argv[0]} to {dest}: its README.md says how to run it")


if __name__ == "__main__":
    main(sys.argv[1:])
