"""The fail-before, pass-after proof (issue 42 item 5): the test methods a step added or changed
since its base commit, applied onto that commit in a scratch worktree, must fail there or not
compile, and pass at the step's head (the attempt's own validation). It runs git through
`gitflow` and dotnet through the validation's `Run`, and returns the proof as data: failing the
attempt, or waiving a test through an approved risk, is the caller's.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path, PurePosixPath

from specops_dag import gitflow
from specops_dag.validation.changeset import read_changeset
from specops_dag.validation.csharp import TestMethod, scan
from specops_dag.validation.dotnet import (
    DEADLINE_S,
    Run,
    StageFailed,
    ValidationReport,
    build_argv,
    check_sdk,
    start_run,
    test_argv,
    test_runtime_env,
)
from specops_dag.validation.integrity import Finding, pair
from specops_dag.validation.trx import MethodResult, TrxCorrupt, judge_test_run, method_results
from specops_dag.workflow.model import ValidationConfig

NOTHING = "no test added or changed"
SCRATCH = ".specops/proof"  # under the harness root: one scratch worktree per node, while it runs
RULE = "passes-at-base"
# Attributes that add or change a test's cases: a new data row is a change of the test.
DATA = frozenset({"InlineData", "MemberData", "ClassData", "TestCase", "TestCaseSource",
                  "DataRow", "DynamicData", "Values", "ValueSource"})


@dataclass(frozen=True)
class ProvenTest:
    """One test method the step added or changed: `name` as the head's TRX names it
    (`Ns.Class.Method`; `Class.Method` when no TRX has it), its outcome at the base (`failed`,
    `did not compile`, `passed`, `skipped`, `not run`) and at the head (the same but `did not
    compile`)."""

    cls: str
    method: str
    path: str
    line: int
    change: str  # added | changed
    name: str = ""
    base: str = "not run"
    head: str = "not run"

    @property
    def short(self) -> str:
        return f"{self.cls}.{self.method}"

    def finding(self, base_commit: str) -> Finding:
        """As a finding of the test-integrity guard, so one risk text waives either."""
        return Finding(self.path, self.line, RULE, f"test `{self.name}` ({self.change}) passes "
                       f"at base commit {base_commit[:12]} and at the head", (self.short,))


@dataclass(frozen=True)
class Proof:
    """`verdict`: `proven`, `passes at base` (a test passed before the step's change),
    NOTHING, or `not finished` (the deadline, or the SDK at the base; `blame` says whose)."""

    base_commit: str
    verdict: str
    detail: str
    tests: tuple[ProvenTest, ...] = ()
    compile_error: str | None = None
    base_trx: tuple[str, ...] = ()
    head_trx: tuple[str, ...] = ()
    duration_s: float = 0.0
    blame: str = "attempt"

    @property
    def passing(self) -> list[ProvenTest]:
        return [t for t in self.tests if t.base == "passed"]

    def as_record(self, waived: set[str] = frozenset()) -> dict:
        """The step's `proof` record; `waived`: the `Class.Method` of tests a risk waived."""
        tests = [{"name": t.name, "path": t.path, "line": t.line, "change": t.change,
                  "base": t.base, "head": t.head, "waived": t.short in waived}
                 for t in self.tests]
        return {**{k: v for k, v in asdict(self).items() if k not in ("tests", "blame")},
                "base_trx": list(self.base_trx), "head_trx": list(self.head_trx),
                "tests": tests}


@dataclass(frozen=True)
class Selection:
    """The tests to prove and the test-project files that carry them onto the base."""

    tests: tuple[ProvenTest, ...]
    copy: tuple[str, ...]  # added or changed since the base: copied from the head
    delete: tuple[str, ...]  # deleted since the base


def select(tree: Path, base_commit: str, test_projects: list[str]) -> Selection:
    """The test methods added or changed in the test projects (repo-relative .csproj paths) of
    the tree on disk, committed or not, against `base_commit`: by the guard's own reading and
    pairing (`integrity.pair`), a test whose body or data rows differ counts as changed, a
    renamed or moved one does not."""
    dirs = [PurePosixPath(p).parent for p in test_projects]

    def inside(path: str) -> bool:
        return any(PurePosixPath(path).is_relative_to(d) for d in dirs)

    src = read_changeset(tree, base_commit)
    base = [t for p, text in src.base.items() if p.lower().endswith(".cs") and inside(p)
            for t in scan(text, p)]
    now = [t for p, text in src.now.items() if inside(p) for t in scan(text, p)]
    pairs, _, new = pair(base, now)
    found = [(n, "added") for n in new] + [(n, "changed") for b, n in pairs if _differs(b, n)]
    tests = tuple(ProvenTest(n.cls, n.name, n.path, n.line, change, name=n.full_name)
                  for n, change in sorted(found, key=lambda f: (f[0].path, f[0].line)))
    kept = {p: s for p, s in src.changed.items() if inside(p)}
    return Selection(tests, tuple(sorted(p for p, s in kept.items() if s != "D")),
                     tuple(sorted(p for p, s in kept.items() if s == "D")))


def _differs(b: TestMethod, n: TestMethod) -> bool:
    def rows(t: TestMethod) -> list[tuple[str, str]]:
        return [(a.name, a.args) for a in t.attributes if a.name in DATA]

    return b.body_hash != n.body_hash or rows(b) != rows(n)


def prove(tree: Path, base_commit: str, head: ValidationReport, *, scratch: Path,
          log_dir: Path, env: dict[str, str], config: ValidationConfig,
          deadline_s: float = DEADLINE_S, shown_from: Path | None = None) -> Proof:
    """Prove the tests the step added or changed in `tree` (whose validation `head` passed):
    applied onto `base_commit` in a scratch worktree at `scratch` (removed afterwards, also on
    failure), they must fail or not compile there. `deadline_s` is what is left of the
    validation's deadline; TRX paths are shown relative to `shown_from`. Raises GitError when
    git cannot compare or check out the base, ToolMissing without `dotnet`."""
    started = time.monotonic()
    projects = [p["project"] for p in head.projects]
    chosen = select(tree, base_commit, projects)
    head_runs = {p["project"]: p.get("trx") for p in head.projects}
    tests = tuple(_at_head(t, _owner(t, projects), head_runs) for t in chosen.tests)
    head_trx = tuple(_shown(Path(t), shown_from) for t in head_runs.values() if t)
    if not tests:
        return Proof(base_commit, NOTHING, f"{NOTHING} since {base_commit[:12]}",
                     head_trx=head_trx, duration_s=round(time.monotonic() - started, 3))
    shutil.rmtree(log_dir, ignore_errors=True)
    if scratch.exists():  # left by a run that was killed
        gitflow.remove_worktree(tree, scratch)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    gitflow.add_detached_worktree(tree, scratch, base_commit)
    try:
        for rel in chosen.copy:
            (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(tree / rel, scratch / rel)
        for rel in chosen.delete:
            (scratch / rel).unlink(missing_ok=True)
        left = deadline_s - (time.monotonic() - started)
        proof = _at_base(scratch, base_commit, tests, sorted({_owner(t, projects) for t in tests}),
                         log_dir, env, config, left, shown_from)
    finally:
        gitflow.remove_worktree(tree, scratch)
    return replace(proof, head_trx=head_trx, duration_s=round(time.monotonic() - started, 3))


def _owner(test: ProvenTest, projects: list[str]) -> str:
    """The test project whose folder holds the test's file (the deepest one)."""
    return max((p for p in projects
                if PurePosixPath(test.path).is_relative_to(PurePosixPath(p).parent)),
               key=lambda p: len(PurePosixPath(p).parts))


def _at_head(test: ProvenTest, project: str, trx: dict[str, str | None]) -> ProvenTest:
    found = _results(trx.get(project), test)
    name = found[0].full_name if found else test.name
    return replace(test, name=name, head=_outcome(found))


def _results(trx: str | None, test: ProvenTest) -> list[MethodResult]:
    if not trx:
        return []
    try:
        results = method_results(Path(trx))
    except TrxCorrupt:
        return []
    return sorted((r for r in results if r.method == test.method
                   and r.class_name.replace("+", ".").rsplit(".", 1)[-1] == test.cls),
                  key=lambda r: r.full_name)


def _outcome(results: list[MethodResult]) -> str:
    """A method's outcome over its results (a theory's rows): one that failed fails it."""
    if not results:
        return "not run"
    if any(r.outcome not in ("Passed", "NotExecuted") for r in results):
        return "failed"
    return "passed" if any(r.outcome == "Passed" for r in results) else "skipped"


def _at_base(scratch: Path, base_commit: str, tests: tuple[ProvenTest, ...],
             projects: list[str], log_dir: Path, env: dict[str, str],
             config: ValidationConfig, deadline_s: float, shown_from: Path | None) -> Proof:
    """Restore, build and test each test project of `tests` in the scratch tree, as the
    validation does but without -warnaserror: a warning is not a test that fails."""
    run, repo = start_run(scratch, log_dir, max(deadline_s, 0.0), env,
                          config.model_copy(update={"judge": "regressions"}))
    outcomes: dict[str, dict[str, str] | str] = {}
    first_error, trx = None, []
    try:
        check_sdk(run, repo)
        for project in projects:
            error = _build(run, run.root / project)
            if error is not None:
                outcomes[project] = "did not compile"
                first_error = first_error or error
                continue
            path = _test(run, run.root / project)
            outcomes[project] = "not run"  # no TRX: the test host never reported
            if path is not None:
                trx.append(_shown(Path(path), shown_from))
                outcomes[project] = {t.short: _outcome(_results(path, t)) for t in tests}
    except StageFailed as failed:
        return _unfinished(run, failed.report, base_commit, tests)
    done = tuple(replace(t, base=o if isinstance(o := outcomes[_owner(t, projects)], str)
                         else o[t.short]) for t in tests)
    verdict = "passes at base" if any(t.base == "passed" for t in done) else "proven"
    return Proof(base_commit, verdict, _detail(done, base_commit), done, first_error,
                 tuple(trx))


def _build(run: Run, project: Path) -> str | None:
    """Restore and build one project; the first compiler (or restore) error when it fails."""
    for stage in ("restore", "build"):
        result = run.dotnet(stage, *build_argv(run, stage, project))
        if result.exit_code != 0:
            errors = [ln.strip() for ln in result.stdout.splitlines() if ": error " in ln]
            said = errors[0] if errors else f"`dotnet {stage}` exited {result.exit_code}"
            return said.replace(f"{run.root}/", "")
    return None


def _test(run: Run, project: Path) -> str | None:
    """`dotnet test` of one built project into a fresh folder; its TRX, when there is one."""
    results = run.log_dir / f"trx-{len(run.logs) // 2 + 1:02d}-{uuid.uuid4().hex[:8]}"
    results.mkdir(parents=True)
    result = run.dotnet("test", *test_argv(run, project, results), env=test_runtime_env(run))
    return judge_test_run(results, result.exit_code, result.timed_out, run.runner).trx


def _unfinished(run: Run, report: ValidationReport, base_commit: str,
                tests: tuple[ProvenTest, ...]) -> Proof:
    timed_out = any(c["timed_out"] for c in run.commands) or "deadline ran out" in report.message
    why = (f"the validation's {DEADLINE_S:g} s deadline, which the proof shares, ran out at the "
           f"base's `{report.stage}`; make the build and the tests faster" if timed_out
           else f"`{report.stage}` at the base: {report.message}")
    return Proof(base_commit, "not finished", f"fail-before proof: not finished: {why}", tests,
                 blame="attempt" if timed_out else report.blame)


def _detail(tests: tuple[ProvenTest, ...], base_commit: str) -> str:
    def counts(outcomes: list[str]) -> str:
        return ", ".join(f"{n} {o}" for o, n in Counter(outcomes).most_common())

    return (f"{len(tests)} test(s) added or changed since {base_commit[:12]}: at the base "
            f"{counts([t.base for t in tests])}; at the head {counts([t.head for t in tests])}")


def _shown(path: Path, root: Path | None) -> str:
    return (path.relative_to(root).as_posix() if root is not None and path.is_relative_to(root)
            else str(path))


def summary(tests: list[ProvenTest], base_commit: str, delivery: str,
            risk_path: str = "risk.md") -> str:
    """The attempt's failure text: each test that passes at the base, and what to do."""
    n = len(tests)
    head = (f"fail-before proof: {n} test{'s' if n != 1 else ''} the step added or changed "
            f"already pass{'es' if n == 1 else ''} at base commit {base_commit[:12]}, so "
            f"{'it proves' if n == 1 else 'they prove'} nothing about this change:")
    tail = ("Make each one exercise the new behaviour (it must fail, or not compile, against "
            f"the base), or raise a risk ({risk_path}) that names each one (`Class.Method` or "
            f"its path) for a person to approve with `specops approve {delivery} risk`.")
    return "\n".join([head, *(f"- {t.path}:{t.line}: `{t.name}` ({t.change}) passed at the "
                              f"base, {t.head} at the head" for t in tests), tail])
