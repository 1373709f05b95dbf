"""The packages instruction of `dotnet-build-hygiene` is a contract (issue 43): a package the
step's upstream markdown lists under `## Packages` is restored by the executor before the first
attempt, outside the sandbox, into the agent's own package folder; in the writing sandbox, with
no network, the agent adds the `PackageReference` at that version, runs `dotnet restore
<project> -p:NuGetAudit=false` and builds `--no-restore`, all for real. A package the source
does not serve is named in the step's preparation and blocks nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import agentic_git_harness, outputs_seen, replay, settings_for

REQUEST = """Use guard clauses in the calculator.

## Packages
- `Ardalis.GuardClauses` `5.0.0` — guard clauses (MIT)
- Specops.Does.Not.Exist 1.0.0 — made up, no source serves it
"""
ADD = ("sed -i 's#</Project>#  <ItemGroup>\\n    <PackageReference Include=\"Ardalis.GuardClauses\""
       " Version=\"5.0.0\" />\\n  </ItemGroup>\\n</Project>#' src/Calc/Calc.csproj")
RESTORE = "dotnet restore src/Calc/Calc.csproj -p:NuGetAudit=false"
BUILD = "dotnet build --no-restore"
# a package nobody restored, in a project of the node folder: the sandbox has no package source
PROBE = ("mkdir -p {node}/probe && printf '%s' '<Project Sdk=\"Microsoft.NET.Sdk\"><PropertyGroup>"
         "<TargetFramework>net10.0</TargetFramework></PropertyGroup><ItemGroup><PackageReference "
         "Include=\"Ulid\" Version=\"1.4.1\" /></ItemGroup></Project>' > {node}/probe/Probe.csproj"
         " && NUGET_ENHANCED_MAX_NETWORK_TRY_COUNT=1 dotnet restore {node}/probe/Probe.csproj "
         "-p:NuGetAudit=false")


@pytest.mark.dotnet
@pytest.mark.e2e
def test_a_package_the_plan_lists_is_restored_before_the_session_and_the_agent_uses_it_offline(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path, "all-pass-net10")
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic",
                     "d1", REQUEST)
    probe = PROBE.format(node=(root / "phases/d1/write").resolve())
    turns = [{"shell": ADD}, {"shell": RESTORE, "yield_time_ms": 240_000},
             {"shell": BUILD, "yield_time_ms": 240_000},
             {"shell": probe, "yield_time_ms": 240_000}]
    with replay(tmp_path, {"write": [{"literal": {"before": turns}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    cache = root.resolve() / ".specops/cache"
    step = store.read("d1").get_step("write")
    assert step.preparation == (
        f"restored by the executor before attempt 1 (NuGet packages in {cache}/nuget-packages, "
        f"dotnet home {cache}/dotnet-home); logs in {root.resolve()}/phases/d1/write/validation/"
        "restore; the plan's packages (`## Packages` of phases/d1/request.md): restored "
        f"Ardalis.GuardClauses 5.0.0 into {cache}/nuget-packages; the package source does not "
        "serve Specops.Does.Not.Exist (NU1101: no package with this id), so it was not restored "
        "and the agent cannot use it")
    seen = outputs_seen(tmp_path, "write")
    assert "Process exited with code 0" in seen[ADD], seen[ADD]
    restore, build = seen[RESTORE], seen[BUILD]
    assert "Process exited with code 0" in restore, restore
    assert "Restored " in restore and "Calc.csproj" in restore, restore
    assert "Process exited with code 0" in build, build
    assert "Build succeeded." in build and " 0 Error(s)" in build, build
    for text in (restore, build):
        for trouble in ("NU1301", "NU1101", "Permission denied", "Read-only file system"):
            assert trouble not in text, text
    assert seen[probe] == ('exec_command failed: ProcessFailed { message: "Network access to '
                           '\\"api.nuget.org\\" was blocked: domain is not on the allowlist for '
                           'the current sandbox mode." }')
    worktree = root / ".specops/worktrees/d1"
    assert "Ardalis.GuardClauses" in (worktree / "src/Calc/Calc.csproj").read_text()
