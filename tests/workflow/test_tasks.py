"""A phase's `execution.fan_out` and the task list it expands (issue #20 item 2, the format): the
FanOut model, reading a `kind: task-list` file with one exact message per problem (file, line,
YAML path, fix), the order the tasks run in, and the load-time checks of a fan-out."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from specops_dag.errors import DefinitionError
from specops_dag.workflow.model import FanOut, Phase, TaskSource, Workflow
from specops_dag.workflow.tasks import (
    Task,
    TaskList,
    check_fan_out,
    check_fan_out_node,
    load_task_list,
    task_order,
)

CODEX = {"goal": "Build each task.", "executor": {"kind": "codex"}}


def phase_with(fan_out: object) -> dict:
    return {"kind": "phase", "id": "p-build", "input": {"ports": {"plan": {"contract": "plan"}}},
            "execution": {**CODEX, "fan_out": fan_out}}


def test_a_fan_out_runs_two_sessions_at_a_time_unless_it_says_otherwise() -> None:
    phase = Phase.model_validate(phase_with({"tasks": {"input": "plan", "artifact": "tasks"}}))
    assert phase.execution.fan_out == FanOut(tasks=TaskSource(input="plan", artifact="tasks"),
                                             max_parallel=2)
    assert Phase.model_validate(phase_with({"tasks": {"input": "plan", "artifact": "tasks"},
                                            "max_parallel": 16})).execution.fan_out.max_parallel == 16


def test_a_phase_without_fan_out_has_none() -> None:
    phase = Phase.model_validate({"kind": "phase", "id": "p", "execution": CODEX})
    assert phase.execution.fan_out is None


TASKS = {"input": "plan", "artifact": "tasks"}
BAD_FAN_OUT = [
    pytest.param({"tasks": TASKS, "max_parallel": 0}, [
        (("max_parallel",), "Input should be greater than or equal to 1")], id="zero-parallel"),
    pytest.param({"tasks": TASKS, "max_parallel": 17}, [
        (("max_parallel",), "Input should be less than or equal to 16")], id="17-parallel"),
    pytest.param({"tasks": TASKS, "max_parallel": "two"}, [
        (("max_parallel",), "Input should be a valid integer, unable to parse string as an "
                            "integer")], id="parallel-not-a-number"),
    pytest.param({"max_parallel": 3}, [(("tasks",), "Field required")], id="no-tasks"),
    pytest.param({"tasks": {"input": "plan"}}, [(("tasks", "artifact"), "Field required")],
                 id="no-artifact"),
    pytest.param({"tasks": {"input": "Plan", "artifact": "tasks"}}, [
        (("tasks", "input"), "String should match pattern '^[a-z0-9][a-z0-9_-]{0,62}$'")],
        id="port-not-an-id"),
    pytest.param({"tasks": "plan"}, [
        (("tasks",), "Input should be a valid dictionary or instance of TaskSource")],
        id="tasks-not-a-mapping"),
    pytest.param({"tasks": {**TASKS, "path": "tasks.yaml"}, "parallel": 3}, [
        (("tasks", "path"), "Extra inputs are not permitted"),
        (("parallel",), "Extra inputs are not permitted")], id="unknown-keys"),
]


@pytest.mark.parametrize(("fan_out", "errors"), BAD_FAN_OUT)
def test_a_bad_fan_out_value_is_refused_where_it_is(fan_out: dict,
                                                    errors: list[tuple[tuple, str]]) -> None:
    with pytest.raises(ValidationError) as caught:
        Phase.model_validate(phase_with(fan_out))
    assert [(e["loc"], e["msg"]) for e in caught.value.errors()] == [
        (("execution", "fan_out", *loc), msg) for loc, msg in errors]


def test_a_fan_out_is_frozen() -> None:
    fan_out = FanOut(tasks=TaskSource(input="plan", artifact="tasks"))
    with pytest.raises(ValidationError):
        fan_out.max_parallel = 3  # type: ignore[misc]


SHOWN = "phases/d1/design/tasks.yaml"
VALID = """\
kind: task-list
tasks:
  - id: parse-feed
    title: Parse the RSS feed
    paths: [src/Feed/Parser.cs, tests/Feed.Tests/ParserTests.cs]
    tests: [Feed.Tests.ParserTests.ParsesItems]
  - id: render
    title: Render the items as HTML
    needs: [parse-feed]
    paths: [src/Feed/Render.cs]
    tests: [Feed.Tests.RenderTests.RendersTitles]
"""


def written(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "tasks.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        load_task_list(path, SHOWN)
    assert str(caught.value) == "\n".join(caught.value.problems)
    return caught.value.problems


def test_a_valid_task_list_loads_into_frozen_tasks_in_file_order(tmp_path: Path) -> None:
    got = load_task_list(written(tmp_path, VALID), SHOWN)
    assert got == TaskList(kind="task-list", tasks=(
        Task(id="parse-feed", title="Parse the RSS feed",
             paths=("src/Feed/Parser.cs", "tests/Feed.Tests/ParserTests.cs"),
             tests=("Feed.Tests.ParserTests.ParsesItems",)),
        Task(id="render", title="Render the items as HTML", needs=("parse-feed",),
             paths=("src/Feed/Render.cs",), tests=("Feed.Tests.RenderTests.RendersTitles",))))
    with pytest.raises(ValidationError):
        got.tasks[0].title = "Something else"  # type: ignore[misc]


def test_block_lists_comments_data_row_names_and_needs_on_a_later_task_are_fine(
        tmp_path: Path) -> None:
    text = """\
# written by the design node
kind: task-list
tasks:
  - id: render
    title: Render the items as HTML
    needs:
      - parse-feed   # a later task of the list
    paths:
      - src/Feed/Render.cs
      - ./src/Feed/Templates/item.html
    tests:
      - 'Feed.Tests.RenderTests.Escapes(input: "<b> & </b>")'
  - id: parse-feed
    title: Parse the RSS feed
    needs: []
    paths: [src/Feed/Parser.cs]
    tests: [ParserTests.ParsesItems]
"""
    got = load_task_list(written(tmp_path, text), SHOWN)
    assert [t.id for t in task_order(got.tasks)] == ["parse-feed", "render"]
    assert got.tasks[0].tests == ('Feed.Tests.RenderTests.Escapes(input: "<b> & </b>")',)
    assert got.tasks[1].needs == ()


def edited(old: str, new: str) -> str:
    assert VALID.count(old) == 1, old
    return VALID.replace(old, new)


def at(line: int, rest: str) -> str:
    return f"{SHOWN}:{line}: {rest}"


PATH_FIX = "give a path relative to the repository root, e.g. src/Feed/Parser.cs"
BAD = [
    pytest.param(edited("kind: task-list", "kind: phase"), [
        at(1, "kind: expected `task-list`, got `phase`; set `kind: task-list`")],
        id="wrong-kind"),
    pytest.param(edited("kind: task-list\n", ""), [
        at(1, "kind: missing required key `kind`; add `kind: task-list`")], id="no-kind"),
    pytest.param(VALID + "owner: design\n", [
        at(12, "owner: unknown key `owner`; remove it or fix the spelling (allowed: kind, "
               "tasks)")], id="unknown-top-level-key"),
    pytest.param("kind: task-list\n", [
        at(1, "tasks: missing required key `tasks`; add it")], id="no-tasks"),
    pytest.param("kind: task-list\ntasks: []\n", [
        at(2, "tasks: empty list; add at least one task {id, title, paths, tests}")],
        id="no-task"),
    pytest.param("kind: task-list\ntasks: {id: parse-feed}\n", [
        at(2, "tasks: expected a list of tasks, got a mapping; fix the value")],
        id="tasks-not-a-list"),
    pytest.param("kind: task-list\ntasks:\n  - parse-feed\n", [
        at(3, "tasks[0]: expected a task {id, title, paths, tests}, got text `parse-feed`; fix "
              "the value")], id="task-not-a-mapping"),
    pytest.param(edited("id: render", "id: parse-feed"), [
        at(7, "tasks[1].id: duplicate task id `parse-feed` (first at tasks[0]); give each task "
              "a unique id")], id="duplicate-id"),
    pytest.param(edited("id: render", "id: Render"), [
        at(7, "tasks[1].id: `Render` is not a valid id; use lowercase letters, digits, `-` and "
              "`_`, starting with a letter or digit")], id="id-not-an-id"),
    pytest.param(edited("id: render", "id: 42"), [
        at(7, "tasks[1].id: expected an id, got a number `42`; fix the value")],
        id="id-not-text"),
    pytest.param(edited("    paths: [src/Feed/Render.cs]\n", ""), [
        at(7, "tasks[1].paths: missing required key `paths`; add it")], id="no-paths"),
    pytest.param(edited("    title: Render", "    titel: Render"), [
        at(8, "tasks[1].titel: unknown key `titel`; remove it or fix the spelling (allowed: id, "
              "title, needs, paths, tests)"),
        at(7, "tasks[1].title: missing required key `title`; add it")],
        id="unknown-task-key"),
    pytest.param(edited("title: Render the items as HTML", 'title: "  "'), [
        at(8, "tasks[1].title: empty title; say in a few words what the task does")],
        id="blank-title"),
    pytest.param(edited("title: Render the items as HTML", "title:"), [
        at(8, "tasks[1].title: expected text, got nothing (null); fix the value")],
        id="no-title-text"),
    pytest.param(edited("needs: [parse-feed]", "needs: [parse-feed, parse]"), [
        at(9, "tasks[1].needs: unknown task `parse`; name one of the task ids (parse-feed, "
              "render) or remove it")], id="unknown-need"),
    pytest.param(edited("    title: Parse the RSS feed\n",
                        "    title: Parse the RSS feed\n    needs: [render]\n"), [
        at(5, "tasks[0].needs: cycle parse-feed -> render -> parse-feed; remove one of these "
              "needs")], id="cycle"),
    pytest.param(edited("needs: [parse-feed]", "needs: [render]"), [
        at(9, "tasks[1].needs: cycle render -> render; remove one of these needs")],
        id="needs-itself"),
    pytest.param(edited("needs: [parse-feed]", "needs: parse-feed"), [
        at(9, "tasks[1].needs: expected a list of task ids, got text `parse-feed`; write "
              "`[a, b]` or one `- a` line per item")], id="needs-not-a-list"),
    pytest.param(edited("paths: [src/Feed/Render.cs]", "paths: []"), [
        at(10, "tasks[1].paths: empty list; name at least one file the task expects to touch")],
        id="no-path"),
    pytest.param(edited("tests: [Feed.Tests.RenderTests.RendersTitles]", "tests: []"), [
        at(11, "tasks[1].tests: empty list; name at least one acceptance test by its fully "
               "qualified name")], id="no-test"),
    pytest.param(edited("src/Feed/Render.cs", "/src/Feed/Render.cs"), [
        at(10, f"tasks[1].paths: `/src/Feed/Render.cs` is absolute; {PATH_FIX}")],
        id="absolute-path"),
    pytest.param(edited("src/Feed/Render.cs", "~/Render.cs"), [
        at(10, f"tasks[1].paths: `~/Render.cs` is absolute; {PATH_FIX}")], id="home-path"),
    pytest.param(edited("src/Feed/Render.cs", "C:/src/Render.cs"), [
        at(10, f"tasks[1].paths: `C:/src/Render.cs` is absolute; {PATH_FIX}")],
        id="drive-path"),
    pytest.param(edited("src/Feed/Render.cs", "src/../Render.cs"), [
        at(10, f"tasks[1].paths: `src/../Render.cs` contains `..`; {PATH_FIX}")],
        id="dot-dot-path"),
    pytest.param(edited("src/Feed/Render.cs", "./"), [
        at(10, f"tasks[1].paths: `./` names no file; {PATH_FIX}")], id="path-of-no-file"),
    pytest.param(edited("src/Feed/Render.cs", '""'), [
        at(10, f"tasks[1].paths: `` is empty; {PATH_FIX}")], id="empty-path"),
    pytest.param(edited("src/Feed/Render.cs", "42"), [
        at(10, "tasks[1].paths: expected a path, got a number `42`; fix the item")],
        id="path-not-text"),
    pytest.param(edited("    paths: [src/Feed/Render.cs]\n",
                        "    paths:\n      - src/Feed/Render.cs\n      - ../secrets.txt\n"), [
        at(12, f"tasks[1].paths: `../secrets.txt` contains `..`; {PATH_FIX}")],
        id="bad-path-in-a-block-list"),
    pytest.param(edited("Feed.Tests.RenderTests.RendersTitles", "RendersTitles"), [
        at(11, "tasks[1].tests: `RendersTitles` is not a fully qualified test name; write "
               "Namespace.Class.Method, e.g. Feed.Tests.ParserTests.ParsesItems")],
        id="test-not-qualified"),
    pytest.param("- kind: task-list\n", [
        at(1, "(top level): expected a mapping of keys, got a list; start the file with "
              "`kind: task-list`")], id="top-level-list"),
    pytest.param("# nothing yet\n", [
        f"{SHOWN}: (top level): expected a mapping of keys, got an empty file; start the file "
        "with `kind: task-list`"], id="empty-file"),
    pytest.param("kind: task-list\ntasks: [\n", [
        f"{SHOWN}: invalid YAML at line 3, column 1: expected the node content, but found "
        "'<stream end>'; fix the syntax"], id="invalid-yaml"),
    pytest.param(b"kind: task-list\ntitle: caf\xe9\n", [
        f"{SHOWN}: not UTF-8 text; save the file as UTF-8"], id="not-utf-8"),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_a_bad_task_list_gets_its_exact_message_with_the_line(
        tmp_path: Path, text: str | bytes, expected: list[str]) -> None:
    assert problems(written(tmp_path, text)) == expected


def test_every_problem_of_a_task_list_is_reported_at_once(tmp_path: Path) -> None:
    text = (VALID.replace("kind: task-list", "kind: tasks").replace("id: render", "id: parse-feed")
            .replace("Feed.Tests.RenderTests.RendersTitles", "RendersTitles"))
    assert problems(written(tmp_path, text)) == [
        at(1, "kind: expected `task-list`, got `tasks`; set `kind: task-list`"),
        at(7, "tasks[1].id: duplicate task id `parse-feed` (first at tasks[0]); give each task "
              "a unique id"),
        at(11, "tasks[1].tests: `RendersTitles` is not a fully qualified test name; write "
               "Namespace.Class.Method, e.g. Feed.Tests.ParserTests.ParsesItems")]


def test_a_key_merged_in_with_an_alias_is_named_at_the_task_that_merges_it(
        tmp_path: Path) -> None:
    text = VALID + "  - <<: &base {title: Render, paths: [/abs.cs], tests: [A.B]}\n    id: more\n"
    assert problems(written(tmp_path, text)) == [
        at(12, f"tasks[2].paths: `/abs.cs` is absolute; {PATH_FIX}")]


def test_a_missing_or_unreadable_task_list_is_one_message(tmp_path: Path) -> None:
    assert problems(tmp_path / "nope.yaml") == [
        f"{SHOWN}: cannot be read (No such file or directory); write the task list there as a "
        "UTF-8 YAML file"]
    (tmp_path / "folder.yaml").mkdir()
    assert problems(tmp_path / "folder.yaml") == [
        f"{SHOWN}: cannot be read (Is a directory); write the task list there as a UTF-8 YAML "
        "file"]


LETTERS = "abcdefghij"
# 9 x's, then nine references to the previous list, ten times over: 9**10 (3.5 billion) leaves
BOMB = ("kind: task-list\na: &a [" + ",".join("x" * 9) + "]\n"
        + "".join(f"{b}: &{b} [{','.join([f'*{a}'] * 9)}]\n"
                  for a, b in zip(LETTERS, LETTERS[1:], strict=False)))
CAPS = [
    pytest.param(BOMB, "YAML aliases expand to more than 100,000 nodes (an alias bomb?); write "
                 "the values out or reference fewer aliases", id="alias-bomb"),
    pytest.param("kind: task-list\ntasks: " + "[" * 20_000 + "]" * 20_000 + "\n",
                 "YAML nested more than 64 levels deep (mappings and sequences); flatten the "
                 "structure", id="nested-20000-levels"),
    pytest.param(VALID + "# padding\n" * (2 * 1024 * 1024 // 10),
                 "larger than 1 MiB (1,048,576 bytes), the limit for a definition file; shorten "
                 "it or remove it", id="2-mib-file"),
]


def test_the_alias_bomb_is_under_one_kilobyte() -> None:
    assert len(BOMB.encode()) < 1024


@pytest.mark.parametrize(("text", "error"), CAPS)
def test_a_task_list_over_a_cap_of_definition_files_gets_yamlfiles_exact_error(
        tmp_path: Path, text: str, error: str) -> None:
    assert problems(written(tmp_path, text)) == [f"{SHOWN}: (file): {error}"]


def task(ident: str, *needs: str) -> Task:
    return Task(id=ident, title=f"Do {ident}", needs=needs, paths=(f"src/{ident}.cs",),
                tests=(f"Tests.{ident}",))


def test_tasks_run_after_what_they_need_and_in_list_order_otherwise() -> None:
    x, y, z = task("x", "y"), task("y"), task("z")
    assert task_order([x, y, z]) == [y, x, z]
    a, b, c, d = task("a"), task("b", "d"), task("c"), task("d")
    assert task_order([a, b, c, d]) == [a, c, d, b]
    assert task_order(TaskList(kind="task-list", tasks=(z, y)).tasks) == [z, y]


def test_the_order_of_a_list_with_a_cycle_is_refused() -> None:
    with pytest.raises(ValueError, match="needs cycle"):
        task_order([task("a", "b"), task("b", "a")])


PHASE_FILE = "workflow_defs/phases/p-build.yaml"
WORKFLOW_FILE = "workflow_defs/workflows/feed.yaml"


def phase(pid: str, executor: str = "codex", ports: tuple[str, ...] = ("plan",),
          fan_out: dict | None = None, artifacts: list[dict] | None = None) -> Phase:
    execution: dict = {"goal": "Do it.", "executor": {"kind": executor}}
    if executor == "command":
        execution["executor"]["argv"] = ["true"]
    if fan_out is not None:
        execution["fan_out"] = fan_out
    return Phase.model_validate({
        "kind": "phase", "id": pid, "execution": execution,
        "input": {"ports": {p: {"contract": p} for p in ports}},
        "output": {"ports": {"plan": {"contract": "plan"}}, "artifacts": artifacts or []}})


FAN_OUT = {"tasks": {"input": "plan", "artifact": "tasks"}, "max_parallel": 3}
DESIGN = phase("p-design", ports=("request",),
               artifacts=[{"id": "design", "path": "design.md"},
                          {"id": "tasks", "path": "tasks.yaml"}])
BUILD = phase("p-build", fan_out=FAN_OUT)


def workflow(build_inputs: dict) -> Workflow:
    return Workflow.model_validate({
        "kind": "workflow", "id": "feed", "inputs": {"request": {"contract": "request"}},
        "nodes": [{"id": "design", "phase": "p-design",
                   "inputs": {"request": {"input": "request"}}},
                  {"id": "build", "phase": "p-build", "needs": ["design"],
                   "inputs": build_inputs}]})


FROM_DESIGN = {"plan": {"node": "design", "output": "plan"}}


def test_a_codex_phase_fanning_out_over_its_own_port_from_an_upstream_artifact_is_fine() -> None:
    assert check_fan_out(PHASE_FILE, BUILD) == []
    assert check_fan_out(PHASE_FILE, DESIGN) == []  # no fan_out: nothing to check
    phases = {"p-design": DESIGN, "p-build": BUILD}
    assert [check_fan_out_node(WORKFLOW_FILE, workflow(FROM_DESIGN), i, phases)
            for i in (0, 1)] == [[], []]


@pytest.mark.parametrize(("bad", "expected"), [
    pytest.param(phase("p-build", ports=("spec",), fan_out=FAN_OUT), [
        f"{PHASE_FILE}: execution.fan_out.tasks.input: phase `p-build` has no input port `plan` "
        "(has: spec); name one of its input ports or declare `plan` under input.ports"],
        id="no-such-port"),
    pytest.param(phase("p-build", ports=(), fan_out=FAN_OUT), [
        f"{PHASE_FILE}: execution.fan_out.tasks.input: phase `p-build` has no input port `plan` "
        "(has: none); name one of its input ports or declare `plan` under input.ports"],
        id="no-port-at-all"),
    pytest.param(phase("p-build", executor="command", fan_out=FAN_OUT), [
        f"{PHASE_FILE}: execution.fan_out: only a `codex` phase fans out into agent sessions, "
        "this one runs `command`; remove it or use `executor: {kind: codex}`"],
        id="command-phase"),
])
def test_a_fan_out_the_phase_itself_cannot_run_is_a_problem_of_the_phase_file(
        bad: Phase, expected: list[str]) -> None:
    assert check_fan_out(PHASE_FILE, bad) == expected


@pytest.mark.parametrize(("design", "inputs", "expected"), [
    pytest.param(phase("p-design", ports=("request",), artifacts=[
        {"id": "design", "path": "design.md"}]), FROM_DESIGN, [
        f"{WORKFLOW_FILE}: nodes[1].inputs.plan.node: node `design` (phase `p-design`) has no "
        "artifact `tasks`, the task list phase `p-build` fans out over (has: design); add "
        "`{id: tasks, path: <file>.yaml}` to output.artifacts of phase `p-design` or fix "
        "execution.fan_out.tasks.artifact of phase `p-build`"], id="no-such-artifact"),
    pytest.param(phase("p-design", ports=("request",)), FROM_DESIGN, [
        f"{WORKFLOW_FILE}: nodes[1].inputs.plan.node: node `design` (phase `p-design`) has no "
        "artifact `tasks`, the task list phase `p-build` fans out over (has: none); add "
        "`{id: tasks, path: <file>.yaml}` to output.artifacts of phase `p-design` or fix "
        "execution.fan_out.tasks.artifact of phase `p-build`"], id="no-artifact-at-all"),
    pytest.param(phase("p-design", ports=("request",), artifacts=[
        {"id": "tasks", "path": "tasks.yaml", "required": False}]), FROM_DESIGN, [
        f"{WORKFLOW_FILE}: nodes[1].inputs.plan.node: artifact `tasks` of node `design` (phase "
        "`p-design`) is optional, but phase `p-build` fans out over it; make it "
        "`required: true`"], id="optional-artifact"),
    pytest.param(DESIGN, {"plan": {"input": "request"}}, [
        f"{WORKFLOW_FILE}: nodes[1].inputs.plan: phase `p-build` fans out over the task list "
        "that comes in on `plan`, but it is bound to workflow input `request`; bind it to the "
        "upstream node that writes the task list: `{node: <upstream>, output: <port>}`"],
        id="bound-to-a-workflow-input"),
    # what the catalog reports itself (a missing binding, an unknown node) is not repeated
    pytest.param(DESIGN, {}, [], id="port-not-bound"),
    pytest.param(DESIGN, {"plan": {"node": "nope", "output": "plan"}}, [],
                 id="unknown-upstream-node"),
])
def test_a_fan_out_whose_task_list_no_upstream_node_writes_is_a_problem_of_the_workflow_file(
        design: Phase, inputs: dict, expected: list[str]) -> None:
    phases = {"p-design": design, "p-build": BUILD}
    assert check_fan_out_node(WORKFLOW_FILE, workflow(inputs), 1, phases) == expected


def test_a_node_whose_phase_is_unknown_or_fans_out_over_no_port_is_left_to_the_catalog() -> None:
    wf = workflow(FROM_DESIGN)
    assert check_fan_out_node(WORKFLOW_FILE, wf, 1, {"p-design": DESIGN}) == []
    no_port = phase("p-build", ports=(), fan_out=FAN_OUT)
    assert check_fan_out_node(WORKFLOW_FILE, wf, 1, {"p-design": DESIGN, "p-build": no_port}) == []
