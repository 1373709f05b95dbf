"""A node's `review:` that chooses its evaluator by the delivery's platforms (issue #43):
`review: {phase: E, max_rounds: N, platforms: {P: F}}` loads when every phase it can choose is an
evaluator, the catalog freezes all of them, and a review that could never act is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.workflow.catalog import load_catalog
from specops_dag.workflow.model import Review

from ..support.harness import DIAMOND, WF, load_problems, write_tree


def evaluator(pid: str, criterion: str) -> str:
    return f"""kind: phase
id: {pid}
input: {{ports: {{up: {{contract: a-out}}}}}}
execution:
  goal: Judge b.
  executor: {{kind: evaluator}}
  sandbox: read-only
  criteria:
    - {{id: {criterion}, description: It holds., threshold: 8}}
  skills:
    - {{id: judge, path: skills/judge/SKILL.md, load: entry, required: true}}
validation: none
"""


def reviewed(tmp_path: Path, review: str, extra: dict[str, str] | None = None) -> Path:
    """The diamond with node b reviewed by `review`, and the evaluators p-eval and p-eval-web."""
    files = {**DIAMOND, "workflow_defs/phases/p-eval.yaml": evaluator("p-eval", "complete"),
             "workflow_defs/phases/p-eval-web.yaml": evaluator("p-eval-web", "runs"),
             "workflow_defs/skills/judge/SKILL.md": "# Judge\n", **(extra or {})}
    files[WF] = files[WF].replace("{id: b, phase: p-b,", f"{{id: b, phase: p-b, review: {review},")
    return write_tree(tmp_path / "harness", files)


def test_a_review_names_an_evaluator_per_platform_and_the_catalog_freezes_every_one(
        tmp_path: Path) -> None:
    root = reviewed(tmp_path, "{phase: p-eval, max_rounds: 2, platforms: {aspnetcore: p-eval-web}}")
    catalog = load_catalog([root / "workflow_defs"], display_base=root)
    review = catalog.workflows["diamond"].nodes[1].review
    assert (review.phase, review.max_rounds, review.platforms) == (
        "p-eval", 2, {"aspnetcore": "p-eval-web"})
    assert catalog.phase_ids_of("diamond") == ["p-a", "p-b", "p-eval", "p-eval-web", "p-c", "p-d"]
    assert [f.rel for f in catalog.files_of("diamond")
            if f.kind == "phase" and f.id.startswith("p-eval")] == [
        "phases/p-eval.yaml", "phases/p-eval-web.yaml"]
    assert catalog.platforms_of("diamond") == ["aspnetcore"]  # `new` detects it, --platform takes it


def test_the_first_platform_listed_that_a_delivery_has_chooses_and_none_keeps_phase() -> None:
    review = Review(phase="e", platforms={"aspnetcore": "e-web", "ef-core": "e-data"})
    assert review.phase_for([]) == "e"
    assert review.phase_for(["ef-core"]) == "e-data"
    assert review.phase_for(["ef-core", "aspnetcore"]) == "e-web"
    assert review.phase_for(("android",)) == "e"
    assert review.phase_ids == ["e", "e-web", "e-data"]
    assert Review(phase="e", platforms={"aspnetcore": "e"}).phase_ids == ["e"]


FAN_OUT = """kind: phase
id: p-fan
input: {ports: {up: {contract: a-out}}}
execution:
  goal: Build each task.
  executor: {kind: codex}
  skills:
    - {id: judge, path: skills/judge/SKILL.md, load: entry, required: true}
  fan_out: {tasks: {input: up, artifact: result}}
output: {ports: {out: {contract: b-out}}}
validation: none
"""

BAD = [
    pytest.param(
        "{phase: p-eval, platforms: {aspnetcore: p-nope}}", {},
        [f"{WF}: nodes[1].review.platforms.aspnetcore: `p-nope` is not an evaluator phase; name a "
         "phase with `executor: {kind: evaluator}`"],
        id="unknown-platform-phase"),
    pytest.param(
        "{phase: p-eval, platforms: {aspnetcore: p-c, ef-core: p-eval-web, ios: p-a}}", {},
        [f"{WF}: nodes[1].review.platforms.aspnetcore: `p-c` is not an evaluator phase; name a "
         "phase with `executor: {kind: evaluator}`",
         f"{WF}: nodes[1].review.platforms.ios: `p-a` is not an evaluator phase; name a phase "
         "with `executor: {kind: evaluator}`"],
        id="platform-phase-not-an-evaluator"),
    pytest.param(
        "{phase: p-c, platforms: {aspnetcore: p-eval-web}}", {},
        [f"{WF}: nodes[1].review.phase: `p-c` is not an evaluator phase; name a phase with "
         "`executor: {kind: evaluator}`"],
        id="default-phase-not-an-evaluator"),
    pytest.param(
        "{phase: p-eval}", {"workflow_defs/phases/p-b.yaml": FAN_OUT.replace("p-fan", "p-b")},
        [f"{WF}: nodes[1].review: phase `p-b` fans out (one session per task), and its merged "
         "tasks never run again to act on a review; put the review on a node that needs this "
         "one"],
        id="review-of-a-fan-out"),
]


@pytest.mark.parametrize(("review", "extra", "expected"), BAD)
def test_a_review_that_cannot_run_as_written_is_refused_at_load_with_the_fix(
        tmp_path: Path, review: str, extra: dict[str, str], expected: list[str]) -> None:
    assert load_problems(reviewed(tmp_path, review, extra)) == expected


def test_a_platform_name_that_is_not_an_id_is_refused_where_it_is(tmp_path: Path) -> None:
    root = reviewed(tmp_path, "{phase: p-eval, platforms: {Web App: p-eval-web}}")
    assert load_problems(root) == [
        f"{WF}: nodes[1].review.platforms.Web App.[key]: `Web App` is not a valid id; use "
        "lowercase letters, digits, `-` and `_`, starting with a letter or digit"]
