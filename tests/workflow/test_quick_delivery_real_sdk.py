"""quick-delivery on the real SDK (issue 42, item 6): the `all-pass-net10` fixture as a git
harness root, `specops new` / `approve` / `run`, every node a real `codex exec` against the
replay agent in its literal mode. develop writes a real C# method and its xunit test through
codex's tools, as a model following red-green would: the new test first, `dotnet test` red (it
does not compile), the method, `dotnet test` green. The validation, the fail-before proof and
the commits are the product's own, with the real SDK 10."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from specops_dag.delivery.store import Store

from ..support.agents import replay
from ..support.dotnet import Harness, git_fixture

pytestmark = [pytest.mark.e2e, pytest.mark.dotnet]

AGENTS = ("# AGENTS.md\n\nA small .NET 10 calculator. Keep changes small, TargetFramework "
          "net10.0, tests under tests/.\n")
TEST_FILE = "tests/Calc.Tests/CalculatorSubtractTests.cs"
ADD_TEST = ("*** Begin Patch\n*** Add File: " + TEST_FILE + "\n"
            "+using Xunit;\n+\n+namespace Calc.Tests;\n+\n+public class CalculatorSubtractTests\n+{\n"
            "+    [Fact]\n+    public void Subtract_ReturnsDifference()\n+    {\n"
            "+        Assert.Equal(7, new Calculator().Subtract(10, 3));\n+    }\n+}\n"
            "*** End Patch\n")
ADD_METHOD = ("*** Begin Patch\n*** Update File: src/Calc/Calculator.cs\n@@ public class Calculator\n"
              " {\n     public int Add(int a, int b) => a + b;\n"
              "+\n+    public int Subtract(int a, int b) => a - b;\n*** End Patch\n")
RED_GREEN = "dotnet test --no-restore -c Release"
DEVELOP = [{"literal": {
    "before": [{"apply_patch": ADD_TEST}, {"shell": RED_GREEN, "yield_time_ms": 240_000},
               {"apply_patch": ADD_METHOD}, {"shell": RED_GREEN, "yield_time_ms": 240_000}],
    "files": {"develop/changes.md": "# Changes\n\n- src/Calc/Calculator.cs: Calculator.Subtract."
                                    "\n- " + TEST_FILE + ": Subtract_ReturnsDifference.\n",
              "develop/red-green.md": "# Red-green\n\n1. Subtract_ReturnsDifference written; "
                                      "`dotnet test` red: CS1061, no Subtract.\n2. Subtract "
                                      "added; `dotnet test` green: 3 passed.\n"}}}]




def shell_outputs(h: Harness, node: str, command: str) -> list[str]:
    """What codex answered the model for each run of the shell `command` in `node`, in order."""
    calls, seen = {}, {}
    for entry in h.requests():
        if entry["node"] != node:
            continue
        for item in entry["input"]:
            if item.get("type") == "function_call" and item.get("name") == "exec_command" and (
                    json.loads(item["arguments"])["cmd"] == command):
                calls[item["call_id"]] = command
            elif item.get("type") == "function_call_output" and item.get("call_id") in calls:
                seen[item["call_id"]] = str(item.get("output"))
    return [seen[c] for c in calls if c in seen]


def test_quick_delivery_on_net10_lands_a_real_method_and_test_proven_red_at_the_base(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = git_fixture(tmp_path, "all-pass-net10", AGENTS)
    with replay(tmp_path, {"develop": DEVELOP, "*": [{"literal": {}}]}) as server:
        h = Harness(root, {**clean_env, "SPECOPS_REPLAY_URL": server.url,
                           "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home")},
                    tmp_path / "requests.jsonl")
        created = h.ok("new", "quick-delivery", "q1", "--request", "Add Calculator.Subtract.")
        assert "net10.0" in created, created
        h.ok("approve", "q1", "target-write", "--note", "go")
        done = h.specops("run", "q1", "--executor", "in_process", "--timeout", "1500",
                         timeout=1600)
        assert done.returncode == 0, done.stdout + done.stderr
    state = Store(root).read("q1")
    assert [(s.name, s.status, s.attempts) for s in state.steps] == [
        ("develop", "completed", 1), ("verify", "completed", 1), ("delivery", "completed", 1)]
    develop = state.get_step("develop")
    report = develop.validation_report
    assert (report.passed, report.stage, report.target) == (True, "test", "net10.0")
    assert report.sdk_version.startswith("10.0."), report.sdk_version
    assert (report.executed, report.passed_tests) == (3, 3)
    # the agent saw its red and its green from the real SDK inside the sandbox
    red, green = shell_outputs(h, "develop", RED_GREEN)
    assert "Process exited with code 1" in red, red
    assert "error CS1061: 'Calculator' does not contain a definition for 'Subtract'" in red, red
    assert "Process exited with code 0" in green, green
    assert "Passed!  - Failed:     0, Passed:     3, Skipped:     0, Total:     3" in green, green
    # the product proved the new test red at the base and green at the head
    proof = develop.proof
    assert (proof.verdict, proof.base_commit) == ("proven", develop.base_commit)
    assert [(t.name, t.change, t.base, t.head) for t in proof.tests] == [
        ("Calc.Tests.CalculatorSubtractTests.Subtract_ReturnsDifference", "added",
         "did not compile", "passed")]
    assert "CS1061" in (proof.compile_error or ""), proof.compile_error
    # the commit landed on feat-q1: product first, then the node's metadata
    repo = git.Repo(root)
    product = repo.commit(develop.commits["product"])
    assert sorted(product.stats.files) == ["src/Calc/Calculator.cs", TEST_FILE]
    assert repo.is_ancestor(product, repo.commit("feat-q1"))
    assert "public int Subtract(int a, int b) => a - b;" in (
        product.tree / "src/Calc/Calculator.cs").data_stream.read().decode()
    assert repo.git.log("main", "--format=%s").splitlines() == ["fixture"]
