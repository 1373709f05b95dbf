"""`specops status` answered by `quick` (no click, pydantic, yaml or dagster) says byte for byte
what the click CLI says, and hands over to it whenever it cannot be sure."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from specops_dag import quick, shape
from specops_dag.gates import approve, raise_risk
from specops_dag.state import Owner, Store, Usage, move, now_iso

from .conftest import VENV_BIN
from .test_state import complete, make_delivery

FULL_CLI = "from specops_dag.cli import main; main(prog_name='specops')"


def both(root: Path, *args: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """The console script (quick first) and the click CLI alone, on the same command line."""
    env = {k: v for k, v in os.environ.items() if k != "SPECOPS_ROOT"}
    run = {"env": env, "capture_output": True, "text": True, "timeout": 120,
           "stdin": subprocess.DEVNULL}
    script = subprocess.run([str(VENV_BIN / "specops"), "--root", str(root), *args], **run)
    click = subprocess.run([sys.executable, "-c", FULL_CLI, "--root", str(root), *args], **run)
    return script, click


def answered_quickly(root: Path, *args: str, capsys: pytest.CaptureFixture) -> bool:
    code = quick.answer(["--root", str(root), *args])
    printed = capsys.readouterr().out
    assert (code is None) == (printed == ""), "quick printed and then handed over"
    return code == 0


def edit(store: Store, node: str, change: Callable) -> None:
    with store.transaction("d1") as state:
        change(state, state.get_step(node))


def gated_b(root: Path) -> Store:
    wf = root / "workflow_defs/workflows/diamond.yaml"
    wf.write_text(wf.read_text().replace("{id: b, phase: p-b,",
                                         "{id: b, phase: p-b, gates: {before: target-write},"))
    store = make_delivery(root)
    complete(store, "d1", "a")
    from specops_dag.step import run_step

    assert run_step(store, "d1", "b").status == "blocked"
    return store


def failed_c(root: Path) -> Store:
    store = make_delivery(root)
    complete(store, "d1", "a")

    def fail(state, step):
        move(state, step, "running", "run")
        move(state, step, "error", "run")
        step.error_message = "build failed: CS8618 in Feed.cs\nsecond line"
        step.failed_at = now_iso()
        step.attempts = 3
        step.usage = [Usage(attempt=1, thread_id="t1", input_tokens=1200, output_tokens=80)]
    edit(store, "c", fail)
    return store


def running(alive: bool) -> Callable[[Path], Store]:
    def build(root: Path) -> Store:
        store = make_delivery(root)
        if alive:
            me = psutil.Process()
            owner = Owner(pid=me.pid, create_time=me.create_time(), host=socket.gethostname())
        else:
            gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                                  capture_output=True, text=True, check=True)
            owner = Owner(pid=int(gone.stdout), create_time=1.5, host=socket.gethostname())

        def start(state, step):
            move(state, step, "running", "run")
            step.owner, step.attempts, step.started_at = owner, 1, now_iso()
        edit(store, "a", start)
        return store
    return build


def drifted(root: Path) -> Store:
    store = make_delivery(root)
    complete(store, "d1", "a")
    (store.delivery_dir("d1") / "a" / "out.txt").write_text("changed after it was consumed")

    def consume(state, step):
        step.consumed = {"up": state.get_step("a").handoff["result"]}
        step.consumed["up"].sha256 = "1" * 64
    edit(store, "b", consume)
    phase = root / "workflow_defs/phases/p-c.yaml"
    phase.write_text(phase.read_text() + "\n# edited after the snapshot\n")
    (root / "workflow_defs/phases/p-d.yaml").unlink()
    return store


def risky(root: Path) -> Store:
    store = make_delivery(root)
    complete(store, "d1", "a")
    with store.transaction("d1") as state:
        raise_risk(state, "a", "phases/d1/a/risk.md")
        step = state.get_step("b")
        move(state, step, "blocked", "run")
        step.blocked_reason, step.blocked_at = "awaiting approval: risk", now_iso()
    approve(store, "d1", "risk", note="accepted for now")
    approve(store, "d1", "risk", note="no, after all", reject=True)
    return store


def budgeted(root: Path) -> Store:
    store = make_delivery(root)
    with store.transaction("d1") as state:
        state.budget_tokens = 5000
        state.request = "Cache the “RSS” feed — ünïcode, 20 % faster\n\nDetails follow."
        state.get_step("a").usage = [Usage(attempt=1, input_tokens=700, output_tokens=20,
                                           cached_input_tokens=300)]
    make_delivery(root, "d2.second")
    return store


SCENARIOS = {"fresh": make_delivery, "gate waiting": gated_b, "failed step": failed_c,
             "interrupted step": running(alive=False), "running step": running(alive=True),
             "drift": drifted, "risk rejected": risky, "budget and two deliveries": budgeted}
COMMANDS = [("status",), ("status", "--json"), ("status", "d1"), ("status", "d1", "--json"),
            ("status", "--json", "d1")]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_quick_status_prints_exactly_what_the_click_cli_prints(
        diamond_root: Path, scenario: str, capsys: pytest.CaptureFixture) -> None:
    SCENARIOS[scenario](diamond_root)
    for args in COMMANDS:
        assert answered_quickly(diamond_root, *args, capsys=capsys), args
        script, click = both(diamond_root, *args)
        assert (script.returncode, script.stdout, script.stderr) == (
            click.returncode, click.stdout, click.stderr), args
        assert script.returncode == 0 and script.stdout and not script.stderr


def reorder(path: Path) -> None:
    data = json.loads(path.read_text())
    data["steps"][0] = dict(reversed(data["steps"][0].items()))
    path.write_text(json.dumps(data, indent=2))


def rewrite(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data, indent=2))
    return apply


HAND_EDITS = {
    "fields reordered": reorder,
    "an int where a float belongs": rewrite(lambda d: d["steps"][0].update(
        owner={"pid": 1, "create_time": 5, "host": "elsewhere"})),
    "a string where an int belongs": rewrite(lambda d: d["steps"][0].update(attempts="2")),
    "an unknown field": rewrite(lambda d: d["steps"][1].update(colour="red")),
    "a missing field": rewrite(lambda d: d["steps"][1].pop("usage")),
    "an unknown status": rewrite(lambda d: d["steps"][1].update(status="paused")),
    "a newer schema": rewrite(lambda d: d.update(schema_version=2)),
    "a need of a node that does not exist": rewrite(lambda d: (
        d["steps"][1].update(needs=["ghost"], gates=["design"], status="blocked"))),
    "not JSON": lambda p: p.write_text("{\"schema_version\": 1,"),
    "not UTF-8": lambda p: p.write_bytes(b"\xff\xfe{}"),
    "a lone surrogate": lambda p: p.write_text(p.read_text().replace(
        "Add an RSS cache.", "Add \\ud800 cache.")),
}


@pytest.mark.parametrize("change", HAND_EDITS)
def test_quick_status_hands_a_hand_edited_state_to_the_click_cli(
        diamond_root: Path, change: str, capsys: pytest.CaptureFixture) -> None:
    store = make_delivery(diamond_root)
    HAND_EDITS[change](store.index_path("d1"))
    for args in [("status", "d1"), ("status", "d1", "--json")]:
        assert not answered_quickly(diamond_root, *args, capsys=capsys), args
        script, click = both(diamond_root, *args)
        assert (script.returncode, script.stdout, script.stderr) == (
            click.returncode, click.stdout, click.stderr), args


def test_a_hand_edited_state_the_models_accept_still_reads_the_same_both_ways(
        diamond_root: Path, capsys: pytest.CaptureFixture) -> None:
    store = make_delivery(diamond_root)
    reorder(store.index_path("d1"))
    script, click = both(diamond_root, "status", "d1")
    assert script.returncode == click.returncode == 0
    assert script.stdout == click.stdout


def test_an_emptied_request_reads_as_empty_both_ways(diamond_root: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    store = make_delivery(diamond_root)
    rewrite(lambda d: d.update(request=" \n"))(store.index_path("d1"))
    assert answered_quickly(diamond_root, "status", "d1", capsys=capsys)
    script, click = both(diamond_root, "status", "d1")
    assert (script.returncode, script.stdout, script.stderr) == (
        click.returncode, click.stdout, click.stderr)
    assert script.stdout.splitlines()[1] == "request: (empty)"


def test_a_terminal_escape_in_the_text_is_left_to_click_which_strips_it_when_piped(
        diamond_root: Path, capsys: pytest.CaptureFixture) -> None:
    store = make_delivery(diamond_root)
    rewrite(lambda d: d.update(request="\x1b[31mred"))(store.index_path("d1"))
    assert not answered_quickly(diamond_root, "status", "d1", capsys=capsys)
    assert answered_quickly(diamond_root, "status", "d1", "--json", capsys=capsys)
    for args in [("status", "d1"), ("status", "d1", "--json")]:
        script, click = both(diamond_root, *args)
        assert (script.returncode, script.stdout, script.stderr) == (
            click.returncode, click.stdout, click.stderr)
    assert script.stdout.count("\\u001b[31mred") == 1


OTHER_COMMAND_LINES = [("status", "--help"), ("status", "d1", "d2"), ("status", "-x"),
                       ("status", "--", "d1"), ("status", "../d1"), ("status", "ghost"),
                       ("status", "d1", "--json", "--json"), ("--root",), ("check",)]


@pytest.mark.parametrize("args", OTHER_COMMAND_LINES)
def test_quick_leaves_every_other_command_line_to_the_click_cli(
        diamond_root: Path, args: tuple[str, ...], capsys: pytest.CaptureFixture) -> None:
    make_delivery(diamond_root)
    assert quick.answer(["--root", str(diamond_root), *args]) is None
    assert capsys.readouterr().out == ""
    script, click = both(diamond_root, *args)
    assert (script.returncode, script.stdout, script.stderr) == (
        click.returncode, click.stdout, click.stderr)


def test_quick_status_reads_the_root_from_the_option_or_the_environment(
        diamond_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    make_delivery(diamond_root)
    monkeypatch.setenv("SPECOPS_ROOT", str(diamond_root))
    assert quick.answer(["status"]) == 0
    assert capsys.readouterr().out.startswith("d1 ")
    assert quick.answer([f"--root={tmp_path / 'missing'}", "status"]) is None  # click's error
    (tmp_path / "empty").mkdir()
    assert quick.answer([f"--root={tmp_path / 'empty'}", "status"]) == 0
    assert capsys.readouterr().out == ("no deliveries yet; create one with `specops new "
                                       "WORKFLOW DELIVERY --request TEXT`\n")
    (tmp_path / "a-file").write_text("")
    assert quick.answer(["--root", str(tmp_path / "a-file"), "status"]) is None
    monkeypatch.setenv("SPECOPS_ROOT", "")
    assert quick.answer(["status"]) is None


def test_the_schemas_file_is_what_the_models_generate() -> None:
    assert shape.SCHEMAS.read_text(encoding="utf-8") == shape.render(shape.generate()), (
        "the models changed: regenerate with `python -m specops_dag.shape`")


def paths(value: object, at: tuple = ()) -> list[tuple]:
    out = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            out += paths(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += paths(item, (*at, i))
    return out


def replaced(doc: dict, at: tuple, change: Callable[[object], object]) -> dict:
    copy = json.loads(json.dumps(doc))
    if not at:
        return change(copy)
    parent = copy
    for key in at[:-1]:
        parent = parent[key]
    parent[at[-1]] = change(parent[at[-1]])
    return copy


def without(key: str) -> Callable[[dict], dict]:
    return lambda d: {k: v for k, v in d.items() if k != key}


SWAPS = [None, 0, 7, 1.5, 2.0, True, "", "x", "pending", [], {}, ["x"], {"k": "v"},
         "\nx", "x\n"]


def mutations(doc: dict) -> list[dict]:
    """Every value swapped for other JSON values, every field dropped, an extra field, fields
    reordered, lists grown and emptied, numbers retyped — one change at a time."""
    out = []
    for at in paths(doc):
        out += [replaced(doc, at, lambda _, s=swap: s) for swap in SWAPS]
        node = doc
        for key in at:
            node = node[key]
        if isinstance(node, dict):
            out += [replaced(doc, at, without(k)) for k in node]
            out += [replaced(doc, at, lambda d: {**d, "zz": 1}),
                    replaced(doc, at, lambda d: dict(reversed(d.items())))]
        elif isinstance(node, list) and node:
            out += [replaced(doc, at, lambda v: [*v, v[0]]),
                    replaced(doc, at, lambda v: [])]
        elif isinstance(node, int) and not isinstance(node, bool):
            out += [replaced(doc, at, lambda v: float(v)), replaced(doc, at, lambda v: str(v))]
        elif isinstance(node, float):
            out.append(replaced(doc, at, lambda v: int(v)))
    return out


def rich_state(root: Path) -> dict:
    """A delivery whose every optional field is set, as specops writes it."""
    from specops_dag.state import Approval, Event, FileRef, Revision, Risk

    store = risky(root)
    with store.transaction("d1") as state:
        a = state.get_step("a")
        a.revisions = [Revision(handoff=a.handoff, commits={"product": "ab" * 20,
                                                             "metadata": None},
                                attempts=2, reopened_at=now_iso(), reason="why")]
        a.usage = [Usage(attempt=1, thread_id="t", input_tokens=5, output_tokens=6,
                         cached_input_tokens=1, reasoning_output_tokens=2)]
        a.reviews = [{"round": 1, "verdict": "pass", "scores": {"tests": 9}}]
        a.validation_report = {"verdict": "passed", "tests": {"passed": 3, "failed": 0}}
        a.consumed = {"request": FileRef(path="phases/d1/request.md", sha256="2" * 64)}
        a.summary, a.base_commit, a.last_failure = "did it", "cd" * 20, "x failed"
        me = psutil.Process()
        state.get_step("c").owner = Owner(pid=me.pid, create_time=me.create_time(),
                                          host=socket.gethostname())
        state.approvals.append(Approval(gate="scope", decision="approved", at=now_iso()))
        state.risks.append(Risk(node="b", path="phases/d1/b/risk.md", raised_at=now_iso()))
        state.history.append(Event(at=now_iso(), event="note", step="a", detail="d"))
        state.worktree, state.branch = ".specops/worktrees/d1", "feat-d1"
    return json.loads(store.index_path("d1").read_text())


def test_a_value_the_shape_check_accepts_is_one_the_models_dump_unchanged(
        diamond_root: Path) -> None:
    from specops_dag.state import Delivery, Index

    doc = rich_state(diamond_root)
    index = json.loads((diamond_root / "phases/index.json").read_text())
    accepted = rejected = 0
    for kind, model, base in [("delivery", Delivery, doc), ("index", Index, index)]:
        assert shape.canonical(base, kind) is not None
        for mutated in mutations(base):
            try:
                shape.canonical(mutated, kind)
            except shape.NotCanonical:
                rejected += 1
                continue
            accepted += 1
            dumped = model.model_validate(mutated).model_dump(by_alias=True)
            assert json.dumps(dumped) == json.dumps(mutated)
    print(f"{accepted} mutations accepted, {rejected} handed to the models")
    assert accepted > 500 and rejected > 2000, (accepted, rejected)


def codex_delivery(tmp_path: Path) -> Path:
    """The agentic workflow with `write` completed, a context file, a handoff and a failure."""
    from .agentic import agentic_root
    from .conftest import write_tree
    from .test_codex import new
    from .test_prompt import completed_write, set_context

    root = agentic_root(tmp_path)
    write_tree(root, {"docs/arch.md": "# Architecture\n", "docs/phase/d1/handoff.md": "# H\n"})
    store = new(root)
    completed_write(root)
    set_context(root, "d1", "review", ["docs/arch.md", "./docs/arch.md"])
    with store.transaction("d1") as state:
        state.get_step("review").last_failure = "exit 0 but required artifacts are missing"
    return root


DRY_RUNS = [("dry-run", "d1"), ("dry-run", "d1", "--json"), ("dry-run", "d1", "write"),
            ("dry-run", "--json", "d1", "write")]


@pytest.mark.parametrize("kind", ["codex steps", "command steps"])
def test_quick_dry_run_prints_exactly_what_the_click_cli_prints(
        tmp_path: Path, diamond_root: Path, kind: str, capsys: pytest.CaptureFixture) -> None:
    if kind == "codex steps":
        root, commands = codex_delivery(tmp_path), DRY_RUNS
    else:
        root = diamond_root
        make_delivery(root)
        commands = [("dry-run", "d1"), ("dry-run", "d1", "--json"), ("dry-run", "d1", "c")]
    for args in commands:
        assert answered_quickly(root, *args, capsys=capsys), args
        script, click = both(root, *args)
        assert (script.returncode, script.stdout, script.stderr) == (
            click.returncode, click.stdout, click.stderr), args
        assert script.returncode == 0 and script.stdout.startswith(("dry-run of d1", "{"))


def tamper_catalog(root: Path) -> None:
    path = root / "phases/d1/catalog.json"
    text = path.read_text()
    assert text.count("Produce review.md") == 1
    path.write_text(text.replace("Produce review.md", "Produce a longer review.md"))


def retype_with_digest(root: Path) -> None:
    """Phases whose goal is not a string, in a catalog.json whose digest was recomputed."""
    path = root / "phases/d1/catalog.json"
    data = json.loads(path.read_text())
    data.pop("digest")
    for phase in ("c-write", "c-review"):
        data["phases"][phase]["execution"]["goal"] = 7
    rest = json.dumps(data)[1:]
    digest = hashlib.sha256(("{" + rest).encode()).hexdigest()
    path.write_text(f'{{"digest": "{digest}",\n{rest}')
    assert shape.read_compiled(path, root / "phases/d1/snapshot") is not None


SNAPSHOT_CHANGES = {
    "no catalog.json (a delivery made before it existed)":
        lambda root: (root / "phases/d1/catalog.json").unlink(),
    "a snapshot copy edited": lambda root: (root / "phases/d1/snapshot/phases/c-review.yaml")
        .write_text((root / "phases/d1/snapshot/phases/c-review.yaml").read_text().replace(
            "Produce review.md", "Produce a longer review.md")),
    "a file added to the snapshot": lambda root: (root / "phases/d1/snapshot/phases/x.yaml")
        .write_text("kind: phase\n"),
    "catalog.json edited by hand": tamper_catalog,
    "catalog.json not JSON": lambda root: (root / "phases/d1/catalog.json").write_text("{"),
    "a phase of the wrong shape under a matching digest": retype_with_digest,
}


@pytest.mark.parametrize("change", SNAPSHOT_CHANGES)
def test_quick_dry_run_hands_over_when_catalog_json_no_longer_describes_the_snapshot(
        tmp_path: Path, change: str, capsys: pytest.CaptureFixture) -> None:
    root = codex_delivery(tmp_path)
    SNAPSHOT_CHANGES[change](root)
    for args in DRY_RUNS:
        assert not answered_quickly(root, *args, capsys=capsys), args
        script, click = both(root, *args)
        assert (script.returncode, script.stdout, script.stderr) == (
            click.returncode, click.stdout, click.stderr), args


@pytest.mark.parametrize("args", [("dry-run",), ("dry-run", "d1", "write", "extra"),
                                  ("dry-run", "d1", "ghost"), ("dry-run", "d1", "--node")])
def test_quick_dry_run_leaves_bad_command_lines_to_the_click_cli(
        tmp_path: Path, args: tuple[str, ...], capsys: pytest.CaptureFixture) -> None:
    root = codex_delivery(tmp_path)
    assert quick.answer(["--root", str(root), *args]) is None
    assert capsys.readouterr().out == ""
    script, click = both(root, *args)
    assert (script.returncode, script.stdout, script.stderr) == (
        click.returncode, click.stdout, click.stderr)
    assert script.returncode == 2


@pytest.mark.parametrize(("command", "first_line"), [
    ("status", "delivery d1  workflow agentic  status pending"),
    ("dry-run", "dry-run of d1 / review (step 1, phase c-review): nothing is changed")])
def test_specops_status_and_dry_run_import_neither_click_pydantic_yaml_nor_dagster(
        tmp_path: Path, command: str, first_line: str) -> None:
    root = codex_delivery(tmp_path)
    code = ("import sys; sys.argv = ['specops', '--root', sys.argv[1], sys.argv[2], 'd1']\n"
            "from specops_dag.entry import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "print(sorted(m for m in ('click', 'pydantic', 'yaml', 'dagster', 'git') "
            "if m in sys.modules), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code, str(root), command],
                            capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.splitlines()[0] == first_line
    assert result.stderr == "[]\n"
