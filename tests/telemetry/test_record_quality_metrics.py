"""Shadow evaluation's telemetry: samples, agreement and quality verdict changes become
metrics, and a verdict change is a span event on the current span."""

from __future__ import annotations

from opentelemetry import trace

from agent_failover.telemetry import names, record
from tests.telemetry.conftest import Captured
from tests.telemetry.test_setup import _points


def test_shadow_samples_and_quality_changes_are_recorded(captured: Captured) -> None:
    """Two samples (one agreeing), a regression and a restoration: counted per route and
    event, agreement in the histogram, and events on the span that recorded them."""
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("shadow"):
        record.shadow_sample("analyst", "r1", 1.0, True)
        record.shadow_sample("analyst", "r1", 0.0, False)
        record.quality_changed("analyst", "r1", True, "drop 0.5 > 0.25", 0.5)
        record.quality_changed("analyst", "r1", False, "restored", None)
    pts = _points(captured.reader)
    samples = {p.attributes["agreed"]: p.value for p in pts[names.SHADOW_SAMPLES]}
    assert samples == {True: 1, False: 1}
    (agreement,) = pts[names.SHADOW_AGREEMENT]
    assert (agreement.count, agreement.sum) == (2, 1.0)
    events = {p.attributes["event"]: p.value for p in pts[names.QUALITY_REGRESSIONS]}
    assert events == {"regressed": 1, "restored": 1}
    (span,) = [s for s in captured.spans.get_finished_spans() if s.name == "shadow"]
    assert [e.name for e in span.events] == [
        names.EV_QUALITY_REGRESSION,
        names.EV_QUALITY_RESTORED,
    ]
    assert span.events[0].attributes["failover.quality.delta"] == 0.5
