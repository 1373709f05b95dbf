"""QA against the running application (issue #18, item 6; seed 003): the generator's work run in a
throwaway worktree, probed over HTTP and in Chromium, everything it started gone afterwards."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import time
from pathlib import Path

import git
import psutil
import pytest

from specops_dag.errors import DefinitionError
from specops_dag.validation.qa import NO_SDK, run_qa
from specops_dag.workflow.catalog import load_catalog
from specops_dag.workflow.model import Qa, ValidationConfig

from ..support.dotnet import STANDIN, path_without_dotnet
from ..support.git import WHO as HARNESS_WHO
from ..support.harness import REPO, VENV_BIN, write_tree

FIXTURE = REPO / "dotnet_fixtures" / "minimal-api"
# The real SDK here has only the 10.0 runtime; ASP.NET Core 8's TestHost fails on it when rolled
# forward (dotnet_fixtures/README.md), so the real-SDK tests run the net10.0 twin.
FIXTURE_NET10 = REPO / "dotnet_fixtures" / "minimal-api-net10"
WHO = HARNESS_WHO
PROBES = [{"id": "health", "path": "/health", "body_contains": ["ok"]},
          {"id": "todos", "path": "/todos", "body_contains": ["Ship the API"]},
          {"id": "create", "method": "POST", "path": "/todos", "status": 201,
           "headers": {"Content-Type": "application/json"}, "body": '{"title":"Test the QA"}',
           "body_contains": ['"id":3']}]
HAS_BROWSER = (shutil.which("chromium") is not None
               and importlib.util.find_spec("playwright") is not None)


def product_repo(tmp_path: Path, fixture: Path = FIXTURE) -> Path:
    """The minimal-api fixture as a committed repository, plus the generator's uncommitted
    work: a changed file and a new one (what QA must run)."""
    repo = tmp_path / "product"
    shutil.copytree(fixture, repo)
    handle = git.Repo.init(repo, initial_branch="main")
    handle.git.add(A=True)
    handle.index.commit("initial", author=WHO, committer=WHO)
    (repo / "src/TodoApi/TodoStore.cs").write_text(
        (repo / "src/TodoApi/TodoStore.cs").read_text() + "// reviewed\n")
    (repo / "src/TodoApi/NOTES.md").write_text("the generator's new file\n")
    return repo


def standin(answers: str, log: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{STANDIN}:{os.environ['PATH']}",
            "DOTNET_STANDIN_ANSWERS": str(STANDIN / "answers" / f"{answers}.yaml"),
            "DOTNET_STANDIN_LOG": str(log)}


def qa_of(**fields: object) -> Qa:
    return Qa.model_validate({"startup_timeout_s": 20, "deadline_s": 120, **fields})


def run(tmp_path: Path, qa: Qa, env: dict[str, str], fixture: Path = FIXTURE,
        config: ValidationConfig | None = None):
    repo = product_repo(tmp_path, fixture)
    before = (git.Repo(repo).git.status("--porcelain"), git.Repo(repo).head.commit.hexsha,
              (repo / "src/TodoApi/TodoStore.cs").read_text())
    report = run_qa(qa, repo=repo, git_target=True, root=tmp_path, label="d1-build-r1",
                    evidence=tmp_path / "phases/d1/build/reviews/build-r1-qa", env=env,
                    secrets=[], config=config)
    after = (git.Repo(repo).git.status("--porcelain"), git.Repo(repo).head.commit.hexsha,
             (repo / "src/TodoApi/TodoStore.cs").read_text())
    assert after == before  # the product worktree is untouched
    return repo, report


def assert_nothing_left(tmp_path: Path, repo: Path, url: str | None) -> None:
    """No throwaway worktree, no git record of it, no process of ours, the port closed."""
    assert git.Repo(repo).git.worktree("list").splitlines() == [
        f"{repo}  {git.Repo(repo).head.commit.hexsha[:7]} [main]"]
    assert not (tmp_path / ".specops/qa").exists() or not any((tmp_path / ".specops/qa").iterdir())
    mine = [p.info for p in psutil.process_iter(["pid", "cmdline", "cwd"])
            if str(tmp_path) in " ".join(p.info["cmdline"] or []) + (p.info["cwd"] or "")
            and (p.info["cmdline"] or [""])[:2] != ["git", "cat-file"]]  # GitPython's, the test's
    assert mine == []
    if url:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=1)


def evidence(tmp_path: Path, name: str) -> str:
    return (tmp_path / "phases/d1/build/reviews/build-r1-qa" / name).read_text()


def test_qa_runs_the_generators_work_in_a_throwaway_worktree_and_every_probe_passes(
        tmp_path: Path) -> None:
    log = tmp_path / "dotnet.log"
    repo, report = run(tmp_path, qa_of(probes=PROBES), standin("minimal-api", log))
    assert (report.status, report.stage) == ("passed", "done"), report.reason
    assert report.reason == f"the application started on {report.url}; 3 probe(s) and 0 page(s) passed"
    assert report.url.startswith("http://127.0.0.1:")
    # the snapshot holds the generator's uncommitted work, on top of the product's HEAD
    snapshot = git.Repo(repo).commit(report.commit)
    assert snapshot.parents[0].hexsha == git.Repo(repo).head.commit.hexsha
    assert snapshot.tree.hexsha == report.tree
    assert (snapshot.tree / "src/TodoApi/NOTES.md").data_stream.read() == b"the generator's new file\n"
    assert (snapshot.tree / "src/TodoApi/TodoStore.cs").data_stream.read().endswith(b"// reviewed\n")
    assert log.read_text().splitlines() == [
        "restore '{root}/TodoApi.sln' -nologo -nodeReuse:false -tl:off -warnaserror "
        "-warnNotAsError:NU1901,NU1902,NU1903,NU1904",
        "build '{root}/TodoApi.sln' --no-restore -c Release -nologo -nodeReuse:false -tl:off "
        "-warnaserror -warnNotAsError:NU1901,NU1902,NU1903,NU1904 --no-incremental "
        "-p:UseSharedCompilation=false",
        "--list-runtimes",
        "run --project '{root}/src/TodoApi/TodoApi.csproj' --no-build -c Release "
        "--no-launch-profile -- --urls '{urls}'"]
    assert evidence(tmp_path, "probe-create.request.txt") == (
        f"POST /todos HTTP/1.1\nHost: {report.url.removeprefix('http://')}\n"
        "Content-Type: application/json\nContent-Length: 23\n\n{\"title\":\"Test the QA\"}")
    response = evidence(tmp_path, "probe-create.response.txt")
    assert response.startswith("HTTP/1.1 201 Created\nServer: Kestrel\n")
    assert "Location: /todos/3\n" in response
    assert response.endswith('\n\n{"id":3,"title":"Test the QA","done":false}')
    assert "Now listening on: " + report.url in evidence(tmp_path, "app.out.txt")
    assert "Application is shutting down..." in evidence(tmp_path, "app.out.txt")
    assert [(c.id, c.status, c.detail) for c in report.checks] == [
        ("health", "passed", "GET /health: 200 as expected"),
        ("todos", "passed", "GET /todos: 200 as expected"),
        ("create", "passed", "POST /todos: 201 as expected")]
    assert evidence(tmp_path, "qa.md") == (
        "# QA against the running application: PASSED\n\n"
        f"- result: the application started on {report.url}; 3 probe(s) and 0 page(s) passed\n"
        "- stage reached: done\n"
        f"- evidence files (named below): {tmp_path}/phases/d1/build/reviews/build-r1-qa/\n"
        f"- ran the generator's work: snapshot commit {report.commit} (tree {report.tree}) in a "
        "throwaway worktree, removed afterwards\n"
        f"- application URL: {report.url} (its output: app.out.txt, app.err.txt)\n\n"
        "## Checks\n\n"
        "- PASSED probe `health`: GET /health: 200 as expected — evidence: "
        "probe-health.request.txt, probe-health.response.txt\n"
        "- PASSED probe `todos`: GET /todos: 200 as expected — evidence: "
        "probe-todos.request.txt, probe-todos.response.txt\n"
        "- PASSED probe `create`: POST /todos: 201 as expected — evidence: "
        "probe-create.request.txt, probe-create.response.txt\n")
    assert_nothing_left(tmp_path, repo, report.url)


@pytest.mark.e2e
def test_a_failing_probe_fails_qa_with_its_request_response_and_the_app_output_saved(
        tmp_path: Path) -> None:
    repo, report = run(tmp_path, qa_of(probes=PROBES[:2]),
                       standin("minimal-api-500", tmp_path / "dotnet.log"))
    assert (report.status, report.stage) == ("failed", "probes")
    assert report.reason == ("probe `todos` GET /todos: expected status 200, got 500; the body "
                             "does not contain 'Ship the API'")
    assert [c.status for c in report.checks] == ["passed", "failed"]
    assert report.checks[1].files == (
        "phases/d1/build/reviews/build-r1-qa/probe-todos.request.txt",
        "phases/d1/build/reviews/build-r1-qa/probe-todos.response.txt")
    assert evidence(tmp_path, "probe-todos.response.txt").startswith(
        "HTTP/1.1 500 Internal Server Error\n")
    assert ("System.InvalidOperationException: The todo store is not ready."
            in evidence(tmp_path, "app.out.txt"))
    assert "- FAILED probe `todos`: GET /todos: expected status 200, got 500" in evidence(
        tmp_path, "qa.md")
    assert_nothing_left(tmp_path, repo, report.url)


@pytest.mark.e2e
def test_an_application_that_never_listens_hits_the_startup_deadline_and_its_tree_is_killed(
        tmp_path: Path) -> None:
    started = time.monotonic()
    repo, report = run(tmp_path, qa_of(startup_timeout_s=2, deadline_s=60, probes=PROBES),
                       standin("minimal-api-no-start", tmp_path / "dotnet.log"))
    assert time.monotonic() - started < 30
    assert (report.status, report.stage, report.checks) == ("failed", "start", ())
    assert report.reason == (
        f"the application did not listen on {report.url} within 2 s (qa.startup_timeout_s); its "
        f"process tree was killed; its output: {tmp_path}/phases/d1/build/reviews/build-r1-qa/"
        "app.out.txt")
    assert_nothing_left(tmp_path, repo, report.url)


@pytest.mark.e2e
def test_the_whole_qa_deadline_kills_an_application_that_outlives_it(tmp_path: Path) -> None:
    repo, report = run(tmp_path, qa_of(startup_timeout_s=30, deadline_s=3, probes=PROBES),
                       standin("minimal-api-no-start", tmp_path / "dotnet.log"))
    assert (report.status, report.stage) == ("failed", "start")
    assert report.reason == (
        f"the application did not listen on {report.url} before the QA deadline ran out "
        f"(qa.deadline_s); its process tree was killed; its output: {tmp_path}/phases/d1/build/"
        "reviews/build-r1-qa/app.out.txt")
    assert report.duration_s < 20
    assert_nothing_left(tmp_path, repo, report.url)


RUN_ARGV = ("[run, --project, '{root}/src/TodoApi/TodoApi.csproj', --no-build, -c, Release, "
            "--no-launch-profile, --, --urls, '{urls}']")
BUILD_ARGV = ("[build, '{root}/TodoApi.sln', --no-restore, -c, Release, -nologo, "
              "'-nodeReuse:false', '-tl:off', -warnaserror, "
              "'-warnNotAsError:NU1901,NU1902,NU1903,NU1904', --no-incremental, "
              "'-p:UseSharedCompilation=false']")


def answers_beside(tmp_path: Path, answers: str) -> dict[str, str]:
    """An answers file of this test's own that extends minimal-api's."""
    path = tmp_path / "answers.yaml"
    path.write_text(f"extends: {STANDIN / 'answers/minimal-api.yaml'}\nanswers:\n{answers}")
    return {**standin("minimal-api", tmp_path / "dotnet.log"), "DOTNET_STANDIN_ANSWERS": str(path)}


@pytest.mark.e2e
def test_an_application_that_exits_at_start_up_fails_qa_with_its_exit_code(
        tmp_path: Path) -> None:
    env = answers_beside(tmp_path, f"""  - argv: {RUN_ARGV}
    stderr: |
      Unhandled exception. System.IO.IOException: Failed to bind to address {{urls}}: address already in use.
    exit: 134
""")
    repo, report = run(tmp_path, qa_of(probes=PROBES), env)
    assert (report.status, report.stage) == ("failed", "start")
    assert report.reason == (f"the application exited with code 134 before it listened on "
                             f"{report.url}; its output: {tmp_path}/phases/d1/build/reviews/"
                             "build-r1-qa/app.out.txt")
    assert "Failed to bind to address" in evidence(tmp_path, "app.err.txt")
    assert_nothing_left(tmp_path, repo, report.url)


@pytest.mark.e2e
def test_a_build_that_fails_stops_qa_before_the_application_is_started(tmp_path: Path) -> None:
    env = answers_beside(tmp_path, f"""  - argv: {BUILD_ARGV}
    stdout: |
      {{root}}/src/TodoApi/Program.cs(10,5): error CS0103: The name 'todos' does not exist in the current context [{{root}}/src/TodoApi/TodoApi.csproj]

      Build FAILED.
    exit: 1
""")
    repo, report = run(tmp_path, qa_of(probes=PROBES), env)
    assert (report.status, report.stage, report.url) == ("failed", "build", None)
    assert report.reason.startswith(
        "restore and build of the generator's work failed at `build`: `dotnet build` of "
        "TodoApi.sln failed (exit 1); first error: ")
    assert report.reason.endswith(f"; logs in {tmp_path}/phases/d1/build/reviews/build-r1-qa/"
                                  "validation/")
    assert "run --project" not in (tmp_path / "dotnet.log").read_text()
    assert_nothing_left(tmp_path, repo, None)


@pytest.mark.e2e
def test_a_repository_without_a_web_project_fails_qa_and_asks_for_qa_project(
        tmp_path: Path) -> None:
    repo = tmp_path / "calc"
    shutil.copytree(REPO / "dotnet_fixtures/all-pass", repo)
    handle = git.Repo.init(repo, initial_branch="main")
    handle.git.add(A=True)
    handle.index.commit("initial", author=WHO, committer=WHO)
    report = run_qa(qa_of(probes=PROBES), repo=repo, git_target=True, root=tmp_path,
                    evidence=tmp_path / "ev", label="d1-build-r1",
                    env=standin("all-pass", tmp_path / "dotnet.log"), secrets=[])
    assert (report.status, report.stage, report.reason) == (
        "failed", "project", "no Microsoft.NET.Sdk.Web project in the generator's work; name "
                             "the project to run in qa.project")
    missing = run_qa(qa_of(project="src/Api/Api.csproj"), repo=repo, git_target=True,
                     root=tmp_path, evidence=tmp_path / "ev", label="d1-build-r1",
                     env=standin("all-pass", tmp_path / "dotnet.log"), secrets=[])
    assert missing.reason == ("qa.project `src/Api/Api.csproj` does not exist in the "
                              "generator's work")
    assert_nothing_left(tmp_path, repo, None)


@pytest.mark.e2e
def test_what_a_killed_qa_run_left_running_in_its_worktree_is_killed_by_the_next_one(
        tmp_path: Path) -> None:
    import subprocess
    import sys

    left = tmp_path / ".specops/qa/d1-build-r1/tree/src/TodoApi"
    left.mkdir(parents=True)
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], cwd=left,
                              start_new_session=True)
    try:
        repo, report = run(tmp_path, qa_of(probes=PROBES[:1]),
                           standin("minimal-api", tmp_path / "dotnet.log"))
        assert report.status == "passed", report.reason
        assert orphan.wait(timeout=10) is not None  # killed, not left to time out
    finally:
        if orphan.poll() is None:  # only if the product failed to: never leave it behind
            orphan.kill()
            orphan.wait()
    assert_nothing_left(tmp_path, repo, report.url)


def test_without_dotnet_on_path_qa_is_skipped_and_never_reported_as_passed(
        tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    repo, report = run(tmp_path, qa_of(probes=PROBES), env)
    assert (report.status, report.reason, report.stage, report.commit) == (
        "skipped", NO_SDK, "setup", None)
    assert NO_SDK == ("`dotnet` is not on PATH, so the application could not be built or "
                      "started; install the .NET 10 SDK to run QA")
    assert evidence(tmp_path, "qa.md").startswith("# QA against the running application: SKIPPED")
    assert_nothing_left(tmp_path, repo, None)


def test_a_target_that_is_not_a_git_repository_is_skipped_not_run_in_place(
        tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    shutil.copytree(FIXTURE, folder)
    report = run_qa(qa_of(probes=PROBES), repo=folder, git_target=False, root=tmp_path,
                    evidence=tmp_path / "ev", label="d1-build-r1",
                    env=standin("minimal-api", tmp_path / "dotnet.log"), secrets=[])
    assert (report.status, report.reason) == (
        "skipped", "the target is not a git repository: QA runs the generator's work from a "
                   "snapshot commit in a throwaway worktree")
    assert not (tmp_path / "dotnet.log").exists()


@pytest.mark.e2e
def test_with_tests_qa_runs_the_whole_validation_in_its_worktree_first(tmp_path: Path) -> None:
    log = tmp_path / "dotnet.log"
    repo, report = run(tmp_path, qa_of(tests=True, probes=PROBES[:1]), standin("minimal-api", log))
    assert report.status == "passed", report.reason
    sent = [line.split(" ", 1)[0] for line in log.read_text().splitlines()]
    assert sent == ["--version", "msbuild", "msbuild", "restore", "build", "msbuild", "msbuild",
                    "test", "--list-runtimes", "run"]
    trx = list((tmp_path / "phases/d1/build/reviews/build-r1-qa/validation").glob("trx-*/results.trx"))
    assert len(trx) == 1
    assert_nothing_left(tmp_path, repo, report.url)


@pytest.mark.e2e
def test_a_secret_in_the_environment_never_reaches_the_evidence(tmp_path: Path) -> None:
    env = standin("minimal-api", tmp_path / "dotnet.log")
    repo = product_repo(tmp_path)
    report = run_qa(qa_of(probes=[{"id": "echo", "path": "/health",
                                   "headers": {"X-Token": "sk-live-0123456789"}}]),
                    repo=repo, git_target=True, root=tmp_path, evidence=tmp_path / "ev",
                    label="d1-build-r1", env=env, secrets=["sk-live-0123456789"])
    assert report.status == "passed"
    assert "X-Token: ***" in (tmp_path / "ev/probe-echo.request.txt").read_text()


@pytest.mark.ui
@pytest.mark.skipif(not HAS_BROWSER, reason="needs Debian's chromium and playwright")
def test_a_browser_page_is_opened_in_chromium_and_its_screenshot_and_text_are_saved(
        tmp_path: Path) -> None:
    repo, report = run(tmp_path, qa_of(browser=[
        {"id": "home", "path": "/", "status": 200, "text_contains": ["[ ] Ship the API"]},
        {"id": "missing", "path": "/nothing-here", "status": 200}]),
        standin("minimal-api", tmp_path / "dotnet.log"))
    assert [(c.id, c.status, c.detail) for c in report.checks] == [
        ("home", "passed", "/: opened (200), screenshot saved"),
        # Chromium refuses an error answer with an empty body (Kestrel's 404) outright
        ("missing", "failed", "/nothing-here: the browser could not open it: Page.goto: "
         f"net::ERR_HTTP_RESPONSE_CODE_FAILURE at {report.url}/nothing-here")]
    assert report.status == "failed"
    folder = tmp_path / "phases/d1/build/reviews/build-r1-qa"
    assert (folder / "page-home.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "[x] Write the spec\n[ ] Ship the API" in (folder / "page-home.txt").read_text()
    assert report.checks[0].files == ("phases/d1/build/reviews/build-r1-qa/page-home.png",
                                      "phases/d1/build/reviews/build-r1-qa/page-home.txt")
    assert_nothing_left(tmp_path, repo, report.url)


@pytest.mark.e2e
def test_without_chromium_the_pages_are_skipped_and_qa_says_what_did_pass(
        tmp_path: Path) -> None:
    # the stand-in and the venv's python3 only: no chromium on this PATH
    env = {**standin("minimal-api", tmp_path / "dotnet.log"), "PATH": f"{STANDIN}:{VENV_BIN}"}
    env.pop("SPECOPS_CHROMIUM", None)
    repo, report = run(tmp_path, qa_of(probes=PROBES[:1], browser=[{"id": "home", "path": "/"}]),
                       env)
    assert (report.status, report.reason) == (
        "passed", f"the application started on {report.url}; checked and passed: probe `health` "
                  "GET /health: 200 as expected; skipped, so not checked: page `home` /: Chromium "
                  "is not installed (`apt-get install chromium`, or set SPECOPS_CHROMIUM)")
    assert [c.status for c in report.checks] == ["passed", "skipped"]
    assert_nothing_left(tmp_path, repo, report.url)


def test_without_chromium_and_probes_qa_is_skipped_and_says_the_application_started_but_no_check_ran(
        tmp_path: Path) -> None:
    env = {**standin("minimal-api", tmp_path / "dotnet.log"), "PATH": f"{STANDIN}:{VENV_BIN}"}
    env.pop("SPECOPS_CHROMIUM", None)
    repo, report = run(tmp_path, qa_of(browser=[{"id": "home", "path": "/"}]), env)
    assert (report.status, report.reason) == (
        "skipped", f"the application started on {report.url}, but no check of it ran; skipped, "
                   "so not checked: page `home` /: Chromium is not installed (`apt-get install "
                   "chromium`, or set SPECOPS_CHROMIUM)")
    assert_nothing_left(tmp_path, repo, report.url)


NO_CHROMIUM = ("/: Chromium is not installed (`apt-get install chromium`, or set "
               "SPECOPS_CHROMIUM)")


def test_without_chromium_the_evaluator_is_told_which_probes_passed_and_which_page_was_skipped_and_why() -> None:
    from specops_dag.execution.attempt import qa_task_line
    from specops_dag.validation.qa import QaCheck, verdict

    url = "http://127.0.0.1:5123"
    report = verdict([QaCheck("health", "probe", "passed", "GET /health: 200 as expected"),
                      QaCheck("todos", "probe", "passed", "GET /todos: 200 as expected"),
                      QaCheck("home", "page", "skipped", NO_CHROMIUM)], url)
    reason = (f"the application started on {url}; checked and passed: probe `health` GET "
              "/health: 200 as expected, probe `todos` GET /todos: 200 as expected; skipped, so "
              f"not checked: page `home` {NO_CHROMIUM}")
    assert (report.status, report.reason) == ("passed", reason)
    told = qa_task_line(report)
    assert f"checked it: PASSED — {reason}." in told and "NOT checked" not in told, told


def test_without_chromium_or_probes_the_evaluator_is_told_the_application_started_and_why_no_check_ran() -> None:
    from specops_dag.execution.attempt import qa_task_line
    from specops_dag.validation.qa import QaCheck, verdict

    url = "http://127.0.0.1:5123"
    report = verdict([QaCheck("home", "page", "skipped", NO_CHROMIUM)], url)
    reason = (f"the application started on {url}, but no check of it ran; skipped, so not "
              f"checked: page `home` {NO_CHROMIUM}")
    assert (report.status, report.reason) == ("skipped", reason)
    assert f"({reason})" in qa_task_line(report)


# -- the `qa:` block is checked at load ----------------------------------------------------------

EVALUATOR = """kind: phase
id: q-eval
execution:
  goal: Judge it.
  executor: {{kind: {kind}}}
  timeout_s: 1200
  skills:
    - {{id: s, path: skills/s/SKILL.md, load: entry, required: true}}
{criteria}  qa:
{qa}
validation: none
"""
CRITERIA = "  criteria:\n    - {id: works, description: It works, threshold: 7}\n"
D = "workflow_defs/phases/q-eval.yaml"


@pytest.mark.parametrize(("kind", "qa", "problems"), [
    ("codex", "    probes: [{id: h, path: /health}]",
     [f"{D}: execution.qa: only an evaluator phase runs QA against the application, this one "
      "runs `codex`; remove it or use `executor: {kind: evaluator}`"]),
    ("evaluator", "    project: /abs/Api.csproj",
     [f"{D}: execution.qa.project: `/abs/Api.csproj` is absolute; use a path relative to the "
      "target repository"]),
    ("evaluator", "    project: ../other/Api.csproj",
     [f"{D}: execution.qa.project: `../other/Api.csproj` leaves the target repository; use a "
      "path relative to the target repository"]),
    ("evaluator", "    project: src/Api",
     [f"{D}: execution.qa.project: `src/Api` is not a .csproj file; name the project `dotnet "
      "run` starts, e.g. src/Api/Api.csproj"]),
    ("evaluator", "    deadline_s: 1200",
     [f"{D}: execution.qa.deadline_s: 1200 s does not fit in the phase's timeout_s (1200 s), "
      "which QA and the evaluator's session share; lower qa.deadline_s or raise timeout_s"]),
    ("evaluator", "    deadline_s: 300\n    startup_timeout_s: 300",
     [f"{D}: execution.qa.startup_timeout_s: 300 s leaves no time to probe within "
      "qa.deadline_s (300 s); lower it"]),
    ("evaluator", "    deadline_s: 300\n    probes: [{id: h, path: health}]\n"
                  "    browser: [{id: h, path: /}]",
     [f"{D}: execution.qa.probes[0].path: `health` does not start with `/`; give a path from "
      "the application's base URL, e.g. /health",
      f"{D}: execution.qa.browser[0].id: duplicate QA id `h` (first at execution.qa.probes[0]); "
      "give each probe and page its own id"]),
    ("evaluator", "    deadline_s: 300\n    probes: [{id: h, path: /, expect: 200}]",
     [f"{D}: execution.qa.probes[0].expect: unknown key `expect`; remove it or fix the spelling "
      "(allowed: id, method, path, headers, body, status, body_contains)"]),
    ("evaluator", "    deadline_s: 300\n    probes: [{id: h, path: /, method: FETCH}]",
     [f"{D}: execution.qa.probes[0].method: Input should be 'GET', 'HEAD', 'POST', 'PUT', "
      "'PATCH' or 'DELETE'"]),
], ids=["not-an-evaluator", "absolute-project", "project-outside", "not-a-csproj",
        "deadline-too-long", "startup-too-long", "bad-path-and-duplicate-id", "unknown-key",
        "bad-method"])
def test_a_bad_qa_block_is_a_load_error_that_names_the_fix(
        tmp_path: Path, kind: str, qa: str, problems: list[str]) -> None:
    write_tree(tmp_path, {D: EVALUATOR.format(kind=kind, qa=qa,
                                              criteria=CRITERIA if kind == "evaluator" else ""),
                          "workflow_defs/skills/s/SKILL.md": "---\nname: s\n---\nJudge.\n"})
    with pytest.raises(DefinitionError) as info:
        load_catalog([tmp_path / "workflow_defs"], display_base=tmp_path)
    assert info.value.problems == problems


def test_the_built_in_qa_phases_check_only_what_every_web_application_has() -> None:
    from specops_dag.builtin import BUILTIN_DEFS

    for pid in ("pbr-qa", "full-qa"):
        phase = load_catalog([BUILTIN_DEFS]).phases[pid]
        assert phase.execution.executor.kind == "evaluator"
        assert phase.execution.qa is not None and phase.execution.qa.project is None
        assert [p.id for p in phase.execution.qa.probes] == []  # no /health a repo may lack
        assert [(p.id, p.path) for p in phase.execution.qa.browser] == [("home", "/")]


# -- a real .NET SDK (skipped when there is none) ------------------------------------------------

@pytest.mark.dotnet
def test_a_real_sdk_runs_the_minimal_api_fixture_and_qa_passes(tmp_path: Path) -> None:
    repo, report = run(tmp_path, qa_of(tests=True, startup_timeout_s=120, deadline_s=1200,
                                       probes=PROBES), dict(os.environ), FIXTURE_NET10)
    assert report.status == "passed", report.reason
    assert "Now listening on: " + report.url in evidence(tmp_path, "app.out.txt")
    assert_nothing_left(tmp_path, repo, report.url)


@pytest.mark.dotnet
def test_a_real_sdk_application_that_is_broken_fails_qa(tmp_path: Path) -> None:
    qa = qa_of(startup_timeout_s=120, deadline_s=900, probes=PROBES[1:2])
    repo = product_repo(tmp_path, FIXTURE_NET10)
    program = repo / "src/TodoApi/Program.cs"
    program.write_text(program.read_text().replace(
        'app.MapGet("/todos", (TodoStore store) => store.All());',
        'app.MapGet("/todos", IReadOnlyList<Todo> (TodoStore store) => '
        'throw new InvalidOperationException("The todo store is not ready."));'))
    report = run_qa(qa, repo=repo, git_target=True, root=tmp_path, label="d1-build-r1",
                    evidence=tmp_path / "ev", env=dict(os.environ), secrets=[])
    assert (report.status, report.checks[0].detail) == (
        "failed", "GET /todos: expected status 200, got 500; the body does not contain "
                  "'Ship the API'")
    assert_nothing_left(tmp_path, repo, report.url)


# -- the review loop end to end: the real codex CLI, the literal replay agent --------------------

QA_EVALUATOR = """kind: phase
id: c-qa
input: {ports: {notes: {contract: notes}}}
execution:
  goal: Judge the notes and the running application.
  executor: {kind: evaluator}
  sandbox: read-only
  timeout_s: 300
  idle_timeout_s: 60
  qa:
    startup_timeout_s: 20
    deadline_s: 120
    probes:
      - {id: health, path: /health, body_contains: [ok]}
      - {id: todos, path: /todos, body_contains: [Ship the API]}
  criteria:
    - {id: complete, description: Every request item is covered, threshold: 8}
    - {id: clear, description: A newcomer understands it, threshold: 6}
  skills:
    - {id: c-eval-skill, path: skills/c-eval-skill/SKILL.md, load: entry, required: true}
validation: none
"""
NOTES = "printf 'the generator was here\\n' > src/TodoApi/NOTES.md"


def qa_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answers: str | None,
             required: bool = False):
    """The minimal-api fixture as a git harness root whose `write` node is reviewed by the QA
    evaluator `c-qa`; the stand-in `dotnet` on PATH with `answers` (None: no `dotnet`)."""
    from specops_dag.delivery import lifecycle as ops
    from specops_dag.delivery.store import Store
    from specops_dag.workflow.catalog import definition_roots

    from ..support.agents import AGENTIC

    root = tmp_path / "harness"
    shutil.copytree(FIXTURE, root)
    phase = QA_EVALUATOR.replace("    deadline_s: 120\n", "    deadline_s: 120\n    required: true\n"
                                 if required else "    deadline_s: 120\n")
    write_tree(root, {**AGENTIC, "workflow_defs/phases/c-qa.yaml": phase,
                      "workflow_defs/skills/c-eval-skill/SKILL.md": "---\nname: c-eval-skill\n"
                                                                   "---\nBe skeptical.\n"})
    wf = root / "workflow_defs/workflows/agentic.yaml"
    wf.write_text(wf.read_text().replace(
        "{id: write, phase: c-write,", "{id: write, phase: c-write, review: {phase: c-qa, "
                                       "max_rounds: 2},"))
    handle = git.Repo.init(root, initial_branch="main")
    handle.git.add(A=True)
    handle.index.commit("initial", author=WHO, committer=WHO)
    if answers is None:
        monkeypatch.setenv("PATH", path_without_dotnet(tmp_path))
    else:
        monkeypatch.setenv("PATH", f"{STANDIN}:{os.environ['PATH']}")
        monkeypatch.setenv("DOTNET_STANDIN_ANSWERS", str(STANDIN / "answers" / f"{answers}.yaml"))
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic",
                     "d1", "Write the notes.")
    return store


def generator() -> dict:
    """A literal generator attempt that also changes the product (what QA must run)."""
    return {"literal": {"before": [{"shell": NOTES}]}}


@pytest.mark.e2e
def test_the_review_loop_runs_qa_before_the_evaluator_who_reads_its_evidence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.execution.step import run_step

    from ..support.agents import attempts, replay, settings_for, verdict

    store = qa_world(tmp_path, monkeypatch, "minimal-api")
    with replay(tmp_path, {"write": [generator()],
                           "write.review": [verdict("PASS", 9, 7)]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    root = store.root.resolve()
    step = store.read("d1").get_step("write")
    record = step.reviews[0]
    assert (record.verdict, record.qa_status) == ("PASS", "passed")
    qa = record.qa
    assert qa.evidence == "phases/d1/write/reviews/write-r1-qa/"
    assert [(c.id, c.status) for c in qa.checks] == [("health", "passed"),
                                                               ("todos", "passed")]
    # QA ran the generator's work: its snapshot holds the file the product commit got
    repo = git.Repo(root)
    product = repo.commit(step.commits["product"])
    snapshot = repo.commit(qa.commit)
    assert (snapshot.tree / "src/TodoApi/NOTES.md").hexsha == (
        product.tree / "src/TodoApi/NOTES.md").hexsha
    assert snapshot.parents[0].hexsha == step.base_commit
    evidence = root / "phases/d1/write/reviews/write-r1-qa"
    read = attempts(tmp_path, "write.review")[0][0]["literal"]
    assert read["action"] == "read"
    assert f"{evidence}/qa.md" in read["paths"] and f"{evidence}/" in read["paths"]
    prompt = (root / "phases/d1/write/reviews/write-r1-prompt.md").read_text()
    assert (f"{evidence}/qa.md — QA of the running application (passed): what was run and "
            "every check with its evidence files") in prompt
    assert (f"QA: the executor ran the generator's work (snapshot commit {qa.commit[:12]}) "
            "in a throwaway worktree, started the application and checked it: PASSED — the "
            f"application started on {qa.url}; 2 probe(s) and 0 page(s) passed.") in prompt
    assert "Ship the API" in (evidence / "probe-todos.response.txt").read_text()
    # the evidence is kept with the report, in the metadata commit too (its build logs are not)
    committed = repo.commit(step.commits["metadata"]).tree / "phases/d1/write/reviews/write-r1-qa"
    assert sorted(b.name for b in committed.blobs) == [
        "app.err.txt", "app.out.txt", "probe-health.request.txt", "probe-health.response.txt",
        "probe-todos.request.txt", "probe-todos.response.txt", "qa.json", "qa.md"]
    assert committed.trees == [] and (evidence / "validation").is_dir()
    assert git.Repo(root).git.worktree("list").count("\n") == 1  # main + the delivery's, no QA
    assert not any((root / ".specops/qa").iterdir())
    # the `review` asset check carries the QA result
    from specops_dag.dagster_adapter.assets import review_check

    check = review_check(outcome)
    assert check.passed and check.metadata["qa_status"].value == "passed"
    assert check.metadata["qa"].value["evidence"] == "phases/d1/write/reviews/write-r1-qa/"


@pytest.mark.e2e
def test_a_failed_qa_overrules_the_evaluators_pass_and_the_generator_gets_its_evidence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.execution.step import run_step

    from ..support.agents import attempts, replay, settings_for, verdict

    store = qa_world(tmp_path, monkeypatch, "minimal-api-500")
    root = store.root.resolve()
    with replay(tmp_path, {"write": [generator(), {"literal": {}}],
                           "write.review": [verdict("PASS", 9, 7),
                                            verdict("PASS", 9, 7)]}) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        monkeypatch.setenv("DOTNET_STANDIN_ANSWERS", str(STANDIN / "answers/minimal-api.yaml"))
        second = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    evidence = root / "phases/d1/write/reviews/write-r1-qa"
    reason = ("QA against the running application failed: probe `todos` GET /todos: expected "
              "status 200, got 500; the body does not contain 'Ship the API' (evidence in "
              f"{evidence}/); it overrules the evaluator's PASS")
    assert (first.status, second.status) == ("failed", "completed")
    assert first.message == (f"attempt 1/3 failed: review round 1 blocked: {reason}; read the "
                             f"full report at {root}/phases/d1/write/reviews/write-r1-report.md")
    step = store.read("d1").get_step("write")
    assert [(r.round, r.verdict, r.qa_status) for r in step.reviews] == [
        (1, "BLOCK", "failed"), (2, "PASS", "passed")]
    assert step.reviews[0].reason == reason
    assert "- FAILED probe `todos`: GET /todos: expected status 200, got 500" in (
        evidence / "qa.md").read_text()
    second_generator = json.dumps(attempts(tmp_path, "write")[1][0]["input"])
    assert "QA against the running application failed: probe `todos`" in second_generator
    prompt = (root / "phases/d1/write/reviews/write-r1-prompt.md").read_text()
    assert "checked it: FAILED — probe `todos` GET /todos: expected status 200, got 500" in prompt
    assert (root / "phases/d1/write/reviews/write-r2-qa/qa.md").read_text().startswith(
        "# QA against the running application: PASSED")


@pytest.mark.e2e
def test_without_an_sdk_the_evaluator_is_told_qa_was_skipped_and_the_record_says_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.execution.step import run_step

    from ..support.agents import replay, settings_for, verdict

    store = qa_world(tmp_path, monkeypatch, None)
    with replay(tmp_path, {"write": [generator()],
                           "write.review": [verdict("PASS", 9, 7)]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    record = store.read("d1").get_step("write").reviews[0]
    assert (record.verdict, record.qa_status, record.qa.reason) == (
        "PASS", "skipped", NO_SDK)
    prompt = (store.root / "phases/d1/write/reviews/write-r1-prompt.md").read_text()
    assert (f"QA: the running application was NOT checked ({NO_SDK}); nothing about its behaviour "
            "is proven. Judge from the code, tests and validation evidence only, and say under "
            "FINDINGS that QA was skipped.") in prompt


@pytest.mark.e2e
def test_a_required_qa_that_is_skipped_blocks_the_step_before_any_evaluator_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.execution.step import run_step

    from ..support.agents import attempts, replay, settings_for, verdict

    store = qa_world(tmp_path, monkeypatch, None, required=True)
    with replay(tmp_path, {"write": [generator()],
                           "write.review": [verdict("PASS", 9, 7)]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    reason = ("review round 1: QA against the running application is required by phase `c-qa` "
              f"(qa.required) but was skipped: {NO_SDK}; no evaluator call was made: fix it, "
              "then `specops resume d1 write`")
    assert (outcome.status, outcome.message) == ("environment", f"blocked: {reason}")
    step = store.read("d1").get_step("write")
    assert (step.status, step.blocked_reason, step.last_failure) == ("blocked", reason, None)
    assert step.reviews[0].qa_status == "skipped"
    assert attempts(tmp_path, "write.review") == []


@pytest.mark.e2e
def test_a_background_child_and_a_grandchild_in_its_own_session_die_at_its_deadline(
        tmp_path: Path) -> None:
    import sys

    from specops_dag.process import Background

    from ..support.processes import SPAWNER

    pid_file = tmp_path / "grandchild.pid"
    app = Background([sys.executable, "-c", SPAWNER, str(pid_file)], cwd=tmp_path, deadline_s=2,
                     stdout_path=tmp_path / "out.txt", stderr_path=tmp_path / "err.txt")
    with app:
        while app.poll() is None and time.monotonic() - app.started < 15:
            time.sleep(0.1)
    result = app.stop()
    assert (result.timed_out, result.exit_code, result.stdout) == (True, None, "spawned\n")
    grandchild = int(pid_file.read_text())
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == "zombie"


@pytest.mark.e2e
def test_plan_build_review_on_a_web_fixture_is_reviewed_by_the_built_in_pbr_qa_phase(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    """As a user runs it: `specops new` / `approve` / `run` through Dagster, every node a real
    `codex exec` against the literal agent; the fixture's Web SDK project makes the built-in
    plan-build-review review the build with `pbr-qa` (after its sprint contract)."""
    from specops_dag.delivery.store import Store

    from ..support.agents import replay
    from ..support.dotnet import AGENTS, Harness, assert_clean_git

    root = tmp_path / "harness"
    shutil.copytree(FIXTURE, root)
    write_tree(root, {"AGENTS.md": AGENTS.replace("calculator", "todo API")})
    handle = git.Repo.init(root, initial_branch="main")
    handle.git.add(A=True)
    handle.index.commit("fixture", author=WHO, committer=WHO)
    deal = ("## Build\n\nQA notes in docs/qa.md.\n\n## Tests\n\n"
            "- TodoApi.Tests.TodoApiTests.Health_AnswersOk\n")
    nodes = {"build.contract": [{"literal": {"files": {"contract.md": deal}}}],
             "build": [{"literal": {"before": [{"shell": "printf '# QA notes\\n' > docs/qa.md"}]}}],
             "*": [{"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        h = Harness(root, {**clean_env, "SPECOPS_REPLAY_URL": server.url,
                           "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home"),
                           "PATH": f"{STANDIN}:{clean_env['PATH']}",
                           "DOTNET_STANDIN_ANSWERS": str(STANDIN / "answers/minimal-api.yaml")},
                    tmp_path / "requests.jsonl")
        h.ok("new", "plan-build-review", "p1", "--request", "Add a health endpoint.")
        h.ok("approve", "p1", "target-write", "--note", "go")
        h.run("p1", 0)
    state = Store(root).read("p1")
    assert (state.platforms, state.snapshot.reviews) == (["aspnetcore"], {"build": "pbr-qa"})
    build = state.get_step("build")
    assert (build.contract.agreed, build.contract.tests) == (
        True, ["TodoApi.Tests.TodoApiTests.Health_AnswersOk"])
    [review] = build.reviews
    assert review.verdict == "PASS"
    assert review.scores == {c: 10 for c in ("acceptance-criteria-covered",
                                                "runs-as-specified", "tests-prove-behaviour",
                                                "no-scope-creep")}
    checks = [(c.id, c.status) for c in review.qa.checks]
    if HAS_BROWSER:
        assert (review.qa_status, checks) == ("passed", [("home", "passed")])
        assert (root / "phases/p1/build/reviews/build-r1-qa/page-home.png").is_file()
    else:  # nothing QA ran proves the application: the evaluator's report alone decides
        assert (review.qa_status, checks) == ("skipped", [("home", "skipped")])
    assert git.Repo(root).git.worktree("list").count("\n") == 1  # main + p1; QA's is gone
    assert_clean_git(h, "p1")


WEB_TASKS = """kind: task-list
tasks:
  - id: health-notes
    title: Document the health endpoint
    paths: [docs/health.md]
    tests: [TodoApi.Tests.TodoApiTests.Health_AnswersOk]
"""


@pytest.mark.e2e
def test_full_delivery_on_a_web_fixture_reviews_integrate_with_the_built_in_full_qa_phase(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    """As a user runs it, each gate approved as it is reached: the fixture's Web SDK project makes the
    built-in full-delivery review its integrate node with `full-qa`, which starts the
    application and opens its home page; develop's one task, and integrate, agree a contract
    first."""
    from specops_dag.delivery.store import Store

    from ..support.agents import replay
    from ..support.dotnet import AGENTS, Harness

    root = tmp_path / "harness"
    shutil.copytree(FIXTURE, root)
    write_tree(root, {"AGENTS.md": AGENTS.replace("calculator", "todo API")})
    handle = git.Repo.init(root, initial_branch="main")
    handle.git.add(A=True)
    handle.index.commit("fixture", author=WHO, committer=WHO)
    deal = ("## Build\n\nNotes on the health endpoint in docs/health.md.\n\n## Tests\n\n"
            "- TodoApi.Tests.TodoApiTests.Health_AnswersOk\n")
    nodes = {"design": [{"literal": {"files": {"design/tasks.yaml": WEB_TASKS}}}],
             "develop.health-notes.contract": [{"literal": {"files": {"contract.md": deal}}}],
             "integrate.contract": [{"literal": {"files": {"contract.md": deal}}}],
             "develop.health-notes": [{"literal": {"before": [
                 {"shell": "mkdir -p docs && printf '# Health\\n' > docs/health.md"}]}}],
             "*": [{"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        h = Harness(root, {**clean_env, "SPECOPS_REPLAY_URL": server.url,
                           "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home"),
                           "PATH": f"{STANDIN}:{clean_env['PATH']}",
                           "DOTNET_STANDIN_ANSWERS": str(STANDIN / "answers/minimal-api.yaml")},
                    tmp_path / "requests.jsonl")
        h.ok("new", "full-delivery", "f1", "--request", "Document the health endpoint.")
        for gates in (["scope"], ["requirements"], ["target-write", "design"]):
            h.run("f1", 3)  # up to the next gate
            for gate in gates:
                h.ok("approve", "f1", gate, "--note", "go")
        h.run("f1", 0)
    state = Store(root).read("f1")
    assert (state.status, state.snapshot.reviews) == ("completed", {"integrate": "full-qa"})
    [task] = state.get_step("develop").tasks
    assert (task.status, task.contract.agreed, task.contract.tests) == (
        "merged", True, ["TodoApi.Tests.TodoApiTests.Health_AnswersOk"])
    assert state.get_step("integrate").contract.agreed
    [review] = state.get_step("integrate").reviews
    assert (review.verdict, list(review.scores)) == ("PASS", [
        "acceptance-criteria-covered", "runs-as-specified", "tests-prove-behaviour",
        "no-scope-creep"])
    checks = [(c.id, c.kind, c.status) for c in review.qa.checks]
    if HAS_BROWSER:
        assert (review.qa_status, checks) == ("passed", [("home", "page", "passed")])
        assert (root / "phases/f1/integrate/reviews/integrate-r1-qa/page-home.png").is_file()
    else:  # the application started, but nothing QA checks was shown to work
        assert (review.qa_status, checks) == ("skipped", [("home", "page", "skipped")])
    assert git.Repo(root).git.worktree("list").count("\n") == 1  # main + f1; QA's is gone


@pytest.mark.e2e
def test_a_failed_qa_is_added_to_the_evaluators_own_block_and_its_scores_reach_the_generator(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specops_dag.execution.step import run_step

    from ..support.agents import replay, settings_for, verdict

    store = qa_world(tmp_path, monkeypatch, "minimal-api-500")
    with replay(tmp_path, {"write": [generator()],
                           "write.review": [verdict("BLOCK", 5, 7)]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    root = store.root.resolve()
    qa_failure = ("QA against the running application failed: probe `todos` GET /todos: expected "
                  "status 200, got 500; the body does not contain 'Ship the API' (evidence in "
                  f"{root}/phases/d1/write/reviews/write-r1-qa/)")
    record = store.read("d1").get_step("write").reviews[0]
    assert (record.verdict, record.reason) == (
        "BLOCK", f"the evaluator's verdict is BLOCK; under threshold: complete 5/8; {qa_failure}")
    assert outcome.message == (
        "attempt 1/3 failed: review round 1 blocked: the evaluator's verdict is BLOCK; under "
        f"threshold: complete 5/8; read the full report at {root}/phases/d1/write/reviews/"
        "write-r1-report.md\nscores:\n- complete: 5/8 (below threshold)\n- clear: 7/6\n"
        "Fix every finding in the report that applies to your work, keep the validation green, "
        f"then finish the step as before; the next review round evaluates the code afresh.\n"
        f"{qa_failure}")


@pytest.mark.dotnet
def test_a_real_sdk_runs_a_net8_application_on_the_newer_runtime_the_policy_allows(
        tmp_path: Path) -> None:
    repo, report = run(tmp_path, qa_of(startup_timeout_s=120, deadline_s=900, probes=PROBES),
                       dict(os.environ))
    assert report.status == "passed", report.reason
    assert report.notes[0].startswith(
        "no ASP.NET Core 8.0 runtime is installed, so the net8.0 application ran on the newest "
        "installed one (DOTNET_ROLL_FORWARD=Major, validation.target.newer_runtime); installed: "
        "Microsoft.AspNetCore.App 10.0.")
    assert f"- note: {report.notes[0]}" in evidence(tmp_path, "qa.md")
    assert_nothing_left(tmp_path, repo, report.url)


@pytest.mark.dotnet
def test_without_newer_runtime_a_net8_application_does_not_start_and_qa_says_why(
        tmp_path: Path) -> None:
    config = ValidationConfig.model_validate({"target": {"newer_runtime": False}})
    repo, report = run(tmp_path, qa_of(startup_timeout_s=120, deadline_s=900, probes=PROBES[:1]),
                       dict(os.environ), config=config)
    assert (report.status, report.stage, report.notes) == ("failed", "start", ())
    assert "You must install or update .NET to run this application." in evidence(
        tmp_path, "app.out.txt") + evidence(tmp_path, "app.err.txt")
    assert_nothing_left(tmp_path, repo, report.url)
