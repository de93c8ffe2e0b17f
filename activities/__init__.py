"""Temporal activities: every piece of IO a workflow needs (model calls, health, cache, probes).

Activities are methods on classes that receive their dependencies (HTTP client, stores,
policy) at construction, so tests inject fakes instead of patching globals.
"""
