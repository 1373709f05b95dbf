"""`dotnet test` in Microsoft.Testing.Platform mode (issue 42): global.json's `test.runner`
selects it on SDK 10; the validator then runs `--report-trx` and judges the TRX of that call, so
no exit code, environment variable or ignored code turns a failure into a pass. The
`dotnet`-marked tests run the real SDK on the `mtp-net10` fixture and its variants."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specops_dag.validation.dotnet import validate_full
from specops_dag.validation.trx import judge_test_run

from ..support.dotnet import copy_fixture

MTP_NOTE = ("`dotnet test` ran in Microsoft.Testing.Platform mode (global.json test.runner): TRX "
            "by --report-trx, judged by its content")
TEST_FILE = "tests/Calc.Tests/CalculatorTests.cs"


def test_a_test_runner_the_sdk_does_not_know_stops_at_global_json(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "mtp-net10")
    (root / "global.json").write_text('{"sdk": {"version": "10.0.100"}, '
                                      '"test": {"runner": "NUnit"}}')
    report = validate_full(root, tmp_path / "logs", env={**os.environ, "PATH": "/nonexistent"})
    assert (report.passed, report.stage, report.commands) == (False, "global.json", ())
    assert report.message == (
        "global.json: test.runner 'NUnit' is not a test runner the SDK knows (VSTest, "
        "Microsoft.Testing.Platform); the .NET 10 SDK fails every command in the repository on "
        "it: use one of those or remove the key")


def mtp_trx(folder: Path, outcome: str, total: int, passed: int, failed: int,
            results: str = "") -> Path:
    """A TRX as Microsoft.Testing.Platform's TrxReport writes it (upper-case test list id)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.trx").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<TestRun id="1" name="x" xmlns="http://microsoft.com/schemas/VisualStudio/TeamTest/2010">'
        f'<Results>{results}</Results>'
        '<TestLists><TestList name="Results Not in a List" '
        'id="8C84FA94-04C1-424b-9868-57A2D4851A1D" /></TestLists>'
        f'<ResultSummary outcome="{outcome}"><Counters total="{total}" executed="{total}" '
        f'passed="{passed}" failed="{failed}" /></ResultSummary></TestRun>\n')
    return folder


FAILED_RESULT = ('<UnitTestResult testName="Calc.Tests.CalculatorTests.Add_ReturnsSum" '
                 'outcome="Failed" testType="13CDC9D9-DDB5-4fa4-A97D-D965CCFC6D4B" />')


def test_an_mtp_trx_that_failed_fails_even_when_the_exit_code_was_ignored(tmp_path: Path) -> None:
    folder = mtp_trx(tmp_path / "r", "Failed", 1, 0, 1, FAILED_RESULT)
    verdict = judge_test_run(folder, 0, False, "mtp")
    assert (verdict.passed, verdict.reason, verdict.detail) == (
        False, "failed", "results.trx: 1 of 1 executed tests failed: "
                         "Calc.Tests.CalculatorTests.Add_ReturnsSum")


def test_an_mtp_exit_code_is_named_and_fails_a_trx_that_passed(tmp_path: Path) -> None:
    ok = ('<UnitTestResult testName="T.A" outcome="Passed" '
          'testType="13CDC9D9-DDB5-4fa4-A97D-D965CCFC6D4B" />')
    verdict = judge_test_run(mtp_trx(tmp_path / "r", "Completed", 1, 1, 0, ok), 9, False, "mtp")
    assert (verdict.passed, verdict.reason, verdict.detail) == (
        False, "exit code", "the test run exited with code 9 (Microsoft.Testing.Platform: fewer "
        "tests ran than the minimum expected) but its TRX shows no failure (results.trx: 1 of 1 "
        "executed tests passed, 0 skipped, 1 total)")


def test_an_mtp_trx_in_vstest_mode_is_still_refused(tmp_path: Path) -> None:
    verdict = judge_test_run(mtp_trx(tmp_path / "r", "Completed", 0, 0, 0), 0, False)
    assert verdict.reason == "mtp"


# -- the real SDK ------------------------------------------------------------------------------

@pytest.mark.dotnet
@pytest.mark.e2e
def test_the_real_sdk_runs_an_mtp_project_with_report_trx_and_it_passes(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "mtp-net10")
    report = validate_full(root, tmp_path / "logs")
    assert (report.passed, report.stage, report.message, report.notes) == (
        True, "test", "1 test project(s): 2 of 2 tests executed, 2 passed, 0 skipped",
        (MTP_NOTE,))
    test = [c["command"] for c in report.commands if c["stage"] == "test"][-1]
    assert test.startswith(f"dotnet test --project {root}/tests/Calc.Tests/Calc.Tests.csproj "
                           "--no-build -c Release --report-trx --report-trx-filename results.trx "
                           "--results-directory ")
    assert report.projects[0]["trx"].endswith("/results.trx")


@pytest.mark.dotnet
@pytest.mark.e2e
def test_a_failing_mtp_test_fails_though_the_environment_asks_to_ignore_its_exit_code(
        tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "mtp-net10")
    tests = root / TEST_FILE
    tests.write_text(tests.read_text().replace("Assert.Equal(5,", "Assert.Equal(4,"))
    env = {**os.environ, "TESTINGPLATFORM_EXITCODE_IGNORE": "2", "DOTNET_TEST_RUNNER": "VSTest"}
    report = validate_full(root, tmp_path / "logs", env=env)
    assert (report.passed, report.stage, report.exit_code, report.failing_tests) == (
        False, "test", 2, ("Calc.Tests.CalculatorTests.Add_ReturnsSum",))
    assert report.message == (
        "tests/Calc.Tests/Calc.Tests.csproj: exit code: the test run exited with code 2 "
        "(Microsoft.Testing.Platform: a test failed); results.trx: 1 of 2 executed tests failed: "
        "Calc.Tests.CalculatorTests.Add_ReturnsSum")


@pytest.mark.dotnet
@pytest.mark.e2e
def test_an_mtp_project_without_tests_is_zero_tests_not_a_pass(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "mtp-net10")
    (root / TEST_FILE).write_text("namespace Calc.Tests;\n\npublic class CalculatorTests\n{\n}\n")
    report = validate_full(root, tmp_path / "logs")
    assert (report.passed, report.stage, report.exit_code) == (False, "test", 8)
    assert report.message == (
        "tests/Calc.Tests/Calc.Tests.csproj: exit code: the test run exited with code 8 "
        "(Microsoft.Testing.Platform: zero tests ran); results.trx: no tests were found (total "
        "0); check that the test application defines tests and that no --filter excludes every "
        "test")


@pytest.mark.dotnet
@pytest.mark.e2e
def test_a_vstest_project_under_the_mtp_runner_is_a_named_error(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "all-pass-net10")
    (root / "global.json").write_text('{"sdk": {"version": "10.0.100", "rollForward": '
                                      '"latestFeature"}, "test": {"runner": '
                                      '"Microsoft.Testing.Platform"}}')
    report = validate_full(root, tmp_path / "logs")
    assert (report.passed, report.stage) == (False, "test")
    assert report.message == (
        "tests/Calc.Tests/Calc.Tests.csproj is a VSTest project, but global.json's test.runner "
        "selects Microsoft.Testing.Platform, where every test project must be a "
        "Microsoft.Testing.Platform application (IsTestingPlatformApplication=true, e.g. "
        "xunit.v3 or MSTest with its runner): move the project to it, or remove test.runner "
        "from global.json")
    assert not any(c["command"].startswith("dotnet test") for c in report.commands)


@pytest.mark.dotnet
@pytest.mark.e2e
def test_a_project_that_ignores_its_failing_exit_code_still_fails_by_its_trx(
        tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "mtp-net10")
    tests = root / TEST_FILE
    tests.write_text(tests.read_text().replace("Assert.Equal(5,", "Assert.Equal(4,"))
    (root / "Directory.Build.props").write_text(
        "<Project>\n  <PropertyGroup>\n    <TestingPlatformCommandLineArguments>--ignore-exit-code "
        "2</TestingPlatformCommandLineArguments>\n  </PropertyGroup>\n</Project>\n")
    report = validate_full(root, tmp_path / "logs")
    assert (report.passed, report.stage, report.exit_code) == (False, "test", 0)  # ignored...
    assert report.message == (  # ...but the TRX of the call says what happened
        "tests/Calc.Tests/Calc.Tests.csproj: failed: results.trx: 1 of 2 executed tests failed: "
        "Calc.Tests.CalculatorTests.Add_ReturnsSum")
