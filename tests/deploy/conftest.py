"""Fixtures for the deployment tier: Redis (real or embedded)."""

from tests.stores.conftest import redis_url  # noqa: F401  (fixture)
