"""The `review` asset check names the evaluator (issue #43): in the harness root's code location
every one the node's review can choose, in a delivery's own (its snapshot, as `specops run`
loads it) the one `specops new` recorded for that delivery's platforms."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from specops_dag.dagster_adapter.definitions import build_definitions
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.store import Store
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.dotnet import copy_fixture
from ..support.git import commit_all
from ..support.harness import DIAMOND, write_tree


def review_description(defs: dg.Definitions, workflow: str, node: str) -> str:
    [spec] = [s for s in defs.resolve_assets_def(dg.AssetKey([workflow, node])).check_specs
              if s.name == "review"]
    return spec.description or ""


def test_the_harness_location_names_every_evaluator_a_review_can_choose(tmp_path: Path) -> None:
    defs = build_definitions(write_tree(tmp_path / "harness", DIAMOND))
    assert review_description(defs, "plan-build-review", "build") == (
        "evaluator `pbr-evaluate` (`pbr-qa` on aspnetcore), at most 3 rounds")
    assert review_description(defs, "full-delivery", "integrate") == (
        "evaluator `full-evaluate` (`full-qa` on aspnetcore), at most 3 rounds")


@pytest.mark.parametrize(("fixture", "phase"), [
    pytest.param("minimal-api", "pbr-qa", id="web"),
    pytest.param("all-pass", "pbr-evaluate", id="not-web"),
])
def test_a_deliverys_location_names_the_evaluator_it_recorded(
        tmp_path: Path, fixture: str, phase: str) -> None:
    target = copy_fixture(tmp_path, fixture)
    commit_all(target)
    store = Store(write_tree(tmp_path / "harness", DIAMOND))
    ops.new_delivery(store, load_catalog(definition_roots(store.root), display_base=store.root),
                     "plan-build-review", "d1", "Add an endpoint.", target)
    defs = build_definitions(store.root, "d1")
    assert review_description(defs, "plan-build-review", "build") == (
        f"evaluator `{phase}` (recorded for this delivery), at most 3 rounds")
