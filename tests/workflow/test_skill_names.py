"""A skill names only skills its phase binds whenever it binds that skill (`Checks.
check_skill_names`, run by `specops check` and `new`), and the built-in skills ask the offline
agent for no package or tool it cannot restore."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.builtin import BUILTIN_DEFS
from specops_dag.errors import DefinitionError
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.cli import specops
from ..support.harness import write_tree

PHASE = """kind: phase
id: {pid}
execution:
  goal: Think.
  executor: {{kind: codex}}
  skills:
{skills}
output: {{ports: {{out: {{contract: {pid}-out}}}}}}
"""
MADE_UP = {
    "workflow_defs/phases/p-build.yaml": PHASE.format(pid="p-build", skills=(
        "    - {id: build, path: skills/build/SKILL.md, load: entry}\n"
        "    - {id: survey, path: skills/survey/SKILL.md, load: on-demand}\n"
        "    - {id: mobile, path: skills/mobile/SKILL.md, load: on-demand,"
        " when: {platforms: [ios]}}")),
    "workflow_defs/phases/p-spec.yaml": PHASE.format(pid="p-spec", skills=(
        "    - {id: spec, path: skills/spec/SKILL.md, load: entry}\n"
        "    - {id: helper, path: skills/helper/SKILL.md, load: on-demand}")),
    # `spec` before " gate" is the gate, not the skill; `mobile` is a platform skill
    "workflow_defs/skills/build/SKILL.md": "Load `survey`; `mobile` for iOS; see the `spec` gate.\n",
    "workflow_defs/skills/survey/SKILL.md": "Survey the repository.\n",
    "workflow_defs/skills/mobile/SKILL.md": "Return to `build`.\n",  # bound whenever it is
    "workflow_defs/skills/spec/SKILL.md": "Use `helper`, then `survey`.\n",
    "workflow_defs/skills/helper/SKILL.md": "Help.\n",
    "workflow_defs/skills/graph.yaml": """
        edges:
          - {from: build, to: survey, reason: Before changing code.}
          - {from: build, to: mobile, reason: For the iOS app.}
          - {from: spec, to: survey, reason: Before naming projects.}
    """,
}


def test_a_skill_naming_one_its_phase_does_not_bind_fails_with_each_place_and_fix(
        tmp_path: Path) -> None:
    root = write_tree(tmp_path, MADE_UP)
    with pytest.raises(DefinitionError) as info:
        load_catalog([root / "workflow_defs"], display_base=root, skill_names=True)
    assert info.value.problems == [
        "workflow_defs/skills/build/SKILL.md: names skill `mobile`, but phase `p-build` binds "
        "`mobile` only `when: {platforms: [ios]}` and `build` always (workflow_defs/phases/"
        "p-build.yaml: execution.skills); name a platform skill only through a skills/graph.yaml "
        "edge, or bind both under the same platforms",
        "workflow_defs/skills/spec/SKILL.md: names skill `survey`, but phase `p-spec` binds `spec` "
        "without `survey` (workflow_defs/phases/p-spec.yaml: execution.skills); bind `survey` "
        "there or stop naming it",
        "workflow_defs/skills/graph.yaml: edges[2].to: `spec` loads `survey`, but phase `p-spec` "
        "binds `spec` without `survey` (workflow_defs/phases/p-spec.yaml: execution.skills); "
        "bind `survey` there or remove the edge"]


def test_a_frozen_snapshot_is_loaded_without_the_rule(tmp_path: Path) -> None:
    root = write_tree(tmp_path, MADE_UP)
    assert set(load_catalog([root / "workflow_defs"], display_base=root).phases) == {
        "p-build", "p-spec"}


def test_specops_check_reports_it_and_exits_2(tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = write_tree(tmp_path, MADE_UP)
    result = specops(clean_env, root, "check")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines()[1:] == [
        "workflow_defs/skills/spec/SKILL.md: names skill `survey`, but phase `p-spec` binds `spec` "
        "without `survey` (workflow_defs/phases/p-spec.yaml: execution.skills); bind `survey` "
        "there or stop naming it",
        "workflow_defs/skills/graph.yaml: edges[2].to: `spec` loads `survey`, but phase `p-spec` "
        "binds `spec` without `survey` (workflow_defs/phases/p-spec.yaml: execution.skills); "
        "bind `survey` there or remove the edge",
        "error: 3 problem(s) in the definitions; nothing was changed"]


def test_every_built_in_skill_names_only_skills_bound_beside_it() -> None:
    catalog = load_catalog(definition_roots(None), skill_names=True)
    assert "tdd-csharp" in {sid for kind, sid in catalog.sources if kind == "skill"}


# What an agent session without network cannot get: packages the repository does not reference
# (the time-provider fake, the ASP.NET Core test host), and downloads by templates and tools.
OFFLINE_UNREACHABLE = ("FakeTimeProvider", "TimeProvider.Testing", "Mvc.Testing", "dotnet-ef",
                       "dotnet ef", "dotnet new", "dotnet tool")


def test_no_built_in_text_asks_for_a_package_or_tool_the_offline_session_cannot_restore() -> None:
    found = [f"{path.relative_to(BUILTIN_DEFS)}: {word}"
             for path in sorted(BUILTIN_DEFS.rglob("*")) if path.suffix in (".md", ".yaml")
             for word in OFFLINE_UNREACHABLE if word in path.read_text(encoding="utf-8")]
    assert found == []


@pytest.mark.parametrize("skill", ["design", "pbr-planner"])
def test_the_plan_and_the_spec_list_the_packages_the_change_adds(skill: str) -> None:
    text = (BUILTIN_DEFS / "skills" / skill / "SKILL.md").read_text(encoding="utf-8")
    assert "`## Packages`: each package" in text
    assert "or `none`" in text
