"""The test-integrity guard against real git repositories: a base commit of three test projects
(xUnit, MSTest, NUnit) with a run filter, changed on disk the way an agent might, one table per
rule with the changes that weaken the tests and the legitimate refactors that must pass."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from specops_dag.errors import SpecopsError
from specops_dag.gitflow import GitError
from specops_dag.validation.changeset import read_changeset
from specops_dag.validation.integrity import (
    Finding,
    check_counts,
    check_tree,
    summary,
    waived,
)

from ..support.harness import write_tree

X = "tests/Calc.Tests/CalculatorTests.cs"
INTEG = "tests/Calc.Tests/IntegrationTests.cs"
M = "tests/Calc.MSTest/LedgerTests.cs"
N = "tests/Calc.NUnit/ParserTests.cs"
PROPS = "tests/Directory.Build.props"
CSPROJ = "tests/Calc.MSTest/Calc.MSTest.csproj"
PRODUCT = "src/Calc/Calculator.cs"
STALE = "tests/Calc.Tests/bin/Debug/StaleTests.cs"

ADDS = """\
    [Fact]
    public void Adds()
    {
        var sum = Calculator.Add(1, 2);
        Assert.Equal(3, sum);
        Assert.True(sum > 0);
    }
"""
SUBTRACTS = """\
    [Fact]
    public void Subtracts()
    {
        Assert.Equal(1, Calculator.Subtract(3, 2));
    }
"""
DOUBLES = """\
    [Theory]
    [InlineData(2, 4)]
    public void Doubles(int x, int y)
    {
        Assert.Equal(y, Calculator.Double(x));
    }
"""
XUNIT_HEAD = "using Xunit;\n\nnamespace Calc.Tests;\n\n"
BASE = {
    X: XUNIT_HEAD + f"public class CalculatorTests\n{{\n{ADDS}\n{SUBTRACTS}\n{DOUBLES}}}\n",
    INTEG: XUNIT_HEAD + """\
[Trait("Category", "Integration")]
public class IntegrationTests
{
    [Fact]
    public void ReadsTheLedger()
    {
        Assert.NotEmpty(Ledger.Read());
    }
}
""",
    M: """\
using Microsoft.VisualStudio.TestTools.UnitTesting;

namespace Calc.MSTest;

[TestClass]
public class LedgerTests
{
    [TestMethod]
    public void Balances()
    {
        Assert.AreEqual(0, new Ledger().Balance);
    }

    [DataTestMethod]
    [DataRow(1)]
    public void Posts(int amount)
    {
        Assert.IsTrue(new Ledger().Post(amount));
    }
}
""",
    N: """\
using NUnit.Framework;

namespace Calc.NUnit;

[TestFixture]
public class ParserTests
{
    [Test]
    public void ParsesNumbers()
    {
        Assert.That(Parser.Parse("1"), Is.EqualTo(1));
    }

    [TestCase("1+1", 2)]
    public void ParsesSums(string text, int value)
    {
        Assert.That(Parser.Parse(text), Is.EqualTo(value));
    }

    [Test, Ignore("issue 12")]
    public void ParsesUnicode()
    {
        Assert.That(Parser.Parse("١"), Is.EqualTo(1));
    }
}
""",
    PROPS: """\
<Project>
  <PropertyGroup>
    <VSTestTestCaseFilter>Category!=Integration</VSTestTestCaseFilter>
  </PropertyGroup>
</Project>
""",
    CSPROJ: """\
<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <TargetFramework>net8.0</TargetFramework>
    <IsTestProject>true</IsTestProject>
  </PropertyGroup>
</Project>
""",
    PRODUCT: "namespace Calc;\n\npublic static class Calculator { }\n",
    STALE: XUNIT_HEAD + "public class StaleTests\n{\n    [Fact]\n    public void Old() { }\n}\n",
}
XUNIT_LOST = ("its 3 tests are found nowhere else: `CalculatorTests.Adds`, "
              "`CalculatorTests.Subtracts`, `CalculatorTests.Doubles`")
EXCLUDED = "leaves out of the test run"
Op = Callable[[Path], None]


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=tester",
                           "-c", "user.email=tester@example.com", "-c", "commit.gpgsign=false",
                           *args], check=True, capture_output=True, text=True,
                          timeout=30).stdout.strip()


@pytest.fixture(scope="module")
def base_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(repository with BASE committed on `main`, the base commit); each test copies it."""
    root = tmp_path_factory.mktemp("base") / "repo"
    for rel, text in BASE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root, git(root, "rev-parse", "HEAD")


def changed(base_repo: tuple[Path, str], tmp_path: Path, ops: tuple[Op, ...]) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(base_repo[0], root, symlinks=True)
    for op in ops:
        op(root)
    return root


def edit(path: str, old: str, new: str) -> Op:
    def apply(root: Path) -> None:
        text = (root / path).read_text(encoding="utf-8")
        assert text.count(old) == 1, old
        (root / path).write_text(text.replace(old, new), encoding="utf-8")

    return apply


def write(path: str, text: str) -> Op:
    return lambda root: write_tree(root, {path: text}) and None


def delete(path: str) -> Op:
    return lambda root: (root / path).unlink()


def move(src: str, dest: str) -> Op:
    def apply(root: Path) -> None:
        (root / dest).parent.mkdir(parents=True, exist_ok=True)
        (root / src).rename(root / dest)

    return apply


def lines_of(base_repo: tuple[Path, str], tmp_path: Path, ops: tuple[Op, ...]) -> list[str]:
    return [f.line_text() for f in check_tree(changed(base_repo, tmp_path, ops), base_repo[1])]


def xunit_file(cls: str, *tests: str) -> str:
    return XUNIT_HEAD + f"public class {cls}\n{{\n" + "\n".join(tests) + "}\n"


# --- rule 1: a deleted or emptied test file, a deleted test --------------------------------------

DELETIONS = [
    pytest.param((delete(X),), [f"{X}: test file deleted; {XUNIT_LOST}"], id="deleted-file"),
    pytest.param((write(X, ""),), [f"{X}: test file emptied; {XUNIT_LOST}"], id="emptied-file"),
    pytest.param((write(X, XUNIT_HEAD + "public class CalculatorTests { }\n"),),
                 [f"{X}: test file left without tests; {XUNIT_LOST}"], id="file-without-tests"),
    pytest.param((delete(INTEG),),
                 [f"{INTEG}: test file deleted; its test `IntegrationTests.ReadsTheLedger` is found "
                  "nowhere else"], id="deleted-file-of-one-test"),
    pytest.param((delete(X), write("tests/Calc.Tests/AddingTests.cs",
                                   xunit_file("AddingTests", ADDS))),
                 [f"{X}: test file deleted; 2 of its 3 tests are found nowhere else: "
                  "`CalculatorTests.Subtracts`, `CalculatorTests.Doubles`"],
                 id="deleted-file-one-test-moved"),
    pytest.param((edit(X, SUBTRACTS + "\n", ""),),
                 [f"{X}:16: test `CalculatorTests.Subtracts` deleted: no test now has its name or "
                  "body (the line is the base's)"], id="test-deleted"),
    pytest.param((edit(X, "public void Adds()", "public void AddsNumbers()"),
                  edit(X, "        Assert.True(sum > 0);\n", "")),
                 [f"{X}:8: test `CalculatorTests.Adds` deleted: no test now has its name or body "
                  "(the line is the base's)"], id="test-renamed-and-changed"),
    pytest.param((move(X, "tests/Calc.Tests/Arithmetic/CalculatorTests.cs"),), [],
                 id="file-moved"),
    pytest.param((delete(X), write("tests/Calc.Tests/Sums.cs",
                                   xunit_file("CalculatorTests", ADDS, SUBTRACTS)),
                  write("tests/Calc.Tests/Doubling.cs", xunit_file(
                      "DoublingTests", DOUBLES.replace("Doubles(", "DoublesNumbers(")))), [],
                 id="file-split-with-a-renamed-class-and-test"),
    pytest.param((edit(X, SUBTRACTS + "\n", ""), write(
        "tests/Calc.Tests/Subtracting.cs", xunit_file("CalculatorTests", SUBTRACTS))), [],
                 id="test-moved-to-another-file"),
    pytest.param((edit(X, "using Xunit;\n", "using System;\nusing Xunit;\n"),
                  edit(X, DOUBLES, DOUBLES + "\n    private static int Twice(int x) => 2 * x;\n")),
                 [], id="test-file-edited-without-touching-tests"),
    pytest.param((delete(PRODUCT),), [], id="product-file-deleted"),
    pytest.param((delete(STALE), write("tests/Calc.Tests/obj/Debug/Generated.cs", xunit_file(
        "Generated", "    [Fact(Skip = \"generated\")]\n    public void G() { }\n"))), [],
                 id="bin-and-obj-ignored"),
]


@pytest.mark.parametrize(("ops", "expected"), DELETIONS)
def test_a_deleted_or_emptied_test_file_or_test_is_flagged_unless_its_tests_live_on(
        base_repo, tmp_path: Path, ops, expected) -> None:
    assert lines_of(base_repo, tmp_path, ops) == expected


# --- rule 2: an added skip ------------------------------------------------------------------------

NEW_SKIPPED = "\n    [Fact(Skip = \"todo\")]\n    public void Divides() { Assert.Equal(2, 4 / 2); }\n"
SKIPS = [
    pytest.param((edit(X, "[Fact]\n    public void Adds", "[Fact(Skip = \"flaky\")]\n"
                                                        "    public void Adds"),),
                 [f"{X}:7: test `CalculatorTests.Adds` is now skipped: `[Fact(Skip = ...)]` added"],
                 id="fact-skip"),
    pytest.param((edit(X, "[Theory]", "[Theory(Skip = \"later\")]"),),
                 [f"{X}:21: test `CalculatorTests.Doubles` is now skipped: `[Theory(Skip = ...)]` "
                  "added"], id="theory-skip"),
    pytest.param((edit(M, "    [TestMethod]\n", "    [TestMethod]\n    [Ignore]\n"),),
                 [f"{M}:9: test `LedgerTests.Balances` is now skipped: `[Ignore]` added"],
                 id="mstest-ignore"),
    pytest.param((edit(N, "[Test]\n    public void ParsesNumbers",
                       "[Test]\n    [Ignore(\"later\")]\n    public void ParsesNumbers"),),
                 [f"{N}:9: test `ParserTests.ParsesNumbers` is now skipped: `[Ignore]` added"],
                 id="nunit-ignore-with-reason"),
    pytest.param((edit(N, "[TestCase(\"1+1\", 2)]", "[TestCase(\"1+1\", 2), Explicit]"),),
                 [f"{N}:14: test `ParserTests.ParsesSums` is now skipped: `[Explicit]` added"],
                 id="nunit-explicit"),
    pytest.param((edit(N, "[TestCase(\"1+1\", 2)]", "[TestCase(\"1+1\", 2, Ignore = \"later\")]"),),
                 [f"{N}:14: test `ParserTests.ParsesSums` is now skipped: "
                  "`[TestCase(Ignore = ...)]` added"], id="nunit-test-case-ignore"),
    pytest.param((edit(M, "        Assert.AreEqual(0,", "        Assert.Inconclusive(\"not yet\");\n"
                                                      "        Assert.AreEqual(0,"),),
                 [f"{M}:11: test `LedgerTests.Balances` is now skipped: `Assert.Inconclusive(...)` "
                  "added"], id="assert-inconclusive"),
    pytest.param((edit(X, "        Assert.Equal(3, sum);", "        Assert.Skip(\"later\");"),),
                 [f"{X}:8: test `CalculatorTests.Adds` lost 1 of 2 assertions",
                  f"{X}:11: test `CalculatorTests.Adds` is now skipped: `Assert.Skip(...)` added"],
                 id="xunit-v3-assert-skip-instead-of-an-assertion"),
    pytest.param((edit(M, "[TestClass]\n", "[TestClass]\n[Ignore]\n"),),
                 [f"{M}:6: test `LedgerTests.Balances` is now skipped: `[Ignore]` added on its "
                  "class",
                  f"{M}:6: test `LedgerTests.Posts` is now skipped: `[Ignore]` added on its class"],
                 id="class-ignored"),
    pytest.param((edit(X, DOUBLES, DOUBLES + NEW_SKIPPED),),
                 [f"{X}:28: new test `CalculatorTests.Divides` is skipped: `[Fact(Skip = ...)]`"],
                 id="new-test-added-skipped"),
    pytest.param((edit(N, "Is.EqualTo(1));\n    }\n}", "Is.EqualTo(1), \"arabic digit\");\n    }\n}"),),
                 [], id="skipped-at-base-and-edited"),
    pytest.param((edit(N, "ParsesUnicode()", "ParsesArabicDigits()"),), [],
                 id="skipped-at-base-and-renamed"),
    pytest.param((edit(N, "[Test, Ignore(\"issue 12\")]", "[Test]"),), [], id="skip-removed"),
    pytest.param((edit(X, "    [Fact]\n    public void Adds",
                       "    // [Fact(Skip = \"flaky\")]\n    [Fact(DisplayName = \"Skip = no\")]\n"
                       "    public void Adds"),), [], id="skip-in-a-comment-and-a-string"),
]


@pytest.mark.parametrize(("ops", "expected"), SKIPS)
def test_an_added_skip_is_flagged(base_repo, tmp_path: Path, ops, expected) -> None:
    assert lines_of(base_repo, tmp_path, ops) == expected


# --- rule 3: a removed assertion ------------------------------------------------------------------

ASSERTIONS = [
    pytest.param((edit(X, "        Assert.True(sum > 0);\n", ""),),
                 [f"{X}:8: test `CalculatorTests.Adds` lost 1 of 2 assertions"], id="one-of-two"),
    pytest.param((edit(X, "Assert.Equal(1, Calculator.Subtract(3, 2));",
                       "Calculator.Subtract(3, 2);"),),
                 [f"{X}:16: test `CalculatorTests.Subtracts` lost its only assertion"],
                 id="the-only-one"),
    pytest.param((edit(X, "        Assert.True(sum > 0);", "        // Assert.True(sum > 0);"),),
                 [f"{X}:8: test `CalculatorTests.Adds` lost 1 of 2 assertions"],
                 id="commented-out"),
    pytest.param((edit(X, "        Assert.True(sum > 0);",
                       "        Console.WriteLine(\"Assert.True(sum > 0);\");"),),
                 [f"{X}:8: test `CalculatorTests.Adds` lost 1 of 2 assertions"],
                 id="turned-into-a-string"),
    pytest.param((edit(M, "Assert.IsTrue(new Ledger().Post(amount));", "new Ledger().Post(amount);"),),
                 [f"{M}:16: test `LedgerTests.Posts` lost its only assertion"], id="mstest"),
    pytest.param((move(X, "tests/Calc.Tests/Arithmetic/CalculatorTests.cs"),
                  edit("tests/Calc.Tests/Arithmetic/CalculatorTests.cs",
                       "        Assert.True(sum > 0);\n", "")),
                 ["tests/Calc.Tests/Arithmetic/CalculatorTests.cs:8: test `CalculatorTests.Adds` "
                  "lost 1 of 2 assertions"], id="in-a-moved-file"),
    pytest.param((edit(X, "public class CalculatorTests", "public class CalcTests"),
                  edit(X, "        Assert.True(sum > 0);\n", "")),
                 [f"{X}:8: test `CalcTests.Adds` lost 1 of 2 assertions"],
                 id="class-renamed-and-an-assertion-removed"),
    pytest.param((edit(X, "public class CalculatorTests", "public class CalcTests"),), [],
                 id="class-renamed"),
    pytest.param((edit(X, "Assert.Equal(3, sum);", "Assert.Equal(expected: 3, actual: sum);"),), [],
                 id="named-arguments"),
    pytest.param((edit(X, "Assert.Equal(1, Calculator.Subtract(3, 2));",
                       "Assert.True(Calculator.Subtract(3, 2) == 1);"),), [], id="equal-to-true"),
    pytest.param((edit(X, "Assert.Equal(3, sum);", "sum.Should().Be(3);"),), [],
                 id="fluent-assertions"),
    pytest.param((edit(X, "public void Adds()", "public void AddsTwoNumbers()"),), [],
                 id="renamed-test"),
    pytest.param((edit(X, ADDS, ADDS.replace("public void Adds()", "public void AddsTwoNumbers()")
                       .replace("Add(1, 2);", "Add( 1,\n            2 );")),), [],
                 id="renamed-and-reformatted"),
    pytest.param((edit(X, "        Assert.True(sum > 0);\n",
                       "        Assert.True(sum > 0);\n        Assert.NotEqual(0, sum);\n"),), [],
                 id="assertion-added"),
]


@pytest.mark.parametrize(("ops", "expected"), ASSERTIONS)
def test_a_removed_assertion_in_a_test_that_stays_is_flagged(base_repo, tmp_path: Path, ops,
                                                              expected) -> None:
    assert lines_of(base_repo, tmp_path, ops) == expected


# --- rule 2, traits: a trait wired into an exclusion filter of the run -----------------------------

RUNSETTINGS = """\
<RunSettings>
  <RunConfiguration>
    <TestCaseFilter>Category!=Slow</TestCaseFilter>
  </RunConfiguration>
</RunSettings>
"""
TARGETS = """\
<Project>
  <Target Name="QuickTest">
    <Exec Command="dotnet test --filter Category!=Slow" />
  </Target>
</Project>
"""
PROJECT_FLAG = "    <IsTestProject>true</IsTestProject>\n"
TRAITS = [
    pytest.param((edit(X, "[Fact]\n    public void Adds",
                       "[Fact]\n    [Trait(\"Category\", \"Integration\")]\n    public void Adds"),),
                 [f"{X}:8: test `CalculatorTests.Adds` gets trait `Category=Integration`, which "
                  f"the filter `Category!=Integration` ({PROPS}:3) {EXCLUDED}"],
                 id="trait-the-base-filter-excludes"),
    pytest.param((write("tests/Calc.Tests/test.runsettings", RUNSETTINGS),
                  edit(X, "[Fact]\n    public void Subtracts",
                       "[Fact, Trait(\"Category\", \"Slow\")]\n    public void Subtracts")),
                 [f"{X}:15: test `CalculatorTests.Subtracts` gets trait `Category=Slow`, which the "
                  f"filter `Category!=Slow` (tests/Calc.Tests/test.runsettings:3) {EXCLUDED}",
                  "tests/Calc.Tests/test.runsettings:3: test filter `Category!=Slow` added: the "
                  "tests it matches no longer run"], id="runsettings-filter-and-trait"),
    pytest.param((edit(CSPROJ, PROJECT_FLAG, PROJECT_FLAG + "    <VSTestTestCaseFilter>"
                       "TestCategory!=Flaky</VSTestTestCaseFilter>\n"),
                  edit(M, "    [TestMethod]\n", "    [TestMethod, TestCategory(\"Flaky\")]\n")),
                 [f"{CSPROJ}:5: test filter `TestCategory!=Flaky` added: the tests it matches no "
                  "longer run",
                  f"{M}:8: test `LedgerTests.Balances` gets trait `TestCategory=Flaky`, which the "
                  f"filter `TestCategory!=Flaky` ({CSPROJ}:5) {EXCLUDED}"],
                 id="mstest-category-and-csproj-filter"),
    pytest.param((write("tests/Calc.NUnit/Calc.NUnit.targets", TARGETS),
                  edit(N, "[Test]\n    public void ParsesNumbers",
                       "[Test, Category(\"Slow\")]\n    public void ParsesNumbers")),
                 ["tests/Calc.NUnit/Calc.NUnit.targets:3: test filter `Category!=Slow` added: the "
                  "tests it matches no longer run",
                  f"{N}:8: test `ParserTests.ParsesNumbers` gets trait `Category=Slow`, which the "
                  f"filter `Category!=Slow` (tests/Calc.NUnit/Calc.NUnit.targets:3) {EXCLUDED}"],
                 id="nunit-category-and-targets-filter"),
    pytest.param((edit(CSPROJ, PROJECT_FLAG, PROJECT_FLAG + "    <VSTestTestCaseFilter>"
                       "FullyQualifiedName!~Ledger</VSTestTestCaseFilter>\n"),),
                 [f"{CSPROJ}:5: test filter `FullyQualifiedName!~Ledger` added: the tests it "
                  "matches no longer run"], id="filter-alone"),
    pytest.param((edit(X, SUBTRACTS + "\n", ""),
                  edit(INTEG, "    }\n}", "    }\n\n" + SUBTRACTS + "}")),
                 [f"{INTEG}:5: test `IntegrationTests.Subtracts` gets trait `Category=Integration`, "
                  f"which the filter `Category!=Integration` ({PROPS}:3) {EXCLUDED}"],
                 id="test-moved-into-an-excluded-class"),
    pytest.param((edit(X, "[Fact]\n    public void Adds",
                       "[Fact]\n    [Trait(\"Category\", \"Unit\")]\n    public void Adds"),), [],
                 id="trait-no-filter-excludes"),
    pytest.param((edit(INTEG, "Ledger.Read()", "Ledger.Read(\"main\")"),), [],
                 id="excluded-at-base-and-edited"),
    pytest.param((edit(PROPS, "  <PropertyGroup>",
                       "  <PropertyGroup Condition=\"'$(Configuration)' != 'Release'\">"),), [],
                 id="msbuild-condition"),
]


@pytest.mark.parametrize(("ops", "expected"), TRAITS)
def test_a_trait_excluded_from_the_run_and_an_added_exclusion_filter_are_flagged(
        base_repo, tmp_path: Path, ops, expected) -> None:
    assert lines_of(base_repo, tmp_path, ops) == expected


# --- where the changes are and what is read -------------------------------------------------------

WEAKENED = (delete(INTEG), edit(X, "        Assert.True(sum > 0);\n", ""))


@pytest.mark.parametrize("how", ["uncommitted", "staged", "committed"])
def test_committed_staged_and_uncommitted_changes_are_all_compared_with_the_base(
        base_repo, tmp_path: Path, how: str) -> None:
    root = changed(base_repo, tmp_path, WEAKENED)
    if how != "uncommitted":
        git(root, "add", "-A")
    if how == "committed":
        git(root, "commit", "-q", "-m", "the agent's work")
    assert [f.line_text() for f in check_tree(root, base_repo[1])] == [
        f"{X}:8: test `CalculatorTests.Adds` lost 1 of 2 assertions",
        f"{INTEG}: test file deleted; its test `IntegrationTests.ReadsTheLedger` is found nowhere else"]


def test_a_tree_below_the_repository_root_is_compared_with_paths_relative_to_it(
        base_repo, tmp_path: Path) -> None:
    root = changed(base_repo, tmp_path, WEAKENED)
    assert [f.line_text() for f in check_tree(root / "tests" / "Calc.Tests", base_repo[1])] == [
        "CalculatorTests.cs:8: test `CalculatorTests.Adds` lost 1 of 2 assertions",
        "IntegrationTests.cs: test file deleted; its test `IntegrationTests.ReadsTheLedger` is "
        "found nowhere else"]


def test_only_the_changed_files_and_the_run_configuration_are_read(base_repo,
                                                                  tmp_path: Path) -> None:
    root = changed(base_repo, tmp_path, (*WEAKENED, write("tests/New.cs", "class New { }\n")))
    src = read_changeset(root, base_repo[1])
    assert src.changed == {INTEG: "D", X: "M", "tests/New.cs": "?"}
    assert sorted(src.base) == sorted([INTEG, X]) and sorted(src.now) == sorted(["tests/New.cs", X])
    assert sorted(src.configs) == [CSPROJ, PROPS]
    assert src.base[INTEG] == BASE[INTEG]


def test_an_unknown_base_commit_is_an_error_naming_the_tree_and_commit(base_repo,
                                                                       tmp_path: Path) -> None:
    root = changed(base_repo, tmp_path, ())
    with pytest.raises(GitError) as err:
        check_tree(root, "no-such-commit")
    assert isinstance(err.value, SpecopsError)
    assert err.value.message == (
        f"test integrity: cannot compare {root} with base commit `no-such-commit` (`git diff` "
        "exited 128: fatal: bad revision 'no-such-commit'); pass a commit of the repository the "
        "tree belongs to")


def test_an_unchanged_tree_has_no_finding(base_repo, tmp_path: Path) -> None:
    assert check_tree(changed(base_repo, tmp_path, ()), base_repo[1]) == []


# --- rule 4: the TRX counts -----------------------------------------------------------------------

COUNTS = [
    pytest.param((10, 0, 8, 0), ["TRX: 8 tests executed, 2 fewer than at the base (10)"],
                 id="fewer-executed"),
    pytest.param((10, 1, 10, 3), ["TRX: 3 tests skipped, 2 more than at the base (1)"],
                 id="more-skipped"),
    pytest.param((10, 1, 9, 2), ["TRX: 9 tests executed, 1 fewer than at the base (10)",
                                 "TRX: 2 tests skipped, 1 more than at the base (1)"], id="both"),
    pytest.param((10, 1, 12, 0), [], id="more-executed-fewer-skipped"),
    pytest.param((10, 1, 10, 1), [], id="the-same"),
    pytest.param((None, 1, 5, 1), [], id="baseline-executed-unknown"),
    pytest.param((10, None, 10, 5), [], id="baseline-skipped-unknown"),
    pytest.param((10, 1, None, None), [], id="current-unknown"),
]


@pytest.mark.parametrize(("counts", "expected"), COUNTS)
def test_fewer_executed_or_more_skipped_tests_than_the_baseline_are_flagged(counts,
                                                                            expected) -> None:
    assert [f.line_text() for f in check_counts(*counts)] == expected


# --- waivers and the failure text -----------------------------------------------------------------

ASSERTION = Finding(X, 8, "removed-assertion", "test `CalculatorTests.Adds` lost 1 of 2 assertions",
                    ("CalculatorTests.Adds",))
DELETED = Finding(X, None, "deleted-test-file", "test file deleted; ...",
                  ("CalculatorTests.Adds", "CalculatorTests.Subtracts"))
FEWER = check_counts(10, None, 8, None)[0]
WAIVERS = [
    pytest.param(f"I rewrote {X} on purpose.", [ASSERTION, DELETED], id="bare-path"),
    pytest.param(f"({X}:8) asserted an implementation detail", [ASSERTION], id="path-and-line"),
    pytest.param(f"{X}:9 is fine", [], id="path-and-another-line"),
    pytest.param("`CalculatorTests.Adds` checked the old rounding", [ASSERTION], id="test-name"),
    pytest.param("`Calc.Tests.CalculatorTests.Adds` is obsolete", [ASSERTION], id="qualified-name"),
    pytest.param("`Adds` is obsolete", [], id="method-name-alone"),
    pytest.param("CalculatorTests.Adds is obsolete", [], id="name-without-backticks"),
    pytest.param("`CalculatorTests.Adds` and `CalculatorTests.Subtracts` are gone with the feature",
                 [ASSERTION, DELETED], id="every-test-of-a-file-finding"),
    pytest.param(f"{X}.bak and old/{X} are unrelated", [], id="longer-paths"),
    pytest.param("`fewer-executed`: the slow suite moved to nightly", [FEWER], id="count-rule"),
    pytest.param("the TRX has fewer tests", [], id="count-not-named"),
]


@pytest.mark.parametrize(("risk", "expected"), WAIVERS)
def test_a_finding_an_approved_risk_names_is_waived(risk: str, expected: list[Finding]) -> None:
    findings = [ASSERTION, DELETED, FEWER]
    kept, gone = waived(findings, ["unrelated risk about `OrderTests.Ships`", risk])
    assert gone == expected
    assert kept == [f for f in findings if f not in expected]


def test_the_summary_lists_every_finding_and_how_to_restore_or_approve_them() -> None:
    base = "0123456789abcdef0123456789abcdef01234567"
    assert summary([ASSERTION, FEWER], base, "orders") == (
        "test integrity: 2 changes weaken the tests (compared with base commit 0123456789ab):\n"
        f"- {X}:8: test `CalculatorTests.Adds` lost 1 of 2 assertions\n"
        "- TRX: 8 tests executed, 2 fewer than at the base (10)\n"
        "Restore them, or raise a risk (risk.md) that names each one (its path, `path:line` or "
        "`Class.Method`; `fewer-executed` or `more-skipped` for a TRX count) for a person to "
        "approve with `specops approve orders risk`.")
    assert summary([FEWER], base, "orders").splitlines()[0] == (
        "test integrity: 1 change weakens the tests (compared with base commit 0123456789ab):")


def test_a_finding_is_a_json_ready_dict() -> None:
    assert json.loads(json.dumps(DELETED.as_dict())) == {
        "path": X, "line": None, "rule": "deleted-test-file", "change": "test file deleted; ...",
        "tests": ["CalculatorTests.Adds", "CalculatorTests.Subtracts"]}
    assert DELETED.line_text() == f"{X}: test file deleted; ..."
