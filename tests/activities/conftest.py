"""Fixtures shared with the store tests: a real Redis (or an embedded one) and a key namespace."""

from tests.stores.conftest import namespace, redis_url  # noqa: F401  (fixtures re-exported)
