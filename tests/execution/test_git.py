from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import dagster as dg
import git
import pytest

from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.queries import is_git_target
from specops_dag.delivery.store import Store
from specops_dag.errors import WriteConflict
from specops_dag.execution.step import run_step
from specops_dag.gitflow import (
    IDENTITY,
    ensure_worktree,
    is_repository,
    keep_harness_clean,
    sync_tree,
)
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.cli import job_execute, specops
from ..support.git import WHO, commit_paths, git_harness, new, run_all


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls.log"
    monkeypatch.setenv("CALLS", str(path))
    return path


def test_each_step_lands_as_a_product_commit_and_a_metadata_commit_on_its_branch(
        tmp_path: Path, calls: Path) -> None:
    root, _ = git_harness(tmp_path)
    repo = git.Repo(root)
    main_before = repo.head.commit.hexsha
    store = new(root)
    assert run_all(store) == ["completed"] * 4
    state = store.read("d1")
    assert (state.worktree, state.branch) == (".specops/worktrees/d1", "feat-d1")
    worktree = root / ".specops/worktrees/d1"
    a = state.get_step("a")
    assert commit_paths(repo, a.commits["product"]) == ["src/a.txt"]
    assert commit_paths(repo, a.commits["metadata"]) == sorted([
        "docs/phase/d1/a.md", "phases/d1/a/evidence.json", "phases/d1/a/out.txt",
        "phases/d1/index.json", "phases/d1/request.md",
        "phases/d1/snapshot/phases/p-a.yaml",
        "phases/d1/snapshot/phases/p-b.yaml", "phases/d1/snapshot/phases/p-c.yaml",
        "phases/d1/snapshot/phases/p-d.yaml", "phases/d1/snapshot/work-rules.md",
        "phases/d1/snapshot/workflows/diamond.yaml"])
    assert repo.commit(a.commits["product"]).message == "[d1] a attempt 1: product changes\n"
    assert repo.commit(a.commits["metadata"]).message == "[d1] a attempt 1: metadata\n"
    d = state.get_step("d")
    assert commit_paths(repo, d.commits["product"]) == ["src/d.txt"]
    # b and c may run at once: each on its own branch from a's result, merged into feat-d1
    b, c = state.get_step("b"), state.get_step("c")
    assert (b.branch, c.branch, b.worktree, c.worktree) == ("feat-d1+b", "feat-d1+c", None, None)
    assert commit_paths(repo, b.commits["product"]) == ["src/b.txt"]
    assert commit_paths(repo, c.commits["product"]) == ["src/c.txt"]
    assert repo.commit(b.commits["product"]).parents[0].hexsha == a.commits["metadata"]
    assert repo.git.log("feat-d1", "--first-parent", "--format=%s").splitlines() == [
        "[d1] d attempt 1: metadata", "[d1] d attempt 1: product changes",
        "[d1] c attempt 1: metadata", "[d1] merge feat-d1+c: c attempt 1",
        "[d1] b attempt 1: metadata", "[d1] merge feat-d1+b: b attempt 1",
        "[d1] a attempt 1: metadata", "[d1] a attempt 1: product changes", "initial"]
    assert not (root / ".specops/worktrees/d1+b").exists()  # removed; the branch stays
    # The user's checkout is untouched: same branch, same commit, clean.
    assert (repo.active_branch.name, repo.head.commit.hexsha) == ("main", main_before)
    assert not repo.is_dirty()
    assert all(p.startswith("phases/") for p in repo.untracked_files)  # the state, not the work
    assert (worktree / "src/d.txt").read_text() == "d\n" and not (root / "src/d.txt").exists()
    assert state.get_step("b").base_commit == state.get_step("a").commits["metadata"]


def test_steps_run_one_after_another_in_one_process_leave_no_git_process_running(
        tmp_path: Path, calls: Path) -> None:
    import psutil

    root, _ = git_harness(tmp_path)
    store = new(root)
    from specops_dag import process

    me = psutil.Process()
    before = {c.pid for c in me.children(recursive=True)}
    assert run_all(store) == ["completed"] * 4
    reaper = process.REAPER_OF_PROCESS.proc.pid  # the process's one reaper stays while it lives
    assert [" ".join(c.cmdline()) for c in me.children(recursive=True)
            if c.pid not in before | {reaper}] == []


def test_every_git_command_of_a_run_starts_through_the_runner(
        tmp_path: Path, calls: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag import process

    root, _ = git_harness(tmp_path)
    store = new(root)
    started, runner = [], []
    popen, spawn = subprocess.Popen.__init__, process._spawn

    def seen(self, args, *rest, **kwargs):
        started.append(list(args))
        popen(self, args, *rest, **kwargs)

    def through_runner(argv, *rest, **kwargs):
        runner.append(list(argv))
        return spawn(argv, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", seen)
    monkeypatch.setattr(process, "_spawn", through_runner)
    assert run_all(store) == ["completed"] * 4
    gits = [argv for argv in started if argv[0] == "git"]
    assert len(gits) > 40  # four steps: status, add, write-tree, commit-tree, merges ...
    assert [argv for argv in gits if argv not in runner] == []


def test_git_that_fails_or_has_no_folder_is_a_git_error_naming_the_command_and_gits_reason(
        tmp_path: Path) -> None:
    from specops_dag import gitflow

    with pytest.raises(gitflow.GitError) as info:
        gitflow.product_changes(tmp_path / "gone")
    assert info.value.message == (f"cannot run `git status` in {tmp_path / 'gone'}: that "
                                  "folder does not exist")
    with pytest.raises(gitflow.GitError) as info:
        gitflow.product_changes(tmp_path)
    assert info.value.message == (
        "`git status --porcelain=v1 -z --no-renames --untracked-files=all -- . :(exclude)phases "
        f":(exclude)docs/phase` in {tmp_path} exited 128: fatal: not a git repository (or any "
        "of the parent directories): .git")


def test_a_path_that_is_not_utf8_is_committed_as_it_is_named(tmp_path: Path) -> None:
    from specops_dag import gitflow

    repo = git.Repo.init(tmp_path, initial_branch="main")
    (tmp_path / "base.txt").write_text("base")
    repo.index.add(["base.txt"])
    repo.index.commit("base", author=git.Actor("t", "t@example.com"))
    name = b"caf\xe9.txt"  # Latin-1, not UTF-8
    with open(os.path.join(os.fsencode(tmp_path), name), "wb") as fh:
        fh.write(b"x")
    assert gitflow.product_changes(tmp_path) == [os.fsdecode(name)]
    sha = gitflow.commit_product(tmp_path, "d1", "a", 1)
    listed = subprocess.run(["git", "ls-tree", "-z", "--name-only", sha], cwd=tmp_path,
                            capture_output=True, check=True).stdout
    assert listed.split(b"\0") == [b"base.txt", name, b""]
    assert gitflow.product_changes(tmp_path) == []


def test_specops_commits_start_no_git_maintenance_so_no_gc_runs_during_or_after_a_step(
        tmp_path: Path, calls: Path) -> None:
    import hashlib

    root, _ = git_harness(tmp_path)
    repo = git.Repo(root)
    # `gc.auto=1`: git's auto maintenance, which `git commit` starts, would pack these three
    # loose objects (it samples objects/17/), here at once, by default detached from the step
    repo.git.config("gc.auto", "1")
    repo.git.config("gc.autoDetach", "false")
    seeded, i = 0, 0
    while seeded < 3:
        data, i = f"loose {i}\n", i + 1
        if hashlib.sha1(f"blob {len(data)}\0{data}".encode()).hexdigest().startswith("17"):
            blob = tmp_path / "loose.txt"
            blob.write_text(data)
            repo.git.hash_object("-w", str(blob))
            seeded += 1
    store = new(root)
    assert run_all(store) == ["completed"] * 4
    assert len(store.read("d1").get_step("d").commits) == 2
    assert "packs: 0" in repo.git.count_objects("-v").splitlines()


def test_a_metadata_commit_holds_the_delivery_files_and_its_own_node_folder_only(
        tmp_path: Path, calls: Path) -> None:
    root, _ = git_harness(tmp_path)
    repo = git.Repo(root)
    store = new(root)
    assert run_step(store, "d1", "a").status == "completed"
    # a file of `a`'s folder changed after `a` completed (by hand) is not `b`'s to commit
    (root / "phases/d1/a/out.txt").write_text("edited by hand")
    (root / "phases/d1/a/notes.md").write_text("a note\n")
    assert run_step(store, "d1", "b").status == "completed"
    b = store.read("d1").get_step("b")
    assert commit_paths(repo, b.commits["metadata"]) == [
        "docs/phase/d1/b.md", "phases/d1/b/evidence.json", "phases/d1/b/out.txt",
        "phases/d1/index.json"]


def test_metadata_copies_are_older_than_the_index_so_git_never_hashes_the_state_file_again(
        tmp_path: Path, calls: Path) -> None:
    root, _ = git_harness(tmp_path)
    store = new(root)
    assert run_step(store, "d1", "a").status == "completed"
    worktree = root / ".specops/worktrees/d1"
    # git finds each copy older than its index: none is "racily clean" (changed in the second
    # the index was written), whose content git hashes again at every later write of the
    # index — the whole state file, several times a step
    listed = subprocess.run(["git", "ls-files", "--debug", "phases/d1/index.json",
                             "phases/d1/a"], cwd=worktree, capture_output=True, text=True,
                            check=True).stdout
    written = (root / ".git/worktrees/d1/index").stat().st_mtime_ns // 10**9
    mtimes = [int(s) for s in re.findall(r"^  mtime: (\d+):", listed, re.M)]
    assert len(mtimes) == 3 and max(mtimes) < written, listed
    # the state changed after its commit (the commit's SHA): copied again, 2 s older than it
    assert sync_tree(root / "phases/d1", worktree / "phases/d1",
                     skip=frozenset("bcd")) == ["index.json"]
    copy, source = (worktree / "phases/d1/index.json").stat(), (root / "phases/d1/index.json").stat()
    assert copy.st_mtime_ns == source.st_mtime_ns - 2_000_000_000
    assert sync_tree(root / "phases/d1", worktree / "phases/d1", skip=frozenset("bcd")) == []


def test_a_dirty_worktree_blocks_the_next_step_as_a_write_conflict(tmp_path: Path,
                                                                   calls: Path) -> None:
    root, _ = git_harness(tmp_path)
    store = new(root)
    assert [run_step(store, "d1", n).status for n in "abc"] == ["completed"] * 3
    (root / ".specops/worktrees/d1/src/stray.cs").write_text("class Stray {}\n")
    outcome = run_step(store, "d1", "d")
    worktree = (root / ".specops/worktrees/d1").resolve()
    assert (outcome.status, outcome.message) == (
        "blocked", f"write conflict: the worktree {worktree} of `d1` has uncommitted changes "
                   "(src/stray.cs); commit or discard them yourself, then `specops resume d1 d`")
    assert (root / ".specops/worktrees/d1/src/stray.cs").exists()  # never a silent reset
    assert store.read("d1").get_step("d").status == "blocked"


@pytest.mark.e2e
def test_reopen_reruns_only_the_reopened_slice_and_keeps_revisions(
        tmp_path: Path, calls: Path) -> None:
    root, _ = git_harness(tmp_path)
    store = new(root)
    run_all(store)
    first_b = store.read("d1").get_step("b")
    assert ops.reopen(store, "d1", "b", "the spec changed") == ["b", "d"]
    calls.write_text("")
    assert run_all(store) == ["reused", "completed", "reused", "completed"]
    assert calls.read_text().split() == ["b", "d"]
    b = store.read("d1").get_step("b")
    assert [(r.reason, r.commits["product"]) for r in b.revisions] == [
        ("the spec changed", first_b.commits["product"])]
    assert b.revisions[0].handoff == first_b.handoff
    assert b.commits["product"] != first_b.commits["product"]
    history = [e.event for e in store.read("d1").history]
    assert history.count("reopened") == 1


@pytest.mark.e2e
def test_a_hand_edited_handoff_shows_as_drift_in_status_and_in_dagster(
        tmp_path: Path, calls: Path, clean_env: dict[str, str]) -> None:
    root, _ = git_harness(tmp_path)
    env = {**clean_env, "CALLS": str(calls)}
    assert specops(env, root, "new", "diamond", "d1", "--request", "x").returncode == 0
    assert job_execute(env, root, "diamond_job", "d1").returncode == 0
    (root / "phases/d1/a/out.txt").write_text("edited by hand")
    status = json.loads(specops(env, root, "status", "d1", "--json").stdout)
    assert status["drift"] == [
        "b: input `a/result` phases/d1/a/out.txt changed since it was consumed",
        "c: input `a/result` phases/d1/a/out.txt changed since it was consumed"]
    assert job_execute(env, root, "diamond_job", "d1").returncode == 0
    with dg.DagsterInstance.get() as instance:
        key = dg.AssetCheckKey(dg.AssetKey(["diamond", "b"]), "handoff_current")
        latest = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)[0]
        evaluation = latest.event.dagster_event.event_specific_data
        assert evaluation.passed is False
        assert evaluation.metadata["drifted"].value == [
            "input `a/result` phases/d1/a/out.txt changed since it was consumed"]


@pytest.mark.e2e
def test_reopen_marks_the_invalidated_assets_in_dagster(tmp_path: Path, calls: Path,
                                                        clean_env: dict[str, str]) -> None:
    root, _ = git_harness(tmp_path)
    env = {**clean_env, "CALLS": str(calls)}
    assert specops(env, root, "new", "diamond", "d1", "--request", "x").returncode == 0
    assert job_execute(env, root, "diamond_job", "d1").returncode == 0
    result = specops(env, root, "reopen", "d1", "c", "--reason", "review found a bug")
    assert result.stdout == "reopened c, d of d1; re-run with `specops run d1`\n"
    with dg.DagsterInstance.get() as instance:
        for node, reopened in (("a", False), ("b", False), ("c", True), ("d", True)):
            key = dg.AssetCheckKey(dg.AssetKey(["diamond", node]), "handoff_current")
            latest = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)[0]
            evaluation = latest.event.dagster_event.event_specific_data
            assert (not evaluation.passed) is reopened, node
            if reopened:
                assert latest.run_id == "" or latest.event.run_id == ""
                assert evaluation.partition == "d1"
                assert evaluation.metadata["reason"].value == "review found a bug"
    calls.write_text("")
    assert specops(env, root, "run", "d1", "--executor", "in_process").returncode == 0
    assert calls.read_text().split() == ["c", "d"]
    # reopened again after its re-run: the check fails again, with the new reason
    result = specops(env, root, "reopen", "d1", "c", "--reason", "a second look")
    assert (result.returncode, result.stderr) == (0, "")
    with dg.DagsterInstance.get() as instance:
        key = dg.AssetCheckKey(dg.AssetKey(["diamond", "c"]), "handoff_current")
        latest = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)[0]
        assert latest.event.dagster_event.event_specific_data.passed is False
        assert latest.event.dagster_event.event_specific_data.metadata["reason"].value == \
            "a second look"


@pytest.mark.e2e
def test_push_waits_for_external_write_then_pushes_the_branch_without_force(
        tmp_path: Path, calls: Path, clean_env: dict[str, str]) -> None:
    root, origin = git_harness(tmp_path)
    env = {**clean_env, "CALLS": str(calls)}
    assert specops(env, root, "new", "diamond", "d1", "--request", "x").returncode == 0
    first = specops(env, root, "run", "d1", "--push", "--executor", "in_process")
    assert first.returncode == 3
    assert first.stderr == ("error: not pushed: awaiting approval: external-write; approve with "
                            "`specops approve d1 external-write --note ...`, then `specops run "
                            "d1 --push`\n")
    assert "feat-d1" not in [h.name for h in git.Repo(origin).heads]
    assert specops(env, root, "approve", "d1", "external-write", "--note", "ok").returncode == 0
    second = specops(env, root, "run", "d1", "--push", "--executor", "in_process")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[-1].startswith("pushed feat-d1 to origin (")
    bare = git.Repo(origin)
    assert bare.heads["feat-d1"].commit.hexsha == git.Repo(root).heads["feat-d1"].commit.hexsha
    assert [e.event for e in Store(root).read("d1").history][-1] == "pushed"


def test_a_phase_that_expects_a_product_change_fails_an_attempt_that_changed_nothing(
        tmp_path: Path, calls: Path) -> None:
    root, _ = git_harness(tmp_path)
    phase = root / "workflow_defs/phases/p-a.yaml"
    text = phase.read_text().replace("pathlib.Path('src', n + '.txt').write_text(n + chr(10)); ",
                                     "")
    phase.write_text(text.replace("  executor:", "  expects_product_change: true\n  executor:"))
    git.Repo(root).git.commit("-am", "phase a changes nothing")
    store = new(root)
    outcome = run_step(store, "d1", "a")
    base = store.read("d1").get_step("a").base_commit
    assert (outcome.status, outcome.message) == (
        "failed", "attempt 1/3 failed: exit 0 but the product did not change: the phase expects "
                  f"a product change and nothing outside phases/ and docs/phase/ changed since "
                  f"{base[:12]}")


def test_a_plain_folder_target_runs_in_place_without_commits(diamond_root: Path) -> None:
    os.environ.setdefault("CALLS", "/dev/null")
    store = Store(diamond_root)
    ops.new_delivery(store, load_catalog(definition_roots(diamond_root),
                                         display_base=diamond_root), "diamond", "d1", "x")
    assert run_step(store, "d1", "a").status == "completed"
    state = store.read("d1")
    assert (state.worktree, state.get_step("a").commits) == (None, {})


def test_an_empty_git_folder_a_killed_sandbox_left_in_a_plain_target_is_no_repository(
        diamond_root: Path) -> None:
    os.environ.setdefault("CALLS", "/dev/null")
    store = Store(diamond_root)
    ops.new_delivery(store, load_catalog(definition_roots(diamond_root),
                                         display_base=diamond_root), "diamond", "d1", "x")
    for leftover in (".git", ".codex", ".agents", ".aws"):  # as codex's bwrap mounts them
        (diamond_root / leftover).mkdir()
    assert [run_step(store, "d1", n).status for n in "ab"] == ["completed", "completed"]
    state = store.read("d1")
    assert (state.worktree, state.get_step("b").commits) == (None, {})


def test_one_check_says_a_folder_is_a_git_repository_and_an_empty_git_folder_is_none(
        tmp_path: Path) -> None:
    plain, repo = tmp_path / "plain", tmp_path / "repo"
    (plain / ".git").mkdir(parents=True)  # as codex's sandbox leaves it in a plain folder
    git.Repo.init(repo, initial_branch="main").index.commit("initial", author=WHO, committer=WHO)
    worktree = tmp_path / "wt"
    git.Repo(repo).git.worktree("add", str(worktree), "-b", "other")
    assert [is_repository(f) for f in (plain, repo, worktree, tmp_path / "nowhere")] == [
        False, True, True, False]
    assert [is_git_target(f) for f in (plain, repo, worktree)] == [False, True, True]
    keep_harness_clean(plain)  # a plain harness root: no git exclude file is written
    assert list((plain / ".git").iterdir()) == []


def test_the_target_repositorys_git_hooks_never_run_for_specops_commits(
        tmp_path: Path, calls: Path) -> None:
    root, _ = git_harness(tmp_path)
    ran = tmp_path / "hook-ran"
    for name in ("pre-commit", "commit-msg", "post-commit"):
        hook = root / ".git/hooks" / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {ran}\nexit 1\n")
        hook.chmod(0o755)
    store = new(root)
    outcome = run_step(store, "d1", "a")
    assert outcome.status == "completed", outcome.message
    assert set(outcome.commits) == {"product", "metadata"} and all(outcome.commits.values())
    assert not ran.exists()


def test_product_changes_lists_staged_unstaged_deleted_untracked_and_committed_paths_but_no_metadata(
        tmp_path: Path) -> None:
    from specops_dag import gitflow

    repo = git.Repo.init(tmp_path, initial_branch="main")
    for rel in ("kept.txt", "moved.txt", "gone.txt", "edited.txt", "phases/d1/index.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    repo.index.add(["kept.txt", "moved.txt", "gone.txt", "edited.txt", "phases/d1/index.json"])
    base = repo.index.commit("base", author=git.Actor("t", "t@example.com")).hexsha
    assert gitflow.product_changes(tmp_path) == []
    (tmp_path / "edited.txt").write_text("changed")
    (tmp_path / "gone.txt").unlink()
    repo.git.mv("moved.txt", "renamed.txt")
    (tmp_path / "new dir/ü é.txt").parent.mkdir()
    (tmp_path / "new dir/ü é.txt").write_text("x")
    (tmp_path / "phases/d1/index.json").write_text("{}")
    (tmp_path / "docs/phase/d1").mkdir(parents=True)
    (tmp_path / "docs/phase/d1/a.md").write_text("# a")
    assert gitflow.product_changes(tmp_path) == [
        "edited.txt", "gone.txt", "moved.txt", "new dir/ü é.txt", "renamed.txt"]
    repo.git.add("-A")
    repo.index.commit("next", author=git.Actor("t", "t@example.com"))
    assert gitflow.product_changes(tmp_path) == []
    assert gitflow.product_changes(tmp_path, since=base) == [
        "edited.txt", "gone.txt", "moved.txt", "new dir/ü é.txt", "renamed.txt"]


def test_a_worktree_git_cannot_create_is_a_write_conflict_naming_the_branch_and_gits_reason(
        tmp_path: Path) -> None:
    root, _ = git_harness(tmp_path)
    git.Repo(root).git.checkout("-b", "feat-d1")  # the user works on the delivery's branch
    with pytest.raises(WriteConflict) as info:
        ensure_worktree(root, root, "d1")
    path = root / ".specops/worktrees/d1"
    assert str(info.value) == (
        f"write conflict: cannot create the worktree of `d1` at {path} on branch feat-d1: "
        f"fatal: 'feat-d1' is already checked out at '{root}'")
    assert not path.exists()


def _two_branches(tmp_path: Path) -> tuple[Path, str]:
    """A repository on `main` (README.md, keep.txt) and a branch `side` that adds new.txt,
    changes keep.txt and deletes README.md; returns (the repository, side's commit)."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "README.md").write_text("# product\n")
    (root / "keep.txt").write_text("one\n")
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    repo.git.commit("-qm", "initial", env={**os.environ, **IDENTITY})
    repo.git.checkout("-qb", "side")
    (root / "new.txt").write_text("new\n")
    (root / "keep.txt").write_text("two\n")
    repo.git.rm("-q", "README.md")
    repo.git.add(A=True)
    repo.git.commit("-qm", "side", env={**os.environ, **IDENTITY})
    side = repo.head.commit.hexsha
    repo.git.checkout("-q", "main")
    return root, side


@pytest.mark.parametrize("index_written", [False, True])
def test_a_merge_a_kill_cut_short_is_made_again_from_the_files_it_had_written(
        tmp_path: Path, index_written: bool) -> None:
    from specops_dag import gitflow

    root, side = _two_branches(tmp_path)
    (root / "new.txt").write_text("new\n")  # what the killed `git merge` had written
    (root / "keep.txt").write_text("two\n")
    (root / "README.md").unlink()
    if index_written:  # killed after it had written the index, before its commit
        git.Repo(root).git.add(A=True)
    merged = gitflow.merge(root, side, "side", "merge side")
    repo = git.Repo(root)
    assert merged == repo.head.commit.hexsha and len(repo.head.commit.parents) == 2
    assert sorted(b.path for b in repo.head.commit.tree.traverse()) == ["keep.txt", "new.txt"]
    assert repo.git.status("--porcelain") == ""


def test_a_persons_edit_in_the_way_of_a_merge_is_kept_and_named(tmp_path: Path) -> None:
    from specops_dag import gitflow
    from specops_dag.gitflow import GitError

    root, side = _two_branches(tmp_path)
    (root / "new.txt").write_text("mine\n")  # not what the merge writes: a person's file
    with pytest.raises(GitError) as err:
        gitflow.merge(root, side, "side", "merge side")
    assert err.value.message.startswith(f"cannot merge side into {root} (`git merge` exited 2: "
                                        "error: The following untracked working tree files "
                                        "would be overwritten by merge:\n\tnew.txt")
    assert (root / "new.txt").read_text() == "mine\n"


def test_a_lock_file_a_killed_git_left_is_removed_and_the_command_runs(tmp_path: Path) -> None:
    from specops_dag.gitflow import git_out

    repo = tmp_path / "repo"
    git.Repo.init(repo)
    (repo / "a.txt").write_text("a\n")
    lock = repo / ".git/index.lock"
    lock.write_text("")  # what a git SIGKILLed in the middle of `git add` leaves
    git_out(repo, "add", "-A")
    assert not lock.exists()
    assert git_out(repo, "diff", "--cached", "--name-only") == "a.txt\n"


def test_a_lock_file_a_running_process_holds_is_left_and_the_error_names_it(
        tmp_path: Path) -> None:
    from specops_dag.gitflow import GitError, git_out

    repo = tmp_path / "repo"
    git.Repo.init(repo)
    (repo / "a.txt").write_text("a\n")
    lock = repo / ".git/index.lock"
    with lock.open("w"), pytest.raises(GitError) as raised:  # a git still at work holds it
        git_out(repo, "add", "-A")
    assert lock.exists()
    assert f"Unable to create '{lock.resolve()}': File exists." in raised.value.message
