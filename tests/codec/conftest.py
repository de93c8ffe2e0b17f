"""Fixtures for the codec tier: the shipped policy's path, Redis, codecs and encrypting
clients on the session's dev server."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agent_failover.codec import AesGcmCodec, failover_data_converter, generate_key
from agent_failover.config import DEFAULT_POLICY_PATH
from tests.stores.conftest import redis_url  # noqa: F401  (fixture)

#: Two keys: "k1" (the old one) and "k2" (the new one), fixed for the session.
KEYS = {"k1": base64.b64decode(generate_key()), "k2": base64.b64decode(generate_key())}


@pytest.fixture
def policy_path() -> Path:
    return Path(DEFAULT_POLICY_PATH)


def codec_with(*key_ids: str, active: str | None = None) -> AesGcmCodec:
    """A codec holding the named session keys (active: the last one unless given)."""
    return AesGcmCodec({k: KEYS[k] for k in key_ids}, active or key_ids[-1])


def encrypting_client(env: WorkflowEnvironment, codec: AesGcmCodec) -> Client:
    """A client of the dev server whose payloads go through ``codec``."""
    return Client(
        env.client.service_client,
        namespace=env.client.namespace,
        data_converter=failover_data_converter(codec),
    )
