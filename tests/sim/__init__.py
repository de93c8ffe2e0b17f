"""Tests of the provider simulator (``sim/``): wire formats, faults, admin API, SDK fidelity."""
