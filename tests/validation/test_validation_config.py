"""`workflow_defs/validation.yaml` and a phase's `validation:` mapping (issue 16): checked at load
with messages that name the file, the key and the fix; a phase's keys override the file's."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.errors import DefinitionError
from specops_dag.workflow.catalog import load_catalog

from ..support.harness import DIAMOND, write_tree

VY = "workflow_defs/validation.yaml"
PHASE = "workflow_defs/phases/p-a.yaml"


def with_phase_validation(block: str) -> dict[str, str]:
    text = DIAMOND["workflow_defs/phases/p-a.yaml"].replace("validation: none\n", block)
    return {**DIAMOND, PHASE: text}


def problems(tmp_path: Path, files: dict[str, str]) -> list[str]:
    root = write_tree(tmp_path / "harness", files)
    with pytest.raises(DefinitionError) as info:
        load_catalog([root / "workflow_defs"], display_base=root)
    return info.value.problems


BAD = [
    pytest.param({VY: "validation:\n  sdk: {require_globaljson: false}\n"},
                 ["workflow_defs/validation.yaml: validation.sdk.require_globaljson: unknown key "
                  "`require_globaljson`; "
                  "remove it or fix the spelling (allowed: require_global_json)"],
                 id="misspelt-sdk-key"),
    pytest.param({VY: "validation:\n  judge: relaxed\n"},
                 ["workflow_defs/validation.yaml: validation.judge: Input should be 'absolute' or "
                  "'regressions'"], id="unknown-judge"),
    pytest.param({VY: "validation:\n  build: [../Other.sln, src/App/App.txt]\n"},
                 ["workflow_defs/validation.yaml: validation.build[0]: `../Other.sln` escapes the "
                  "phase folder; name a .sln, .slnx or .csproj by its path relative to the "
                  "repository root, e.g. `App.sln`",
                  "workflow_defs/validation.yaml: validation.build[1]: `src/App/App.txt` is not a "
                  "solution or project; name a .sln, .slnx or .csproj by its path relative to "
                  "the repository root, e.g. `App.sln`"], id="bad-build-targets"),
    pytest.param({VY: "validation:\n  exclude: [/abs/snippets]\n"},
                 ["workflow_defs/validation.yaml: validation.exclude[0]: `/abs/snippets` is "
                  "absolute; use a glob relative to the repository root, e.g. "
                  "`docs/snippets/**`"], id="absolute-exclude"),
    pytest.param({VY: "validation:\n  analyzer_frameworks: [net6.0]\n"},
                 ["workflow_defs/validation.yaml: validation.analyzer_frameworks[0]: `net6.0` is "
                  "not a framework Roslyn loads analyzers from; use one of netstandard2.0, "
                  "net8.0"], id="analyzer-framework"),
    pytest.param({VY: "validation:\n  configuration: 'Release Build'\n"},
                 ["workflow_defs/validation.yaml: validation.configuration: `Release Build` is "
                  "not an MSBuild configuration name; use letters, digits, `_`, `.`, `-`, e.g. "
                  "`Release`"], id="configuration-name"),
    pytest.param({VY: "validation:\n  mode: none\n"},
                 ["workflow_defs/validation.yaml: validation.mode: the mode is chosen per phase "
                  "(`validation: full | docs-only | none` in the phase); remove it here"],
                 id="mode-in-the-file"),
    pytest.param({VY: "sdk: {require_global_json: false}\n"},
                 ["workflow_defs/validation.yaml: validation: missing required key `validation`; "
                  "add it",
                  "workflow_defs/validation.yaml: sdk: unknown key `sdk`; remove it or fix the "
                  "spelling (allowed: validation)"], id="no-validation-key"),
    pytest.param({VY: "validation:\n  nuget_audit: ignore\n"},
                 ["workflow_defs/validation.yaml: validation.nuget_audit: Input should be "
                  "'environment' or 'failure'"], id="nuget-audit-policy"),
]


@pytest.mark.parametrize(("files", "expected"), BAD)
def test_a_bad_validation_yaml_is_refused_at_load_with_the_key_and_the_fix(
        tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    assert problems(tmp_path, {**DIAMOND, **files}) == expected


def test_a_phase_validation_mapping_is_checked_like_the_file(tmp_path: Path) -> None:
    files = with_phase_validation("validation: {mode: full, build: [App.txt]}\n")
    assert problems(tmp_path, files) == [
        "workflow_defs/phases/p-a.yaml: validation.build[0]: `App.txt` is not a solution or "
        "project; name a .sln, .slnx or .csproj by its path relative to the repository "
        "root, e.g. `App.sln`"]


def test_a_phase_overrides_the_files_layout_key_by_key(tmp_path: Path) -> None:
    files = {**with_phase_validation("validation: {mode: full, judge: regressions}\n"),
             VY: "validation:\n  sdk: {require_global_json: false}\n  judge: absolute\n"}
    root = write_tree(tmp_path / "harness", files)
    catalog = load_catalog([root / "workflow_defs"], display_base=root)
    layout = catalog.validation_for("p-a")
    assert (layout.mode, layout.judge, layout.sdk.require_global_json) == (
        "full", "regressions", False)
    other = catalog.validation_for("p-b")  # `validation: none` keeps the file's layout
    assert (other.mode, other.judge, other.sdk.require_global_json) == ("none", "absolute", False)
    assert catalog.phases["p-a"].validation_mode == "full"


def test_a_slnx_solution_is_a_build_target_like_a_sln(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "harness", {VY: "validation:\n  build: [App.slnx, App.csproj]\n"})
    load_catalog([root / "workflow_defs"], display_base=root)  # no DefinitionError
