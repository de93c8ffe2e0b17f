"""The example projects, shipped with the package so they run from an installed wheel.

Each example is a user's own Temporal project (its own ``workflows.py``, ``activities.py``,
``worker.py``, ``starter.py``, policy), kept as files rather than importable modules: it
imports its modules by their top-level names, as a user's project does. Copy one out and
run it from there::

    python -m agent_failover.examples                        # list them
    python -m agent_failover.examples support_triage ./triage
    cd triage && cat README.md
"""
