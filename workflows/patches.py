"""Workflow patch ids, in one place, each named by the behaviour it guards.

A workflow change that would make a running workflow's history non-deterministic is
guarded with ``workflow.patched(PATCH_ID)``: histories recorded before the change take
the old path, new runs the new one. Every id lives here with a one-line reason, so a
reader sees at once which behaviours still carry an old path and can drop a patch (after
``workflow.deprecate_patch``) once no run recorded before it can still be replayed.

Pre-release histories were re-recorded from the current code (``python -m
tests.workflows.record_histories --force``); changes since then keep the recorded
histories replaying behind an id here. Add new ids to ``PATCHES`` with their reason;
``tests/workflows/test_patches_replay.py`` checks that every id the workflow code uses is
listed here.
"""

from __future__ import annotations

#: Not a code change: the marker a run records when it skips its search-attribute upserts
#: because its namespace lacks the attributes, so that replay skips them too.
SEARCH_ATTRIBUTES_MISSING = "search-attributes-missing"

#: Each live tier keeps one attempt (the role's live-tier floor) once the budget is spent.
LIVE_TIER_FLOOR = "live-tier-floor"
#: A 400 (invalid_request) stops the live tiers only once a second wire rejected it.
INVALID_REQUEST_PER_WIRE = "invalid-request-per-wire"
#: A critical step answered from the response cache (every model tier down) escalates,
#: however confident the cached answer; before, only one below ``min_confidence`` did.
ESCALATE_CACHED_ANSWER = "escalate-cached-answer"
#: A call waits out a short Retry-After another request (e.g. a probe) met on a route,
#: instead of skipping the route (issue 22 §1.7): a timer before the attempt.
WAIT_OUT_SHARED_COOLDOWN = "wait-out-shared-cooldown"
#: A call plans from the role context a call of the same role took less than
#: ``context_reuse_s`` ago in the run, instead of running the role-context local activity.
ROLE_CONTEXT_REUSE = "role-context-reuse"
#: A call with no context to reuse reads it in its first attempt's activity
#: (``first_call``), which runs a plain first attempt at once, instead of a local activity.
PLAN_IN_FIRST_ATTEMPT = "plan-in-first-attempt"

#: Patch id -> why the old path still exists (the behaviour that changed).
PATCHES: dict[str, str] = {
    SEARCH_ATTRIBUTES_MISSING: (
        "a recorded decision, never deprecated: the run found its namespace without the "
        "failover search attributes and skips its upserts (replay reads the marker)"
    ),
    LIVE_TIER_FLOOR: (
        "before it, a call whose budget was spent (a worker lost mid-call) went to the "
        "cache and the static fallback without trying its other live tiers"
    ),
    INVALID_REQUEST_PER_WIRE: (
        "before it, one route's 400 (invalid_request) stopped every live tier; now the "
        "call moves to another wire and stops when a second wire rejects the request"
    ),
    ESCALATE_CACHED_ANSWER: (
        "runs recorded before a critical step answered from the cache escalated: there it "
        "went on with the cached answer when its confidence was at least min_confidence"
    ),
    WAIT_OUT_SHARED_COOLDOWN: (
        "runs recorded before skipped every route another request's 429 cooled down; "
        "new runs wait out a short one (a timer, then the attempt on that route)"
    ),
    ROLE_CONTEXT_REUSE: (
        "runs recorded before ran the role-context local activity on every call; new runs "
        "reuse a context the same role's call took less than context_reuse_s ago"
    ),
    PLAN_IN_FIRST_ATTEMPT: (
        "runs recorded before read each call's role context with a local activity before "
        "scheduling its first attempt; new runs read it in that attempt's activity"
    ),
}
