from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from specops_dag.delivery import gates
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery import queries as reading
from specops_dag.delivery.model import Delivery
from specops_dag.delivery.store import Store
from specops_dag.errors import DefinitionError, StateError, UsageError, WriteConflict
from specops_dag.execution.step import run_step
from specops_dag.files import now_iso
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.git import git_harness
from ..support.git import new as git_new
from ..support.harness import complete, make_delivery


@contextmanager
def lock_held_elsewhere(store: Store, delivery: str) -> Iterator[int]:
    code = ("import sys, time; from pathlib import Path; from specops_dag.delivery.store import Store\n"
            "s = Store(Path(sys.argv[1]))\n"
            "with s.lock(f'{sys.argv[2]}/.lock', 'x'):\n"
            "    print('locked', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(store.root), delivery],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_new_delivery_has_steps_in_topological_order_and_a_frozen_snapshot(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    state = store.read("d1")
    assert [(s.step, s.name, s.needs, s.status) for s in state.steps] == [
        (0, "a", [], "pending"), (1, "b", ["a"], "pending"), (2, "c", ["a"], "pending"),
        (3, "d", ["b", "c"], "pending")]
    assert state.schema_version == 1 and state.status == "pending"
    assert [(f.kind, f.id, f.path, f.copy_path) for f in state.snapshot.files] == [
        ("workflow", "diamond", "workflow_defs/workflows/diamond.yaml",
         "snapshot/workflows/diamond.yaml"),
        *[("phase", f"p-{n}", f"workflow_defs/phases/p-{n}.yaml", f"snapshot/phases/p-{n}.yaml")
          for n in "abcd"],
        ("work-rules", "work-rules", "built-in:workflow_defs/work-rules.md",
         "snapshot/work-rules.md"),
        ("hooks", "hooks", "workflow_defs/hooks.json", "snapshot/hooks.json"),
        ("prices", "prices", "prices.yaml", "snapshot/prices.yaml")]
    for f in state.snapshot.files[:-3]:  # the harness files: tests/delivery/test_freeze.py
        copy = store.delivery_dir("d1") / f.copy_path
        assert copy.read_bytes() == (diamond_root / f.path).read_bytes()
    index = json.loads((diamond_root / "phases" / "index.json").read_text())
    assert [(e["id"], e["workflow"], e["status"]) for e in index["deliveries"]] == [
        ("d1", "diamond", "pending")]


def test_the_snapshot_is_used_after_the_definitions_change(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    phase = diamond_root / "workflow_defs/phases/p-a.yaml"
    phase.write_text(phase.read_text().replace("Run p-a.", "Something else."))
    state = store.read("d1")
    assert ops.snapshot_catalog(store, state).phases["p-a"].execution.goal == "Run p-a."
    assert reading.drift(store.root, state) == [
        "workflow_defs/phases/p-a.yaml: changed since the snapshot (the delivery keeps its copy)"]


def test_a_snapshot_reads_each_phase_when_it_is_first_looked_up_and_a_broken_one_fails_only_its_own_lookup(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    state = store.read("d1")
    broken = store.delivery_dir("d1") / "snapshot/phases/p-b.yaml"
    broken.write_text("kind: phase\nid: p-b\nexecution: [unclosed\n")
    catalog = ops.snapshot_catalog(store, state)
    assert catalog.phases["p-a"].execution.goal == "Run p-a."
    assert "p-b" in catalog.phases and "p-z" not in catalog.phases
    assert sorted(catalog.phases) == ["p-a", "p-b", "p-c", "p-d"]
    for _ in range(2):  # the lookup fails each time, naming the file and the fix
        with pytest.raises(DefinitionError) as err:
            catalog.phases["p-b"]
        assert err.value.problems == [
            "phases/d1/snapshot/phases/p-b.yaml: invalid YAML at line 4, column 1: expected ',' "
            "or ']', but got '<stream end>'; fix the syntax"]
    with pytest.raises(KeyError):
        catalog.phases["p-z"]


def test_a_snapshot_read_again_in_one_process_is_not_parsed_again_until_one_of_its_files_changes(
        diamond_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.workflow import catalog as catalogs

    store = make_delivery(diamond_root)
    state = store.read("d1")
    parsed: list[str] = []
    real = catalogs.yamlfile.safe_load
    monkeypatch.setattr(catalogs.yamlfile, "safe_load",
                        lambda text, *a, **k: parsed.append(text[:40]) or real(text, *a, **k))
    first = ops.snapshot_catalog(store, state)
    assert first.phases["p-a"].execution.goal == "Run p-a."
    read = len(parsed)
    assert read >= 2  # the workflow and the phase looked up
    again = ops.snapshot_catalog(store, state)
    assert again is first and again.phases["p-a"].execution.goal == "Run p-a."
    assert len(parsed) == read
    workflow = next((store.delivery_dir("d1") / "snapshot/workflows").glob("*.yaml"))
    workflow.write_text(workflow.read_text().replace("kind: workflow", "kind: workflow  # edited"))
    edited = ops.snapshot_catalog(store, state)
    assert edited is not first and len(parsed) == read + 1
    broken = store.delivery_dir("d1") / "snapshot/phases/p-a.yaml"
    broken.write_text("kind: phase\nid: p-a\nexecution: [unclosed\n")
    with pytest.raises(DefinitionError, match="p-a.yaml: invalid YAML"):
        ops.snapshot_catalog(store, state).phases["p-a"]


def test_threads_looking_up_one_snapshot_phase_at_once_all_get_it_read_once(
        diamond_root: Path) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    store = make_delivery(diamond_root)
    catalog = ops.snapshot_catalog(store, store.read("d1"))
    start = threading.Barrier(8)

    def look_up(_: int) -> object:
        start.wait()
        return catalog.phases["p-d"]

    with ThreadPoolExecutor(8) as pool:
        phases = list(pool.map(look_up, range(8)))
    assert len({id(p) for p in phases}) == 1
    assert phases[0].execution.goal == "Run p-d."


@pytest.mark.parametrize(("start", "to", "via"), [
    ("pending", "completed", "run"), ("completed", "pending", "resume"),
    ("error", "running", "run"), ("completed", "running", "run"), ("blocked", "completed", "run"),
    ("error", "pending", "run")])
def test_a_transition_outside_the_allowed_table_is_refused(
        diamond_root: Path, start: str, to: str, via: str) -> None:
    store = make_delivery(diamond_root)
    state = store.read("d1")
    step = state.get_step("a")
    step.status = start  # type: ignore[assignment]
    with pytest.raises(StateError) as info:
        state.move(step, to, via)  # type: ignore[arg-type]
    assert info.value.message == (f"phases/d1/index.json: steps[0] (`a`): `{via}` cannot move a "
                                  f"`{start}` step to `{to}`")


def test_a_concurrent_writer_gets_a_write_conflict_and_the_file_stays_valid(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root, lock_timeout_s=0.3)
    before = store.index_path("d1").read_bytes()
    with lock_held_elsewhere(store, "d1") as pid:
        with pytest.raises(WriteConflict) as info:
            ops.reopen(store, "d1", "a")
    assert info.value.message == (f"write conflict: phases/d1/index.json is being written by "
                                  f"another process (pid {pid}); nothing was changed, retry when "
                                  "it finishes")
    assert info.value.exit_code == 3
    assert store.index_path("d1").read_bytes() == before
    Delivery.model_validate_json(before)


def test_a_write_that_fails_midway_leaves_the_previous_file_and_no_temp_file(
        diamond_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_delivery(diamond_root)
    before = store.index_path("d1").read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"), store.transaction("d1") as state:
        state.log("a change to write")
    assert store.index_path("d1").read_bytes() == before
    assert sorted(p.name for p in store.delivery_dir("d1").iterdir()) == [
        ".lock", ".run.lock", "index.json", "request.md", "snapshot"]


def test_reopen_invalidates_downstream_but_not_sibling_branches(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    for node in "abcd":
        complete(store, "d1", node)
    assert ops.reopen(store, "d1", "b", "spec changed") == ["b", "d"]
    state = store.read("d1")
    assert {s.name: s.status for s in state.steps} == {
        "a": "completed", "b": "pending", "c": "completed", "d": "pending"}
    b = state.get_step("b")
    assert b.handoff == {} and b.completed_at is None
    assert [(r.reason, list(r.handoff)) for r in b.revisions] == [("spec changed", ["result"])]
    assert state.get_step("c").revisions == []
    assert state.history[-1].event == "reopened"
    assert state.history[-1].detail == "b, d: spec changed"


def test_resume_clears_the_error_fields_and_gives_a_fresh_budget(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    with store.transaction("d1") as state:
        step = state.get_step("a")
        state.move(step, "running", "run")
        state.move(step, "error", "run")
        step.attempts, step.error_message, step.failed_at = 3, "exited 7", now_iso()
    ops.resume(store, "d1", "a")
    step = store.read("d1").get_step("a")
    assert (step.status, step.attempts, step.error_message, step.failed_at) == (
        "pending", 0, None, None)


def test_resume_clears_the_blocked_fields(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    with store.transaction("d1") as state:
        step = state.get_step("a")
        state.move(step, "blocked", "run")
        step.blocked_reason, step.blocked_at = "missing input: x", now_iso()
    ops.resume(store, "d1", "a")
    step = store.read("d1").get_step("a")
    assert (step.status, step.blocked_reason, step.blocked_at) == ("pending", None, None)


def test_resume_refuses_a_completed_step_and_points_to_reopen(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    complete(store, "d1", "a")
    with pytest.raises(StateError) as info:
        ops.resume(store, "d1", "a")
    assert info.value.message == ("step `a` of `d1` is `completed`; resume takes an `error` or "
                                  "`blocked` step (reopen a completed one with `specops reopen d1 "
                                  "a`)")


def test_an_unknown_node_names_the_known_ones(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    with pytest.raises(UsageError) as info:
        ops.reopen(store, "d1", "zz")
    assert info.value.message == "delivery `d1` has no node `zz` (nodes: a, b, c, d)"


def test_a_state_file_of_a_newer_schema_is_refused(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    path = store.index_path("d1")
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(StateError) as info:
        store.read("d1")
    assert info.value.message == ("phases/d1/index.json: schema_version 99 is not supported (this "
                                  "specops reads 1); upgrade specops-dag or restore the file")


@pytest.mark.parametrize(("bad", "why"), [
    ("a/b", "contains a path separator"), ("..", "contains `..`"), ("x..y", "contains `..`"),
    ("", "is empty"), ("-x", "must be 1-64 characters of letters, digits, `.`, `_` or `-`, "
                            "starting with a letter or digit"),
    ("a b", "must be 1-64 characters of letters, digits, `.`, `_` or `-`, starting with a "
            "letter or digit"),
    ("x.lock", "ends with `.` or `.lock`, which git refuses in a branch name"),
    ("a\\b", "contains a path separator")])
def test_a_bad_delivery_id_is_refused_and_nothing_is_written(
        diamond_root: Path, bad: str, why: str) -> None:
    store = Store(diamond_root)
    catalog = load_catalog(definition_roots(diamond_root), display_base=diamond_root)
    with pytest.raises(UsageError) as info:
        ops.new_delivery(store, catalog, "diamond", bad, "r")
    assert info.value.message == (f"delivery id `{bad}` {why}; use e.g. `rss-cache` or "
                                  "`2026-11-rss-cache`")
    assert not (diamond_root / "phases").exists()


def test_gates_in_front_of_a_step_keep_it_from_being_runnable_until_approved(
        diamond_root: Path) -> None:
    wf = diamond_root / "workflow_defs/workflows/diamond.yaml"
    wf.write_text(wf.read_text().replace(
        "{id: b, phase: p-b,", "{id: b, phase: p-b, gates: {before: target-write},"))
    store = make_delivery(diamond_root)
    complete(store, "d1", "a")
    state = store.read("d1")
    assert state.get_step("b").gates == ["target-write"]
    assert reading.runnable_steps(state) == ["c"]
    gates.approve(store, "d1", "target-write", note="looked at the plan")
    assert reading.runnable_steps(store.read("d1")) == ["b", "c"]


@pytest.mark.parametrize(("text", "message"), [
    ('{"schema_version": 1, "request": "Add \\ud800 cache."}',
     "phases/d1/index.json: an escape `\\ud800` is half of a UTF-16 surrogate pair, not a "
     "character; fix the file or restore it from a backup"),
    ("[1, 2]", "phases/d1/index.json: (top level): Input should be a valid dictionary or "
               "instance of Delivery; fix the file or restore it from a backup"),
])
def test_a_state_file_that_is_json_but_not_a_state_is_refused_with_its_exact_error(
        diamond_root: Path, text: str, message: str) -> None:
    store = make_delivery(diamond_root)
    store.index_path("d1").write_text(text)
    with pytest.raises(StateError) as err:
        store.read("d1")
    assert err.value.message == message


@pytest.mark.parametrize(("field", "value", "why"), [
    ("budget_usd", "-1.5", "Input should be greater than 0"),
    ("budget_usd", "NaN", "Input should be a finite number"),
    ("budget_usd", "Infinity", "Input should be a finite number"),
    ("budget_tokens", "0", "Input should be greater than 0"),
])
def test_a_hand_edited_budget_that_is_no_limit_is_refused_with_its_exact_error(
        diamond_root: Path, field: str, value: str, why: str) -> None:
    store = make_delivery(diamond_root)
    path = store.index_path("d1")
    path.write_text(path.read_text().replace(f'"{field}": null', f'"{field}": {value}', 1))
    with pytest.raises(StateError) as err:
        store.read("d1")
    assert err.value.message == (f"phases/d1/index.json: {field}: {why}; fix the file or "
                                 "restore it from a backup")


def test_a_hand_edited_negative_attempt_count_is_refused_with_its_exact_error(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    path = store.index_path("d1")
    text = path.read_text()
    assert '"attempts": 0' in text
    path.write_text(text.replace('"attempts": 0', '"attempts": -2', 1))
    with pytest.raises(StateError) as err:
        store.read("d1")
    assert err.value.message == ("phases/d1/index.json: steps[0].attempts: Input should be "
                                 "greater than or equal to 0; fix the file or restore it from a "
                                 "backup")


def test_a_corrupt_delivery_list_is_refused_with_its_exact_error(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    (store.phases / "index.json").write_text("{")
    with pytest.raises(StateError) as err:
        store.read_index()
    assert err.value.message == (
        "phases/index.json: not valid JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)); restore it from a backup")


NOT_JSON = ("not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
            "(char 1))")


def corrupt(store: Store) -> tuple[str, str]:
    """The messages reading a corrupt delivery state and a corrupt delivery list give."""
    for path in (store.index_path("d1"), store.phases / "index.json"):
        path.write_text("{")
    messages = []
    for read in (lambda: store.read("d1"), store.read_index):
        with pytest.raises(StateError) as err:
            read()
        messages.append(err.value.message)
    return messages[0], messages[1]


def test_a_broken_state_file_of_a_plain_folder_harness_root_is_to_be_restored_from_a_backup_alone(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    (diamond_root / ".git").mkdir()  # empty, as codex's sandbox leaves it: no repository
    assert corrupt(store) == (
        f"phases/d1/index.json: {NOT_JSON}; restore it from a backup",
        f"phases/index.json: {NOT_JSON}; restore it from a backup")


def test_a_broken_state_file_no_commit_holds_is_to_be_restored_from_a_backup_alone(
        tmp_path: Path) -> None:
    root, _ = git_harness(tmp_path)  # a git repository, but the delivery never ran
    assert corrupt(git_new(root)) == (
        f"phases/d1/index.json: {NOT_JSON}; restore it from a backup",
        f"phases/index.json: {NOT_JSON}; restore it from a backup")


def test_a_broken_state_file_a_metadata_commit_holds_is_to_be_restored_from_a_backup_or_git(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLS", str(tmp_path / "calls.log"))
    root, _ = git_harness(tmp_path)
    store = git_new(root)
    assert run_step(store, "d1", "a").status == "completed"  # its metadata commit holds the state
    # the delivery list is in no commit: git is offered for the delivery's state alone
    assert corrupt(store) == (
        f"phases/d1/index.json: {NOT_JSON}; restore it from a backup, or from git, where a "
        "commit holds it (`git log --all -- phases/d1/index.json` lists the commits)",
        f"phases/index.json: {NOT_JSON}; restore it from a backup")
    # the command it names finds the commit, and the file is there as it was
    listed = subprocess.run(["git", "log", "--all", "--format=%H", "--", "phases/d1/index.json"],
                            cwd=root, capture_output=True, text=True, check=True).stdout.split()
    held = subprocess.run(["git", "show", f"{listed[0]}:phases/d1/index.json"], cwd=root,
                          capture_output=True, text=True, check=True).stdout
    assert json.loads(held)["phase"] == "d1"


def test_a_validation_record_has_exactly_the_fields_of_a_validation_report_in_order() -> None:
    import dataclasses

    from specops_dag.delivery.model import ValidationRecord
    from specops_dag.validation.dotnet import ValidationReport

    assert list(ValidationRecord.model_fields) == [
        f.name for f in dataclasses.fields(ValidationReport)]
    report = ValidationReport(False, "full", "test", "1 failed", failing_tests=("T.a",))
    assert ValidationRecord(**report.as_metadata()).model_dump() == report.as_metadata()


# Records as the untyped (dict) writers put them in index.json, one per shape they wrote: a QA
# failure that overrules a PASS, a re-asked round, a required QA skipped before any evaluator
# call, an evaluator session whose environment failed; a preflight read from its cache.
QA_FAILED = {"status": "failed", "reason": "probe `todos` GET /todos: expected status 200, got 500",
             "stage": "probes", "commit": "b826d0dc5991651fc123cb2457eef4280a0beb66",
             "tree": "1215f5357e30ce79870778134503c82fa3e8957b", "url": "http://127.0.0.1:57127",
             "evidence": "phases/d1/b/reviews/b-r1-qa/", "duration_s": 1.012, "checks": [
                 {"id": "health", "kind": "probe", "status": "passed",
                  "detail": "GET /health: 200 as expected",
                  "files": ["phases/d1/b/reviews/b-r1-qa/probe-health.request.txt"]},
                 {"id": "todos", "kind": "probe", "status": "failed",
                  "detail": "GET /todos: expected status 200, got 500", "files": []}]}
USAGE = {"thread_id": "01a23365-d021-7eb0", "input_tokens": 2000, "cached_input_tokens": 0,
         "output_tokens": 400, "reasoning_output_tokens": 0}
REVIEWS = [
    {"round": 1, "verdict": "BLOCK", "reason": "QA against the running application failed: …",
     "scores": {"complete": 9, "clear": 7}, "report": "phases/d1/b/reviews/b-r1-report.md",
     "sandbox_denials": [], "thread_id": "01a23365-d021-7eb0",
     "transcript": "phases/d1/b/reviews/sessions/b-r1.jsonl", "usage": USAGE,
     "qa_status": "failed", "qa": QA_FAILED},
    {"round": 2, "verdict": "PASS", "reason": "all criteria met", "scores": {"complete": 9},
     "report": "phases/d1/b/reviews/b-r2-report.md", "sandbox_denials": ['{"cmd": "touch x"}'],
     "thread_id": None, "transcript": "phases/d1/b/reviews/sessions/b-r2-reask.jsonl",
     "reasked": "malformed report: no <<<REVIEW … >>> block in the evaluator's last message; "
                "excerpt: Looks great to me!", "usage": USAGE},
    {"round": 3, "verdict": "BLOCK", "reason": "review round 3: QA … was skipped",
     "qa_status": "skipped", "qa": {**QA_FAILED, "status": "skipped", "stage": "setup",
                                    "commit": None, "tree": None, "url": None, "checks": []}},
    {"round": 3, "verdict": "BLOCK", "reason": "codex: not logged in",
     "transcript": "phases/d1/b/reviews/sessions/b-r3.jsonl", "usage": USAGE},
]


def preflight_record(**extra: object) -> dict:
    from specops_dag.validation.baseline import baseline_of, compare
    from specops_dag.validation.dotnet import ValidationReport

    report = ValidationReport(True, "full", "test", "1 test project(s): 2 of 2 tests executed",
                              total=2, executed=2, passed_tests=2, sdk_version="8.0.404",
                              commands=({"stage": "sdk", "command": "dotnet --version",
                                         "exit_code": 0, "duration_s": 0.409,
                                         "timed_out": False},),
                              projects=({"project": "tests/Calc.Tests/Calc.Tests.csproj",
                                         "verdict": "passed", "total": 2, "executed": 2,
                                         "passed": 2, "failed": 0, "skipped": 0,
                                         "failed_tests": [], "skipped_tests": [],
                                         "trx": "validation/preflight/trx-08/results.trx"},),
                              baseline=compare(baseline_of({"warnings": ["w1"]}), ["w1", "w2"],
                                               []))
    return {**report.as_metadata(), "commit": "d062c268797ee474587a19338daa23e965584f1a",
            "checked_at": "2026-12-01T20:58:23Z", **extra}


def with_records(store: Store, step: int, **records: object) -> str:
    """Put `records` into steps[step] of d1's index.json as the dict-typed Step serialised them
    (pydantic's JSON of plain values); the file's new text."""
    import pydantic_core

    path = store.index_path("d1")
    data = json.loads(path.read_text())
    data["steps"][step].update(records)
    text = pydantic_core.to_json(data, indent=2).decode() + "\n"
    path.write_text(text)
    return text


def test_an_index_json_written_with_untyped_review_and_preflight_records_reads_and_writes_back_byte_identically(  # noqa: E501
        diamond_root: Path) -> None:
    from specops_dag.delivery.model import PreflightRecord, QaCheckRecord, ReviewRecord

    store = make_delivery(diamond_root)
    text = with_records(store, 1, reviews=REVIEWS,
                        preflight=preflight_record(cached=True, cache=".specops/preflight/x.json"))
    with_records(store, 2, preflight={k: v for k, v in preflight_record(cached=False).items()
                                      if k not in ("warnings", "baseline")})  # an older report
    text = store.index_path("d1").read_text()
    state = store.read("d1")
    assert state.model_dump_json(indent=2, by_alias=True) + "\n" == text
    b = state.get_step("b")
    assert all(isinstance(r, ReviewRecord) for r in b.reviews)
    assert isinstance(b.preflight, PreflightRecord) and b.preflight.cache == (
        ".specops/preflight/x.json")
    assert isinstance(b.reviews[0].qa.checks[1], QaCheckRecord)
    assert (b.reviews[2].report, b.reviews[2].scores, b.reviews[3].qa) == (None, {}, None)
    with store.transaction("d1") as changed:
        changed.log("note")
    after = json.loads(store.index_path("d1").read_text())
    assert after["steps"][1]["reviews"] == REVIEWS
    assert list(after["steps"][2]["preflight"]) == [
        k for k in preflight_record(cached=False) if k not in ("warnings", "baseline")]


@pytest.mark.parametrize(("step", "records", "field", "message"), [
    (1, {"reviews": [{**REVIEWS[1], "score": 9}]}, "steps[1].reviews[0].score",
     "Extra inputs are not permitted"),
    (1, {"reviews": [{**REVIEWS[1], "verdict": "pass"}]}, "steps[1].reviews[0].verdict",
     "Input should be 'PASS', 'BLOCK' or 'MALFORMED'"),
    (1, {"reviews": [{**REVIEWS[1], "scores": {"complete": "nine"}}]},
     "steps[1].reviews[0].scores.complete",
     "Input should be a valid integer, unable to parse string as an integer"),
    (1, {"reviews": [{k: v for k, v in REVIEWS[1].items() if k != "reason"}]},
     "steps[1].reviews[0].reason", "Field required"),
    (1, {"reviews": [{**REVIEWS[0], "usage": {**USAGE, "role": "evaluator"}}]},
     "steps[1].reviews[0].usage.role", "Extra inputs are not permitted"),
    (1, {"reviews": [{**REVIEWS[0], "qa": {**QA_FAILED, "checks": [
        {**QA_FAILED["checks"][0], "kind": "curl"}]}}]},
     "steps[1].reviews[0].qa.checks[0].kind", "Input should be 'probe' or 'page'"),
    (0, {"preflight": preflight_record(cached="sometimes")}, "steps[0].preflight.cached",
     "Input should be a valid boolean, unable to interpret input"),
    (0, {"preflight": preflight_record(cached=False, cache_hit=True)},
     "steps[0].preflight.cache_hit", "Extra inputs are not permitted"),
    (2, {"validation_report": {**preflight_record(), "commit": None}},
     "steps[2].validation_report.commit", "Extra inputs are not permitted"),
    (0, {"preflight": {**preflight_record(cached=False), "commands": [
        {"stage": "sdk", "command": "dotnet --version", "exit_code": "zero"}]}},
     "steps[0].preflight.commands[0].exit_code",
     "Input should be a valid integer, unable to parse string as an integer"),
    (0, {"preflight": {**preflight_record(cached=False), "projects": [{"project": "T.csproj"}]}},
     "steps[0].preflight.projects[0].verdict", "Field required"),
    (0, {"preflight": {**preflight_record(cached=False), "baseline": {"executed": {"base": 2,
                                                                                 "now": 2}}}},
     "steps[0].preflight.baseline.executed.now", "Extra inputs are not permitted"),
])
def test_a_review_or_preflight_record_of_the_wrong_shape_is_an_exact_load_error_naming_the_file_and_field(  # noqa: E501
        diamond_root: Path, step: int, records: dict, field: str, message: str) -> None:
    store = make_delivery(diamond_root)
    with_records(store, step, **records)
    with pytest.raises(StateError) as err:
        store.read("d1")
    assert err.value.message == (f"phases/d1/index.json: {field}: {message}; fix the file or "
                                 "restore it from a backup")


def test_a_record_written_by_the_executor_has_only_the_fields_it_was_given() -> None:
    from specops_dag.delivery.model import ReviewRecord

    record = ReviewRecord(round=1, verdict="BLOCK", reason="codex: not logged in",
                          transcript="t.jsonl")
    assert record.model_dump() == {"round": 1, "verdict": "BLOCK",
                                   "reason": "codex: not logged in", "transcript": "t.jsonl"}
    record.reasked = "malformed report"
    copied = record.model_copy(update={"thread_id": None})
    assert list(copied.model_dump()) == ["round", "verdict", "reason", "thread_id", "transcript",
                                         "reasked"]


def test_a_preflight_record_has_the_fields_of_a_validation_report_then_those_preflight_adds(
        ) -> None:
    import dataclasses

    from specops_dag.delivery.model import PreflightRecord
    from specops_dag.validation.dotnet import ValidationReport
    from specops_dag.validation.preflight import RECORD_KEYS

    assert list(PreflightRecord.model_fields) == list(RECORD_KEYS) == [
        *(f.name for f in dataclasses.fields(ValidationReport)), "commit", "checked_at",
        "cached", "cache"]


def test_a_review_round_keeps_its_qa_report_and_usage_with_exactly_their_fields() -> None:
    import dataclasses

    from specops_dag.delivery.model import QaCheckRecord, QaRecord, ReviewUsage, Usage
    from specops_dag.validation.qa import QaCheck, QaReport

    assert list(QaCheckRecord.model_fields) == [f.name for f in dataclasses.fields(QaCheck)]
    assert list(QaRecord.model_fields) == [
        *(f.name for f in dataclasses.fields(QaReport) if f.name not in ("checks", "logs")),
        "checks"]
    assert list(ReviewUsage.model_fields) == [f for f in Usage.model_fields
                                              if f not in ("attempt", "role", "task", "model",
                                                           "provider")]
    qa = QaReport("failed", "probe `todos` failed", "probes", commit="abc", duration_s=1.5,
                  checks=(QaCheck("todos", "probe", "failed", "500", ("a.txt",)),),
                  logs=("app.out.txt",))
    assert QaRecord.model_validate(qa.as_record()).model_dump() == qa.as_record()


def test_a_validation_records_baseline_has_exactly_the_fields_the_regressions_judge_compares(
        ) -> None:
    from specops_dag.delivery.model import BaselineRecord
    from specops_dag.validation.baseline import baseline_of, compare

    comparison = compare(baseline_of({"warnings": ["w1"], "projects": [
        {"failed_tests": ["T.a"], "executed": 3}]}), ["w1", "w2"], [
        {"failed_tests": ["T.a", "T.b"], "skipped_tests": ["T.c"], "executed": 2}])
    assert list(BaselineRecord.model_fields) == list(comparison)
    assert BaselineRecord.model_validate(comparison).model_dump() == comparison


def test_a_state_the_store_wrote_reads_back_equal_to_a_fresh_parse_of_its_file(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    with store.transaction("d1") as state:
        state.log("a change to write")
    again = store.read("d1")
    assert again == Store(diamond_root).read("d1")
    assert again.history[-1].event == "a change to write"


def test_a_transaction_of_one_step_parses_back_only_that_step_and_reads_equal_to_a_fresh_parse(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    with store.transaction("d1", "a") as state:
        state.log("first")
    with store.transaction("d1", "a") as state:
        kept = {s.name: s for s in state.steps}
        state.move(state.get_step("a"), "running", "run")
    with store.transaction("d1", "a") as again:
        assert again == Store(diamond_root).read("d1")
        assert [again.get_step(n) is kept[n] for n in "abcd"] == [False, True, True, True]
        assert again.get_step("a").status == "running"
        assert [e.event for e in again.history][-2:] == ["first", "pending->running"]


def test_a_transaction_of_one_step_that_changed_another_step_writes_nothing(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    before = store.index_path("d1").read_bytes()
    with pytest.raises(StateError) as info, store.transaction("d1", "b") as state:
        state.get_step("d").summary = "d needs b: b's transaction may change it"
        state.get_step("c").summary = "not b's to change"
    assert info.value.message == (
        "phases/d1/index.json: steps[2] (`c`) changed in a transaction of step `b`, which may "
        "change only that step and the steps that need it; nothing was written (a defect of "
        "specops: report it)")
    assert store.index_path("d1").read_bytes() == before


def test_a_state_changed_after_its_transaction_is_never_written_by_the_next_one(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    with store.transaction("d1", "a") as held:
        held.log("written")
    held.get_step("d").summary = "changed by a caller after the transaction ended"
    before = store.index_path("d1").read_bytes()
    with pytest.raises(StateError) as info, store.transaction("d1", "a") as state:
        state.log("the next transaction")
    assert info.value.message.startswith("phases/d1/index.json: steps[3] (`d`) changed in a "
                                         "transaction of step `a`")
    assert store.index_path("d1").read_bytes() == before
    assert Store(diamond_root).read("d1").get_step("d").summary is None


def test_a_transaction_of_one_step_that_rewrote_history_writes_nothing(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    before = store.index_path("d1").read_bytes()
    with pytest.raises(StateError) as info, store.transaction("d1", "a") as state:
        state.history[0] = state.history[0].model_copy(update={"detail": "rewritten"})
    assert info.value.message == (
        "phases/d1/index.json: history: an event was changed or removed in a transaction of "
        "step `a`; history is append-only and nothing was written (a defect of specops: report "
        "it)")
    assert store.index_path("d1").read_bytes() == before


def test_a_state_changed_by_another_writer_after_the_stores_own_write_is_read_anew(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    with store.transaction("d1") as state:
        state.log("written here")
    with Store(diamond_root).transaction("d1") as state:
        state.log("written by another process")
    assert [e.event for e in store.read("d1").history][-2:] == [
        "written here", "written by another process"]
    with store.transaction("d1") as state:
        state.log("written here again")
    path = store.index_path("d1")
    data = json.loads(path.read_text())
    data["steps"].append({**data["steps"][1], "step": 4})
    path.write_text(json.dumps(data, indent=2))
    with pytest.raises(StateError) as info:
        store.read("d1")
    assert info.value.message == ("phases/d1/index.json: steps[4].name: `b` is also steps[1]; "
                                  "step names are unique; fix the file or restore it from a backup")


def test_a_change_that_would_not_read_back_as_valid_state_is_not_written(
        diamond_root: Path) -> None:
    from pydantic import ValidationError

    store = make_delivery(diamond_root)
    before = store.index_path("d1").read_bytes()
    with pytest.raises(ValidationError, match="steps.0.status"), \
            store.transaction("d1") as state:
        state.get_step("a").status = "finished"  # type: ignore[assignment]
    assert store.index_path("d1").read_bytes() == before
    assert store.read("d1").get_step("a").status == "pending"


@pytest.mark.parametrize("second", ["00", "01"], ids=["same second", "a later second"])
def test_a_write_stamps_updated_at_and_the_derived_status_whether_or_not_they_moved(
        diamond_root: Path, monkeypatch: pytest.MonkeyPatch, second: str) -> None:
    from specops_dag.delivery import store as state_store

    store = make_delivery(diamond_root)
    monkeypatch.setattr(state_store, "now_iso", lambda: "2030-01-01T00:00:00Z")
    with store.transaction("d1") as state:
        state.log("first")
    monkeypatch.setattr(state_store, "now_iso", lambda: f"2030-01-01T00:00:{second}Z")
    with store.transaction("d1") as state:
        state.move(state.get_step("a"), "running", "run")
    text = store.index_path("d1").read_bytes()
    fresh = Store(diamond_root).read("d1")
    assert (fresh.updated_at, fresh.status) == (f"2030-01-01T00:00:{second}Z", "running")
    assert text == (fresh.model_dump_json(indent=2, by_alias=True) + "\n").encode()


def test_a_state_restamped_in_place_is_byte_identical_to_its_full_render_and_steps_keep_theirs(
        diamond_root: Path) -> None:
    from specops_dag.delivery.store import render, restamped

    state = make_delivery(diamond_root).read("d1")
    state.move(state.get_step("a"), "running", "run")
    before = render(state)
    state.status, state.updated_at = "running", "2031-02-03T04:05:06Z"
    after = restamped(before, "running", "2031-02-03T04:05:06Z")
    assert after == render(state)
    assert [s.status for s in Delivery.model_validate_json(after).steps] == [
        "running", "pending", "pending", "pending"]
    assert restamped(before.replace(b'\n  "status": ', b'\n"status": '), "done", "x") is None
    assert restamped(before, "bloqu\u00e9", "x") is None


def test_a_step_only_transaction_writes_exactly_the_full_render_of_what_it_changed(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    with store.transaction("d1", "b") as state:
        state.log("a first change: the next transactions share the other steps")
    for i in range(2):  # the second finds its parts where the first recorded them
        with store.transaction("d1", "b", step_only=True) as state:
            step = state.get_step("b")
            step.commits = {"product": None, "metadata": f"{i}" * 40}
            step.summary = "line one\nline \"two\" \u00e9"
            state.request = f"changed at the top level ({i})"
            state.log("metadata committed", "b", f"{i}" * 40)
            state.log("and a second event", "b")
    fresh = Store(diamond_root).read("d1")
    assert store.index_path("d1").read_bytes() == (
        fresh.model_dump_json(indent=2, by_alias=True) + "\n").encode()
    assert (fresh.get_step("b").commits["metadata"], fresh.request) == (
        "1" * 40, "changed at the top level (1)")
    assert [e.event for e in fresh.history][-3:] == [
        "and a second event", "metadata committed", "and a second event"]
    with store.transaction("d1", "b") as state:
        assert state == fresh


def test_a_step_only_transaction_splices_into_an_empty_history_and_a_misshapen_file_is_rendered(
        diamond_root: Path) -> None:
    from specops_dag.delivery.store import render, spliced

    state = make_delivery(diamond_root).read("d1")
    state.history = []
    before = render(state)
    state.get_step("d").summary = "the last step"
    state.log("the first event", "d")
    assert spliced(state, before, "d", 0, None) == render(state)
    assert spliced(state, before.replace(b'\n  "steps": [', b'\n"steps": ['), "d", 0,
                   None) is None
    assert spliced(state, before, "no such step", 0, None) is None


def test_a_step_only_transaction_never_writes_another_steps_change_and_the_next_refuses_it(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    with store.transaction("d1", "b") as state:
        state.log("a first change: the next transactions share the other steps")
    with store.transaction("d1", "b", step_only=True) as state:
        state.get_step("b").summary = "b's own change"
        state.get_step("c").summary = "not b's to change"
        state.get_step("d").summary = "d needs b, but a step-only transaction changes b alone"
    written = store.index_path("d1").read_bytes()
    fresh = Store(diamond_root).read("d1")
    assert [fresh.get_step(n).summary for n in "bcd"] == ["b's own change", None, None]
    with pytest.raises(StateError) as info, store.transaction("d1", "b") as state:
        state.log("the next transaction")
    assert info.value.message == (
        "phases/d1/index.json: steps[2] (`c`) changed in a transaction of step `b`, which may "
        "change only that step and the steps that need it; nothing was written (a defect of "
        "specops: report it)")
    assert store.index_path("d1").read_bytes() == written


def test_a_transaction_of_one_step_records_where_its_steps_are_and_a_wrong_place_is_searched_past(
        diamond_root: Path) -> None:
    from specops_dag.delivery.store import WRITTEN, regions, step_span

    store = make_delivery(diamond_root)
    for _ in range(2):  # the second finds them where the first recorded them
        with store.transaction("d1", "b") as state:
            state.log("b's change")
    text = store.index_path("d1").read_bytes()
    layout = WRITTEN[os.path.realpath(store.index_path("d1"))].layout
    fresh = Store(diamond_root).read("d1")
    assert layout is not None and layout.regions == regions(text)
    assert layout.spans == {n: step_span(text, fresh.get_step(n)) for n in ("b", "d")}
    b, d = fresh.get_step("b"), fresh.get_step("d")
    assert step_span(text, b, layout.spans["d"][0]) == layout.spans["b"]
    assert step_span(text, b, len(text) + 9) == layout.spans["b"]
    assert regions(text, layout.regions[0]) == regions(text, 1) == layout.regions
    assert text[slice(*step_span(text, d))].startswith(
        b'    {\n      "step": 3,\n      "name": "d"')
    with store.transaction("d1", "b") as state:
        assert state == fresh


def test_a_file_outside_the_delivery_recorded_by_a_transaction_of_one_step_is_refused_on_read(
        diamond_root: Path) -> None:
    from specops_dag.delivery.model import FileRef

    store = make_delivery(diamond_root)
    with store.transaction("d1", "a") as state:
        state.log("a first change: the next transaction shares the other steps")
    with store.transaction("d1", "a") as state:
        state.get_step("a").handoff = {"out": FileRef(path="/etc/passwd", sha256="0" * 64)}
    with pytest.raises(StateError) as info, store.transaction("d1", "a"):
        pass  # the next transaction of the step, which would take a state the store wrote
    assert info.value.message == (
        "phases/d1/index.json: steps[0].handoff.out.path: `/etc/passwd` is outside the delivery "
        "(handoffs live under phases/d1/); fix the file or restore it from a backup")


def test_a_state_written_through_one_store_is_read_through_another_without_parsing_it_again(
        diamond_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.delivery import store as state_store

    with make_delivery(diamond_root).transaction("d1") as state:
        state.log("written by the first store")
    parsed: list[str] = []
    real = state_store.parse_model
    monkeypatch.setattr(state_store, "parse_model",
                        lambda raw, where, *rest: parsed.append(where) or real(raw, where, *rest))
    other = Store(diamond_root.parent / diamond_root.name)
    assert other.read("d1").history[-1].event == "written by the first store"
    assert parsed == []
    assert other.read("d1").history[-1].event == "written by the first store"
    assert parsed == ["phases/d1/index.json"]  # taken once: the second read parses


def test_a_node_runs_beside_others_when_some_node_is_neither_upstream_nor_downstream_of_it(
        ) -> None:
    from specops_dag.delivery.queries import beside_others

    diamond = (("a", ()), ("b", ("a",)), ("c", ("a",)), ("d", ("b", "c")))
    assert beside_others(diamond) == frozenset({"b", "c"})
    chain = tuple((f"n{i}", (f"n{i - 1}",) if i else ()) for i in range(200))
    assert beside_others(chain) == frozenset()
    apart = (("a", ()), ("b", ("a",)), ("x", ()))
    assert beside_others(apart) == frozenset({"a", "b", "x"})
