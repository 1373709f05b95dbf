"""The .NET side: the `dotnet_fixtures/` repositories, the stand-in `dotnet` that answers for
them, and a harness of the built-in workflows on the `all-pass` fixture."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import git

from .git import WHO
from .harness import REPO, VENV_BIN

FIXTURES = REPO / "dotnet_fixtures"
STANDIN = REPO / "tests" / "dotnet_standin"


def copy_fixture(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    return root


def standin_env(answers: str, log: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{STANDIN}:{os.environ['PATH']}",
           "DOTNET_STANDIN_ANSWERS": str(STANDIN / "answers" / f"{answers}.yaml")}
    if log is not None:
        env["DOTNET_STANDIN_LOG"] = str(log)
    return env


AGENTS = ("# AGENTS.md\n\nA small .NET 8 calculator. Keep changes small, TargetFramework net8.0,"
          " tests under tests/.\n")


@dataclass(frozen=True)
class Harness:
    root: Path
    env: dict[str, str]
    log: Path

    def specops(self, *args: str, timeout: float = 200) -> subprocess.CompletedProcess:
        return subprocess.run([str(VENV_BIN / "specops"), "--root", str(self.root), *args],
                              env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def ok(self, *args: str) -> str:
        result = self.specops(*args)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def run(self, delivery: str, expected: int) -> str:
        """`specops run`; its own deadline stops the Dagster run and every agent under it."""
        result = self.specops("run", delivery, "--executor", "in_process", "--timeout", "150")
        assert result.returncode == expected, result.stdout + result.stderr
        return result.stdout

    def status(self, delivery: str) -> dict:
        return json.loads(self.ok("status", delivery, "--json"))

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


def assert_clean_git(h: Harness, delivery: str) -> list[str]:
    """Nothing left in the user's checkout or the worktree; no build output in any commit.
    Returns the subjects of feat-<d>, newest first."""
    repo = git.Repo(h.root)
    assert repo.git.status("--porcelain", "--untracked-files=all") == ""
    assert repo.active_branch.name == "main"
    assert repo.git.log("main", "--format=%s").splitlines() == ["fixture"]
    worktree = git.Repo(h.root / ".specops/worktrees" / delivery)
    assert worktree.git.status("--porcelain", "--untracked-files=all") == ""
    committed = repo.git.log("--all", "--name-only", "--format=").split()
    assert [p for p in committed if {"bin", "obj", "TestResults"} & set(p.split("/"))] == []
    return repo.git.log(f"feat-{delivery}", "--format=%s").splitlines()


def path_without_dotnet(tmp_path: Path, path: str | None = None) -> str:
    """`path` (default: this PATH) with no `dotnet` on it: each folder that holds one is replaced
    by a folder of links to everything else in it, so git, node and the rest are still found."""
    folders = []
    for i, folder in enumerate((path if path is not None else os.environ["PATH"]).split(":")):
        if not (Path(folder) / "dotnet").exists():
            folders.append(folder)
            continue
        twin = tmp_path / f"path-without-dotnet-{i}"
        twin.mkdir(parents=True, exist_ok=True)
        for entry in Path(folder).iterdir():
            if entry.name != "dotnet" and not (twin / entry.name).exists():
                (twin / entry.name).symlink_to(entry)
        folders.append(str(twin))
    return ":".join(folders)


def git_fixture(tmp_path: Path, fixture: str = "all-pass", agents: str = AGENTS) -> Path:
    """A `dotnet_fixtures/` repository as a harness root: a git repository on `main` with one
    commit and an AGENTS.md, no `.gitignore` (keeping bin/ and obj/ out is the product's job)."""
    root = tmp_path / "harness"
    shutil.copytree(FIXTURES / fixture, root)
    (root / "AGENTS.md").write_text(agents, encoding="utf-8")
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("fixture", author=WHO, committer=WHO)
    return root
