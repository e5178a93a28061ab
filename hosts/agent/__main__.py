"""``python -m hosts.agent``: the agent process (hosts.agent.process.main)."""

import sys

from hosts.agent.process import main

sys.exit(main())
