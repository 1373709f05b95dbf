"""The platforms of a target repository that bind skills (`when: {platforms: [...]}`), detected
at `specops new` from its project files: `aspnetcore` for a `Microsoft.NET.Sdk.Web` project,
`ef-core` for an Entity Framework Core package reference. Reads only: a git target is read
at the commit its delivery's worktree starts from, without a checkout.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from specops_dag.errors import UsageError
from specops_dag.gitflow import is_repository

ASPNETCORE, EF_CORE = "aspnetcore", "ef-core"
WEB_SDK = "microsoft.net.sdk.web"
EF_SEGMENT = "entityframeworkcore"  # Microsoft.EntityFrameworkCore.*, Npgsql.EntityFrameworkCore…
PROJECT_SUFFIXES = (".csproj", ".props", ".targets")
# What a plain folder holds besides its sources: build output, tools' and specops' own folders.
SKIPPED_DIRS = {"bin", "obj", "node_modules", "TestResults"}
EXPLICIT = "--platform"  # the origin recorded for a platform given on the command line


def detect_platforms(repo: Path, delivery: str) -> dict[str, str]:
    """{platform: the first project file, relative to `repo`, that shows it}, in platform order.
    A git repository is read at `feat-<delivery>` if that branch exists, else HEAD (where the
    delivery's worktree will start); any other folder as it is on disk."""
    found: dict[str, str] = {}
    for rel, data in sorted(project_files(repo, delivery)):
        for platform in platforms_in(rel, data):
            found.setdefault(platform, rel)
    return {p: found[p] for p in (ASPNETCORE, EF_CORE) if p in found}


def platforms_in(rel: str, data: bytes) -> list[str]:
    """The platforms one MSBuild file shows: a Web SDK (the `Sdk` attribute of `<Project>` or
    `<Import>`, or `<Sdk Name=…>`; any case, with or without a version) in a `.csproj`, an EF
    Core `PackageReference` or `GlobalPackageReference` in any of them. An unreadable file shows
    none: MSBuild would refuse it before anything it names is built."""
    try:
        root = ET.fromstring(data)
    except (ET.ParseError, ValueError):
        return []
    found = []
    for element in root.iter():
        tag = element.tag.rpartition("}")[2].casefold()
        attrs = {k.casefold(): v for k, v in element.attrib.items()}
        sdks = attrs.get("name", "") if tag == "sdk" else attrs.get("sdk", "")
        if rel.endswith(".csproj") and any(s.split("/")[0].strip().casefold() == WEB_SDK
                                           for s in sdks.split(";")):
            found.append(ASPNETCORE)
        if tag in ("packagereference", "globalpackagereference") and any(
                EF_SEGMENT in p.strip().casefold().split(".")
                for p in attrs.get("include", "").split(";")):
            found.append(EF_CORE)
    return found


def project_files(repo: Path, delivery: str) -> Iterator[tuple[str, bytes]]:
    """(path relative to `repo`, bytes) of each MSBuild file that may name a platform."""
    if is_repository(repo):  # an empty `.git` folder is a plain folder's
        yield from committed_files(repo, delivery)
        return
    for folder, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.startswith(".")]
        for name in files:
            if name.endswith(PROJECT_SUFFIXES):
                path = Path(folder, name)
                try:
                    yield path.relative_to(repo).as_posix(), path.read_bytes()
                except OSError:
                    continue  # gone or unreadable: the build would not read it either


def committed_files(repo: Path, delivery: str) -> Iterator[tuple[str, bytes]]:
    """The MSBuild files of the commit the delivery starts from that mention a Web SDK or EF
    Core (found by one `git grep`), read from that commit."""
    from specops_dag.gitflow import branch_name, gits_reason, run_git

    branch = f"refs/heads/{branch_name(delivery)}"
    rev = branch if run_git(repo, "rev-parse", "--verify", "--quiet", branch).ok else "HEAD"
    grep = run_git(repo, "grep", "-l", "-z", "-I", "-i", "-F", "-e", "Microsoft.NET.Sdk.Web",
                   "-e", "EntityFrameworkCore", rev, "--",
                   *(f"*{suffix}" for suffix in PROJECT_SUFFIXES))
    if grep.timed_out or grep.exit_code not in (0, 1):  # 1: nothing matched
        why = "did not finish" if grep.timed_out else gits_reason(grep) or f"exit {grep.exit_code}"
        raise UsageError(f"cannot read {rev} of {repo} to detect its platforms (`git grep`: "
                         f"{why}); the delivery's worktree starts from it: commit to the target "
                         "repository first, or name the platforms with --platform")
    for hit in filter(None, grep.stdout.split("\0")):
        rel = hit.removeprefix(f"{rev}:")
        show = run_git(repo, "show", f"{rev}:{rel}")
        if show.ok:
            yield rel, show.stdout.encode("utf-8", "surrogateescape")


def platform_line(origin: dict[str, str]) -> str:
    """What `specops new` prints about the platforms a delivery binds skills for."""
    if not origin:
        return ("platforms: none detected (no Microsoft.NET.Sdk.Web project, no Entity "
                "Framework Core reference); `--platform P` binds a platform's skills anyway")
    if set(origin.values()) == {EXPLICIT}:
        return f"platforms: {origin_text(list(origin), origin)}"
    return f"platforms: {origin_text(list(origin), origin)}; `--platform P` replaces the detection"


def origin_text(platforms: list[str], origin: dict[str, str]) -> str:
    """`aspnetcore (from src/Api/Api.csproj), ef-core (from --platform)`; a platform with no
    origin recorded was given with --platform (the only way before detection)."""
    return ", ".join(f"{p} (from {origin.get(p, EXPLICIT)})" for p in platforms)
