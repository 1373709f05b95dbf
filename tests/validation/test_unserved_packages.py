"""A package the agent adds that the package source does not serve (issue 42): restore fails
with a summary that names each package and why, and the attempt's feedback tells the agent
what to do instead, never a raw restore log alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.execution.attempt import unserved_advice
from specops_dag.validation.dotnet import ValidationReport, validate_full

from ..support.dotnet import copy_fixture

UNSERVED = ("the package source does not serve Specops.Does.Not.Exist (NU1101: no package with "
            "this id), Newtonsoft.Json >= 99.1.0 (NU1102: no such version; nearest {nearest}): "
            "agent sessions have no network, so only packages the source serves can be used")


@pytest.mark.dotnet
@pytest.mark.e2e
def test_a_package_reference_the_source_does_not_serve_fails_restore_naming_each_package(
        tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "all-pass-net10")
    project = root / "src/Calc/Calc.csproj"
    project.write_text(project.read_text().replace(
        "</Project>", '  <ItemGroup>\n    <PackageReference Include="Specops.Does.Not.Exist" '
        'Version="1.0.0" />\n    <PackageReference Include="Newtonsoft.Json" Version="99.1.0" '
        '/>\n  </ItemGroup>\n</Project>'))
    report = validate_full(root, tmp_path / "logs")
    assert (report.passed, report.stage, report.blame) == (False, "restore", "attempt")
    head, _, tail = report.message.partition("; the package source does not serve ")
    # restore runs the projects in parallel: either may print the first error
    assert head.startswith("`dotnet restore` of Calc.sln failed (exit 1); first error: "
                           f"{root}/"), head
    assert " : error NU110" in head, head
    nearest = tail.split("nearest ")[1].split(")")[0]
    assert "; the package source does not serve " + tail == "; " + UNSERVED.format(
        nearest=nearest)


def test_the_attempts_feedback_says_to_remove_the_package_or_raise_a_risk() -> None:
    failed = ValidationReport(False, "full", "restore", "`dotnet restore` of Calc.sln failed "
                              f"(exit 1); {UNSERVED.format(nearest='14.0.1')}")
    assert unserved_advice(failed, "../../phases/d1/develop/risk.md") == (
        "\nRemove those package references and do the work with what the repository and the "
        "framework already have. If it cannot be done without one, do what you can and write "
        "../../phases/d1/develop/risk.md naming the package and what it was for: a person "
        "decides at the `risk` gate.")
    other = ValidationReport(False, "full", "build", "`dotnet build` of Calc.sln failed (exit 1)")
    assert unserved_advice(other, "risk.md") == ""
