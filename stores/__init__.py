"""Health store and response cache: one contract each, a Redis and an in-memory implementation.

The stores persist what :mod:`resilience` decides; they hold no policy of their own.
:func:`stores.factory.connect_stores` builds the Redis-backed pair (starting an embedded
``redis-server`` when no Redis is reachable); the in-memory pair serves unit tests and is
the fallback view each Redis store switches to while Redis is unreachable.
"""
