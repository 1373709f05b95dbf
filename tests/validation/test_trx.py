"""TRX parsing and the verdict on one `dotnet test` call, against the real TRX samples and the
derived variants in tests/data/trx/ (see SOURCES.md there)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from specops_dag.errors import SpecopsError
from specops_dag.validation.trx import (
    NS,
    TestVerdict,
    TrxCorrupt,
    TrxRun,
    judge_test_run,
    method_results,
    parse_trx,
)

from ..support.harness import REPO

DATA = Path(__file__).resolve().parents[1] / "data" / "trx"
SHARED = REPO.parent / "shared" / "dotnet-samples" / "trx"
REAL = sorted(p.name for p in DATA.glob("*.trx") if not p.name.startswith("derived-"))

MSTEST_FAILING = ("TestThrowingException", "FailTest", "TestTheory (False)")
XUNIT_FAILING = ("SampleProject.xUnit.TestServiceTests.FailTest",
                 "SampleProject.xUnit.TestServiceTests.TestTheory(expected: False)",
                 "SampleProject.xUnit.TestServiceTests.TestThrowingException")
MTP_FAILING = ("DotnetTests.XUnitV3Tests.FixtureTests.Failing_Test",
               "[Test Class Cleanup Failure (DotnetTests.XUnitV3Tests.FixtureTests.Passing_Test)]",
               "[Test Class Cleanup Failure (DotnetTests.XUnitV3Tests.FixtureTests.Failing_Test)]")
SKIPS_OUTCOMES = ("NotExecuted", "Passed", "Passed", "Passed", "NotExecuted", "NotExecuted", "Passed",
                  "NotExecuted", "Passed", "Passed", "NotExecuted", "Passed", "NotExecuted",
                  "NotExecuted", "NotExecuted", "Passed", "Passed", "NotExecuted", "Passed",
                  "NotExecuted", "NotExecuted")
SINGLE = TrxRun("Completed", 1, 1, 1, 0, ("Passed",), (), (), False)
CRASHED = "The active test run was aborted. Reason: Test host process crashed"
TESTHOST = "Testhost process exited with error: It was not possible to find any compatible framework version"
MISSING_TAIL = ("dotnet test wrote no TRX (a project without <IsTestProject>true</IsTestProject> is "
                "skipped silently; a Microsoft.Testing.Platform project ignores --logger trx)")


def results_dir(tmp_path: Path, *files: str, name: str = "results.trx") -> Path:
    """A fresh results directory holding the given data files (one is renamed to `name`)."""
    out = tmp_path / "results"
    out.mkdir()
    for i, src in enumerate(files):
        shutil.copyfile(DATA / src, out / (name if len(files) == 1 else f"{i}-{src}"))
    return out


def edited(tmp_path: Path, src: str, *edits: tuple[str, str]) -> Path:
    """A results dir with `src` as results.trx after exact, single-occurrence text edits."""
    text = (DATA / src).read_text(encoding="utf-8-sig")
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    out = tmp_path / "results"
    out.mkdir()
    (out / "results.trx").write_text(text, encoding="utf-8")
    return out


# --- the data files ---------------------------------------------------------------------------


def test_the_real_samples_are_all_copied_and_named_in_sources_md() -> None:
    assert REAL == ["mtp-xunitv3-net8-failed.trx", "vstest-mstest-passed-single.trx",
                    "vstest-mstest-passed-with-skips.trx", "vstest-net8-mstest-failed-with-skip.trx",
                    "vstest-net8-xunit-failed-with-skip.trx", "vstest-testhost-failed-to-start.trx",
                    "vstest-xunit-zero-tests.trx"]
    sources = (DATA / "SOURCES.md").read_text(encoding="utf-8")
    for path in DATA.glob("*.trx"):
        assert f"`{path.name}`" in sources, path.name


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared dotnet-samples folder is not here")
@pytest.mark.parametrize("name", REAL)
def test_each_real_sample_is_a_byte_for_byte_copy_of_the_shared_sample(name: str) -> None:
    assert (DATA / name).read_bytes() == (SHARED / name).read_bytes()


# --- parse_trx on real samples ----------------------------------------------------------------


PARSED = [
    pytest.param("vstest-mstest-passed-single.trx", SINGLE, id="passed-single"),
    pytest.param("vstest-mstest-passed-with-skips.trx",
                 TrxRun("Completed", 21, 10, 10, 0, SKIPS_OUTCOMES, (), (), False),
                 id="passed-with-skips"),
    pytest.param("vstest-net8-mstest-failed-with-skip.trx",
                 TrxRun("Failed", 7, 6, 3, 3, ("Passed", "NotExecuted", "Failed", "Passed", "Passed",
                                               "Failed", "Failed"), MSTEST_FAILING, (), False),
                 id="mstest-failed"),
    pytest.param("vstest-net8-xunit-failed-with-skip.trx",
                 TrxRun("Failed", 7, 6, 3, 3, ("Failed", "NotExecuted", "Passed", "Failed", "Passed",
                                               "Passed", "Failed"), XUNIT_FAILING,
                        ("[xUnit.net 00:00:00.19]     SampleProject.xUnit.TestServiceTests.TestThrowingException [FAIL]",
                         "[xUnit.net 00:00:00.20]     SampleProject.xUnit.TestServiceTests.TestTheory(expected: False) [FAIL]",
                         "[xUnit.net 00:00:00.20]     SampleProject.xUnit.TestServiceTests.FailTest [FAIL]"),
                        False),
                 id="xunit-failed"),
    pytest.param("vstest-xunit-zero-tests.trx", TrxRun("Completed", 0, 0, 0, 0, (), (), (), False),
                 id="zero-tests"),
    pytest.param("vstest-testhost-failed-to-start.trx",
                 TrxRun("Failed", 0, 0, 0, 0, (), (), (TESTHOST + "\n",), False), id="testhost"),
    pytest.param("mtp-xunitv3-net8-failed.trx",
                 TrxRun("Failed", 4, 4, 1, 3, ("Failed", "Passed", "Failed", "Failed"), MTP_FAILING,
                        ("Exit code indicates failure: '2'. Please refer to "
                         "https://aka.ms/testingplatform/exitcodes for more information.",), True),
                 id="mtp"),
    pytest.param("derived-crlf.trx", SINGLE, id="derived-crlf"),
    pytest.param("derived-skip-only.trx",
                 TrxRun("Completed", 21, 0, 0, 0, ("NotExecuted",) * 21, (), (), False),
                 id="derived-skip-only"),
    pytest.param("derived-host-crashed.trx",
                 TrxRun("Failed", 1, 1, 1, 0, ("Passed",), (), (CRASHED,), False),
                 id="derived-host-crashed"),
]


@pytest.mark.parametrize(("name", "expected"), PARSED)
def test_parse_trx_reads_every_field_of_each_sample_exactly(name: str, expected: TrxRun) -> None:
    run = parse_trx(DATA / name)
    # error_infos of `expected` are prefixes: the test-host text goes on for several lines.
    assert replace(run, error_infos=(), skipped_tests=(), passed_tests=()) == replace(
        expected, error_infos=())
    assert len(run.skipped_tests) == run.result_outcomes.count("NotExecuted")
    assert len(run.passed_tests) == run.result_outcomes.count("Passed")
    assert len(run.error_infos) == len(expected.error_infos)
    for text, prefix in zip(run.error_infos, expected.error_infos, strict=True):
        assert text.startswith(prefix), text


def test_parse_trx_names_the_passed_tests_as_the_trx_does() -> None:
    assert parse_trx(DATA / "vstest-mstest-passed-single.trx").passed_tests == ("TestMethod1",)
    assert "SampleProject.xUnit.TestServiceTests.PassingTest" in parse_trx(
        DATA / "vstest-net8-xunit-failed-with-skip.trx").passed_tests


def test_each_result_is_named_by_its_class_and_method_whatever_the_adapter_calls_the_test(
        ) -> None:
    def named(sample: str) -> list[tuple[str, str]]:
        return [(r.full_name, r.outcome) for r in method_results(DATA / sample)]

    # MSTest's testName is the bare method; xUnit's has the namespace and a theory row's data
    assert named("vstest-mstest-passed-single.trx") == [("dummy_tests.DummyTest1.TestMethod1",
                                                         "Passed")]
    assert named("vstest-net8-xunit-failed-with-skip.trx")[:4] == [
        ("SampleProject.xUnit.TestServiceTests.FailTest", "Failed"),
        ("SampleProject.xUnit.TestServiceTests.SkipTest", "NotExecuted"),
        ("SampleProject.xUnit.TestServiceTests.TestTheory", "Passed"),
        ("SampleProject.xUnit.TestServiceTests.TestTheory", "Failed")]
    # MTP names the method with its class; its class cleanup failures belong to no method
    assert named("mtp-xunitv3-net8-failed.trx") == [
        ("DotnetTests.XUnitV3Tests.FixtureTests.Failing_Test", "Failed"),
        ("DotnetTests.XUnitV3Tests.FixtureTests.Passing_Test", "Passed")]
    with pytest.raises(TrxCorrupt):
        method_results(DATA / "derived-not-xml.trx")


def test_skipped_tests_are_named_from_their_not_executed_results() -> None:
    run = parse_trx(DATA / "vstest-net8-xunit-failed-with-skip.trx")
    assert run.skipped_tests == tuple(
        r for r, o in zip(_names(DATA / "vstest-net8-xunit-failed-with-skip.trx"),
                          run.result_outcomes, strict=True) if o == "NotExecuted")
    assert len(run.skipped_tests) == 1


def _names(path: Path) -> list[str]:
    import xml.etree.ElementTree as ET

    ns = "{http://microsoft.com/schemas/VisualStudio/TeamTest/2010}"
    return [r.get("testName") for r in ET.parse(path).getroot().iter(f"{ns}UnitTestResult")]


def test_the_test_host_error_text_is_kept_whole_with_its_line_breaks() -> None:
    (text,) = parse_trx(DATA / "vstest-testhost-failed-to-start.trx").error_infos
    assert len(text.splitlines()) == 8
    assert "framework_version=3.1.0&arch=x64" in text  # &amp; is decoded
    assert text.endswith(". Please check the diagnostic logs for more information.")


def test_a_bom_and_crlf_line_endings_do_not_change_what_is_read() -> None:
    assert (DATA / "derived-crlf.trx").read_bytes().startswith(b"\xef\xbb\xbf<?xml")
    assert b"\r\n" in (DATA / "derived-crlf.trx").read_bytes()
    assert parse_trx(DATA / "derived-crlf.trx") == parse_trx(DATA / "vstest-mstest-passed-single.trx")


def test_unit_test_results_are_found_inside_inner_results_too(tmp_path) -> None:
    inner = (f'<InnerResults><UnitTestResult testName="TestMethod1 (row 2)" outcome="Failed" '
             f'xmlns="{NS}" /></InnerResults></UnitTestResult>')
    d = edited(tmp_path, "vstest-mstest-passed-single.trx",
               ('relativeResultsDirectory="b12e5ed8-c0b7-47e7-b76b-4b3c9d262807" />',
                f'relativeResultsDirectory="b12e5ed8-c0b7-47e7-b76b-4b3c9d262807">{inner}'))
    run = parse_trx(d / "results.trx")
    assert run.result_outcomes == ("Passed", "Failed")
    assert run.failing_tests == ("TestMethod1 (row 2)",)


# --- the MTP rule -----------------------------------------------------------------------------


MTP_TYPE = ('testType="13CDC9D9-DDB5-4fa4-A97D-D965CCFC6D4B"', 'testType="13cdc9d9-ddb5-4fa4-a97d-d965ccfc6d4b"')
MTP_LIST = ('<TestList name="Results Not in a List" id="8C84FA94-04C1-424b-9868-57A2D4851A1D" />',
            '<TestList name="Results Not in a List" id="8c84fa94-04c1-424b-9868-57a2d4851a1d" />')


def mtp_sample_with(tmp_path: Path, lower_type: bool, lower_list: bool) -> Path:
    text = (DATA / "mtp-xunitv3-net8-failed.trx").read_text(encoding="utf-8-sig")
    assert text.count(MTP_TYPE[0]) == 4 and text.count(MTP_LIST[0]) == 1
    if lower_type:
        text = text.replace(*MTP_TYPE)
    if lower_list:
        text = text.replace(*MTP_LIST)
    path = tmp_path / "results.trx"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("lower_type", "lower_list", "mtp"), [
    pytest.param(False, False, True, id="both-mtp-guids"),
    pytest.param(True, False, True, id="test-list-alone-as-in-a-zero-test-mtp-run"),
    pytest.param(False, True, True, id="test-type-alone"),
    pytest.param(True, True, False, id="both-lower-case-as-vstest-writes-them"),
])
def test_mtp_is_recognised_by_its_upper_case_test_type_or_test_list_guid(
        tmp_path, lower_type: bool, lower_list: bool, mtp: bool) -> None:
    assert parse_trx(mtp_sample_with(tmp_path, lower_type, lower_list)).mtp is mtp


def test_a_vstest_trx_with_the_mtp_test_list_guid_counts_as_mtp(tmp_path) -> None:
    d = edited(tmp_path, "vstest-xunit-zero-tests.trx", (MTP_LIST[1], MTP_LIST[0]))
    assert parse_trx(d / "results.trx").mtp is True


@pytest.mark.parametrize("name", [n for n in REAL if n.startswith("vstest-")])
def test_no_real_vstest_sample_is_taken_for_mtp(name: str) -> None:
    assert parse_trx(DATA / name).mtp is False


# --- corrupt files ----------------------------------------------------------------------------


CORRUPT_FILES = [
    pytest.param("derived-empty.trx", "the file is empty (0 bytes; the run stopped before writing it)",
                 id="empty"),
    pytest.param("derived-truncated.trx", "not well-formed XML (unclosed token: line 65, column 4)",
                 id="truncated"),
    pytest.param("derived-not-xml.trx", "not well-formed XML (syntax error: line 1, column 0)",
                 id="not-xml"),
    pytest.param("derived-wrong-root.trx",
                 f"the root element is <TestRun> with no namespace, not <TestRun> in namespace {NS}",
                 id="wrong-root"),
    pytest.param("derived-missing-counters.trx", "no <Counters> in <ResultSummary>",
                 id="missing-counters"),
]


@pytest.mark.parametrize(("name", "why"), CORRUPT_FILES)
def test_parse_trx_rejects_a_corrupt_file_saying_why(name: str, why: str) -> None:
    with pytest.raises(TrxCorrupt) as err:
        parse_trx(DATA / name)
    assert err.value.why == why
    assert str(err.value) == f"{DATA / name}: {why}"
    assert isinstance(err.value, SpecopsError)


CORRUPT_EDITS = [
    pytest.param([('<ResultSummary outcome="Completed">', '<Summary outcome="Completed">'),
                  ("</ResultSummary>", "</Summary>")],
                 "no <ResultSummary> under <TestRun>", id="no-result-summary"),
    pytest.param([('<ResultSummary outcome="Completed">', "<ResultSummary>")],
                 "<ResultSummary> has no outcome attribute", id="no-outcome"),
    pytest.param([(' executed="1"', "")], "<Counters> has no executed attribute",
                 id="no-executed-counter"),
    pytest.param([('failed="0"', 'failed="zero"')],
                 '<Counters failed="zero"> is not a non-negative integer', id="non-integer-counter"),
    pytest.param([('passed="1"', 'passed="-1"')],
                 '<Counters passed="-1"> is not a non-negative integer', id="negative-counter"),
    pytest.param([('total="1"', 'total="1.0"')],
                 '<Counters total="1.0"> is not a non-negative integer', id="fractional-counter"),
    pytest.param([("TeamTest/2010", "TeamTest/2006")],
                 "the root element is <TestRun> in namespace "
                 f"http://microsoft.com/schemas/VisualStudio/TeamTest/2006, not <TestRun> in namespace {NS}",
                 id="other-namespace"),
]


@pytest.mark.parametrize(("edits", "why"), CORRUPT_EDITS)
def test_parse_trx_rejects_a_summary_it_cannot_judge(tmp_path, edits, why: str) -> None:
    d = edited(tmp_path, "vstest-mstest-passed-single.trx", *edits)
    with pytest.raises(TrxCorrupt) as err:
        parse_trx(d / "results.trx")
    assert str(err.value) == f"{d / 'results.trx'}: {why}"


def test_parse_trx_calls_a_file_it_cannot_read_corrupt(tmp_path) -> None:
    with pytest.raises(TrxCorrupt) as err:
        parse_trx(tmp_path / "absent.trx")
    assert str(err.value) == f"{tmp_path / 'absent.trx'}: cannot be read (No such file or directory)"


# --- judge_test_run: one TRX copied in as results.trx -----------------------------------------


MTP_DETAIL = ("results.trx was written by Microsoft.Testing.Platform's TrxReport, not VSTest "
              "(outcome Failed: 4 total, 1 passed, 3 failed): the test project uses "
              "Microsoft.Testing.Platform, where --logger trx is ignored; run it under VSTest (no "
              "<TestingPlatformDotnetTestSupport>true</TestingPlatformDotnetTestSupport>)")
ZERO_DETAIL = ("results.trx: no tests were found (total 0); check that the project references a test "
               "adapter (xunit.runner.visualstudio, MSTest.TestAdapter, NUnit3TestAdapter) and that "
               "no --filter excludes every test")

# file, exit code, reason, detail, (total, executed, passed, failed, skipped), failing tests
JUDGED = [
    pytest.param("vstest-mstest-passed-single.trx", 0, "passed",
                 "results.trx: 1 of 1 executed tests passed, 0 skipped, 1 total",
                 (1, 1, 1, 0, 0), (), id="passed-single"),
    pytest.param("vstest-mstest-passed-with-skips.trx", 0, "passed",
                 "results.trx: 10 of 10 executed tests passed, 11 skipped, 21 total",
                 (21, 10, 10, 0, 11), (), id="passed-with-skips"),
    pytest.param("derived-crlf.trx", 0, "passed",
                 "results.trx: 1 of 1 executed tests passed, 0 skipped, 1 total",
                 (1, 1, 1, 0, 0), (), id="derived-crlf"),
    pytest.param("vstest-net8-mstest-failed-with-skip.trx", 1, "exit code",
                 "the test run exited with code 1; results.trx: 3 of 6 executed tests failed: "
                 "TestThrowingException, FailTest, TestTheory (False)",
                 (7, 6, 3, 3, 1), MSTEST_FAILING, id="mstest-failed-exit-1"),
    pytest.param("vstest-net8-mstest-failed-with-skip.trx", 0, "failed",
                 "results.trx: 3 of 6 executed tests failed: TestThrowingException, FailTest, "
                 "TestTheory (False)",
                 (7, 6, 3, 3, 1), MSTEST_FAILING, id="mstest-failed-exit-0"),
    pytest.param("vstest-net8-xunit-failed-with-skip.trx", 0, "failed",
                 "results.trx: 3 of 6 executed tests failed: SampleProject.xUnit.TestServiceTests.FailTest, "
                 "SampleProject.xUnit.TestServiceTests.TestTheory(expected: False), "
                 "SampleProject.xUnit.TestServiceTests.TestThrowingException",
                 (7, 6, 3, 3, 1), XUNIT_FAILING, id="xunit-failed-exit-0"),
    pytest.param("vstest-xunit-zero-tests.trx", 0, "zero tests", ZERO_DETAIL, (0, 0, 0, 0, 0), (),
                 id="zero-tests"),
    pytest.param("vstest-testhost-failed-to-start.trx", 1, "exit code",
                 f"the test run exited with code 1; results.trx: run outcome Failed, 0 of 0 tests "
                 f"executed, 0 failed; error: {TESTHOST}",
                 (0, 0, 0, 0, 0), (), id="testhost-exit-1"),
    pytest.param("vstest-testhost-failed-to-start.trx", 0, "failed",
                 f"results.trx: run outcome Failed, 0 of 0 tests executed, 0 failed; error: {TESTHOST}",
                 (0, 0, 0, 0, 0), (), id="testhost-exit-0"),
    pytest.param("mtp-xunitv3-net8-failed.trx", 0, "mtp", MTP_DETAIL, (4, 4, 1, 3, 0), MTP_FAILING,
                 id="mtp-exit-0"),
    pytest.param("mtp-xunitv3-net8-failed.trx", 2, "exit code",
                 f"the test run exited with code 2; {MTP_DETAIL}", (4, 4, 1, 3, 0), MTP_FAILING,
                 id="mtp-exit-2"),
    pytest.param("derived-skip-only.trx", 0, "skip-only",
                 "results.trx: every test was skipped (21 total, 0 executed, 0 passed)",
                 (21, 0, 0, 0, 21), (), id="derived-skip-only"),
    pytest.param("derived-host-crashed.trx", 1, "exit code",
                 f"the test run exited with code 1; results.trx: run outcome Failed, 1 of 1 tests "
                 f"executed, 0 failed; error: {CRASHED}",
                 (1, 1, 1, 0, 0), (), id="derived-host-crashed-exit-1"),
    pytest.param("derived-host-crashed.trx", 0, "failed",
                 f"results.trx: run outcome Failed, 1 of 1 tests executed, 0 failed; error: {CRASHED}",
                 (1, 1, 1, 0, 0), (), id="derived-host-crashed-exit-0"),
    pytest.param("vstest-mstest-passed-single.trx", 1, "exit code",
                 "the test run exited with code 1 but its TRX shows no failure (results.trx: 1 of 1 "
                 "executed tests passed, 0 skipped, 1 total)",
                 (1, 1, 1, 0, 0), (), id="exit-1-with-a-passing-trx"),
    pytest.param("vstest-mstest-passed-single.trx", None, "exit code",
                 "the test run ended without an exit code but its TRX shows no failure (results.trx: "
                 "1 of 1 executed tests passed, 0 skipped, 1 total)",
                 (1, 1, 1, 0, 0), (), id="no-exit-code-with-a-passing-trx"),
    pytest.param("vstest-mstest-passed-with-skips.trx", -9, "exit code",
                 "the test run was killed by signal 9 but its TRX shows no failure (results.trx: 10 "
                 "of 10 executed tests passed, 11 skipped, 21 total)",
                 (21, 10, 10, 0, 11), (), id="killed-by-signal-with-a-passing-trx"),
]


@pytest.mark.parametrize(("name", "exit_code", "reason", "detail", "counts", "failing"), JUDGED)
def test_judge_test_run_gives_the_reason_detail_and_counts_of_each_sample(
        tmp_path, name: str, exit_code: int | None, reason: str, detail: str,
        counts: tuple[int, int, int, int, int], failing: tuple[str, ...]) -> None:
    d = results_dir(tmp_path, name)
    total, executed, passed, failed, skipped = counts
    verdict = judge_test_run(d, exit_code, False)
    assert replace(verdict, skipped_tests=()) == TestVerdict(
        reason == "passed", reason, detail, total=total, executed=executed, passed_count=passed,
        failed=failed, skipped=skipped, failing_tests=failing, trx=str(d / "results.trx"))
    assert len(verdict.skipped_tests) == (skipped if verdict.trx and reason != "corrupt" else 0)


@pytest.mark.parametrize(("name", "why"), CORRUPT_FILES)
@pytest.mark.parametrize("exit_code", [0, 1])
def test_judge_test_run_calls_a_corrupt_trx_corrupt_and_still_names_the_exit_code(
        tmp_path, name: str, why: str, exit_code: int) -> None:
    d = results_dir(tmp_path, name)
    verdict = judge_test_run(d, exit_code, False)
    corrupt = f"results.trx is corrupt: {why}"
    assert verdict == TestVerdict(
        False, "exit code" if exit_code else "corrupt",
        f"the test run exited with code 1; {corrupt}" if exit_code else corrupt,
        trx=str(d / "results.trx"))


# --- judge_test_run: the directory, the deadline, the exit code -------------------------------


def test_an_empty_results_directory_is_missing(tmp_path) -> None:
    d = results_dir(tmp_path)
    assert judge_test_run(d, 0, False) == TestVerdict(
        False, "missing", f"no *.trx file in {d}: {MISSING_TAIL}")


def test_a_trx_in_a_subfolder_is_not_looked_for(tmp_path) -> None:
    d = results_dir(tmp_path)
    (d / "sub").mkdir()
    shutil.copyfile(DATA / "vstest-mstest-passed-single.trx", d / "sub" / "results.trx")
    assert judge_test_run(d, 0, False).reason == "missing"


def test_a_results_directory_that_was_never_made_is_missing(tmp_path) -> None:
    d = tmp_path / "never"
    assert judge_test_run(d, 0, False).detail == f"no *.trx file in {d}: {MISSING_TAIL}"


def test_a_missing_trx_after_a_failing_exit_code_names_both(tmp_path) -> None:
    d = results_dir(tmp_path)
    assert judge_test_run(d, 1, False) == TestVerdict(
        False, "exit code", f"the test run exited with code 1; no *.trx file in {d}: {MISSING_TAIL}")


def test_two_trx_files_are_ambiguous_even_when_both_pass(tmp_path) -> None:
    d = results_dir(tmp_path, "vstest-mstest-passed-single.trx", "vstest-mstest-passed-with-skips.trx")
    assert judge_test_run(d, 0, False) == TestVerdict(
        False, "ambiguous",
        f"2 *.trx files in {d} (0-vstest-mstest-passed-single.trx, "
        "1-vstest-mstest-passed-with-skips.trx); expected exactly one (a multi-targeted project "
        "writes one TRX per target framework)")


def test_a_timeout_wins_over_a_passing_trx_and_a_zero_exit_code(tmp_path) -> None:
    d = results_dir(tmp_path, "vstest-mstest-passed-single.trx")
    assert judge_test_run(d, 0, True) == TestVerdict(
        False, "timeout",
        "the test run was killed at the deadline before it finished; no TRX was judged")


def test_the_trx_need_not_be_called_results_trx(tmp_path) -> None:
    d = results_dir(tmp_path, "vstest-mstest-passed-single.trx", name="user_HOST_2024-01-01_10_00_00.trx")
    verdict = judge_test_run(d, 0, False)
    assert verdict.detail == ("user_HOST_2024-01-01_10_00_00.trx: 1 of 1 executed tests passed, "
                              "0 skipped, 1 total")
    assert verdict.trx == str(d / "user_HOST_2024-01-01_10_00_00.trx")


# --- judge_test_run: the failure rules in detail ----------------------------------------------


def test_a_failed_result_nested_in_inner_results_fails_the_run(tmp_path) -> None:
    inner = (f'<InnerResults><UnitTestResult testName="TestMethod1 (row 2)" outcome="Failed" '
             f'xmlns="{NS}" /></InnerResults></UnitTestResult>')
    d = edited(tmp_path, "vstest-mstest-passed-single.trx",
               ('relativeResultsDirectory="b12e5ed8-c0b7-47e7-b76b-4b3c9d262807" />',
                f'relativeResultsDirectory="b12e5ed8-c0b7-47e7-b76b-4b3c9d262807">{inner}'))
    verdict = judge_test_run(d, 0, False)
    assert (verdict.reason, verdict.detail) == (
        "failed", "results.trx: 1 of 1 executed tests failed: TestMethod1 (row 2)")


def test_only_the_first_five_failing_tests_are_named(tmp_path) -> None:
    line = next(li for li in (DATA / "vstest-mstest-passed-single.trx").read_text(encoding="utf-8-sig")
                .splitlines() if "<UnitTestResult " in li)
    seven = "\n".join(line.replace('testName="TestMethod1"', f'testName="T{i}"')
                      .replace('outcome="Passed"', 'outcome="Failed"') for i in range(1, 8))
    d = edited(tmp_path, "vstest-mstest-passed-single.trx", (line, seven),
               ('<ResultSummary outcome="Completed">', '<ResultSummary outcome="Failed">'),
               ('total="1" executed="1" passed="1" failed="0"', 'total="7" executed="7" passed="0" failed="7"'))
    verdict = judge_test_run(d, 1, False)
    assert verdict.detail == ("the test run exited with code 1; results.trx: 7 of 7 executed tests "
                              "failed: T1, T2, T3, T4, T5 and 2 more")
    assert verdict.failing_tests == ("T1", "T2", "T3", "T4", "T5", "T6", "T7")


def test_further_error_run_infos_are_counted_after_the_first(tmp_path) -> None:
    block = f"<RunInfo outcome=\"Error\"><Text>{CRASHED}</Text></RunInfo>"
    d = edited(tmp_path, "derived-host-crashed.trx",
               ("    </RunInfos>", f"{block}<RunInfo outcome=\"Warning\"><Text>w</Text></RunInfo>"
                                  f"{block}</RunInfos>"))
    assert judge_test_run(d, 0, False).detail == (
        f"results.trx: run outcome Failed, 1 of 1 tests executed, 0 failed; error: {CRASHED} "
        "(+2 more errors)")


def test_a_run_outcome_other_than_completed_fails_even_without_a_failed_test(tmp_path) -> None:
    d = edited(tmp_path, "vstest-mstest-passed-single.trx",
               ('<ResultSummary outcome="Completed">', '<ResultSummary outcome="Error">'))
    assert judge_test_run(d, 0, False).detail == (
        "results.trx: run outcome Error, not Completed (1 of 1 tests executed, 0 failed)")


def test_a_failed_counter_fails_a_completed_run_whose_results_all_passed(tmp_path) -> None:
    d = edited(tmp_path, "vstest-mstest-passed-single.trx", ('failed="0"', 'failed="1"'))
    verdict = judge_test_run(d, 0, False)
    assert (verdict.reason, verdict.detail) == ("failed", "results.trx: 1 of 1 executed tests failed")


def test_a_completed_run_with_executed_tests_but_no_passed_result_is_skip_only(tmp_path) -> None:
    d = edited(tmp_path, "vstest-mstest-passed-single.trx", ('outcome="Passed"', 'outcome="NotExecuted"'))
    assert judge_test_run(d, 0, False).detail == (
        "results.trx: every test was skipped (1 total, 1 executed, 1 passed)")


def test_the_module_does_not_import_dagster() -> None:
    code = "import sys, specops_dag.validation.trx; print('dagster' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=REPO, check=True)
    assert out.stdout.strip() == "False"
