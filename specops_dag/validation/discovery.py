"""What a repository holds for the `full` validation, under a layout (issue 16): its projects,
the solution or projects to build, and C# sources no project compiles. Reading the tree only:
no `dotnet` runs here (evaluation, restore and tests are `dotnet`'s)."""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from specops_dag.workflow.model import ValidationConfig

SKIP_DIRS = {".git", "bin", "obj", "node_modules", ".specops", ".dagster_home", "TestResults"}
SOLUTION_FOLDER = "{2150E333-8FDC-42A3-9474-1A3956D46DE8}"
SLN_PROJECT = re.compile(r'^Project\("(?P<type>\{[^}]+\})"\)\s*=\s*"[^"]*",\s*"(?P<path>[^"]+)"',
                         re.MULTILINE)
WHERE = "workflow_defs/validation.yaml (or the phase)"


@dataclass
class Repo:
    root: Path
    targets: list[Path] = field(default_factory=list)  # solutions/projects named to build
    projects: list[Path] = field(default_factory=list)  # every validated .csproj
    in_solution: set[Path] = field(default_factory=set)
    tests: list[Path] = field(default_factory=list)
    problem: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    analyzers: set[Path] = field(default_factory=set)


def excluded(rel: str, globs: list[str]) -> bool:
    """`validation.exclude`: fnmatch globs (`*` crosses `/`); a folder glob covers its tree."""
    return any(fnmatch.fnmatchcase(rel, g) or rel.startswith(g.rstrip("/") + "/")
               for g in globs)


def discover(root: Path, config: ValidationConfig | None = None) -> Repo:
    """Projects (with and without the solution), build targets, and orphan C# sources."""
    config = config or ValidationConfig()
    repo = Repo(root)
    sources: list[Path] = []
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                         and (here / d).relative_to(root).as_posix() != "tests/fixtures"
                         and not excluded((here / d).relative_to(root).as_posix(),
                                          config.exclude))
        keep = [here / f for f in sorted(files)
                if not excluded((here / f).relative_to(root).as_posix(), config.exclude)]
        found += [p for p in keep if p.name.endswith(".csproj")]
        sources += [p for p in keep if p.name.endswith(".cs")]
    dirs = {p.parent for p in found}
    orphans = [s for s in sources if not any(d in s.parents for d in dirs)]
    if orphans:
        shown = ", ".join(o.relative_to(root).as_posix() for o in orphans[:5])
        repo.problem = (f"orphan C# source(s) outside every project: {shown}; add them to a "
                        f"project or remove them, or exclude them with `validation.exclude: "
                        f"[{orphans[0].relative_to(root).as_posix()}]` in {WHERE}")
        return repo
    repo.problem = choose_targets(repo, config, found)
    return repo


def choose_targets(repo: Repo, config: ValidationConfig, found: list[Path]) -> str | None:
    root = repo.root
    if config.build:
        for i, rel in enumerate(config.build):
            if not (root / rel).is_file():
                return (f"validation.build[{i}]: `{rel}` is not in the repository; fix the path "
                        f"in {WHERE}")
        repo.targets = [root / rel for rel in config.build]
    else:
        solutions = sorted([*root.glob("*.sln"), *root.glob("*.slnx")])
        if len(solutions) > 1:
            names = ", ".join(s.name for s in solutions)
            return (f"more than one solution at the repository root ({names}); choose what to "
                    f"build with `validation.build: [{solutions[0].name}]` in {WHERE}, or keep "
                    "one")
        repo.targets = solutions
    for target in repo.targets:
        if target.suffix.lower() in (".sln", ".slnx"):
            listed = solution_projects(target)
            if isinstance(listed, str):
                return listed
            repo.in_solution.update((target.parent / p.replace("\\", "/")).resolve()
                                    for p in listed if p.endswith(".csproj"))
        else:
            repo.in_solution.add(target.resolve())
    # A named choice validates what it names (references follow at evaluation); otherwise
    # every project, those outside the solution built on their own.
    repo.projects = ([p for p in found if p.resolve() in repo.in_solution] if config.build
                     else found)
    if config.build and not repo.projects:
        repo.projects = [p.resolve() for p in repo.in_solution if p.is_file()]
    return None


def solution_projects(solution: Path) -> list[str] | str:
    """The project paths a solution lists, relative to its folder: a `.sln`'s `Project(...)`
    lines (solution folders skipped) or a `.slnx`'s `<Project Path=…>` elements (the XML format
    SDK 9.0.200+ writes, `dotnet new sln`'s default from SDK 10). A string: why it is unreadable."""
    text = solution.read_text(encoding="utf-8-sig", errors="replace")
    if solution.suffix.lower() == ".sln":
        return [m["path"] for m in SLN_PROJECT.finditer(text)
                if m["type"].upper() != SOLUTION_FOLDER]
    import xml.etree.ElementTree as ET

    try:
        tree = ET.fromstring(text)
    except ET.ParseError as err:
        return (f"{solution.name} is not valid XML ({err}); fix the solution file or name the "
                f"projects to build with `validation.build` in {WHERE}")
    return [p.get("Path", "") for p in tree.iter("Project")]
