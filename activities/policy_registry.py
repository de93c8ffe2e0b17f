"""This process's policy versions by ref: what a role context in history decodes against.

A role context names its policy subset by ``policy_ref`` only (a content hash,
:func:`policy_ref`). :data:`POLICY_REGISTRY` holds the subsets this worker built, those
loaded from the policy store (:mod:`activities.policy_versions`) at start or fetched after
a decode missed them; content addressed (a ref names one subset), so sharing it across runs
and workers is safe. It is the one process-global of the activities, with a
public :meth:`PolicyRegistry.reset` for tests that need a fresh worker's view.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agent_failover.resilience.config import PolicyConfig


class PolicyVersionMissing(LookupError):
    """A history names a policy version this worker does not have.

    Not a ``ValueError`` on purpose: pydantic passes it through unwrapped, and Temporal turns
    it into a workflow-task failure (the task is retried, the run is kept) on a worker with
    the default ``workflow_failure_exception_types``.
    """


def policy_body(policy: PolicyConfig) -> str:
    """A policy subset as it is stored and hashed (defaults left out)."""
    return policy.model_dump_json(exclude_defaults=True)


def policy_ref(policy: PolicyConfig) -> str:
    """Content hash of a policy subset as it travels (defaults left out)."""
    return hashlib.sha256(policy_body(policy).encode()).hexdigest()[:16]


class PolicyRegistry:
    """Policies by ref, the refs a decode missed, and the stores versions come from."""

    def __init__(self) -> None:
        self._by_ref: dict[str, PolicyConfig] = {}
        #: Refs a decode looked for and did not find (fetched from the store in the background).
        self.missing: set[str] = set()
        #: Where this process's policy versions come from (for the missing-version error).
        self.stores: list[str] = []

    def register(self, ref: str, policy: PolicyConfig) -> None:
        """Make ``policy`` (whose ref is ``ref``) decodable in this process."""
        self._by_ref.setdefault(ref, policy)
        self.missing.discard(ref)

    def get(self, ref: str) -> PolicyConfig | None:
        """The policy registered under ``ref``, else None."""
        return self._by_ref.get(ref)

    def __getitem__(self, ref: str) -> PolicyConfig:
        return self._by_ref[ref]

    def __contains__(self, ref: object) -> bool:
        return ref in self._by_ref

    def add_store(self, where: str) -> None:
        """Note a policy store this process loads versions from (named in decode errors)."""
        if where not in self.stores:
            self.stores.append(where)

    def reset(self) -> None:
        """Forget everything, as in a fresh process (tests: a worker whose store is empty)."""
        self._by_ref.clear()
        self.missing.clear()
        self.stores.clear()

    def lookup(self, ref: str, role: Any) -> PolicyConfig:
        """The policy under ``ref``; else note it missing and raise what to do about it."""
        known = self._by_ref.get(ref)
        if known is not None:
            return known
        self.missing.add(ref)
        where = "; ".join(self.stores) or "none configured in this process"
        raise PolicyVersionMissing(
            f"policy version {ref} (role {role!r}) named by this run's history is not known "
            f"to this worker: not in its policy store ({where}) nor built from its current "
            "policy. The workflow task is retried and the run resumes once the version is "
            f"found: restore it (the file {ref}.json in FAILOVER_POLICY_DIR, or the Redis key "
            f"<namespace>:policy:{ref}), or point this worker at the policy store the worker "
            "that started the run used (the same REDIS_URL and FAILOVER_REDIS_NAMESPACE, or "
            "FAILOVER_POLICY_DIR)."
        )


#: The registry of this process (see the module docstring).
POLICY_REGISTRY = PolicyRegistry()
