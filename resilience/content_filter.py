"""What a content-filter refusal does: the policy's ``content_filter`` and its per-call override.

A leaf module (no imports of ours) so that :mod:`resilience.options`, which workflow files
import, need not load the policy's model graph (:mod:`resilience.config`) for one enum.
"""

from __future__ import annotations

from enum import StrEnum


class ContentFilterMode(StrEnum):
    """What a content-filter refusal does (policy ``content_filter``, per-call override)."""

    #: Return the refusal to the caller as a typed answer (reason ``CONTENT_FILTERED``).
    REFUSE = "refuse"
    #: Try a different model (never the same model in another region).
    FAILOVER = "failover"
