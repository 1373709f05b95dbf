"""Reads the TRX file one `dotnet test` (VSTest) call writes and turns it into a verdict, following
the verdict algorithm of reference dotnet-validation.md §5–§6. Reading only: it never runs dotnet
and never writes a file; a broken TRX is a verdict (`corrupt`), not an exception to the caller.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path

from specops_dag.errors import SpecopsError

NS = "http://microsoft.com/schemas/VisualStudio/TeamTest/2010"
COUNTERS = ("total", "executed", "passed", "failed")
OK_RESULTS = ("Passed", "NotExecuted")
# Microsoft.Testing.Platform's TrxReportEngine writes these two GUIDs as string literals with
# upper-case hex; VSTest's TrxLogger writes them through Guid.ToString(), always lower case. The
# test list is written even when no test ran, so the rule also catches an MTP zero-test TRX.
MTP_TEST_TYPE = "13CDC9D9-DDB5-4fa4-A97D-D965CCFC6D4B"
MTP_TEST_LIST = "8C84FA94-04C1-424b-9868-57A2D4851A1D"
# Microsoft.Testing.Platform's exit codes (reference dotnet-validation.md §5), named in a verdict.
MTP_EXIT = {1: "unknown error", 2: "a test failed", 3: "the run was aborted",
            4: "invalid extension setup", 5: "invalid arguments", 6: "not implemented",
            7: "the test process crashed", 8: "zero tests ran",
            9: "fewer tests ran than the minimum expected", 10: "framework infrastructure failure",
            11: "a dependent process exited", 12: "protocol mismatch",
            13: "the maximum of failed tests was reached"}
NAMES_SHOWN = 5
TEXT_SHOWN = 200


@dataclass(frozen=True)
class TrxRun:
    """What one TRX file says."""

    outcome: str
    total: int
    executed: int
    passed: int
    failed: int
    result_outcomes: tuple[str, ...]
    failing_tests: tuple[str, ...]
    error_infos: tuple[str, ...]
    mtp: bool
    skipped_tests: tuple[str, ...] = ()
    passed_tests: tuple[str, ...] = ()


class TrxCorrupt(SpecopsError):
    """The file is not a readable TRX; `why` says what is wrong, the message adds the path."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


@dataclass(frozen=True)
class TestVerdict:
    """The verdict on one `dotnet test` call; `detail` is one sentence for a human."""

    __test__ = False  # not a pytest class, despite the name

    passed: bool
    reason: str
    detail: str
    total: int = 0
    executed: int = 0
    passed_count: int = 0
    failed: int = 0
    skipped: int = 0
    failing_tests: tuple[str, ...] = ()
    trx: str | None = None
    skipped_tests: tuple[str, ...] = ()


def parse_trx(path: Path) -> TrxRun:
    """Parse a TRX (UTF-8 with or without BOM, LF or CRLF). Raises `TrxCorrupt` when the file is
    empty or unreadable, is not XML, has a root other than `{NS}TestRun`, lacks `ResultSummary`,
    its `outcome` or `Counters`, or has a `total`/`executed`/`passed`/`failed` that is not a
    non-negative integer. An MTP-written TRX parses (with `mtp=True`); judging it is not done here.
    """
    try:
        data = path.read_bytes()
    except OSError as err:
        raise TrxCorrupt(path, f"cannot be read ({err.strerror})") from err
    if not data:
        raise TrxCorrupt(path, "the file is empty (0 bytes; the run stopped before writing it)")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as err:
        raise TrxCorrupt(path, f"not well-formed XML ({err})") from err
    if root.tag != f"{{{NS}}}TestRun":
        ns, _, local = root.tag.lstrip("{").rpartition("}")
        found = f"<{local}> in namespace {ns}" if ns else f"<{local}> with no namespace"
        raise TrxCorrupt(path, f"the root element is {found}, not <TestRun> in namespace {NS}")
    summary = root.find(f"{{{NS}}}ResultSummary")
    if summary is None:
        raise TrxCorrupt(path, "no <ResultSummary> under <TestRun>")
    outcome = summary.get("outcome")
    if outcome is None:
        raise TrxCorrupt(path, "<ResultSummary> has no outcome attribute")
    counts = _counters(path, summary)
    results = root.findall(f".//{{{NS}}}UnitTestResult")
    failing = tuple(_test_name(r) for r in results if r.get("outcome") not in OK_RESULTS)
    errors = tuple(
        info.findtext(f"{{{NS}}}Text", default="")
        for info in summary.iter(f"{{{NS}}}RunInfo")
        if info.get("outcome") == "Error"
    )
    mtp = any(r.get("testType") == MTP_TEST_TYPE for r in results) or any(
        lst.get("id") == MTP_TEST_LIST for lst in root.iter(f"{{{NS}}}TestList")
    )
    skipped = tuple(_test_name(r) for r in results if r.get("outcome") == "NotExecuted")
    passed = tuple(_test_name(r) for r in results if r.get("outcome") == "Passed")
    return TrxRun(outcome, *counts, tuple(r.get("outcome", "") for r in results), failing, errors,
                  mtp, skipped, passed)


@dataclass(frozen=True)
class MethodResult:
    """One UnitTestResult with the test method it ran: `class_name` as the TRX's TestMethod
    names it (`Ns.Class`, `Ns.Outer+Inner` for a nested class), `method` the method's own name
    (no class, no data-row arguments), `outcome` the result's (Passed, Failed, NotExecuted…)."""

    class_name: str
    method: str
    outcome: str

    @property
    def full_name(self) -> str:
        return f"{self.class_name}.{self.method}"


def method_results(path: Path) -> tuple[MethodResult, ...]:
    """Every result of the TRX at `path` joined by its testId with its <UnitTest>'s
    <TestMethod className name>; a result whose test has no definition or no class is left out
    (MSTest's inner data rows: their parent carries the outcome; MTP's class cleanup failures).
    Raises `TrxCorrupt` as `parse_trx`."""
    parse_trx(path)
    root = ET.fromstring(path.read_bytes())
    methods = {}
    for test in root.iter(f"{{{NS}}}UnitTest"):
        method = test.find(f"{{{NS}}}TestMethod")
        if method is not None and test.get("id") and method.get("className"):
            cls, name = method.get("className", ""), method.get("name", "")
            name = name.removeprefix(f"{cls}.").split("(")[0].strip()
            methods[test.get("id")] = (cls, name.rsplit(".", 1)[-1])
    return tuple(MethodResult(*methods[r.get("testId")], r.get("outcome", ""))
                 for r in root.iter(f"{{{NS}}}UnitTestResult") if r.get("testId") in methods)


def _counters(path: Path, summary: ET.Element) -> tuple[int, int, int, int]:
    counters = summary.find(f"{{{NS}}}Counters")
    if counters is None:
        raise TrxCorrupt(path, "no <Counters> in <ResultSummary>")
    values = []
    for name in COUNTERS:
        raw = counters.get(name)
        if raw is None:
            raise TrxCorrupt(path, f"<Counters> has no {name} attribute")
        if not (raw.strip().isascii() and raw.strip().isdigit()):
            raise TrxCorrupt(path, f'<Counters {name}="{raw}"> is not a non-negative integer')
        values.append(int(raw))
    return values[0], values[1], values[2], values[3]


def _test_name(result: ET.Element) -> str:
    return result.get("testName") or result.get("testId") or "(unnamed test)"


def judge_test_run(results_dir: Path, exit_code: int | None, timed_out: bool,
                   runner: str = "vstest") -> TestVerdict:
    """Judge one `dotnet test` call by the TRX it wrote into `results_dir` (VSTest's `--logger
    trx`, or Microsoft.Testing.Platform's `--report-trx` when `runner` is "mtp"); the first
    matching rule wins (reference dotnet-validation.md §6). A non-zero exit code fails the call
    but never passes it: the TRX must pass too. Detail wording, `<name>` being the TRX file name
    (the full path is in `trx`):

    - timeout: `the test run was killed at the deadline before it finished; no TRX was judged`
    - exit code: `the test run exited with code 1; <detail of the TRX verdict below>`, or when the
      TRX passes: `the test run exited with code 1 but its TRX shows no failure (<pass detail>)`;
      a negative code reads `was killed by signal 9`, None reads `ended without an exit code`;
      under MTP the code is named: `exited with code 8 (Microsoft.Testing.Platform: zero tests
      ran)`.
      Counts, failing tests and `trx` come from the TRX when it parses.
    - missing: `no *.trx file in <dir>: dotnet test wrote no TRX (a project without
      <IsTestProject>true</IsTestProject> is skipped silently; a Microsoft.Testing.Platform
      project ignores --logger trx)`
    - ambiguous: `2 *.trx files in <dir> (a.trx, b.trx); expected exactly one (a multi-targeted
      project writes one TRX per target framework)`
    - corrupt: `<name> is corrupt: <TrxCorrupt.why>`
    - mtp: `<name> was written by Microsoft.Testing.Platform's TrxReport, not VSTest (outcome
      Failed: 4 total, 1 passed, 3 failed): the test project uses Microsoft.Testing.Platform,
      where --logger trx is ignored; run it under VSTest (no
      <TestingPlatformDotnetTestSupport>true</TestingPlatformDotnetTestSupport>)`
    - failed: `<name>: 3 of 6 executed tests failed: A, B, C` (at most 5 names, then ` and 2
      more`); with no failing test but an error RunInfo: `<name>: run outcome Failed, 0 of 0
      tests executed, 0 failed; error: <first line of the first error>` (+ ` (+1 more error)`);
      otherwise `<name>: run outcome Error, not Completed (6 of 7 tests executed, 0 failed)`
    - zero tests: `<name>: no tests were found (total 0); check that the project references a
      test adapter (xunit.runner.visualstudio, MSTest.TestAdapter, NUnit3TestAdapter) and that
      no --filter excludes every test`
    - skip-only: `<name>: every test was skipped (21 total, 0 executed, 0 passed)`
    - passed: `<name>: 10 of 10 executed tests passed, 11 skipped, 21 total`
    """
    if timed_out:
        return TestVerdict(False, "timeout", "the test run was killed at the deadline before it "
                           "finished; no TRX was judged")
    verdict = _judge_trx(results_dir, runner)
    if exit_code == 0:
        return verdict
    if exit_code is None:
        ended = "the test run ended without an exit code"
    elif exit_code < 0:
        ended = f"the test run was killed by signal {-exit_code}"
    else:
        ended = f"the test run exited with code {exit_code}"
        if runner == "mtp" and exit_code in MTP_EXIT:
            ended += f" (Microsoft.Testing.Platform: {MTP_EXIT[exit_code]})"
    detail = (f"{ended} but its TRX shows no failure ({verdict.detail})" if verdict.passed
              else f"{ended}; {verdict.detail}")
    return replace(verdict, passed=False, reason="exit code", detail=detail)


def _judge_trx(results_dir: Path, runner: str) -> TestVerdict:
    found = sorted(results_dir.glob("*.trx"))
    if not found:
        return TestVerdict(False, "missing", f"no *.trx file in {results_dir}: dotnet test wrote "
                           "no TRX (a project without <IsTestProject>true</IsTestProject> is "
                           "skipped silently; a Microsoft.Testing.Platform project ignores "
                           "--logger trx)")
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        return TestVerdict(False, "ambiguous", f"{len(found)} *.trx files in {results_dir} "
                           f"({names}); expected exactly one (a multi-targeted project writes one "
                           "TRX per target framework)")
    path = found[0]
    try:
        run = parse_trx(path)
    except TrxCorrupt as err:
        return TestVerdict(False, "corrupt", f"{path.name} is corrupt: {err.why}", trx=str(path))
    reason, detail = _rule(path.name, run, runner)
    return TestVerdict(
        reason == "passed", reason, detail, total=run.total, executed=run.executed,
        passed_count=run.passed, failed=run.failed, skipped=max(run.total - run.executed, 0),
        failing_tests=run.failing_tests, trx=str(path), skipped_tests=run.skipped_tests)


def _rule(name: str, run: TrxRun, runner: str) -> tuple[str, str]:
    if run.mtp and runner != "mtp":
        return "mtp", (
            f"{name} was written by Microsoft.Testing.Platform's TrxReport, not VSTest (outcome "
            f"{run.outcome}: {run.total} total, {run.passed} passed, {run.failed} failed): the "
            "test project uses Microsoft.Testing.Platform, where --logger trx is ignored; run it "
            "under VSTest (no <TestingPlatformDotnetTestSupport>true"
            "</TestingPlatformDotnetTestSupport>)")
    # MTP's TRX of a run with no test says Failed (the exit code 8 as its error): zero tests.
    empty = run.total == 0 and not run.failing_tests and runner == "mtp"
    if not empty and (run.outcome != "Completed" or run.failed or run.failing_tests
                      or run.error_infos):
        return "failed", f"{name}: {_failure(run)}"
    if run.total == 0:
        check = ("the test application defines tests" if runner == "mtp" else
                 "the project references a test adapter (xunit.runner.visualstudio, "
                 "MSTest.TestAdapter, NUnit3TestAdapter)")
        return "zero tests", (f"{name}: no tests were found (total 0); check that {check} and "
                              "that no --filter excludes every test")
    if run.executed == 0 or "Passed" not in run.result_outcomes:
        return "skip-only", (f"{name}: every test was skipped ({run.total} total, "
                             f"{run.executed} executed, {run.passed} passed)")
    skipped = max(run.total - run.executed, 0)
    return "passed", (f"{name}: {run.passed} of {run.executed} executed tests passed, "
                      f"{skipped} skipped, {run.total} total")


def _failure(run: TrxRun) -> str:
    if run.failed or run.failing_tests:
        count = run.failed or len(run.failing_tests)
        shown = ", ".join(run.failing_tests[:NAMES_SHOWN])
        more = len(run.failing_tests) - NAMES_SHOWN
        names = f": {shown}" + (f" and {more} more" if more > 0 else "") if shown else ""
        return f"{count} of {run.executed} executed tests failed{names}"
    counts = f"{run.executed} of {run.total} tests executed, {run.failed} failed"
    if run.error_infos:
        first = (run.error_infos[0].strip().splitlines() or [""])[0].strip()
        if len(first) > TEXT_SHOWN:
            first = first[: TEXT_SHOWN - 1] + "…"
        more = len(run.error_infos) - 1
        extra = f" (+{more} more error{'s' if more > 1 else ''})" if more else ""
        return f"run outcome {run.outcome}, {counts}; error: {first}{extra}"
    return f"run outcome {run.outcome}, not Completed ({counts})"
