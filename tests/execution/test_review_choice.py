"""The review round runs the evaluator the delivery recorded at `specops new` (issue #43), and the
generator's prompt names that one: real codex, the literal replay agent playing both sides."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.delivery.lifecycle import new_delivery
from specops_dag.delivery.store import Store
from specops_dag.execution.attempt import review_of
from specops_dag.execution.step import run_step
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import EVALUATOR, add_review, agentic_root, replay, settings_for
from ..support.harness import write_tree

WEB_EVALUATOR = (EVALUATOR.replace("id: c-eval\n", "id: c-eval-web\n").replace(
    "    - {id: complete, description: Every request item is covered, threshold: 8}\n"
    "    - {id: clear, description: A newcomer understands it, threshold: 6}\n",
    "    - {id: runs, description: The application answers, threshold: 7}\n"))


def chooser_root(tmp_path: Path, platforms: tuple[str, ...]) -> Store:
    """The agentic workflow's `write` reviewed by c-eval, or by c-eval-web on aspnetcore."""
    root = agentic_root(tmp_path)
    add_review(root, max_rounds=2)
    write_tree(root, {"workflow_defs/phases/c-eval-web.yaml": WEB_EVALUATOR})
    wf = root / "workflow_defs/workflows/agentic.yaml"
    wf.write_text(wf.read_text().replace(
        "review: {phase: c-eval, max_rounds: 2}",
        "review: {phase: c-eval, max_rounds: 2, platforms: {aspnetcore: c-eval-web}}"))
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic", "d1",
                 "Write notes.", platforms=platforms)
    return store


def test_the_runtime_takes_the_recorded_evaluator_not_one_chosen_again(tmp_path: Path) -> None:
    store = chooser_root(tmp_path, ("aspnetcore",))
    with store.transaction("d1") as state:
        state.platforms = []  # the choice was made at `new`: it is not made again
    state = store.read("d1")
    catalog = load_catalog(definition_roots(store.root), display_base=store.root)
    assert state.snapshot.reviews == {"write": "c-eval-web"}
    assert review_of(catalog, state, state.get_step("write")) == ("c-eval-web", 2)
    assert review_of(catalog, state, state.get_step("review")) is None


@pytest.mark.e2e
@pytest.mark.parametrize(("platforms", "phase", "criteria"), [
    pytest.param(("aspnetcore",), "c-eval-web", ["runs"], id="platform-evaluator"),
    pytest.param((), "c-eval", ["complete", "clear"], id="default-evaluator"),
])
def test_a_review_round_runs_the_recorded_evaluator_and_the_generator_is_told_which(
        tmp_path: Path, platforms: tuple[str, ...], phase: str, criteria: list[str]) -> None:
    store = chooser_root(tmp_path, platforms)
    with replay(tmp_path, {"write": [{"literal": {}}], "write.review": [{"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    [review] = store.read("d1").get_step("write").reviews
    assert (review.verdict, review.scores) == ("PASS", {c: 10 for c in criteria})
    prompt = (store.root / "phases/d1/write/prompt.md").read_text()
    assert (f"REVIEW: after the validation, an independent read-only evaluator (`{phase}`, round 1 "
            "of 2) scores your work 0-10 on each criterion") in prompt
    evaluator_prompt = (store.root / "phases/d1/write/reviews/write-r1-prompt.md").read_text()
    assert [f"SCORE {c}: <0-10>" in evaluator_prompt for c in criteria] == [True] * len(criteria)
