"""Runs execute the delivery's frozen snapshot only (issue #22 item 1): a definition changed,
broken or deleted after `specops new` is drift in `status`, never a failed or different run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops_dag.delivery.store import Store

from ..support.cli import job_execute, specops
from ..support.harness import WF, WRITE_OUT, command_phase


def created(diamond_root: Path, env: dict[str, str]) -> Path:
    assert specops(env, diamond_root, "new", "diamond", "d1", "--request", "x").returncode == 0
    return diamond_root


def completed(root: Path, env: dict[str, str]) -> None:
    run = specops(env, root, "run", "d1", "--executor", "in_process")
    assert run.returncode == 0, run.stderr
    state = Store(root).read("d1")
    assert [(s.name, s.status) for s in state.steps] == [
        ("a", "completed"), ("b", "completed"), ("c", "completed"), ("d", "completed")]


def add_node_e(root: Path) -> None:
    """The workflow gains a node `e` after `d` (a change made after some `specops new`)."""
    (root / "workflow_defs/phases/p-e.yaml").write_text(
        command_phase("p-e", WRITE_OUT, {"up": "d-out"}, {"out": "e-out"}))
    wf = root / WF
    wf.write_text(wf.read_text().replace(
        "outputs:", "  - {id: e, phase: p-e, needs: [d], inputs: {up: {node: d, output: out}}}\n"
        "outputs:"))
    assert "id: e," in wf.read_text()


@pytest.mark.e2e
def test_a_broken_current_phase_file_is_drift_and_the_run_uses_the_snapshot(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    root = created(diamond_root, clean_env)
    (root / "workflow_defs/phases/p-b.yaml").write_text("kind: phase\nid: p-b\nexecution: [\n")
    completed(root, clean_env)
    status = specops(clean_env, root, "status", "d1", "--json")
    assert json.loads(status.stdout)["drift"] == [
        "workflow_defs/phases/p-b.yaml: changed since the snapshot (the delivery keeps its copy)"]


@pytest.mark.e2e
def test_a_deleted_workflow_file_leaves_its_deliveries_runnable(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    root = created(diamond_root, clean_env)
    (root / WF).unlink()
    completed(root, clean_env)
    status = specops(clean_env, root, "status", "d1")
    assert ("drift: workflow_defs/workflows/diamond.yaml: removed since the snapshot (the "
            "delivery keeps its copy)") in status.stdout.splitlines()


@pytest.mark.e2e
def test_a_node_removed_after_new_still_runs_from_the_snapshot(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    root = created(diamond_root, clean_env)
    wf = root / WF
    text = wf.read_text()
    wf.write_text(text.replace("needs: [b, c], inputs: {left: {node: b, output: out}, right: "
                               "{node: c, output: out}}", "needs: [b], inputs: {left: {node: b, "
                               "output: out}}"))
    wf.write_text("".join(line for line in wf.read_text().splitlines(keepends=True)
                          if "id: c," not in line))
    assert "id: c," not in wf.read_text()
    completed(root, clean_env)


@pytest.mark.e2e
def test_a_node_added_after_new_is_not_run_for_the_old_delivery(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    root = created(diamond_root, clean_env)
    add_node_e(root)
    completed(root, clean_env)
    assert not (root / "phases/d1/e").exists()


@pytest.mark.e2e
def test_a_job_of_the_current_definitions_refuses_a_node_the_delivery_does_not_have(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    root = created(diamond_root, clean_env)
    add_node_e(root)
    run = job_execute(clean_env, root, "diamond_job", "d1")
    assert run.returncode == 1
    assert ("node `e` is not in delivery `d1`: the workflow changed after `specops new`; "
            "`specops run d1` runs the delivery's snapshot") in run.stdout + run.stderr
    state = Store(root).read("d1")
    assert [s.status for s in state.steps] == ["completed"] * 4


def test_the_nightly_schedule_leaves_a_delivery_whose_workflow_changed_to_specops_run(
        diamond_root: Path) -> None:
    import datetime as dt

    import dagster as dg

    from specops_dag.dagster_adapter.definitions import build_definitions
    from specops_dag.dagster_adapter.resources import SpecopsResource

    from ..support.harness import make_delivery

    make_delivery(diamond_root, "old")
    add_node_e(diamond_root)
    make_delivery(diamond_root, "new")
    defs = build_definitions(diamond_root)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("delivery", ["old", "new"])
        context = dg.build_schedule_context(
            instance=instance, repository_def=defs.get_repository_def(),
            scheduled_execution_time=dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.UTC),
            resources={"specops": SpecopsResource(root=str(diamond_root))})
        result = defs.resolve_schedule_def("nightly").evaluate_tick(context)
        assert [(r.partition_key, sorted(k.path[1] for k in r.asset_selection))
                for r in result.run_requests or []] == [("new", ["a", "b", "c", "d", "e"])]


@pytest.mark.e2e
def test_the_definitions_of_a_delivery_are_its_snapshot_and_a_missing_snapshot_is_named(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    from specops_dag.dagster_adapter.definitions import build_definitions
    from specops_dag.errors import SpecopsError

    root = created(diamond_root, clean_env)
    (root / WF).write_text("kind: workflow\nid: diamond\nnodes: [\n")
    defs = build_definitions(root, "d1")
    assert sorted(k.path[1] for k in defs.resolve_all_asset_keys()) == ["a", "b", "c", "d"]
    with pytest.raises(SpecopsError) as err:
        build_definitions(root, "d2")
    assert err.value.message == (f"{root}/phases/d2/snapshot: delivery `d2` has no snapshot "
                                 "folder; `specops status d2` tells what is wrong with it")
