"""Shipped configuration: ``policy.yaml`` for the simulator demo, an example for real providers."""

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent
DEFAULT_POLICY_PATH = CONFIG_DIR / "policy.yaml"
DEFAULT_SIM_CONFIG_PATH = CONFIG_DIR / "sim.yaml"
