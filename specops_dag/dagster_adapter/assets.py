"""One asset per workflow node, key `[workflow, node]`, partitioned by delivery: its
materialization and metadata, its `validation` / `handoff_current` / `review` checks, and its
data and code versions. The asset body only runs the step through the `specops` resource and
translates the outcome; it decides nothing. Two outcomes Dagster would hide are made visible: a
node stopped at a gate (a green run) tags the run `specops/awaiting_gate`, and a partition with
no delivery fails at once and is removed."""

import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import dagster as dg

from specops_dag.dagster_adapter.instance import PARTITIONS
from specops_dag.dagster_adapter.resources import SpecopsResource
from specops_dag.errors import SpecopsError
from specops_dag.files import sha256_file
from specops_dag.process import end_with_run
from specops_dag.workflow.catalog import Catalog
from specops_dag.workflow.model import MAX_ATTEMPTS, Node, Workflow

if TYPE_CHECKING:
    from specops_dag.delivery.model import FileRef
    from specops_dag.execution.step import StepOutcome

deliveries = dg.DynamicPartitionsDefinition(name=PARTITIONS)


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


def ended_metadata(outcome: "StepOutcome") -> dict[str, object]:
    """How the attempt ended: its reason and the provider failures retried inside it."""
    ended = outcome.ended
    if ended is None:
        return {}
    return {"attempt_reason": ended.reason, "infra_retries": len(ended.infra_retries),
            **({"infra_failures": dg.MetadataValue.json(
                [r.model_dump() for r in ended.infra_retries])} if ended.infra_retries else {})}


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
    if outcome.ran_on is not None:  # the process that ran the attempt (a Celery worker's)
        metadata["worker"] = f"{outcome.ran_on.host}:{outcome.ran_on.pid}"
        if outcome.ran_on.worker:
            metadata["celery_worker"] = outcome.ran_on.worker
    if outcome.usage is not None:
        metadata["codex_thread_id"] = outcome.usage.thread_id or ""
        metadata["tokens"] = dg.MetadataValue.json(outcome.usage.model_dump(
            exclude={"attempt", "thread_id", "role", "task", "model", "provider"}))
        metadata["model"] = outcome.usage.model or ""
        metadata["provider"] = outcome.usage.provider or ""
    metadata.update({f"tokens_{k}": v for k, v in outcome.tokens.items()})
    metadata.update({f"usd_{k}": dg.MetadataValue.float(v) for k, v in outcome.usd.items()})
    if outcome.commits:
        metadata.update({f"commit/{k}": v or "" for k, v in outcome.commits.items()})
    if outcome.ended is not None:
        metadata.update(ended_metadata(outcome))
    if outcome.evidence is not None:
        metadata["evidence"] = dg.MetadataValue.path(outcome.evidence.path)
        metadata["evidence_sha256"] = outcome.evidence.sha256
    if outcome.tasks:
        metadata["tasks"] = dg.MetadataValue.json(list(outcome.tasks))
        metadata["tasks_merged"] = sum(t["status"] == "merged" for t in outcome.tasks)
    checks = [validation_check(outcome), handoff_check(outcome)]
    if reviewed:
        checks.append(review_check(outcome))
    return dg.MaterializeResult(metadata=metadata, check_results=checks,
                                data_version=dg.DataVersion(data_version(outcome.handoff)))


def offer_tasks() -> Callable[[str, str, str], None] | None:
    """How a fan-out step offers its tasks to other processes: on a `specops worker` (whose
    Celery app is loaded in this process), to the other workers (`celery_tasks.dispatcher`);
    elsewhere None, and the step's own process runs them all."""
    tasks = sys.modules.get("specops_dag.dagster_adapter.celery_tasks")
    return None if tasks is None else tasks.dispatcher()


def codex_pool_limit(instance: dg.DagsterInstance) -> int | None:
    """How many codex sessions the `codex` pool allows at once (its own limit, else the
    instance's default pool limit; None: no limit): a fan-out runs no more tasks at once."""
    try:
        slots = instance.event_log_storage.get_concurrency_info("codex").slot_count
    except NotImplementedError:
        slots = 0
    return slots or instance.global_op_concurrency_default_limit


def node_code_version(catalog: Catalog, wf: Workflow, node: Node) -> str:
    digest = hashlib.sha256(sha256_file(catalog.source("phase", node.phase).path).encode())
    digest.update(node.model_dump_json().encode())
    return digest.hexdigest()[:16]


def review_description(node: Node, recorded: str | None) -> str:
    """The `review` check's description: the evaluator the delivery recorded at `specops new`
    (the code location of one delivery's run), else each one the node's review can choose."""
    review = node.review
    assert review is not None
    if recorded is not None:
        which = f"evaluator `{recorded}` (recorded for this delivery)"
    else:
        on = ", ".join(f"`{pid}` on {platform}" for platform, pid in review.platforms.items())
        which = f"evaluator `{review.phase}`" + (f" ({on})" if on else "")
    return f"{which}, at most {review.max_rounds} rounds"


def node_asset(catalog: Catalog, wf: Workflow, node: Node,
               reviews: dict[str, str] | None = None) -> dg.AssetsDefinition:
    """`reviews`: the evaluators one delivery recorded by node (its snapshot's code location)."""
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
                                          description=review_description(
                                              node, (reviews or {}).get(node.id)))]
                       if node.review else [])],
    )
    def _node(context: dg.AssetExecutionContext, specops: SpecopsResource):
        delivery = context.partition_key
        end_with_run()  # a multiprocess step worker must not outlive a killed run
        require_delivery(context.instance, context.run_id, specops, wf.id, delivery)
        try:
            # a fan-out's task events (started, built, merged, failed) go to the run's log
            outcome = specops.run_step(delivery, wf.id, node.id, progress=context.log.info,
                                       sessions=codex_pool_limit(context.instance),
                                       dispatch=offer_tasks())
        except SpecopsError as err:
            raise dg.Failure(description=err.message, allow_retries=False) from err
        if outcome.status in ("completed", "reused"):
            yield materialization(outcome, delivery, reviewed=node.review is not None)
        elif outcome.status in ("blocked", "skipped"):
            yield from not_materialized(context, specops, node, outcome)
        else:
            raise dg.Failure(description=f"{node.id} of {delivery}: {outcome.message}",
                             metadata={"attempt": outcome.attempt, **ended_metadata(outcome)},
                             allow_retries=outcome.retryable)

    return _node


def not_materialized(context: dg.AssetExecutionContext, specops: SpecopsResource, node: Node,
                     outcome: "StepOutcome") -> Iterator[dg.AssetCheckResult]:
    """A blocked or skipped step: a warning naming why (and the gate, the run tag and an
    observation when it stopped at one), and every declared check failed — Dagster requires
    each one; no materialization, so Dagster skips the downstream nodes."""
    delivery = context.partition_key
    gate = stopped_at_gate(specops, delivery, node.id, outcome)
    if gate is None:
        context.log.warning(f"{node.id} of {delivery} {outcome.status}: {outcome.message}")
    else:
        announce_gate(context, node.id, gate, gate_message(delivery, node.id, gate, outcome))
    for check in ("validation", "handoff_current", *(["review"] if node.review else [])):
        yield dg.AssetCheckResult(check_name=check, passed=False,
                                  severity=dg.AssetCheckSeverity.WARN,
                                  metadata={"reason": outcome.message, "status": outcome.status,
                                            **({"gate": gate} if gate else {})})


# The run tag of a run in which a node stopped at a closed gate: a run whose nodes yield no
# materialization is a green "Success" in Dagster, so the tag (and a WARNING naming the gate)
# is what tells it apart from a run that did the work. Value: the gate, or several gates
# comma-separated and sorted.
GATE_TAG = "specops/awaiting_gate"


def stopped_at_gate(specops: SpecopsResource, delivery: str, node: str,
                    outcome: "StepOutcome") -> str | None:
    """The closed gate in front of the node when that is why it is blocked, else None."""
    from specops_dag.delivery.gates import WAITING
    from specops_dag.delivery.queries import closed_gates

    if outcome.status != "blocked" or not outcome.message.startswith(WAITING):
        return None
    state = specops.store().read(delivery)
    gates = closed_gates(state, state.get_step(node))
    return gates[0] if gates else None


def gate_message(delivery: str, node: str, gate: str, outcome: "StepOutcome") -> str:
    approve = f"`specops approve {delivery} {gate}` or the approve_gate job"
    if outcome.message.startswith("rejected: "):  # `rejected: <gate>[: <note>]`
        note = outcome.message.removeprefix(f"rejected: {gate}")
        return f"rejected: gate `{gate}` before `{node}`{note}; to go on, approve it with {approve}"
    return f"awaiting approval: gate `{gate}` before `{node}`; approve with {approve}"


def announce_gate(context: dg.AssetExecutionContext, node: str, gate: str, message: str) -> None:
    """Tag the run with the gate, log a WARNING naming it and record it on the asset's partition
    (an observation), so a green run that stopped at a gate says so on its run page."""
    instance, run_id = context.instance, context.run_id
    for _ in range(3):  # parallel steps of one run may stop at gates at once: merge and verify
        tagged = instance.get_run_by_id(run_id).tags.get(GATE_TAG, "")
        gates = ",".join(sorted({*filter(None, tagged.split(",")), gate}))
        if tagged == gates:
            break
        instance.add_run_tags(run_id, {GATE_TAG: gates})
    context.log.warning(message)
    context.log_event(dg.AssetObservation(
        asset_key=context.asset_key, partition=context.partition_key, description=message,
        metadata={"gate": gate, "node": node, "delivery": context.partition_key,
                  "approve_with": f"specops approve {context.partition_key} {gate}"}))


def require_delivery(instance: dg.DagsterInstance, run_id: str, specops: SpecopsResource,
                     workflow: str, delivery: str) -> None:
    """Fail the run at once when its partition has no delivery (a key added with the UI's "Add a
    partition", which creates none), and remove that partition — unless another run used it:
    then the root, not the partition, may be what is wrong (a webserver started elsewhere)."""
    from specops_dag.delivery.queries import delivery_id_problem

    problem = delivery_id_problem(delivery)
    if problem is None and specops.store().exists(delivery):
        return
    others = [r for r in instance.get_runs(dg.RunsFilter(tags={"dagster/partition": delivery}))
              if r.run_id != run_id]
    if others:
        kept = f"; partition `{delivery}` kept: {len(others)} other run(s) used it"
    elif instance.has_dynamic_partition(PARTITIONS, delivery):
        instance.delete_dynamic_partition(PARTITIONS, delivery)
        kept = f"; partition `{delivery}` removed"
    else:
        kept = ""
    what = (f", and there cannot be one: the id {problem}; create a delivery with `specops new "
            f"{workflow} <id> --request …`" if problem else
            f": create it with `specops new {workflow} {delivery} --request …`")
    raise dg.Failure(allow_retries=False, description=(
        f"no delivery `{delivery}` in {specops.root}{what} (a partition added in the UI does not "
        f"create a delivery){kept}"))
