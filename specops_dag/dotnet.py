"""The `full` .NET 8 validation (seed 001 §8, DESIGN §8, reference dotnet-validation.md), written
against the real `dotnet` CLI: global.json and SDK selection → discovery → TFM and
ProjectReference evaluation → restore/build with warnings as errors → `dotnet test` with TRX.

One 1,800 s deadline is shared by every stage; the first failing stage stops it. The verdict is
data (`ValidationReport`); only a missing `dotnet` raises (an environment error).
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from .catalog import find_cycle
from .errors import ToolMissing
from .process import ProcessResult, run_process
from .sdk import check_global_json, sdk_satisfies
from .trx import judge_test_run

DEADLINE_S = 1800.0
CONFIGURATION = "Release"
COMMON = ["-nologo", "-nodeReuse:false"]
DOTNET_ENV = {"DOTNET_NOLOGO": "1", "DOTNET_CLI_TELEMETRY_OPTOUT": "1",
              "DOTNET_CLI_WORKLOAD_UPDATE_NOTIFY_DISABLE": "1", "DOTNET_CLI_UI_LANGUAGE": "en",
              "MSBUILDDISABLENODEREUSE": "1", "DOTNET_CLI_USE_MSBUILD_SERVER": "0"}
DROP_ENV = ("DOTNET_MSBUILD_SDK_RESOLVER_SDKS_DIR", "DOTNET_MSBUILD_SDK_RESOLVER_SDKS_VER",
            "DOTNET_MSBUILD_SDK_RESOLVER_CLI_DIR", "MSBuildSDKsPath", "COREHOST_TRACE",
            "DOTNET_HOST_TRACE")
SKIP_DIRS = {".git", "bin", "obj", "node_modules", ".specops", ".dagster_home", "TestResults"}
SOLUTION_FOLDER = "{2150E333-8FDC-42A3-9474-1A3956D46DE8}"
SLN_PROJECT = re.compile(r'^Project\("(?P<type>\{[^}]+\})"\)\s*=\s*"[^"]*",\s*"(?P<path>[^"]+)"',
                         re.MULTILINE)
TEST_MARKERS = ("microsoft.net.test.sdk", "<istestproject>true</istestproject>")
INSTALL_HINT = ("the .NET SDK (`dotnet`) is not installed or not on PATH: install the .NET 8 "
                "SDK (https://dot.net/download) so full validation can build and test")


@dataclass(frozen=True)
class ValidationReport:
    """The verdict of one validation: where it stopped and what it saw."""

    passed: bool
    mode: str
    stage: str
    message: str
    command: str | None = None
    exit_code: int | None = None
    total: int = 0
    executed: int = 0
    passed_tests: int = 0
    failed: int = 0
    skipped: int = 0
    failing_tests: tuple[str, ...] = ()
    logs: tuple[str, ...] = ()
    tail: str = ""
    target_found: bool = True
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        head = (f"validation `{self.mode}` {'passed' if self.passed else 'failed'} at stage "
                f"`{self.stage}`: {self.message}")
        extra = [f"command: {self.command} (exit {self.exit_code})"] if self.command else []
        extra += list(self.notes)
        if self.tail:
            extra.append(f"log tail:\n{self.tail}")
        return "\n".join([head, *extra])

    def as_metadata(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class Run:
    """One validation in progress: the shared deadline, the log folder, the commands run."""

    root: Path
    log_dir: Path
    deadline: float
    deadline_s: float
    env: dict[str, str]
    logs: list[str] = field(default_factory=list)

    def dotnet(self, stage: str, *args: str) -> ProcessResult | ValidationReport:
        remaining = self.deadline - time.monotonic()
        command = "dotnet " + " ".join(args)
        if remaining <= 0:
            return self.fail(stage, f"the {self.deadline_s:g} s validation deadline ran out before "
                             f"`{stage}`", command)
        n = len(self.logs) // 2 + 1
        out, err = self.log_dir / f"{n:02d}-{stage}.out", self.log_dir / f"{n:02d}-{stage}.err"
        self.logs += [str(out), str(err)]
        try:
            result = run_process(["dotnet", *args], cwd=self.root, env=self.env,
                                 deadline_s=remaining, stdout_path=out, stderr_path=err)
        except ToolMissing as missing:
            raise ToolMissing(INSTALL_HINT) from missing
        if result.timed_out:
            return self.fail(stage, f"the {self.deadline_s:g} s validation deadline ran out during "
                             f"`{stage}`; the process tree was killed", command, result)
        return result

    def fail(self, stage: str, message: str, command: str | None = None,
             result: ProcessResult | None = None, **extra: object) -> ValidationReport:
        tail = ""
        if result is not None:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
        return ValidationReport(False, "full", stage, message, command,
                                result.exit_code if result else None, logs=tuple(self.logs),
                                tail=tail, **extra)  # type: ignore[arg-type]


def dotnet_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in DROP_ENV}
    return {**env, **DOTNET_ENV}


def validate_full(root: Path, log_dir: Path, deadline_s: float = DEADLINE_S,
                  env: dict[str, str] | None = None) -> ValidationReport:
    """Run every stage against the repository at `root`; stop at the first failure."""
    root = root.resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    run = Run(root, log_dir, time.monotonic() + deadline_s, deadline_s, dotnet_env(env))
    repo = discover(root)
    if repo.problem:
        return run.fail("discovery", repo.problem)
    if not repo.projects:
        return ValidationReport(True, "full", "no validation target", "no C# project and no C# "
                                "source in the repository: nothing to build or test (this is "
                                "not a build success)", target_found=False)
    for stage in (check_sdk, evaluate_projects, build_targets, run_tests):
        outcome = stage(run, repo)
        if isinstance(outcome, ValidationReport):
            return outcome
    return outcome_report(run, repo)


@dataclass
class Repo:
    root: Path
    solution: Path | None = None
    projects: list[Path] = field(default_factory=list)     # every discovered .csproj
    in_solution: set[Path] = field(default_factory=set)
    tests: list[Path] = field(default_factory=list)
    problem: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    failing: list[str] = field(default_factory=list)


def discover(root: Path) -> Repo:
    """Projects (with and without the solution), test projects, and orphan C# sources."""
    repo = Repo(root)
    sources: list[Path] = []
    solutions = sorted(root.glob("*.sln"))
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                         and (here / d).relative_to(root).as_posix() != "tests/fixtures")
        repo.projects += [here / f for f in sorted(files) if f.endswith(".csproj")]
        sources += [here / f for f in sorted(files) if f.endswith(".cs")]
    if len(solutions) > 1:
        repo.problem = (f"more than one solution at the repository root ("
                        f"{', '.join(s.name for s in solutions)}); keep one")
        return repo
    if solutions:
        repo.solution = solutions[0]
        text = solutions[0].read_text(encoding="utf-8-sig", errors="replace")
        for m in SLN_PROJECT.finditer(text):
            if m["type"].upper() != SOLUTION_FOLDER and m["path"].endswith(".csproj"):
                repo.in_solution.add((root / m["path"].replace("\\", "/")).resolve())
    dirs = {p.parent for p in repo.projects}
    orphans = [s for s in sources if not any(d in s.parents for d in dirs)]
    if orphans:
        shown = ", ".join(o.relative_to(root).as_posix() for o in orphans[:5])
        repo.problem = (f"orphan C# source(s) outside every project: {shown}; add them to a "
                        "project or remove them")
        return repo
    repo.tests = [p for p in repo.projects
                  if any(m in p.read_text(errors="replace").lower() for m in TEST_MARKERS)]
    return repo


def check_sdk(run: Run, repo: Repo) -> None | ValidationReport:
    policy = check_global_json(repo.root / "global.json")
    if isinstance(policy, str):
        return run.fail("global.json", policy)
    result = run.dotnet("sdk", "--version")
    if isinstance(result, ValidationReport):
        return result
    version = result.stdout.strip()
    if result.exit_code == 0 and sdk_satisfies(policy, version):
        return None
    sdks = run.dotnet("sdk", "--list-sdks")
    listing = sdks.stdout.strip() if isinstance(sdks, ProcessResult) else "(not available)"
    why = (f"`dotnet --version` exited {result.exit_code}: no installed SDK matches global.json"
           if result.exit_code != 0 else
           f"`dotnet --version` selected {version!r}, which is not a .NET 8 SDK allowed by "
           f"global.json (sdk.version {policy.version}, rollForward {policy.roll_forward})")
    return run.fail("sdk", f"{why}; installed SDKs: {listing or 'none'}", "dotnet --version",
                    result)


def msbuild_json(run: Run, stage: str, project: Path, *args: str
                 ) -> dict | ValidationReport:
    result = run.dotnet(stage, "msbuild", str(project), *COMMON, *args)
    if isinstance(result, ValidationReport):
        return result
    command = f"dotnet msbuild {project} {' '.join(args)}"
    text = result.stdout
    start = next((m.start() for m in re.finditer(r"^\{\s*$", text, re.MULTILINE)), None)
    if result.exit_code != 0 or start is None:
        return run.fail(stage, f"MSBuild could not evaluate {rel(run.root, project)} "
                        f"(exit {result.exit_code})", command, result)
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError as err:
        return run.fail(stage, f"MSBuild printed invalid JSON for {rel(run.root, project)}: "
                        f"{err}", command, result)


def rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def evaluate_projects(run: Run, repo: Repo) -> None | ValidationReport:
    """TFM union must be exactly net8.0; ProjectReferences walked by real path, in the repo."""
    props = ["-getProperty:TargetFramework", "-getProperty:TargetFrameworks",
             "-getItem:ProjectReference"]
    graph: dict[Path, list[Path]] = {}
    queue = [p.resolve() for p in repo.projects]
    while queue:
        project = queue.pop(0)
        if project in graph:
            continue
        data = msbuild_json(run, "evaluation", project, *props)
        if isinstance(data, ValidationReport):
            return data
        p = data.get("Properties", {})
        tfms = {t.strip().lower() for t in str(p.get("TargetFrameworks", "")).split(";")
                if t.strip()} | ({str(p["TargetFramework"]).strip().lower()}
                                 if str(p.get("TargetFramework", "")).strip() else set())
        name = rel(run.root, project)
        if tfms != {"net8.0"}:
            return run.fail("evaluation", f"{name}: target frameworks "
                            f"{sorted(tfms) or 'none'}; every project must target exactly "
                            "net8.0", f"dotnet msbuild {project} {' '.join(props)}")
        if not str(p.get("TargetFramework", "")).strip():  # net8.0 via TargetFrameworks: inner view
            data = msbuild_json(run, "evaluation", project, "-p:TargetFramework=net8.0", *props)
            if isinstance(data, ValidationReport):
                return data
        graph[project] = []
        for ref in data.get("Items", {}).get("ProjectReference", []):
            target = Path(os.path.realpath(ref.get("FullPath") or ref.get("Identity", "")))
            if not target.is_relative_to(run.root):
                return run.fail("evaluation", f"{name}: ProjectReference {ref.get('Identity')} "
                                f"resolves to {target}, outside the repository; keep references "
                                "inside it")
            if not target.exists():
                return run.fail("evaluation", f"{name}: ProjectReference {ref.get('Identity')} "
                                f"does not exist ({target})")
            graph[project].append(target)
            queue.append(target)
    cycle = find_cycle(graph)
    if cycle:
        return run.fail("evaluation", "ProjectReference cycle: " + " -> ".join(
            rel(run.root, c) for c in cycle))
    return None


def build_targets(run: Run, repo: Repo, stages: tuple[str, ...] = ("restore", "build")
                  ) -> None | ValidationReport:
    """Restore and build the solution and every project it misses, warnings as errors."""
    targets = [repo.solution] if repo.solution else []
    targets += [p for p in repo.projects if p.resolve() not in repo.in_solution]
    for target in targets:
        assert target is not None
        steps = [("restore", ["restore", str(target), *COMMON, "-tl:off", "-warnaserror"]),
                 ("build", ["build", str(target), "--no-restore", "-c", CONFIGURATION, *COMMON,
                            "-tl:off", "-warnaserror", "--no-incremental",
                            "-p:UseSharedCompilation=false"])]
        for stage, args in (s for s in steps if s[0] in stages):
            result = run.dotnet(stage, *args)
            if isinstance(result, ValidationReport):
                return result
            if result.exit_code != 0:
                errors = [ln.strip() for ln in result.stdout.splitlines() if ": error " in ln]
                first = f"; first error: {errors[0]}" if errors else ""
                return run.fail(stage, f"`dotnet {stage}` of {rel(run.root, target)} failed "
                                f"(exit {result.exit_code}){first}", "dotnet " + " ".join(args),
                                result)
    return None


def restore_worktree(root: Path, log_dir: Path, env: dict[str, str],
                     deadline_s: float = DEADLINE_S) -> ValidationReport | None:
    """The restore the validation runs, done by the executor before the agent's first attempt
    (outside the sandbox, network allowed), so the agent can build and test `--no-restore`.
    None when there is nothing to restore (no project, or a layout the validation rejects);
    raises ToolMissing without `dotnet`."""
    root = root.resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    run = Run(root, log_dir, time.monotonic() + deadline_s, deadline_s, dotnet_env(env))
    repo = discover(root)
    if repo.problem or not repo.projects:
        return None
    failed = build_targets(run, repo, stages=("restore",))
    return failed or ValidationReport(True, "restore", "restore", "restored", logs=tuple(run.logs))


def build_worktree(root: Path, log_dir: Path, env: dict[str, str],
                   deadline_s: float = DEADLINE_S) -> ValidationReport:
    """Restore and build as the validation does (warnings as errors), without evaluating or
    testing: what QA needs before it runs the application. Raises ToolMissing without `dotnet`."""
    root = root.resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    run = Run(root, log_dir, time.monotonic() + deadline_s, deadline_s, dotnet_env(env))
    repo = discover(root)
    if repo.problem:
        return run.fail("discovery", repo.problem)
    failed = build_targets(run, repo)
    return failed or ValidationReport(True, "build", "build", "restored and built",
                                      logs=tuple(run.logs))


def run_tests(run: Run, repo: Repo) -> None | ValidationReport:
    """`dotnet test` per test project, TRX in a fresh directory per call, every TRX judged."""
    if not repo.tests:
        return run.fail("test", "no test project found (a project referencing "
                        "Microsoft.NET.Test.Sdk); zero executed tests is a failure")
    totals = {"total": 0, "executed": 0, "passed_tests": 0, "failed": 0, "skipped": 0}
    for project in repo.tests:
        name = rel(run.root, project)
        data = msbuild_json(run, "test", project, "-getProperty:IsTestProject",
                            "-getProperty:TestingPlatformDotnetTestSupport")
        if isinstance(data, ValidationReport):
            return data
        props = data.get("Properties", {})
        if str(props.get("TestingPlatformDotnetTestSupport", "")).lower() == "true":
            return run.fail("test", f"{name} runs on Microsoft.Testing.Platform "
                            "(TestingPlatformDotnetTestSupport=true): `dotnet test --logger trx` "
                            "writes no VSTest TRX there; use the VSTest adapter for validation")
        if str(props.get("IsTestProject", "")).lower() != "true":
            return run.fail("test", f"{name} is not a test project for `dotnet test` "
                            "(IsTestProject is not true): it would be skipped and write no TRX")
        results = run.log_dir / f"trx-{len(run.logs) // 2 + 1:02d}-{uuid.uuid4().hex[:8]}"
        results.mkdir(parents=True)
        args = ["test", str(project), "--no-build", "-c", CONFIGURATION, *COMMON,
                "--logger", "trx;LogFileName=results.trx", "--results-directory", str(results)]
        result = run.dotnet("test", *args)
        if isinstance(result, ValidationReport):
            return result
        verdict = judge_test_run(results, result.exit_code, result.timed_out)
        counts = {"total": verdict.total, "executed": verdict.executed,
                  "passed_tests": verdict.passed_count, "failed": verdict.failed,
                  "skipped": verdict.skipped}
        if not verdict.passed:
            return run.fail("test", f"{name}: {verdict.reason}: {verdict.detail}",
                            "dotnet " + " ".join(args), result,
                            failing_tests=tuple(verdict.failing_tests), **counts)
        for key, value in counts.items():
            totals[key] += value
    repo.counts = totals
    return None


def outcome_report(run: Run, repo: Repo) -> ValidationReport:
    c = repo.counts
    report = ValidationReport(
        True, "full", "test", f"{len(repo.tests)} test project(s): {c['executed']} of "
        f"{c['total']} tests executed, {c['passed_tests']} passed, {c['skipped']} skipped",
        logs=tuple(run.logs))
    return replace(report, **c)
