"""Evidence that done is done, end to end (issue #21 items 1, 2 and 5): real codex, the literal
replay agent, the `dotnet` stand-in. An agent that deletes a test fails its attempt with the
list, whatever it says; the next attempt, which restores the test, passes; a risk.md that names
the change sends the step to a person, whose approval waives it. Each completed node leaves an
evidence.json that `specops evidence` renders as a pull-request body."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import pytest

from specops_dag.agent.codex import AgentSettings
from specops_dag.execution.step import run_step

from ..support.agents import guarded_harness, replay
from ..support.cli import specops_at
from ..support.dotnet import FIXTURES

TESTS = "tests/Calc.Tests/CalculatorTests.cs"


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
        tmp_path: Path, all_pass_dotnet: None) -> None:
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
    shown = specops_at(store.root, "evidence", "d1", "write", "--format", "json")
    assert (shown.returncode, shown.stderr) == (0, "")
    record = json.loads(shown.stdout)
    assert done.evidence is not None and second.evidence == done.evidence
    assert done.evidence.path == "phases/d1/write/evidence.json"
    assert (record["node"], record["status"], record["attempts"]) == ("write", "completed", 2)
    assert record["handoffs"] == {"notes": done.handoff["notes"].model_dump()}
    assert record["validation"]["trx"] == {"total": 2, "executed": 2, "passed": 2, "failed": 0,
                                           "skipped": 0}
    assert record["test_delta"] == {"baseline": {"executed": 2, "skipped": 0},
                                    "now": {"executed": 2, "skipped": 0},
                                    "executed": 0, "skipped": 0}
    assert [(a["attempt"], a["reason"]) for a in record["attempt_log"]] == [
        (1, "verification-failed"), (2, "completed")]
    assert record["commits"] == {"base": done.base_commit, "product": done.commits["product"]}
    # the product commit is the agent's notes and step record: the deleted file came back as it was
    assert TESTS not in [f["path"] for f in record["diff"]["files"]]
    sessions = record["cost"]["sessions"]
    assert [(s["attempt"], s["role"], s["model"]) for s in sessions] == [
        (1, "generator", "gpt-5.5"), (2, "generator", "gpt-5.5")]
    # five requests of the replay agent (it reads, runs the prompt's CHANGES command, writes,
    # says done: 5,000 input, 1,000 output tokens) at the dated default price of gpt-5.5: $1.25
    # and $10 per 1M
    assert [(s["input_tokens"], s["output_tokens"], s["usd"]) for s in sessions] == [
        (5000, 1000, 0.01625), (5000, 1000, 0.01625)]
    assert record["cost"]["usd"] == 0.0325
    assert record["agent"]["codex_version"] == json.loads(
        (Path(__file__).parents[2] / "package.json").read_text())["dependencies"]["@openai/codex"]
    assert record["agent"]["thread_ids"] == [s["thread_id"] for s in sessions]
    prompt = store.root / "phases/d1/write/prompt.md"
    assert record["prompt_sha256"] == hashlib.sha256(prompt.read_bytes()).hexdigest()
    body = specops_at(store.root, "evidence", "d1").stdout
    assert body.startswith("# d1: Write release notes.\n")
    assert "- tests: 2 executed, 2 passed, 0 failed, 0 skipped\n" in body
    assert "- test integrity: no change weakens the tests\n" in body
    assert "- attempts: 1: verification-failed, 2: completed\n" in body
    assert "- 12000 tokens (uncached input + output), $0.0325\n" in body
    pending = specops_at(store.root, "evidence", "d1", "review")
    assert (pending.returncode, pending.stdout, pending.stderr) == (
        2, "", "error: node `review` of `d1` has no evidence record: it is `pending`; "
               "evidence.json is written when a node completes (`specops run d1`)\n")
    evidence = store.root / done.evidence.path
    evidence.write_text(evidence.read_text().replace('"attempts": 2', '"attempts": 1'))
    edited = specops_at(store.root, "evidence", "d1")
    assert (edited.returncode, edited.stdout) == (2, "")
    assert edited.stderr == (
        f"error: phases/d1/write/evidence.json: changed since `write` completed (registered "
        f"sha256 {done.evidence.sha256[:12]}, now "
        f"{hashlib.sha256(evidence.read_bytes()).hexdigest()[:12]}); restore it from a backup, "
        "or from git, where a commit holds it (`git log --all -- phases/d1/write/evidence.json` "
        "lists the commits) — evidence is never edited\n")


@pytest.mark.e2e
def test_a_deletion_the_agents_risk_names_waits_for_a_person_and_their_approval_waives_it(
        tmp_path: Path, all_pass_dotnet: None) -> None:
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
    body = specops_at(store.root, "evidence", "d1", "write").stdout
    waived = body[body.index("### What was waived, and by whom"):]
    decision = after.approvals[-1]
    assert waived.startswith(
        "### What was waived, and by whom\n\n"
        f"- `{TESTS}` (deleted-test-file): {DELETED.partition(': ')[2]}\n"
        f"- approved by {decision.by} at {decision.at}: “agreed, the calculator goes away” "
        "(risks: phases/d1/write/risk.md)\n")
    assert decision.by.endswith("@" + socket.gethostname())


@pytest.mark.e2e
def test_a_risk_file_edited_after_its_approval_waives_nothing_and_waits_for_a_person_again(
        tmp_path: Path, all_pass_dotnet: None) -> None:
    from specops_dag.delivery.gates import approve
    from specops_dag.delivery.lifecycle import reopen
    from specops_dag.delivery.queries import open_risks

    store = guarded_harness(tmp_path)
    risk = store.root / "phases/d1/write/risk.md"
    first_text = "The release notes are not checked by anyone.\n"
    second_text = f"The release notes are not checked by anyone. {TESTS} is deleted.\n"
    nodes = {"write": [
        {"literal": {"risk": first_text}},
        {"literal": {"before": [{"shell": f"rm {TESTS}"}], "risk": second_text}}]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d1", "write", settings=settings(server, tmp_path))
        approve(store, "d1", "risk", note="fine, nobody checks notes")
        reopen(store, "d1", "write", reason="one more change")
        second = run_step(store, "d1", "write", settings=settings(server, tmp_path))
    assert (first.status, second.status) == ("completed", "environment")
    state = store.read("d1")
    step = state.get_step("write")
    assert risk.read_text() == second_text
    assert step.blocked_reason == (
        f"{guard_message(step.base_commit, risk)}\nThe agent's risk.md names every one: a "
        "person decides with `specops approve d1 risk` (or `--reject`), then `specops resume d1 "
        "write`")
    assert [(f.rule, f.waived) for f in step.integrity] == [("deleted-test-file", False)]
    digests = [hashlib.sha256(t.encode()).hexdigest() for t in (first_text, second_text)]
    assert [(r.path, r.sha256) for r in state.risks] == [
        ("phases/d1/write/risk.md", digests[0]), ("phases/d1/write/risk.md", digests[1])]
    assert open_risks(state) == state.risks[1:]  # the edited file waits for a person again
