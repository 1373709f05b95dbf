"""Bad input found by the fault campaign (issue #22, item 5): each case exits 2 with a message
naming what is wrong and how to fix it, and leaves the tree byte-identical."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.store import Store
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.harness import VENV_BIN, tree_state


def specops(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "SPECOPS_ROOT")}
    return subprocess.run([str(VENV_BIN / "specops"), "--root", str(root), *args], env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def created(root: Path) -> Store:
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root), "diamond",
                     "d1", "Do it.")
    return store


def test_new_with_a_corrupt_delivery_index_creates_nothing(diamond_root: Path) -> None:
    (diamond_root / "phases").mkdir()
    (diamond_root / "phases/index.json").write_text("{not json")
    before = tree_state(diamond_root)
    result = specops(diamond_root, "new", "diamond", "d1", "--request", "Do it.")
    assert result.returncode == 2
    assert result.stderr.startswith("error: phases/index.json: not valid JSON (")
    assert result.stderr.endswith("); restore it from a backup\n")
    assert tree_state(diamond_root) == before
    assert not (diamond_root / "phases/d1").exists()


@pytest.mark.parametrize(("timeout", "why"), [
    ("-5", "-5.0 is not in the range x>0."), ("0", "0.0 is not in the range x>0."),
    ("nan", "nan is not a finite number greater than 0."),
    ("inf", "inf is not a finite number greater than 0."),
    ("1e400", "1e400 is not a finite number greater than 0.")])
def test_run_with_a_timeout_that_is_not_a_positive_finite_number_is_a_usage_error(
        diamond_root: Path, timeout: str, why: str) -> None:
    created(diamond_root)
    before = tree_state(diamond_root)
    result = specops(diamond_root, "run", "d1", "--timeout", timeout)
    assert result.returncode == 2
    assert result.stderr.endswith(f"Error: Invalid value for '--timeout': {why}\n")
    assert tree_state(diamond_root) == before


def test_reopening_a_pending_node_is_refused_and_changes_nothing(diamond_root: Path) -> None:
    created(diamond_root)
    before = tree_state(diamond_root)
    result = specops(diamond_root, "reopen", "d1", "b")
    assert (result.returncode, result.stderr) == (
        2, "error: step `b` of `d1` is `pending`: there is nothing to reopen; `specops run d1` "
           "runs it\n")
    assert tree_state(diamond_root) == before


@pytest.mark.parametrize("args", [("status",), ("status", "d1"), ("dry-run", "d1"), ("check",)])
def test_a_root_that_does_not_exist_is_a_usage_error(tmp_path: Path, args: tuple) -> None:
    missing = tmp_path / "nowhere"
    result = specops(missing, *args)
    assert result.returncode == 2
    assert result.stderr.endswith(f"Error: Invalid value for '--root': Directory '{missing}' "
                                  "does not exist.\n")
    assert not missing.exists()


def test_a_state_file_nested_too_deeply_is_an_exact_error_not_a_traceback(
        diamond_root: Path) -> None:
    created(diamond_root)
    (diamond_root / "phases/d1/index.json").write_text("[" * 100_000 + "]" * 100_000)
    before = tree_state(diamond_root)
    result = specops(diamond_root, "status", "d1")
    assert (result.returncode, result.stderr) == (
        2, "error: phases/d1/index.json: nested too deeply to be a specops state file; restore "
           "it from a backup\n")
    assert tree_state(diamond_root) == before


def test_a_state_file_over_the_size_cap_is_an_exact_error(diamond_root: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.delivery import store as state

    store = created(diamond_root)
    monkeypatch.setattr(state, "MAX_STATE_BYTES", 1024)
    with pytest.raises(state.StateError) as err:
        store.read("d1")
    assert err.value.message == ("phases/d1/index.json: larger than 1,024 bytes, more than any "
                                 "state specops writes; restore it from a backup")


@pytest.mark.e2e
def test_a_consumer_checks_its_upstream_handoffs_before_it_starts_and_reports_drift(
        diamond_root: Path) -> None:
    from specops_dag.execution.step import run_step
    from specops_dag.files import sha256_file

    store = created(diamond_root)
    assert run_step(store, "d1", "a").status == "completed"
    out = diamond_root / "phases/d1/a/out.txt"
    registered = sha256_file(out)
    out.write_text("edited by hand\n")
    assert run_step(store, "d1", "b").status == "completed"  # reported, never refused
    [event] = [e for e in store.read("d1").history if e.event == "input drift"]
    assert (event.step, event.detail) == ("b", (
        f"upstream handoffs changed since they were registered: phases/d1/a/out.txt (registered "
        f"{registered[:12]}, now {sha256_file(out)[:12]})"))
    status = specops(diamond_root, "status", "d1").stdout
    assert "drift: b: input `a/result` phases/d1/a/out.txt changed since it was consumed" in status


def git_delivery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Store]:
    """The git harness (diamond of commands writing product files) with delivery `d1`."""
    from ..support.git import git_harness

    monkeypatch.setenv("CALLS", str(tmp_path / "calls.log"))
    root, _ = git_harness(tmp_path)
    return root, created(root)


@pytest.mark.e2e
def test_a_git_lock_no_process_holds_is_removed_and_the_step_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.execution.step import run_step

    root, store = git_delivery(tmp_path, monkeypatch)
    assert run_step(store, "d1", "a").status == "completed"
    lock = (root / ".git/worktrees/d1/index.lock").resolve()
    lock.write_text("")  # what a SIGKILLed `git commit` leaves
    outcome = run_step(store, "d1", "b")
    assert outcome.status == "completed", outcome.message
    assert not lock.exists()
    [event] = [e for e in store.read("d1").history if e.event == "removed stale git lock"]
    assert (event.step, event.detail) == ("b", f"{lock} (no process had it open)")


@pytest.mark.e2e
def test_a_git_lock_a_live_process_holds_blocks_the_step_with_the_fix_and_no_attempt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.execution.step import run_step

    root, store = git_delivery(tmp_path, monkeypatch)
    assert run_step(store, "d1", "a").status == "completed"
    worktree = (root / ".specops/worktrees/d1").resolve()
    lock = (root / ".git/worktrees/d1/index.lock").resolve()
    with open(lock, "w"):  # a git command that is still running holds its lock open
        outcome = run_step(store, "d1", "b")
    reason = (f"git lock: {lock} exists and a process may still hold it; if no git command is "
              f"running in {worktree}, remove it (`rm {lock}`), then `specops resume d1 b`")
    assert (outcome.status, outcome.message) == ("blocked", reason)
    assert store.read("d1").get_step("b").attempts == 0
    lock.unlink()
    ops.resume(store, "d1", "b")
    assert run_step(store, "d1", "b").status == "completed"


@pytest.mark.e2e
def test_a_metadata_commit_interrupted_after_completion_is_made_on_the_next_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import git

    from specops_dag import gitflow
    from specops_dag.execution.step import run_step


    root, store = git_delivery(tmp_path, monkeypatch)
    real = gitflow.commit_metadata

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the run dies between completion and the metadata commit

    monkeypatch.setattr(gitflow, "commit_metadata", killed)
    with pytest.raises(KeyboardInterrupt):
        run_step(store, "d1", "a")
    step = store.read("d1").get_step("a")
    assert (step.status, step.commits["metadata"]) == ("completed", "pending")
    monkeypatch.setattr(gitflow, "commit_metadata", real)
    outcome = run_step(store, "d1", "a")
    assert outcome.status == "reused"
    sha = store.read("d1").get_step("a").commits["metadata"]
    assert outcome.commits["metadata"] == sha
    assert git.Repo(root).commit(sha).message == "[d1] a attempt 1: metadata\n"


def test_a_run_killed_after_the_metadata_commit_but_before_its_sha_was_recorded_records_it_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.execution.step import run_step

    root, store = git_delivery(tmp_path, monkeypatch)
    import git

    from specops_dag import gitflow

    real, made = gitflow.commit_metadata, []

    def committed_then_killed(*args: object, **kwargs: object) -> None:
        made.append(real(*args, **kwargs))  # the commit lands; the run dies before recording its SHA
        raise KeyboardInterrupt

    monkeypatch.setattr(gitflow, "commit_metadata", committed_then_killed)
    with pytest.raises(KeyboardInterrupt):
        run_step(store, "d1", "a")
    assert store.read("d1").get_step("a").commits["metadata"] == "pending"
    monkeypatch.setattr(gitflow, "commit_metadata", real)
    assert run_step(store, "d1", "a").status == "reused"
    [sha] = made
    assert store.read("d1").get_step("a").commits["metadata"] == sha
    assert git.Repo(root).commit(sha).message == "[d1] a attempt 1: metadata\n"


@pytest.mark.e2e
def test_a_failed_metadata_commit_fails_the_step_visibly_and_the_next_run_retries_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from specops_dag import gitflow
    from specops_dag.execution.step import run_step
    from specops_dag.gitflow import GitError

    root, store = git_delivery(tmp_path, monkeypatch)
    real, locks = gitflow.commit_metadata, []

    def locked(worktree: Path, *args: object, **kwargs: object) -> str | None:
        git_dir = subprocess.run(["git", "-C", str(worktree), "rev-parse", "--absolute-git-dir"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        lock = Path(git_dir) / "index.lock"
        locks.append((lock, worktree, lock.open("w")))  # another git holds the index open
        return real(worktree, *args, **kwargs)

    monkeypatch.setattr(gitflow, "commit_metadata", locked)
    with pytest.raises(GitError) as err:
        run_step(store, "d1", "a")
    [(lock, worktree, holder)] = locks
    assert err.value.message == (
        "the metadata commit of `a` failed, the step stays completed and the next `specops run "
        "d1` commits it: `git --literal-pathspecs add -A -f --pathspec-from-file=- "
        f"--pathspec-file-nul` in {worktree} exited 128: fatal: Unable to create "
        f"'{lock}': File exists.")
    assert store.read("d1").get_step("a").status == "completed"
    holder.close()
    lock.unlink()
    monkeypatch.setattr(gitflow, "commit_metadata", real)
    assert run_step(store, "d1", "a").status == "reused"
    assert store.read("d1").get_step("a").commits["metadata"] not in (None, "pending")


def edit_state(root: Path, change) -> None:
    path = root / "phases/d1/index.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def duplicate_step(data: dict) -> None:
    data["steps"].append({**data["steps"][1], "step": 4})


def no_steps(data: dict) -> None:
    data["steps"] = []


def unknown_need(data: dict) -> None:
    data["steps"][1]["needs"] = ["zz"]


def later_need(data: dict) -> None:
    data["steps"][1]["needs"] = ["d"]


def handoff_outside(data: dict) -> None:
    data["steps"][0]["handoff"] = {"out": {"path": "/etc/passwd", "sha256": "0" * 64}}


def consumed_escaping(data: dict) -> None:
    data["steps"][1]["consumed"] = {"up": {"path": "phases/d1/../../etc/passwd",
                                           "sha256": "0" * 64}}


def other_delivery(data: dict) -> None:
    data["phase"] = "d2"


def risk_outside(data: dict) -> None:
    data["risks"] = [{"node": "a", "path": "/etc/shadow", "raised_at": "2026-12-01T00:00:00Z"}]


FIX = "fix the file or restore it from a backup"


@pytest.mark.e2e
@pytest.mark.parametrize(("change", "message"), [
    (duplicate_step, "steps[4].name: `b` is also steps[1]; step names are unique"),
    (no_steps, "steps: empty, a delivery has at least one step"),
    (unknown_need, "steps[1].needs: `zz` is no step of this delivery (needs name earlier steps)"),
    (later_need, "steps[1].needs: `d` is a later step of this delivery (needs name earlier "
                 "steps)"),
    (handoff_outside, "steps[0].handoff.out.path: `/etc/passwd` is outside the delivery "
                      "(handoffs live under phases/d1/)"),
    (consumed_escaping, "steps[1].consumed.up.path: `phases/d1/../../etc/passwd` is outside the "
                        "delivery (handoffs live under phases/d1/)"),
    (other_delivery, "phase: `d2` but the file is delivery `d1`'s"),
    (risk_outside, "risks[0].path: `/etc/shadow` is outside the delivery (risks live under "
                   "phases/d1/)"),
])
@pytest.mark.parametrize("command", [("status", "d1"), ("run", "d1"), ("dry-run", "d1")])
def test_a_hand_edited_state_that_breaks_its_rules_is_refused_before_use(
        diamond_root: Path, change, message: str, command: tuple[str, ...]) -> None:
    created(diamond_root)
    edit_state(diamond_root, change)
    before = tree_state(diamond_root)
    result = specops(diamond_root, *command)
    assert (result.returncode, result.stderr) == (
        2, f"error: phases/d1/index.json: {message}; {FIX}\n")
    assert tree_state(diamond_root) == before


def test_a_symlinked_definition_is_reported_under_the_link_not_its_target(
        diamond_root: Path) -> None:
    link = diamond_root / "workflow_defs/phases/p-b.yaml"
    (diamond_root / "elsewhere").mkdir()
    (diamond_root / "elsewhere/real-p-b.yaml").write_text("kind: phase\nid: [\n")
    link.unlink()
    link.symlink_to("../../elsewhere/real-p-b.yaml")
    before = tree_state(diamond_root)
    result = specops(diamond_root, "check")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0].startswith(
        "workflow_defs/phases/p-b.yaml: invalid YAML at line 3, column 1: ")
    assert tree_state(diamond_root) == before


@pytest.mark.e2e
def test_a_missing_worktree_blocks_the_step_with_the_commands_that_recreate_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from specops_dag.execution.step import run_step

    root, store = git_delivery(tmp_path, monkeypatch)
    assert run_step(store, "d1", "a").status == "completed"
    worktree = (root / ".specops/worktrees/d1").resolve()
    shutil.rmtree(worktree)
    outcome = run_step(store, "d1", "b")
    assert (outcome.status, outcome.message) == ("blocked", (
        f"the delivery's worktree {worktree} is missing (deleted or moved); recreate it from its "
        f"branch with `git -C {root.resolve()} worktree prune && git -C {root.resolve()} worktree "
        f"add {worktree} feat-d1`, then `specops resume d1 b`"))
    assert store.read("d1").get_step("b").attempts == 0
    subprocess.run(["git", "-C", str(root), "worktree", "prune"], check=True)
    subprocess.run(["git", "-C", str(root), "worktree", "add", "-q", str(worktree), "feat-d1"],
                   check=True)
    ops.resume(store, "d1", "b")
    assert run_step(store, "d1", "b").status == "completed"


@pytest.mark.e2e
def test_a_state_lock_that_became_a_folder_is_an_exact_error_before_the_run_starts(
        diamond_root: Path) -> None:
    created(diamond_root)
    lock = diamond_root / "phases/d1/.lock"
    if lock.exists():
        lock.unlink()
    lock.mkdir()
    before = tree_state(diamond_root)
    for command in (("run", "d1"), ("resume", "d1", "a"), ("approve", "d1", "scope")):
        result = specops(diamond_root, *command)
        assert (result.returncode, result.stderr) == (2, (
            "error: phases/d1/.lock is a folder, not the lock file specops takes; if no specops "
            f"command is running, remove it (`rm -r {lock}`) and retry; nothing was changed\n"))
    assert tree_state(diamond_root) == before
