"""The policy file's JSON Schema: generated from the models, shipped in the package and the
manual unchanged, accepting the shipped policies and rejecting a misspelt field;
``failover config schema`` prints it (as a real process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

from agent_failover.config import CONFIG_DIR, DEFAULT_POLICY_PATH
from agent_failover.config.schema import SCHEMA_PATH, policy_schema, schema_text

ROOT = Path(__file__).resolve().parents[2]
DOCS_COPY = ROOT / "docs" / "policy.schema.json"


def test_shipped_copies_are_what_the_models_generate() -> None:
    """Regenerate with ``python -m agent_failover.config.schema config/policy.schema.json
    docs/policy.schema.json`` after changing a policy model."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text()
    assert DOCS_COPY.read_text(encoding="utf-8") == schema_text()


def test_shipped_policies_validate_and_a_typo_does_not() -> None:
    schema = policy_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for policy in (DEFAULT_POLICY_PATH, CONFIG_DIR / "policy.example.yaml"):
        assert list(validator.iter_errors(yaml.safe_load(policy.read_text()))) == []
    typo = yaml.safe_load(DEFAULT_POLICY_PATH.read_text().replace("ttft_budget_ms", "ttft_ms", 1))
    [error] = list(validator.iter_errors(typo))
    assert "'ttft_ms' was unexpected" in error.message
    assert list(error.absolute_path)[:1] == ["roles"]


def test_computed_and_lock_file_fields_are_not_in_the_file() -> None:
    schema = policy_schema()
    assert "warnings" not in schema["properties"]
    role = schema["$defs"]["RolePolicy"]
    assert "qualification" not in role["properties"] and "name" not in role["required"]
    assert "name" not in schema["$defs"]["EndpointConfig"]["required"]


def test_failover_config_schema_prints_it() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agent_failover.cli.main", "config", "schema"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == policy_schema()
