"""Runs killed with SIGKILL at several points leave valid state; the next run re-runs only the
interrupted step within its remaining budget, never a completed one, and no agent survives."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil
import pytest

from specops_dag.delivery.store import Store

from ..support.agents import agentic_git_harness, attempts, replay, wrote
from ..support.cli import job_execute, specops
from ..support.dotnet import STANDIN
from ..support.git import git_harness
from ..support.processes import kill_when, start_run, survivors

pytestmark = pytest.mark.e2e


def test_a_run_killed_during_codex_resumes_the_interrupted_step_only(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = agentic_git_harness(tmp_path)
    assert specops(clean_env, root, "new", "agentic", "d1", "--request", "x").returncode == 0
    nodes = {"write": [[{"shell": "sleep 600", "sleep_s": 0}, {"hang": True}],
                       {"literal": {}}],
             "review": [{"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        env = {**clean_env, "SPECOPS_REPLAY_URL": server.url,
               "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home")}
        log = tmp_path / "requests.jsonl"
        proc = start_run(env, root, "agentic_job")
        kill_when(proc, lambda: log.exists() and log.read_text().count('"node": "write"') >= 2)
        state = Store(root).read("d1")  # parses
        assert [(s.name, s.status, s.attempts) for s in state.steps] == [
            ("write", "running", 1), ("review", "pending", 0)]
        assert survivors(str(root)) == []
        run = job_execute(env, root, "agentic_job", "d1")
    assert run.returncode == 0, run.stderr[-2000:]
    state = Store(root).read("d1")
    assert [(s.name, s.status, s.attempts) for s in state.steps] == [
        ("write", "completed", 2), ("review", "completed", 1)]
    phases = f"{root}/phases"
    assert [s.summary for s in state.steps] == [wrote("write", "notes.md", phases),
                                                wrote("review", "review.md", phases)]
    assert [len(a) for a in attempts(tmp_path, "write")] == [2, 4]  # killed; read, changes, write, done


def test_a_run_killed_during_validation_resumes_within_the_budget(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = agentic_git_harness(tmp_path, "all-pass")
    calls = tmp_path / "dotnet-calls.log"
    env = {**clean_env, "PATH": f"{STANDIN}:{clean_env['PATH']}", "DOTNET_STANDIN_LOG": str(calls),
           "DOTNET_STANDIN_ANSWERS": str(STANDIN / "answers/hang-build-after-attempt.yaml")}
    assert specops(env, root, "new", "agentic", "d1", "--request", "x", "--validation",
                   "full").returncode == 0
    # the base passes its preflight; the attempt's tree (with the marker) hangs the build
    hang = {"literal": {"before": [{"shell": "touch src/Calc/hang.marker"}]}}
    nodes = {"write": [hang, {"literal": {}}], "review": [{"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        env.update(SPECOPS_REPLAY_URL=server.url,
                   SPECOPS_CODEX_HOME=str(tmp_path / "codex-home"))
        proc = start_run(env, root, "agentic_job")
        kill_when(proc, lambda: calls.exists() and sum(  # the preflight's build, then the attempt's
            line.startswith("build ") for line in calls.read_text().splitlines()) >= 2)
        assert Store(root).read("d1").get_step("write").status == "running"
        assert survivors(str(STANDIN / "dotnet")) == []
        env["DOTNET_STANDIN_ANSWERS"] = str(STANDIN / "answers/all-pass.yaml")
        run = job_execute(env, root, "agentic_job", "d1")
    assert run.returncode == 0, run.stderr[-2000:]
    state = Store(root).read("d1")
    assert [(s.name, s.status, s.attempts) for s in state.steps] == [
        ("write", "completed", 2), ("review", "completed", 1)]
    assert state.get_step("write").validation_report.stage == "test"
    assert state.get_step("write").summary == wrote("write", "notes.md", f"{root}/phases")
    assert [a[-1]["literal"]["action"] for a in attempts(tmp_path, "write")] == ["done", "done"]


def test_a_run_killed_between_the_two_commits_leaves_valid_state_and_resumes(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    from specops_dag.execution.step import run_step

    root, _ = git_harness(tmp_path)
    calls = tmp_path / "calls.log"
    env = {**clean_env, "CALLS": str(calls)}
    assert specops(env, root, "new", "diamond", "d1", "--request", "x").returncode == 0
    os.environ["CALLS"] = str(calls)
    assert run_step(Store(root), "d1", "a").status == "completed"  # creates the worktree
    marker = tmp_path / "after-product-commit"
    # specops commits with git's own CLI and no repository hooks: a `git` wrapper first on PATH
    # pauses right after b's product commit, before the metadata commit.
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin/git"
    wrapper.write_text(f"#!/bin/sh\n{shutil.which('git')} \"$@\"; rc=$?\n"
                       f"case \"$*\" in *'b attempt 1: product'*) touch {marker}; "
                       "exec sleep 617;; esac\nexit $rc\n")
    wrapper.chmod(0o755)
    proc = start_run({**env, "PATH": f"{wrapper.parent}:{env['PATH']}"}, root, "diamond_job")
    kill_when(proc, marker.exists)
    for p in psutil.process_iter(["cmdline"]):  # the wrapper's sleep: ours, ended by its PID
        if (p.info["cmdline"] or [])[:2] == ["sleep", "617"]:
            p.kill()
    state = Store(root).read("d1")
    assert {s.name: s.status for s in state.steps}["a"] == "completed"
    assert {s.name: s.status for s in state.steps}["b"] == "running"
    calls.write_text("")
    run = job_execute(env, root, "diamond_job", "d1")
    assert run.returncode == 0, run.stderr[-2000:]
    state = Store(root).read("d1")
    assert [(s.name, s.status) for s in state.steps] == [(n, "completed") for n in "abcd"]
    assert "a" not in calls.read_text().split()
    assert state.get_step("b").attempts == 2
