"""Pure failover policy: config models, rolling windows, circuit breakers, the planner.

Nothing here does IO, touches Temporal or reads a clock: every function that needs the
time takes ``now`` (epoch seconds, float). Workflows call these functions with values
they got from activities, so replay stays deterministic; stores persist their values.
"""
