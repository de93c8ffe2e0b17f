"""The health report every store gives about its own backend.

A store that lost Redis keeps serving from a local in-memory view; :class:`StoreStatus`
is how it tells the worker, the CLI and the health snapshot that it is doing so, since
when, why, and how much local state still waits to be written back.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class StoreStatus(BaseModel):
    """Backend health of one store at the moment it was asked."""

    backend: str = Field(description="'memory', or 'redis' with its address")
    namespace: str | None = Field(
        default=None, description="the prefix of the store's Redis keys (None: in memory)"
    )
    healthy: bool = Field(description="False while the store serves from a local fallback view")
    degraded_since: float | None = Field(
        default=None, description="epoch seconds when the backend was first found unreachable"
    )
    last_error: str | None = Field(default=None, description="the error that caused degradation")
    pending_sync: int = Field(default=0, ge=0, description="local writes waiting to be replayed")
    dropped_sync: int = Field(
        default=0, ge=0, description="local writes discarded because the replay buffer was full"
    )
