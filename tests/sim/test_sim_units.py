"""Pure parts of the simulator: fault planning, timelines on a fake clock, config, content."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_failover.testing.sim.clock import FakeClock
from agent_failover.testing.sim.config import LatencyModel, SimConfig, load_sim_config
from agent_failover.testing.sim.content import (
    END_MARKER,
    ParsedRequest,
    build_reply,
    estimate_tokens,
)
from agent_failover.testing.sim.faults import AttemptPlan, Fault, FaultKind, plan_attempt
from agent_failover.testing.sim.scenario import Scenario, load_scenario, parse_duration
from agent_failover.testing.sim.state import SimState
from agent_failover.testing.sim.wire.base import Operation, SimError
from agent_failover.testing.sim.wire.bedrock import BedrockWire

SCENARIOS = Path(__file__).resolve().parents[2] / "testing" / "sim" / "scenarios"


def plan(*faults: Fault, stream: bool = True, json_mode: bool = False, seed: int = 1):
    return plan_attempt(
        list(faults), model="m", stream=stream, json_mode=json_mode, rng=random.Random(seed)
    )


# --- fault planning -----------------------------------------------------------------


def test_latencies_add_and_first_terminal_wins():
    """Latency faults accumulate; among terminal faults the first listed one wins."""
    p = plan(
        Fault(kind=FaultKind.LATENCY, seconds=1.0),
        Fault(kind=FaultKind.RATE_LIMIT),
        Fault(kind=FaultKind.LATENCY, seconds=0.5),
        Fault(kind=FaultKind.SERVER_ERROR),
    )
    assert p.latency_s == 1.5
    assert p.terminal is not None and p.terminal.kind is FaultKind.RATE_LIMIT
    assert p.labels == ["latency", "rate_limit", "latency"]


def test_stream_only_faults_skip_non_stream_requests():
    """Stall, malformed, no_done and error events need a stream; stream_cut does not."""
    faults = [
        Fault(kind=FaultKind.STREAM_STALL, seconds=1),
        Fault(kind=FaultKind.MALFORMED_CHUNK),
        Fault(kind=FaultKind.NO_DONE),
        Fault(kind=FaultKind.STREAM_ERROR_EVENT),
        Fault(kind=FaultKind.STREAM_CUT),
    ]
    assert plan(*faults, stream=False).labels == ["stream_cut"]
    assert len(plan(*faults, stream=True).applied) == 5


def test_json_only_faults_need_json_mode():
    """invalid_json and schema_violation only fire on JSON-mode requests."""
    faults = [Fault(kind=FaultKind.INVALID_JSON), Fault(kind=FaultKind.EMPTY_OUTPUT)]
    assert plan(*faults).labels == ["empty_output"]
    assert plan(*faults, json_mode=True).labels == ["invalid_json"]


def test_content_filter_modes_go_to_different_slots():
    """content_filter mode=error is terminal; mode=finish is a refusal reply."""
    err = plan(Fault(kind=FaultKind.CONTENT_FILTER))
    fin = plan(Fault(kind=FaultKind.CONTENT_FILTER, mode="finish"))
    assert err.terminal is not None and err.refusal is None
    assert fin.refusal is not None and fin.terminal is None
    assert fin.labels == ["content_filter_finish"]


def test_probability_zero_and_one_and_model_filter():
    """p=0 never fires, p=1 always does, and the model filter is respected."""
    assert plan(Fault(kind=FaultKind.SERVER_ERROR, probability=0.0)).terminal is None
    assert plan(Fault(kind=FaultKind.SERVER_ERROR, probability=1.0)).terminal is not None
    assert plan(Fault(kind=FaultKind.SERVER_ERROR, model="other")).terminal is None


def test_probability_draws_are_seeded():
    """The same seed gives the same firing pattern; the rate is roughly p."""
    fault = Fault(kind=FaultKind.SERVER_ERROR, probability=0.3)

    def pattern(seed: int) -> list[bool]:
        rng = random.Random(seed)
        return [
            plan_attempt([fault], model="m", stream=False, json_mode=False, rng=rng).terminal
            is not None
            for _ in range(400)
        ]

    assert pattern(7) == pattern(7)
    assert 0.2 < sum(pattern(7)) / 400 < 0.4


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "latency"},
        {"kind": "lognormal_latency"},
        {"kind": "tokens_per_sec"},
        {"kind": "http_error"},
        {"kind": "http_error", "status": 200},
        {"kind": "stream_stall", "after_tokens": 2},
        {"kind": "server_error", "probability": 1.5},
        {"kind": "nope"},
        {"kind": "server_error", "surprise": 1},
    ],
)
def test_invalid_faults_fail_validation(bad):
    """Faults missing their parameter, out of range or unknown are rejected."""
    with pytest.raises(ValidationError):
        Fault.model_validate(bad)


def test_empty_plan_has_no_effect():
    """No faults means no latency, no terminal answer and no labels."""
    assert plan() == AttemptPlan()


# --- scenario timelines -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(30, 30.0), ("30s", 30.0), ("2m", 120.0), ("500ms", 0.5), ("t=45s", 45.0), ("1.5", 1.5)],
)
def test_parse_duration(text, seconds):
    """Durations accept bare numbers and ms/s/m/h suffixes, with an optional 't='."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["soon", -1, "3 days", True])
def test_parse_duration_rejects_garbage(bad):
    """Anything else is a validation error."""
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_timeline_switches_faults_on_and_off_with_fake_clock():
    """An event's faults apply from 'from' (inclusive) to 'to' (exclusive) after load."""
    clock = FakeClock()
    state = SimState(load_sim_config(), clock=clock)
    event = {"from": "30s", "to": "150s", "endpoint": "anthropic-us-east", "answers": 529}
    state.load_scenario(Scenario.model_validate({"events": [event]}))

    def kinds() -> list[str]:
        return [f.label for f in state.active_faults("anthropic-us-east")]

    assert kinds() == []
    clock.advance(29.999)
    assert kinds() == []
    clock.advance(0.001)
    assert kinds() == ["http_error_529"]
    assert state.active_faults("anthropic-eu-west") == []
    clock.advance(120)
    assert kinds() == []


def test_outage_demo_takes_whole_provider_down_then_recovers():
    """outage_demo: primary at 30s, every Anthropic region at 60s, others untouched, recovery."""
    clock = FakeClock()
    state = SimState(load_sim_config(), clock=clock)
    state.load_scenario(load_scenario(SCENARIOS / "outage_demo.yaml"))

    def down(name: str) -> bool:
        return any(f.label == "http_error_529" for f in state.active_faults(name))

    clock.advance(40)
    assert down("anthropic-us-east") and not down("anthropic-eu-west")
    clock.advance(30)
    assert down("anthropic-us-east") and down("anthropic-eu-west")
    assert not any(down(n) for n in ("openai-us", "cheap-mini", "gemini-flash"))
    clock.advance(90)  # t=160: recovering
    assert not down("anthropic-us-east")
    assert {f.kind for f in state.active_faults("anthropic-us-east")} == {
        FaultKind.LOGNORMAL_LATENCY,
        FaultKind.OVERLOADED,
    }
    clock.advance(30)  # t=190: healthy
    assert state.active_faults("anthropic-us-east") == []


def test_latency_ramp_interpolates():
    """A ramp_to fault's magnitude moves linearly across its event."""
    clock = FakeClock()
    state = SimState(load_sim_config(), clock=clock)
    state.load_scenario(load_scenario(SCENARIOS / "latency_ramp.yaml"))
    medians = []
    for t in (10, 40, 69.999, 100, 160):
        clock.set(state.scenario.loaded_at + t)
        (fault, *_) = state.active_faults("anthropic-us-east")
        medians.append(fault.median_s)
    assert medians[0] == pytest.approx(0.02)
    assert medians[1] == pytest.approx(1.01)
    assert medians[2] == pytest.approx(2.0, abs=1e-3)
    assert medians[3] == 2.0
    assert medians[4] == pytest.approx(1.01)


def test_every_shipped_scenario_is_valid():
    """All files in sim/scenarios validate and name only hosted endpoints."""
    files = sorted(SCENARIOS.glob("*.yaml"))
    assert {"outage_demo.yaml", "latency_ramp.yaml"} <= {f.name for f in files}
    names = load_sim_config().endpoint_names
    for f in files:
        load_scenario(f).check_endpoints(names)


@pytest.mark.parametrize(
    "event",
    [
        {"from": 10, "to": 5, "endpoint": "openai-us", "answers": 500},
        {"from": 0, "endpoint": "openai-us"},
        {"from": 0, "answers": 500},
    ],
)
def test_bad_scenario_events_are_rejected(event):
    """Inverted windows, events without faults and events without a target fail."""
    with pytest.raises(ValidationError):
        Scenario.model_validate({"events": [event]})


def test_scenario_with_unknown_endpoint_is_rejected():
    """Loading a scenario that names an endpoint the simulator lacks fails."""
    state = SimState(load_sim_config(), clock=FakeClock())
    bad = Scenario.model_validate({"events": [{"endpoint": "nowhere", "answers": 500}]})
    with pytest.raises(ValueError, match="nowhere"):
        state.load_scenario(bad)


# --- config ---------------------------------------------------------------------------


def test_shipped_config_has_the_fixed_endpoints():
    """config/sim.yaml hosts the five vendor-API endpoints and three cloud-hosted ones."""
    cfg = load_sim_config()
    got = {
        e.name: (e.kind.value, e.organisation, e.region, e.default_model, e.context_window)
        for e in cfg.endpoints
    }
    clouds = {e.name: e.cloud.value for e in cfg.endpoints if e.cloud is not None}
    assert clouds == {
        "bedrock-us-west-2": "aws",
        "vertex-europe-west1": "gcp",
        "azure-swedencentral": "azure",
    }
    assert got == {
        "anthropic-us-east": ("anthropic", "anthropic", "us-east", "claude-sonnet-4-5", 200000),
        "anthropic-eu-west": ("anthropic", "anthropic", "eu-west", "claude-sonnet-4-5", 200000),
        "openai-us": ("openai", "openai", "us", "gpt-4.1", 128000),
        "cheap-mini": ("openai", "mistral", "eu", "mistral-small-latest", 32000),
        "gemini-flash": ("gemini", "google", "us", "gemini-2.5-flash", 1000000),
        "bedrock-us-west-2": (
            "bedrock",
            "aws",
            "us-west-2",
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            200000,
        ),
        "vertex-europe-west1": (
            "anthropic",
            "google",
            "europe-west1",
            "claude-sonnet-4-5@20250929",
            200000,
        ),
        "azure-swedencentral": ("openai", "microsoft", "swedencentral", "gpt-4.1", 128000),
    }


def test_base_urls_follow_sdk_conventions():
    """Anthropic and Gemini base URLs have no /v1; OpenAI's includes it."""
    cfg = load_sim_config()
    root = "http://127.0.0.1:9"
    assert cfg.endpoint("anthropic-us-east").base_url(root) == f"{root}/anthropic-us-east"
    assert cfg.endpoint("openai-us").base_url(root) == f"{root}/openai-us/v1"
    assert cfg.endpoint("gemini-flash").base_url(root) == f"{root}/gemini-flash"
    ec = cfg.endpoint("cheap-mini").to_endpoint_config(root)
    assert ec.organisation == "mistral" and ec.base() == f"{root}/cheap-mini/v1"


def test_config_rejects_duplicates_and_bad_latency():
    """Duplicate endpoint names and min > max latency fail at load time."""
    ep = load_sim_config().endpoints[0].model_dump()
    with pytest.raises(ValidationError, match="duplicate"):
        SimConfig.model_validate({"endpoints": [ep, ep]})
    with pytest.raises(ValidationError, match="min_ms"):
        LatencyModel(min_ms=10, max_ms=5)


def test_latency_model_is_clamped():
    """Sampled base latency stays inside [min_ms, max_ms]."""
    model = LatencyModel(ttft_median_ms=10, ttft_sigma=2.0, min_ms=5, max_ms=20)
    rng = random.Random(3)
    draws = [model.sample_s(rng) for _ in range(500)]
    assert min(draws) >= 0.005 and max(draws) <= 0.020


# --- content ----------------------------------------------------------------------------


def _req(text: str, **kw) -> ParsedRequest:
    return ParsedRequest(model="m", messages=[("user", text)], **kw)


def _reply(req: ParsedRequest, plan_: AttemptPlan | None = None):
    return build_reply(
        req, plan=plan_ or AttemptPlan(), reply_id="r1", created=0, max_output_tokens=10_000
    )


def test_reply_is_deterministic_and_marked():
    """Same request, same text; the text echoes the prompt and ends with the end marker."""
    a, b = (
        _reply(_req("one two three four five six seven")),
        _reply(_req("one two three four five six seven")),
    )
    assert a.text == b.text
    assert a.text.startswith("[echo: one two three four five six]")
    assert a.text.endswith(END_MARKER)
    assert _reply(_req("something else")).text != a.text


def test_pieces_match_token_estimate():
    """The streamed pieces are exactly the estimated output tokens and rebuild the text."""
    r = _reply(_req("count my tokens"))
    assert "".join(r.pieces) == r.text
    assert r.output_tokens == estimate_tokens(r.text) == len(r.pieces)
    assert estimate_tokens("") == 0 and estimate_tokens("abcde") == 2


def test_prompt_tokens_estimate_four_chars_per_token():
    """Input tokens are ceil(characters / 4) over system and messages."""
    req = ParsedRequest(model="m", system="abcd", messages=[("user", "efghi")])
    assert req.prompt_tokens == 3


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        (
            "arn:aws:bedrock:us-east-1:1:inference-profile/global.anthropic.claude-x-v1:0",
            "claude-x",
        ),
        ("meta.llama3-70b-instruct-v1:0", "llama3-70b-instruct"),
        ("gpt-4.1", "gpt-4.1"),
    ],
)
def test_cloud_model_ids_answer_like_their_family(model, family):
    """A cloud's model id seeds replies like the vendor's name: the same model answers alike
    on every cloud (so a cut answer can be resumed on another one)."""
    from agent_failover.testing.sim.content import ParsedRequest, model_family

    assert model_family(model) == family
    ask = [("user", "Compare two ledgers")]
    assert ParsedRequest(model=model, messages=ask).seed() == (
        ParsedRequest(model=family, messages=ask).seed()
    )


def test_bedrock_converse_output_config_is_json_mode_with_its_schema():
    """Converse ``outputConfig.textFormat`` (type ``json_schema``, the schema a JSON string,
    as https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_JsonSchemaDefinition.html
    states) asks for JSON text of that schema; a schema string that is not JSON is a 400."""
    endpoint = next(e for e in load_sim_config().endpoints if e.name == "bedrock-us-west-2")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    fmt = {"type": "json_schema", "structure": {"jsonSchema": {"schema": json.dumps(schema)}}}
    body = {
        "messages": [{"role": "user", "content": [{"text": "count"}]}],
        "outputConfig": {"textFormat": fmt},
    }
    op = Operation("complete", path_model=endpoint.models[0], variant="converse")
    parsed = BedrockWire().parse(body, op, endpoint)
    assert parsed.json_mode and parsed.schema == schema
    fmt["structure"]["jsonSchema"]["schema"] = "{not json"
    with pytest.raises(SimError):
        BedrockWire().parse(body, op, endpoint)
