from __future__ import annotations

import subprocess
from pathlib import Path

import dagster as dg
import pytest

from specops_dag.dagster_adapter.assets import data_version
from specops_dag.dagster_adapter.definitions import build_definitions
from specops_dag.delivery.store import Store

from ..support.cli import job_execute, specops
from ..support.harness import REPO, VENV_BIN


def test_definitions_have_one_asset_per_node_keyed_by_workflow_and_node(
        diamond_root: Path) -> None:
    defs = build_definitions(diamond_root)
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    diamond = {k for k in graph.get_all_asset_keys() if k.path[0] == "diamond"}
    assert diamond == {dg.AssetKey(["diamond", n]) for n in "abcd"}
    deps = {k.path[1]: sorted(p.path[1] for p in graph.get(k).parent_keys) for k in diamond}
    assert deps == {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    quick = [k.path[1] for k in graph.get_all_asset_keys() if k.path[0] == "quick-delivery"]
    assert sorted(quick) == ["delivery", "develop", "verify"]
    node = graph.get(dg.AssetKey(["diamond", "d"]))
    assert node.group_name == "diamond"
    assert node.partitions_def == dg.DynamicPartitionsDefinition(name="delivery")
    assert len(node.code_version or "") == 16
    assert defs.resolve_job_def("diamond_job") is not None
    assert defs.resolve_job_def("full_delivery_job") is not None
    assert defs.resolve_assets_def(dg.AssetKey(["diamond", "a"])).op.retry_policy == \
        dg.RetryPolicy(max_retries=2)


@pytest.mark.e2e
def test_a_delivery_runs_end_to_end_through_dagster_job_execute(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    created = specops(clean_env, diamond_root, "new", "diamond", "d1", "--request", "Go.")
    assert created.returncode == 0, created.stderr
    assert created.stdout == ("created delivery d1 (diamond, 4 steps) in phases/d1/; run it with "
                              "`specops run d1`\n")
    run = job_execute(clean_env, diamond_root, "diamond_job", "d1", executor="multiprocess")
    assert run.returncode == 0, run.stderr[-3000:]
    state = Store(diamond_root).read("d1")
    assert state.status == "completed"
    assert {s.name: (s.status, s.attempts) for s in state.steps} == {
        n: ("completed", 1) for n in "abcd"}
    with dg.DagsterInstance.get() as instance:
        record = instance.fetch_materializations(dg.AssetRecordsFilter(
            asset_key=dg.AssetKey(["diamond", "d"]), asset_partitions=["d1"]), limit=1).records[0]
        meta = record.asset_materialization.metadata
        step = state.get_step("d")
        assert meta["handoffs"].value == {"result": step.handoff["result"].model_dump()}
        assert meta["attempt"].value == 1
        assert record.asset_materialization.tags["dagster/data_version"] == \
            data_version(step.handoff)


@pytest.mark.e2e
def test_the_workspace_validates_with_dagster_definitions_validate(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    result = subprocess.run(
        [str(VENV_BIN / "dagster"), "definitions", "validate", "-w", str(REPO / "workspace.yaml")],
        env={**clean_env, "SPECOPS_ROOT": str(diamond_root)}, cwd=REPO, capture_output=True,
        text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Validation successful" in result.stdout + result.stderr
