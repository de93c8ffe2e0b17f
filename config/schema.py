"""The JSON Schema of a policy file, generated from the pydantic models.

Editors complete and check a policy with it (``# yaml-language-server: $schema=...`` at the
top of the YAML, or the editor's schema mapping). It describes the file as written: the
names of endpoints and roles come from their keys (so ``name`` is optional), and what
validation computes (``warnings``) or reads from the lock file (a role's
``qualification``) is not accepted. The copy shipped in the package
(``agent_failover/config/policy.schema.json``) and the one in the manual
(``docs/policy.schema.json``) are written by ``python -m agent_failover.config.schema``;
a test keeps both equal to what the models generate. ``failover config schema`` prints it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agent_failover.config import CONFIG_DIR
from agent_failover.resilience.config import PolicyConfig

SCHEMA_PATH = CONFIG_DIR / "policy.schema.json"
SCHEMA_ID = "https://agent-failover.dev/policy.schema.json"
#: Model -> fields a policy file may not set (computed, or read from elsewhere).
_NOT_IN_FILE = {"PolicyConfig": ("warnings",), "RolePolicy": ("qualification",)}
#: Models whose ``name`` is their key in a map, injected when the file is read.
_NAMED_BY_KEY = ("RolePolicy", "EndpointConfig")


def _drop(schema: dict[str, Any], fields: tuple[str, ...]) -> None:
    for field in fields:
        schema.get("properties", {}).pop(field, None)
        if field in schema.get("required", []):
            schema["required"].remove(field)


def policy_schema() -> dict[str, Any]:
    """The policy file's JSON Schema (draft 2020-12), as a dict."""
    schema = PolicyConfig.model_json_schema(mode="validation")
    defs = schema.get("$defs", {})
    _drop(schema, _NOT_IN_FILE["PolicyConfig"])
    _drop(defs.get("RolePolicy", {}), _NOT_IN_FILE["RolePolicy"])
    for model in _NAMED_BY_KEY:
        required = defs.get(model, {}).get("required", [])
        if "name" in required:
            required.remove("name")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
        "title": "agent-failover policy",
    }


def schema_text() -> str:
    """The schema as the shipped files hold it (sorted keys, two-space indent)."""
    return json.dumps(policy_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> None:
    """``python -m agent_failover.config.schema [FILE ...]``: write the schema to each
    FILE (default: the package's copy); ``-`` prints it."""
    targets = (sys.argv[1:] if argv is None else argv) or [str(SCHEMA_PATH)]
    text = schema_text()
    for target in targets:
        if target == "-":
            sys.stdout.write(text)
        else:
            Path(target).write_text(text, encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    main()
