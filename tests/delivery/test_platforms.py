"""Platforms at `specops new` (`delivery/platform.py`, `lifecycle.platforms_for`): detected from
the target's project files (at the commit its worktree starts from, for a git target), or given
with `--platform`, which replaces the detection; recorded in the state with where each came from,
and binding the platform skills and their graph edges in the snapshot."""

from __future__ import annotations

from pathlib import Path

import git
import pytest
import yaml

from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.platform import detect_platforms, platforms_in
from specops_dag.delivery.queries import work_path
from specops_dag.delivery.store import Store
from specops_dag.errors import UsageError
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.cli import specops
from ..support.dotnet import copy_fixture
from ..support.git import WHO, commit_all
from ..support.harness import DIAMOND, write_tree

EF_PROJECT = """<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup><TargetFramework>net8.0</TargetFramework></PropertyGroup>
  <ItemGroup>
    <PackageReference Include="Microsoft.EntityFrameworkCore.Sqlite" Version="8.0.11" />
  </ItemGroup>
</Project>
"""


def ef_fixture(tmp_path: Path) -> Path:
    """The all-pass fixture plus a data project that references EF Core's SQLite provider."""
    root = copy_fixture(tmp_path, "all-pass")
    return write_tree(root, {"src/Data/Data.csproj": EF_PROJECT})


@pytest.mark.parametrize(("rel", "text", "found"), [
    pytest.param("A.csproj", '<Project Sdk="Microsoft.NET.Sdk.Web"/>', ["aspnetcore"],
                 id="web-sdk"),
    pytest.param("A.csproj", "<Project Sdk='microsoft.net.sdk.WEB'/>", ["aspnetcore"],
                 id="single-quotes-any-case"),
    pytest.param("A.csproj", '<Project Sdk=" Microsoft.NET.Sdk.Web/8.0.0 "/>', ["aspnetcore"],
                 id="with-a-version"),
    pytest.param("A.csproj", '<Project><Sdk Name="Microsoft.NET.Sdk.Web"/></Project>',
                 ["aspnetcore"], id="sdk-element"),
    pytest.param("A.csproj", '<Project><Import Project="Sdk.props" Sdk="Microsoft.NET.Sdk.Web"/>'
                 "</Project>", ["aspnetcore"], id="import-element"),
    pytest.param("A.csproj", '<Project Sdk="Microsoft.NET.Sdk"><!-- Sdk="Microsoft.NET.Sdk.Web"'
                 " --></Project>", [], id="commented-out"),
    pytest.param("A.csproj", '<Project Sdk="Microsoft.NET.Sdk.Worker"/>', [], id="worker-sdk"),
    pytest.param("Web.props", '<Project Sdk="Microsoft.NET.Sdk.Web"/>', [], id="sdk-only-in-csproj"),
    pytest.param("A.csproj", '<Project><ItemGroup><PackageReference Include="Microsoft.'
                 'EntityFrameworkCore" Version="8.0.11"/></ItemGroup></Project>', ["ef-core"],
                 id="ef-core"),
    pytest.param("Directory.Build.props", '<Project><ItemGroup><packagereference include="Npgsql.'
                 'EntityFrameworkCore.PostgreSQL"/></ItemGroup></Project>', ["ef-core"],
                 id="ef-core-provider-in-props"),
    pytest.param("A.csproj", '<Project><ItemGroup><PackageReference Include="EntityFramework"/>'
                 "</ItemGroup></Project>", [], id="ef6-is-not-ef-core"),
    pytest.param("A.csproj", '<Project Sdk="Microsoft.NET.Sdk.Web"', [], id="not-xml"),
])
def test_a_project_file_shows_a_platform_in_any_notation_msbuild_reads(
        rel: str, text: str, found: list[str]) -> None:
    assert platforms_in(rel, text.encode()) == found


def test_a_git_target_is_read_at_the_commit_its_worktree_starts_from_not_on_disk(
        tmp_path: Path) -> None:
    target = copy_fixture(tmp_path, "minimal-api")
    commit_all(target)
    api = target / "src/TodoApi/TodoApi.csproj"
    api.write_text(api.read_text().replace("Microsoft.NET.Sdk.Web", "Microsoft.NET.Sdk"))
    write_tree(target, {"src/Data/Data.csproj": EF_PROJECT})  # not committed
    assert detect_platforms(target, "d1") == {"aspnetcore": "src/TodoApi/TodoApi.csproj"}
    repo = git.Repo(target)
    repo.git.checkout("-b", "feat-d1")  # a delivery's branch left by an earlier `new` of d1
    repo.git.add(A=True)
    repo.index.commit("data project", author=WHO, committer=WHO)
    repo.git.checkout("main")
    assert detect_platforms(target, "d1") == {"ef-core": "src/Data/Data.csproj"}
    assert detect_platforms(target, "d2") == {"aspnetcore": "src/TodoApi/TodoApi.csproj"}


def test_a_plain_folder_is_read_on_disk_without_its_build_output(tmp_path: Path) -> None:
    target = ef_fixture(tmp_path)
    write_tree(target, {"src/Calc/obj/Web.csproj": '<Project Sdk="Microsoft.NET.Sdk.Web"/>'})
    assert detect_platforms(target, "d1") == {"ef-core": "src/Data/Data.csproj"}
    assert detect_platforms(copy_fixture(tmp_path / "neither", "all-pass"), "d1") == {}


def test_a_git_target_without_a_commit_is_refused_with_what_to_do(tmp_path: Path) -> None:
    target = copy_fixture(tmp_path, "all-pass")
    git.Repo.init(target, initial_branch="main")
    with pytest.raises(UsageError) as info:
        detect_platforms(target, "d1")
    assert info.value.message == (
        f"cannot read HEAD of {target} to detect its platforms (`git grep`: fatal: unable to "
        "resolve revision: HEAD); the delivery's worktree starts from it: commit to the target "
        "repository first, or name the platforms with --platform")


def new(tmp_path: Path, target: Path, platforms: tuple[str, ...] | None = None,
        workflow: str = "quick-delivery"):
    root = write_tree(tmp_path / "harness", DIAMOND)
    store = Store(root)
    catalog = load_catalog(definition_roots(root), display_base=root)
    state = ops.new_delivery(store, catalog, workflow, "d1", "Add an endpoint.", target,
                             platforms)
    graph = root / "phases/d1/snapshot/skills/graph.yaml"  # none for a workflow without skills
    edges = yaml.safe_load(graph.read_text())["edges"] if graph.exists() else []
    return state, {(e["from"], e["to"]) for e in edges}


def test_a_web_sdk_project_binds_the_aspnetcore_skills_and_records_where_it_was_seen(
        tmp_path: Path) -> None:
    target = copy_fixture(tmp_path, "minimal-api")
    commit_all(target)
    state, edges = new(tmp_path, target)
    assert (state.platforms, state.platforms_from) == (
        ["aspnetcore"], {"aspnetcore": "src/TodoApi/TodoApi.csproj"})
    assert [s.id for s in state.snapshot.skills["quick-develop"]] == [
        "tdd-csharp", "codebase-survey", "dotnet-build-hygiene", "component-reuse",
        "aspnetcore-api"]
    assert ("tdd-csharp", "aspnetcore-api") in edges
    assert ("tdd-csharp", "ef-core-migrations") not in edges


def test_an_ef_core_reference_binds_the_ef_core_skill(tmp_path: Path) -> None:
    state, edges = new(tmp_path, ef_fixture(tmp_path))
    assert (state.platforms, state.platforms_from) == (
        ["ef-core"], {"ef-core": "src/Data/Data.csproj"})
    assert [s.id for s in state.snapshot.skills["quick-develop"]][-1] == "ef-core-migrations"
    assert ("tdd-csharp", "ef-core-migrations") in edges
    assert ("tdd-csharp", "aspnetcore-api") not in edges


def test_neither_binds_no_platform_skill_and_keeps_no_edge_to_one(tmp_path: Path) -> None:
    state, edges = new(tmp_path, copy_fixture(tmp_path, "all-pass"))
    assert (state.platforms, state.platforms_from) == ([], {})
    bound = {s.id for skills in state.snapshot.skills.values() for s in skills}
    assert {"aspnetcore-api", "ef-core-migrations"} & bound == set()
    assert {to for _, to in edges} & {"aspnetcore-api", "ef-core-migrations"} == set()


def test_platform_given_replaces_the_detection(tmp_path: Path) -> None:
    target = copy_fixture(tmp_path, "minimal-api")
    commit_all(target)
    state, edges = new(tmp_path, target, ("ef-core",))
    assert (state.platforms, state.platforms_from) == (["ef-core"], {"ef-core": "--platform"})
    assert [s.id for s in state.snapshot.skills["quick-develop"]][-1] == "ef-core-migrations"
    assert ("tdd-csharp", "aspnetcore-api") not in edges


def test_a_platform_no_skill_of_the_workflow_names_is_refused_before_anything_is_written(
        tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        new(tmp_path, copy_fixture(tmp_path, "all-pass"), ("efcore",))
    assert info.value.message == (
        "--platform efcore: no skill of workflow `quick-delivery` is bound with it (its skills' "
        "platforms: aspnetcore, ef-core); pass one of those, or leave --platform out to detect "
        "them from the repository")
    assert not (tmp_path / "harness/phases").exists()


def test_a_workflow_without_platform_skills_looks_for_none(tmp_path: Path) -> None:
    target = copy_fixture(tmp_path, "minimal-api")  # no commit: not even read
    git.Repo.init(target, initial_branch="main")
    state, _ = new(tmp_path, target, workflow="diamond")
    assert (state.platforms, state.platforms_from) == ([], {})


@pytest.mark.e2e
def test_specops_new_prints_the_platforms_and_status_shows_them(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = write_tree(tmp_path / "harness", DIAMOND)
    api = copy_fixture(tmp_path, "minimal-api")
    commit_all(api)
    policy = ("target policy: net8.0, a newer SDK allowed (auto: global.json pins SDK 8.0.100; "
              "frozen at `specops new`)")
    runs = {
        "d1": (["--target", str(api)], "platforms: aspnetcore (from src/TodoApi/TodoApi.csproj); "
                                       "`--platform P` replaces the detection"),
        "d2": (["--target", str(api), "--platform", "ef-core", "--platform", "aspnetcore"],
               "platforms: ef-core (from --platform), aspnetcore (from --platform)"),
        "d3": (["--target", str(copy_fixture(tmp_path, "all-pass"))],
               "platforms: none detected (no Microsoft.NET.Sdk.Web project, no Entity Framework "
               "Core reference); `--platform P` binds a platform's skills anyway"),
    }
    for delivery, (args, line) in runs.items():
        result = specops(clean_env, root, "new", "quick-delivery", delivery, "--request", "x",
                         *args)
        assert (result.returncode, result.stderr) == (0, "")
        assert result.stdout.splitlines()[1:] == [
            policy, line,
            f"before the first run: gate `target-write` in front of `develop` needs approval: "
            f"`specops approve {delivery} target-write --note ...`, then `specops run {delivery}`",
            "  question: May the agent change the target repository now?"]
    status = specops(clean_env, root, "status", "d1")
    assert status.stdout.splitlines()[2] == "platforms: aspnetcore (from src/TodoApi/TodoApi.csproj)"


SANDBOX_LEFTOVERS = (".git", ".codex", ".agents", ".aws")  # empty, as codex's sandbox leaves them


@pytest.mark.e2e
@pytest.mark.parametrize(("args", "line"), [
    pytest.param([], "platforms: aspnetcore (from src/TodoApi/TodoApi.csproj); `--platform P` "
                     "replaces the detection", id="detected-on-disk"),
    pytest.param(["--platform", "ef-core"], "platforms: ef-core (from --platform)",
                 id="with-platform"),
])
def test_specops_new_on_a_plain_folder_with_a_sandboxs_empty_git_folder_makes_a_plain_folder_delivery(
        tmp_path: Path, clean_env: dict[str, str], args: list[str], line: str) -> None:
    root = write_tree(copy_fixture(tmp_path, "minimal-api"), DIAMOND)  # the root is the target
    for leftover in SANDBOX_LEFTOVERS:
        (root / leftover).mkdir()
    result = specops(clean_env, root, "new", "quick-delivery", "d1", "--request", "x", *args)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines()[0] == ("created delivery d1 (quick-delivery, 3 steps) in "
                                             "phases/d1/; run it with `specops run d1`")
    assert result.stdout.splitlines()[2] == line
    state = Store(root).read("d1")
    assert state.target == "."
    assert work_path(root, state) == root.resolve()  # the agent works in the folder itself
    for leftover in SANDBOX_LEFTOVERS:  # nothing was written into them (no git exclude file)
        assert list((root / leftover).iterdir()) == []
    assert sorted(p.name for p in (root / "phases").iterdir()) == [".index.lock", "d1",
                                                                    "index.json"]
