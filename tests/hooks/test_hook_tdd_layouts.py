"""TDD without false denials (issue #17, item 5): paths resolve against the repository root
whatever folder the call runs in; tests in `test/`, sibling and nested `X.Tests` projects and
flat layouts count; a type without behaviour needs no test; untested behaviour stays denied."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ..support.hooks import SPECOPS_VARS, call, denial

CALC = "src/Calc/Calculator.cs"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with a product file; the session's cwd is elsewhere."""
    root = tmp_path / "repo"
    (root / "src/Calc").mkdir(parents=True)
    (root / CALC).write_text("class Calculator { }\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    for var in SPECOPS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return root


def put(root: Path, rel: str, text: str = "class T { }\n") -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


def decide(cwd: Path, command: str, tool: str = "Bash", **tool_input: str) -> str | None:
    data = {"hook_event_name": "PreToolUse", "tool_name": tool, "cwd": str(cwd),
            "tool_input": {"command": command, **tool_input}}
    code, out = call("pre-tool-use", json.dumps(data).encode())
    assert code == 0
    return denial(out)


def patch(*lines: str) -> str:
    return "*** Begin Patch\n" + "\n".join(lines) + "\n*** End Patch\n"


ADD_METHOD = "printf '  public int Twice(int x) { return 2 * x; }\\n' >> Calculator.cs"


def test_a_test_edited_from_its_own_folder_is_not_taken_for_product_code(repo: Path) -> None:
    put(repo, "tests/Calc.Tests/CalculatorTests.cs")
    folder = repo / "tests/Calc.Tests"
    assert decide(folder, "printf '// more\\n' >> CalculatorTests.cs") is None


def test_a_product_edit_from_its_own_folder_finds_the_test_at_the_repository_root(
        repo: Path) -> None:
    put(repo, "tests/Calc.Tests/CalculatorTests.cs")
    assert decide(repo / "src/Calc", ADD_METHOD) is None


def test_the_calls_workdir_is_resolved_against_the_session_cwd(repo: Path) -> None:
    put(repo, "tests/Calc.Tests/CalculatorTests.cs")
    assert decide(repo, ADD_METHOD, workdir="src/Calc") is None
    assert decide(repo, ADD_METHOD, workdir="tests") is None  # writes tests/Calculator.cs


@pytest.mark.parametrize("test_file", [
    "test/Calc.Tests/CalculatorTests.cs", "src/Calc.Tests/CalculatorTests.cs",
    "src/Calc/Calc.Tests/CalculatorTests.cs", "src/Calc/CalculatorTests.cs",
    "src/Calc.UnitTests/Core/CalculatorTests.cs",
], ids=["test/ root", "sibling project", "nested project", "flat, beside", "sibling UnitTests"])
def test_real_repository_layouts_find_the_test(repo: Path, test_file: str) -> None:
    put(repo, test_file)
    assert decide(repo, patch(f"*** Update File: {CALC}", "@@", "+  public int One() => 1;"),
                  tool="apply_patch") is None


def test_an_interface_added_beside_its_tested_implementation_is_allowed(repo: Path) -> None:
    command = patch("*** Add File: tests/Calc.Tests/AdderTests.cs", "+class AdderTests { }",
                    "*** Add File: src/Calc/Adder.cs", "+class Adder : IAdder { }",
                    "*** Add File: src/Calc/IAdder.cs",
                    "+/// <summary>Adds.</summary>", "+public interface IAdder", "+{",
                    "+    int Add(int a, int b);", "+    string Name { get; }", "+}")
    assert decide(repo, command, tool="apply_patch") is None


@pytest.mark.parametrize("body", [
    ["+public enum Color { Red = 1, Green }"],
    ["+public record Point(int X, int Y);"],
    ["+[Flags]", "+public enum Access", "+{", "+    Read = 1, // \"{ get {\"",
     "+    Write = 2", "+}"],
], ids=["enum", "positional record", "attributed enum"])
def test_types_without_behaviour_need_no_test_file(repo: Path, body: list[str]) -> None:
    assert decide(repo, patch("*** Add File: src/Calc/Kinds.cs", *body),
                  tool="apply_patch") is None


@pytest.mark.parametrize("body", [
    ["+public interface IClock", "+{", "+    DateTime Now() => DateTime.UtcNow;", "+}"],
    ["+public record Money(decimal Amount)", "+{",
     "+    public Money Half() { return new(Amount / 2); }", "+}"],
    ["+public class Kinds { }"],
    ["+public enum E { A }", "+public static class Ext { public static int F(this E e) => 1; }"],
    ["+public int Twice(int x) { return 2 * x; }"],
], ids=["default interface method", "record with a method", "a class", "enum with extension",
        "a method"])
def test_behaviour_without_a_test_is_still_denied_naming_the_expected_test(
        repo: Path, body: list[str]) -> None:
    reason = decide(repo, patch("*** Add File: src/Calc/Kinds.cs", *body), tool="apply_patch")
    assert reason is not None
    assert reason.startswith("TDD: C# product code needs a matching test file first: "
                             "src/Calc/Kinds.cs (looked for KindsTests.cs or KindsTest.cs under "
                             "tests/, test/, src/Calc/tests/, src/Calc/test/, src/Calc/)"), reason


def test_a_test_created_by_an_earlier_call_of_the_attempt_counts(repo: Path) -> None:
    assert decide(repo, ADD_METHOD, workdir="src/Calc") is not None
    assert decide(repo, "mkdir -p tests/Calc.Tests && printf 'class CalculatorTests { }\\n' > "
                  "tests/Calc.Tests/CalculatorTests.cs") is None
    put(repo, "tests/Calc.Tests/CalculatorTests.cs")  # what that call wrote
    assert decide(repo, ADD_METHOD, workdir="src/Calc") is None
