"""The soak's figures (:mod:`bench.soak`), apart from the stack that produces them: RSS
slopes, keys grouped by route and kind, and what the worker log's tracebacks ended with."""

from __future__ import annotations

import re
from typing import Any


def slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of ``ys`` over ``xs`` (None with fewer than two distinct xs)."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def slope_at_equal_load(xs: list[float], loads: list[float], ys: list[float]) -> float | None:
    """The slope of ``ys`` over ``xs`` with ``loads`` held equal (least squares on both):
    growth with the pipelines run, apart from what the pipelines in flight hold."""
    n = len(xs)
    if n < 3:
        return None
    c = [[v - sum(col) / n for v in col] for col in (xs, loads, ys)]
    s11, s12, s22 = (
        sum(a * b for a, b in zip(c[i], c[j], strict=True)) for i, j in ((0, 0), (0, 1), (1, 1))
    )
    s1y, s2y = (sum(a * b for a, b in zip(c[i], c[2], strict=True)) for i in (0, 1))
    det = s11 * s22 - s12 * s12
    return None if det == 0 else (s22 * s1y - s12 * s2y) / det


def rss_figures(samples: list[dict[str, float]]) -> dict[str, Any]:
    """First/last RSS and the slopes over the second half of the run."""
    if not samples:
        return {"samples": []}
    half = samples[-1]["minute"] / 2
    late = [s for s in samples if s["minute"] >= half]
    rss = [s["rss_mb"] for s in late]
    per_k = slope([s["pipelines"] / 1000 for s in late], rss)
    per_minute = slope([s["minute"] for s in late], rss)
    flight = [s["in_flight"] for s in late]
    per_k_equal = slope_at_equal_load([s["pipelines"] / 1000 for s in late], flight, rss)
    return {
        "first_mb": round(samples[0]["rss_mb"], 1),
        "last_mb": round(samples[-1]["rss_mb"], 1),
        "max_mb": round(max(s["rss_mb"] for s in samples), 1),
        "slope_window_minutes": [round(half, 2), samples[-1]["minute"]],
        "slope_mb_per_1000_pipelines": None if per_k is None else round(per_k, 2),
        "slope_mb_per_minute": None if per_minute is None else round(per_minute, 3),
        # RSS follows the pipelines in flight (their workflow state, and the allocator
        # keeps its high-water mark); this is the growth with that load held equal.
        "slope_mb_per_1000_pipelines_at_equal_in_flight": (
            None if per_k_equal is None else round(per_k_equal, 2)
        ),
        "in_flight_max": max(s["in_flight"] for s in samples),
        # RSS split: the heap (anonymous) and the mapped files (code and data of the
        # interpreter and the SDK's native bridge, paged in the first time a path runs).
        **split_slopes(late),
        "samples": [{**s, "rss_mb": round(s["rss_mb"], 2)} for s in samples],
    }


def split_slopes(late: list[dict[str, float]]) -> dict[str, Any]:
    """Slopes (MB per 1,000 pipelines) of the anonymous and file-backed parts of RSS."""
    out: dict[str, Any] = {}
    xs = [s["pipelines"] / 1000 for s in late]
    for part in ("anon", "file"):
        ys = [s.get(f"{part}_mb", 0.0) for s in late]
        if any(ys):
            k = slope(xs, ys)
            out[f"{part}_slope_mb_per_1000_pipelines"] = None if k is None else round(k, 2)
    return out


def key_trend(samples: list[dict[str, float]]) -> dict[str, Any]:
    """The most keys one route had at half time, at the end, and at any sample."""
    if not samples:
        return {}
    half = samples[-1]["minute"] / 2
    mid = next(s for s in samples if s["minute"] >= half)
    return {
        "at_half_time": mid["keys"],
        "at_end": samples[-1]["keys"],
        "max": max(s["keys"] for s in samples),
    }


_ROUTE_KEY = re.compile(r"^h:\{(?P<route>[^}]*)\}:(?P<kind>.*)$")
_BRACED = re.compile(r"^(?P<family>[^:]+):\{(?P<scope>[^}]*)\}")


def key_kind(key: str, ns: str) -> tuple[str, str]:
    """(group, kind) of a key of namespace ``ns``: ``("route:R", "s")`` for
    ``NS:h:{R}:s:123``; ``("rb", "rb")`` for a budget scope; the first part otherwise."""
    rest = key[len(ns) + 1 :]
    m = _ROUTE_KEY.match(rest)
    if m:
        kind = re.sub(r":-?\d+$", "", m["kind"])
        return f"route:{m['route']}", kind
    m = _BRACED.match(rest)
    family = m["family"] if m else rest.split(":", 1)[0]
    return family, family


def traceback_ends(lines: list[str]) -> list[str]:
    """The exception line closing each traceback in ``lines`` (type and message)."""
    ends, inside = [], False
    for ln in lines:
        if ln.startswith("Traceback (most recent call last)"):
            inside = True
        elif inside and ln and not ln.startswith((" ", "\t", "The above", "During")):
            ends.append(ln[:120])
            inside = False
    return ends
