"""Policy versions by content hash: what a workflow's history names, kept where replay finds it.

A role context in history carries only the ``policy_ref`` of the policy subset its call was
planned with (:func:`activities.models.policy_ref`: a hash of the subset's JSON). Every
worker writes the subsets it serves here at start (and any new one, e.g. a per-call roster,
when first used), and loads every stored version into its process, so a run replayed on a
worker whose policy has changed since (edited mid-run, worker restarted) still decodes the
version its history names. A ref names exactly one content, so ``put`` is idempotent and
any worker may read any version.

Three implementations, one contract suite (``tests/stores/test_policies_contract.py``):

* :class:`MemoryPolicyStore`: one process (tests);
* :class:`DirectoryPolicyStore`: ``<dir>/<ref>.json`` files, so a single-machine worker's
  versions survive restarts (``FAILOVER_POLICY_DIR``, default
  ``~/.local/state/agent-failover/policies``);
* :class:`~stores.redis_policies.RedisPolicyStore`: shared by every worker of a
  deployment, each version with a long TTL refreshed by every worker that serves it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

#: ``policy_ref`` characters: the first 16 hex digits of a SHA-256.
REF_PATTERN = re.compile(r"^[0-9a-f]{16}$")
#: How long a stored version lives without a worker serving it (Redis; 30 days).
DEFAULT_POLICY_TTL_S = 30 * 86_400.0


def content_ref(body: str) -> str:
    """The ref of a policy subset's JSON body (its content address)."""
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def check_version(ref: str, body: str) -> None:
    """Raise ``ValueError`` unless ``ref`` is a well-formed ref and names ``body``."""
    if not REF_PATTERN.match(ref):
        raise ValueError(f"policy ref {ref!r} is not 16 lowercase hex digits")
    if content_ref(body) != ref:
        raise ValueError(f"policy version {ref}: content hashes to {content_ref(body)}")


@runtime_checkable
class PolicyVersionStore(Protocol):
    """Content-addressed policy subsets (``ref`` -> JSON body). Safe for concurrent use."""

    #: Where the versions are, for error messages (e.g. ``directory /var/lib/...``).
    where: str

    async def put(self, ref: str, body: str) -> None:
        """Store ``body`` under ``ref`` (its content hash), or refresh its lifetime."""
        ...

    async def get(self, ref: str) -> str | None:
        """The body stored under ``ref``, or None."""
        ...

    async def all(self) -> dict[str, str]:
        """Every stored version (``ref`` -> body)."""
        ...

    async def close(self) -> None:
        """Release connections (a no-op for memory and directory stores)."""
        ...


class MemoryPolicyStore:
    """Versions in a dict: one process, gone with it."""

    where = "memory (this process only)"

    def __init__(self, versions: Mapping[str, str] | None = None) -> None:
        self._versions: dict[str, str] = dict(versions or {})

    async def put(self, ref: str, body: str) -> None:
        check_version(ref, body)
        self._versions[ref] = body

    async def get(self, ref: str) -> str | None:
        return self._versions.get(ref)

    async def all(self) -> dict[str, str]:
        return dict(self._versions)

    async def close(self) -> None:
        return None


def default_policy_dir(env: Mapping[str, str] | None = None) -> Path:
    """``FAILOVER_POLICY_DIR``, else ``$XDG_STATE_HOME/agent-failover/policies``
    (``~/.local/state/agent-failover/policies``)."""
    env = os.environ if env is None else env
    explicit = env.get("FAILOVER_POLICY_DIR", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    state = env.get("XDG_STATE_HOME", "").strip() or str(Path.home() / ".local" / "state")
    return Path(state) / "agent-failover" / "policies"


class DirectoryPolicyStore:
    """One ``<ref>.json`` file per version; files are written atomically and never changed."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.where = f"directory {self.path}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DirectoryPolicyStore:
        """The store at :func:`default_policy_dir`."""
        return cls(default_policy_dir(env))

    async def put(self, ref: str, body: str) -> None:
        check_version(ref, body)
        await asyncio.to_thread(self._write, ref, body)

    async def get(self, ref: str) -> str | None:
        if not REF_PATTERN.match(ref):
            return None
        return await asyncio.to_thread(self._read, ref)

    async def all(self) -> dict[str, str]:
        return await asyncio.to_thread(self._read_all)

    def _write(self, ref: str, body: str) -> None:
        target = self.path / f"{ref}.json"
        if target.exists():  # content addressed: an existing file already holds this body
            return
        self.path.mkdir(parents=True, exist_ok=True)
        # Write then rename: a reader (another worker on this host) never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{ref}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(body)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _read(self, ref: str) -> str | None:
        try:
            return (self.path / f"{ref}.json").read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def _read_all(self) -> dict[str, str]:
        if not self.path.is_dir():
            return {}
        return {
            f.stem: f.read_text(encoding="utf-8")
            for f in sorted(self.path.glob("*.json"))
            if REF_PATTERN.match(f.stem)
        }

    async def close(self) -> None:
        return None
