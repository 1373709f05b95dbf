"""The `dotnet` stand-in against the real SDK. Every answers file that
tests/dotnet_standin/record.py wrote (it has a top-level `recorded_with`) must make the validator
give its fixture the same verdict, send the same commands and count the same tests as the real
`dotnet` on PATH does. `DOTNET_STANDIN_RECORDED_DIR` points the tests at another `--out` folder of
record.py (e.g. a scratch recording) instead of tests/dotnet_standin/."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from specops_dag.validation.dotnet import ValidationReport, validate_full
from specops_dag.workflow.model import ValidationConfig

from ..support.dotnet import FIXTURES, STANDIN, copy_fixture, standin_env

RECORDED_DIR = Path(os.environ.get("DOTNET_STANDIN_RECORDED_DIR") or STANDIN)


def note_of(path: Path) -> dict | None:
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return doc.get("recorded_with")


RECORDED = sorted(p for p in (RECORDED_DIR / "answers").glob("*.yaml") if note_of(p) is not None)
NONE_YET = pytest.param(None, marks=pytest.mark.skip(
    reason=f"no answers file in {RECORDED_DIR / 'answers'} has `recorded_with`: record one with "
           "tests/dotnet_standin/record.py"))


def masked(text: str | None, *roots: Path) -> str | None:
    """The text with the repository root, its parent and the validator's TRX folders
    (`<log dir>/trx-NN-<8 hex>`) masked."""
    if text is None:
        return None
    text = re.sub(r"/\S*/trx-\d+-[0-9a-f]{8}\b", "<results>", text)
    for root in roots:
        text = text.replace(str(root), "<root>").replace(str(root.parent), "<parent>")
    return text


def verdict(report: ValidationReport, root: Path) -> tuple:
    return (report.passed, report.stage, report.blame, masked(report.message, root))


def commands(report: ValidationReport, root: Path) -> list[str | None]:
    return [masked(c["command"], root) for c in report.commands]


def totals(report: ValidationReport) -> tuple[int, ...]:
    return (report.total, report.executed, report.passed_tests, report.failed, report.skipped)


@pytest.mark.dotnet
@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("dotnet") is None, reason="no .NET SDK (`dotnet`) on PATH")
@pytest.mark.parametrize("answers", RECORDED or [NONE_YET],
                         ids=[p.stem for p in RECORDED] or ["none-recorded"])
def test_the_standin_and_the_real_sdk_give_each_recorded_fixture_the_same_verdict(
        tmp_path: Path, answers: Path) -> None:
    note = note_of(answers)
    assert note is not None
    fixture = note.get("fixture", answers.stem)
    why = (f"{answers.name} was recorded with SDK {note.get('sdk')} on {note.get('date')}: if "
           "the SDK on PATH differs, re-record it with tests/dotnet_standin/record.py")
    for n, layout in enumerate(note.get("layouts") or [{}]):
        config = ValidationConfig.model_validate(layout)
        real_root = copy_fixture(tmp_path / f"real-{n}", fixture)
        real = validate_full(real_root, tmp_path / f"real-logs-{n}", config=config)
        standin_root = copy_fixture(tmp_path / f"standin-{n}", fixture)
        env = {**standin_env(answers.stem), "DOTNET_STANDIN_ANSWERS": str(answers)}
        replayed = validate_full(standin_root, tmp_path / f"standin-logs-{n}", env=env,
                                 config=config)
        said = f"layout {layout}, real SDK {real.sdk_version}; {why}"
        assert verdict(replayed, standin_root) == verdict(real, real_root), said
        assert commands(replayed, standin_root) == commands(real, real_root), said
        assert totals(replayed) == totals(real), said


def test_every_recorded_answers_file_names_its_sdk_fixture_and_trx_files() -> None:
    for path in RECORDED:
        note = note_of(path)
        assert isinstance(note, dict), path
        assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", str(note.get("sdk"))), path
        assert note.get("recorder") == "tests/dotnet_standin/record.py", path
        for layout in note.get("layouts") or []:
            ValidationConfig.model_validate(layout)
        assert (FIXTURES / note.get("fixture", path.stem)).is_dir(), path
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for answer in doc["answers"] or []:
            if "trx" in answer:
                assert (path.parent.parent / "trx" / answer["trx"]).is_file(), (path, answer)


def run_standin(answers: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(STANDIN / "dotnet"), *argv], cwd=answers.parent,
                          env={**os.environ, "DOTNET_STANDIN_ANSWERS": str(answers)},
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


def test_the_standin_ignores_recorded_with_and_refuses_unknown_keys(tmp_path: Path) -> None:
    answers = tmp_path / "answers" / "x.yaml"
    answers.parent.mkdir()
    answers.write_text("recorded_with: {sdk: 10.0.401, date: '2026-01-01', recorder: r}\n"
                       "answers:\n  - argv: [--version]\n    stdout: \"10.0.401\\n\"\n")
    assert run_standin(answers, "--version").stdout == "10.0.401\n"
    answers.write_text("recorded_by: me\nanswers: []\n")
    assert run_standin(answers, "--version").returncode == 96
    answers.write_text("answers:\n  - argv: [--version]\n    recorded_with: {sdk: 10.0.401}\n")
    assert run_standin(answers, "--version").returncode == 96


def load_recorder():
    loader = importlib.machinery.SourceFileLoader("record_standin", str(STANDIN / "record.py"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_the_recorder_writes_the_longest_placeholder_first() -> None:
    record = load_recorder()
    root = "/tmp/Rec-1/repo"
    values = record.STANDIN.placeholders(root, "/tmp/Rec-1/logs/trx-09-ab", None)
    text = ('"FullPath": "/tmp/Rec-1/outside/Shared.csproj", "Directory": "tmp/Rec-1/repo/src/",\n'
            'storage="/tmp/rec-1/repo/tests/calc.dll" /tmp/Rec-1/repo/a.cs /tmp/Rec-1/repo-b '
            '/tmp/Rec-1/logs/trx-09-ab/results.trx tmp/Rec-1/outside')
    assert record.to_placeholders(text, values) == (
        '"FullPath": "{root_parent}/outside/Shared.csproj", "Directory": "{root_unrooted}/src/",\n'
        'storage="{root_lower}/tests/calc.dll" {root}/a.cs {root_parent}/repo-b '
        '{results}/results.trx {root_parent_unrooted}/outside')
    assert record.STANDIN.expand(record.to_placeholders(text, values), values) == text


def call(argv: list[str], root: str, exit_code: int, stdout: str) -> dict:
    return {"argv": argv, "cwd": root, "exit": exit_code, "stdout": stdout, "stderr": "",
            "trx": []}


def test_the_recorder_keeps_the_first_of_two_equal_calls_and_refuses_two_that_differ() -> None:
    record = load_recorder()
    root = "/tmp/Rec-2/repo"
    build = ["build", f"{root}/Calc.sln"]
    sent = ({"stage": "build", "command": "dotnet " + " ".join(build)},) * 2
    report = ValidationReport(True, "full", "test", "", commands=sent)
    same = [call(build, root, 0, "Time Elapsed 00:00:01.00\n"),
            call(build, root, 0, "Time Elapsed 00:00:02.50\n")]
    answers, trx, warnings = record.build_answers([(same, report)], "x")
    assert [a for _, a in answers] == [{"argv": ["build", "{root}/Calc.sln"],
                                        "stdout": "Time Elapsed 00:00:01.00\n", "exit": 0}]
    assert (trx, warnings) == ({}, [])
    differ = [call(build, root, 0, ""), call(build, root, 1, "")]
    with pytest.raises(record.RecordingError, match="called twice with different results"):
        record.build_answers([(differ, report)], "x")
