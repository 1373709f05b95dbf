"""QA against the running application (seed 003): what an evaluator phase's `qa:` runs before
its agent session. It runs the generator's work, never the agent: a snapshot commit of the
product worktree checked out in a throwaway worktree, restore and build (or the whole validation),
`dotnet run` on a free loopback port with a start-up deadline, HTTP probes and Chromium pages.
Evidence files go beside the round's report; the worktree and every process it started are gone
afterwards, on failure and timeout too. Without `dotnet` the stage is skipped, never passed.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from specops_dag import gitflow
from specops_dag.errors import ToolMissing
from specops_dag.files import redact, write_json_atomic, write_text_atomic
from specops_dag.process import Background, kill_tree, run_process
from specops_dag.validation.dotnet import (
    CONFIGURATION,
    DROP_ENV,
    build_worktree,
    dotnet_env,
    validate_full,
)
from specops_dag.workflow.model import Qa, QaPage, QaProbe, ValidationConfig

QA_ROOT = ".specops/qa"
TFM_LINE = re.compile(r"net(\d+)\.(\d+)")
ASPNET_RUNTIME = re.compile(r"^Microsoft\.AspNetCore\.App (\d+)\.(\d+)\.\S+", re.MULTILINE)
WEB_SDK = 'sdk="microsoft.net.sdk.web"'
PROBE_TIMEOUT_S = 30.0
POLL_S = 0.2
BODY_LIMIT = 200_000  # evidence keeps at most this much of a response body
NO_SDK = ("`dotnet` is not on PATH, so the application could not be built or started; install "
          "the .NET 10 SDK to run QA")


@dataclass(frozen=True)
class QaCheck:
    """One probe or page: passed, failed or skipped, with its evidence files."""

    id: str
    kind: str  # "probe" | "page"
    status: str
    detail: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class QaReport:
    """The verdict of one QA stage. `skipped` is never a pass: nothing was shown to work."""

    status: str  # "passed" | "failed" | "skipped"
    reason: str
    stage: str  # where it ended: setup, project, build, tests, start, probes, browser, done
    commit: str | None = None  # the snapshot of the generator's work that was run
    tree: str | None = None  # its tree: the product commit of the step has the same one
    url: str | None = None
    evidence: str | None = None  # the evidence folder, relative to the harness root
    checks: tuple[QaCheck, ...] = ()
    duration_s: float = 0.0
    notes: tuple[str, ...] = ()  # how the application was run, e.g. on a newer runtime
    logs: tuple[str, ...] = field(default=())

    def as_record(self) -> dict:
        record = {k: v for k, v in self.__dict__.items() if k not in ("checks", "logs")}
        record["notes"] = list(self.notes)
        record["checks"] = [dict(c.__dict__, files=list(c.files)) for c in self.checks]
        return record


@dataclass
class _Run:
    qa: Qa
    worktree: Path
    evidence: Path
    root: Path  # harness root: evidence paths are shown relative to it
    env: dict[str, str]
    secrets: list[str]
    deadline: float
    config: ValidationConfig = field(default_factory=ValidationConfig)
    framework: str | None = None  # the target policy's framework the build was checked against

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def shown(self, path: Path) -> str:
        path = path.resolve()
        root = self.root.resolve()
        return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)

    def here(self, name: str) -> str:
        """An evidence path as reasons give it: absolute, so it opens from any agent's cwd."""
        return str((self.evidence / name).resolve())

    def save(self, name: str, text: str) -> str:
        write_text_atomic(self.evidence / name, redact(text, self.secrets))
        return self.shown(self.evidence / name)


def run_qa(qa: Qa, *, repo: Path, git_target: bool, root: Path, evidence: Path, label: str,
           env: dict[str, str], secrets: list[str],
           config: ValidationConfig | None = None) -> QaReport:
    """Run the `qa:` block against the generator's work in `repo` (the product worktree, which
    stays untouched); write the evidence into `evidence` (replacing a stale one)."""
    started = time.monotonic()
    if evidence.exists():
        shutil.rmtree(evidence)
    evidence.mkdir(parents=True)
    run = _Run(qa, repo, evidence, root, env, secrets, started + qa.deadline_s,
               config or ValidationConfig())
    report = _qa(run, repo, git_target, root / QA_ROOT / label)
    report = replace(report, evidence=run.shown(evidence) + "/",
                     duration_s=round(time.monotonic() - started, 3))
    write_json_atomic(evidence / "qa.json", report.as_record())
    write_text_atomic(evidence / "qa.md", describe(report, evidence.resolve()))
    return report


def _qa(run: _Run, repo: Path, git_target: bool, scratch: Path) -> QaReport:
    if not git_target:
        return QaReport("skipped", "the target is not a git repository: QA runs the generator's "
                        "work from a snapshot commit in a throwaway worktree", "setup")
    if shutil.which("dotnet", path=run.env.get("PATH")) is None:
        return QaReport("skipped", NO_SDK, "setup")
    worktree = scratch / "tree"
    if worktree.exists() or scratch.exists():  # left by a run that was killed
        kill_leftovers(scratch)
        gitflow.remove_worktree(repo, worktree)
        shutil.rmtree(scratch, ignore_errors=True)
    try:
        commit, tree = gitflow.snapshot_commit(repo, scratch, "specops QA: the generator's work")
        gitflow.add_detached_worktree(repo, worktree, commit)
        run.worktree = worktree
        try:
            report = _exercise(run)
        except ToolMissing:  # `dotnet` went away since the check above
            report = QaReport("skipped", NO_SDK, "setup")
    finally:
        gitflow.remove_worktree(repo, worktree)
        shutil.rmtree(scratch, ignore_errors=True)
    return replace(report, commit=commit, tree=tree)


def kill_leftovers(scratch: Path) -> list[int]:
    """Kill what a QA run that was itself killed left running in `scratch`: an application
    whose `dotnet run` died without ending it still has its working directory there. Only
    processes working inside `scratch` are touched."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cwd"]):
        cwd = proc.info.get("cwd")
        if cwd and Path(cwd).is_relative_to(scratch.resolve()):
            found.append(proc.info["pid"])
            kill_tree(proc.info["pid"])
    return found


def web_project(worktree: Path, qa: Qa) -> Path | str:
    """The project to run, or why there is none."""
    if qa.project is not None:
        path = worktree / qa.project
        return path if path.is_file() else (f"qa.project `{qa.project}` does not exist in the "
                                            "generator's work")
    found = sorted(p for p in worktree.rglob("*.csproj")
                   if not {"bin", "obj"} & set(p.relative_to(worktree).parts)
                   and WEB_SDK in p.read_text(encoding="utf-8", errors="replace").lower()
                   .replace("'", '"').replace(" ", ""))
    if len(found) == 1:
        return found[0]
    if not found:
        return ("no Microsoft.NET.Sdk.Web project in the generator's work; name the project to "
                "run in qa.project")
    names = ", ".join(p.relative_to(worktree).as_posix() for p in found)
    return (f"{len(found)} Microsoft.NET.Sdk.Web projects ({names}); name the one to run in "
            "qa.project")


def _exercise(run: _Run) -> QaReport:
    project = web_project(run.worktree, run.qa)
    if isinstance(project, str):
        return QaReport("failed", project, "project")
    built = _build(run)
    if built is not None:
        return built
    rolled, notes = roll_forward(run)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = ["dotnet", "run", "--project", str(project), "--no-build", "-c", CONFIGURATION,
            "--no-launch-profile", "--", "--urls", url]
    with Background(argv, cwd=run.worktree, deadline_s=max(run.remaining(), 1.0),
                    env={**app_env(run.env, run.qa), **rolled},
                    stdout_path=run.evidence / "app.out.txt",
                    stderr_path=run.evidence / "app.err.txt") as app:
        startup, left = run.qa.startup_timeout_s, run.remaining()
        limit = (f"within {startup} s (qa.startup_timeout_s)" if startup <= left else
                 "before the QA deadline ran out (qa.deadline_s)")
        problem = wait_until_listening(app, port, min(startup, left), limit, url)
        checks = [] if problem else [probe(run, url, p) for p in run.qa.probes]
        if not problem and run.qa.browser:
            checks += browse(run, url)
    result = app.stop()
    for name, text in (("app.out.txt", result.stdout), ("app.err.txt", result.stderr)):
        run.save(name, text)
    if problem:
        return QaReport("failed", f"{problem}; its output: {run.here('app.out.txt')}", "start",
                        url=url, notes=notes)
    return replace(verdict(checks, url), notes=notes)


def roll_forward(run: _Run) -> tuple[dict[str, str], tuple[str, ...]]:
    """`dotnet run` of a target whose ASP.NET Core runtime line is not installed: with
    `validation.target.newer_runtime` and a newer line installed, DOTNET_ROLL_FORWARD=Major and
    a note saying so (as the validation's tests do); otherwise nothing, and an application that
    cannot start says why in its own output."""
    line = TFM_LINE.fullmatch(run.framework or "")
    if line is None or not run.config.target.newer_runtime:
        return {}, ()
    wanted = (int(line[1]), int(line[2]))
    result = run_process(["dotnet", "--list-runtimes"], cwd=run.worktree,
                         deadline_s=max(min(run.remaining(), 60.0), 1.0),
                         env=dotnet_env({k: v for k, v in run.env.items()
                                         if not k.startswith("SPECOPS_")}))
    lines = {(int(a), int(b)) for a, b in ASPNET_RUNTIME.findall(result.stdout)}
    if result.exit_code != 0 or wanted in lines or not any(ln > wanted for ln in lines):
        return {}, ()
    listed = "; ".join(ln for ln in result.stdout.splitlines()
                       if ln.startswith("Microsoft.AspNetCore.App "))
    return {"DOTNET_ROLL_FORWARD": "Major"}, (
        f"no ASP.NET Core {wanted[0]}.{wanted[1]} runtime is installed, so the {run.framework} "
        "application ran on the newest installed one (DOTNET_ROLL_FORWARD=Major, "
        f"validation.target.newer_runtime); installed: {listed}",)


def _build(run: _Run) -> QaReport | None:
    logs = run.evidence / "validation"
    if run.qa.tests:
        report = validate_full(run.worktree, logs, max(run.remaining(), 1.0), run.env,
                               run.config)
        stage = "tests"
    else:
        report = build_worktree(run.worktree, logs, run.env, max(run.remaining(), 1.0),
                                run.config)
        stage = "build"
    if report.passed:
        run.framework = report.target
        return None
    return QaReport("failed", f"{'the validation' if run.qa.tests else 'restore and build'} of "
                    f"the generator's work failed at `{report.stage}`: {report.message}; logs in "
                    f"{run.here('validation')}/", stage, logs=report.logs)


def app_env(env: dict[str, str], qa: Qa) -> dict[str, str]:
    """The application's environment: the .NET settings of the validation plus `qa.env`."""
    base = {k: v for k, v in env.items() if k not in DROP_ENV and not k.startswith("SPECOPS_")}
    return {**dotnet_env(base), **qa.env}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_listening(app: Background, port: int, timeout_s: float, limit: str,
                         url: str) -> str | None:
    """None once the port accepts a connection; otherwise why the application is not up (it
    exited, or `limit` passed: the caller's `with` kills its tree)."""
    until = time.monotonic() + timeout_s
    deadline = "before the QA deadline ran out (qa.deadline_s)"
    while True:
        code = app.poll()  # None once its deadline killed it
        if code is not None:
            return f"the application exited with code {code} before it listened on {url}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=POLL_S):
                return None
        except OSError:
            pass
        if app.timed_out or time.monotonic() >= until:
            why = deadline if app.timed_out else limit
            return f"the application did not listen on {url} {why}; its process tree was killed"
        time.sleep(POLL_S)


def probe(run: _Run, url: str, spec: QaProbe) -> QaCheck:
    """One HTTP request; the request and the whole response are saved as text."""
    headers = {"Host": url.removeprefix("http://"), **spec.headers}
    body = (spec.body or "").encode()
    if spec.body is not None:
        headers.setdefault("Content-Length", str(len(body)))
    request = "\n".join([f"{spec.method} {spec.path} HTTP/1.1",
                         *(f"{k}: {v}" for k, v in headers.items()), "", spec.body or ""])
    files = [run.save(f"probe-{spec.id}.request.txt", request)]
    timeout = min(PROBE_TIMEOUT_S, run.remaining())
    if timeout <= 0:
        return QaCheck(spec.id, "probe", "failed", f"{spec.method} {spec.path}: the QA deadline "
                       f"({run.qa.deadline_s} s, qa.deadline_s) ran out before it", tuple(files))
    conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=timeout)
    try:
        conn.request(spec.method, spec.path, body=body if spec.body is not None else None,
                     headers={k: v for k, v in headers.items() if k != "Host"})
        response = conn.getresponse()
        data = response.read(BODY_LIMIT).decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException) as err:
        return QaCheck(spec.id, "probe", "failed", f"{spec.method} {spec.path}: no answer "
                       f"({type(err).__name__}: {err})", tuple(files))
    finally:
        conn.close()
    files.append(run.save(f"probe-{spec.id}.response.txt", "\n".join(
        [f"HTTP/1.1 {response.status} {response.reason}",
         *(f"{k}: {v}" for k, v in response.getheaders()), "", data])))
    problems = ([f"expected status {spec.status}, got {response.status}"]
                if response.status != spec.status else [])
    problems += [f"the body does not contain {text!r}" for text in spec.body_contains
                 if text not in data]
    detail = f"{spec.method} {spec.path}: " + ("; ".join(problems) if problems else
                                               f"{response.status} as expected")
    return QaCheck(spec.id, "probe", "failed" if problems else "passed", detail, tuple(files))


def chromium(env: dict[str, str]) -> str | None:
    """Debian's Chromium (never a downloaded browser): SPECOPS_CHROMIUM, else on PATH."""
    return env.get("SPECOPS_CHROMIUM") or next(
        (found for name in ("chromium", "chromium-browser")
         if (found := shutil.which(name, path=env.get("PATH")))), None)


def browse(run: _Run, url: str) -> list[QaCheck]:
    """The `browser:` pages in one child process (Playwright and Chromium are its descendants,
    so the runner's deadline and tree kill cover them)."""
    pages = run.qa.browser
    binary = chromium(run.env)
    if binary is None:
        return [QaCheck(p.id, "page", "skipped", f"{p.path}: Chromium is not installed "
                        "(`apt-get install chromium`, or set SPECOPS_CHROMIUM)") for p in pages]
    job = run.evidence / "browser-job.json"
    write_json_atomic(job, {"chromium": binary, "base": url, "out": str(run.evidence),
                            "timeout_s": PROBE_TIMEOUT_S,
                            "pages": [p.model_dump() for p in pages]})
    result = run_process([sys.executable, "-m", "specops_dag.validation.qa_browser", str(job)],
                         cwd=run.evidence, deadline_s=max(run.remaining(), 1.0),
                         env={k: v for k, v in os.environ.items() if v not in run.secrets},
                         stdout_path=run.evidence / "browser.out.txt",
                         stderr_path=run.evidence / "browser.err.txt")
    job.unlink(missing_ok=True)
    try:
        answers = json.loads((run.evidence / "browser.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        why = ("timed out: the QA deadline ran out and the browser was killed"
               if result.timed_out else f"exited {result.exit_code}: "
               f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")
        return [QaCheck(p.id, "page", "failed", f"{p.path}: the browser {why}") for p in pages]
    if answers.get("unavailable"):
        return [QaCheck(p.id, "page", "skipped", f"{p.path}: {answers['unavailable']}")
                for p in pages]
    by_id = {a["id"]: a for a in answers.get("pages", [])}
    return [page_check(run, p, by_id.get(p.id)) for p in pages]


def page_check(run: _Run, spec: QaPage, answer: dict | None) -> QaCheck:
    if answer is None:
        return QaCheck(spec.id, "page", "failed", f"{spec.path}: the browser gave no result")
    files = tuple(run.shown(run.evidence / f) for f in answer.get("files", []))
    if answer.get("error"):
        return QaCheck(spec.id, "page", "failed", f"{spec.path}: {answer['error']}", files)
    text = answer.get("text", "")
    problems = ([f"expected status {spec.status}, got {answer.get('status')}"]
                if spec.status is not None and answer.get("status") != spec.status else [])
    problems += [f"the page does not show {t!r}" for t in spec.text_contains if t not in text]
    detail = f"{spec.path}: " + ("; ".join(problems) if problems else
                                 f"opened ({answer.get('status')}), screenshot saved")
    return QaCheck(spec.id, "page", "failed" if problems else "passed", detail, files)


def verdict(checks: list[QaCheck], url: str) -> QaReport:
    failed = [c for c in checks if c.status == "failed"]
    skipped = [c for c in checks if c.status == "skipped"]
    if failed:
        return QaReport("failed", "; ".join(f"{c.kind} `{c.id}` {c.detail}" for c in failed),
                        "probes" if failed[0].kind == "probe" else "browser", url=url,
                        checks=tuple(checks))
    passed = [c for c in checks if c.status == "passed"]
    left_out = ", ".join(f"{c.kind} `{c.id}` {c.detail}" for c in skipped)
    if skipped and not passed:  # nothing but its start was shown to work
        return QaReport("skipped", f"the application started on {url}, but no check of it ran; "
                        f"skipped, so not checked: {left_out}", "browser", url=url,
                        checks=tuple(checks))
    if skipped:  # what was checked, and what was not, each by name
        return QaReport("passed", f"the application started on {url}; checked and passed: "
                        + ", ".join(f"{c.kind} `{c.id}` {c.detail}" for c in passed)
                        + f"; skipped, so not checked: {left_out}", "done", url=url,
                        checks=tuple(checks))
    probes = sum(c.kind == "probe" for c in passed)
    pages = len(passed) - probes
    return QaReport("passed", f"the application started on {url}; {probes} probe(s) and "
                    f"{pages} page(s) passed", "done", url=url, checks=tuple(checks))


def describe(report: QaReport, folder: Path) -> str:
    """qa.md: what the evaluator reads first. Its files are named by their names in `folder`
    (given absolute, so they open from any working directory)."""
    lines = [f"# QA against the running application: {report.status.upper()}", "",
             f"- result: {report.reason}", f"- stage reached: {report.stage}",
             f"- evidence files (named below): {folder}/"]
    if report.commit:
        lines.append(f"- ran the generator's work: snapshot commit {report.commit} (tree "
                     f"{report.tree}) in a throwaway worktree, removed afterwards")
    if report.url:
        lines.append(f"- application URL: {report.url} (its output: app.out.txt, app.err.txt)")
    if report.logs:
        lines.append("- build and test logs: validation/")
    lines += [f"- note: {n}" for n in report.notes]
    if report.checks:
        lines += ["", "## Checks", ""]
        lines += [f"- {c.status.upper()} {c.kind} `{c.id}`: {c.detail}"
                  + (f" — evidence: {', '.join(Path(f).name for f in c.files)}" if c.files else "")
                  for c in report.checks]
    return "\n".join(lines) + "\n"
