"""The evaluator a built-in workflow's review chooses at `specops new` (issue #43): QA against the
running application (`pbr-qa`, `full-qa`) when the target has a web project, the plain review
otherwise, `--platform` overriding the detection; recorded per node in the snapshot, shown by
`specops status`, with every phase it could choose frozen beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops_dag.agent.prompt import review_phase
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.queries import render_status, status_report
from specops_dag.delivery.store import Store
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.dotnet import copy_fixture
from ..support.git import commit_all
from ..support.harness import DIAMOND, write_tree


def new(tmp_path: Path, fixture: str, workflow: str,
        platforms: tuple[str, ...] | None = None) -> Store:
    target = copy_fixture(tmp_path, fixture)
    commit_all(target)
    store = Store(write_tree(tmp_path / "harness", DIAMOND))
    catalog = load_catalog(definition_roots(store.root), display_base=store.root)
    ops.new_delivery(store, catalog, workflow, "d1", "Add an endpoint.", target, platforms)
    return store


@pytest.mark.parametrize(("fixture", "workflow", "platforms", "reviews"), [
    pytest.param("minimal-api", "plan-build-review", None, {"build": "pbr-qa"}, id="pbr-web"),
    pytest.param("all-pass", "plan-build-review", None, {"build": "pbr-evaluate"}, id="pbr-not-web"),
    pytest.param("minimal-api", "full-delivery", None, {"integrate": "full-qa"}, id="full-web"),
    pytest.param("all-pass", "full-delivery", None, {"integrate": "full-evaluate"},
                 id="full-not-web"),
    pytest.param("minimal-api", "plan-build-review", ("ef-core",), {"build": "pbr-evaluate"},
                 id="platform-given-replaces-the-detection"),
    pytest.param("all-pass", "full-delivery", ("aspnetcore",), {"integrate": "full-qa"},
                 id="platform-given-on-a-non-web-target"),
    pytest.param("minimal-api", "quick-delivery", None, {}, id="quick-has-no-review"),
])
def test_new_records_the_evaluator_each_review_chose_for_the_targets_platforms(
        tmp_path: Path, fixture: str, workflow: str, platforms: tuple[str, ...] | None,
        reviews: dict[str, str]) -> None:
    store = new(tmp_path, fixture, workflow, platforms)
    state = store.read("d1")
    assert state.snapshot.reviews == reviews
    on_disk = json.loads((store.root / "phases/d1/index.json").read_text())
    assert on_disk["snapshot"]["reviews"] == reviews


@pytest.mark.parametrize(("workflow", "frozen"), [
    pytest.param("plan-build-review", ["pbr-plan", "pbr-build", "pbr-evaluate", "pbr-qa",
                                       "pbr-contract"], id="plan-build-review"),
    pytest.param("full-delivery", ["full-requirements", "full-design", "full-develop",
                                   "full-contract", "full-integrate", "full-evaluate", "full-qa",
                                   "full-integrate-contract", "full-verify", "full-delivery"],
                 id="full-delivery"),
])
def test_every_evaluator_a_review_can_choose_is_frozen_with_its_skills_on_any_target(
        tmp_path: Path, workflow: str, frozen: list[str]) -> None:
    store = new(tmp_path, "all-pass", workflow)
    state = store.read("d1")
    assert [f.id for f in state.snapshot.files if f.kind == "phase"] == frozen
    for pid in frozen:
        assert (store.root / f"phases/d1/snapshot/phases/{pid}.yaml").is_file()
    qa = "pbr-qa" if workflow == "plan-build-review" else "full-qa"
    assert [s.id for s in state.snapshot.skills[qa]] == ["pbr-evaluator", "trx-evidence"]


def test_status_names_the_evaluator_each_review_chose(tmp_path: Path) -> None:
    store = new(tmp_path, "minimal-api", "plan-build-review")
    state = store.read("d1")
    lines = render_status(state, status_report(store.root, state)).splitlines()
    assert lines[2:4] == ["platforms: aspnetcore (from src/TodoApi/TodoApi.csproj)",
                          "reviews: build by `pbr-qa`"]


def test_a_state_written_before_reviews_were_recorded_loads_and_chooses_by_its_platforms(
        tmp_path: Path) -> None:
    store = new(tmp_path, "minimal-api", "plan-build-review")
    path = store.root / "phases/d1/index.json"
    data = json.loads(path.read_text())
    del data["snapshot"]["reviews"]
    path.write_text(json.dumps(data, indent=2))
    state = store.read("d1")
    assert state.snapshot.reviews == {}
    build = ops.snapshot_catalog(store, state).workflows["plan-build-review"].nodes[1]
    assert review_phase(state, build) == "pbr-qa"
    assert review_phase(state.model_copy(update={"platforms": []}), build) == "pbr-evaluate"


def test_dry_run_shows_the_recorded_evaluator_and_its_qa_to_the_generator(tmp_path: Path) -> None:
    from specops_dag.agent.prompt import preview, render_dry_run

    store = new(tmp_path, "minimal-api", "plan-build-review")
    state = store.read("d1")
    catalog = ops.snapshot_catalog(store, state)
    build = state.get_step("build")
    text = render_dry_run(store.root, state, build, catalog, as_json=False)
    assert text.splitlines()[-1] == "review: evaluator `pbr-qa`, at most 3 rounds"
    as_json = json.loads(render_dry_run(store.root, state, build, catalog, as_json=True))
    assert as_json["review"] == {"phase": "pbr-qa", "max_rounds": 3}
    prompt = preview(store.root, state, build, catalog).text
    assert ("REVIEW: after the validation, an independent read-only evaluator (`pbr-qa`, round 1 "
            "of 3)") in prompt
    assert ("QA: before it scores, the executor starts your application with `dotnet run` and "
            "checks it (page /); a failed QA blocks the round whatever the "
            "scores.") in prompt
    plan = render_dry_run(store.root, state, state.get_step("plan"), catalog, as_json=False)
    assert plan.splitlines()[-1].startswith("total prompt: ")
