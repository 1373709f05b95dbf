"""The packages a plan or spec lists under `## Packages` (issue 43), restored before the agent's
first attempt: the agent's session is offline, so a package it adds must already be in its
package cache. `listed_packages` reads the section as a model writes it (bullets, numbered items,
table rows or `PackageReference` lines, backticks optional; `none` lists nothing);
`restore_packages` restores them outside the sandbox, with the network, through a scratch project
on the target policy's framework, into the NuGet packages folder of `env`.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from specops_dag.validation.dotnet import (
    COMMON,
    DEADLINE_S,
    UNSERVED,
    Run,
    StageFailed,
    dotnet_env,
    unserved_of,
)
from specops_dag.validation.sdk import TargetPolicy, resolve_target
from specops_dag.workflow.model import ValidationConfig

HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
PACKAGES_TITLE = re.compile(r"^(?:\d+[.)]\s*)?`?(?:new\s+)?(?:nuget\s+)?packages`?\b",
                            re.IGNORECASE)
FENCE = re.compile(r"^\s*(```|~~~)")
ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+|^\s*\||<Package(?:Reference|Version)\b")
TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
VERSION = re.compile(r"\d+(?:\.\d+){1,3}(?:-[0-9A-Za-z][0-9A-Za-z.-]*)?(?:\+[0-9A-Za-z.-]+)?")
PACKAGE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# Words a model writes between a package's id and its version: never an id.
NOT_AN_ID = {"version", "versions", "ver", "v", "id", "package", "packages", "nuget", "include",
             "update", "packagereference", "packageversion", "exact", "exactly", "pinned", "pin",
             "at", "is", "to", "none"}
CONFIG_NAMES = ("nuget.config",)  # matched case-insensitively at the worktree's root


@dataclass(frozen=True)
class Package:
    id: str
    version: str

    def __str__(self) -> str:
        return f"{self.id} {self.version}"


def listed_packages(markdown: str) -> list[Package]:
    """The packages every `## Packages` section of `markdown` lists, once per id (the first
    version wins), in order: one per item line (bullet, numbered item, table row or
    `PackageReference`/`PackageVersion` line) or plain line that starts with the id."""
    found: dict[str, Package] = {}
    for line in section_lines(markdown):
        package = package_on(line)
        if package is not None:
            found.setdefault(package.id.lower(), package)
    return list(found.values())


def section_lines(markdown: str) -> list[str]:
    """The lines under each `Packages` heading (any level, numbered or not), up to the next
    heading of the same or a higher level; fenced-code markers left out, their lines kept."""
    lines: list[str] = []
    level = 0  # the open section's heading level; 0: outside one
    fenced = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        heading = None if fenced else HEADING.match(line)
        if heading is not None and (level == 0 or len(heading.group(1)) <= level):
            title = heading.group(2).strip("*_ ")
            level = len(heading.group(1)) if PACKAGES_TITLE.match(title) else 0
            continue
        if level:
            lines.append(line)
    return lines


def package_on(line: str) -> Package | None:
    """The package one line of the section names: the first version on it and the id just before
    it (words such as `version` skipped); on a plain line the id must be its first word."""
    text = re.sub(r"\bv(?=\d+\.\d)", "", line)
    tokens = [t.rstrip(".-+") for t in TOKEN.findall(text)]
    tokens = [t for t in tokens if t]
    if not tokens or tokens[0].lower() == "none":
        return None
    item = ITEM.search(line) is not None
    for i, token in enumerate(tokens):
        if not VERSION.fullmatch(token):
            continue
        before = [t for t in tokens[:i] if t.lower() not in NOT_AN_ID]
        if not before or not PACKAGE_ID.fullmatch(before[-1]) or VERSION.fullmatch(before[-1]):
            return None
        if not item and before[-1] != tokens[0]:
            return None
        return Package(before[-1], token)
    return None


def folder_name(version: str) -> str:
    """A version as the NuGet packages folder names it: normalized (three parts at least, a
    fourth only when not zero, no build metadata), lower case."""
    core, dash, pre = version.split("+")[0].partition("-")
    parts = core.split(".")
    parts += ["0"] * (3 - len(parts))
    if len(parts) == 4 and int(parts[3]) == 0:
        parts = parts[:3]
    return (".".join(str(int(p)) for p in parts) + dash + pre).lower()


def packages_folder(env: dict[str, str]) -> Path:
    """The NuGet global packages folder `env` gives restore (NUGET_PACKAGES, else NuGet's
    default under the home folder)."""
    if env.get("NUGET_PACKAGES"):
        return Path(env["NUGET_PACKAGES"])
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".nuget" / "packages"


def in_folder(folder: Path, package: Package) -> bool:
    """Whether restore completed `package` in the packages folder (`.nupkg.metadata` is the
    file NuGet writes last)."""
    return (folder / package.id.lower() / folder_name(package.version)
            / ".nupkg.metadata").is_file()


@dataclass(frozen=True)
class PackagesRestore:
    """What `restore_packages` did: the packages now in `folder`, those the source does not
    serve (`id version (NUxxxx: why)`), and why any other was not restored."""

    restored: tuple[Package, ...]
    unserved: tuple[str, ...]
    folder: Path
    failure: str = ""
    missing: tuple[Package, ...] = ()  # neither restored nor unserved: `failure` says why
    log_dir: Path | None = None

    def describe(self, sources: list[str]) -> str:
        """The step's preparation line for it, `sources` being where the packages were listed."""
        parts = []
        if self.restored:
            parts.append(f"restored {', '.join(map(str, self.restored))} into {self.folder}")
        if self.unserved:
            one = len(self.unserved) == 1
            parts.append(f"{UNSERVED} {', '.join(self.unserved)}, so "
                         f"{'it was' if one else 'they were'} not restored and the agent cannot "
                         f"use {'it' if one else 'them'}")
        if self.missing:
            logs = f"; logs in {self.log_dir}" if self.log_dir else ""
            parts.append(f"{', '.join(map(str, self.missing))} not restored: {self.failure}{logs}")
        return f"the plan's packages (`## Packages` of {', '.join(sources)}): " + "; ".join(parts)


def scratch_project(framework: str, packages: list[Package]) -> str:
    refs = "\n".join(f'    <PackageReference Include="{p.id}" Version="[{p.version}]" />'
                     for p in packages)
    return ("<Project Sdk=\"Microsoft.NET.Sdk\">\n  <PropertyGroup>\n"
            f"    <TargetFramework>{framework}</TargetFramework>\n"
            "    <NuGetAudit>false</NuGetAudit>\n  </PropertyGroup>\n"
            f"  <ItemGroup>\n{refs}\n  </ItemGroup>\n</Project>\n")


def restore_packages(worktree: Path, packages: list[Package], scratch: Path, log_dir: Path,
                     env: dict[str, str], config: ValidationConfig | None = None,
                     deadline_s: float = DEADLINE_S) -> PackagesRestore:
    """Restore `packages` at exactly their versions, with their dependencies for the target
    policy's framework, into the packages folder of `env`: `dotnet restore` of a project written
    in `scratch` (an empty folder outside the worktree; the worktree's global.json and NuGet.config
    apply, no Directory.*.props from folders above it), through the validation's runner. A
    package the source does not serve is named, never an error; raises ToolMissing without
    `dotnet`."""
    config = config or ValidationConfig()
    rule = config.target
    folder = packages_folder(env)
    policy = resolve_target(rule.framework, rule.newer_sdk, rule.newer_runtime,
                            worktree / "global.json", rule.origin)
    if not isinstance(policy, TargetPolicy):
        return PackagesRestore((), (), folder, policy, tuple(packages))
    scratch.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    for name in ("Directory.Build.props", "Directory.Build.targets", "Directory.Packages.props"):
        (scratch / name).write_text("<Project />\n", encoding="utf-8")
    if (worktree / "global.json").is_file():
        shutil.copyfile(worktree / "global.json", scratch / "global.json")
    project = scratch / "plan-packages.csproj"
    project.write_text(scratch_project(policy.framework, packages), encoding="utf-8")
    configs = [p for p in worktree.iterdir() if p.is_file() and p.name.lower() in CONFIG_NAMES]
    args = ["restore", str(project), *COMMON, "-tl:off", "-p:NuGetAudit=false"]
    args += ["--configfile", str(configs[0])] if configs else []
    run = Run(scratch, log_dir, time.monotonic() + deadline_s, deadline_s, dotnet_env(env),
              config, policy)
    failure, output = "", ""
    try:
        result = run.dotnet("packages", *args)
        output = result.stdout + result.stderr
        if result.exit_code != 0:
            errors = [ln.strip() for ln in output.splitlines() if ": error " in ln
                      and not re.search(r": error NU110[12]:", ln)]
            failure = (f"`dotnet restore` of the plan's packages failed (exit {result.exit_code})"
                       + (f"; first error: {errors[0]}" if errors else ""))
    except StageFailed as failed:
        failure = failed.report.message
    unserved = unserved_of(output)
    restored = tuple(p for p in packages if in_folder(folder, p))
    missing = tuple(p for p in packages if p not in restored and p.id.lower() not in unserved)
    return PackagesRestore(restored, tuple(unserved[p.id.lower()] for p in packages
                                           if p not in restored and p.id.lower() in unserved),
                           folder, failure or "restore did not put it in the packages folder",
                           missing, log_dir)
