"""The fail-before, pass-after proof (issue 42 item 5): the tests a step added or changed, applied
onto its base commit in a scratch worktree, fail or do not compile there and pass at its head.
Which tests are picked is read from git and the files; the proofs themselves run the real .NET
SDK on a copy of `dotnet_fixtures/all-pass-net10` committed into a git repository, and once
through `run_step` with the real codex CLI and the replay agent."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import git
import pytest

from specops_dag.execution.step import run_step
from specops_dag.validation.dotnet import ValidationReport, validate_full
from specops_dag.validation.proof import prove, select
from specops_dag.workflow.model import ValidationConfig

from ..support.agents import agentic_git_harness, new, replay, settings_for
from ..support.cli import specops_at
from ..support.dotnet import copy_fixture
from ..support.git import commit_all

TESTS = "tests/Calc.Tests/CalculatorTests.cs"
CALC = "src/Calc/Calculator.cs"
PROJECT = "tests/Calc.Tests/Calc.Tests.csproj"
needs_sdk = pytest.mark.skipif(shutil.which("dotnet") is None, reason="no .NET SDK on PATH")


def committed_fixture(tmp_path: Path) -> tuple[Path, str]:
    """(a git repository holding all-pass-net10, its one commit)."""
    root = copy_fixture(tmp_path, "all-pass-net10")
    commit_all(root)
    return root, git.Repo(root).head.commit.hexsha


def edit(root: Path, path: str, old: str, new: str) -> None:
    text = (root / path).read_text()
    assert text.count(old) == 1, old
    (root / path).write_text(text.replace(old, new))


def add_test(root: Path, code: str) -> None:
    """A test method at the end of CalculatorTests."""
    text = (root / TESTS).read_text().rstrip()
    (root / TESTS).write_text(text[:-1].rstrip() + "\n\n" + code + "}\n")


SUBTRACT = """    [Fact]
    public void Subtract_ReturnsDifference()
    {
        Assert.Equal(1, new Calculator().Subtract(3, 2));
    }
"""


def test_the_added_and_changed_tests_of_the_test_projects_are_picked_and_a_renamed_one_is_not(
        tmp_path: Path) -> None:
    root, base = committed_fixture(tmp_path)
    add_test(root, SUBTRACT)
    edit(root, TESTS, "Assert.Equal(6, calculator.Multiply(2, 3));",
         "Assert.Equal(-6, calculator.Multiply(-2, 3));")
    edit(root, TESTS, "public void Add_ReturnsSum()", "public void Add_ReturnsTheSum()")
    (root / "tests/Calc.Tests/Theories.cs").write_text(
        "namespace Calc.Tests;\n\npublic class Theories\n{\n    [Theory]\n    [InlineData(1)]\n"
        "    public void Positive(int n) => Assert.True(n > 0);\n}\n")
    commit_all(root)  # a test committed by the step counts as much as one on disk
    second = git.Repo(root).head.commit.hexsha
    edit(root, "tests/Calc.Tests/Theories.cs", "[InlineData(1)]",
         "[InlineData(1)]\n    [InlineData(2)]")
    (root / "tests/Calc.Tests/Fakes.cs").write_text("namespace Calc.Tests;\n\nclass Fake {}\n")
    (root / "src/Calc/SelfCheck.cs").write_text(  # a test attribute outside a test project
        "namespace Calc;\n\npublic class SelfCheck\n{\n    [Fact]\n    public void Ok() {}\n}\n")
    chosen = select(root, base, [PROJECT])
    assert [(t.name, t.path, t.line, t.change) for t in chosen.tests] == [
        ("CalculatorTests.Multiply_ReturnsProduct", TESTS, 16, "changed"),
        ("CalculatorTests.Subtract_ReturnsDifference", TESTS, 24, "added"),
        ("Theories.Positive", "tests/Calc.Tests/Theories.cs", 8, "added")]
    assert (chosen.copy, chosen.delete) == (
        (TESTS, "tests/Calc.Tests/Fakes.cs", "tests/Calc.Tests/Theories.cs"), ())
    assert [(t.name, t.change) for t in select(root, second, [PROJECT]).tests] == [
        ("Theories.Positive", "changed")]  # a data row added
    (root / "tests/Calc.Tests/Theories.cs").unlink()
    commit_all(root)
    assert select(root, base, [PROJECT]).delete == ()
    assert select(root, second, [PROJECT]).delete == ("tests/Calc.Tests/Theories.cs",)


HEAD = ValidationReport(True, "full", "test", "passed", projects=({"project": PROJECT,
                                                                     "trx": None},))


def test_a_step_that_adds_or_changes_no_test_has_nothing_to_prove_and_makes_no_worktree(
        tmp_path: Path) -> None:
    root, base = committed_fixture(tmp_path)
    edit(root, CALC, "=> a + b;", "=> b + a;")
    proof = prove(root, base, HEAD, scratch=tmp_path / "scratch", log_dir=tmp_path / "logs",
                  env=dict(os.environ), config=ValidationConfig())
    assert (proof.verdict, proof.detail, proof.tests) == (
        "no test added or changed", f"no test added or changed since {base[:12]}", ())
    assert not (tmp_path / "scratch").exists() and not (tmp_path / "logs").exists()


def test_a_proof_the_validation_left_no_time_is_not_finished_and_removes_its_worktree(
        tmp_path: Path) -> None:
    root, base = committed_fixture(tmp_path)
    add_test(root, SUBTRACT)
    scratch = tmp_path / "scratch" / "tree"
    proof = prove(root, base, HEAD, scratch=scratch, log_dir=tmp_path / "logs",
                  env=dict(os.environ), config=ValidationConfig(), deadline_s=0)
    assert (proof.verdict, proof.blame) == ("not finished", "attempt")
    assert proof.detail == (
        "fail-before proof: not finished: the validation's 1800 s deadline, which the proof "
        "shares, ran out at the base's `sdk`; make the build and the tests faster")
    assert [(t.name, t.base, t.head) for t in proof.tests] == [
        ("CalculatorTests.Subtract_ReturnsDifference", "not run", "not run")]
    assert not scratch.exists()
    assert git.Repo(root).git.worktree("list", "--porcelain").count("worktree ") == 1


def proven(tmp_path: Path, root: Path, base: str) -> dict:
    """Validate the step's head as the attempt does, then prove its tests; the record."""
    env = dict(os.environ)
    head = validate_full(root, tmp_path / "logs", env=env)
    assert head.passed, head.describe()
    scratch = tmp_path / "scratch" / "tree"
    proof = prove(root, base, head, scratch=scratch, log_dir=tmp_path / "logs" / "proof",
                  env=env, config=ValidationConfig(), shown_from=tmp_path)
    assert not scratch.exists()
    assert git.Repo(root).git.worktree("list", "--porcelain").count("worktree ") == 1
    record = proof.as_record()
    assert record["base_commit"] == base and record["duration_s"] > 0
    assert record["head_trx"] == [str(Path(p["trx"]).relative_to(tmp_path))
                                  for p in head.projects]
    return record


@pytest.mark.dotnet
@pytest.mark.e2e
@needs_sdk
def test_a_new_test_of_a_new_method_does_not_compile_at_the_base_and_is_proven(
        tmp_path: Path) -> None:
    root, base = committed_fixture(tmp_path)
    edit(root, CALC, "    public int Multiply",
         "    public int Subtract(int a, int b) => a - b;\n\n    public int Multiply")
    add_test(root, SUBTRACT)
    record = proven(tmp_path, root, base)
    assert (record["verdict"], record["detail"]) == (
        "proven", f"1 test(s) added or changed since {base[:12]}: at the base 1 did not compile; "
                  "at the head 1 passed")
    assert record["tests"] == [{"name": "Calc.Tests.CalculatorTests.Subtract_ReturnsDifference",
                                "path": TESTS, "line": 24, "change": "added",
                                "base": "did not compile", "head": "passed", "waived": False}]
    assert record["compile_error"] == (
        f"{TESTS}(26,42): error CS1061: 'Calculator' does not contain a definition for "
        "'Subtract' and no accessible extension method 'Subtract' accepting a first argument of "
        "type 'Calculator' could be found (are you missing a using directive or an assembly "
        f"reference?) [{PROJECT}]")
    assert record["base_trx"] == []


@pytest.mark.dotnet
@pytest.mark.e2e
@needs_sdk
def test_a_changed_test_that_checks_new_behaviour_fails_at_the_base_and_is_proven(
        tmp_path: Path) -> None:
    root, base = committed_fixture(tmp_path)
    edit(root, CALC, "=> a + b;", "=> checked(a + b);")
    edit(root, TESTS, "Assert.Equal(5, calculator.Add(2, 3));",
         "Assert.Equal(5, calculator.Add(2, 3));\n"
         "        Assert.Throws<OverflowException>(() => calculator.Add(int.MaxValue, 1));")
    record = proven(tmp_path, root, base)
    assert (record["verdict"], record["compile_error"]) == ("proven", None)
    assert record["tests"] == [{"name": "Calc.Tests.CalculatorTests.Add_ReturnsSum",
                                "path": TESTS, "line": 8, "change": "changed",
                                "base": "failed", "head": "passed", "waived": False}]
    [trx] = record["base_trx"]
    assert trx.startswith("logs/proof/trx-") and trx.endswith("/results.trx")
    assert "Assert.Throws() Failure" in (tmp_path / trx).read_text()


COMMUTES = """using Xunit;

namespace Calc.Tests;

public class CommutativityTests
{
    [Fact]
    public void Add_IsCommutative()
    {
        Assert.Equal(new Calculator().Add(2, 3), new Calculator().Add(3, 2));
    }
}
"""


def proof_message(base: str, risk: Path) -> str:
    return (f"fail-before proof: 1 test the step added or changed already passes at base "
            f"commit {base[:12]}, so it proves nothing about this change:\n"
            "- tests/Calc.Tests/CommutativityTests.cs:8: "
            "`Calc.Tests.CommutativityTests.Add_IsCommutative` (added) passed at the base, passed "
            "at the head\nMake each one exercise the new behaviour (it must fail, or not "
            f"compile, against the base), or raise a risk ({risk}) that names each one "
            "(`Class.Method` or its path) for a person to approve with `specops approve d1 "
            "risk`.")


@pytest.mark.dotnet
@pytest.mark.e2e
@needs_sdk
def test_a_new_test_that_already_passes_at_the_base_fails_the_attempt_until_a_risk_names_it(
        tmp_path: Path) -> None:
    from specops_dag.delivery.gates import approve
    from specops_dag.delivery.lifecycle import resume

    root = agentic_git_harness(tmp_path, "all-pass-net10")
    phase = root / "workflow_defs/phases/c-write.yaml"
    phase.write_text(phase.read_text().replace("validation: none", "validation: full"))
    commit_all(root)
    store = new(root)
    risk = store.root / "phases/d1/write/risk.md"
    write_test = f"cat > tests/Calc.Tests/CommutativityTests.cs <<'CS'\n{COMMUTES}CS"
    write_risk = (f"cat > {risk} <<'MD'\n`CommutativityTests.Add_IsCommutative` pins down what "
                  "Add already does.\nMD")
    nodes = {"write": [{"literal": {"before": [{"shell": write_test}]}},
                       {"literal": {"before": [{"shell": write_risk}]}},
                       {"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        failed = store.read("d1").get_step("write")
        second = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        blocked = store.read("d1").get_step("write")
        approve(store, "d1", "risk", note="agreed: it documents Add")
        resume(store, "d1", "write")
        third = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    base = failed.base_commit
    assert first.message == f"attempt 1/3 failed: {proof_message(base, risk)}"
    assert failed.proof is not None and failed.proof.verdict == "passes at base"
    assert [(t.base, t.head, t.waived) for t in failed.proof.tests] == [
        ("passed", "passed", False)]
    assert (second.status, blocked.status) == ("environment", "blocked")
    assert blocked.blocked_reason == (
        f"{proof_message(base, risk)}\nThe agent's risk.md names every one: a person decides "
        "with `specops approve d1 risk` (or `--reject`), then `specops resume d1 write`")
    assert third.status == "completed", third.message
    done = store.read("d1").get_step("write")
    assert done.proof is not None and [(t.name, t.waived) for t in done.proof.tests] == [
        ("Calc.Tests.CommutativityTests.Add_IsCommutative", True)]
    assert not (store.root / ".specops/proof/d1-write").exists()
    record = json.loads(specops_at(store.root, "evidence", "d1", "write", "--format",
                                   "json").stdout)
    assert record["proof"] == done.proof.model_dump()
    body = specops_at(store.root, "evidence", "d1", "write").stdout
    section = body[body.index("### Fail before, pass after"):body.index("### What was waived")]
    assert section.splitlines()[:4] == [
        "### Fail before, pass after", "",
        f"- passes at base ({done.proof.duration_s:g} s): 1 test(s) added or changed since "
        f"{base[:12]}: at the base 1 passed; at the head 1 passed",
        "  - `Calc.Tests.CommutativityTests.Add_IsCommutative` (added, "
        "`tests/Calc.Tests/CommutativityTests.cs:8`): passed at the base, passed at the head "
        "(waived)"]
    assert ("- `tests/Calc.Tests/CommutativityTests.cs:8` (passes-at-base): test "
            "`Calc.Tests.CommutativityTests.Add_IsCommutative` passed at the base\n") in body
