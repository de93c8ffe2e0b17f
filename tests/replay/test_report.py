"""What a replay loads and how its report is cut, from the cassette alone: fault windows
per route (failures closer than the merge gap form one), the mark's settings and windows
when it has them, the rate estimated from the busiest path otherwise."""

from __future__ import annotations

from pathlib import Path

from agent_failover.testing.replay import load_cassette
from agent_failover.testing.replay.report import (
    MERGE_GAP_S,
    estimated_rate,
    fault_events,
    replay_settings,
)
from tests.replay.helpers import T0, write_cassette


def _ex(t: float, route: str, status: int | None, end: str = "complete") -> dict:
    return {
        "at": T0 + t,
        "request": {"method": "POST", "path": f"/{route}/v1/messages"},
        "response": {"status": status, "end": end, "end_s": 0.5},
    }


def test_windows_inferred_per_route(tmp_path: Path) -> None:
    """a fails at 10 and 12 (one window), again at 12 + gap + 1 (another); b is reset at
    11; successes make no window."""
    late = 12 + MERGE_GAP_S + 1
    tape = load_cassette(
        write_cassette(
            tmp_path,
            [
                _ex(0, "a", 200),
                _ex(10, "a", 529),
                _ex(12, "a", 529),
                _ex(late, "a", 500),
                _ex(11, "b", None, "reset"),
                _ex(20, "b", 200),
            ],
        )
    )
    assert fault_events(tape) == [
        (10.0, 12.5, "a: 529"),
        (11.0, 11.5, "b: reset"),
        (late, late + 0.5, "a: 500"),
    ]


def test_load_from_the_mark_else_estimated(tmp_path: Path) -> None:
    """Ten calls to one path over 20 s: 0.5 per second; a mark's settings and windows win,
    and options win over both."""
    calls = [_ex(2 * i, "a", 200) for i in range(10)]
    calls[-1]["response"]["end_s"] = 2.0  # the cassette ends at 20 s
    tape = load_cassette(write_cassette(tmp_path / "plain", calls))
    assert estimated_rate(tape) == 0.5
    settings = replay_settings(tape)
    assert (settings.rate_per_s, settings.duration_s, settings.role) == (0.5, 20.0, "plain")
    marked = load_cassette(
        write_cassette(
            tmp_path / "marked",
            calls,
            mark={
                "at": T0 + 4,
                "load": {"rate_per_s": 3.0, "duration_s": 9.0},
                "events": [[1.0, 2.0, "drill fault"]],
            },
        )
    )
    assert fault_events(marked) == [(1.0, 2.0, "drill fault")]
    assert replay_settings(marked).rate_per_s == 3.0
    assert replay_settings(marked, rate_per_s=1.0, role=None).rate_per_s == 1.0


def test_files_of_one_folder_are_one_cassette(tmp_path: Path) -> None:
    """Two proxies' files (one per endpoint) merge by arrival; the earliest header is t=0."""
    write_cassette(tmp_path, [_ex(5, "a", 200), _ex(7, "a", 529)], name="a")
    write_cassette(tmp_path, [_ex(6, "b", 200)], name="b", started_at=T0 - 2)
    tape = load_cassette(tmp_path)
    assert [(e.route, e.at - T0) for e in tape.exchanges] == [("a", 5), ("b", 6), ("a", 7)]
    assert tape.start == T0 - 2
    assert fault_events(tape) == [(9.0, 9.5, "a: 529")]
