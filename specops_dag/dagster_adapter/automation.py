"""What starts runs by itself: the `nightly` schedule and the `gate_approvals` sensor, each
requesting a run of a delivery's runnable steps and their downstream in the implicit asset job.
They only read the state store (imported when they tick); every step runs in the run requested."""

from typing import TYPE_CHECKING

import dagster as dg

from specops_dag.dagster_adapter.instance import PARTITIONS
from specops_dag.dagster_adapter.resources import SpecopsResource
from specops_dag.workflow.catalog import Catalog
from specops_dag.workflow.model import Workflow

if TYPE_CHECKING:
    from specops_dag.delivery.model import Delivery
    from specops_dag.delivery.store import Store

# Dagster's implicit asset job: every asset of the location, what the UI's "Materialize" launches.
# The nightly schedule targets it by name rather than declaring a second job over every node,
# which would cost as much to load as all the workflow jobs together (`target=AssetSelection
# .all()` makes one). A schedule has one target job and the UI hides this one (its Target row
# reads "None"): the description says what the schedule launches instead.
ASSET_JOB = "__ASSET_JOB"
NIGHTLY = ("Every night at 02:00 UTC, one run per delivery (partition) that has pending or "
           "interrupted nodes with no closed gate in front: those nodes and their downstream "
           "nodes, of the delivery's workflow, in Dagster's implicit asset job `__ASSET_JOB` "
           "(every workflow's nodes; the Target row shows it as None).")


def run_request(state: "Delivery", run_key: str) -> dg.RunRequest | None:
    """A run of the delivery's runnable steps and their downstream, or None if nothing can run."""
    from specops_dag.delivery.lifecycle import downstream_of
    from specops_dag.delivery.queries import runnable_steps

    ready = runnable_steps(state)
    if not ready:
        return None
    names = {n for r in ready for n in downstream_of(state, r)}
    keys = [dg.AssetKey([state.workflow, s.name]) for s in state.steps
            if s.name in names and s.status != "completed"]
    return dg.RunRequest(run_key=run_key, partition_key=state.phase, asset_selection=keys,
                         tags={"specops/delivery": state.phase})


def deliveries_of(instance: dg.DagsterInstance, store: "Store",
                  catalog: Catalog) -> "list[Delivery]":
    """Deliveries that are partitions of this instance and run a workflow of this location.
    A partition with no delivery is passed over, not deleted: `specops new` adds the partition
    before it writes the delivery, so a tick may see one being created (a run launched for a
    bogus partition removes it: `assets.require_delivery`)."""
    known = set(instance.get_dynamic_partitions(PARTITIONS))
    states = [store.read(e.id) for e in store.read_index().deliveries
              if e.id in known and e.workflow in catalog.workflows]
    return [s for s in states if same_graph(s, catalog.workflows[s.workflow])]


def same_graph(state: "Delivery", wf: Workflow) -> bool:
    """Whether this location's job can run the delivery's snapshot: the same nodes and needs.
    A delivery whose workflow changed since `specops new` runs only through `specops run`, which
    executes the snapshot itself."""
    return ({s.name: sorted(s.needs) for s in state.steps}
            == {n.id: sorted(n.needs) for n in wf.nodes})


def nightly_schedule(catalog: Catalog) -> dg.ScheduleDefinition:
    @dg.schedule(name="nightly", cron_schedule="0 2 * * *", job_name=ASSET_JOB,
                 execution_timezone="UTC", description=NIGHTLY)
    def nightly(context: dg.ScheduleEvaluationContext, specops: SpecopsResource):
        """One run per delivery with pending or interrupted steps and no closed gate in front."""
        day = context.scheduled_execution_time.strftime("%Y-%m-%d")
        for state in deliveries_of(context.instance, specops.store(), catalog):
            request = run_request(state, f"{state.phase}:{day}")
            if request is not None:
                yield request

    return nightly


def approval_sensor(catalog: Catalog) -> dg.SensorDefinition:
    # An asset selection, not a job: Dagster runs each request's assets in the implicit asset job.
    @dg.sensor(name="gate_approvals", asset_selection=dg.AssetSelection.all(),
               minimum_interval_seconds=30,
               default_status=dg.DefaultSensorStatus.RUNNING)
    def gate_approvals(context: dg.SensorEvaluationContext, specops: SpecopsResource):
        """When an approval lands, launch the delivery's next nodes (once per approval)."""
        for state in deliveries_of(context.instance, specops.store(), catalog):
            approved = [a for a in state.approvals if a.decision == "approved"]
            if approved:
                last = approved[-1]
                request = run_request(state, f"{state.phase}:{last.gate}:{last.at}")
                if request is not None:
                    yield request

    return gate_approvals
