"""Benchmarks (`make bench`, docs/benchmarks.md): each prints ratios measured side by side in one
run; none is a test."""

from __future__ import annotations

import compileall
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "specops_dag"


def compile_package() -> None:
    """Write specops_dag's bytecode first, as installing a wheel does. Under an editable install
    with PYTHONDONTWRITEBYTECODE set, every timed process would otherwise compile our modules
    from source while Dagster's and pydantic's bytecode was written at install time."""
    compileall.compile_dir(str(PACKAGE), quiet=1)
