"""docker-compose.yml read the way `docker compose config` would (Docker does not run here):
one worker service per task queue of the shipped policy, every service wired to the ports
the others listen on, every mounted file present, the codec server reachable from the UI's
origin, and the collector, Prometheus and Grafana configs consistent with the services."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from agent_failover.cli.codec_server import DEFAULT_CORS_ORIGINS
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.service import DEFAULT_TASK_QUEUE, parse_worker_role

ROOT = Path(__file__).resolve().parents[2]
_VAR = re.compile(r"\$\$|\$\{(\w+)(:?[-?])?([^}]*)\}")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ${VAR}, ${VAR:-default} and $$ rules, over a loaded document."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, default = m.group(1), m.group(2) or "", m.group(3)
        got = env.get(name)
        missing = got is None or (op.startswith(":") and got == "")
        if missing and op.endswith("?"):
            raise ValueError(f"${{{name}}} is required: {default}")
        if missing and op.endswith("-"):
            return default
        return got or ""

    return _VAR.sub(one, value)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def _workers(services: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services.items() if "FAILOVER_WORKER_ROLE" in s.get("environment", {})}


def _published(service: dict[str, Any]) -> set[int]:
    return {int(str(p).split(":")[-1].split("/")[0]) for p in service.get("ports", [])}


def test_one_worker_service_per_task_queue(services: dict[str, Any]) -> None:
    """A main worker and exactly one service per bulkhead of the shipped policy, all on the
    same deployment (Temporal, task queue, Redis, policy, codec keys)."""
    policy = load_policy(DEFAULT_POLICY_PATH)
    roles = {n: parse_worker_role(s["environment"]["FAILOVER_WORKER_ROLE"], policy)
             for n, s in _workers(services).items()}  # fmt: skip
    assert sum(r.main for r in roles.values()) == 1
    served = sorted(b for r in roles.values() for b in r.bulkheads)
    assert served == sorted({r.bulkhead for r in policy.roles.values()})
    shared = ["TEMPORAL_ADDRESS", "REDIS_URL", "FAILOVER_POLICY", "FAILOVER_TASK_QUEUE"]
    shared += ["FAILOVER_CODEC_KEYS", "FAILOVER_CODEC_KEY_ID", "OTEL_EXPORTER_OTLP_ENDPOINT"]
    envs = [s["environment"] for s in _workers(services).values()]
    for var in shared:
        assert len({e[var] for e in envs}) == 1, var
    assert envs[0]["FAILOVER_TASK_QUEUE"] == DEFAULT_TASK_QUEUE
    for name, s in _workers(services).items():
        assert s["build"] == "." and s["stop_signal"] == "SIGTERM", name
        assert s["depends_on"]["temporal-setup"]["condition"] == "service_completed_successfully"


def test_addresses_point_at_services_and_their_ports(services: dict[str, Any]) -> None:
    """Every host:port a service is configured with names a service listening there."""
    env = _workers(services)["worker"]["environment"]
    targets = {
        env["TEMPORAL_ADDRESS"]: 7233,
        env["REDIS_URL"]: 6379,
        env["SIM_URL"]: 8400,
        env["OTEL_EXPORTER_OTLP_ENDPOINT"]: 4318,
        services["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"]: 7233,
    }
    for address, port in targets.items():
        parsed = urlparse(address if "//" in address else f"tcp://{address}")
        assert parsed.hostname in services and parsed.port == port, address
    assert "8400" in services["simulator"]["command"]
    assert services["temporal"]["environment"]["DB"] == "postgres12"
    assert services["temporal"]["environment"]["POSTGRES_SEEDS"] in services


def test_dependencies_and_mounts_exist(services: dict[str, Any]) -> None:
    """depends_on names services; every bind-mounted file or folder is in the repository."""
    for name, s in services.items():
        for dep in s.get("depends_on", []):
            assert dep in services, f"{name} depends on unknown {dep}"
        assert "image" in s or "build" in s, name
        for volume in s.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"


def test_ui_reaches_the_codec_server(services: dict[str, Any]) -> None:
    """With the documented .env, the UI's codec endpoint is the codec server's published
    loopback port, and the server trusts the UI's origin for CORS."""
    env = {"TEMPORAL_CODEC_ENDPOINT": "http://localhost:8081", "FAILOVER_CODEC_KEYS": "k:x"}
    ui = interpolate(services["temporal-ui"], env)
    endpoint = urlparse(ui["environment"]["TEMPORAL_CODEC_ENDPOINT"])
    codec = interpolate(services["codec-server"], env)
    assert codec["profiles"] == ["codec"] and codec["command"][:2] == ["failover", "codec-server"]
    assert f"--port={endpoint.port}" in codec["command"] and "--host=0.0.0.0" in codec["command"]
    assert codec["ports"] == [f"127.0.0.1:{endpoint.port}:{endpoint.port}"]
    origins = [a.split("=", 1)[1] for a in codec["command"] if a.startswith("--cors-origin=")]
    ui_origin = f"http://localhost:{next(iter(_published(services['temporal-ui'])))}"
    assert ui_origin in origins and ui_origin in DEFAULT_CORS_ORIGINS
    assert codec["environment"]["FAILOVER_CODEC_KEYS"] == "k:x"
    assert interpolate(services["temporal-ui"], {})["environment"]["TEMPORAL_CODEC_ENDPOINT"] == ""


def test_collector_pipelines_are_complete_and_reachable(services: dict[str, Any]) -> None:
    """Every pipeline uses defined components; receivers bind all interfaces on the ports
    the workers push to; traces go to Jaeger's OTLP port."""
    cfg = yaml.safe_load((ROOT / "deploy/otel/collector.yaml").read_text())
    for name, pipeline in cfg["service"]["pipelines"].items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in cfg[kind], f"{name}: {kind} {component} undefined"
    protocols = cfg["receivers"]["otlp"]["protocols"]
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    jaeger = cfg["exporters"]["otlp/jaeger"]["endpoint"]
    assert jaeger.split(":")[0] in services and jaeger.endswith(":4317")
    mount = services["otel-collector"]["volumes"][0].split(":")[1]
    assert services["otel-collector"]["command"] == [f"--config={mount}"]


def test_prometheus_scrapes_every_worker_collector_and_temporal(services: dict[str, Any]) -> None:
    """Each worker service at its FAILOVER_METRICS_PORT, the collector's exporter, Temporal."""
    cfg = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    targets = {t for job in cfg["scrape_configs"] for sc in job["static_configs"]
               for t in sc["targets"]}  # fmt: skip
    for name, s in _workers(services).items():
        assert f"{name}:{s['environment']['FAILOVER_METRICS_PORT']}" in targets
    collector = yaml.safe_load((ROOT / "deploy/otel/collector.yaml").read_text())
    port = collector["exporters"]["prometheus"]["endpoint"].split(":")[-1]
    assert f"otel-collector:{port}" in targets
    temporal_port = services["temporal"]["environment"]["PROMETHEUS_ENDPOINT"].split(":")[-1]
    assert f"temporal:{temporal_port}" in targets
    assert all(t.split(":")[0] in services for t in targets)


def test_grafana_provisions_datasources_and_the_dashboards_folder(
    services: dict[str, Any],
) -> None:
    """Data sources point at Prometheus and Jaeger; the dashboards provider reads the folder
    the repository's dashboards are mounted on."""
    base = ROOT / "deploy/grafana/provisioning"
    sources = yaml.safe_load((base / "datasources/datasources.yaml").read_text())["datasources"]
    urls = {s["uid"]: urlparse(s["url"]) for s in sources}
    assert (urls["prometheus"].hostname, urls["prometheus"].port) == ("prometheus", 9090)
    assert (urls["jaeger"].hostname, urls["jaeger"].port) == ("jaeger", 16686)
    provider = yaml.safe_load((base / "dashboards/dashboards.yaml").read_text())["providers"][0]
    mounts = dict(v.split(":")[:2] for v in services["grafana"]["volumes"])
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"


def test_image_has_the_extras_the_services_use() -> None:
    """The one image runs the simulator (sim), OTLP export (otlp) and the codec (crypto)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    extras = re.search(r"/src\[([a-z,]+)\]", dockerfile)
    assert extras is not None and set(extras.group(1).split(",")) >= {"sim", "otlp", "crypto"}


def test_interpolation_rules() -> None:
    """The small interpolator above follows compose's documented rules."""
    assert interpolate("${A:-x}", {}) == "x" and interpolate("${A:-x}", {"A": ""}) == "x"
    assert interpolate("${A-x}", {"A": ""}) == "" and interpolate("${A-x}", {}) == "x"
    assert interpolate("${A}", {"A": "v"}) == "v" and interpolate("${A}", {}) == ""
    assert interpolate("$${sa}", {}) == "${sa}"
    with pytest.raises(ValueError, match="required"):
        interpolate("${A:?set A}", {})


def test_image_copies_every_folder_the_package_maps() -> None:
    """`pip install /src` builds from the folders pyproject's package-dir names; a folder
    the Dockerfile does not copy fails the image build, so every one is copied."""
    import tomllib

    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    copied = set(re.findall(r"^COPY (\S+) \./\S+$", (ROOT / "Dockerfile").read_text(), re.M))
    assert set(package_dir.values()) - copied == set()
