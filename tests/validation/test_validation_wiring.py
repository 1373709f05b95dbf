"""Validation as the attempt loop uses it: after the agent exits 0 and the artifacts exist."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import dagster as dg
import pytest

from specops_dag.delivery.lifecycle import new_delivery
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import AGENTIC, replay, settings_for, wrote
from ..support.dotnet import FIXTURES, STANDIN, path_without_dotnet
from ..support.harness import write_tree


def fixture_harness(tmp_path: Path, fixture: str) -> Store:
    """A .NET fixture repo that is also the harness root of the agentic workflow."""
    root = tmp_path / "harness"
    shutil.copytree(FIXTURES / fixture, root)
    write_tree(root, AGENTIC)
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic",
                 "d1", "Write notes.", validation="full")
    return store


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch):
    def use(answers: str) -> None:
        monkeypatch.setenv("PATH", f"{STANDIN}:{os.environ['PATH']}")
        monkeypatch.setenv("DOTNET_STANDIN_ANSWERS", str(STANDIN / "answers" / f"{answers}.yaml"))
    return use


@pytest.mark.e2e
def test_a_failed_validation_cancels_success_and_feeds_the_next_attempt(
        tmp_path: Path, standin) -> None:
    standin("regressing-test")  # the base passes; a tree with the marker fails a test
    store = fixture_harness(tmp_path, "all-pass")
    regress = {"literal": {"before": [{"shell": "touch src/Calc/regressed.marker"}]}}
    nodes = {"write": [regress, regress]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        second = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert first.status == "failed"
    assert first.message.startswith("attempt 1/3 failed: validation `full` failed at stage "
                                    "`test`: tests/Calc.Tests/Calc.Tests.csproj: exit code:")
    assert second.status == "failed" and second.attempt == 2
    log = (tmp_path / "requests.jsonl").read_text()
    assert "# Previous attempt failed\\n\\nvalidation `full` failed at stage `test`" in log
    step = store.read("d1").get_step("write")
    assert step.validation_report.failing_tests == [
        "Calc.Tests.CalculatorTests.Subtract_ReturnsDifference"]


@pytest.mark.e2e
def test_a_passing_validation_completes_the_step_with_its_report(tmp_path: Path,
                                                                  standin) -> None:
    standin("all-pass")
    store = fixture_harness(tmp_path, "all-pass")
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (outcome.status, outcome.message) == ("completed", wrote("write", "notes.md"))
    assert outcome.validation["stage"] == "test" and outcome.validation["passed"] is True
    assert (outcome.validation["total"], outcome.validation["passed_tests"]) == (2, 2)


def test_a_missing_dotnet_blocks_the_step_before_any_agent_call_with_the_install_hint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = fixture_harness(tmp_path, "all-pass")
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        settings = settings_for(server, tmp_path)
        codex_dir = str(Path(__file__).resolve().parents[2] / "node_modules/.bin")
        monkeypatch.setenv("PATH", path_without_dotnet(tmp_path, f"{codex_dir}:/usr/bin:/bin"))
        outcome = run_step(store, "d1", "write", settings=settings)
    assert (outcome.status, outcome.retryable) == ("environment", False)
    step = store.read("d1").get_step("write")
    assert step.status == "blocked"
    assert step.blocked_reason == (
        "environment error: the .NET SDK (`dotnet`) is not installed or not on PATH: install the "
        ".NET 10 SDK (https://dot.net/download; it also builds net8.0) so full validation can "
        "build and test; without an SDK, a delivery whose change is documentation only can run: "
        "create it with `specops new WORKFLOW DELIVERY --validation docs-only ...` (`specops "
        "validate --mode docs-only` for a folder) (found on host "
        f"`{socket.gethostname()}` before the attempt: no agent call was made and no attempt "
        "was spent)")
    assert step.usage == []  # the claim looks for dotnet before any agent call
    assert (step.attempts, step.attempt_log) == (0, [])
    assert not (tmp_path / "requests.jsonl").exists() or not (
        tmp_path / "requests.jsonl").read_text().strip()


@pytest.mark.e2e
def test_the_materialization_carries_a_blocking_validation_check_with_the_report(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    from ..support.cli import job_execute

    store = fixture_harness(tmp_path, "all-pass")
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("delivery", ["d1"])
    nodes = {"write": [{"literal": {}}], "review": [{"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        env = {**clean_env, "SPECOPS_REPLAY_URL": server.url,
               "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home"),
               "PATH": f"{STANDIN}:{clean_env['PATH']}",
               "DOTNET_STANDIN_ANSWERS": str(STANDIN / "answers/all-pass.yaml")}
        run = job_execute(env, store.root, "agentic_job", "d1")
    assert run.returncode == 0, run.stderr[-3000:]
    with dg.DagsterInstance.get() as instance:
        key = dg.AssetCheckKey(dg.AssetKey(["agentic", "write"]), "validation")
        record = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)[0]
        evaluation = record.event.dagster_event.event_specific_data
        assert evaluation.passed is True
        assert evaluation.metadata["stage"].value == "test"
        assert evaluation.metadata["passed_tests"].value == 2
        assert evaluation.metadata["sdk_version"].value == "10.0.401"
        assert [c["stage"] for c in evaluation.metadata["commands"].value][-1] == "test"
        assert evaluation.metadata["projects"].value[0]["executed"] == 2
