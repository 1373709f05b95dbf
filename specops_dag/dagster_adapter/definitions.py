"""The Dagster front-end: builds `Definitions` from `workflow_defs/` (built-in plus the harness
root's own). One asset per node, key `[workflow, node]`, deps from `needs`, one dynamic partition
per delivery, `validation` / `handoff_current` / `review` checks, one job per workflow, the
`nightly` schedule, the `approve_gate` job and the `gate_approvals` sensor.

It translates only: every decision is made by `execution.step.run_step` and the state store.
"""

import contextlib
import gc
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import dagster as dg

from specops_dag.agent.codex import AgentSettings
from specops_dag.dagster_adapter.instance import PARTITIONS, job_name
from specops_dag.errors import SpecopsError
from specops_dag.files import sha256_file
from specops_dag.process import end_with_run
from specops_dag.workflow.catalog import Catalog, definition_roots, load_catalog
from specops_dag.workflow.model import MAX_ATTEMPTS, Node, Workflow

if TYPE_CHECKING:
    from specops_dag.delivery.model import Delivery, FileRef
    from specops_dag.delivery.store import Store
    from specops_dag.execution.step import StepOutcome

# The state store, the step executor and what they import (pydantic state models, codex, .NET
# validation, review) are imported where a step, schedule, sensor or gate runs, not at load: the
# code server, daemon and webserver load this module without running any of them. The
# multiprocess executor's forkserver preloads them for the steps (`dagster_adapter.forkserver`).

deliveries = dg.DynamicPartitionsDefinition(name=PARTITIONS)
# Dagster's implicit asset job: every asset of the location, what the UI's "Materialize" launches.
# The nightly schedule targets it by name rather than declaring a second job over every node,
# which would cost as much to load as all the workflow jobs together.
ASSET_JOB = "__ASSET_JOB"
FORKSERVER_PRELOAD = "specops_dag.dagster_adapter.forkserver"


def _warm_multiprocess(init_context: dg.InitExecutorContext) -> dg.Executor:
    """Dagster's default executor, except that `multiprocess` without a `start_method` starts
    its step processes from a forkserver preloaded with the job's module and
    `dagster_adapter.forkserver`: each step forks warm instead of spawning a fresh interpreter that
    imports Dagster and this code location again. `start_method: {spawn: {}}` restores spawn."""
    config = dict(init_context.executor_config)
    multi = config.get("multiprocess")
    if isinstance(multi, dict) and not multi.get("start_method"):
        module = getattr(init_context.job, "get_module", lambda: None)()
        preload = [m for m in (module, FORKSERVER_PRELOAD) if m]
        config["multiprocess"] = {**multi,
                                  "start_method": {"forkserver": {"preload_modules": preload}}}
    default = dg.multi_or_in_process_executor
    return default.executor_creation_fn(init_context._replace(executor_config=config))


executor = dg.ExecutorDefinition(
    name="multi_or_in_process_executor",
    config_schema=dg.multi_or_in_process_executor.config_schema,
    executor_creation_fn=_warm_multiprocess,
    requirements=dg.multi_or_in_process_executor.get_requirements,
    description="Dagster's default (multiprocess or in_process), multiprocess forking warm steps.")


class SpecopsResource(dg.ConfigurableResource):
    """The harness root and how to run codex; defaults come from the environment at load
    (SPECOPS_ROOT, SPECOPS_CODEX_BIN, SPECOPS_REPLAY_URL, ...) and run config can override them."""

    root: str
    lock_timeout_s: float = 30.0
    codex_bin: str | None = None
    replay_url: str | None = None
    codex_model: str | None = None
    codex_config: list[str] = []
    codex_home: str | None = None

    def store(self) -> "Store":
        from specops_dag.delivery.store import Store

        return Store(Path(self.root), lock_timeout_s=self.lock_timeout_s)

    def agent_settings(self) -> AgentSettings:
        return AgentSettings(codex_bin=self.codex_bin, replay_url=self.replay_url,
                             model=self.codex_model, config=tuple(self.codex_config),
                             codex_home=self.codex_home)

    def run_step(self, delivery: str, workflow: str, node: str) -> "StepOutcome":
        from specops_dag.execution.step import run_step

        return run_step(self.store(), delivery, node, workflow=workflow,
                        settings=self.agent_settings())


def resource_from_env(root: Path) -> SpecopsResource:
    env = AgentSettings.from_env()
    return SpecopsResource(root=str(root), codex_bin=env.codex_bin, replay_url=env.replay_url,
                           codex_model=env.model, codex_config=list(env.config),
                           codex_home=env.codex_home)


def data_version(handoff: "dict[str, FileRef]") -> str:
    hashes = json.dumps({k: v.sha256 for k, v in sorted(handoff.items())})
    return hashlib.sha256(hashes.encode()).hexdigest()[:16]


def validation_check(outcome: "StepOutcome") -> dg.AssetCheckResult:
    """The blocking `validation` check: the report of the attempt that completed the step."""
    data = outcome.validation or {}
    metadata = {k: dg.MetadataValue.json(v) if isinstance(v, list | dict) else v
                for k, v in data.items() if v is not None}
    return dg.AssetCheckResult(check_name="validation", passed=bool(data.get("passed", True)),
                               metadata=metadata or {"note": "no report recorded"})


def handoff_check(outcome: "StepOutcome") -> dg.AssetCheckResult:
    """`handoff_current`: the upstream handoffs this node consumed still have the same hash."""
    return dg.AssetCheckResult(check_name="handoff_current", passed=not outcome.drift,
                               severity=dg.AssetCheckSeverity.WARN,
                               metadata={"drifted": dg.MetadataValue.json(list(outcome.drift))})


def review_check(outcome: "StepOutcome") -> dg.AssetCheckResult:
    """`review`: the evaluator's verdict of the last round (read from its saved report)."""
    review = outcome.review or {}
    metadata = {k: dg.MetadataValue.json(v) if isinstance(v, list | dict) else v
                for k, v in review.items() if v is not None}
    return dg.AssetCheckResult(check_name="review", passed=review.get("verdict") == "PASS",
                               metadata=metadata or {"note": "no review recorded"})


def materialization(outcome: "StepOutcome", delivery: str,
                    reviewed: bool = False) -> dg.MaterializeResult:
    metadata: dict[str, object] = {
        "delivery": delivery,
        "handoffs": dg.MetadataValue.json({k: v.model_dump() for k, v in outcome.handoff.items()}),
        "attempt": outcome.attempt,
        "duration_s": outcome.duration_s,
        "reused": outcome.status == "reused",
        "prompt_chars": outcome.prompt_chars,
        **{f"handoff/{k}": dg.MetadataValue.path(v.path) for k, v in outcome.handoff.items()},
    }
    if outcome.usage is not None:
        metadata["codex_thread_id"] = outcome.usage.thread_id or ""
        metadata["tokens"] = dg.MetadataValue.json(outcome.usage.model_dump(
            exclude={"attempt", "thread_id", "role"}))
    metadata.update({f"tokens_{k}": v for k, v in outcome.tokens.items()})
    if outcome.commits:
        metadata.update({f"commit/{k}": v or "" for k, v in outcome.commits.items()})
    checks = [validation_check(outcome), handoff_check(outcome)]
    if reviewed:
        checks.append(review_check(outcome))
    return dg.MaterializeResult(metadata=metadata, check_results=checks,
                                data_version=dg.DataVersion(data_version(outcome.handoff)))


def node_code_version(catalog: Catalog, wf: Workflow, node: Node) -> str:
    digest = hashlib.sha256(sha256_file(catalog.source("phase", node.phase).path).encode())
    digest.update(node.model_dump_json().encode())
    return digest.hexdigest()[:16]


def node_asset(catalog: Catalog, wf: Workflow, node: Node) -> dg.AssetsDefinition:
    phase = catalog.phases[node.phase]

    @dg.asset(
        key=[wf.id, node.id],
        deps=[dg.AssetKey([wf.id, up]) for up in node.needs],
        group_name=wf.id.replace("-", "_"),
        partitions_def=deliveries,
        retry_policy=dg.RetryPolicy(max_retries=MAX_ATTEMPTS - 1),
        code_version=node_code_version(catalog, wf, node),
        output_required=False,  # blocked → no materialization → downstream skipped
        kinds={phase.execution.executor.kind},
        description=phase.execution.goal,
        tags={"phase": node.phase},
        # Agent nodes share the `codex` pool: `concurrency.pools` in dagster.yaml caps how many
        # codex sessions run at once across all runs.
        pool="codex" if phase.execution.executor.kind == "codex" else None,
        check_specs=[dg.AssetCheckSpec("validation", asset=dg.AssetKey([wf.id, node.id]),
                                       blocking=True,
                                       description=f"validation `{phase.validation_mode}` after "
                                       "each attempt (seed 001 §8)"),
                     dg.AssetCheckSpec("handoff_current", asset=dg.AssetKey([wf.id, node.id]),
                                       description="the consumed upstream handoffs are unchanged "
                                       "and the node was not reopened"),
                     *([dg.AssetCheckSpec("review", asset=dg.AssetKey([wf.id, node.id]),
                                          description=f"evaluator `{node.review.phase}`, at most "
                                          f"{node.review.max_rounds} rounds")]
                       if node.review else [])],
    )
    def _node(context: dg.AssetExecutionContext, specops: SpecopsResource):
        delivery = context.partition_key
        end_with_run()  # a multiprocess step worker must not outlive a killed run
        try:
            outcome = specops.run_step(delivery, wf.id, node.id)
        except SpecopsError as err:
            raise dg.Failure(description=err.message, allow_retries=False) from err
        if outcome.status in ("completed", "reused"):
            yield materialization(outcome, delivery, reviewed=node.review is not None)
        elif outcome.status in ("blocked", "skipped"):
            context.log.warning(f"{node.id} of {delivery} {outcome.status}: {outcome.message}")
            # Every declared check must be yielded; no materialization → downstream skipped.
            for check in ("validation", "handoff_current", *(["review"] if node.review else [])):
                yield dg.AssetCheckResult(check_name=check, passed=False,
                                          severity=dg.AssetCheckSeverity.WARN,
                                          metadata={"reason": outcome.message,
                                                    "status": outcome.status})
        else:
            raise dg.Failure(description=f"{node.id} of {delivery}: {outcome.message}",
                             metadata={"attempt": outcome.attempt},
                             allow_retries=outcome.retryable)

    return _node


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
    """Deliveries that are partitions of this instance and run a workflow of this location."""
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
                 execution_timezone="UTC")
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


class ApproveGateConfig(dg.Config):
    delivery: str
    gate: str
    decision: Literal["approved", "rejected"] = "approved"
    note: str = ""


@dg.op
def decide_gate(context: dg.OpExecutionContext, config: ApproveGateConfig,
                specops: SpecopsResource) -> None:
    """Record a human decision on a delivery's gate (the Launchpad form of `specops approve`)."""
    from specops_dag.delivery.gates import approve

    try:
        approval = approve(specops.store(), config.delivery, config.gate, config.note,
                           reject=config.decision == "rejected")
    except SpecopsError as err:
        raise dg.Failure(description=err.message, allow_retries=False) from err
    context.log.info(f"{config.gate} {approval.decision} for {config.delivery} at {approval.at}"
                     + (f" (revision {approval.revision})" if approval.revision else ""))


@dg.job(name="approve_gate", description="Approve or reject a delivery's human gate.")
def approve_gate_job() -> None:
    decide_gate()


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
    for wf in catalog.workflows.values():
        wf_assets = [node_asset(catalog, wf, node) for node in wf.nodes]
        assets += wf_assets
        jobs.append(dg.define_asset_job(job_name(wf.id), selection=dg.AssetSelection.assets(
            *wf_assets), description=wf.description or None))
    return dg.Definitions(
        assets=assets, jobs=[*jobs, approve_gate_job],
        schedules=[nightly_schedule(catalog)], sensors=[approval_sensor(catalog)],
        resources={"specops": resource_from_env(root)}, executor=executor)


def harness_root() -> Path:
    return Path(os.environ.get("SPECOPS_ROOT") or os.getcwd()).resolve()


with long_lived_build():
    defs = build_definitions(harness_root(), os.environ.get(SNAPSHOT_OF) or None)

__all__ = ["defs", "build_definitions", "deliveries"]
