"""Deterministic orchestration: the resilient call, the agent pipeline, the health monitor.

Workflow code here never does IO, reads the wall clock or draws randomness; it asks
activities for facts and :mod:`resilience` for decisions.
"""
