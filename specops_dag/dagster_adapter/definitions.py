"""The code location's definitions, built from `workflow_defs/` (built-in plus the harness root's
own, or one delivery's snapshot): the node assets, one job per workflow, the `approve_gate` job,
the schedule, the sensor, the resource and the executor, each made in its own module.

It assembles only: every decision is made by `execution.step.run_step` and the state store.
"""

import contextlib
import gc
import os
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from specops_dag.dagster_adapter.assets import node_asset
from specops_dag.dagster_adapter.automation import approval_sensor, nightly_schedule
from specops_dag.dagster_adapter.executor import executor
from specops_dag.dagster_adapter.instance import job_name
from specops_dag.dagster_adapter.jobs import approve_gate_job
from specops_dag.dagster_adapter.resources import resource_from_env
from specops_dag.errors import SpecopsError
from specops_dag.workflow.catalog import Catalog, definition_roots, load_catalog

# The state store, the step executor and what they import (pydantic state models, codex, .NET
# validation, review) are imported where a step, schedule, sensor or gate runs, not at load: the
# code server, daemon and webserver load this package without running any of them. The
# multiprocess executor's forkserver preloads them for the steps (`dagster_adapter.forkserver`).


@contextlib.contextmanager
def long_lived_build() -> Iterator[None]:
    """For the code location's own `defs`, which live as long as the process: building hundreds
    of assets allocates hundreds of thousands of objects, and Python's cyclic collector would
    re-scan the growing heap many times meanwhile and again while Dagster resolves it (~25% of
    the load at 500 nodes). Pause it during the build, then freeze what was built so later
    collections skip it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


# Set by `specops run` for its `dagster job execute`: the run's code is the delivery's frozen
# snapshot (`phases/<d>/snapshot/`), so a definition changed, broken or deleted since
# `specops new` is drift in `status`, never a failed or silently different run.
SNAPSHOT_OF = "SPECOPS_SNAPSHOT_OF"


def build_definitions(root: Path, delivery: str | None = None) -> dg.Definitions:
    """The location's definitions: the current ones, or the delivery's snapshot only."""
    if delivery:
        snapshot = root / "phases" / delivery / "snapshot"
        if not snapshot.is_dir():
            raise SpecopsError(f"{snapshot}: delivery `{delivery}` has no snapshot folder; "
                               f"`specops status {delivery}` tells what is wrong with it")
        catalog = load_catalog([snapshot], display_base=root)
    else:
        catalog = load_catalog(definition_roots(root), display_base=root)
    assets, jobs = [], []
    reviews = recorded_reviews(root, delivery, catalog) if delivery else None
    for wf in catalog.workflows.values():
        wf_assets = [node_asset(catalog, wf, node, reviews) for node in wf.nodes]
        assets += wf_assets
        jobs.append(dg.define_asset_job(job_name(wf.id), selection=dg.AssetSelection.assets(
            *wf_assets), description=wf.description or None))
    return dg.Definitions(
        assets=assets, jobs=[*jobs, approve_gate_job],
        schedules=[nightly_schedule(catalog)], sensors=[approval_sensor(catalog)],
        resources={"specops": resource_from_env(root)}, executor=executor)


def recorded_reviews(root: Path, delivery: str, catalog: Catalog) -> dict[str, str] | None:
    """The evaluators the delivery recorded by node, read only when a review of its snapshot
    chooses one by platform (otherwise the definition says which)."""
    if not any(n.review and n.review.platforms for wf in catalog.workflows.values()
               for n in wf.nodes):
        return None
    from specops_dag.delivery.store import Store

    return Store(root).read(delivery).snapshot.reviews


def harness_root() -> Path:
    return Path(os.environ.get("SPECOPS_ROOT") or os.getcwd()).resolve()


with long_lived_build():
    defs = build_definitions(harness_root(), os.environ.get(SNAPSHOT_OF) or None)

__all__ = ["defs", "build_definitions"]
