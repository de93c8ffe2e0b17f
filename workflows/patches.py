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

#: A critical step answered from the response cache (every model tier down) escalates,
#: however confident the cached answer; before, only one below ``min_confidence`` did.
ESCALATE_CACHED_ANSWER = "escalate-cached-answer"

#: Patch id -> why the old path still exists (the behaviour that changed).
PATCHES: dict[str, str] = {
    SEARCH_ATTRIBUTES_MISSING: (
        "a recorded decision, never deprecated: the run found its namespace without the "
        "failover search attributes and skips its upserts (replay reads the marker)"
    ),
    ESCALATE_CACHED_ANSWER: (
        "runs recorded before a critical step answered from the cache escalated: there it "
        "went on with the cached answer when its confidence was at least min_confidence"
    ),
}
