"""A deny reason's way out is a contract (issue 43, item 6): every alternative a reason of the
pre-tool-use hook suggests is allowed by the same guard, and the agent can run it in its world
(the codex sandbox: the worktree writable, its `.git` read-only, no network; codex itself rejects
`rm -f`). The inventory below lists each reason with what it suggests; a reason that names a new
alternative fails these tests until the alternative is listed here with a command that runs it.
The end-to-end tests run the alternatives through the real codex CLI with the replay agent."""

from __future__ import annotations

import ast
import contextlib
import json
import re
import sqlite3
from pathlib import Path
from typing import NamedTuple

import git
import pytest

from specops_dag import hooks
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.hooks import walk

from ..support.agents import agentic_git_harness, create, replay, settings_for
from ..support.git import WHO
from ..support.harness import write_tree
from ..support.hooks import check

HOOKS = Path(hooks.__file__).parent
PRE_TOOL_USE = ("pre_tool_use", "walk", "rules", "shell", "patch", "tdd", "guard", "__init__")


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"]) + "\n"


INVOICE = patch("*** Add File: src/Orders/Invoice.cs", "+namespace Orders;",
                "+public class Invoice { public int Total() => 1; }")
INVOICE_WITH_TEST = patch("*** Add File: tests/Orders.Tests/InvoiceTests.cs",
                          "+namespace Orders.Tests;", "+public class InvoiceTests {}",
                          "*** Add File: src/Orders/Invoice.cs", "+namespace Orders;",
                          "+public class Invoice { public int Total() => 1; }")
MIGRATION = patch(  # written by hand, as the ef-core-migrations skill says, its test first
    "*** Add File: tests/Orders.Tests/20250101000000_AddOrdersTests.cs",
    "+namespace Orders.Tests;", "+public class AddOrdersMigrationTests {}",
    "*** Add File: src/Orders/Migrations/20250101000000_AddOrders.cs",
    "+using Microsoft.EntityFrameworkCore.Migrations;", "+namespace Orders.Migrations;",
    "+public partial class AddOrders : Migration",
    "+{",
    "+    protected override void Up(MigrationBuilder b) =>",
    '+        b.AddColumn<int>(name: "Total", table: "Orders", nullable: false, defaultValue: 0);',
    "+    protected override void Down(MigrationBuilder b) =>",
    '+        b.DropColumn(name: "Total", table: "Orders");',
    "+}")
RISK = ("printf 'Invoice.cs holds generated code; no test can prove it\\n' > "
        '"$SPECOPS_NODE_DIR/risk.md"')

# Each alternative a reason names in backticks -> what an agent in the Orders repository runs.
ALTERNATIVES: dict[str, str] = {
    "rm <file>": "rm src/Orders/Old.cs",
    "*** Delete File: <file>": patch("*** Delete File: src/Orders/Legacy.cs"),
    "rm -r bin": "mkdir -p bin/Debug && rm -r bin",
    "cp <file> /tmp/": 'cp src/Orders/OrderService.cs "${TMPDIR:-/tmp}/"',  # the tests' own /tmp
    "cp -r <path> /tmp/": 'cp -r src/Orders "${TMPDIR:-/tmp}/"',
    "git status": "git status",
    "git diff": "git diff",
    "git show HEAD:<file> > <file>": ("git show HEAD:src/Orders/OrderService.cs > "
                                      "src/Orders/OrderService.cs"),
    "*** Add File: <project>/Migrations/<timestamp>_<Name>.cs": MIGRATION,
    "bash -c '…'": "bash -c 'dotnet --version'",
    "python3 script.py": "python3 script.py",
    "psql -c '…'": "psql -c 'SELECT 1'",
}
# Backticked texts in the hook's messages that are no alternative to run.
NAMED = {"{stem}Tests.cs": "an example value of tdd.testPatterns, for the person who fixes it",
         "specops new": "the command that froze the TDD rules, for the person who fixes them"}
DELETE = ("rm <file>", "*** Delete File: <file>", "rm -r bin")
GIT_WRITE = ("git status", "git diff", "git show HEAD:<file> > <file>")
MOVE = ("cp -r <path> /tmp/",)
INTERACTIVE = ("bash -c '…'", "python3 script.py", "psql -c '…'")


class Reason(NamedTuple):
    denied: str  # a command the guard denies with this reason
    suggests: tuple[str, ...] = ()  # the alternatives it names in backticks, in order
    runs: tuple[str, ...] = ()  # what an agent runs for a way out the reason says in words
    files: dict[str, str] = {}  # written into the repository first


# Every reason of the pre-tool-use hook that a command gets. The others suggest nothing to run:
# an unreadable payload ("specops denies calls it cannot check") and a failed check ("retry
# with a simpler command").
REASONS: dict[str, Reason] = {
    "a guarded folder": Reason("rm -rf ~", DELETE),
    "a repository folder": Reason("rm -r src", DELETE),
    "a wildcard in the repository": Reason("rm src/Orders/*.cs", DELETE),
    "a path computed at run time": Reason("git ls-files | xargs rm", DELETE),
    "find deleting everything": Reason("find . -delete", DELETE),
    "find deleting repository files": Reason("find . -name '*.cs' -delete", DELETE),
    "rsync --delete into the repository": Reason("rsync -a --delete empty/ src/", DELETE),
    "shred of a repository file": Reason("shred -u src/Orders/Old.cs", DELETE),
    "git rm of a folder": Reason("git rm -r src", DELETE),
    "git rm of everything": Reason("git rm -r .", DELETE),
    "hard reset": Reason("git reset --hard", ("cp <file> /tmp/", "git show HEAD:<file> > <file>")),
    "git clean": Reason("git clean -fdx", ("rm -r bin",)),
    "forced checkout": Reason("git checkout -f main"),
    "discarding everything": Reason("git restore .", ("git show HEAD:<file> > <file>",)),
    "git writing .git": Reason("git stash", GIT_WRITE),
    "git writing .git from a subfolder": Reason("git -C src commit -am wip", GIT_WRITE),
    "force push": Reason("git push --force origin feat-x"),
    "push": Reason("git push origin feat-x"),
    "remote branch delete": Reason("git push origin --delete feat-x"),
    "a move out of the repository": Reason("mv src /tmp/", MOVE),
    "a move to a computed folder": Reason('mv src "$DEST"', MOVE),
    "a move of computed paths": Reason("git ls-files | xargs -I{} mv {} /tmp/", MOVE),
    "rsync moving files out": Reason("rsync -a --remove-source-files src/ /tmp/", MOVE),
    "disk overwrite": Reason("dd if=/dev/zero of=/dev/sda"),
    "disk format": Reason("mkfs.ext4 /dev/sdb1"),
    "database drop": Reason("dotnet ef database drop --force",
                            ("*** Add File: <project>/Migrations/<timestamp>_<Name>.cs",)),
    "SQL that destroys": Reason('psql -c "DROP TABLE users"', runs=(MIGRATION,)),
    "DELETE without WHERE": Reason('sqlite3 app.db "DELETE FROM orders"',
                                   runs=('sqlite3 app.db "DELETE FROM orders WHERE id = 1"',)),
    "interactive shell": Reason("bash", INTERACTIVE),
    "interactive interpreter": Reason("python3", INTERACTIVE),
    "database shell": Reason("psql app", INTERACTIVE),
    "F# session": Reason("dotnet fsi", INTERACTIVE),
    "xargs reading the terminal": Reason("xargs git", runs=("printf 'status' | xargs git",)),
    "computed program": Reason("$(echo git) status", runs=("git status",)),
    "shell fed by a command": Reason("git show HEAD:run.sh | bash", runs=("bash run.sh",)),
    "too deep": Reason("eval " * 20 + "echo ok", runs=("echo ok",)),
    "too long": Reason("#" * (walk.MAX_COMMAND + 1),
                       runs=(patch("*** Add File: docs/long.md", "+" + "a" * 10_000),)),
    "no test file": Reason(INVOICE, runs=(INVOICE_WITH_TEST, RISK)),
    "unreadable TDD rules": Reason(INVOICE, runs=(RISK,), files={"workflow_defs/hooks.json": "[]"}),
}


def suggested(reason: str) -> tuple[str, ...]:
    """The backticked texts of a reason's way out (what follows its first `; `)."""
    return tuple(reason.partition("; ")[2].split("`")[1::2])


def backticked(source: str) -> set[str]:
    """The literal backticked texts in a module's messages: string constants and f-strings,
    without docstrings, format fields, token tuples (`PWD`) or regexes (an odd count)."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            skip |= {id(e) for e in node.elts}
        if isinstance(node, ast.JoinedStr):
            skip |= {id(v) for v in node.values}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "\0" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        parts = text.split("`")
        if len(parts) % 2:
            found |= {p for p in parts[1::2] if p and "\0" not in p}
    return found


@pytest.fixture
def orders(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The `repo` fixture with the files the alternatives delete, and a node folder."""
    write_tree(repo, {"src/Orders/Old.cs": "class Old {}\n",
                      "src/Orders/Legacy.cs": "class Legacy {}\n"})
    monkeypatch.setenv("SPECOPS_NODE_DIR", str(tmp_path / "harness/phases/d1/develop"))
    return repo


@pytest.mark.parametrize("reason", REASONS.values(), ids=REASONS.keys())
def test_each_deny_reason_suggests_exactly_what_the_inventory_lists(orders: Path,
                                                                    reason: Reason) -> None:
    write_tree(orders, reason.files)
    said = check(orders, reason.denied)
    assert said is not None
    assert suggested(said) == reason.suggests, said


RUNS = {f"{rid}: {command[:40]}": (command, reason.files) for rid, reason in REASONS.items()
        for command in [*(ALTERNATIVES[s] for s in reason.suggests), *reason.runs]}


@pytest.mark.parametrize(("command", "files"), RUNS.values(), ids=RUNS.keys())
def test_every_alternative_a_deny_reason_suggests_is_allowed_by_the_guard(
        orders: Path, command: str, files: dict[str, str]) -> None:
    write_tree(orders, files)
    assert check(orders, command) is None


def test_every_backticked_text_in_the_hooks_messages_is_an_inventoried_alternative() -> None:
    found = set().union(*(backticked((HOOKS / f"{m}.py").read_text()) for m in PRE_TOOL_USE))
    assert found == set(ALTERNATIVES) | set(NAMED)
    assert {s for r in REASONS.values() for s in r.suggests} == set(ALTERNATIVES)


def test_no_alternative_forces_rm_since_codex_rejects_it_before_it_runs() -> None:
    for command in [*ALTERNATIVES.values(), *(c for r in REASONS.values() for c in r.runs)]:
        for words in (part.split() for part in command.replace("&&", ";").split(";")):
            assert not (words[:1] == ["rm"] and any(
                w == "--force" or w[:1] == "-" and w[1:2] != "-" and "f" in w for w in words)), \
                command


# -- end to end: the real codex CLI in its sandbox, the replay agent as the model -----------------

BLOCKED = "Command blocked by PreToolUse hook"
ORDERS = {"src/Orders/OrderService.cs": "namespace Orders;\npublic class OrderService {}\n",
          "src/Orders/Old.cs": "namespace Orders;\npublic class Old {}\n",
          "src/Orders/Legacy.cs": "namespace Orders;\npublic class Legacy {}\n",
          "tests/Orders.Tests/OrderServiceTests.cs": "namespace Orders.Tests;\n"
                                                     "public class OrderServiceTests {}\n",
          "script.py": "print('the script ran')\n",  # what `python3 script.py` runs
          "run.sh": "echo 'run.sh ran'\n"}  # what `git show HEAD:run.sh | bash` would have run


def orders_harness(tmp_path: Path) -> Store:
    """The agentic workflow in a git harness root that holds the Orders repository, delivery d1."""
    root = agentic_git_harness(tmp_path)
    write_tree(root, ORDERS)
    with contextlib.closing(sqlite3.connect(root / "app.db")) as db, db:  # the sqlite3 examples'
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        db.execute("INSERT INTO orders (id) VALUES (1), (2)")
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("the Orders repository", author=WHO, committer=WHO)
    return create(root, None)


def turn(command: str) -> dict:
    return {"apply_patch": command} if command.startswith("*** Begin Patch") else {
        "shell": command}


def answers(tmp_path: Path) -> list[str]:
    """What codex answered each tool call of the first session, in order (the replay log)."""
    requests = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    items = requests[-1]["input"]
    return [str(i.get("output")) for i in items
            if i.get("type") in ("function_call_output", "custom_tool_call_output")]


@pytest.mark.e2e
def test_an_agent_denied_rm_rf_src_deletes_single_files_as_told_and_the_repository_keeps_the_rest(
        tmp_path: Path) -> None:
    store = orders_harness(tmp_path)
    turns = [turn("rm -rf src"), turn("rm -r src"), turn("find . -name '*.cs' -delete"),
             turn(ALTERNATIVES["rm <file>"]), turn(ALTERNATIVES["*** Delete File: <file>"]),
             turn(ALTERNATIVES["rm -r bin"])]
    with replay(tmp_path, {"write": [{"literal": {"before": turns}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    seen = answers(tmp_path)[:6]
    instead = ("delete single files by name (`rm <file>`, or apply_patch "
               "`*** Delete File: <file>`) and build output by folder (`rm -r bin`)")
    assert seen[0] == (f"{BLOCKED}: `rm -rf src` deletes the folder `src` of the repository with "
                       f"every file in it; {instead}. Command: rm -rf src")
    assert seen[1].startswith(f"{BLOCKED}: `rm -r src` deletes the folder `src`"), seen[1]
    assert seen[2] == (f"{BLOCKED}: `find . -name *.cs -delete` deletes files of the repository "
                       f"in bulk; {instead}. Command: find . -name '*.cs' -delete")
    assert [BLOCKED in s or "Rejected(" in s for s in seen[3:]] == [False] * 3, seen
    worktree = store.root / ".specops/worktrees/d1"
    assert sorted(p.relative_to(worktree).as_posix() for p in worktree.rglob("*.cs")) == [
        "src/Orders/OrderService.cs", "tests/Orders.Tests/OrderServiceTests.cs"]
    assert not (worktree / "bin").exists()
    product = store.read("d1").get_step("write").commits["product"]  # the product commits it
    assert git.Repo(store.root).git.show("--name-status", "--format=", product).splitlines() == [
        "D\tsrc/Orders/Legacy.cs", "D\tsrc/Orders/Old.cs"]


@pytest.mark.e2e
def test_an_agent_denied_rsync_delete_and_shred_keeps_the_repositorys_files_and_deletes_by_name(
        tmp_path: Path) -> None:
    store = orders_harness(tmp_path)
    turns = [turn("mkdir -p empty"), turn("rsync -a --delete empty/ src/"),
             turn("shred -u src/Orders/Old.cs"), turn(ALTERNATIVES["*** Delete File: <file>"])]
    with replay(tmp_path, {"write": [{"literal": {"before": turns}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    seen = answers(tmp_path)[:4]
    instead = ("delete single files by name (`rm <file>`, or apply_patch "
               "`*** Delete File: <file>`) and build output by folder (`rm -r bin`)")
    assert seen[1] == (f"{BLOCKED}: `rsync -a --delete empty/ src/` deletes every file of the "
                       f"repository under `src` that its source lacks; {instead}. Command: "
                       "rsync -a --delete empty/ src/")
    assert seen[2] == (f"{BLOCKED}: `shred -u src/Orders/Old.cs` overwrites and deletes "
                       f"`src/Orders/Old.cs` of the repository beyond recovery; {instead}. "
                       "Command: shred -u src/Orders/Old.cs")
    assert [exit_code(seen[0]), exit_code(seen[3])] == [0, 0], seen
    worktree = store.root / ".specops/worktrees/d1"
    assert (worktree / "src/Orders/Old.cs").read_text() == ORDERS["src/Orders/Old.cs"]
    assert sorted(p.relative_to(worktree).as_posix() for p in worktree.rglob("*.cs")) == [
        "src/Orders/Old.cs", "src/Orders/OrderService.cs",
        "tests/Orders.Tests/OrderServiceTests.cs"]


@pytest.mark.e2e
def test_every_alternative_runs_in_the_agents_sandbox_unblocked_and_unrejected(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # writable in the sandbox, as /tmp is
    store = orders_harness(tmp_path)
    commands = list(dict.fromkeys(command for command, files in RUNS.values() if not files))
    with replay(tmp_path, {"write": [{"literal": {"before": [turn(c) for c in commands]}}]}) \
            as server:
        run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    seen = dict(zip(commands, answers(tmp_path), strict=False))
    assert list(seen) == commands
    for command, answer in seen.items():
        for trouble in (BLOCKED, "Rejected(", "Read-only file system", "Permission denied"):
            assert trouble not in answer, (command, answer)
        expected = NOT_ZERO.get(command, (0, ""))
        assert (exit_code(answer), output(answer)[:len(expected[1])]) == expected, (command,
                                                                                     answer)
    assert (tmp_path / "tmp/OrderService.cs").is_file()
    worktree = store.root / ".specops/worktrees/d1"
    with contextlib.closing(sqlite3.connect(worktree / "app.db")) as db:
        assert db.execute("SELECT id FROM orders").fetchall() == [(2,)]
    assert (worktree / "src/Orders/Migrations/20250101000000_AddOrders.cs").is_file()


# The alternatives that run as told but end otherwise in the tests' sandbox, with how they end:
# no database server runs there, so psql gets as far as connecting to one.
NOT_ZERO = {"psql -c 'SELECT 1'": (2, "psql: error: connection to server")}


def exit_code(answer: str) -> int | None:
    """The exit code codex reports for a shell command or an apply_patch call."""
    found = re.search(r"^(?:Process exited with code|Exit code:) (-?\d+)$", answer, re.M)
    return int(found.group(1)) if found else None


def output(answer: str) -> str:
    """What the command printed, as codex reports it after `Output:`."""
    return answer.partition("\nOutput:\n")[2]


def test_the_exit_code_and_output_of_a_tool_call_are_read_from_codexs_answer() -> None:
    shell = ("Chunk ID: 0e828d\nWall time: 0.0000 seconds\nProcess exited with code 2\n"
             "Original token count: 1\nOutput:\npsql: error: connection to server\n")
    applied = ("Exit code: 0\nWall time: 0.2 seconds\nOutput:\nSuccess. Updated the following "
               "files:\nA docs/long.md\n")
    assert [exit_code(shell), exit_code(applied), exit_code("aborted")] == [2, 0, None]
    assert output(shell) == "psql: error: connection to server\n"


@pytest.mark.e2e
def test_a_csharp_edit_without_its_test_goes_on_with_the_test_first_or_as_a_risk(
        tmp_path: Path) -> None:
    store = orders_harness(tmp_path)
    turns = [turn(INVOICE), turn(INVOICE_WITH_TEST)]
    risk = "Invoice.cs holds generated code; no test can prove it.\n"
    with replay(tmp_path, {"write": [{"literal": {"before": turns, "risk": risk}}]}) as server:
        run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    seen = answers(tmp_path)
    assert seen[0].startswith(f"{BLOCKED}: TDD: C# product code needs a matching test file "
                              "first: src/Orders/Invoice.cs"), seen[0]
    assert BLOCKED not in seen[1], seen[1]
    state = store.read("d1")
    product = state.get_step("write").commits["product"]
    assert git.Repo(store.root).git.show("--name-status", "--format=", product).splitlines() == [
        "A\tsrc/Orders/Invoice.cs", "A\ttests/Orders.Tests/InvoiceTests.cs"]
    assert [(r.node, r.path) for r in state.risks] == [("write", "phases/d1/write/risk.md")]
    assert state.get_step("review").gates == ["risk"]  # a person decides before it runs
