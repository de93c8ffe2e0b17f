"""Health store and response cache: one contract each, a Redis and an in-memory implementation.

The stores persist what :mod:`resilience` decides; they hold no policy of their own.
"""
