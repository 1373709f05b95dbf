"""The preflight (issue 16): the base tree is validated before the first agent call, once per base
commit; a base that cannot pass blocks the step for a person, and environment failures never
reach the agent as something to fix. Real codex against the replay agent's literal mode, the
`dotnet` stand-in for the SDK."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import git
import pytest

from specops_dag.delivery.lifecycle import new_delivery
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import AGENTIC, replay, requests, settings_for
from ..support.dotnet import FIXTURES, STANDIN
from ..support.git import WHO
from ..support.harness import VENV_BIN, write_tree

pytestmark = pytest.mark.e2e


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch):
    def use(answers: str) -> None:
        monkeypatch.setenv("PATH", f"{STANDIN}:{os.environ['PATH']}")
        monkeypatch.setenv("DOTNET_STANDIN_ANSWERS", str(STANDIN / "answers" / f"{answers}.yaml"))
    return use

NO_GLOBAL_JSON = (
    "preflight: the base tree (the target folder) cannot pass `full` validation, so no agent "
    "call was made: stage `global.json`: no global.json pinning the SDK at the repository "
    "root: add one (e.g. {\"sdk\": {\"version\": \"10.0.100\", \"rollForward\": "
    "\"latestFeature\"}}), or set `validation.sdk.require_global_json: false` in "
    "workflow_defs/validation.yaml (or the phase); then `specops resume d1 write`")


def harness(tmp_path: Path, fixture: str, extra: dict[str, str] | None = None,
            deliveries: tuple[str, ...] = ("d1",), use_git: bool = False,
            judge: str | None = None) -> Store:
    root = tmp_path / "harness"
    shutil.copytree(FIXTURES / fixture, root)
    write_tree(root, {**AGENTIC, **(extra or {})})
    if use_git:
        (root / ".gitignore").write_text(".dagster_home/\n.specops/\nbin/\nobj/\n")
        repo = git.Repo.init(root, initial_branch="main")
        repo.git.add(A=True)
        repo.index.commit("initial", author=WHO, committer=WHO)
    store = Store(root)
    catalog = load_catalog(definition_roots(root), display_base=root)
    for d in deliveries:
        new_delivery(store, catalog, "agentic", d, "Write notes.", validation="full",
                     judge=judge)
    return store


def test_a_base_without_global_json_blocks_before_any_agent_call(tmp_path: Path,
                                                                 standin) -> None:
    standin("no-global-json")
    store = harness(tmp_path, "no-global-json")
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (outcome.status, outcome.message) == ("environment", f"blocked: {NO_GLOBAL_JSON}")
    step = store.read("d1").get_step("write")
    assert (step.status, step.blocked_reason, step.usage) == ("blocked", NO_GLOBAL_JSON, [])
    assert not (tmp_path / "requests.jsonl").exists() or requests(tmp_path) == []
    assert (step.preflight.passed, step.preflight.stage) == (False, "global.json")


def test_the_sdk_policy_in_validation_yaml_lets_the_same_base_through(tmp_path: Path,
                                                                      standin) -> None:
    standin("no-global-json")
    layout = {"workflow_defs/validation.yaml": "validation:\n  sdk: {require_global_json: false}\n"
                                               "  target: {framework: net8.0}\n"}
    store = harness(tmp_path, "no-global-json", layout)
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    step = store.read("d1").get_step("write")
    assert (step.preflight.passed, step.preflight.sdk_version) == (True, "8.0.404")
    assert step.validation_report.sdk_version == "8.0.404"


def test_the_preflight_runs_once_per_base_commit_and_shows_in_status(tmp_path: Path,
                                                                     standin,
                                                                     monkeypatch) -> None:
    standin("all-pass")
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("DOTNET_STANDIN_LOG", str(calls))
    store = harness(tmp_path, "all-pass", deliveries=("d1", "d2"), use_git=True)
    with replay(tmp_path, {"d1/write": [{"literal": {}}], "d2/write": [{"literal": {}}]}) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        after_first = len(calls.read_text().splitlines())
        second = run_step(store, "d2", "write", settings=settings_for(server, tmp_path))
    assert (first.status, second.status) == ("completed", "completed"), second.message
    sent = calls.read_text().splitlines()
    # d1: preflight (--version … test) then the attempt's validation; d2: its restore, then the
    # attempt's validation only: the base commit's preflight is cached
    assert [s.split()[0] for s in sent[after_first:]] == [
        "restore", "--version", "msbuild", "msbuild", "restore", "build", "msbuild", "msbuild",
        "--list-runtimes", "test"]
    d1, d2 = (store.read(d).get_step("write") for d in ("d1", "d2"))
    assert (d1.preflight.cached, d2.preflight.cached) == (False, True)
    assert d1.preflight.commit == d2.preflight.commit == d1.base_commit
    status = subprocess.run([str(VENV_BIN / "specops"), "--root", str(store.root), "status",
                             "d2"], capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert (f"       preflight passed on {d1.base_commit[:12]} (judge absolute, SDK 10.0.401, "
            "cached): 1 test project(s): 2 of 2 tests executed, 2 passed, 0 skipped"
            ) in status.stdout.splitlines()
    as_json = subprocess.run([str(VENV_BIN / "specops"), "--root", str(store.root), "status",
                              "d2", "--json"], capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
    assert json.loads(as_json.stdout)["steps"][0]["preflight"]["passed"] is True


def test_an_environment_failure_after_an_attempt_blocks_and_is_not_fed_to_the_agent(
        tmp_path: Path, standin) -> None:
    standin("audit-after-attempt")  # the base restores; the attempt's tree meets NU1900
    store = harness(tmp_path, "all-pass")
    offline = {"literal": {"before": [{"shell": "touch src/Calc/offline.marker"}]}}
    with replay(tmp_path, {"write": [offline, offline]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (outcome.status, outcome.retryable) == ("environment", False)
    step = store.read("d1").get_step("write")
    assert (step.status, step.last_failure, len(step.usage)) == ("blocked", None, 1)
    assert step.blocked_reason.startswith(
        "environment error: validation `full` failed at stage `restore`: `dotnet restore` of "
        "Calc.sln failed (exit 1)")
    assert "NuGetAudit could not read vulnerability data" in step.blocked_reason
    assert step.blocked_reason.endswith("then `specops resume d1 write`")


def test_a_pre_existing_warning_blocks_under_absolute_and_is_the_baseline_under_regressions(
        tmp_path: Path, standin) -> None:
    standin("compiler-warning")
    store = harness(tmp_path / "absolute", "compiler-warning")
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        blocked = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert blocked.status == "environment"
    assert store.read("d1").get_step("write").blocked_reason.endswith(
        "; fix the warning or error on the base branch, or set `validation.judge: regressions` "
        "in workflow_defs/validation.yaml (or the phase) to judge attempts only on what they "
        "add; then `specops resume d1 write`")
    standin("compiler-warning-regressions")
    layout = {"workflow_defs/validation.yaml": "validation:\n  judge: regressions\n"}
    store = harness(tmp_path / "regressions", "compiler-warning", layout)
    worse = {"literal": {"before": [{"shell": "touch src/Calc/new-warning.marker"}]}}
    with replay(tmp_path, {"write": [worse, {"literal": {}}]}) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        (store.root / "src/Calc/new-warning.marker").unlink()  # as if attempt 2 fixed it
        second = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert first.status == "failed"
    assert first.message.startswith(
        "attempt 1/3 failed: validation `full` failed at stage `regressions`: worse than the "
        "base: 1 new warning(s): src/Calc/Calculator.cs: warning CS0219:")
    assert second.status == "completed", second.message
    report = store.read("d1").get_step("write").validation_report
    assert report.baseline.warnings.model_dump() == {
        "base": ["src/Calc/Calculator.cs: warning CS0168: The variable 'e' is declared but "
                 "never used"],
        "attempt": ["src/Calc/Calculator.cs: warning CS0168: The variable 'e' is declared but "
                    "never used"]}


def test_a_delivery_may_choose_the_regressions_judge_for_every_step(tmp_path: Path,
                                                                   standin) -> None:
    standin("compiler-warning-regressions")
    store = harness(tmp_path, "compiler-warning", judge="regressions")
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    step = store.read("d1").get_step("write")
    assert (step.preflight.judge, step.preflight.warnings) == (
        "regressions", ["src/Calc/Calculator.cs: warning CS0168: The variable 'e' is declared but "
                        "never used"])
    assert outcome.validation["stage"] == "regressions"
    assert outcome.validation["baseline"]["executed"] == {"base": 2, "attempt": 2}


def test_a_run_killed_during_the_preflight_checks_the_base_again_before_the_agent_runs(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    from ..support.agents import agentic_git_harness
    from ..support.cli import job_execute, specops
    from ..support.processes import kill_when, start_run

    root = agentic_git_harness(tmp_path, "all-pass")
    calls = tmp_path / "dotnet-calls.log"
    env = {**clean_env, "PATH": f"{STANDIN}:{clean_env['PATH']}", "DOTNET_STANDIN_LOG": str(calls),
           "DOTNET_STANDIN_ANSWERS": str(STANDIN / "answers/hang-build.yaml")}
    assert specops(env, root, "new", "agentic", "d1", "--request", "x", "--validation",
                   "full").returncode == 0
    with replay(tmp_path, {"write": [{"literal": {}}], "review": [{"literal": {}}]}) as server:
        env.update(SPECOPS_REPLAY_URL=server.url, SPECOPS_CODEX_HOME=str(tmp_path / "codex-home"))
        proc = start_run(env, root, "agentic_job")
        kill_when(proc, lambda: calls.exists() and "build" in calls.read_text())
        assert not (tmp_path / "requests.jsonl").exists() or requests(tmp_path) == []
        env["DOTNET_STANDIN_ANSWERS"] = str(STANDIN / "answers/all-pass.yaml")
        run = job_execute(env, root, "agentic_job", "d1")
    assert run.returncode == 0, run.stderr[-2000:]
    step = Store(root).read("d1").get_step("write")
    assert (step.status, step.attempts, step.preflight.passed) == ("completed", 2, True)
    assert len([r for r in requests(tmp_path) if r["node"] == "write"]) >= 1
    assert len({r["thread"] for r in requests(tmp_path) if r["node"] == "write"}) == 1


def test_a_base_whose_sdk_is_not_installed_says_what_to_install_or_change(
        tmp_path: Path, standin) -> None:
    standin("sdk-mismatch")
    store = harness(tmp_path, "sdk-mismatch")
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "environment"
    assert store.read("d1").get_step("write").blocked_reason == (
        "preflight: the base tree (the target folder) cannot pass `full` validation, so no agent "
        "call was made: stage `sdk`: `dotnet --version` exited 155: no installed SDK matches "
        "global.json sdk.version 8.0.100, rollForward disable; target policy net8.0: an 8.0 SDK "
        "or newer (auto: global.json pins SDK 8.0.100); installed SDKs: 10.0.401 "
        "[/usr/share/dotnet/sdk]; fix: install an SDK that global.json accepts, or change its "
        "sdk.version or rollForward (e.g. {\"sdk\": {\"version\": \"8.0.100\", \"rollForward\": "
        "\"latestFeature\"}}); then `specops resume d1 write`")


def test_a_cached_preflight_with_a_key_this_version_does_not_write_is_validated_again(
        tmp_path: Path) -> None:
    from specops_dag.validation.dotnet import ValidationReport
    from specops_dag.validation.preflight import cache_path, cached_pass
    from specops_dag.workflow.model import ValidationConfig

    config, commit = ValidationConfig(), "d062c268797ee474587a19338daa23e965584f1a"
    path = cache_path(tmp_path, commit, config)
    record = {**ValidationReport(True, "full", "test", "ok").as_metadata(), "commit": commit,
              "checked_at": "2026-12-01T20:58:23Z", "cached": False, "cache": str(path)}
    path.write_text(json.dumps(record))
    assert cached_pass(tmp_path, commit, config) == {**record, "cached": True}
    path.write_text(json.dumps({**record, "cache_hit": True}))
    assert cached_pass(tmp_path, commit, config) is None
