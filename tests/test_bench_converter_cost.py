"""bench/converter_cost.py: its two arms write the same payloads, and it counts what each
builds per call (the figures in docs/figures.md come from it)."""

from __future__ import annotations

from temporalio.contrib.pydantic import pydantic_data_converter

from agent_failover.converter import failover_pydantic_data_converter
from tests.bench_modules import load_bench


def test_a_short_run_compares_the_arms() -> None:
    bench = load_bench("converter_cost")
    out = bench.main(calls=5, rounds=1)
    assert out["identical_payloads"] and out["payload_bytes"] > 0
    assert out["arms"]["sdk"]["type_adapters"] == 3  # input (no hint), context, result
    assert out["arms"]["ours"]["type_adapters"] == 0
    assert out["ratio_ours_to_sdk"] > 0


def test_the_call_converts_six_payloads_the_same_on_both_converters() -> None:
    bench = load_bench("converter_cost")
    values = bench._values()
    sdk = bench.one_call(pydantic_data_converter, values)
    ours = bench.one_call(failover_pydantic_data_converter(), values)
    assert len(sdk) == len(bench.STEPS) == 6 and sdk == ours
