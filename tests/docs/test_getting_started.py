"""docs/getting-started.md, run as its reader would run it: every command of its ```bash blocks,
in order, in one bash process started in this checkout, on a scratch "own repository" (a git
copy of `dotnet_fixtures/all-pass-net10` on `main`, with a bare `origin`), with the real codex
CLI, the replay agent the page starts and the real .NET SDK. So the page cannot keep a command
that no longer works nor show output that is no longer printed.

How the test reads the page (the page follows these rules; `page_problems` enforces them):

- A ```bash block runs as it stands, block after block, in one bash process (so `export`,
  `cd` and background jobs carry over; stdin is /dev/null), started in this checkout with no
  `SPECOPS_*` variable, no `DAGSTER_HOME` and no venv on PATH. Every command of it must exit 0
  (as bash's ERR trap sees failures); the run stops at the first block that does not.
- `<!-- exit: N -->` on the line above a ```bash block: the block is one command, which must
  exit N (a `specops run` that stops at a gate exits 3).
- The page's settings are lines `export NAME=value`. For each NAME of REWRITTEN the test
  replaces the value with its own (the scratch repository, a scratch harness root, a free
  port) and nothing else; each must be set exactly once, so the test never runs the page on the
  paths it shows (`~/src/my-service`).
- `<!-- setup: done by the test environment -->` above a ```bash block: it installs things and
  is not run. Its lines must be SETUP's keys, in order, and each is done for this venv by the
  line of `scripts/test` SETUP maps it to (which installs the test extras too).
- `<!-- not run: needs your model provider account -->` above a ```bash block: it is not run;
  its text must be NOT_RUN, pinned here, so a command goes there only by changing this test,
  and `test_the_commands_the_page_does_not_run_exist` checks the codex options it names.
- A ```text block right after a ```bash block (blank lines between) is what that block printed,
  stdout and stderr together: each of its lines must be a whole line of that output, in the
  page's order (lines may be left out between them). `…` in a line stands for any text (a path,
  a hash, a time, a number that differs per machine); a line that is only `…` marks lines left
  out and matches nothing. Every ```text block of the page must follow a run block, and the
  page holds no ```sh, ```shell or ```console block: no command or output escapes the check.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import git
import pytest

from ..support.dotnet import FIXTURES
from ..support.git import WHO
from ..support.harness import REPO, VENV_BIN
from ..support.processes import free_port

PAGE = REPO / "docs" / "getting-started.md"
REWRITTEN = ("REPO", "SPECOPS_ROOT", "REPLAY_PORT")
SETUP_MARK = "setup: done by the test environment"
NOT_RUN_MARK = "not run: needs your model provider account"
# The page's set-up line -> the line of scripts/test that did it for the venv this test runs in.
SETUP = {
    "npm ci --no-audit --no-fund": "npm ci --no-audit --no-fund",
    "python3 -m venv .venv": "python3 -m venv .venv",
    ".venv/bin/pip install -e .": ".venv/bin/pip install -q -e '.[test]'",
}
NOT_RUN = """\
unset SPECOPS_REPLAY_URL
node_modules/.bin/codex login            # sign in with your ChatGPT account, or:
printenv OPENAI_API_KEY | node_modules/.bin/codex login --with-api-key
node_modules/.bin/codex login status"""
FENCE = re.compile(r"^```(\S*)\s*$")
MARK = re.compile(r"^<!--\s*(.*?)\s*-->$")
EXIT = re.compile(r"^exit: (\d+)$")
EXPORT = re.compile(r"^export ([A-Za-z_][A-Za-z0-9_]*)=")
RUN_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    lang: str
    body: tuple[tuple[int, str], ...]  # (line, text)
    mark: str | None  # the `<!-- … -->` on the line above, if any
    output: Block | None = None  # the ```text block right after it

    @property
    def text(self) -> str:
        return "\n".join(text for _, text in self.body)

    @property
    def runs(self) -> bool:
        return self.mark is None or EXIT.match(self.mark) is not None

    @property
    def exit_code(self) -> int:
        found = EXIT.match(self.mark or "")
        return int(found.group(1)) if found else 0


@dataclass(frozen=True)
class Outcome:
    block: Block
    code: int | None  # None: the run stopped before this block
    output: str
    failures: str  # what bash's ERR trap saw fail inside the block


def read_page(text: str) -> list[Block]:
    """Every fenced block of the page in order, each ```bash block with its mark and output."""
    lines = text.splitlines()
    fenced: list[tuple[Block, int]] = []  # (block, line index of its closing fence)
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"),
                   len(lines))
        above = next((t.strip() for t in reversed(lines[:i]) if t.strip()), "")
        mark = MARK.match(above)
        fenced.append((Block(i + 1, opened.group(1),
                             tuple((k + 1, lines[k]) for k in range(i + 1, end)),
                             mark.group(1) if mark else None), end))
        i = end + 1
    blocks = []
    for n, (block, end) in enumerate(fenced):
        after = fenced[n + 1][0] if n + 1 < len(fenced) else None
        if (block.lang == "bash" and after is not None and after.lang == "text"
                and not any(t.strip() for t in lines[end + 1:after.line - 1])):
            block = Block(block.line, block.lang, block.body, block.mark, after)
        blocks.append(block)
    return blocks


def page_problems(blocks: list[Block], scripts_test: str, name: str) -> list[str]:
    """What breaks the page's rules (the module docstring), one line each."""
    problems = []
    test_lines = {line.strip() for line in scripts_test.splitlines()}
    outputs = {b.output.line for b in blocks if b.output is not None}
    exports: dict[str, int] = {}
    for b in blocks:
        where = f"{name}:{b.line}"
        if b.lang in ("sh", "shell", "console"):
            problems.append(f"{where}: a ```{b.lang} block; commands go in ```bash blocks, which "
                            "the test runs, and output in a ```text block after them")
        if b.lang == "text" and b.line not in outputs:
            problems.append(f"{where}: a ```text block that follows no ```bash block the test "
                            "runs; the test checks only what a command printed")
        if b.lang != "bash":
            continue
        if b.mark is not None and not b.runs and b.mark not in (SETUP_MARK, NOT_RUN_MARK):
            problems.append(f"{where}: unknown mark `<!-- {b.mark} -->`; use `exit: N`, "
                            f"`{SETUP_MARK}` or `{NOT_RUN_MARK}`")
        if not b.runs and b.output is not None:
            problems.append(f"{where}: output shown for a block the test does not run")
        if b.mark == SETUP_MARK:
            shown = [t.strip() for _, t in b.body if t.strip()]
            if shown != list(SETUP):
                problems.append(f"{where}: the set-up block shows {shown}; the test environment "
                                f"does {list(SETUP)}")
            problems += [f"{where}: scripts/test does not run `{line}` (for `{shown_line}`)"
                         for shown_line, line in SETUP.items() if line not in test_lines]
        if b.mark == NOT_RUN_MARK and b.text != NOT_RUN:
            problems.append(f"{where}: a block that is not run must be NOT_RUN of "
                            f"tests/docs/test_getting_started.py; it reads:\n{b.text}")
        if b.exit_code and len([t for _, t in b.body if t.strip()]) != 1:
            problems.append(f"{where}: a block with `<!-- {b.mark} -->` holds one command")
        if b.runs:
            for line, text in b.body:
                found = EXPORT.match(text)
                if found and found.group(1) in REWRITTEN:
                    if found.group(1) in exports:
                        problems.append(f"{name}:{line}: `{found.group(1)}` is set again (first "
                                        f"on line {exports[found.group(1)]})")
                    exports.setdefault(found.group(1), line)
    problems += [f"{name}: no line `export {var}=…` for the test to rewrite"
                 for var in REWRITTEN if var not in exports]
    return problems


def rewritten(text: str, values: dict[str, str]) -> str:
    """`text` with each `export NAME=…` line of `values` setting the test's value instead."""
    def one(line: str) -> str:
        found = EXPORT.match(line)
        if found and found.group(1) in values:
            return f"export {found.group(1)}={shlex.quote(values[found.group(1)])}"
        return line
    return "\n".join(one(line) for line in text.splitlines())


def run_page(blocks: list[Block], values: dict[str, str], env: dict[str, str], cwd: Path,
             work: Path, timeout_s: float = RUN_TIMEOUT_S) -> list[Outcome]:
    """Run the page's run blocks in one bash process; stop at the first that ends otherwise than
    the page says. Background jobs the page leaves running are killed with the process group."""
    runs = [b for b in blocks if b.lang == "bash" and b.runs]
    work.mkdir(parents=True, exist_ok=True)
    q = shlex.quote
    # The ERR trap records each failing command of a block, but not the block's own `source`
    # line failing after it (its exit code is the block's, recorded apart).
    script = ["set -E", '__doc_fail() { [ "$2" = "$__doc_self" ] || echo "exit $1: $2" >> '
              '"$__doc_errs"; }', "trap '__doc_fail $? \"$BASH_COMMAND\"' ERR",
              f"cd {q(str(cwd))}"]
    for n, b in enumerate(runs):
        body, out, rc, errs = (str(work / f"{n}.{ext}") for ext in ("sh", "out", "rc", "err"))
        Path(body).write_text(rewritten(b.text, values) + "\n", encoding="utf-8")
        ok = (f'[ "$(cat {q(rc)})" = {b.exit_code} ]' + ("" if b.exit_code else
                                                         f" && [ ! -s {q(errs)} ]"))
        line = f"source {q(body)} > {q(out)} 2>&1 < /dev/null"
        script += [f"__doc_errs={q(errs)}", f"__doc_self={q(line)}", line,
                   f"echo $? > {q(rc)}", f"{ok} || exit 0"]
    proc = subprocess.Popen(["bash", "-c", "\n".join(script)], env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.wait(timeout=timeout_s)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # this run's own group: the replay agent, if left
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
    return [Outcome(b, int(code) if (code := left(work / f"{n}.rc")) else None,
                    left(work / f"{n}.out"), left(work / f"{n}.err")) for n, b in enumerate(runs)]


def left(path: Path) -> str:
    """What the run left in `path`, or "" where it wrote nothing."""
    return path.read_text(errors="replace") if path.exists() else ""


def pattern_of(quoted: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in quoted.rstrip().split("…")))


def unprinted(quoted: Block, printed: str) -> list[tuple[int, str]]:
    """The lines of `quoted` (line, text) not found in `printed` in their order."""
    lines = [line.rstrip() for line in printed.splitlines()]
    at, missing = 0, []
    for number, text in quoted.body:
        if text.strip() in ("", "…"):
            continue
        pattern = pattern_of(text)
        found = next((k for k in range(at, len(lines)) if pattern.fullmatch(lines[k])), None)
        if found is None:
            missing.append((number, text))
        else:
            at = found + 1
    return missing


def run_problems(outcomes: list[Outcome], name: str) -> list[str]:
    """The first block that did not end as the page says, else every output line not printed."""
    problems = []
    for o in outcomes:
        command = o.block.text.strip()
        where = f"{name}:{o.block.line}"
        if o.code is None:
            return [f"{where}: not run: the run stopped before it (timeout?)"]
        if o.code != o.block.exit_code or (o.block.exit_code == 0 and o.failures):
            why = (f"a command failed ({o.failures.strip()})" if o.block.exit_code == 0
                   and o.failures else f"it exited {o.code}, the page says {o.block.exit_code}")
            return [f"{where}: {why}:\n{command}\n--- it printed:\n{o.output}"]
        if o.block.output is not None:
            problems += [f"{name}:{line}: not printed by the block at line {o.block.line}: "
                         f"{text}\n--- it printed:\n{o.output}"
                         for line, text in unprinted(o.block.output, o.output)]
    return problems


def own_repository(tmp_path: Path) -> Path:
    """The reader's repository: the net10 fixture committed on `main`, with a bare origin."""
    repo = tmp_path / "src" / "my-service"
    shutil.copytree(FIXTURES / "all-pass-net10", repo)
    made = git.Repo.init(repo, initial_branch="main")
    made.git.add(A=True)
    made.index.commit("my-service", author=WHO, committer=WHO)
    origin = tmp_path / "origin.git"
    git.Repo.init(origin, bare=True)
    made.create_remote("origin", str(origin))
    return repo


def reader_env() -> dict[str, str]:
    """This environment as a fresh shell has it: no specops settings, no Dagster instance, no
    venv on PATH (the page activates it)."""
    path = [p for p in os.environ["PATH"].split(":") if Path(p) != VENV_BIN]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SPECOPS_") and k not in ("DAGSTER_HOME", "VIRTUAL_ENV")}
    return {**env, "PATH": ":".join(path)}


@pytest.mark.e2e
@pytest.mark.dotnet
@pytest.mark.skipif(shutil.which("dotnet") is None, reason="no .NET SDK on PATH")
def test_every_command_of_getting_started_runs_and_prints_what_the_page_shows(
        tmp_path: Path) -> None:
    blocks = read_page(PAGE.read_text(encoding="utf-8"))
    name = "docs/getting-started.md"
    assert page_problems(blocks, (REPO / "scripts/test").read_text(), name) == []
    repo = own_repository(tmp_path)
    values = {"REPO": str(repo), "SPECOPS_ROOT": str(tmp_path / "specops-harness"),
              "REPLAY_PORT": str(free_port())}
    outcomes = run_page(blocks, values, reader_env(), REPO, tmp_path / "page")
    problems = run_problems(outcomes, name)
    assert problems == [], "\n\n".join(problems)
    # what the page says happened, seen from outside: the branch is on origin, the checkout
    # is still on main with its one commit
    made = git.Repo(repo)
    assert made.active_branch.name == "main"
    assert made.git.log("main", "--format=%s").splitlines() == ["my-service"]
    pushed = git.Repo(tmp_path / "origin.git")
    assert pushed.commit("feat-first-try").hexsha == made.commit("feat-first-try").hexsha


def test_the_commands_the_page_does_not_run_exist() -> None:
    blocks = [b for b in read_page(PAGE.read_text(encoding="utf-8")) if b.mark == NOT_RUN_MARK]
    assert [b.text for b in blocks] == [NOT_RUN]
    shown = subprocess.run([str(REPO / "node_modules/.bin/codex"), "login", "--help"],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert shown.returncode == 0, shown.stderr
    assert "--with-api-key" in shown.stdout and "\n  status " in shown.stdout, shown.stdout


# -- the checker itself, on small pages: each rule fails with the line it names ---------------

SETUP_BLOCK = "<!-- setup: done by the test environment -->\n```bash\n" + "\n".join(SETUP) + \
    "\n```\n"
SETTINGS = ("```bash\nexport REPO=~/src/my-service\nexport SPECOPS_ROOT=~/h\n"
            "export REPLAY_PORT=8765\necho \"repo: $REPO\"\n```\n")


def checked(tmp_path: Path, page: str) -> list[str]:
    blocks = read_page(page)
    static = page_problems(blocks, (REPO / "scripts/test").read_text(), "p.md")
    if static:
        return static
    values = {"REPO": "/scratch/repo", "SPECOPS_ROOT": "/scratch/h", "REPLAY_PORT": "1"}
    env = {**reader_env(), "HOME": str(tmp_path)}
    return run_problems(run_page(blocks, values, env, tmp_path, tmp_path / "run", 60), "p.md")


def test_a_page_whose_commands_run_and_print_what_it_shows_passes(tmp_path: Path) -> None:
    page = (SETUP_BLOCK + SETTINGS + "\n```text\nrepo: …/repo\n```\n\n"
            "```bash\nprintf 'a\\nb 12 s\\nc\\n'\n```\n```text\na\n…\nc\n```\n"
            "<!-- exit: 3 -->\n```bash\n(exit 3)\n```\n")
    assert checked(tmp_path, page) == []


def test_a_stale_output_line_is_named_with_its_page_line(tmp_path: Path) -> None:
    page = SETUP_BLOCK + SETTINGS + "```text\nrepo: /scratch/repo\nrepo: two\n```\n"
    assert checked(tmp_path, page) == [
        "p.md:15: not printed by the block at line 7: repo: two\n--- it printed:\n"
        "repo: /scratch/repo\n"]


def test_a_failing_command_stops_the_run_at_its_block(tmp_path: Path) -> None:
    page = (SETUP_BLOCK + SETTINGS + "```bash\nfalse\necho after\n```\n"
            "```bash\necho never\n```\n```text\nnever\n```\n")
    assert checked(tmp_path, page) == [
        "p.md:13: a command failed (exit 1: false):\nfalse\necho after\n--- it printed:\n"
        "after\n"]


def test_an_exit_code_other_than_the_page_says_is_named(tmp_path: Path) -> None:
    page = SETUP_BLOCK + SETTINGS + "<!-- exit: 3 -->\n```bash\ntrue\n```\n"
    assert checked(tmp_path, page) == [
        "p.md:14: it exited 0, the page says 3:\ntrue\n--- it printed:\n"]


def test_the_page_rules_name_each_break(tmp_path: Path) -> None:
    page = ("<!-- setup: done by the test environment -->\n```bash\nnpm install\n```\n"
            "```console\n$ specops check\n```\n```text\nok\n```\n"
            "<!-- not run: needs your model provider account -->\n```bash\ncodex login\n```\n"
            "<!-- exit: 3 -->\n```bash\nspecops run a\nspecops run b\n```\n"
            "```bash\nexport REPO=~/a\nexport REPO=~/b\n```\n")
    assert checked(tmp_path, page) == [
        "p.md:2: the set-up block shows ['npm install']; the test environment does "
        f"{list(SETUP)}",
        "p.md:5: a ```console block; commands go in ```bash blocks, which the test runs, and "
        "output in a ```text block after them",
        "p.md:8: a ```text block that follows no ```bash block the test runs; the test checks "
        "only what a command printed",
        "p.md:12: a block that is not run must be NOT_RUN of tests/docs/test_getting_started.py;"
        " it reads:\ncodex login",
        "p.md:16: a block with `<!-- exit: 3 -->` holds one command",
        "p.md:22: `REPO` is set again (first on line 21)",
        "p.md: no line `export SPECOPS_ROOT=…` for the test to rewrite",
        "p.md: no line `export REPLAY_PORT=…` for the test to rewrite",
    ]
