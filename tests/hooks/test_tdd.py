"""The TDD rule of `specops hook pre-tool-use` (`hooks/tdd.py`, seed 001 §7) and its
`workflow_defs/hooks.json`. Then TDD without false denials (issue #17, item 5): paths resolve
against the repository root whatever folder the call runs in; tests in `test/`, sibling and
nested `X.Tests` projects and flat layouts count; a type without behaviour needs no test;
untested behaviour stays denied."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from specops_dag.hooks import tdd

from ..support.hooks import SPECOPS_VARS, call, denial, payload

PATTERNS = "OrderServiceTests.cs or OrderServiceTest.cs"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    for rel in ("src/Orders/OrderService.cs", "src/Orders/Program.cs"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("class X {}\n")
    for var in SPECOPS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(root)
    return root


def put(root: Path, *rels: str) -> None:
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("class T {}\n")


def config(root: Path, data: object) -> Path:
    path = root / "workflow_defs/hooks.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def patch(*lines: str) -> str:
    return "*** Begin Patch\n" + "\n".join(lines) + "\n*** End Patch\n"


def edit(rel: str) -> str:
    return patch(f"*** Update File: {rel}", "@@", "-class X {}", "+class X { }")


def decide(root: Path, command: str, tool: str = "apply_patch") -> str | None:
    code, out = call("pre-tool-use", payload(command, root, tool=tool))
    assert code == 0
    return denial(out)


def missing(root: Path, rel: str, looked: str, where: str) -> str:
    return (f"TDD: C# product code needs a matching test file first: {rel} (looked for {looked} "
            f"under {where}). Write the failing test first (apply_patch may add it and the "
            "product file together); if the file needs no test, say why in the file the current "
            "step names under RISK, and a person decides")


def test_a_product_edit_without_a_test_file_is_denied_with_where_it_looked(repo: Path) -> None:
    assert decide(repo, edit("src/Orders/OrderService.cs")) == missing(
        repo, "src/Orders/OrderService.cs", PATTERNS, "tests/, test/, src/Orders/tests/, src/Orders/test/, src/Orders/")


@pytest.mark.parametrize("test_file", [
    "tests/Orders.Tests/OrderServiceTests.cs", "tests/OrderServiceTest.cs",
    "src/Orders/tests/OrderServiceTests.cs", "src/Orders/test/Unit/OrderServiceTests.cs",
], ids=["tests root, nested", "tests root, Test suffix", "tests beside", "test beside, nested"])
def test_a_matching_test_file_in_a_seed_location_allows_the_edit(repo: Path,
                                                                  test_file: str) -> None:
    put(repo, test_file)
    assert decide(repo, edit("src/Orders/OrderService.cs")) is None


@pytest.mark.parametrize("test_file", [
    "tests/fixtures/OrderServiceTests.cs", "tests/Orders.Tests/bin/Debug/OrderServiceTests.cs",
    "tests/Orders.Tests/obj/OrderServiceTests.cs", "other/OrderServiceTests.cs",
    "tests/OrderServiceSpec.cs",
], ids=["fixtures", "bin", "obj", "not a test root", "other name"])
def test_build_outputs_fixtures_and_other_places_are_no_evidence(repo: Path,
                                                                  test_file: str) -> None:
    put(repo, test_file)
    assert decide(repo, edit("src/Orders/OrderService.cs")) is not None


@pytest.mark.parametrize("rel", ["src/Orders/Program.cs", "src/Forms/Main.Designer.cs"],
                         ids=["Program.cs", "Designer.cs"])
def test_program_and_designer_files_get_no_exemption_by_name(repo: Path, rel: str) -> None:
    stem = Path(rel).name[:-3]
    looked = " or ".join(dict.fromkeys(p.replace("{stem}", s) for s in (stem, stem.split(".")[0])
                                       for p in tdd.DEFAULT_PATTERNS))
    folder = str(Path(rel).parent)
    assert decide(repo, patch(f"*** Add File: {rel}", "+class P {}")) == missing(
        repo, rel, looked, f"tests/, test/, {folder}/tests/, {folder}/test/, {folder}/")


def test_a_partial_class_file_matches_the_test_of_its_type(repo: Path) -> None:
    put(repo, "tests/MainTests.cs")
    assert decide(repo, patch("*** Add File: src/Forms/Main.Designer.cs", "+partial class M {}")) \
        is None


@pytest.mark.parametrize("rel", [
    "src/Orders/bin/Debug/net8.0/Gen.cs", "src/Orders/obj/Debug/Gen.g.cs",
    "tests/Orders.Tests/Helpers/FakeClock.cs", "src/Orders.Tests/Builders.cs",
    "src/Orders/test/Fakes.cs", "packages/Newtonsoft/Json.cs", "phases/d1/develop/sample.cs",
    "docs/Readme.md",
], ids=["bin", "obj", "test root helper", "test project", "test folder", "packages",
        "delivery state", "not C#"])
def test_outputs_test_code_packages_and_other_files_need_no_test(repo: Path, rel: str) -> None:
    assert decide(repo, patch(f"*** Add File: {rel}", "+x")) is None


def test_a_test_file_added_in_the_same_patch_counts(repo: Path) -> None:
    text = patch("*** Add File: tests/Orders.Tests/CartTests.cs", "+class CartTests {}",
                 "*** Add File: src/Orders/Cart.cs", "+class Cart {}")
    assert decide(repo, text) is None


def test_a_test_file_deleted_in_the_same_patch_does_not_count(repo: Path) -> None:
    put(repo, "tests/OrderServiceTests.cs")
    text = patch("*** Delete File: tests/OrderServiceTests.cs",
                 "*** Update File: src/Orders/OrderService.cs", "@@", "-a", "+b")
    assert decide(repo, text) is not None


def test_a_moved_file_is_checked_under_its_new_name(repo: Path) -> None:
    put(repo, "tests/OrderServiceTests.cs")
    text = patch("*** Update File: src/Orders/OrderService.cs", "*** Move to: src/Orders/Orders.cs",
                 "@@", "-a", "+b")
    assert decide(repo, text) == missing(repo, "src/Orders/Orders.cs",
                                         "OrdersTests.cs or OrdersTest.cs",
                                         "tests/, test/, src/Orders/tests/, src/Orders/test/, src/Orders/")


def test_deleting_a_product_file_needs_no_test(repo: Path) -> None:
    assert decide(repo, patch("*** Delete File: src/Orders/OrderService.cs")) is None


@pytest.mark.parametrize("command", [
    "cat > src/Orders/Cart.cs <<'EOF'\nclass Cart {}\nEOF",
    "cd src/Orders && printf 'class Cart {}' > Cart.cs",
    "echo '// x' >> src/Orders/Cart.cs",
    "sed -i 's/a/b/' src/Orders/Cart.cs",
    "cp /tmp/Template.cs src/Orders/Cart.cs",
    "mv src/Orders/OrderService.cs src/Orders/Cart.cs",
    "tee src/Orders/Cart.cs < /dev/null",
    "touch src/Orders/Cart.cs",
    "bash -c 'echo x > src/Orders/Cart.cs'",
    "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: src/Orders/Cart.cs\n+class Cart {}\n"
    "*** End Patch\nEOF",
], ids=["heredoc", "cd then redirect", "append", "sed -i", "cp", "mv", "tee", "touch",
        "bash -c", "apply_patch heredoc"])
def test_shell_writes_to_product_files_are_checked(repo: Path, command: str) -> None:
    assert decide(repo, command, tool="Bash") == missing(
        repo, "src/Orders/Cart.cs", "CartTests.cs or CartTest.cs",
        "tests/, test/, src/Orders/tests/, src/Orders/test/, src/Orders/")


def test_a_glob_or_loop_over_files_checks_each_file_it_matches(repo: Path) -> None:
    put(repo, "tests/OrderServiceTests.cs")
    assert decide(repo, "sed -i 's/a/b/' src/Orders/*.cs", tool="Bash") == missing(
        repo, "src/Orders/Program.cs", "ProgramTests.cs or ProgramTest.cs",
        "tests/, test/, src/Orders/tests/, src/Orders/test/, src/Orders/")
    put(repo, "tests/ProgramTests.cs")
    assert decide(repo, 'for f in src/Orders/*.cs; do sed -i s/a/b/ "$f"; done', tool="Bash") \
        is None


def test_the_example_config_of_the_issue_loads(repo: Path) -> None:
    config(repo, {"tdd": {"testPatterns": ["{stem}Tests.cs", "{stem}Test.cs"],
                          "testRoots": ["tests"],
                          "exclude": [{"path": "src/Gen/Api.cs", "reason": "generated client"}],
                          "generated": ["src/Generated/"]}})
    rules = tdd.load_rules(str(repo))
    assert (rules.exclude, rules.generated) == ({"src/Gen/Api.cs": "generated client"},
                                                ("src/Generated",))
    assert decide(repo, patch("*** Add File: src/Generated/Client.cs", "+x")) is None


def test_reading_product_files_needs_no_test(repo: Path) -> None:
    assert decide(repo, "cat src/Orders/Cart.cs && sed -n 1p src/Orders/OrderService.cs",
                  tool="Bash") is None


def test_configured_patterns_roots_excludes_and_generated_paths_are_used(repo: Path) -> None:
    config(repo, {"tdd": {"testPatterns": ["{stem}Specs.cs"], "testRoots": ["spec"],
                          "exclude": [{"path": "src/Orders/Program.cs", "reason": "host wiring"}],
                          "generated": ["src/Generated"]}})
    put(repo, "spec/Orders/OrderServiceSpecs.cs", "tests/CartTests.cs")
    assert decide(repo, edit("src/Orders/OrderService.cs")) is None
    assert decide(repo, edit("src/Orders/Program.cs")) is None
    assert decide(repo, patch("*** Add File: src/Generated/Api.cs", "+x")) is None
    assert decide(repo, patch("*** Add File: src/Orders/Cart.cs", "+x")) == missing(
        repo, "src/Orders/Cart.cs", "CartSpecs.cs", "spec/, src/Orders/tests/, src/Orders/test/, src/Orders/")


def test_the_rules_come_from_the_harness_root_when_it_is_not_the_repo(repo: Path,
                                                                      monkeypatch) -> None:
    harness = repo.parent / "harness"
    config(harness, {"tdd": {"exclude": [{"path": "src/Orders/OrderService.cs",
                                          "reason": "legacy, covered by e2e"}]}})
    monkeypatch.setenv("SPECOPS_ROOT", str(harness))
    assert decide(repo, edit("src/Orders/OrderService.cs")) is None


def test_without_a_config_the_seed_defaults_apply(repo: Path) -> None:
    rules = tdd.load_rules(str(repo))
    assert (rules.patterns, rules.roots, rules.exclude, rules.generated) == (
        ("{stem}Tests.cs", "{stem}Test.cs"), ("tests", "test"), {}, ())


BAD_CONFIGS = {
    "not JSON": ("{tdd:", "(file): not valid JSON (Expecting property name enclosed in double "
                          "quotes: line 1 column 2 (char 1))"),
    "not an object": ("[]", '(file): must be a JSON object like {"tdd": {...}}'),
    "unknown top key": ({"tdd": {}, "hooks": 1}, "hooks: unknown key (allowed: tdd)"),
    "tdd not an object": ({"tdd": []}, "tdd: must be an object"),
    "unknown tdd key": ({"tdd": {"roots": []}}, "tdd.roots: unknown key (allowed: exclude, "
                                                "generated, testPatterns, testRoots)"),
    "patterns not a list": ({"tdd": {"testPatterns": "{stem}Tests.cs"}},
                            "tdd.testPatterns: must be a list of non-empty strings"),
    "no patterns": ({"tdd": {"testPatterns": []}},
                    "tdd.testPatterns: must name at least one pattern, e.g. `{stem}Tests.cs`"),
    "pattern without stem": ({"tdd": {"testPatterns": ["FooTests.cs"]}},
                             "tdd.testPatterns[0]: `FooTests.cs` must contain {stem}, e.g. "
                             "`{stem}Tests.cs`"),
    "pattern with a separator": ({"tdd": {"testPatterns": ["{stem}Tests.cs", "unit/{stem}.cs"]}},
                                 "tdd.testPatterns[1]: `unit/{stem}.cs` contains a path "
                                 "separator; give a file name only and list test folders in "
                                 "tdd.testRoots"),
    "pattern not C#": ({"tdd": {"testPatterns": ["{stem}Tests.vb"]}},
                       "tdd.testPatterns[0]: `{stem}Tests.vb` must name a C# file (end with .cs)"),
    "root outside": ({"tdd": {"testRoots": ["../tests"]}},
                     "tdd.testRoots[0]: `../tests` must be a relative path inside the repository"),
    "absolute generated": ({"tdd": {"generated": ["/src/Gen"]}},
                           "tdd.generated[0]: `/src/Gen` must be a relative path inside the "
                           "repository"),
    "exclude not a list": ({"tdd": {"exclude": "src/A.cs"}},
                           'tdd.exclude: must be a list of {"path": ..., "reason": ...} objects'),
    "exclude without reason": ({"tdd": {"exclude": [{"path": "src/A.cs"}]}},
                               'tdd.exclude[0]: must be an object with exactly "path" and '
                               '"reason"'),
    "exclude empty reason": ({"tdd": {"exclude": [{"path": "src/A.cs", "reason": " "}]}},
                             "tdd.exclude[0].reason: must say why this file needs no test"),
    "exclude wildcard": ({"tdd": {"exclude": [{"path": "src/*.cs", "reason": "gen"}]}},
                         "tdd.exclude[0].path: `src/*.cs` must be an exact relative path of a "
                         ".cs file (no wildcards, no folders)"),
    "exclude folder": ({"tdd": {"exclude": [{"path": "src/Gen", "reason": "gen"}]}},
                       "tdd.exclude[0].path: `src/Gen` must be an exact relative path of a .cs "
                       "file (no wildcards, no folders)"),
}


@pytest.mark.parametrize(("data", "problem"), BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_a_malformed_config_denies_csharp_edits_naming_the_file_and_field(
        repo: Path, data: object, problem: str) -> None:
    path = config(repo, data)
    assert decide(repo, edit("src/Orders/OrderService.cs")) == (
        f"{path}: {problem}; C# edits are denied until a person fixes the file: name it in the "
        "file the current step names under RISK")


def test_a_malformed_config_does_not_block_other_commands(repo: Path) -> None:
    config(repo, "{tdd:")
    assert decide(repo, "dotnet test && git status", tool="Bash") is None


def test_the_test_folders_are_walked_once_per_call(repo: Path, monkeypatch) -> None:
    put(repo, "tests/OrderServiceTests.cs", "tests/CartTests.cs")
    walked = []
    real_walk = os.walk

    def counting_walk(top, *args, **kwargs):
        walked.append(os.path.relpath(top, repo))
        return real_walk(top, *args, **kwargs)

    monkeypatch.setattr(tdd.os, "walk", counting_walk)
    text = patch("*** Add File: src/Orders/Cart.cs", "+x", *edit("src/Orders/OrderService.cs")
                 .splitlines()[1:-1])
    assert decide(repo, text) is None
    assert walked == ["tests"]
    assert decide(repo, text) is None
    assert walked == ["tests", "tests"]  # the next call sees files added or removed since


# -- layouts (issue #17, item 5) -------------------------------------------------------------------

CALC = "src/Calc/Calculator.cs"


@pytest.fixture
def calc_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with a product file; the session's cwd is elsewhere."""
    root = tmp_path / "repo"
    (root / "src/Calc").mkdir(parents=True)
    (root / CALC).write_text("class Calculator { }\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    for var in SPECOPS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return root


def put_file(root: Path, rel: str, text: str = "class T { }\n") -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


def decide_in(cwd: Path, command: str, tool: str = "Bash", **tool_input: str) -> str | None:
    data = {"hook_event_name": "PreToolUse", "tool_name": tool, "cwd": str(cwd),
            "tool_input": {"command": command, **tool_input}}
    code, out = call("pre-tool-use", json.dumps(data).encode())
    assert code == 0
    return denial(out)


ADD_METHOD = "printf '  public int Twice(int x) { return 2 * x; }\\n' >> Calculator.cs"


def test_a_test_edited_from_its_own_folder_is_not_taken_for_product_code(calc_repo: Path) -> None:
    put_file(calc_repo, "tests/Calc.Tests/CalculatorTests.cs")
    folder = calc_repo / "tests/Calc.Tests"
    assert decide_in(folder, "printf '// more\\n' >> CalculatorTests.cs") is None


def test_a_product_edit_from_its_own_folder_finds_the_test_at_the_repository_root(
        calc_repo: Path) -> None:
    put_file(calc_repo, "tests/Calc.Tests/CalculatorTests.cs")
    assert decide_in(calc_repo / "src/Calc", ADD_METHOD) is None


def test_the_calls_workdir_is_resolved_against_the_session_cwd(calc_repo: Path) -> None:
    put_file(calc_repo, "tests/Calc.Tests/CalculatorTests.cs")
    assert decide_in(calc_repo, ADD_METHOD, workdir="src/Calc") is None
    assert decide_in(calc_repo, ADD_METHOD, workdir="tests") is None  # writes tests/Calculator.cs


@pytest.mark.parametrize("test_file", [
    "test/Calc.Tests/CalculatorTests.cs", "src/Calc.Tests/CalculatorTests.cs",
    "src/Calc/Calc.Tests/CalculatorTests.cs", "src/Calc/CalculatorTests.cs",
    "src/Calc.UnitTests/Core/CalculatorTests.cs",
], ids=["test/ root", "sibling project", "nested project", "flat, beside", "sibling UnitTests"])
def test_real_repository_layouts_find_the_test(calc_repo: Path, test_file: str) -> None:
    put_file(calc_repo, test_file)
    assert decide_in(calc_repo, patch(f"*** Update File: {CALC}", "@@", "+  public int One() => 1;"),
                  tool="apply_patch") is None


def test_an_interface_added_beside_its_tested_implementation_is_allowed(calc_repo: Path) -> None:
    command = patch("*** Add File: tests/Calc.Tests/AdderTests.cs", "+class AdderTests { }",
                    "*** Add File: src/Calc/Adder.cs", "+class Adder : IAdder { }",
                    "*** Add File: src/Calc/IAdder.cs",
                    "+/// <summary>Adds.</summary>", "+public interface IAdder", "+{",
                    "+    int Add(int a, int b);", "+    string Name { get; }", "+}")
    assert decide_in(calc_repo, command, tool="apply_patch") is None


@pytest.mark.parametrize("body", [
    ["+public enum Color { Red = 1, Green }"],
    ["+public record Point(int X, int Y);"],
    ["+[Flags]", "+public enum Access", "+{", "+    Read = 1, // \"{ get {\"",
     "+    Write = 2", "+}"],
], ids=["enum", "positional record", "attributed enum"])
def test_types_without_behaviour_need_no_test_file(calc_repo: Path, body: list[str]) -> None:
    assert decide_in(calc_repo, patch("*** Add File: src/Calc/Kinds.cs", *body),
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
        calc_repo: Path, body: list[str]) -> None:
    reason = decide_in(calc_repo, patch("*** Add File: src/Calc/Kinds.cs", *body), tool="apply_patch")
    assert reason is not None
    assert reason.startswith("TDD: C# product code needs a matching test file first: "
                             "src/Calc/Kinds.cs (looked for KindsTests.cs or KindsTest.cs under "
                             "tests/, test/, src/Calc/tests/, src/Calc/test/, src/Calc/)"), reason


def test_a_test_created_by_an_earlier_call_of_the_attempt_counts(calc_repo: Path) -> None:
    assert decide_in(calc_repo, ADD_METHOD, workdir="src/Calc") is not None
    assert decide_in(calc_repo, "mkdir -p tests/Calc.Tests && printf 'class CalculatorTests { }\\n' > "
                  "tests/Calc.Tests/CalculatorTests.cs") is None
    put_file(calc_repo, "tests/Calc.Tests/CalculatorTests.cs")  # what that call wrote
    assert decide_in(calc_repo, ADD_METHOD, workdir="src/Calc") is None
