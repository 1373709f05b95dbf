"""Only for `test_quick.py` (being deleted), which still imports `agentic_root` from here: the
helpers now live in `tests/support/agents.py`. Remove this file with `test_quick.py`."""

from .support.agents import agentic_root

__all__ = ["agentic_root"]
