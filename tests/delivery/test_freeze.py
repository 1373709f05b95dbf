"""The freeze is whole (issue 43, items 14 and 16): the common work rules, the TDD hook's
`workflow_defs/hooks.json` and `prices.yaml` are copied into `phases/<d>/snapshot/` at
`specops new` (an absent optional file recorded as absent), the delivery reads only those copies,
and an edited copy, like the skill graph's, is refused by the next run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from specops_dag.agent import prompt
from specops_dag.agent.prompt import assemble_prompt
from specops_dag.builtin import BUILTIN_DEFS
from specops_dag.delivery import lifecycle
from specops_dag.delivery.lifecycle import snapshot_catalog
from specops_dag.delivery.model import Usage
from specops_dag.delivery.queries import cost_report, drift
from specops_dag.delivery.store import Store
from specops_dag.errors import UsageError
from specops_dag.execution.attempt import check_snapshot
from specops_dag.execution.step import money_totals, run_step

from ..support.agents import agentic_root, new
from ..support.cli import specops_at
from ..support.harness import write_tree
from ..support.hooks import call, denial, payload

PRICES = "as_of: 2026-11-01\nprices:\n  m1: {input: 2.0, cached_input: 0.2, output: 8.0}\n"
EXCLUDED = {"tdd": {"exclude": [{"path": "src/Orders/Cart.cs", "reason": "legacy, e2e only"}]}}
UNTIL_FIXED = ("C# edits are denied until a person fixes the file: name it in the file the "
               "current step names under RISK")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The built-in work rules, as a file of this test (an upgrade of specops changes it)."""
    path = tmp_path / "work-rules.md"
    path.write_text("# Work rules v1\n", encoding="utf-8")
    monkeypatch.setattr(prompt, "WORK_RULES", path)
    monkeypatch.setattr(lifecycle, "WORK_RULES", path)
    return path


def frozen_harness(tmp_path: Path) -> Path:
    """The agentic harness with its own hooks.json and prices.yaml, both frozen by `new`."""
    return write_tree(agentic_root(tmp_path), {"workflow_defs/hooks.json": json.dumps(EXCLUDED),
                                               "prices.yaml": PRICES})


def work_rules_part(store: Store) -> prompt.PromptPart:
    state = store.read("d1")
    parts = assemble_prompt(store.root, state, state.get_step("write"),
                            snapshot_catalog(store, state), store.root).parts
    return next(p for p in parts if p.label == "common work rules")


def strip_harness_entries(store: Store) -> None:
    """Make d1's state as `specops new` wrote it before the harness files were frozen."""
    path = store.index_path("d1")
    data = json.loads(path.read_text())
    data["snapshot"]["files"] = [f for f in data["snapshot"]["files"]
                                 if f["kind"] not in ("work-rules", "hooks", "prices")]
    for f in data["snapshot"]["files"]:
        f.pop("copy_sha256", None)
    path.write_text(json.dumps(data, indent=2))


def test_the_prompt_sends_the_work_rules_frozen_at_new_not_the_current_built_in_ones(
        tmp_path: Path, rules: Path) -> None:
    store = new(agentic_root(tmp_path))
    rules.write_text("# Work rules v2\n", encoding="utf-8")
    part = work_rules_part(store)
    assert (part.path, part.text) == ("phases/d1/snapshot/work-rules.md", "# Work rules v1\n")
    assert store.read("d1").snapshot.frozen("work-rules").model_dump(by_alias=True) == {
        "kind": "work-rules", "id": "work-rules", "path": "built-in:workflow_defs/work-rules.md",
        "sha256": sha(store.root / "phases/d1/snapshot/work-rules.md"),
        "copy": "snapshot/work-rules.md"}


def test_a_delivery_frozen_before_the_harness_files_reads_them_live_as_before(
        tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch, repo: Path) -> None:
    root = agentic_root(tmp_path)
    store = new(root)
    strip_harness_entries(store)
    graph = root / "phases/d1/snapshot/skills/graph.yaml"
    graph.write_text(graph.read_text() + "# an unhashed copy: not judged\n")
    rules.write_text("# Work rules v2\n", encoding="utf-8")
    write_tree(root, {"prices.yaml": PRICES, "workflow_defs/hooks.json": json.dumps(EXCLUDED)})
    part = work_rules_part(store)
    assert (part.path, part.text) == ("built-in:workflow_defs/work-rules.md", "# Work rules v2\n")
    state = store.read("d1")
    assert cost_report(root, state)["source"] == "prices.yaml"
    monkeypatch.setenv("SPECOPS_ROOT", str(root))
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    assert decide(repo, add("src/Orders/Cart.cs")) is None  # the live exclude
    check_snapshot(store, state)  # nothing it can judge changed


def decide(repo: Path, command: str) -> str | None:
    code, out = call("pre-tool-use", payload(command, repo, tool="apply_patch"))
    assert code == 0
    return denial(out)


def add(rel: str) -> str:
    return f"*** Begin Patch\n*** Add File: {rel}\n+class Cart {{ int N() => 1; }}\n*** End Patch\n"


def test_the_hook_applies_the_hooks_json_frozen_at_new_not_the_current_one(
        tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = frozen_harness(tmp_path)
    new(root)
    (root / "workflow_defs/hooks.json").write_text('{"tdd": {}}')  # the exclude is gone
    monkeypatch.setenv("SPECOPS_ROOT", str(root))
    assert decide(repo, add("src/Orders/Cart.cs")).startswith("TDD: ")  # no delivery: live
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    assert decide(repo, add("src/Orders/Cart.cs")) is None


def test_a_hooks_json_created_after_new_does_not_reach_the_delivery(
        tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = agentic_root(tmp_path)
    store = new(root)
    assert store.read("d1").snapshot.frozen("hooks").sha256 is None
    write_tree(root, {"workflow_defs/hooks.json": json.dumps(
        {"tdd": {"testPatterns": ["{stem}Specs.cs"]}})})
    edit = ("*** Begin Patch\n*** Update File: src/Orders/OrderService.cs\n@@\n"
            "-class OrderService {}\n+class OrderService { }\n*** End Patch\n")
    monkeypatch.setenv("SPECOPS_ROOT", str(root))
    assert decide(repo, edit).startswith("TDD: ")  # no delivery: the live file
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    assert decide(repo, edit) is None
    assert drift(root, store.read("d1")) == [
        "workflow_defs/hooks.json: created since the snapshot (the delivery runs without it)"]


def test_an_edited_frozen_hooks_json_denies_csharp_edits_naming_it(
        tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = frozen_harness(tmp_path)
    new(root)
    copy = root / "phases/d1/snapshot/hooks.json"
    frozen = sha(copy)
    copy.write_text('{"tdd": {"exclude": []}}')
    monkeypatch.setenv("SPECOPS_ROOT", str(root))
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    assert decide(repo, add("src/Orders/Cart.cs")) == (
        f"{copy} changed since `specops new` froze it (sha256 {sha(copy)[:12]}, frozen "
        f"{frozen[:12]}): a delivery runs only the hook rules it was created with; {UNTIL_FIXED}")
    copy.unlink()
    assert decide(repo, add("src/Orders/Cart.cs")) == (
        f"{copy} is missing: a delivery runs only the hook rules it was created with; "
        f"{UNTIL_FIXED}")


def test_a_hooks_json_put_into_a_snapshot_frozen_without_one_denies_csharp_edits(
        tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = agentic_root(tmp_path)
    new(root)
    copy = root / "phases/d1/snapshot/hooks.json"
    copy.write_text(json.dumps(EXCLUDED))
    monkeypatch.setenv("SPECOPS_ROOT", str(root))
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    assert decide(repo, add("src/Orders/Cart.cs")) == (
        f"{copy} appeared since `specops new` froze the delivery without it (sha256 "
        f"{sha(copy)[:12]}): a delivery runs only the hook rules it was created with; "
        f"{UNTIL_FIXED}")


def test_the_money_of_a_delivery_is_priced_with_the_prices_yaml_frozen_at_new(
        tmp_path: Path) -> None:
    root = frozen_harness(tmp_path)
    store = new(root)
    (root / "prices.yaml").write_text(PRICES.replace("input: 2.0", "input: 200.0"))
    with store.transaction("d1") as state:
        state.get_step("write").usage.append(Usage(attempt=1, input_tokens=1_000_000,
                                                   output_tokens=0, model="m1"))
    state = store.read("d1")
    report = cost_report(root, state)
    assert (report["delivery"], report["source"], report["as_of"]) == (
        2.0, "phases/d1/snapshot/prices.yaml", "2026-11-01")
    assert money_totals(store, state, "write", 1) == {"attempt": 2.0, "node": 2.0,
                                                      "delivery": 2.0}
    assert drift(root, state) == [
        "prices.yaml: changed since the snapshot (the delivery keeps its copy)"]


def test_a_prices_yaml_created_after_new_does_not_price_the_delivery(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    store = new(root)
    (root / "prices.yaml").write_text(PRICES)
    with store.transaction("d1") as state:
        state.get_step("write").usage.append(Usage(attempt=1, input_tokens=10, model="m1"))
    report = cost_report(root, store.read("d1"))
    assert (report["delivery"], report["source"], report["unpriced"]) == (
        None, "built-in", "model `m1` has no price; add it to prices.yaml")


@pytest.mark.parametrize("rel", ["snapshot/work-rules.md", "snapshot/hooks.json",
                                 "snapshot/prices.yaml", "snapshot/skills/graph.yaml"],
                         ids=["work rules", "hooks.json", "prices.yaml", "skill graph"])
def test_an_edited_frozen_copy_is_refused_by_the_next_run_naming_it(
        tmp_path: Path, rel: str) -> None:
    root = frozen_harness(tmp_path)
    store = new(root)
    copy = root / "phases/d1" / rel
    frozen = sha(copy)
    copy.write_text(copy.read_text() + "\n# edited after specops new\n")
    before = store.index_path("d1").read_bytes()
    with pytest.raises(UsageError) as err:
        run_step(store, "d1", "write")
    assert err.value.message == (
        f"phases/d1/{rel} changed since `specops new` froze it (sha256 {sha(copy)[:12]}, "
        f"frozen {frozen[:12]}): a delivery runs only the definitions it was created with; put "
        "it back as it was, or create a new delivery for the new definitions")
    assert store.index_path("d1").read_bytes() == before


@pytest.mark.parametrize("rel", ["snapshot/hooks.json", "snapshot/prices.yaml"],
                         ids=["hooks.json", "prices.yaml"])
def test_a_copy_put_where_new_froze_an_absent_file_is_refused_by_the_next_run(
        tmp_path: Path, rel: str) -> None:
    store = new(agentic_root(tmp_path))
    copy = store.root / "phases/d1" / rel
    copy.write_text("{}\n")
    with pytest.raises(UsageError) as err:
        run_step(store, "d1", "write")
    assert err.value.message == (
        f"phases/d1/{rel} appeared since `specops new` froze the delivery without it (sha256 "
        f"{sha(copy)[:12]}): a delivery runs only the definitions it was created with; remove "
        "it, or create a new delivery for the new definitions")


def test_the_skill_graph_copy_records_its_own_sha256_beside_its_sources(tmp_path: Path) -> None:
    store = new(agentic_root(tmp_path))
    graph = store.read("d1").snapshot.frozen("skill-graph")
    assert graph.copy_sha256 == sha(store.root / "phases/d1/snapshot/skills/graph.yaml")
    assert graph.sha256 == sha(BUILTIN_DEFS / "skills/graph.yaml")
    assert graph.copy_sha256 != graph.sha256


@pytest.mark.parametrize(("files", "problem"), [
    ({"workflow_defs/hooks.json": '{"tdd": {"roots": []}}'},
     "error: workflow_defs/hooks.json: tdd.roots: unknown key (allowed: exclude, generated, "
     "testPatterns, testRoots); fix it, then run `specops new` again: a delivery keeps the hook "
     "rules it was created with\n"),
    ({"prices.yaml": "as_of: 2026-13-01\n"},
     "prices.yaml: as_of: text `2026-13-01` is not a date; write it as YYYY-MM-DD (e.g. "
     "2026-11-01)\nerror: 1 problem(s) in the definitions; nothing was changed\n"),
], ids=["hooks.json", "prices.yaml"])
def test_new_refuses_a_harness_file_it_would_freeze_broken_and_creates_nothing(
        tmp_path: Path, files: dict[str, str], problem: str) -> None:
    root = write_tree(agentic_root(tmp_path), files)
    result = specops_at(root, "new", "agentic", "d1", "--request", "Write the notes.")
    assert (result.returncode, result.stderr) == (2, problem)
    assert not (root / "phases/d1").exists()
    assert list((root / "phases").glob(".new-*")) == []


def test_the_hook_and_the_freeze_name_the_hook_rules_file_and_its_snapshot_kind_alike() -> None:
    from specops_dag.builtin import HOOK_RULES
    from specops_dag.delivery.model import HOOK_RULES_KIND
    from specops_dag.hooks import tdd

    assert (tdd.CONFIG, tdd.FROZEN_KIND) == (HOOK_RULES, HOOK_RULES_KIND)
