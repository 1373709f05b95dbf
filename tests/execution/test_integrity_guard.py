"""The test-integrity guard end to end (issue #21 items 1 and 5): real codex, the literal replay
agent, the `dotnet` stand-in. An agent that deletes a test fails its attempt with the list,
whatever it says; the next attempt, which restores the test, passes; a risk.md that names the
change sends the step to a person, whose approval waives it."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest

from specops_dag.agent.codex import AgentSettings
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step

from ..support.agents import agentic_git_harness, new, replay
from ..support.dotnet import FIXTURES, STANDIN

TESTS = "tests/Calc.Tests/CalculatorTests.cs"


def guarded_harness(tmp_path: Path) -> Store:
    root = agentic_git_harness(tmp_path, "all-pass")
    phase = root / "workflow_defs/phases/c-write.yaml"
    phase.write_text(phase.read_text().replace("validation: none", "validation: full"))
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.git.commit("-q", "-m", "a full phase")
    return new(root)


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{STANDIN}:{os.environ['PATH']}")
    monkeypatch.setenv("DOTNET_STANDIN_ANSWERS", str(STANDIN / "answers/all-pass.yaml"))


def restore_command() -> str:
    text = (FIXTURES / "all-pass" / TESTS).read_text()
    return f"cat > {TESTS} <<'CS'\n{text}CS"


def settings(server, tmp_path: Path) -> AgentSettings:
    return AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))


DELETED = ("tests/Calc.Tests/CalculatorTests.cs: test file deleted; its 2 tests are found nowhere "
           "else: `CalculatorTests.Add_ReturnsSum`, `CalculatorTests.Multiply_ReturnsProduct`")


def guard_message(base: str, risk: Path) -> str:
    return ("test integrity: 1 change weakens the tests (compared with base commit "
            f"{base[:12]}):\n- {DELETED}\nRestore them, or raise a risk ({risk}) that names "
            "each one (its path, `path:line` or `Class.Method`; `fewer-executed` or "
            "`more-skipped` for a TRX count) for a person to approve with `specops approve d1 "
            "risk`.")


@pytest.mark.e2e
def test_an_agent_that_deletes_a_test_fails_the_attempt_and_the_restoring_attempt_passes(
        tmp_path: Path, standin: None) -> None:
    store = guarded_harness(tmp_path)
    nodes = {"write": [
        # it says it is done, and its work passes the build and the tests that are left
        {"literal": {"before": [{"shell": f"rm {TESTS}"}]}},
        {"literal": {"before": [{"shell": restore_command()}]}}]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d1", "write", settings=settings(server, tmp_path))
        failed = store.read("d1").get_step("write")
        second = run_step(store, "d1", "write", settings=settings(server, tmp_path))
    assert first.status == "failed"
    risk = store.root / "phases/d1/write/risk.md"  # outside the worktree: the agent gets it whole
    assert first.message == f"attempt 1/3 failed: {guard_message(failed.base_commit, risk)}"
    assert [(f.rule, f.path, f.waived) for f in failed.integrity] == [
        ("deleted-test-file", TESTS, False)]
    assert failed.attempt_log[0].reason == "verification-failed"
    assert second.status == "completed"
    done = store.read("d1").get_step("write")
    assert (done.attempts, done.integrity) == (2, [])
    assert (store.root / TESTS).read_text() == (FIXTURES / "all-pass" / TESTS).read_text()


@pytest.mark.e2e
def test_a_deletion_the_agents_risk_names_waits_for_a_person_and_their_approval_waives_it(
        tmp_path: Path, standin: None) -> None:
    from specops_dag.delivery.gates import approve
    from specops_dag.delivery.lifecycle import resume

    store = guarded_harness(tmp_path)
    risk = store.root / "phases/d1/write/risk.md"
    write_risk = (f"cat > {risk} <<'MD'\nThe calculator tests are obsolete: {TESTS} is deleted "
                  "on purpose.\nMD")
    nodes = {"write": [
        {"literal": {"before": [{"shell": f"rm {TESTS}"}]}},
        {"literal": {"before": [{"shell": write_risk}]}},  # what the failure it was told names
        {"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d1", "write", settings=settings(server, tmp_path))
        second = run_step(store, "d1", "write", settings=settings(server, tmp_path))
        blocked = store.read("d1")
        approve(store, "d1", "risk", note="agreed, the calculator goes away")
        resume(store, "d1", "write")
        third = run_step(store, "d1", "write", settings=settings(server, tmp_path))
    step = blocked.get_step("write")
    assert (first.status, second.status, step.status, step.attempts) == (
        "failed", "environment", "blocked", 2)
    assert step.blocked_reason == (
        f"{guard_message(step.base_commit, risk)}\nThe agent's risk.md names every one: a "
        "person decides with `specops approve d1 risk` (or `--reject`), then `specops resume d1 "
        "write`")
    assert [r.path for r in blocked.risks] == ["phases/d1/write/risk.md"]
    assert third.status == "completed"
    after = store.read("d1")
    assert [(f.rule, f.waived) for f in after.get_step("write").integrity] == [
        ("deleted-test-file", True)]
    assert len(after.risks) == 1  # completing did not raise the decided risk again
