from __future__ import annotations

from pathlib import Path

import git
import pytest

from specops_dag.validation.docs_only import docs_only_change

from ..support.harness import write_tree


def repo_with_base(tmp_path: Path) -> tuple[Path, str]:
    root = write_tree(tmp_path / "repo", {
        "AGENTS.md": "# Agents\n", "docs/guide.md": "# Guide\n", "src/App/App.cs": "class A {}\n",
        "src/App/App.csproj": "<Project Sdk=\"Microsoft.NET.Sdk\" />\n", "README.txt": "x\n",
        ".gitignore": ".specops/\n"})
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("base", author=git.Actor("t", "t@example.com"),
                      committer=git.Actor("t", "t@example.com"))
    return root, repo.head.commit.hexsha


ALLOWED = [
    pytest.param({"docs/guide.md": "# Guide v2\n"}, "documentation only: docs/guide.md",
                 id="edit-doc"),
    pytest.param({"docs/new/topic.md": "# New\n"}, "documentation only: docs/new/topic.md",
                 id="untracked-doc"),
    pytest.param({"AGENTS.md": "# Agents v2\n"}, "documentation only: AGENTS.md",
                 id="agents-md"),
    pytest.param({"docs/phase/d1/develop.md": "# Step\n", "phases/d1/index.json": "{}\n",
                  "phases/d1/develop/step0-output.json": "{}\n"},
                 "documentation only: docs/phase/d1/develop.md", id="doc-plus-bookkeeping"),
    pytest.param({"phases/d1/design/design/plan.md": "# Plan\n"},
                 "documentation only: phases/d1/design/design/plan.md",
                 id="delivery-handoff-doc"),
    pytest.param({"docs/guide.md": "# Guide\n", ".specops/codex-home/x.json": "{}"},
                 "the change since the base commit is empty", id="ignored-files-only"),
]

FALLBACK = [
    pytest.param({}, "the change since the base commit is empty", id="empty"),
    pytest.param({"phases/d1/index.json": "{}\n", "phases/d1/develop/step0-output.json": "{}"},
                 "bookkeeping only, no documentation change", id="bookkeeping-only"),
    pytest.param({"docs/guide.md": "# v2\n", "src/App/New.cs": "class N {}\n"},
                 "not documentation: src/App/New.cs", id="untracked-cs"),
    pytest.param({"docs/guide.md": "# v2\n", "notes.txt": "x\n"},
                 "not documentation: notes.txt", id="untracked-other"),
    pytest.param({"docs/guide.md": "# v2\n", "src/App/App.cs": "class B {}\n"},
                 "not documentation: src/App/App.cs", id="edited-cs"),
    pytest.param({"docs/data.json": "{}\n"}, "not documentation: docs/data.json",
                 id="docs-non-md"),
    pytest.param({"phases/other/x.md": "# x\n"}, "not documentation: phases/other/x.md",
                 id="another-delivery"),
    pytest.param({"sub/AGENTS.md": "# not root\n"}, "not documentation: sub/AGENTS.md",
                 id="nested-agents"),
]


@pytest.mark.parametrize(("files", "reason"), ALLOWED)
def test_a_documentation_change_may_skip_the_build(tmp_path: Path, files: dict,
                                                   reason: str) -> None:
    root, base = repo_with_base(tmp_path)
    write_tree(root, files)
    decision = docs_only_change(root, base, "d1")
    assert (decision.docs_only, decision.reason) == (not reason.startswith("the change"), reason)


@pytest.mark.parametrize(("files", "reason"), FALLBACK)
def test_anything_but_documentation_falls_back_to_full_validation(
        tmp_path: Path, files: dict, reason: str) -> None:
    root, base = repo_with_base(tmp_path)
    write_tree(root, files)
    decision = docs_only_change(root, base, "d1")
    assert (decision.docs_only, decision.reason) == (False, reason)


def test_a_rename_checks_both_paths(tmp_path: Path) -> None:
    root, base = repo_with_base(tmp_path)
    repo = git.Repo(root)
    repo.git.mv("src/App/App.cs", "docs/App.md")
    decision = docs_only_change(root, base, "d1")
    assert (decision.docs_only, decision.reason) == (False, "not documentation: src/App/App.cs")
    repo.git.mv("docs/guide.md", "docs/renamed.md")
    repo.git.mv("docs/App.md", "src/App/App.cs")
    decision = docs_only_change(root, base, "d1")
    assert (decision.docs_only, decision.reason) == (
        True, "documentation only: docs/guide.md, docs/renamed.md")


def test_a_path_through_a_symlink_falls_back(tmp_path: Path) -> None:
    root, base = repo_with_base(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (root / "docs" / "linked").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "x.md").write_text("# x\n")
    decision = docs_only_change(root, base, "d1")
    assert (decision.docs_only, decision.reason) == (
        False, "changed through a symlink: docs/linked")
    (root / "docs" / "linked").unlink()
    (root / "docs" / "alias.md").symlink_to(root / "docs" / "guide.md")
    decision = docs_only_change(root, base, "d1")
    assert (decision.docs_only, decision.reason) == (
        False, "changed through a symlink: docs/alias.md")


def test_a_git_failure_falls_back(tmp_path: Path) -> None:
    root, _ = repo_with_base(tmp_path)
    decision = docs_only_change(root, "0" * 40, "d1")
    assert (decision.docs_only, decision.reason) == (False, (
        f"git could not list the change (`git diff --name-only -z --no-renames {'0' * 40} --` "
        f"in {root} exited 128: fatal: bad object {'0' * 40})"))
    plain = tmp_path / "plain"
    plain.mkdir()
    assert docs_only_change(plain, "HEAD", "d1").reason == (
        "git could not list the change (`git ls-files -z --others --exclude-standard` in "
        f"{plain} exited 128: fatal: not a git repository (or any of the parent directories): "
        ".git)")
    assert docs_only_change(root, None, "d1").reason == "no base commit was recorded for the step"
