"""The layouts real repositories have (issue 16), each chosen in `validation.yaml` or the phase:
no global.json, two solutions, an analyzer project, a test SDK from Directory.Build.props, a
pre-existing warning under `absolute` and `regressions`, an excluded snippet, NuGetAudit. Driven
through the `dotnet` stand-in; the `dotnet`-marked test runs the same matrix on a real SDK."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from specops_dag.validation import baseline as bl
from specops_dag.validation.dotnet import validate_full
from specops_dag.workflow.model import ValidationConfig

from ..support.dotnet import copy_fixture, standin_env
from ..support.harness import VENV_BIN, write_tree

WHERE = "workflow_defs/validation.yaml (or the phase)"
NO_GLOBAL_JSON = ("no global.json pinning the SDK at the repository root: add one (e.g. "
                  "{\"sdk\": {\"version\": \"10.0.100\", \"rollForward\": \"latestFeature\"}}), "
                  f"or set `validation.sdk.require_global_json: false` in {WHERE}")
AUTO_8 = "auto: global.json pins SDK 8.0.100"
NET8_ONLY = {"sdk": {"require_global_json": False}, "target": {"framework": "net8.0",
                                                               "newer_sdk": False}}
PASS_2 = "1 test project(s): 2 of 2 tests executed, 2 passed, 0 skipped"
NU1900 = ("{root}/src/Calc/Calc.csproj : error NU1900: Error occurred while getting package "
          "vulnerability data: Unable to load the service index for source "
          "https://api.nuget.org/v3/index.json. [{root}/Calc.sln]")
NU1903 = ("{root}/src/Calc/Calc.csproj : error NU1903: Package 'System.Text.Json' 8.0.0 has a "
          "known high severity vulnerability, https://github.com/advisories/GHSA-8g4q-xg66-9fp4 "
          "[{root}/Calc.sln]")

# id -> (fixture, answers, layout, passed, stage, blame, exact message with {root})
LAYOUTS = {
    "no-global-json-required": ("no-global-json", "no-global-json", {}, False, "global.json",
                                "attempt", NO_GLOBAL_JSON),
    "no-global-json-allowed": ("no-global-json", "no-global-json", NET8_ONLY, True, "test",
                               "attempt", PASS_2),
    "no-global-json-allowed-defaults-to-the-lts": (
        "no-global-json", "no-global-json", {"sdk": {"require_global_json": False}}, False,
        "sdk", "environment",
        "`dotnet --version` selected SDK 8.0.404 (no global.json pin), which the target policy "
        "does not allow; target policy net10.0: a 10.0 SDK or newer (auto: no global.json pins an SDK version, "
        "so the current LTS); installed SDKs: 8.0.404 [/usr/share/dotnet/sdk]; fix: install a "
        "10.0 SDK or newer and pin it in global.json (e.g. {\"sdk\": {\"version\": "
        "\"10.0.100\", \"rollForward\": \"latestFeature\"}})"),
    "no-global-json-allowed-but-sdk-9": (
        "no-global-json", "no-global-json-sdk9", NET8_ONLY, False, "sdk", "environment",
        "`dotnet --version` selected SDK 9.0.100 (no global.json pin), which the target policy "
        "does not allow; target policy net8.0: an 8.0 SDK only (validation.target.framework); installed SDKs: "
        "8.0.404 [/usr/share/dotnet/sdk]; 9.0.100 [/usr/share/dotnet/sdk]; fix: install an 8.0 "
        "SDK and pin it in global.json (e.g. {\"sdk\": {\"version\": \"8.0.100\", "
        f"\"rollForward\": \"latestFeature\"}}}}), or set `validation.target.newer_sdk: true` in {WHERE}"),
    "two-solutions-without-a-choice": (
        "two-solutions", "two-solutions", {}, False, "discovery", "attempt",
        "more than one solution at the repository root (Calc.Samples.sln, Calc.sln); choose what "
        f"to build with `validation.build: [Calc.Samples.sln]` in {WHERE}, or keep one"),
    "two-solutions-with-a-choice": ("two-solutions", "two-solutions", {"build": ["Calc.sln"]},
                                    True, "test", "attempt", PASS_2),
    "two-solutions-choice-missing": (
        "two-solutions", "two-solutions", {"build": ["App.sln"]}, False, "discovery", "attempt",
        f"validation.build[0]: `App.sln` is not in the repository; fix the path in {WHERE}"),
    "analyzer-on-netstandard": ("analyzer", "analyzer", {}, True, "test", "attempt", PASS_2),
    "analyzer-frameworks-forbidden": (
        "analyzer", "analyzer", {"analyzer_frameworks": []}, False, "evaluation", "attempt",
        "src/Calc.Generators/Calc.Generators.csproj: target frameworks ['netstandard2.0']; an "
        "analyzer or source generator project must target exactly one of net8.0"),
    "analyzer-by-its-reference-only": ("analyzer-by-reference", "analyzer-by-reference", {}, True, "test",
                                       "attempt", PASS_2),
    "netstandard-library-is-a-product-project": (
        "analyzer-as-library", "analyzer-as-library", {}, False, "evaluation", "attempt",
        "src/Calc.Generators/Calc.Generators.csproj: target frameworks ['netstandard2.0']; every "
        f"project must target exactly net8.0 (the target policy's framework; {AUTO_8}) "
        "(analyzer and source-generator projects, "
        "`IsRoslynComponent` or referenced with OutputItemType=\"Analyzer\", may target "
        "netstandard2.0)"),
    "test-sdk-from-directory-build-props": ("props-test-sdk", "props-test-sdk", {}, True, "test",
                                            "attempt", PASS_2),
    "pre-existing-warning-absolute": (
        "compiler-warning", "compiler-warning", {}, False, "build", "attempt",
        "`dotnet build` of Calc.sln failed (exit 1); first error: {root}/src/Calc/Calculator.cs"
        "(15,32): error CS0168: The variable 'e' is declared but never used "
        "[{root}/src/Calc/Calc.csproj]"),
    "pre-existing-warning-regressions-base": (
        "compiler-warning", "compiler-warning-regressions", {"judge": "regressions"}, True,
        "test", "attempt", PASS_2 + "; baseline recorded: 1 warning(s), 0 failing test(s)"),
    "configuration-release": ("configuration-tfm", "configuration-tfm", {}, True, "test",
                              "attempt", PASS_2),
    "configuration-conditioned-tfm": (
        "configuration-tfm", "configuration-tfm", {"configuration": "Legacy"}, False,
        "evaluation", "attempt", "src/Calc/Calc.csproj: target frameworks ['net6.0']; every "
        f"project must target exactly net8.0 (the target policy's framework; {AUTO_8})"),
    "snippet-excluded": ("orphan-cs", "orphan-cs", {"exclude": ["scripts/**"]}, True, "test",
                         "attempt", PASS_2),
    "audit-unreachable-is-the-environment": (
        "all-pass", "nuget-audit-offline", {}, False, "restore", "environment",
        "`dotnet restore` of Calc.sln failed (exit 1); first error: " + NU1900 + "; NuGetAudit "
        "could not read vulnerability data (src/Calc/Calc.csproj: error NU1900: Error occurred "
        "while getting package vulnerability data: Unable to load the service index for source "
        "https://api.nuget.org/v3/index.json.): the package source is unreachable from here; "
        "allow the audit source, or set `<NuGetAudit>false</NuGetAudit>` in "
        "Directory.Build.props"),
    "audit-advisory-of-the-base-tree-is-its-baseline": (
        "nuget-audit", "nuget-audit", {}, True, "test", "attempt", PASS_2),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(LAYOUTS))
def test_each_layout_gets_the_verdict_its_configuration_asks_for(tmp_path: Path,
                                                                 case: str) -> None:
    fixture, answers, layout, passed, stage, blame, message = LAYOUTS[case]
    root = copy_fixture(tmp_path, fixture)
    report = validate_full(root, tmp_path / "logs", env=standin_env(answers),
                           config=ValidationConfig.model_validate(layout))
    assert (report.passed, report.stage, report.blame, report.message) == (
        passed, stage, blame, message.replace("{root}", str(root)))


@pytest.mark.e2e
def test_the_test_project_is_found_by_evaluation_not_by_its_file_text(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "props-test-sdk")
    text = (root / "tests/Calc.Tests/Calc.Tests.csproj").read_text()
    assert "Microsoft.NET.Test.Sdk" not in text and "IsTestProject" not in text
    report = validate_full(root, tmp_path / "logs", env=standin_env("props-test-sdk"))
    assert [p["project"] for p in report.projects] == ["tests/Calc.Tests/Calc.Tests.csproj"]


@pytest.mark.e2e
def test_evaluation_uses_the_configuration_that_build_and_test_use(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "all-pass")
    calls = tmp_path / "calls.log"
    validate_full(root, tmp_path / "logs", env=standin_env("all-pass", calls))
    sent = calls.read_text().splitlines()
    assert [line for line in sent if line.startswith("msbuild")] and all(
        "-p:Configuration=Release" in line for line in sent if line.startswith("msbuild"))
    assert all("-c Release" in line for line in sent if line.startswith(("build", "test")))


@pytest.mark.e2e
def test_an_attempt_that_adds_a_warning_fails_only_on_the_new_one(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "compiler-warning")
    layout = ValidationConfig(judge="regressions")
    env = standin_env("compiler-warning-regressions")
    base = validate_full(root, tmp_path / "base", env=env, config=layout).as_metadata()
    same = validate_full(root, tmp_path / "same", env=env, config=layout, baseline=base)
    assert (same.passed, same.stage, same.message) == (
        True, "regressions", PASS_2 + "; no regression against the base (1 warning(s), 0 failing "
        "test(s) there already)")
    (root / "src/Calc/new-warning.marker").write_text("")
    worse = validate_full(root, tmp_path / "worse", env=env, config=layout, baseline=base)
    assert (worse.passed, worse.stage, worse.blame, worse.message) == (
        False, "regressions", "attempt", "worse than the base: 1 new warning(s): "
        "src/Calc/Calculator.cs: warning CS0219: The variable 'unused' is assigned but its value "
        "is never used")
    assert worse.describe().splitlines()[1:6] == [
        "baseline (base tree) vs attempt:",
        "  warnings            1 | 2    ",
        "  failing tests       0 | 0    ",
        "  skipped tests       0 | 0    ",
        "  executed tests      2 | 2    "]


def test_regressions_are_new_failing_or_skipped_tests_and_fewer_executed_ones() -> None:
    base = bl.baseline_of({"commit": "abc", "warnings": ["a.cs: warning CS1: x"], "projects": [
        {"executed": 5, "failed_tests": ["T.Old"], "skipped_tests": ["T.Skip"]}]})
    same = bl.compare(base, ["a.cs: warning CS1: x"], [
        {"executed": 5, "failed_tests": ["T.Old"], "skipped_tests": ["T.Skip"]}])
    assert bl.regressions(same) == []
    worse = bl.compare(base, [], [
        {"executed": 3, "failed_tests": ["T.Old", "T.New"], "skipped_tests": ["T.Skip", "T.S2"]}])
    assert bl.regressions(worse) == ["1 new failing test(s): T.New",
                                     "1 new skipped test(s): T.S2",
                                     "fewer executed tests: 3 (base 5)"]


@pytest.mark.e2e
def test_the_report_is_evidence_sdk_commands_and_totals_per_test_project(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "failing-test")
    report = validate_full(root, tmp_path / "logs", env=standin_env("failing-test"))
    assert report.sdk_version == "10.0.401"
    assert [(c["stage"], c["command"].split()[1], c["exit_code"]) for c in report.commands] == [
        ("sdk", "--version", 0), ("evaluation", "msbuild", 0), ("evaluation", "msbuild", 0),
        ("restore", "restore", 0), ("build", "build", 0), ("test", "msbuild", 0),
        ("test", "msbuild", 0), ("test", "--list-runtimes", 0), ("test", "test", 1)]
    assert all(c["duration_s"] > 0 for c in report.commands)
    (project,) = report.projects
    assert {k: project[k] for k in ("project", "total", "executed", "passed", "failed",
                                    "skipped", "failed_tests", "skipped_tests")} == {
        "project": "tests/Calc.Tests/Calc.Tests.csproj", "total": 3, "executed": 3, "passed": 2,
        "failed": 1, "skipped": 0,
        "failed_tests": ["Calc.Tests.CalculatorTests.Subtract_ReturnsDifference"],
        "skipped_tests": []}


# The stand-in's audit answers need an audit source (the mirror here has none) and the
# no-global-json-allowed cases an 8.0 or 9.0 SDK as the newest installed one.
REAL = {k: v for k, v in LAYOUTS.items() if not k.startswith(("audit", "no-global-json-allowed"))}


@pytest.mark.dotnet
@pytest.mark.skipif(shutil.which("dotnet") is None, reason="no .NET SDK on PATH")
@pytest.mark.parametrize("case", sorted(REAL))
def test_a_real_sdk_gives_each_layout_the_same_verdict(tmp_path: Path, case: str) -> None:
    fixture, _, layout, passed, stage, blame, _ = REAL[case]
    root = copy_fixture(tmp_path, fixture)
    report = validate_full(root, tmp_path / "logs", config=ValidationConfig.model_validate(layout))
    assert (report.passed, report.stage, report.blame) == (passed, stage, blame)


def specops_validate(root: Path, answers: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "specops"), "validate", str(root), *args],
                          env=standin_env(answers), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.mark.e2e
def test_specops_validate_json_carries_the_evidence(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "failing-test")
    report = json.loads(specops_validate(root, "failing-test", "--json").stdout)
    assert report["sdk_version"] == "10.0.401"
    assert [c["command"].split()[1] for c in report["commands"]] == [
        "--version", "msbuild", "msbuild", "restore", "build", "msbuild", "msbuild",
        "--list-runtimes", "test"]
    assert report["projects"][0]["failed_tests"] == [
        "Calc.Tests.CalculatorTests.Subtract_ReturnsDifference"]


@pytest.mark.e2e
def test_specops_validate_reads_the_layout_and_compares_with_a_baseline(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "compiler-warning")
    write_tree(root, {"workflow_defs/validation.yaml": "validation:\n  judge: regressions\n"})
    base = specops_validate(root, "compiler-warning-regressions", "--json")
    assert base.returncode == 0, base.stdout + base.stderr
    (tmp_path / "base.json").write_text(base.stdout)
    (root / "src/Calc/new-warning.marker").write_text("")
    worse = specops_validate(root, "compiler-warning-regressions", "--baseline",
                             str(tmp_path / "base.json"))
    assert worse.returncode == 1
    assert worse.stdout.splitlines()[:3] == [
        "validation `full` failed at stage `regressions`: worse than the base: 1 new warning(s): "
        "src/Calc/Calculator.cs: warning CS0219: The variable 'unused' is assigned but its value "
        "is never used",
        "baseline (base tree) vs attempt:",
        "  warnings            1 | 2    "]
    strict = specops_validate(root, "compiler-warning", "--judge", "absolute")
    assert strict.stdout.splitlines()[0].startswith(
        "validation `full` failed at stage `build`: `dotnet build` of Calc.sln failed")


def test_specops_validate_refuses_a_bad_layout_with_the_key_and_the_fix(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "all-pass")
    write_tree(root, {"workflow_defs/validation.yaml": "validation:\n  judge: relaxed\n"})
    result = specops_validate(root, "all-pass")
    assert result.returncode == 2
    assert "workflow_defs/validation.yaml: validation.judge: Input should be 'absolute' or " \
           "'regressions'" in result.stderr
