"""The code location the Kubernetes deployment serves (`dagster api grpc --python-file
/opt/specops/deploy/k8s/definitions.py`, deploy/helm/values.yaml): specops_dag's own definitions
with dagster-k8s's `k8s_job_executor` as their default executor, so each step runs as a
Kubernetes Job. It builds nothing of its own; `specops_dag.definitions` (and `specops run`)
keep the warm multiprocess executor."""

import os
from pathlib import Path

import dagster as dg
from dagster_k8s import k8s_job_executor
from dagster_shared.record import copy

from specops_dag.dagster_adapter.definitions import (
    SNAPSHOT_OF,
    build_definitions,
    harness_root,
    long_lived_build,
)


def k8s_definitions(root: Path, delivery: str | None = None) -> dg.Definitions:
    """The location's definitions with `k8s_job_executor` instead of the warm multiprocess one.
    Every job takes the Definitions' executor (none sets its own), so this switches them all."""
    return copy(build_definitions(root, delivery), executor=k8s_job_executor)


with long_lived_build():
    defs = k8s_definitions(harness_root(), os.environ.get(SNAPSHOT_OF) or None)
