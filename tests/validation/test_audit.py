"""NuGetAudit judged against the base (issue 42): an advisory the base commit already had is
named and never charged to an attempt; one the attempt brings in fails it. The `dotnet`-marked
tests run the real SDK with an audit source of their own (a local NuGet V3 service index whose
VulnerabilityInfo resource lists made-up advisories), since the package mirror serves none."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from specops_dag.validation.dotnet import validate_full
from specops_dag.workflow.model import ValidationConfig

from ..support.dotnet import copy_fixture, standin_env

XUNIT = ("tests/Calc.Tests/Calc.Tests.csproj: warning NU1903: Package 'xunit' 2.9.3 has a known "
         "high severity vulnerability, https://example.invalid/advisories/SPECOPS-0001")
NEWTONSOFT = ("src/Calc/Calc.csproj: warning NU1904: Package 'Newtonsoft.Json' 13.0.3 has a "
              "known critical severity vulnerability, "
              "https://example.invalid/advisories/SPECOPS-0002")
TRANSITIVE = ("tests/Calc.Tests/Calc.Tests.csproj: warning NU1904: Package 'Newtonsoft.Json' "
              "13.0.3 has a known critical severity vulnerability, "
              "https://example.invalid/advisories/SPECOPS-0002")  # through the test SDK
PASS_2 = "1 test project(s): 2 of 2 tests executed, 2 passed, 0 skipped"
BASE = "0123456789abcdef0123"


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def audit_source(tmp_path: Path) -> Iterator[str]:
    """A NuGet V3 service index on 127.0.0.1 with a VulnerabilityInfo resource: xunit 2.x has a
    high advisory, Newtonsoft.Json (a transitive package of the test project) a critical one.
    Yields the index's URL."""
    feed = tmp_path / "feed"
    feed.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(feed)))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    (feed / "index.json").write_text(json.dumps({"version": "3.0.0", "resources": [
        {"@id": f"{url}/vulnerabilities.json", "@type": "VulnerabilityInfo/6.7.0"}]}))
    (feed / "vulnerabilities.json").write_text(json.dumps([
        {"@name": "base", "@id": f"{url}/base.json", "@updated": "2026-12-01T00:00:00Z"}]))
    (feed / "base.json").write_text(json.dumps({
        "xunit": [{"url": "https://example.invalid/advisories/SPECOPS-0001", "severity": 2,
                   "versions": "[2.0.0, 3.0.0)"}],
        "newtonsoft.json": [{"url": "https://example.invalid/advisories/SPECOPS-0002",
                             "severity": 3, "versions": "[1.0.0, 99.0.0)"}]}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{url}/index.json"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def audited_fixture(tmp_path: Path, source: str) -> Path:
    root = copy_fixture(tmp_path, "all-pass-net10")
    (root / "nuget.config").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<configuration>\n  <auditSources>\n'
        f'    <clear />\n    <add key="advisories" value="{source}" '
        'allowInsecureConnections="true" />\n  </auditSources>\n</configuration>\n')
    return root


@pytest.mark.dotnet
@pytest.mark.e2e
def test_an_advisory_the_base_already_had_is_named_and_not_charged_to_the_attempt(
        tmp_path: Path, audit_source: str) -> None:
    root = audited_fixture(tmp_path, audit_source)
    base = validate_full(root, tmp_path / "base")
    assert (base.passed, base.message, base.warnings) == (True, PASS_2, (TRANSITIVE, XUNIT))
    assert base.notes == (f"NuGetAudit: 2 advisory warning(s) in the base tree, its baseline (an "
                          f"attempt fails only for new ones): {TRANSITIVE}; {XUNIT}",)
    attempt = validate_full(root, tmp_path / "attempt",
                            baseline={"commit": BASE, "warnings": list(base.warnings)})
    assert (attempt.passed, attempt.message) == (True, PASS_2)
    assert attempt.notes == (f"NuGetAudit: 2 advisory warning(s) the base (0123456789ab) already "
                             f"had, not charged to this attempt: {TRANSITIVE}; {XUNIT}",)


@pytest.mark.dotnet
@pytest.mark.e2e
@pytest.mark.parametrize("policy", ["environment", "failure"])
def test_an_advisory_the_attempt_brings_in_fails_its_restore_naming_the_base(
        tmp_path: Path, audit_source: str, policy: str) -> None:
    root = audited_fixture(tmp_path, audit_source)
    project = root / "src/Calc/Calc.csproj"
    project.write_text(project.read_text().replace(
        "</Project>", '  <ItemGroup>\n    <PackageReference Include="Newtonsoft.Json" '
        'Version="13.0.3" />\n  </ItemGroup>\n</Project>'))
    report = validate_full(root, tmp_path / "attempt", config=ValidationConfig(nuget_audit=policy),
                           baseline={"commit": BASE, "warnings": [TRANSITIVE, XUNIT]})
    assert (report.passed, report.stage, report.blame) == (
        False, "restore", "environment" if policy == "environment" else "attempt")
    assert report.message == (
        f"NuGetAudit: 1 advisory warning(s) the base (0123456789ab) did not have: {NEWTONSOFT}: "
        "update or remove the package, or suppress the advisory with `<NuGetAuditSuppress "
        "Include=\"<advisory url>\" />`")
    assert report.notes == (f"NuGetAudit: 2 advisory warning(s) the base (0123456789ab) already "
                            f"had, not charged to this attempt: {TRANSITIVE}; {XUNIT}",)
    assert [c["stage"] for c in report.commands] == [
        "sdk", "evaluation", "evaluation", "restore", "build"]


def test_the_stand_in_replays_an_advisory_as_the_real_sdk_prints_it(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path, "nuget-audit")
    report = validate_full(root, tmp_path / "logs", env=standin_env("nuget-audit"))
    advisory = ("src/Calc/Calc.csproj: warning NU1903: Package 'System.Text.Json' 8.0.0 has a "
                "known high severity vulnerability, "
                "https://github.com/advisories/GHSA-8g4q-xg66-9fp4")
    assert (report.passed, report.message, report.warnings) == (True, PASS_2, (advisory,))
    fresh = validate_full(root, tmp_path / "again", env=standin_env("nuget-audit"),
                          baseline={"commit": BASE, "warnings": []})
    assert (fresh.passed, fresh.stage, fresh.blame, fresh.message) == (
        False, "restore", "environment",
        f"NuGetAudit: 1 advisory warning(s) the base (0123456789ab) did not have: {advisory}: "
        "update or remove the package, or suppress the advisory with `<NuGetAuditSuppress "
        "Include=\"<advisory url>\" />`")
