"""This project's own settings (a package named ``config``, as many Temporal projects have).

It lives beside agent-failover without clashing: agent-failover installs one import name,
``agent_failover``, and nothing else at top level.
"""

import os
from pathlib import Path

TASK_QUEUE = os.environ.get("TRIAGE_TASK_QUEUE", "support-triage")
POLICY_PATH = Path(__file__).with_name("policy.yaml")
