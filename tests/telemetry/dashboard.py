"""Reading the committed Grafana dashboard and a Prometheus scrape, for the tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy/grafana/dashboards/failover.json"
_SERIES = re.compile(r"\b((?:failover|gen_ai|temporal)_[A-Za-z0-9_]+)\b")


def dashboard_series(path: Path = DASHBOARD) -> set[str]:
    """Every series name the dashboard's queries read."""
    board = json.loads(path.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    return {m for e in exprs for m in _SERIES.findall(e) if not m.startswith("gen_ai_token_type")}


def served_series(text: str) -> set[str]:
    """Every sample name in a Prometheus text exposition."""
    return {
        line.split("{")[0].split(" ")[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
