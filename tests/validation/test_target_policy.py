"""The .NET target policy (issue 42): `validation.target` in validation.yaml, resolved for the
target repository and frozen in the delivery's snapshot by `specops new`; the validator refuses an
SDK the policy does not allow and runs a target's tests on a newer runtime only where it says so.
The `dotnet`-marked tests use the real SDK on PATH."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specops_dag.delivery.store import Store
from specops_dag.execution.attempt import layout_of
from specops_dag.validation.dotnet import validate_full
from specops_dag.workflow.catalog import load_snapshot
from specops_dag.workflow.model import ValidationConfig

from ..support.agents import AGENTIC
from ..support.cli import specops
from ..support.dotnet import copy_fixture
from ..support.harness import write_tree

WHERE = "workflow_defs/validation.yaml (or the phase)"


def fixture_harness(tmp_path: Path, fixture: str, extra: dict[str, str] | None = None) -> Path:
    root = copy_fixture(tmp_path, fixture)
    write_tree(root, {**AGENTIC, **(extra or {})})
    return root


def test_new_freezes_the_target_policy_global_json_pins_and_a_later_change_leaves_it(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = fixture_harness(tmp_path, "all-pass")
    result = specops(clean_env, root, "new", "agentic", "d1", "--request", "x",
                     "--validation", "full")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == (
        "target policy: net8.0, a newer SDK allowed (auto: global.json pins SDK 8.0.100; "
        "frozen at `specops new`)")
    state = json.loads((root / "phases/d1/index.json").read_text())
    assert state["snapshot"]["target"] == {
        "framework": "net8.0", "newer_sdk": True, "newer_runtime": True,
        "origin": "auto: global.json pins SDK 8.0.100; frozen at `specops new`"}
    # validation.yaml and global.json change after `new`: the delivery keeps its policy
    write_tree(root, {"workflow_defs/validation.yaml":
                      "validation:\n  target: {framework: net10.0, newer_sdk: false}\n",
                      "global.json": '{"sdk": {"version": "10.0.100"}}'})
    store = Store(root)
    d1 = store.read("d1")
    catalog = load_snapshot(root / "phases/d1/snapshot", display_base=root)
    layout = layout_of(catalog, d1, d1.get_step("write"))
    assert layout.target.model_dump() == state["snapshot"]["target"]


def test_new_takes_the_framework_validation_yaml_names(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = fixture_harness(tmp_path, "all-pass", {
        "workflow_defs/validation.yaml": "validation:\n  target: {framework: net10.0, "
                                         "newer_sdk: false, newer_runtime: false}\n"})
    result = specops(clean_env, root, "new", "agentic", "d1", "--request", "x",
                     "--validation", "full")
    assert result.returncode == 0, result.stderr
    state = json.loads((root / "phases/d1/index.json").read_text())
    assert state["snapshot"]["target"] == {
        "framework": "net10.0", "newer_sdk": False, "newer_runtime": False,
        "origin": "validation.target.framework; frozen at `specops new`"}


def test_new_refuses_a_repository_that_pins_no_supported_target_and_creates_nothing(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = fixture_harness(tmp_path, "all-pass", {"global.json": '{"sdk": {"version": "9.0.100"}}'})
    result = specops(clean_env, root, "new", "agentic", "d1", "--request", "x",
                     "--validation", "full")
    assert result.returncode == 2
    assert result.stderr.endswith(
        f"Error: {root}: global.json pins SDK 9.0.100, which is no supported .NET target "
        "(supported: net8.0 (an 8.0 SDK), net10.0 (a 10.0 SDK)); pin one of those lines in "
        "global.json, or set `validation.target.framework` in workflow_defs/validation.yaml; "
        "nothing was created\n")
    assert not (root / "phases").exists()
    docs = specops(clean_env, root, "new", "agentic", "d2", "--request", "x",
                   "--validation", "docs-only")
    assert docs.returncode == 0, docs.stderr  # nothing to build: no policy needed
    assert json.loads((root / "phases/d2/index.json").read_text())["snapshot"].get(
        "target") is None
    none = specops(clean_env, root, "new", "agentic", "d3", "--request", "x",
                   "--validation", "none")
    assert none.stdout == ("created delivery d3 (agentic, 2 steps) in phases/d3/; run it with "
                           "`specops run d3`\n")  # nothing builds .NET: no policy to freeze


def test_a_bad_target_in_validation_yaml_names_the_key_and_the_choices(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = fixture_harness(tmp_path, "all-pass", {
        "workflow_defs/validation.yaml": "validation:\n  target: {framework: net9.0}\n"})
    result = specops(clean_env, root, "check")
    assert result.returncode == 2
    assert "workflow_defs/validation.yaml: validation.target.framework: Input should be 'auto', " \
           "'net8.0' or 'net10.0'" in result.stderr


# -- the real SDK ------------------------------------------------------------------------------

def real_sdk() -> str:
    import subprocess

    return subprocess.run(["dotnet", "--version"], capture_output=True, text=True, timeout=60,
                          cwd="/", stdin=subprocess.DEVNULL).stdout.strip()


@pytest.mark.dotnet
@pytest.mark.e2e
def test_a_policy_without_newer_sdks_refuses_the_newer_sdk_and_names_the_fix(
        tmp_path: Path) -> None:
    assert shutil.which("dotnet"), "the real .NET SDK must be on PATH"
    root = copy_fixture(tmp_path, "all-pass")
    config = ValidationConfig.model_validate({"target": {"framework": "net8.0",
                                                         "newer_sdk": False}})
    report = validate_full(root, tmp_path / "logs", config=config)
    sdk = real_sdk()
    assert (report.passed, report.stage, report.blame) == (False, "sdk", "environment")
    assert report.message.startswith(
        f"`dotnet --version` selected SDK {sdk} (global.json sdk.version 8.0.100, rollForward "
        "latestmajor), which the target policy does not allow; target policy net8.0: an 8.0 SDK "
        "only (validation.target.framework); installed SDKs: ")
    assert report.message.endswith(
        "; fix: install an 8.0 SDK and pin it in global.json (e.g. {\"sdk\": {\"version\": "
        "\"8.0.100\", \"rollForward\": \"latestFeature\"}}), or set "
        f"`validation.target.newer_sdk: true` in {WHERE}")


@pytest.mark.dotnet
@pytest.mark.e2e
def test_net8_tests_roll_forward_to_the_installed_runtime_only_where_the_policy_says_so(
        tmp_path: Path) -> None:
    import subprocess

    assert shutil.which("dotnet"), "the real .NET SDK must be on PATH"
    runtimes = subprocess.run(["dotnet", "--list-runtimes"], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL).stdout
    if "Microsoft.NETCore.App 8.0." in runtimes:
        pytest.skip("an 8.0 runtime is installed here: nothing rolls forward")
    root = copy_fixture(tmp_path, "all-pass")
    rolled = validate_full(root, tmp_path / "logs")
    assert (rolled.passed, rolled.stage, rolled.target) == (True, "test", "net8.0")
    assert rolled.notes[0].startswith(
        "no 8.0 runtime is installed, so the net8.0 tests ran on the newest installed runtime "
        "(DOTNET_ROLL_FORWARD=Major, validation.target.newer_runtime); installed: "
        "Microsoft.NETCore.App 10.")
    strict = ValidationConfig.model_validate({"target": {"newer_runtime": False}})
    refused = validate_full(root, tmp_path / "logs2", config=strict)
    assert (refused.passed, refused.stage, refused.blame) == (False, "test", "environment")
    assert refused.message.startswith(
        "no 8.0 runtime (Microsoft.NETCore.App 8.0.x) is installed to run the net8.0 tests; "
        "installed: Microsoft.NETCore.App 10.")
    assert refused.message.endswith(
        "; fix: install the .NET 8.0 runtime, or set `validation.target.newer_runtime: true` in "
        f"{WHERE}")
    assert [c["command"].split()[1] for c in refused.commands][-1] == "--list-runtimes"
