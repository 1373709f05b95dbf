"""What changed in a working tree since a base commit, as the test-integrity guard reads it: the
changed paths (committed, staged, unstaged or untracked), the base and current text of the
changed C# and run configuration files, and the current text of every run configuration file.
Three git calls through `run_process`, whatever the number of files; it never writes.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from specops_dag.gitflow import BUILD_OUTPUTS, GitError
from specops_dag.process import run_process

DEADLINE_S = 120
# The files `dotnet test` reads a test case filter from without an argument of ours.
CONFIGS = ("*.runsettings", "*.props", "*.csproj", "*.targets")
SCANNED = ("*.cs", *CONFIGS)
SKIPPED_DIRS = frozenset(d.rstrip("/") for d in BUILD_OUTPUTS) | {".git"}
STATUS = {"A": "A", "D": "D", "M": "M", "T": "M", "U": "M"}


@dataclass(frozen=True)
class Changeset:
    """`changed`: each changed C# or configuration file -> "A", "M", "D" or "?" (untracked),
    build outputs left out; `base`: the base text of the changed ones the base has; `now`: the
    text on disk of the changed C# files that exist; `configs`: the text on disk of every
    configuration file. Paths are relative to the tree, posix."""

    changed: dict[str, str]
    base: dict[str, str]
    now: dict[str, str]
    configs: dict[str, str]


def read_changeset(tree: Path, base_commit: str) -> Changeset:
    """The changeset of the files on disk under `tree` against `base_commit`; a `GitError` when
    git cannot compare them (not a repository, an unknown commit)."""
    git = _runner(tree, base_commit)
    changed = {p: STATUS.get(s[:1], "M") for s, p in _pairs(git(
        "diff", "--name-status", "--no-renames", "--relative", "-z", base_commit, "--", *SCANNED))}
    listed = _pairs(git("ls-files", "-z", "-t", "--cached", "--others", "--exclude-standard",
                        "--", *SCANNED), tagged=True)
    changed |= {p: "?" for tag, p in listed if tag == "?"}
    changed = {p: s for p, s in changed.items() if _kept(p)}
    configs = {p: _read(tree / p) for _, p in listed
               if not _is_source(p) and _kept(p) and (tree / p).is_file()}
    wanted = [p for p, s in changed.items()
              if s in ("M", "D") and (_is_source(p) or p in configs)]
    now = {p: _read(tree / p) for p, s in changed.items()
           if _is_source(p) and s != "D" and (tree / p).is_file()}
    return Changeset(changed, _base_texts(git, base_commit, wanted), now, configs)


def _pairs(out: str, tagged: bool = False) -> list[tuple[str, str]]:
    """(status, path) from `git diff --name-status -z`, or (tag, path) from `ls-files -t -z`."""
    fields = out.split("\0")
    if tagged:
        return [(f[:1], f[2:]) for f in fields if f]
    return [(fields[i], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]


def _runner(tree: Path, base_commit: str):
    def git(*args: str, stdin: bytes | None = None, out: Path | None = None) -> str:
        result = run_process(["git", *args], cwd=tree, deadline_s=DEADLINE_S,
                             stdin_data=stdin, stdout_path=out)
        if not result.ok:
            why = (f"timed out after {DEADLINE_S} s" if result.exit_code is None
                   else f"exited {result.exit_code}: {result.stderr.strip()}")
            raise GitError(f"test integrity: cannot compare {tree} with base commit "
                           f"`{base_commit}` (`git {args[0]}` {why}); pass a commit of the "
                           "repository the tree belongs to")
        return result.stdout

    return git


def _base_texts(git, base_commit: str, paths: list[str]) -> dict[str, str]:
    """The base text of `paths` that exist there, from one `git cat-file --batch`."""
    if not paths:
        return {}
    with tempfile.TemporaryDirectory(prefix="specops-integrity-") as scratch:
        out = Path(scratch) / "blobs"
        git("cat-file", "--batch", out=out,
            stdin="".join(f"{base_commit}:./{p}\n" for p in paths).encode())
        data = out.read_bytes()
    texts, pos = {}, 0
    for path in paths:
        end = data.index(b"\n", pos)
        header, pos = data[pos:end].split(b" "), end + 1
        if len(header) == 3 and header[2].isdigit():
            size = int(header[2])
            if header[1] == b"blob":
                texts[path] = data[pos:pos + size].decode("utf-8-sig", errors="replace")
            pos += size + 1
    return texts


def _kept(path: str) -> bool:
    return not SKIPPED_DIRS.intersection(path.split("/")[:-1])


def _is_source(path: str) -> bool:
    return path.lower().endswith(".cs")


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8-sig", errors="replace")
