"""Workflow patch ids, in one place, each named by the behaviour it guards.

A workflow change that would make a running workflow's history non-deterministic is
guarded with ``workflow.patched(PATCH_ID)``: histories recorded before the change take
the old path, new runs the new one. Every id lives here with a one-line reason, so a
reader sees at once which behaviours still carry an old path and can drop a patch (after
``workflow.deprecate_patch``) once no run recorded before it can still be replayed.

Before the first release there are none: pre-release histories were re-recorded from the
current code (``python -m tests.workflows.record_histories --force``). Add new ids to
``PATCHES`` with their reason; ``tests/workflows/test_replay.py`` checks that every id the
workflow code uses is listed here.
"""

from __future__ import annotations

#: Patch id -> why the old path still exists (the behaviour that changed).
PATCHES: dict[str, str] = {}
