"""Text that goes to an agent or a person about an attempt: for now the bounded failure summary
(seed 001 §6) that the next attempt receives. Pure functions, no I/O.
"""

from __future__ import annotations

FAILURE_LIMIT = 4000
FAILURE_HEAD = 1500
ELISION = "\n[... {n} characters elided ...]\n"


def failure_summary(text: str, limit: int = FAILURE_LIMIT, head: int = FAILURE_HEAD) -> str:
    """At most `limit` chars: the first `head`, an elision marker, then the last ≤ 2,500 chars;
    the marker counts inside the limit."""
    if len(text) <= limit:
        return text
    tail_room = limit - head
    # The marker names how much was cut, so its own length depends on that number; settle it.
    cut = len(text) - head - tail_room
    for _ in range(3):
        marker = ELISION.format(n=cut + len(ELISION.format(n=cut)))
        tail = tail_room - len(marker)
        cut = len(text) - head - tail
    marker = ELISION.format(n=cut)
    tail = limit - head - len(marker)
    return text[:head] + marker + text[len(text) - tail:]
