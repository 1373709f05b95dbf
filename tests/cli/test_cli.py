from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import git
import pytest

from ..support.cli import specops
from ..support.dotnet import path_without_dotnet
from ..support.harness import complete, make_delivery, write_tree


def tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")) if folder.exists() else []:
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def test_check_passes_on_the_built_in_and_harness_definitions(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    result = specops(clean_env, diamond_root, "check")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok: 4 workflows, 22 phases, 18 skills from ")


def test_check_exits_2_with_every_problem_and_changes_nothing(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    make_delivery(diamond_root)
    wf = diamond_root / "workflow_defs/workflows/diamond.yaml"
    wf.write_text(wf.read_text().replace("needs: [a], inputs: {up: {node: a", "needs: [zz], "
                                         "inputs: {up: {node: a", 1))
    before = tree_digest(diamond_root / "phases")
    result = specops(clean_env, diamond_root, "check")
    assert result.returncode == 2
    assert result.stderr == (
        "workflow_defs/workflows/diamond.yaml: nodes[1].needs[0]: unknown node `zz` (known: a, b, "
        "c, d)\n"
        "workflow_defs/workflows/diamond.yaml: nodes[1].inputs.up.node: `a` is not upstream of "
        "`b` (upstream: none); add `a` to nodes[1].needs or take the input from an upstream node\n"
        "error: 2 problem(s) in the definitions; nothing was changed\n")
    assert tree_digest(diamond_root / "phases") == before


def test_check_validates_the_harness_roots_price_table_and_names_its_date(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    prices = diamond_root / "prices.yaml"
    prices.write_text("as_of: 2026-11-01\nprices:\n  m1: {input: 1, cached_input: 0.1, "
                      "output: -2}\n")
    bad = specops(clean_env, diamond_root, "check")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr.splitlines()[-1] == ("error: 1 problem(s) in the definitions; nothing was "
                                           "changed")
    assert bad.stderr.startswith("prices.yaml: prices.m1.output: ")
    prices.write_text("as_of: 2026-11-01\nprices:\n  m1: {input: 1, cached_input: 0.1, "
                      "output: 2}\n")
    good = specops(clean_env, diamond_root, "check")
    assert good.returncode == 0, good.stderr
    assert good.stdout.rstrip().endswith("; prices as of 2026-11-01 from prices.yaml")


@pytest.mark.e2e
def test_schema_prints_json_schema_for_both_kinds(tmp_path: Path,
                                                  clean_env: dict[str, str]) -> None:
    result = specops(clean_env, tmp_path, "schema")
    schemas = json.loads(result.stdout)
    assert set(schemas) == {"workflow", "phase", "skill-graph"}
    assert schemas["workflow"]["additionalProperties"] is False
    assert schemas["phase"]["properties"]["kind"]["const"] == "phase"
    one = json.loads(specops(clean_env, tmp_path, "schema", "--kind", "phase").stdout)
    assert one == schemas["phase"]


NEW_ERRORS = [
    pytest.param(["new", "nope", "d2", "--request", "x"],
                 "error: unknown workflow `nope` (known: diamond, full-delivery, plan-build-review, "
                 "quick-delivery); "
                 "see `specops check`\n", id="unknown-workflow"),
    pytest.param(["new", "diamond", "../evil", "--request", "x"],
                 "error: delivery id `../evil` contains a path separator; use e.g. `rss-cache` or "
                 "`2026-11-rss-cache`\n", id="path-in-id"),
    pytest.param(["new", "diamond", "d1", "--request", "x"],
                 "error: delivery `d1` already exists (phases/d1/); pick another id or see "
                 "`specops status d1`\n", id="existing"),
    pytest.param(["new", "diamond", "d2", "--request", "   "],
                 "error: the request is empty; pass --request TEXT or --request-file FILE\n",
                 id="empty-request"),
    pytest.param(["new", "diamond", "d2", "--target", "nowhere", "--request", "x"],
                 "error: --target nowhere: not a directory; pass the .NET repository to change\n",
                 id="bad-target"),
]


@pytest.mark.e2e
@pytest.mark.parametrize(("args", "message"), NEW_ERRORS)
def test_a_failed_new_exits_2_and_leaves_phases_and_dagster_untouched(
        diamond_root: Path, clean_env: dict[str, str], args: list[str], message: str) -> None:
    assert specops(clean_env, diamond_root, "new", "diamond", "d1", "--request", "x"
                   ).returncode == 0
    before = tree_digest(diamond_root / "phases")
    result = specops(clean_env, diamond_root, *args)
    assert (result.returncode, result.stderr) == (2, message)
    assert tree_digest(diamond_root / "phases") == before
    with dg.DagsterInstance.get() as instance:
        assert instance.get_dynamic_partitions("delivery") == ["d1"]


@pytest.mark.e2e
def test_new_with_both_or_neither_request_option_is_a_usage_error(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    for args in (["--request", "x", "--request-file", "f"], []):
        result = specops(clean_env, diamond_root, "new", "diamond", "d2", *args)
        assert result.returncode == 2
        assert result.stderr.endswith("Error: give exactly one of --request TEXT or "
                                      "--request-file FILE\n")
    assert not (diamond_root / "phases").exists()


@pytest.mark.e2e
def test_new_reads_the_request_from_a_utf8_file_and_refuses_other_bytes(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    bad = diamond_root / "bad.txt"
    bad.write_bytes(b"\xff\xfe\x00bad")
    result = specops(clean_env, diamond_root, "new", "diamond", "d2", "--request-file", str(bad))
    assert result.returncode == 2
    assert f"Error: --request-file {bad}: cannot read it as UTF-8 text" in result.stderr
    assert not (diamond_root / "phases").exists()
    good = write_tree(diamond_root, {"req.md": "Add an RSS cache, ü.\n"}) / "req.md"
    assert specops(clean_env, diamond_root, "new", "diamond", "d2", "--request-file", str(good)
                   ).returncode == 0
    state = json.loads((diamond_root / "phases/d2/index.json").read_text())
    assert state["request"] == "Add an RSS cache, ü.\n"


def test_new_refuses_invalid_definitions_and_writes_nothing(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    (diamond_root / "workflow_defs/phases/p-a.yaml").write_text("kind: phase\nid: p-a\n")
    result = specops(clean_env, diamond_root, "new", "diamond", "d2", "--request", "x")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == ("workflow_defs/phases/p-a.yaml: execution: missing "
                                             "required key `execution`; add it")
    assert not (diamond_root / "phases").exists()


def test_status_lists_deliveries_and_shows_steps_with_next_actions(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    wf = diamond_root / "workflow_defs/workflows/diamond.yaml"
    wf.write_text(wf.read_text().replace("{id: b, phase: p-b,",
                                         "{id: b, phase: p-b, gates: {before: target-write},"))
    store = make_delivery(diamond_root)
    complete(store, "d1", "a")
    listing = specops(clean_env, diamond_root, "status")
    assert listing.returncode == 0
    assert listing.stdout.split()[:3] == ["d1", "diamond", "pending"]
    from specops_dag.execution.step import run_step
    assert run_step(store, "d1", "b").status == "blocked"
    detail = specops(clean_env, diamond_root, "status", "d1")
    assert detail.stdout.splitlines() == [
        "delivery d1  workflow diamond  status blocked",
        "request: Add an RSS cache.",
        "  ✔  0 a                completed  1 handoff(s), attempt 0",
        "  ■  1 b                blocked    awaiting approval: target-write",
        "       question: May the agent change the target repository now?",
        "       look at: phases/d1/a/out.txt",
        "       next: `specops approve d1 target-write --note ...` (or `specops approve d1 "
        "target-write --reject --note ...`)",
        "  ·  2 c                pending   ",
        "  ·  3 d                pending   ",
        "tokens: 0",
        "next: `specops run d1` runs c"]
    as_json = json.loads(specops(clean_env, diamond_root, "status", "d1", "--json").stdout)
    assert as_json["runnable"] == ["c"] and as_json["drift"] == []
    assert [s["status"] for s in as_json["steps"]] == ["completed", "blocked", "pending",
                                                      "pending"]


def test_the_delivery_list_says_a_garbage_state_file_is_unreadable_not_its_last_status(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    store = make_delivery(diamond_root)
    for node in "abcd":
        complete(store, "d1", node)
    store.index_path("d1").write_text("{ not json")
    listing = specops(clean_env, diamond_root, "status")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.splitlines() == [
        "d1                       diamond            unreadable: phases/d1/index.json: not valid "
        "JSON (Expecting property name enclosed in double quotes: line 1 column 3 (char 2)); "
        "restore it from a backup"]
    as_json = json.loads(specops(clean_env, diamond_root, "status", "--json").stdout)
    assert list(as_json["unreadable"]) == ["d1"]


def test_status_of_an_unknown_delivery_exits_2(tmp_path: Path,
                                               clean_env: dict[str, str]) -> None:
    result = specops(clean_env, tmp_path, "status", "ghost")
    assert (result.returncode, result.stderr) == (
        2, "error: unknown delivery `ghost`: phases/ghost/index.json not found; list deliveries "
           "with `specops status` or create one with `specops new`\n")


@pytest.mark.e2e
def test_reopen_resume_and_approve_from_the_cli(diamond_root: Path,
                                                clean_env: dict[str, str]) -> None:
    store = make_delivery(diamond_root)
    for node in "abcd":
        complete(store, "d1", node)
    reopened = specops(clean_env, diamond_root, "reopen", "d1", "c", "--reason", "flaky")
    assert reopened.stdout == "reopened c, d of d1; re-run with `specops run d1`\n"
    resumed = specops(clean_env, diamond_root, "resume", "d1", "c")
    assert (resumed.returncode, resumed.stderr) == (
        2, "error: step `c` of `d1` is `pending`; resume takes an `error` or `blocked` step\n")
    approved = specops(clean_env, diamond_root, "approve", "d1", "scope")
    assert (approved.returncode, approved.stderr) == (
        2, "error: delivery `d1` has no `scope` gate (its gates: external-write)\n")


@pytest.mark.e2e
def test_approve_says_when_a_decision_repeats_and_which_nodes_a_rejection_reopened(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    wf = diamond_root / "workflow_defs/workflows/diamond.yaml"
    wf.write_text(wf.read_text().replace("{id: a, phase: p-a,",
                                         "{id: a, phase: p-a, gates: {after: requirements},"))
    store = make_delivery(diamond_root)
    complete(store, "d1", "a")
    first = specops(clean_env, diamond_root, "approve", "d1", "requirements")
    assert first.stdout.startswith("requirements approved for d1 at ")
    assert len(first.stdout.splitlines()) == 1
    at = store.read("d1").approvals[-1]
    again = specops(clean_env, diamond_root, "approve", "d1", "requirements")
    assert again.stdout.splitlines()[1] == (
        f"note: `requirements` was already approved at {at.at} by {at.by}; recorded again, "
        "nothing else changed")
    for node in "bcd":
        complete(store, "d1", node)
    rejected = specops(clean_env, diamond_root, "approve", "d1", "requirements", "--reject",
                       "--note", "AC 2 is wrong")
    assert rejected.returncode == 0, rejected.stderr
    assert rejected.stdout.splitlines()[1:] == [
        "reopened: a, b, c, d (their earlier files are kept under phases/d1/.revisions/); "
        "`specops run d1` runs them again"]


@pytest.mark.e2e
def test_run_names_the_process_that_is_running_a_step_instead_of_exiting_silently(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    from specops_dag.delivery.lifecycle import current_owner

    store = make_delivery(diamond_root)
    me = current_owner()
    with store.transaction("d1") as state:
        step = state.get_step("a")
        step.status, step.owner, step.attempts = "running", me, 1
    result = specops(clean_env, diamond_root, "run", "d1", "--executor", "in_process")
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"error: d1 is not finished: another process is running `a` by pid {me.pid} on "
        f"{me.host}; wait for it to end (or stop that process), then `specops run d1` again")


@pytest.mark.e2e
def test_run_goes_through_a_dagster_run_and_reports_the_steps(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    assert specops(clean_env, diamond_root, "new", "diamond", "d1", "--request", "Go."
                   ).returncode == 0
    result = specops(clean_env, diamond_root, "run", "d1", "--executor", "in_process")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"running diamond_job for d1 (DAGSTER_HOME="
                               f"{clean_env['DAGSTER_HOME']}); log: ")
    assert lines[1] == "delivery d1  workflow diamond  status completed"
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert [(r.job_name, r.tags["dagster/partition"], r.status.value) for r in runs] == [
            ("diamond_job", "d1", "SUCCESS")]


def run_demo(tmp_path: Path, env: dict[str, str]) -> tuple[Path, list[str]]:
    """`specops demo` in process mode into tmp_path/demo; its harness root and printed lines."""
    result = specops(env, tmp_path, "demo", "--dir", str(tmp_path / "demo"),
                     "--executor", "in_process")
    assert result.returncode == 0, result.stdout + result.stderr
    return tmp_path / "demo/demo-1", result.stdout.splitlines()


@pytest.mark.e2e
def test_demo_runs_a_quick_delivery_with_the_real_codex_cli_offline(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    env = {k: v for k, v in clean_env.items() if k != "DAGSTER_HOME"}
    env["PATH"] = path_without_dotnet(tmp_path, env["PATH"])  # no SDK: the demo is docs-only
    root, lines = run_demo(tmp_path, env)
    assert lines[:3] == [
        f"demo harness root: {root} (a git repo with the `all-pass` fixture, net8.0)",
        "delivery demo-1 of quick-delivery; gate target-write approved by the demo; "
        "validation: docs-only",
        "note: `dotnet` is not on PATH, so this demo validates its documentation-only change "
        "with docs-only; full validation (build with -warnaserror, dotnet test with TRX) needs "
        "the .NET 10 SDK on PATH"]
    assert "delivery demo-1  workflow quick-delivery  status completed" in lines
    state = json.loads((root / "phases/demo-1/index.json").read_text())
    assert [(s["name"], s["status"], s["attempts"]) for s in state["steps"]] == [
        ("develop", "completed", 1), ("verify", "completed", 1), ("delivery", "completed", 1)]
    develop = state["steps"][0]
    assert develop["validation_report"]["stage"] == "docs-only"
    assert develop["usage"][0]["thread_id"]
    worktree = root / ".specops/worktrees/demo-1"
    assert state["worktree"] == ".specops/worktrees/demo-1" and state["branch"] == "feat-demo-1"
    assert (worktree / "docs/phase/demo-1/handoff.md").is_file()
    repo = git.Repo(root)
    log = repo.git.log("feat-demo-1", "--format=%s").splitlines()
    assert log == ["[demo-1] delivery attempt 1: metadata", "[demo-1] verify attempt 1: metadata",
                   "[demo-1] develop attempt 1: metadata",
                   "[demo-1] develop attempt 1: product changes", "demo fixture"]
    product = repo.git.show("--format=", "--name-only", "feat-demo-1~3").splitlines()
    assert product == ["docs/calculator-usage.md"]  # develop's one scripted product change
    assert (worktree / "docs/calculator-usage.md").read_text() == (
        "# Using Calculator.Add\n\n`new Calculator().Add(2, 3)` returns `5`.\n")
    assert repo.active_branch.name == "main"
    assert f"work: branch feat-demo-1 in {worktree}" in lines
    # Every node's literal agent read its inputs and wrote exactly what its WRITE named.
    node_dir = f"{root}/phases/demo-1"
    assert [s["summary"] for s in state["steps"]] == [
        f"Wrote: {node_dir}/develop/changes.md, {node_dir}/develop/red-green.md, "
        "docs/phase/demo-1/develop.md, docs/phase/demo-1/handoff.md",
        f"Wrote: {node_dir}/verify/report.md, docs/phase/demo-1/verify.md, "
        "docs/phase/demo-1/handoff.md",
        f"Wrote: {node_dir}/delivery/summary.md, docs/phase/demo-1/delivery.md, "
        "docs/phase/demo-1/handoff.md"]
    assert (root / "phases/demo-1/develop/changes.md").read_text() == (
        "# Changes\n\n- docs/calculator-usage.md: usage notes for Calculator.Add (documentation "
        "only; no C# change was needed).\n")
    requests = [json.loads(line) for line in
                (root / ".specops/replay-requests.jsonl").read_text().splitlines()]
    actions = {}
    for request in requests:  # the real codex CLI ran: one thread per node
        actions.setdefault(request["node"], []).append(request.get("literal", {}).get("action"))
    # its product change first; each ran the CHANGES command its prompt names
    assert actions == {"develop": [None, "read", "changes", "write", "done"],
                       "verify": ["read", "changes", "write", "done"],
                       "delivery": ["read", "changes", "write", "done"]}
    assert len({r["thread"] for r in requests}) == 3
    assert any(line.startswith("handoff develop/changes: phases/demo-1/develop/changes.md ")
               for line in lines)


@pytest.mark.dotnet
@pytest.mark.e2e
def test_demo_with_a_net10_sdk_validates_the_net10_fixture_for_real_and_prints_the_trx_totals(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root, lines = run_demo(tmp_path, {k: v for k, v in clean_env.items() if k != "DAGSTER_HOME"})
    assert lines[:2] == [
        f"demo harness root: {root} (a git repo with the `all-pass-net10` fixture, net10.0)",
        "delivery demo-1 of quick-delivery; gate target-write approved by the demo; "
        "validation: full"]
    state = json.loads((root / "phases/demo-1/index.json").read_text())
    assert state["snapshot"]["target"]["framework"] == "net10.0"
    develop = state["steps"][0]
    report = develop["validation_report"]
    assert (report["passed"], report["mode"], report["stage"], report["target"]) == (
        True, "full", "test", "net10.0")
    assert report["sdk_version"].startswith("10.")
    assert [c["command"].split()[1] for c in report["commands"]][-1] == "test"
    trx = report["projects"][0]["trx"]
    assert Path(trx).is_file()
    assert (f"validation develop: passed at `test` with SDK {report['sdk_version']}: 1 test "
            "project(s): 2 of 2 tests executed, 2 passed, 0 skipped") in lines
    assert f"  TRX {trx}: 2 total, 2 executed, 2 passed, 0 failed, 0 skipped" in lines
