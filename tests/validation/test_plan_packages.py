"""The packages a plan or spec lists under `## Packages` (issue 43): read from the markdown as a
model writes it, restored with the real SDK before the agent's first attempt into the agent's
own package folder, a package the source does not serve named, never an error; and what the
skill then tells the agent (add the `PackageReference`, `dotnet restore <project>
-p:NuGetAudit=false`, build `--no-restore`) works with every package source unreachable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specops_dag.process import run_process
from specops_dag.validation.dotnet import restore_worktree
from specops_dag.validation.packages import Package, listed_packages, restore_packages

from ..support.dotnet import copy_fixture

FORMATS = """# Plan

## Approach
Retries with Polly.Core 8.9.1 were rejected.

## Packages
- Ardalis.GuardClauses 5.0.0 — guard clauses (MIT)
- `Humanizer.Core` `2.14.1`: plural names
* Ulid@1.4.1
1. NodaTime (3.3.7) - time zones
- **Dapper**, version 2.1.66, why: queries
- id: Scrutor, version: v6.1.0, licence MIT
| id | version | why |
|---|---|---|
| `Stateless` | 5.20.1 | state machine |
```xml
<PackageReference Include="CsvHelper" Version="34.0.0" />
```
OneOf 3.0.271
We keep EF Core 10.0.0 out of this change.
- ardalis.guardclauses 4.6.0 (a second version of a listed id: the first wins)

### Test packages
- Microsoft.Extensions.Http.Resilience 10.0.0-rc.1

## Test strategy
- Polly.Core 8.9.1
"""


def test_the_packages_section_is_read_in_every_format_a_model_writes_and_nothing_else() -> None:
    assert listed_packages(FORMATS) == [
        Package("Ardalis.GuardClauses", "5.0.0"), Package("Humanizer.Core", "2.14.1"),
        Package("Ulid", "1.4.1"), Package("NodaTime", "3.3.7"), Package("Dapper", "2.1.66"),
        Package("Scrutor", "6.1.0"), Package("Stateless", "5.20.1"),
        Package("CsvHelper", "34.0.0"), Package("OneOf", "3.0.271"),
        Package("Microsoft.Extensions.Http.Resilience", "10.0.0-rc.1")]


@pytest.mark.parametrize("section", [
    "## Packages\nnone\n",
    "## Packages\n`none`\n\n## Risks\n- Ardalis.GuardClauses 5.0.0 would be an alternative\n",
    "## 6. Packages\n- None (the change uses what the repository references; TARGET is "
    "net 10.0)\n",
    "## Packages\n**None.** Everything needed is referenced already.\n",
    "# Spec\n\n## Approach\n- Ardalis.GuardClauses 5.0.0\n",
])
def test_a_packages_section_that_says_none_or_no_section_lists_nothing(section: str) -> None:
    assert listed_packages(section) == []


def dotnet_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "NUGET_PACKAGES": str(tmp_path / "nuget-packages"),
            "DOTNET_CLI_HOME": str(tmp_path / "dotnet-home")}


UNREACHABLE = """<?xml version="1.0" encoding="utf-8"?>
<configuration>
  <packageSources>
    <clear />
    <add key="unreachable" value="https://127.0.0.1:9/v3/index.json" />
  </packageSources>
</configuration>
"""


@pytest.mark.dotnet
@pytest.mark.e2e
def test_a_listed_package_is_restored_into_the_agents_folder_and_an_unserved_one_is_named(
        tmp_path: Path) -> None:
    worktree = copy_fixture(tmp_path, "all-pass-net10")
    env = dotnet_env(tmp_path)
    folder = tmp_path / "nuget-packages"
    result = restore_packages(worktree, [Package("Ardalis.GuardClauses", "5.0.0"),
                                         Package("Specops.Does.Not.Exist", "1.0.0")],
                              tmp_path / "node/.packages-1", tmp_path / "node/logs", env)
    assert result.describe(["phases/d1/design/plan.md"]) == (
        "the plan's packages (`## Packages` of phases/d1/design/plan.md): restored "
        f"Ardalis.GuardClauses 5.0.0 into {folder}; the package source does not serve "
        "Specops.Does.Not.Exist (NU1101: no package with this id), so it was not restored and "
        "the agent cannot use it")
    assert (folder / "ardalis.guardclauses/5.0.0/ardalis.guardclauses.5.0.0.nupkg").is_file()
    assert "Ardalis" not in (worktree / "src/Calc/Calc.csproj").read_text()


@pytest.mark.dotnet
@pytest.mark.e2e
def test_a_version_the_source_does_not_serve_is_named_with_its_nu1102_and_the_nearest(
        tmp_path: Path) -> None:
    worktree = copy_fixture(tmp_path, "all-pass-net10")
    result = restore_packages(worktree, [Package("Ulid", "1.4.0")], tmp_path / "scratch",
                              tmp_path / "logs", dotnet_env(tmp_path))
    assert (result.restored, result.missing) == ((), ())
    assert result.describe(["phases/d1/spec.md"]) == (
        "the plan's packages (`## Packages` of phases/d1/spec.md): the package source does not "
        "serve Ulid 1.4.0 (NU1102: no such version; nearest 1.4.1), so it was not restored and "
        "the agent cannot use it")


@pytest.mark.dotnet
@pytest.mark.e2e
def test_the_worktrees_nuget_config_is_the_one_the_packages_are_restored_with(
        tmp_path: Path) -> None:
    worktree = copy_fixture(tmp_path, "all-pass-net10")
    (worktree / "NuGet.config").write_text(UNREACHABLE, encoding="utf-8")
    result = restore_packages(worktree, [Package("Ardalis.GuardClauses", "5.0.0")],
                              tmp_path / "scratch", tmp_path / "logs", dotnet_env(tmp_path))
    assert result.describe(["plan.md"]) == (
        "the plan's packages (`## Packages` of plan.md): Ardalis.GuardClauses 5.0.0 not "
        "restored: `dotnet restore` of the plan's packages failed (exit 1); first error: "
        f"{tmp_path}/scratch/plan-packages.csproj : error NU1301: Unable to load the service "
        f"index for source https://127.0.0.1:9/v3/index.json.; logs in {tmp_path}/logs")


def reference(project: Path, package: str, version: str) -> None:
    project.write_text(project.read_text().replace(
        "</Project>", f'  <ItemGroup>\n    <PackageReference Include="{package}" '
        f'Version="{version}" />\n  </ItemGroup>\n</Project>'))


@pytest.mark.dotnet
@pytest.mark.e2e
def test_after_the_restore_the_skills_restore_and_build_work_with_every_source_unreachable(
        tmp_path: Path) -> None:
    worktree = copy_fixture(tmp_path, "all-pass-net10")
    env = dotnet_env(tmp_path)
    report = restore_worktree(worktree, tmp_path / "restore", env)
    assert report is not None and report.passed, report
    result = restore_packages(worktree, [Package("Ardalis.GuardClauses", "5.0.0")],
                              tmp_path / "scratch", tmp_path / "logs", env)
    assert [str(p) for p in result.restored] == ["Ardalis.GuardClauses 5.0.0"]
    # from here on no package source answers: what the skill says must work from the cache
    (worktree / "NuGet.config").write_text(UNREACHABLE, encoding="utf-8")
    reference(worktree / "src/Calc/Calc.csproj", "Ardalis.GuardClauses", "5.0.0")
    restore = run_process(["dotnet", "restore", "src/Calc/Calc.csproj", "-p:NuGetAudit=false"],
                          cwd=worktree, env=env, deadline_s=300)
    assert restore.exit_code == 0, restore.stdout + restore.stderr
    assert "NU1301" not in restore.stdout, restore.stdout
    build = run_process(["dotnet", "build", "--no-restore", "-nodeReuse:false"], cwd=worktree,
                        env=env, deadline_s=300)
    assert build.exit_code == 0, build.stdout + build.stderr
    assert "Build succeeded." in build.stdout and " 0 Error(s)" in build.stdout, build.stdout
    # a package nobody restored cannot come from anywhere: the source really is unreachable
    reference(worktree / "src/Calc/Calc.csproj", "Ulid", "1.4.1")
    offline = run_process(["dotnet", "restore", "src/Calc/Calc.csproj", "-p:NuGetAudit=false"],
                          cwd=worktree, env=env, deadline_s=300)
    assert offline.exit_code == 1, offline.stdout
    assert ("error NU1301: Unable to load the service index for source "
            "https://127.0.0.1:9/v3/index.json.") in offline.stdout, offline.stdout
