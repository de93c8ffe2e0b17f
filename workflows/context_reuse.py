"""Role contexts a workflow run reuses: a call plans from one a call of the same role took
less than ``context_reuse_s`` ago instead of running the ``role_context`` local activity.

The context (the role's policy subset by ref and its routes' health snapshot) is a local
activity's result, so it is an input recorded in history: reusing it within a run is as
deterministic as reading it, and saves the local activity, its marker in history and the
store reads behind it on the role's next calls (an agent loop's tool rounds, a user's loop
of calls). Entries are kept on the workflow instance (so continue-as-new, a new instance,
starts empty; a replay rebuilds them from history), keyed by role and the call's roster
override, and hold the context as the activity returned it: each call applies its own
options on top, so one call's overrides never reach another. Age is workflow time
(``workflow.now()``) since the call that read the context started.

A failed attempt drops every entry whose policy names its route (:func:`forget_route`): a
later call plans from a snapshot taken after the failure, not from one that predates it.
Runs recorded before reuse read a context per call (patch ``ROLE_CONTEXT_REUSE``, asked
only when an entry is fresh).

The run also remembers which roles hedge (:func:`hedging_known`: a kept context of the
role, however old, or the pipeline's roles): their first attempt is the workflow's to run,
so a call of such a role reads its context with the local activity instead of sending it
to ``first_call`` for nothing (one workflow task fewer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.first_attempt import plans_hedge
    from agent_failover.workflows.patches import ROLE_CONTEXT_REUSE

if TYPE_CHECKING:
    from agent_failover.activities.models import RoleContext
    from agent_failover.resilience.options import CallOptions

#: The workflow instance's attribute holding its run's contexts.
_CONTEXTS = "_agent_failover_role_contexts"

#: (role, the roster override's routes or None).
Key = tuple[str, tuple[str, ...] | None]


@dataclass(frozen=True)
class Taken:
    """A role context as its local activity returned it, and when (epoch seconds of
    workflow time) the call that read it started."""

    ctx: RoleContext
    at: float


class ContextCache:
    """One run's role contexts by key (pure: the caller passes ``now``)."""

    def __init__(self) -> None:
        self._by_key: dict[Key, Taken] = {}
        #: Roles the run learnt hedge before reading their context (the pipeline's roles).
        self.hedging: set[str] = set()

    def fresh(self, key: Key, now: float, reuse_s: float | None) -> RoleContext | None:
        """The context kept under ``key`` if taken less than its reuse age ago: ``reuse_s``
        (the call's option) or, None, the kept role's ``context_reuse_s``; else None."""
        taken = self._by_key.get(key)
        if taken is None:
            return None
        age = taken.ctx.role.context_reuse_s if reuse_s is None else reuse_s
        return taken.ctx if 0 <= now - taken.at < age else None

    def keep(self, key: Key, ctx: RoleContext, at: float) -> None:
        """Keep ``ctx``, read by a call that started at ``at``, under ``key``."""
        self._by_key[key] = Taken(ctx, at)

    def known(self, key: Key) -> RoleContext | None:
        """The context last kept under ``key``, however old (None: none kept)."""
        taken = self._by_key.get(key)
        return taken.ctx if taken is not None else None

    def forget_route(self, route: str) -> None:
        """Drop every context whose policy names ``route`` (an attempt on it failed)."""
        for key in [k for k, t in self._by_key.items() if route in t.ctx.policy.endpoints]:
            del self._by_key[key]

    def __len__(self) -> int:
        return len(self._by_key)


def key_for(role: str, routes: list[str] | None) -> Key:
    """The cache key of a call of ``role`` with the roster override's ``routes``."""
    return role, tuple(routes) if routes else None


def run_cache() -> ContextCache | None:
    """This run's cache, created on first use; None when the workflow instance cannot hold
    one (a class with ``__slots__``): every call then reads its own context."""
    instance = workflow.instance()
    cache = getattr(instance, _CONTEXTS, None)
    if cache is None:
        cache = ContextCache()
        try:
            setattr(instance, _CONTEXTS, cache)
        except AttributeError:
            return None
    return cache


def reusable(key: Key, options: CallOptions | None) -> RoleContext | None:
    """A context this run took for ``key`` recently enough for this call, or None (none
    fresh, reuse off, or a run recorded before reuse)."""
    cache = run_cache()
    if cache is None:
        return None
    reuse_s = options.context_reuse_s if options is not None else None
    ctx = cache.fresh(key, workflow.now().timestamp(), reuse_s)
    if ctx is None or not workflow.patched(ROLE_CONTEXT_REUSE):
        return None
    return ctx


def keep(key: Key, ctx: RoleContext, at: float) -> None:
    """Keep ``ctx`` (before the call's options) for the run's next calls of its role."""
    cache = run_cache()
    if cache is not None:
        cache.keep(key, ctx, at)


def forget_route(route: str) -> None:
    """Drop this run's contexts naming ``route``: an attempt on it just failed."""
    cache = run_cache()
    if cache is not None:
        cache.forget_route(route)


def note_hedging(roles: list[str]) -> None:
    """Remember that ``roles`` hedge (a recorded input: the pipeline's roles), so their
    calls read the role context with the local activity, not in their first attempt's."""
    cache = run_cache()
    if cache is not None:
        cache.hedging |= set(roles)


def hedging_known(key: Key) -> bool:
    """Whether this run already knows the role behind ``key`` hedges: noted by the
    pipeline, or said by a context of it the run kept (however old)."""
    cache = run_cache()
    if cache is None:
        return False
    if key[0] in cache.hedging:
        return True
    kept = cache.known(key)
    return kept is not None and plans_hedge(kept.role)
