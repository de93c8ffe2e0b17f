"""The policy-version store contract, run against memory, a directory and real Redis.

Versions are content addressed: ``put`` rejects a body that does not hash to its ref, is
idempotent, and every stored version comes back from ``get`` and ``all``; the directory and
Redis stores keep them across store instances (a restarted worker), Redis with a TTL that
every ``put`` refreshes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_failover.activities.policy_registry import POLICY_REGISTRY, policy_body, policy_ref
from agent_failover.activities.policy_versions import PolicyPublisher, load_versions
from agent_failover.resilience.config import PolicyConfig
from agent_failover.stores.factory import env_seconds, policy_ttl_s
from agent_failover.stores.policies import (
    DirectoryPolicyStore,
    MemoryPolicyStore,
    PolicyVersionStore,
    content_ref,
    default_policy_dir,
)
from agent_failover.stores.redis_link import fail_fast_client
from agent_failover.stores.redis_policies import RedisPolicyStore
from tests.stores.conftest import _delete_namespace

BODY_A = '{"roles":{"a":{}}}'
BODY_B = '{"roles":{"b":{}}}'


def _open(kind: str, tmp_path: Path, redis_url: str, namespace: str) -> PolicyVersionStore:
    if kind == "memory":
        return MemoryPolicyStore()
    if kind == "directory":
        return DirectoryPolicyStore(tmp_path / "policies")
    return RedisPolicyStore(fail_fast_client(redis_url), namespace=namespace, ttl_s=3600)


@pytest.fixture(params=["memory", "directory", "redis"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, namespace: str
) -> AsyncIterator[PolicyVersionStore]:
    """The policy store under test, once per backend."""
    url = request.getfixturevalue("redis_url") if request.param == "redis" else ""
    s = _open(request.param, tmp_path, url, namespace)
    try:
        yield s
    finally:
        await s.close()
        if url:
            await _delete_namespace(url, namespace)


async def test_put_then_get_and_all(store: PolicyVersionStore) -> None:
    """A stored version reads back by its ref and in the full listing; others read None."""
    a, b = content_ref(BODY_A), content_ref(BODY_B)
    assert await store.all() == {}
    await store.put(a, BODY_A)
    await store.put(b, BODY_B)
    assert await store.get(a) == BODY_A
    assert await store.get("0" * 16) is None
    assert await store.all() == {a: BODY_A, b: BODY_B}


async def test_put_is_idempotent(store: PolicyVersionStore) -> None:
    a = content_ref(BODY_A)
    await store.put(a, BODY_A)
    await store.put(a, BODY_A)
    assert await store.all() == {a: BODY_A}


async def test_a_body_that_does_not_hash_to_its_ref_is_refused(store: PolicyVersionStore) -> None:
    """Content addressing: a ref names exactly one content, so a mismatch is a bug."""
    with pytest.raises(ValueError, match="hashes to"):
        await store.put(content_ref(BODY_A), BODY_B)
    with pytest.raises(ValueError, match="hex"):
        await store.put("not-a-ref", BODY_A)
    assert await store.all() == {}


async def test_directory_versions_outlive_the_store(tmp_path: Path) -> None:
    """A restarted worker on the same machine reads what the previous one wrote."""
    a = content_ref(BODY_A)
    await DirectoryPolicyStore(tmp_path).put(a, BODY_A)
    assert await DirectoryPolicyStore(tmp_path).all() == {a: BODY_A}
    assert [p.name for p in tmp_path.iterdir()] == [f"{a}.json"]  # noqa: ASYNC240 - no temp files


async def test_redis_versions_are_shared_and_their_ttl_refreshed(
    redis_url: str, namespace: str
) -> None:
    """Another worker's store sees the version; each put renews its TTL."""
    a = content_ref(BODY_A)
    first = RedisPolicyStore(fail_fast_client(redis_url), namespace=namespace, ttl_s=100)
    other = RedisPolicyStore(fail_fast_client(redis_url), namespace=namespace, ttl_s=5000)
    raw = fail_fast_client(redis_url)
    try:
        await first.put(a, BODY_A)
        assert 0 < await raw.pttl(f"{namespace}:policy:{a}") <= 100_000
        await other.put(a, BODY_A)
        assert await raw.pttl(f"{namespace}:policy:{a}") > 100_000
        assert await other.all() == {a: BODY_A}
        await raw.delete(f"{namespace}:policy:{a}")  # expired: pruned from the index
        assert await first.all() == {}
        assert await raw.smembers(f"{namespace}:policies") == set()
    finally:
        for c in (first, other):
            await c.close()
        await raw.aclose()
        await _delete_namespace(redis_url, namespace)


def test_the_default_directory_follows_the_environment(tmp_path: Path) -> None:
    assert default_policy_dir({"FAILOVER_POLICY_DIR": str(tmp_path)}) == tmp_path
    state = default_policy_dir({"XDG_STATE_HOME": "/srv/state"})
    assert state == Path("/srv/state/agent-failover/policies")
    assert default_policy_dir({}).parts[-4:] == (".local", "state", "agent-failover", "policies")


async def test_published_versions_load_into_a_fresh_process(
    policy: PolicyConfig, tmp_path: Path
) -> None:
    """What one worker publishes, a fresh one (empty registry) decodes by ref."""
    store = DirectoryPolicyStore(tmp_path)
    sub = policy.checked_subset_for("analyst")
    ref = policy_ref(sub)
    pub = PolicyPublisher()
    pub.bind(store)
    await pub.publish(ref, sub)
    assert await store.get(ref) == policy_body(sub)
    POLICY_REGISTRY.reset()
    assert await load_versions(store) == 1
    assert POLICY_REGISTRY[ref] == sub


def test_the_redis_ttl_comes_from_the_environment() -> None:
    assert policy_ttl_s({}) == 30 * 86_400
    assert policy_ttl_s({"FAILOVER_POLICY_TTL_S": "3600"}) == 3600.0
    for bad in ("0", "-5", "soon"):
        with pytest.raises(ValueError, match="FAILOVER_POLICY_TTL_S"):
            policy_ttl_s({"FAILOVER_POLICY_TTL_S": bad})


def test_env_seconds_bounds_and_message() -> None:
    """One parser for every seconds-valued variable: the range is inclusive unless
    ``low_open``, and the error names the variable, the range and the value."""
    assert env_seconds("X_S", 7.0, env={"X_S": "  "}) == 7.0
    assert env_seconds("X_S", 7.0, env={"X_S": "0"}) == 0.0
    assert env_seconds("X_S", 7.0, high=10, env={"X_S": "10"}) == 10.0
    for bad, kw in (("10.5", {"high": 10}), ("-1", {}), ("0", {"low_open": True}), ("nan", {})):
        with pytest.raises(ValueError, match=r"X_S: expected seconds .*got '"):
            env_seconds("X_S", 7.0, env={"X_S": bad}, **kw)
