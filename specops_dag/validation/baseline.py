"""`judge: regressions` (issue 16): what the base tree already has — warnings, failing and skipped
tests, executed tests — and how an attempt compares with it. Pure functions over MSBuild output
lines and validation reports; it runs nothing and writes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from specops_dag.workflow.model import AUDIT_CODES

# `path(line,col): warning CODE: text [project]` (MSBuild's canonical error format); NuGet's have
# no position and name the project file as the path.
DIAGNOSTIC = re.compile(r"^\s*(?P<file>[^\s].*?)(?:\([\d,]+\))?\s*:\s*(?P<kind>warning|error)\s+"
                        r"(?P<code>[A-Za-z]+\d+)\s*:\s*(?P<text>.*?)(?:\s+\[[^\]]+\])?\s*$")
SHOWN = 5


def diagnostics(output: str, root: Path, kind: str) -> list[tuple[str, str]]:
    """Distinct (code, key) of every `kind` ("warning"/"error") line, in order. The key drops the
    line/column (a change above moves them) and the project suffix; paths are repo-relative.
    MSBuild prints each diagnostic twice (inline and in the summary): kept once."""
    found: dict[str, str] = {}
    prefix = str(root).rstrip("/") + "/"
    for line in output.splitlines():
        m = DIAGNOSTIC.match(line)
        if m and m["kind"] == kind:
            file = m["file"].strip().removeprefix(prefix)
            found.setdefault(f"{file}: {kind} {m['code'].upper()}: {m['text']}", m["code"].upper())
    return [(code, key) for key, code in found.items()]


def audit_only(codes: list[str]) -> bool:
    """Every diagnostic is a NuGetAudit one (NU1900–NU1904) and there is at least one."""
    return bool(codes) and all(c in AUDIT_CODES for c in codes)


def audit_advice(keys: list[str]) -> str:
    """What a person does about NuGetAudit diagnostics (never the agent's to fix)."""
    shown = "; ".join(keys[:SHOWN])
    if all(" NU1900:" in k for k in keys):
        return (f"NuGetAudit could not read vulnerability data ({shown}): the package source is "
                "unreachable from here; allow the audit source, or set "
                "`<NuGetAudit>false</NuGetAudit>` in Directory.Build.props")
    return (f"NuGetAudit reports a vulnerable package ({shown}): update or remove the package, "
            "or suppress the advisory with `<NuGetAuditSuppress Include=\"<advisory url>\" />`")


def baseline_of(report: dict) -> dict:
    """The parts of a base report an attempt is compared with."""
    projects = report.get("projects") or []
    return {"commit": report.get("commit"), "warnings": list(report.get("warnings") or []),
            "failing_tests": sorted({t for p in projects for t in p.get("failed_tests", [])}),
            "skipped_tests": sorted({t for p in projects for t in p.get("skipped_tests", [])}),
            "executed": sum(int(p.get("executed", 0)) for p in projects)}


def compare(base: dict, warnings: list[str], projects: list[dict]) -> dict:
    """Baseline and attempt side by side, and what is new in the attempt."""
    now = baseline_of({"warnings": warnings, "projects": projects})
    return {
        "base_commit": base.get("commit"),
        "warnings": {"base": base["warnings"], "attempt": now["warnings"]},
        "failing_tests": {"base": base["failing_tests"], "attempt": now["failing_tests"]},
        "skipped_tests": {"base": base["skipped_tests"], "attempt": now["skipped_tests"]},
        "executed": {"base": base["executed"], "attempt": now["executed"]},
        "new_warnings": [w for w in now["warnings"] if w not in base["warnings"]],
        "new_failing_tests": [t for t in now["failing_tests"] if t not in base["failing_tests"]],
        "new_skipped_tests": [t for t in now["skipped_tests"] if t not in base["skipped_tests"]],
    }


def regressions(comparison: dict) -> list[str]:
    """One phrase per kind of regression, empty when the attempt is no worse than the base."""
    out = []
    for key, what in (("new_warnings", "new warning(s)"),
                      ("new_failing_tests", "new failing test(s)"),
                      ("new_skipped_tests", "new skipped test(s)")):
        items = comparison[key]
        if items:
            more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
            out.append(f"{len(items)} {what}: {'; '.join(items[:SHOWN])}{more}")
    executed = comparison["executed"]
    if executed["attempt"] < executed["base"]:
        out.append(f"fewer executed tests: {executed['attempt']} (base {executed['base']})")
    return out


def side_by_side(comparison: dict) -> list[str]:
    """The comparison as lines for a person: base and attempt next to each other."""
    rows = [("warnings", len(comparison["warnings"]["base"]),
             len(comparison["warnings"]["attempt"])),
            ("failing tests", len(comparison["failing_tests"]["base"]),
             len(comparison["failing_tests"]["attempt"])),
            ("skipped tests", len(comparison["skipped_tests"]["base"]),
             len(comparison["skipped_tests"]["attempt"])),
            ("executed tests", comparison["executed"]["base"], comparison["executed"]["attempt"])]
    commit = (comparison.get("base_commit") or "")[:12] or "base tree"
    return [f"baseline ({commit}) vs attempt:",
            *(f"  {name:<15} {base:>5} | {now:<5}" for name, base, now in rows)]
