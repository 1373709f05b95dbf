"""`dg` projects load a harness root through `specops_dag.dagster_adapter.component`: the real `dg` CLI of this
venv, run on a small `dg` project written into tmp_path next to a diamond harness root."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from specops_dag.dagster_adapter.component import (
    HarnessRootError,
    SpecopsWorkflowsComponent,
    harness_root_of,
)
from specops_dag.dagster_adapter.definitions import build_definitions

from ..support.harness import VENV_BIN, write_tree

COMPONENT = "specops_dag.dagster_adapter.component.SpecopsWorkflowsComponent"
DEFS_YAML = "src/team/defs/specops/defs.yaml"


def dg_project(tmp_path: Path, attributes: str) -> Path:
    """A `dg` project `team` (src layout) with one component, `defs/specops/defs.yaml`."""
    return write_tree(tmp_path / "team", {
        "pyproject.toml": """
            [project]
            name = "team"
            version = "0.1.0"

            [tool.dg]
            directory_type = "project"

            [tool.dg.project]
            root_module = "team"

            [tool.dg.cli]
            telemetry = { enabled = false }
        """,
        "src/team/__init__.py": "",
        "src/team/definitions.py": """
            from pathlib import Path

            import dagster as dg


            @dg.definitions
            def defs() -> dg.Definitions:
                return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
        """,
        "src/team/defs/__init__.py": "",
        DEFS_YAML: f"type: {COMPONENT}\nattributes:\n{attributes}",
    }).resolve()


def component_dir(project: Path) -> Path:
    return (project / DEFS_YAML).parent


def relative_root(project: Path, harness: Path) -> str:
    return os.path.relpath(harness, component_dir(project))


def dg(env: dict[str, str], project: Path, *args: str) -> subprocess.CompletedProcess:
    # A team installs its project into its venv (`uv pip install -e .`); PYTHONPATH stands in for
    # that here, so nothing is installed. dg 1.13 loads a project in its own interpreter.
    return subprocess.run([str(VENV_BIN / "dg"), *args], cwd=project,
                          env={**env, "PYTHONPATH": str(project / "src")}, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.e2e
def test_a_dg_project_lists_the_harness_root_s_workflows_through_the_component(
        tmp_path: Path, diamond_root: Path, clean_env: dict[str, str]) -> None:
    project = tmp_path / "team"
    project = dg_project(tmp_path, f"  harness_root: {relative_root(project, diamond_root)}\n")

    components = dg(clean_env, project, "list", "components", "--json")
    assert components.returncode == 0, components.stderr
    assert {"key": COMPONENT,
            "summary": "The specops workflows of a harness root's `workflow_defs/`, one asset "
                       "per node."} in json.loads(components.stdout)["items"]

    check = dg(clean_env, project, "check", "yaml")
    assert (check.returncode, check.stdout) == (0, "All component YAML validated successfully.\n")

    listed = dg(clean_env, project, "list", "defs", "--json")
    assert listed.returncode == 0, listed.stderr
    defs = json.loads(listed.stdout)
    assets = {a["asset_key"]: a for a in defs["assets"]}
    deps = {k: assets[k]["dependency_keys"] for k in assets if k.startswith("diamond/")}
    assert deps == {"diamond/a": [], "diamond/b": ["diamond/a"], "diamond/c": ["diamond/a"],
                    "diamond/d": ["diamond/b", "diamond/c"]}
    assert assets["diamond/d"]["source"] == f"{DEFS_YAML}:1"
    # Exactly what the code location builds for that root: the built-in workflows as well.
    expected = build_definitions(diamond_root)
    assert set(assets) == {k.to_user_string()
                           for k in expected.resolve_asset_graph().get_all_asset_keys()}
    assert sorted(j["name"] for j in defs["jobs"]) == sorted(j.name for j in expected.jobs or [])
    assert "diamond_job" in {j["name"] for j in defs["jobs"]}
    assert [s["name"] for s in defs["schedules"]] == ["nightly"]
    assert [s["name"] for s in defs["sensors"]] == ["gate_approvals"]
    assert defs["resources"] == [{"name": "specops",
                                  "type": "specops_dag.dagster_adapter.resources.SpecopsResource"}]

    loaded = dg(clean_env, project, "check", "defs")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert loaded.stdout.splitlines()[-1] == "All definitions loaded successfully."


def test_the_component_roots_the_specops_resource_at_the_harness_root_it_names(
        tmp_path: Path, diamond_root: Path) -> None:
    from dagster.components.core.component_tree import ComponentTree

    project = tmp_path / "team"
    project = dg_project(tmp_path, f"  harness_root: {relative_root(project, diamond_root)}\n")
    context = ComponentTree.for_test().load_context.for_path(component_dir(project))
    component = SpecopsWorkflowsComponent.from_attributes_dict(
        attributes={"harness_root": relative_root(project, diamond_root)}, context=context)
    defs = component.build_defs(context)
    assert defs.resources is not None
    assert defs.resources["specops"].root == str(diamond_root.resolve())


@pytest.mark.e2e
def test_dg_check_yaml_names_a_misspelt_attribute_with_its_file_and_line(
        tmp_path: Path, diamond_root: Path, clean_env: dict[str, str]) -> None:
    project = tmp_path / "team"
    project = dg_project(tmp_path, f"  harness_rot: {relative_root(project, diamond_root)}\n")
    check = dg(clean_env, project, "check", "yaml")
    assert check.returncode == 1
    assert (f"{project / DEFS_YAML}:3 - {COMPONENT} attributes.harness_rot Additional properties "
            "are not allowed ('harness_rot' was unexpected)\n") in check.stdout
    assert (f"{project / DEFS_YAML}:2 - {COMPONENT} attributes 'harness_root' is a required "
            "property\n") in check.stdout


@pytest.mark.e2e
def test_a_harness_root_that_does_not_exist_fails_dg_check_defs_saying_what_to_change(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    project = dg_project(tmp_path, "  harness_root: ../../../../../harnes\n")
    loaded = dg(clean_env, project, "check", "defs")
    assert loaded.returncode == 1
    # The YAML passes its schema (whether a path exists is no schema question); loading fails.
    assert loaded.stdout.startswith("All component YAML validated successfully.\n")
    here = component_dir(project)
    assert (f"specops_dag.dagster_adapter.component.HarnessRootError: `harness_root: ../../../../../harnes` in "
            f"{here / 'defs.yaml'}: {tmp_path.resolve() / 'harnes'} does not exist; point "
            "`harness_root` at the harness root (the folder holding `workflow_defs/`), relative "
            f"to {here} or absolute\n") in loaded.stdout


@pytest.mark.parametrize("case", ["workflow_defs itself", "no workflow_defs", "a file"])
def test_a_harness_root_without_workflow_defs_is_refused_saying_what_to_change(
        tmp_path: Path, diamond_root: Path, case: str) -> None:
    here = write_tree(tmp_path / "team/defs/specops", {"defs.yaml": f"type: {COMPONENT}\n"})
    named = {"workflow_defs itself": diamond_root / "workflow_defs",
             "no workflow_defs": diamond_root / "workflow_defs/workflows",
             "a file": diamond_root / "workflow_defs/workflows/diamond.yaml"}[case]
    value = os.path.relpath(named, here)
    where = f"`harness_root: {value}` in {here / 'defs.yaml'}"
    fix = ("point `harness_root` at the harness root (the folder holding `workflow_defs/`), "
           f"relative to {here} or absolute")
    expected = {
        "workflow_defs itself": f"{where} names the `workflow_defs/` folder itself; name the "
                                f"folder holding it: `harness_root: {os.path.relpath(diamond_root, here)}`",
        "no workflow_defs": f"{where}: {named} has no `workflow_defs/` folder; {fix}",
        "a file": f"{where}: {named} is a file, not a folder; {fix}",
    }[case]
    with pytest.raises(HarnessRootError) as err:
        harness_root_of(here, value)
    assert err.value.message == expected
