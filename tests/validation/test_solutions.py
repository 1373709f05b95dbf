"""Discovery reads both solution formats: the classic `.sln` and the XML `.slnx` that the .NET 10
SDK's `dotnet new sln` writes (issue 42). The `dotnet`-marked test builds one with the real SDK."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.validation.discovery import discover
from specops_dag.validation.dotnet import validate_full

from ..support.dotnet import copy_fixture

# As `dotnet new sln` and `dotnet sln add` write it on SDK 10.0.401.
SLNX = """<Solution>
  <Folder Name="/src/">
    <Project Path="src/Calc/Calc.csproj" />
  </Folder>
  <Folder Name="/tests/">
    <Project Path="tests\\Calc.Tests\\Calc.Tests.csproj" />
  </Folder>
</Solution>
"""


def slnx_repo(tmp_path: Path, listed: str = SLNX) -> Path:
    root = copy_fixture(tmp_path, "all-pass")
    (root / "Calc.sln").unlink()
    (root / "Calc.slnx").write_text(listed)
    return root


def test_a_slnx_solution_is_the_build_target_and_lists_its_projects(tmp_path: Path) -> None:
    root = slnx_repo(tmp_path)
    repo = discover(root)
    assert (repo.problem, repo.targets) == (None, [root / "Calc.slnx"])
    assert repo.in_solution == {(root / "src/Calc/Calc.csproj").resolve(),
                                (root / "tests/Calc.Tests/Calc.Tests.csproj").resolve()}


def test_a_project_missing_from_the_slnx_is_built_on_its_own(tmp_path: Path) -> None:
    root = slnx_repo(tmp_path, "<Solution>\n  <Project Path=\"src/Calc/Calc.csproj\" />\n"
                               "</Solution>\n")
    repo = discover(root)
    assert repo.in_solution == {(root / "src/Calc/Calc.csproj").resolve()}
    assert sorted(p.relative_to(root).as_posix() for p in repo.projects) == [
        "src/Calc/Calc.csproj", "tests/Calc.Tests/Calc.Tests.csproj"]


def test_a_sln_beside_a_slnx_asks_which_one_to_build(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "all-pass")
    (root / "Calc.slnx").write_text(SLNX)
    assert discover(root).problem == (
        "more than one solution at the repository root (Calc.sln, Calc.slnx); choose what to "
        "build with `validation.build: [Calc.sln]` in workflow_defs/validation.yaml (or the "
        "phase), or keep one")


def test_a_slnx_that_is_not_xml_is_named_with_the_fix(tmp_path: Path) -> None:
    root = slnx_repo(tmp_path, "<Solution><Project Path=\"src/Calc/Calc.csproj\">\n")
    assert discover(root).problem == (
        "Calc.slnx is not valid XML (no element found: line 2, column 0); fix the solution file "
        "or name the projects to build with `validation.build` in workflow_defs/validation.yaml "
        "(or the phase)")


@pytest.mark.dotnet
@pytest.mark.e2e
def test_the_real_sdk_builds_and_tests_a_repository_whose_solution_is_slnx(
        tmp_path: Path) -> None:
    root = slnx_repo(tmp_path)
    report = validate_full(root, tmp_path / "logs")
    assert (report.passed, report.stage, report.message) == (
        True, "test", "1 test project(s): 2 of 2 tests executed, 2 passed, 0 skipped")
    assert [c["command"].split()[1:3] for c in report.commands if c["stage"] == "build"] == [
        ["build", str(root / "Calc.slnx")]]
