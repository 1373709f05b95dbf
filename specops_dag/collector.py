"""How specops tunes CPython's cyclic garbage collector, in the two kinds of process it runs its
own code in: the `specops` console script and the process that runs a delivery's steps (Dagster's
run worker, or a multiprocess step worker). Standard library only.

Importing pydantic and Dagster makes hundreds of thousands of long-lived objects, and a step
parses, validates and writes a delivery state of thousands more (three times per step, one of
them rendered whole). With CPython's default thresholds (700, 10, 10) the collector walks the
young generations after every few thousand allocations and the whole heap every few steps,
almost none of it freeing anything. A higher first threshold (as mypy sets it) keeps collection
on — a long run still collects its cycles; no behaviour changes."""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 20)  # CPython's defaults are (700, 10, 10)


def tune() -> None:
    """Set the thresholds (idempotent: a step worker calls it at every step)."""
    if gc.get_threshold() != THRESHOLDS:
        gc.set_threshold(*THRESHOLDS)
