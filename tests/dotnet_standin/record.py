"""Re-record a fixture's answers for the `dotnet` stand-in from the real .NET SDK on PATH.

    .venv/bin/python tests/dotnet_standin/record.py all-pass [failing-test ...]
        [--out DIR] [--layout '<yaml of a ValidationConfig>' ...] [--name ANSWERS_NAME]
        [--keep] [--no-check] [--force]

For each fixture: copy dotnet_fixtures/<fixture> to a fresh temporary directory, put a recording
shim named `dotnet` first on PATH, run the product's `validate_full` on the copy, and write
<out>/answers/<name>.yaml (and <out>/trx/<name>[-N].trx) in the stand-in's format. The shim runs
the real `dotnet` with the same argv, cwd and environment, sends its stdout/stderr to files (never
pipes: MSBuild nodes can keep pipes open), records the call, then replays stdout, stderr and the
exit code. Afterwards the new answers are replayed through the stand-in on a second copy and the
two verdicts compared (`--no-check` skips this). Format and placeholders: README.md beside this
file.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.machinery
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXTURES = REPO / "dotnet_fixtures"
RECORDER = "tests/dotnet_standin/record.py"
sys.path.insert(0, str(REPO))  # the product, when run as a script

from specops_dag.validation.dotnet import ValidationReport, validate_full  # noqa: E402
from specops_dag.workflow.model import ValidationConfig  # noqa: E402


def load_standin():
    """The stand-in script as a module: argv is normalised and placeholders are computed exactly
    as it does when it replays."""
    loader = importlib.machinery.SourceFileLoader("dotnet_standin", str(HERE / "dotnet"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


STANDIN = load_standin()

SHIM = '''#!{python}
# Recording shim for tests/dotnet_standin/record.py: runs the real dotnet, records the call.
import fcntl, json, os, pathlib, subprocess, sys, tempfile
REAL, LOG, WORK = {real!r}, {log!r}, {work!r}
argv = sys.argv[1:]
with tempfile.TemporaryDirectory(dir=WORK) as scratch:
    out_path, err_path = os.path.join(scratch, "out"), os.path.join(scratch, "err")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        code = subprocess.call([REAL, *argv], stdout=out, stderr=err)
    if code < 0:
        code = 128 - code
    stdout = pathlib.Path(out_path).read_bytes()
    stderr = pathlib.Path(err_path).read_bytes()
results = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--results-directory"), None)
trx = []
if results is not None and os.path.isdir(results):
    for path in sorted(pathlib.Path(results).rglob("*.trx")):
        trx.append({{"path": str(path),
                     "text": path.read_bytes().decode("utf-8", errors="replace")}})
record = {{"argv": argv, "cwd": os.getcwd(), "exit": code, "trx": trx,
           "stdout": stdout.decode("utf-8", errors="replace"),
           "stderr": stderr.decode("utf-8", errors="replace")}}
with open(LOG, "a", encoding="utf-8") as log:
    fcntl.flock(log, fcntl.LOCK_EX)
    log.write(json.dumps(record) + "\\n")
sys.stdout.buffer.write(stdout)
sys.stdout.flush()
sys.stderr.buffer.write(stderr)
sys.stderr.flush()
sys.exit(code)
'''

# Output that differs from run to run and that the validator does not read: masked when two
# calls with the same argv are compared.
VOLATILE = [
    (re.compile(r"Time Elapsed [\d:.]+"), "Time Elapsed <t>"),
    (re.compile(r"\(in [\d.]+ (ms|sec|min)\)"), "(in <t>)"),
    (re.compile(r"Duration: [\d.]+ ?\w+"), "Duration: <t>"),
    (re.compile(r'"(Modified|Created|Accessed)Time": "[^"]*"'), r'"\1Time": "<t>"'),
    (re.compile(r"\[xUnit\.net [\d:.]+\]"), "[xUnit.net <t>]"),
]


class RecordingError(Exception):
    """A recording that would not replay faithfully."""


def unsafe(path: str) -> bool:
    return any(c in path for c in '&<"') or not path.isascii()


def real_dotnet() -> str:
    found = shutil.which("dotnet")
    if found is None:
        raise SystemExit("record.py: no `dotnet` on PATH: install the .NET SDK first")
    if Path(found).resolve().parent == HERE:
        raise SystemExit(f"record.py: `dotnet` on PATH is the stand-in ({found}); put the real "
                         "SDK first on PATH")
    return found


def sdk_version(real: str, *where: Path) -> str:
    """The SDK the host selects in the fixture (or, when global.json refuses every installed
    SDK there, outside it)."""
    for cwd in where:
        result = subprocess.run([real, "--version"], cwd=cwd, capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, timeout=120)
        if result.returncode == 0 and result.stdout.strip():
            return result.stdout.strip()
    raise SystemExit("record.py: `dotnet --version` fails everywhere; is the SDK installed?")


def to_placeholders(text: str, values: dict[str, str]) -> str:
    """Replace each value by its placeholder in one pass, longest value first (so `{root}` is
    never found inside the `{root_parent}` form of a path, nor inside a placeholder already
    written), and only where the value is not part of a longer name."""
    pairs = sorted(((v, k) for k, v in values.items() if v), key=lambda p: -len(p[0]))
    by_value: dict[str, str] = {}
    for value, key in pairs:
        by_value.setdefault(value, key)  # equal values: the first placeholder in `values` wins
    pattern = re.compile(r"(?<![\w.-])(?:" + "|".join(re.escape(v) for v in by_value)
                         + r")(?![\w-])")
    return pattern.sub(lambda m: by_value[m.group(0)], text)


def substituted(text: str, values: dict[str, str], what: str) -> str:
    out = to_placeholders(text, values)
    if STANDIN.expand(out, values) != text:
        raise RecordingError(f"{what}: the text does not survive placeholder substitution (it "
                             "may contain a literal placeholder such as `{root}`)")
    return out


def masked(text: str) -> str:
    for pattern, repl in VOLATILE:
        text = pattern.sub(repl, text)
    return text


class FlowList(list):
    pass


class LiteralStr(str):
    pass


class Dumper(yaml.SafeDumper):
    pass


Dumper.add_representer(FlowList, lambda d, v: d.represent_sequence(
    "tag:yaml.org,2002:seq", v, flow_style=True))
Dumper.add_representer(LiteralStr, lambda d, v: d.represent_scalar(
    "tag:yaml.org,2002:str", v, style="|" if "\n" in v else None))


def dump(value: object) -> str:
    return yaml.dump(value, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=100)


def trx_name(name: str, n: int) -> str:
    return f"{name}.trx" if n == 1 else f"{name}-{n}.trx"


def build_answers(runs: list[tuple[list[dict], ValidationReport]], name: str
                  ) -> tuple[list[tuple[str, dict]], dict[str, str], list[str]]:
    """(comment, answer) per distinct call over every run, the TRX files to write, and
    warnings. The stand-in plays the first answer whose argv matches, so a repeated call keeps
    only its first answer, and a repeat with another exit code cannot be recorded."""
    answers: list[tuple[str, dict]] = []
    trx_files: dict[str, str] = {}
    warnings: list[str] = []
    first: dict[tuple[str, ...], dict] = {}
    for calls, report in runs:
        sent = [c["command"] for c in report.commands]
        made = ["dotnet " + " ".join(c["argv"]) for c in calls]
        if sent != made:
            raise RecordingError("the calls the shim saw are not the commands the validator "
                                 f"reports:\n  shim:      {made}\n  validator: {sent}")
        for call, command in zip(calls, report.commands, strict=True):
            answer, trx = one_answer(call, warnings)
            argv = answer["argv"]
            shown = shlex.join(argv)
            if tuple(argv) in first:
                earlier = first[tuple(argv)]
                if earlier["exit"] != answer["exit"] or ("trx" in earlier) != (trx is not None):
                    raise RecordingError(
                        f"`{shown}` was called twice with different results (exit "
                        f"{earlier['exit']}, then {answer['exit']}); the stand-in plays the "
                        "first matching answer, so it cannot replay this")
                if any(masked(str(earlier.get(s, ""))) != masked(str(answer.get(s, "")))
                       for s in ("stdout", "stderr")):
                    warnings.append(f"`{shown}` was called twice and printed different "
                                    "output; the stand-in replays the first")
                continue  # the stand-in would never reach a second answer with this argv
            if trx is not None:
                file = trx_name(name, len(trx_files) + 1)
                trx_files[file] = trx
                answer["trx"] = file
                answer["exit"] = answer.pop("exit")  # `exit` last, as in the hand-made files
            first[tuple(argv)] = answer
            what = " ".join(a for a in argv[:2]
                            if a == argv[0] or a.startswith(("-", "{root}")))
            answers.append((f"{command['stage']}: dotnet {what} (exit {call['exit']})",
                            answer))
    return answers, trx_files, warnings


def one_answer(call: dict, warnings: list[str]) -> tuple[dict, str | None]:
    """One recorded call as an answer (without `trx`), and its TRX text with placeholders."""
    root = call["cwd"]
    argv, results, urls = STANDIN.normalise(call["argv"], root)
    values = STANDIN.placeholders(root, results, urls)
    shown = shlex.join(argv)
    answer: dict = {"argv": FlowList(argv)}
    for stream in ("stdout", "stderr"):
        if call[stream]:
            answer[stream] = LiteralStr(substituted(call[stream], values,
                                                    f"{stream} of {shown}"))
    answer["exit"] = call["exit"]
    trx = call["trx"]
    if not trx:
        return answer, None
    if len(trx) > 1:
        warnings.append(f"{shown}: {len(trx)} TRX files under --results-directory; only "
                        f"{trx[0]['path']} is kept")
    after = {a: call["argv"][i + 1] for i, a in enumerate(call["argv"][:-1])}
    wanted = re.search(r"LogFileName=([^;]+)", after.get("--logger", ""))
    name = wanted.group(1) if wanted else after.get("--report-trx-filename")
    if name is None or Path(trx[0]["path"]) != Path(str(results)) / name:
        raise RecordingError(f"{shown}: the TRX was written to {trx[0]['path']}; the stand-in "
                             "writes it to --results-directory/<LogFileName or "
                             "--report-trx-filename>")
    return answer, substituted(trx[0]["text"], values, f"TRX of {shown}")


def answers_text(fixture: str, name: str, sdk: str, layouts: list[str | None],
                 reports: list[ValidationReport], answers: list[tuple[str, dict]]) -> str:
    recorded = {"sdk": sdk, "date": datetime.date.today().isoformat(), "recorder": RECORDER,
                "fixture": fixture}
    if any(layouts):
        recorded["layouts"] = [yaml.safe_load(lay or "{}") or {} for lay in layouts]
    command = ["tests/dotnet_standin/record.py", fixture]
    for layout in layouts if any(layouts) else []:
        command += ["--layout", layout or "{}"]
    command += ["--name", name] if name != fixture else []
    lines = [f"# {name}: recorded from the real .NET SDK {sdk} on fixture {fixture}.",
             f"# Do not edit; re-record: .venv/bin/python {shlex.join(command)}"]
    for layout, report in zip(layouts, reports, strict=True):
        said = f"layout {layout or '{}'}: " if any(layouts) else ""
        lines += [f"# {ln}" for ln in textwrap.wrap(
            f"verdict: {said}{report.describe().splitlines()[0]}", 96,
            break_long_words=False, break_on_hyphens=False)]
    lines += [dump({"recorded_with": recorded}).rstrip("\n"),
              "answers:" + (" []" if not answers else "")]
    for comment, answer in answers:
        lines.append(f"  # {comment}")
        lines.extend("  " + ln if ln else ln for ln in dump([answer]).rstrip("\n").split("\n"))
    return "\n".join(lines) + "\n"


def summary(report: ValidationReport, *roots: Path) -> tuple:
    """What must agree between the real SDK and the stand-in (roots and result folders
    masked)."""
    def clean(text: str | None) -> str | None:
        if text is None:
            return None
        text = re.sub(r"/\S*/trx-\d+-[0-9a-f]{8}\b", "<results>", text)  # the validator's
        for root in roots:
            text = text.replace(str(root), "<root>").replace(str(root.parent), "<parent>")
        return text
    return (report.passed, report.stage, report.blame, clean(report.message),
            [clean(c["command"]) for c in report.commands],
            (report.total, report.executed, report.passed_tests, report.failed, report.skipped))


def assembled_only(path: Path) -> list[str]:
    """What a hand-assembled answers file has that no recording can make (`extends`,
    `when_exists`, `hang`, `serve`): a reason not to overwrite it."""
    if not path.exists():
        return []
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if "recorded_with" in doc:
        return []
    found = {"extends"} & set(doc)
    for answer in doc.get("answers") or []:
        found |= {"when_exists", "hang", "serve"} & set(answer)
    return sorted(found)


def config_of(layout: str | None) -> ValidationConfig | None:
    return ValidationConfig.model_validate(yaml.safe_load(layout) or {}) if layout else None


def run_recorded(fixture: str, base: Path, n: int, real: str, layout: str | None
                 ) -> tuple[Path, list[dict], ValidationReport]:
    """validate_full on a fresh copy of the fixture, with the recording shim first on PATH."""
    root = base / f"run-{n}" / fixture
    shutil.copytree(FIXTURES / fixture, root)
    shim_dir = base / f"shim-{n}"
    (shim_dir / "work").mkdir(parents=True)
    log = shim_dir / "calls.jsonl"
    shim = shim_dir / "dotnet"
    shim.write_text(SHIM.format(python=sys.executable, real=real, log=str(log),
                                work=str(shim_dir / "work")), encoding="utf-8")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    print(f"record.py: {fixture}: validating {root}"
          + (f" with layout {layout}" if layout else "") + " ...", file=sys.stderr)
    report = validate_full(root, base / f"logs-{n}", env=env, config=config_of(layout))
    calls = [json.loads(ln) for ln in log.read_text(encoding="utf-8").splitlines()] \
        if log.exists() else []
    return root, calls, report


def record_one(fixture: str, name: str, out: Path, layouts: list[str | None], real: str,
               keep: bool, check: bool, force: bool) -> bool:
    if not (FIXTURES / fixture).is_dir():
        print(f"record.py: {fixture}: no such fixture in {FIXTURES}", file=sys.stderr)
        return False
    kept = assembled_only(out / "answers" / f"{name}.yaml")
    if kept and not force:
        print(f"record.py: {fixture}: not recorded: {out / 'answers' / f'{name}.yaml'} is "
              f"assembled by hand and has {', '.join(kept)}, which a recording cannot make; "
              "use --force to replace it anyway", file=sys.stderr)
        return False
    base = Path(tempfile.mkdtemp(prefix="specops-Record-")).resolve()  # upper case: {root_lower}
    try:
        if unsafe(str(base)):
            raise RecordingError(f"temporary directory {base} has `&`, `<`, `\"` or non-ASCII "
                                 "characters; set TMPDIR to a plain path")
        sdk = sdk_version(real, FIXTURES / fixture, base)
        runs = [run_recorded(fixture, base, n, real, layout)
                for n, layout in enumerate(layouts, 1)]
        answers, trx_files, warnings = build_answers([(c, r) for _, c, r in runs], name)
        text = answers_text(fixture, name, sdk, layouts, [r for _, _, r in runs], answers)
        if yaml.safe_load(text)["answers"] != [a for _, a in answers]:
            raise RecordingError("the answers file does not read back as written (YAML)")
        for warning in warnings:
            print(f"record.py: {fixture}: warning: {warning}", file=sys.stderr)
        (out / "answers").mkdir(parents=True, exist_ok=True)
        answers_file = out / "answers" / f"{name}.yaml"
        answers_file.write_text(text, encoding="utf-8")
        if trx_files:
            (out / "trx").mkdir(parents=True, exist_ok=True)
        for file, body in trx_files.items():
            (out / "trx" / file).write_text(body, encoding="utf-8")
        written = [str(answers_file), *(str(out / "trx" / f) for f in trx_files)]
        for _, _, report in runs:
            print(f"record.py: {fixture}: {report.describe().splitlines()[0]}", file=sys.stderr)
        print(f"record.py: {fixture}: SDK {sdk}; wrote {', '.join(written)}", file=sys.stderr)
        if not check:
            return True
        return all([replay_agrees(fixture, answers_file, base, n, root, report, layout)
                    for n, ((root, _, report), layout)
                    in enumerate(zip(runs, layouts, strict=True), 1)])
    except RecordingError as err:
        print(f"record.py: {fixture}: not recorded: {err}", file=sys.stderr)
        return False
    finally:
        if keep:
            print(f"record.py: {fixture}: kept {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)


def replay_agrees(fixture: str, answers_file: Path, base: Path, n: int, real_root: Path,
                  real: ValidationReport, layout: str | None) -> bool:
    """Replay the new answers through the stand-in on a second copy: the verdict must agree."""
    root = base / f"replay-{n}" / fixture
    shutil.copytree(FIXTURES / fixture, root)
    env = {**os.environ, "PATH": f"{HERE}{os.pathsep}{os.environ.get('PATH', '')}",
           "DOTNET_STANDIN_ANSWERS": str(answers_file)}
    replayed = validate_full(root, base / f"replay-logs-{n}", env=env, config=config_of(layout))
    if summary(replayed, root) == summary(real, real_root):
        print(f"record.py: {fixture}: the stand-in replays the same verdict", file=sys.stderr)
        return True
    print(f"record.py: {fixture}: the stand-in's verdict differs:\n  real:     "
          f"{summary(real, real_root)}\n  stand-in: {summary(replayed, root)}", file=sys.stderr)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fixtures", nargs="+", help="fixture names in dotnet_fixtures/")
    parser.add_argument("--out", type=Path, default=HERE,
                        help="where answers/ and trx/ are written (default: %(default)s)")
    parser.add_argument("--layout", action="append",
                        help="YAML of a ValidationConfig the validator runs with; repeat it to "
                             "record one run per layout into the same answers file")
    parser.add_argument("--name", help="answers name (default: the fixture's); one fixture only")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    parser.add_argument("--no-check", dest="check", action="store_false",
                        help="do not replay the new answers through the stand-in")
    parser.add_argument("--force", action="store_true",
                        help="replace an assembled answers file that has extends, when_exists, "
                             "hang or serve")
    args = parser.parse_args(argv)
    if args.name and len(args.fixtures) != 1:
        parser.error("--name needs exactly one fixture")
    layouts = args.layout or [None]
    for layout in layouts:
        try:
            config_of(layout)
        except (yaml.YAMLError, ValueError) as err:
            parser.error(f"--layout {layout!r}: {err}")
    real = real_dotnet()
    ok = [record_one(f, args.name or f, args.out.resolve(), layouts, real, args.keep,
                     args.check, args.force) for f in args.fixtures]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
