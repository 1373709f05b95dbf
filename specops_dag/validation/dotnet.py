"""The `full` .NET validation (seed 001 §8, DESIGN §8, reference dotnet-validation.md), written
against the real `dotnet` CLI: SDK selection under the target policy (net8.0 or net10.0, issue
42) → discovery → TFM and ProjectReference evaluation (with the build's Configuration) →
restore/build → `dotnet test` with TRX per test project (test projects found by evaluating
`IsTestProject` after restore).

The layout comes from a `ValidationConfig` (issue 16): SDK policy without global.json, which
targets to build, analyzer frameworks, excluded snippets, NuGetAudit and the judge (`absolute`:
warnings are errors; `regressions`: only what is new against the base's own baseline). One
1,800 s deadline is shared by every stage. The verdict is data (`ValidationReport`); only a
missing `dotnet` raises (an environment error).
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NoReturn

from specops_dag.errors import ToolMissing
from specops_dag.graph import find_cycle
from specops_dag.process import ProcessResult, run_process
from specops_dag.validation import baseline as bl
from specops_dag.validation.discovery import WHERE, Repo, discover
from specops_dag.validation.sdk import (
    SdkPolicy,
    TargetPolicy,
    an_sdk,
    check_global_json,
    example_pin,
    matches_policy,
    parse_version,
    resolve_target,
    test_runner,
)
from specops_dag.validation.trx import judge_test_run
from specops_dag.workflow.model import ValidationConfig

DEADLINE_S = 1800.0
CONFIGURATION = ValidationConfig().configuration  # the default `-c` (QA runs the build it made)
COMMON = ["-nologo", "-nodeReuse:false"]
DOTNET_ENV = {"DOTNET_NOLOGO": "1", "DOTNET_CLI_TELEMETRY_OPTOUT": "1",
              "DOTNET_CLI_WORKLOAD_UPDATE_NOTIFY_DISABLE": "1", "DOTNET_CLI_UI_LANGUAGE": "en",
              "MSBUILDDISABLENODEREUSE": "1", "DOTNET_CLI_USE_MSBUILD_SERVER": "0"}
# Cleared: what redirects SDK resolution, traces, what would let a runtime other than the
# policy's run the tests (the validator sets DOTNET_ROLL_FORWARD itself when the policy says so),
# and what would hide a failing Microsoft.Testing.Platform run's exit code or pick the runner.
DROP_ENV = ("DOTNET_MSBUILD_SDK_RESOLVER_SDKS_DIR", "DOTNET_MSBUILD_SDK_RESOLVER_SDKS_VER",
            "DOTNET_MSBUILD_SDK_RESOLVER_CLI_DIR", "MSBuildSDKsPath", "COREHOST_TRACE",
            "DOTNET_HOST_TRACE", "DOTNET_ROLL_FORWARD", "DOTNET_ROLL_FORWARD_TO_PRERELEASE",
            "TESTINGPLATFORM_EXITCODE_IGNORE", "DOTNET_TEST_RUNNER")
INSTALL_HINT = ("the .NET SDK (`dotnet`) is not installed or not on PATH: install the .NET 10 "
                "SDK (https://dot.net/download; it also builds net8.0) so full validation can "
                "build and test; without an SDK, a delivery whose change is documentation only "
                "can run: create it with `specops new WORKFLOW DELIVERY --validation docs-only "
                "...` (`specops validate --mode docs-only` for a folder)")
# NuGet's NU1603 ("… depends on P (>= W) but P W was not found. P G was resolved instead.")
NU1603 = re.compile(r"error NU1603: \S+ depends on (\S+) \(>= ([^)\s]+)\) but \S+ \S+ was not "
                    r"found\. \S+ (\S+) was resolved instead")
# A package reference the package source cannot satisfy: no such id, no such version.
NU1101 = re.compile(r"error NU1101: Unable to find package (\S+)\. No packages exist with this id")
NU1102 = re.compile(r"error NU1102: Unable to find package (\S+) with version \(([^)]+)\)"
                    r"(?:\s*\[[^\]]*\])?\s*\n[^\n]*?error NU1102:\s+- Found \d+ version\(s\) in "
                    r"\S+ \[ Nearest version: ([^\]\s]+) \]")
UNSERVED = "the package source does not serve"
RUNTIME = re.compile(r"^Microsoft\.NETCore\.App (\d+)\.(\d+)\.\S+", re.MULTILINE)
# Verdicts a regressions judge compares with the baseline; the others are broken runs.
COMPARABLE = ("passed", "failed", "skip-only", "zero tests", "exit code")


@dataclass(frozen=True)
class ValidationReport:
    """The verdict of one validation: where it stopped, what it ran and saw, and whom it is for:
    `blame` "attempt" (feedback for the agent) or "environment" (a person must act)."""

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
    blame: str = "attempt"
    judge: str = "absolute"
    sdk_version: str | None = None
    target: str | None = None  # the policy's framework (net8.0, net10.0)
    commands: tuple[dict, ...] = ()  # every dotnet call: command, stage, exit code, duration
    projects: tuple[dict, ...] = ()  # TRX totals per test project, failed and skipped names
    warnings: tuple[str, ...] = ()  # build warnings seen (regressions judge), repo-relative
    baseline: dict | None = None  # base and attempt side by side (regressions judge)

    def describe(self) -> str:
        head = (f"validation `{self.mode}` {'passed' if self.passed else 'failed'} at stage "
                f"`{self.stage}`: {self.message}")
        extra = [f"command: {self.command} (exit {self.exit_code})"] if self.command else []
        extra += list(self.notes)
        if self.baseline:
            extra += bl.side_by_side(self.baseline)
        if self.tail:
            extra.append(f"log tail:\n{self.tail}")
        return "\n".join([head, *extra])

    def as_metadata(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


class StageFailed(Exception):
    """A stage that cannot pass: the one way a stage ends the validation, with its report."""

    def __init__(self, report: ValidationReport) -> None:
        super().__init__(report.message)
        self.report = report


@dataclass
class Run:
    """One validation in progress: the shared deadline, the log folder, the commands run."""

    root: Path
    log_dir: Path
    deadline: float
    deadline_s: float
    env: dict[str, str]
    config: ValidationConfig = field(default_factory=ValidationConfig)
    policy: TargetPolicy | str = ""  # a string: why the target policy cannot be resolved
    logs: list[str] = field(default_factory=list)
    commands: list[dict] = field(default_factory=list)
    sdk_version: str | None = None
    warnings: list[str] = field(default_factory=list)
    projects: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runner: str = "vstest"  # `dotnet test`'s mode: "vstest", or "mtp" (global.json test.runner)

    def dotnet(self, stage: str, *args: str, env: dict[str, str] | None = None
               ) -> ProcessResult:
        remaining = self.deadline - time.monotonic()
        command = "dotnet " + " ".join(args)
        if remaining <= 0:
            self.fail(stage, f"the {self.deadline_s:g} s validation deadline ran out before "
                             f"`{stage}`", command)
        n = len(self.logs) // 2 + 1
        out, err = self.log_dir / f"{n:02d}-{stage}.out", self.log_dir / f"{n:02d}-{stage}.err"
        self.logs += [str(out), str(err)]
        try:
            result = run_process(["dotnet", *args], cwd=self.root, env={**self.env, **(env or {})},
                                 deadline_s=remaining, stdout_path=out, stderr_path=err)
        except ToolMissing as missing:
            raise ToolMissing(INSTALL_HINT) from missing
        self.commands.append({"stage": stage, "command": command, "exit_code": result.exit_code,
                              "duration_s": result.duration_s, "timed_out": result.timed_out})
        if result.timed_out:
            self.fail(stage, f"the {self.deadline_s:g} s validation deadline ran out during "
                             f"`{stage}`; the process tree was killed", command, result)
        return result

    def fail(self, stage: str, message: str, command: str | None = None,
             result: ProcessResult | None = None, **extra: object) -> NoReturn:
        """End the validation at `stage`: the report travels up as `StageFailed`."""
        raise StageFailed(self.failure(stage, message, command, result, **extra))

    def failure(self, stage: str, message: str, command: str | None = None,
                result: ProcessResult | None = None, **extra: object) -> ValidationReport:
        tail = ""
        if result is not None:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
        return self.report(False, stage, message, command=command,
                           exit_code=result.exit_code if result else None, tail=tail, **extra)

    def report(self, passed: bool, stage: str, message: str, **extra: object) -> ValidationReport:
        target = self.policy.framework if isinstance(self.policy, TargetPolicy) else None
        extra = {"notes": tuple(self.notes), **extra}
        return ValidationReport(passed, "full", stage, message, logs=tuple(self.logs),
                                judge=self.config.judge, sdk_version=self.sdk_version,
                                target=target, commands=tuple(self.commands),
                                projects=tuple(self.projects), warnings=tuple(self.warnings),
                                **extra)  # type: ignore[arg-type]


def dotnet_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in DROP_ENV}
    return {**env, **DOTNET_ENV}


def start_run(root: Path, log_dir: Path, deadline_s: float, env: dict[str, str] | None,
              config: ValidationConfig | None) -> tuple[Run, Repo]:
    """The run every entry point starts with: its deadline, environment and settings, and the
    repository as discovery sees it."""
    root = root.resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    config = config or ValidationConfig()
    rule = config.target
    policy = resolve_target(rule.framework, rule.newer_sdk, rule.newer_runtime,
                            root / "global.json", rule.origin)
    run = Run(root, log_dir, time.monotonic() + deadline_s, deadline_s, dotnet_env(env),
              config, policy)
    return run, discover(root, run.config)


def validate_full(root: Path, log_dir: Path, deadline_s: float = DEADLINE_S,
                  env: dict[str, str] | None = None, config: ValidationConfig | None = None,
                  baseline: dict | None = None) -> ValidationReport:
    """Run every stage against the repository at `root`; stop at the first failure. Under
    `judge: regressions`, `baseline` (from the base tree's own report) is what the attempt is
    compared with; without one the report *is* the baseline."""
    run, repo = start_run(root, log_dir, deadline_s, env, config)
    if repo.problem:
        return run.failure("discovery", repo.problem)
    if not repo.projects:
        return ValidationReport(True, "full", "no validation target", "no C# project and no C# "
                                "source in the repository: nothing to build or test (this is "
                                "not a build success)", target_found=False)
    try:
        for stage in (check_sdk, evaluate_projects, build_targets):
            stage(run, repo)
        if run.config.judge == "absolute":
            judge_advisories(run, baseline)
        run_tests(run, repo)
    except StageFailed as failed:
        return failed.report
    return outcome_report(run, repo, baseline)


def advisories(warnings: list[str] | tuple[str, ...]) -> list[str]:
    """The NuGetAudit advisory warnings among `warnings` (keys as `bl.diagnostics` makes them)."""
    return [w for w in warnings if re.search(r": warning (NU190[1-4]):", w)]


def judge_advisories(run: Run, baseline: dict | None) -> None:
    """Under `judge: absolute`: an advisory the base commit already had is noted, never charged;
    one it did not have fails the restore stage (blame per `validation.nuget_audit`). Without a
    baseline this tree is the base: its advisories are noted as the baseline."""
    found = advisories(run.warnings)
    if baseline is None:
        if found:
            run.notes.append(f"NuGetAudit: {len(found)} advisory warning(s) in the base tree, "
                             f"its baseline (an attempt fails only for new ones): "
                             f"{'; '.join(found[:bl.SHOWN])}")
        return
    before = set(advisories(baseline.get("warnings") or []))
    base = (baseline.get("commit") or "")[:12] or "the base"
    new = [w for w in found if w not in before]
    old = [w for w in found if w in before]
    if old:
        run.notes.append(f"NuGetAudit: {len(old)} advisory warning(s) the base ({base}) already "
                         f"had, not charged to this attempt: {'; '.join(old[:bl.SHOWN])}")
    if new:
        blame = "environment" if run.config.nuget_audit == "environment" else "attempt"
        run.fail("restore", f"NuGetAudit: {len(new)} advisory warning(s) the base ({base}) did "
                 f"not have: {'; '.join(new[:bl.SHOWN])}: update or remove the package, or "
                 "suppress the advisory with `<NuGetAuditSuppress Include=\"<advisory url>\" />`",
                 blame=blame)


def check_sdk(run: Run, repo: Repo) -> None:
    """global.json as the host reads it, then the SDK `dotnet --version` selects in the
    repository: the host must find one and the target policy must allow it."""
    policy = run.policy
    if isinstance(policy, str):
        run.fail("global.json", policy)
    path = repo.root / "global.json"
    required = run.config.sdk.require_global_json
    pinned: SdkPolicy | str | None = None
    try:
        runner = test_runner(path)
    except ValueError as err:
        run.fail("global.json", str(err))
    if path.exists():
        pinned = check_global_json(path, policy.framework, pin_required=required)
        if isinstance(pinned, str):
            run.fail("global.json", pinned)
    elif required:
        run.fail("global.json", "no global.json pinning the SDK at the repository root: add "
                 f"one (e.g. {example_pin(policy.framework)}), or set "
                 f"`validation.sdk.require_global_json: false` in {WHERE}")
    result = run.dotnet("sdk", "--version")
    version = result.stdout.strip()
    found = parse_version(version) if result.exit_code == 0 else None
    if found is not None and policy.allows_sdk(version) and (
            pinned is None or matches_policy(pinned, found)):
        run.sdk_version = version
        if runner == "mtp" and found.major < 10:
            run.notes.append(f"global.json's test.runner selects Microsoft.Testing.Platform, "
                             f"which SDK {version} does not read (SDK 10 and newer do): "
                             "`dotnet test` ran in VSTest mode")
        elif runner == "mtp":
            run.runner = runner
            run.notes.append("`dotnet test` ran in Microsoft.Testing.Platform mode (global.json "
                             "test.runner): TRX by --report-trx, judged by its content")
        return None
    listing = installed_sdks(run)
    pin = (f"global.json sdk.version {pinned.version}, rollForward {pinned.roll_forward}"
           if isinstance(pinned, SdkPolicy) else "no global.json pin")
    if found is None:
        said = (f"`dotnet --version` exited {result.exit_code}: no installed SDK matches {pin}"
                if result.exit_code != 0 else
                f"`dotnet --version` printed {version!r}, not an SDK version")
        fix = ("install an SDK that global.json accepts, or change its sdk.version or "
               f"rollForward (e.g. {example_pin(policy.framework)})")
    else:
        said = f"`dotnet --version` selected SDK {version} ({pin}), which the target policy " \
               "does not allow"
        newer = "" if (found.major, found.minor) < policy.line or policy.newer_sdk else (
            f", or set `validation.target.newer_sdk: true` in {WHERE}")
        fix = (f"install {an_sdk(policy.line_text)}" + (" or newer" if policy.newer_sdk else "")
               + f" and pin it in global.json (e.g. {example_pin(policy.framework)}){newer}")
    run.fail("sdk", f"{said}; target policy {policy.describe()}; installed SDKs: "
                    f"{listing or 'none'}; "
                    f"fix: {fix}", "dotnet --version", result, blame="environment")


def installed_sdks(run: Run) -> str:
    try:
        return "; ".join(run.dotnet("sdk", "--list-sdks").stdout.strip().splitlines())
    except StageFailed:  # the deadline ran out: the SDK stage's own failure is what counts
        return "(not available)"


def test_runtime_env(run: Run) -> dict[str, str]:
    """The environment `dotnet test` needs to run the target's tests: nothing when the target is
    the SDK's own line; DOTNET_ROLL_FORWARD=Major (noted in the report) when the target's runtime
    is not installed and the policy lets tests run on a newer one; else an environment failure."""
    policy = run.policy
    assert isinstance(policy, TargetPolicy)
    selected = parse_version(run.sdk_version or "")
    if selected is None or (selected.major, selected.minor) == policy.line:
        return {}
    result = run.dotnet("test", "--list-runtimes")
    lines = {(int(a), int(b)) for a, b in RUNTIME.findall(result.stdout)}
    if policy.line in lines:
        return {}
    newer = sorted(line for line in lines if line > policy.line)
    listed = "; ".join(ln for ln in result.stdout.strip().splitlines()
                       if ln.startswith("Microsoft.NETCore.App ")) or "none"
    if newer and policy.newer_runtime:
        run.notes.append(f"no {policy.line_text} runtime is installed, so the {policy.framework} "
                         "tests ran on the newest installed runtime (DOTNET_ROLL_FORWARD=Major, "
                         f"validation.target.newer_runtime); installed: {listed}")
        return {"DOTNET_ROLL_FORWARD": "Major"}
    fix = (f"install the .NET {policy.line_text} runtime"
           + ("" if not newer else f", or set `validation.target.newer_runtime: true` in {WHERE}"))
    run.fail("test", f"no {policy.line_text} runtime (Microsoft.NETCore.App {policy.line_text}.x) "
                     f"is installed to run the {policy.framework} tests; installed: {listed}; "
                     f"fix: {fix}", "dotnet --list-runtimes", result, blame="environment")


def msbuild_json(run: Run, stage: str, project: Path, *args: str) -> dict:
    result = run.dotnet(stage, "msbuild", str(project), *COMMON, *args)
    command = f"dotnet msbuild {project} {' '.join(args)}"
    text = result.stdout
    start = next((m.start() for m in re.finditer(r"^\{\s*$", text, re.MULTILINE)), None)
    if result.exit_code != 0 or start is None:
        run.fail(stage, f"MSBuild could not evaluate {rel(run.root, project)} "
                        f"(exit {result.exit_code})", command, result)
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError as err:
        run.fail(stage, f"MSBuild printed invalid JSON for {rel(run.root, project)}: "
                        f"{err}", command, result)


def rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def frameworks(props: dict) -> set[str]:
    """The union of TargetFrameworks and TargetFramework, lower case (reference §3)."""
    tfms = {t.strip().lower() for t in str(props.get("TargetFrameworks", "")).split(";")
            if t.strip()}
    one = str(props.get("TargetFramework", "")).strip().lower()
    return tfms | ({one} if one else set())


def evaluate_projects(run: Run, repo: Repo) -> None:
    """Every project evaluated with the build's Configuration; TFMs must be exactly the target
    policy's framework (Roslyn components: one of `analyzer_frameworks`); references walked by
    real path."""
    cfg = f"-p:Configuration={run.config.configuration}"
    props = ["-getProperty:TargetFramework", "-getProperty:TargetFrameworks",
             "-getProperty:IsRoslynComponent", "-getItem:ProjectReference"]
    graph: dict[Path, list[Path]] = {}
    seen: dict[Path, set[str]] = {}
    queue = [p.resolve() for p in repo.projects]
    while queue:
        project = queue.pop(0)
        if project in graph:
            continue
        data = msbuild_json(run, "evaluation", project, cfg, *props)
        p = data.get("Properties", {})
        tfms = seen[project] = frameworks(p)
        if str(p.get("IsRoslynComponent", "")).lower() == "true":
            repo.analyzers.add(project)
        if len(tfms) == 1 and not str(p.get("TargetFramework", "")).strip():
            # one TFM via TargetFrameworks: take references from the inner build's view
            data = msbuild_json(run, "evaluation", project, cfg,
                                f"-p:TargetFramework={next(iter(tfms))}", *props)
        graph[project] = []
        for ref in data.get("Items", {}).get("ProjectReference", []):
            target = Path(os.path.realpath(ref.get("FullPath") or ref.get("Identity", "")))
            name = rel(run.root, project)
            if not target.is_relative_to(run.root):
                run.fail("evaluation", f"{name}: ProjectReference {ref.get('Identity')} "
                                f"resolves to {target}, outside the repository; keep references "
                                "inside it")
            if not target.exists():
                run.fail("evaluation", f"{name}: ProjectReference {ref.get('Identity')} "
                                f"does not exist ({target})")
            if str(ref.get("OutputItemType", "")).lower() == "analyzer":
                repo.analyzers.add(target)
            graph[project].append(target)
            queue.append(target)
    for project, tfms in seen.items():
        problem = framework_problem(run, repo, project, tfms)
        if problem:
            run.fail("evaluation", problem, f"dotnet msbuild {project} {cfg} "
                            f"{' '.join(props)}")
    cycle = find_cycle(graph)
    if cycle:
        run.fail("evaluation", "ProjectReference cycle: " + " -> ".join(
            rel(run.root, c) for c in cycle))
    return None


def framework_problem(run: Run, repo: Repo, project: Path, tfms: set[str]) -> str | None:
    name = rel(run.root, project)
    policy = run.policy
    assert isinstance(policy, TargetPolicy)
    target = policy.framework
    if tfms == {target}:
        return None
    allowed = {t.lower() for t in run.config.analyzer_frameworks}
    if project in repo.analyzers:
        if len(tfms) == 1 and tfms <= allowed | {target}:
            return None
        return (f"{name}: target frameworks {sorted(tfms) or 'none'}; an analyzer or source "
                f"generator project must target exactly one of "
                f"{', '.join(sorted(allowed | {target}))}")
    hint = (f" (analyzer and source-generator projects, `IsRoslynComponent` or referenced with "
            f"OutputItemType=\"Analyzer\", may target {', '.join(sorted(allowed))})"
            if tfms & allowed else "")
    return (f"{name}: target frameworks {sorted(tfms) or 'none'}; every project must target "
            f"exactly {target} (the target policy's framework; {policy.origin}){hint}")


# NuGetAudit's advisories (NU1901–NU1904) stay warnings under -warnaserror: the base may already
# have them, so they are judged against the base (`judge_advisories`), never by the build alone.
ADVISORY_CODES = ("NU1901", "NU1902", "NU1903", "NU1904")
STRICT = ["-warnaserror", "-warnNotAsError:" + ",".join(ADVISORY_CODES)]


def build_argv(run: Run, stage: str, target: Path) -> list[str]:
    strict = STRICT if run.config.judge == "absolute" else []
    if stage == "restore":
        return ["restore", str(target), *COMMON, "-tl:off", *strict]
    return ["build", str(target), "--no-restore", "-c", run.config.configuration, *COMMON,
            "-tl:off", *strict, "--no-incremental", "-p:UseSharedCompilation=false"]


def build_targets(run: Run, repo: Repo, stages: tuple[str, ...] = ("restore", "build")
                  ) -> None:
    """Restore and build the targets and every project they miss (warnings as errors under
    `judge: absolute`; collected for the baseline under `regressions`)."""
    targets = list(repo.targets)
    targets += [p for p in repo.projects if p.resolve() not in repo.in_solution]
    for target in targets:
        for stage in stages:
            args = build_argv(run, stage, target)
            result = run.dotnet(stage, *args)
            for _, key in bl.diagnostics(result.stdout, run.root, "warning"):
                if key not in run.warnings:
                    run.warnings.append(key)
            if result.exit_code != 0:
                build_failure(run, stage, target, args, result)
    return None


def build_failure(run: Run, stage: str, target: Path, args: list[str],
                  result: ProcessResult) -> NoReturn:
    found = bl.diagnostics(result.stdout, run.root, "error")
    errors = [ln.strip() for ln in result.stdout.splitlines() if ": error " in ln]
    first = f"; first error: {errors[0]}" if errors else ""
    message = (f"`dotnet {stage}` of {rel(run.root, target)} failed (exit {result.exit_code})"
               f"{first}")
    blame = "attempt"
    taken = NU1603.findall(result.stdout)
    if taken:
        pins = ", ".join(dict.fromkeys(f"{pkg} {wanted} → {got}" for pkg, wanted, got in taken))
        message += (f"; NU1603: the package source does not serve a version a project asks for, "
                    f"so NuGet took the next one ({pins}): reference the version it took (or "
                    "another the source serves), or add NU1603 to the project's "
                    "WarningsNotAsErrors")
    unserved = list(unserved_of(result.stdout).values())
    if unserved:
        message += (f"; {UNSERVED} {', '.join(unserved)}: agent sessions have no network, so "
                    "only packages the source serves can be used")
    if bl.audit_only([code for code, _ in found]):
        message += f"; {bl.audit_advice([key for _, key in found])}"
        blame = "environment" if run.config.nuget_audit == "environment" else "attempt"
    run.fail(stage, message, "dotnet " + " ".join(args), result, blame=blame)


def unserved_of(output: str) -> dict[str, str]:
    """Each package restore could not find (NU1101 no such id, NU1102 no such version), lower-case
    id -> `id version (NUxxxx: why)` (the version only with NU1102; an exact one without `= `)."""
    found = {pkg.lower(): f"{pkg} (NU1101: no package with this id)"
             for pkg in NU1101.findall(output)}
    for pkg, wanted, nearest in NU1102.findall(output):
        found[pkg.lower()] = (f"{pkg} {wanted.removeprefix('= ')} (NU1102: no such version; "
                              f"nearest {nearest})")
    return found


def restore_worktree(root: Path, log_dir: Path, env: dict[str, str],
                     deadline_s: float = DEADLINE_S, config: ValidationConfig | None = None
                     ) -> ValidationReport | None:
    """The restore the validation runs, done by the executor before the agent's first attempt
    (outside the sandbox, network allowed), so the agent can build and test `--no-restore`.
    None when there is nothing to restore (no project, or a layout the validation rejects);
    raises ToolMissing without `dotnet`."""
    run, repo = start_run(root, log_dir, deadline_s, env, config)
    if repo.problem or not repo.projects:
        return None
    try:
        build_targets(run, repo, stages=("restore",))
    except StageFailed as failed:
        return failed.report
    return ValidationReport(True, "restore", "restore", "restored", logs=tuple(run.logs))


def build_worktree(root: Path, log_dir: Path, env: dict[str, str],
                   deadline_s: float = DEADLINE_S, config: ValidationConfig | None = None
                   ) -> ValidationReport:
    """Restore and build as the validation does (warnings as errors under `judge: absolute`),
    without evaluating or testing: what QA needs before it runs the application. Raises
    ToolMissing without `dotnet`."""
    run, repo = start_run(root, log_dir, deadline_s, env, config)
    if repo.problem:
        return run.failure("discovery", repo.problem)
    try:
        build_targets(run, repo)
    except StageFailed as failed:
        return failed.report
    target = run.policy.framework if isinstance(run.policy, TargetPolicy) else None
    return ValidationReport(True, "build", "build", "restored and built", logs=tuple(run.logs),
                            target=target)


def find_tests(run: Run, repo: Repo) -> None:
    """After restore, `IsTestProject` of every project as MSBuild evaluates it (so a test SDK
    from Directory.Build.props or a package's .props counts); MTP test apps are refused."""
    mtp = ["-getProperty:IsTestingPlatformApplication"] if run.runner == "mtp" else []
    for project in repo.projects:
        data = msbuild_json(run, "test", project, f"-p:Configuration={run.config.configuration}",
                            "-getProperty:IsTestProject",
                            "-getProperty:TestingPlatformDotnetTestSupport", *mtp)
        props = data.get("Properties", {})
        is_test = str(props.get("IsTestProject", "")).lower() == "true"
        if mtp and is_test and str(props.get("IsTestingPlatformApplication", "")
                                   ).lower() != "true":
            run.fail("test", f"{rel(run.root, project)} is a VSTest project, but global.json's "
                             "test.runner selects Microsoft.Testing.Platform, where every test "
                             "project must be a Microsoft.Testing.Platform application "
                             "(IsTestingPlatformApplication=true, e.g. xunit.v3 or MSTest with "
                             "its runner): move the project to it, or remove test.runner from "
                             "global.json")
        if not mtp and str(props.get("TestingPlatformDotnetTestSupport", "")).lower() == "true":
            run.fail("test", f"{rel(run.root, project)} runs on Microsoft.Testing."
                            "Platform (TestingPlatformDotnetTestSupport=true): `dotnet test "
                            "--logger trx` writes no VSTest TRX there; use the VSTest adapter "
                            "for validation")
        if is_test:
            repo.tests.append(project)
    if not repo.tests:
        run.fail("test", "no test project found (no project evaluates IsTestProject=true "
                        "after restore); zero executed tests is a failure")
    return None


def run_tests(run: Run, repo: Repo) -> None:
    """`dotnet test` per test project, TRX in a fresh directory per call, every TRX judged.
    `absolute` stops at the first failing project; `regressions` collects them all."""
    find_tests(run, repo)
    runtime_env = test_runtime_env(run)
    totals = {"total": 0, "executed": 0, "passed_tests": 0, "failed": 0, "skipped": 0}
    for project in repo.tests:
        name = rel(run.root, project)
        results = run.log_dir / f"trx-{len(run.logs) // 2 + 1:02d}-{uuid.uuid4().hex[:8]}"
        results.mkdir(parents=True)
        args = test_argv(run, project, results)
        result = run.dotnet("test", *args, env=runtime_env)
        verdict = judge_test_run(results, result.exit_code, result.timed_out, run.runner)
        counts = {"total": verdict.total, "executed": verdict.executed,
                  "passed_tests": verdict.passed_count, "failed": verdict.failed,
                  "skipped": verdict.skipped}
        run.projects.append({"project": name, "verdict": verdict.reason, "total": verdict.total,
                             "executed": verdict.executed, "passed": verdict.passed_count,
                             "failed": verdict.failed, "skipped": verdict.skipped,
                             "failed_tests": list(verdict.failing_tests),
                             "skipped_tests": list(verdict.skipped_tests), "trx": verdict.trx})
        for key, value in counts.items():
            totals[key] += value
        broken = verdict.reason not in COMPARABLE or verdict.trx is None or (
            verdict.reason in ("exit code", "failed") and not verdict.failing_tests)
        if not verdict.passed and (run.config.judge == "absolute" or broken):
            run.fail("test", f"{name}: {verdict.reason}: {verdict.detail}",
                            "dotnet " + " ".join(args), result,
                            failing_tests=tuple(verdict.failing_tests), **counts)
    repo.counts = totals
    return None


def test_argv(run: Run, project: Path, results: Path) -> list[str]:
    """`dotnet test` of one project into `results`: VSTest's `--logger trx`, or in
    Microsoft.Testing.Platform mode `--report-trx` (where `-nologo` and `-nodeReuse` are
    unknown options, exit 5)."""
    if run.runner == "mtp":
        return ["test", "--project", str(project), "--no-build", "-c",
                run.config.configuration, "--report-trx", "--report-trx-filename", "results.trx",
                "--results-directory", str(results)]
    return ["test", str(project), "--no-build", "-c", run.config.configuration, *COMMON,
            "--logger", "trx;LogFileName=results.trx", "--results-directory", str(results)]


def outcome_report(run: Run, repo: Repo, baseline: dict | None) -> ValidationReport:
    c = repo.counts
    failing = tuple(t for p in run.projects for t in p["failed_tests"])
    summary = (f"{len(repo.tests)} test project(s): {c['executed']} of {c['total']} tests "
               f"executed, {c['passed_tests']} passed, {c['skipped']} skipped")
    if run.config.judge == "absolute":
        return replace(run.report(True, "test", summary), **c)
    if c["executed"] == 0:
        return replace(run.failure("test", f"{summary}: zero executed tests is a failure, even "
                                "against a baseline"), **c)
    if baseline is None:  # the base tree itself: what it has becomes the baseline
        return replace(run.report(True, "test", f"{summary}; baseline recorded: "
                                  f"{len(run.warnings)} warning(s), {len(failing)} failing "
                                  "test(s)", failing_tests=failing), **c)
    comparison = bl.compare(bl.baseline_of(baseline), run.warnings, run.projects)
    found = bl.regressions(comparison)
    audit = len(found) == 1 and bl.audit_only([w.split(": warning ")[-1].split(":")[0]
                                               for w in comparison["new_warnings"]])
    if found:
        blame = ("environment" if audit and run.config.nuget_audit == "environment"
                 else "attempt")
        note = f"; {bl.audit_advice(comparison['new_warnings'])}" if audit else ""
        return replace(run.report(False, "regressions", "worse than the base: "
                                  + "; ".join(found) + note, failing_tests=failing,
                                  baseline=comparison, blame=blame), **c)
    return replace(run.report(True, "regressions", f"{summary}; no regression against the base "
                              f"({len(comparison['warnings']['base'])} warning(s), "
                              f"{len(comparison['failing_tests']['base'])} failing test(s) "
                              "there already)", failing_tests=failing, baseline=comparison), **c)
