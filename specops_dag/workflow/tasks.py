"""The task list a design node writes for a phase's `execution.fan_out`: its format, reading it
within yamlfile's caps into a `TaskList` (every problem with file, line, YAML path and fix), the
order its tasks run in, and the load-time checks of a fan-out (`check_fan_out`,
`check_fan_out_node`, for the catalog to call); it never writes a file and never runs a task.

The format (`kind: task-list`)::

    kind: task-list
    tasks:
      - id: parse-feed            # a node id: ^[a-z0-9][a-z0-9_-]{0,62}$, unique in the list
        title: Parse the RSS feed # not empty
        needs: [render]           # optional: ids of other tasks of the list, no cycle
        paths: [src/Feed/Parser.cs]  # at least one; relative to the repository root, no `..`
        tests: [Feed.Tests.ParserTests.ParsesItems]  # at least one, fully qualified names

A problem reads `<file>:<line>: <yaml path>: <what is wrong>; <fix>` (a file-wide one, as the
catalog's, `<file>: (file): …`); `load_task_list` raises all of them as one `DefinitionError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from specops_dag.errors import DefinitionError
from specops_dag.graph import find_cycle, topological_order
from specops_dag.workflow import yamlfile
from specops_dag.workflow.messages import yaml_kind
from specops_dag.workflow.model import ID_PATTERN, Phase, Workflow

KIND = "task-list"
TASK_KEYS = ("id", "title", "needs", "paths", "tests")
REQUIRED_KEYS = ("id", "title", "paths", "tests")


class Task(BaseModel):
    """One task: one agent session of the fan-out, touching `paths`, proven by `tests`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Annotated[str, Field(pattern=ID_PATTERN)]
    title: str = Field(min_length=1)
    needs: tuple[Annotated[str, Field(pattern=ID_PATTERN)], ...] = ()
    paths: tuple[str, ...] = Field(min_length=1)
    tests: tuple[str, ...] = Field(min_length=1)


class TaskList(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["task-list"]
    tasks: tuple[Task, ...] = Field(min_length=1)


def load_task_list(path: Path, shown: str) -> TaskList:
    """The task list in `path`, read within yamlfile's caps and checked; `shown` names the file
    in messages. Raises `DefinitionError` with every problem found (see the module's doc)."""
    data, root = _read(path, shown)
    reader = _Reader(shown)
    reader.document(data, root)
    if reader.problems:
        raise DefinitionError(reader.problems)
    return TaskList.model_validate(data)


def task_order(tasks: Iterable[Task]) -> list[Task]:
    """The tasks each after every task it needs; of the tasks ready to go, the first in the list
    goes next. For a checked list (unique ids, no cycle; a cycle raises ValueError)."""
    by_id = {t.id: t for t in tasks}
    return [by_id[i] for i in topological_order({t.id: t.needs for t in by_id.values()})]


def check_fan_out(shown: str, phase: Phase) -> list[str]:
    """The problems of a phase's own `execution.fan_out` (catalog message style, `shown` being
    the phase file): only a `codex` phase fans out, over one of its own input ports."""
    fan_out = phase.execution.fan_out
    if fan_out is None:
        return []
    where = f"{shown}: execution.fan_out"
    kind = phase.execution.executor.kind
    if kind != "codex":
        return [f"{where}: only a `codex` phase fans out into agent sessions, this one runs "
                f"`{kind}`; remove it or use `executor: {{kind: codex}}`"]
    port, ports = fan_out.tasks.input, phase.input.ports
    if port not in ports:
        return [f"{where}.tasks.input: phase `{phase.id}` has no input port `{port}` (has: "
                f"{', '.join(ports) or 'none'}); name one of its input ports or declare `{port}` "
                "under input.ports"]
    return []


def check_fan_out_node(shown: str, workflow: Workflow, index: int,
                       phases: Mapping[str, Phase]) -> list[str]:
    """The problems of the fan-out of node `workflow.nodes[index]` (catalog message style,
    `shown` being the workflow file): the port the task list comes in on is bound to an upstream
    node whose phase writes the named artifact, and writes it always (`required`). What the
    catalog reports already (a missing binding, an unknown node or phase) is no problem here."""
    node = workflow.nodes[index]
    phase = phases.get(node.phase)
    fan_out = phase.execution.fan_out if phase is not None else None
    if fan_out is None or fan_out.tasks.input not in phase.input.ports:
        return []
    port, artifact = fan_out.tasks.input, fan_out.tasks.artifact
    ref = node.inputs.get(port)
    if ref is None:
        return []
    where = f"{shown}: nodes[{index}].inputs.{port}"
    if ref.input is not None:
        return [f"{where}: phase `{node.phase}` fans out over the task list that comes in on "
                f"`{port}`, but it is bound to workflow input `{ref.input}`; bind it to the "
                f"upstream node that writes the task list: `{{node: <upstream>, output: <port>}}`"]
    upstream = next((n for n in workflow.nodes if n.id == ref.node), None)
    up_phase = phases.get(upstream.phase) if upstream is not None else None
    if up_phase is None:
        return []
    arts = {a.id: a for a in up_phase.output.artifacts}
    if artifact not in arts:
        return [f"{where}.node: node `{ref.node}` (phase `{upstream.phase}`) has no artifact "
                f"`{artifact}`, the task list phase `{node.phase}` fans out over (has: "
                f"{', '.join(arts) or 'none'}); add `{{id: {artifact}, path: <file>.yaml}}` to "
                f"output.artifacts of phase `{upstream.phase}` or fix "
                f"execution.fan_out.tasks.artifact of phase `{node.phase}`"]
    if not arts[artifact].required:
        return [f"{where}.node: artifact `{artifact}` of node `{ref.node}` (phase "
                f"`{upstream.phase}`) is optional, but phase `{node.phase}` fans out over it; "
                "make it `required: true`"]
    return []


def _read(path: Path, shown: str) -> tuple[object, Node | None]:
    """The file's data and its composed root node (for the lines), read as the catalog reads a
    definition: within yamlfile's caps, a YAML error named by line and column."""
    try:
        text = yamlfile.read_text(path)
        loader = yamlfile.LOADER
        try:
            data = yamlfile.safe_load(text, loader)
        except yaml.YAMLError:  # re-read with the pure loader: its messages name the fix
            loader = yaml.SafeLoader
            data = yamlfile.safe_load(text, loader)
        return data, yaml.compose(text, loader)  # measured by safe_load: within the caps
    except yamlfile.LimitError as err:
        problem = f"{shown}: (file): {err}"
    except RecursionError:  # not expected past the depth cap; never a traceback
        problem = f"{shown}: (file): {yamlfile.TooDeep()}"
    except UnicodeDecodeError:
        problem = f"{shown}: not UTF-8 text; save the file as UTF-8"
    except OSError as err:  # a folder, a symlink loop, unreadable, missing
        problem = (f"{shown}: cannot be read ({err.strerror}); write the task list there as a "
                   "UTF-8 YAML file")
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(err, "problem", None) or str(err)
        problem = f"{shown}: invalid YAML{where}: {reason}; fix the syntax"
    raise DefinitionError([problem])


class _Reader:
    """Checks the composed document node by node (so each problem has its line) and returns
    the plain data a `TaskList` is built from."""

    def __init__(self, shown: str) -> None:
        self.shown = shown
        self.problems: list[str] = []

    def add(self, node: Node, where: str, what: str) -> None:
        self.problems.append(f"{self.shown}:{node.start_mark.line + 1}: {where}: {what}")

    def document(self, data: object, root: Node | None) -> None:
        if root is None:
            self.problems.append(f"{self.shown}: (top level): expected a mapping of keys, got an "
                                 f"empty file; start the file with `kind: {KIND}`")
            return
        if not isinstance(data, dict):
            self.add(root, "(top level)", f"expected a mapping of keys, got {yaml_kind(data)}; "
                     f"start the file with `kind: {KIND}`")
            return
        keys = _keys(root)
        for key in data:
            if key not in ("kind", "tasks"):
                self.add(keys.get(key, (root,))[0], str(key), f"unknown key `{key}`; remove it "
                         "or fix the spelling (allowed: kind, tasks)")
        if "kind" not in data:
            self.add(root, "kind", f"missing required key `kind`; add `kind: {KIND}`")
        elif data["kind"] != KIND:
            self.add(keys["kind"][1] if "kind" in keys else root, "kind",
                     f"expected `{KIND}`, got `{data['kind']}`; set `kind: {KIND}`")
        if "tasks" not in data:
            self.add(root, "tasks", "missing required key `tasks`; add it")
            return
        node = keys["tasks"][1] if "tasks" in keys else root
        tasks = data["tasks"]
        if not isinstance(tasks, list):
            self.add(node, "tasks", f"expected a list of tasks, got {yaml_kind(tasks)}; fix "
                     "the value")
        elif not tasks:
            self.add(node, "tasks", "empty list; add at least one task {id, title, paths, tests}")
        else:
            self.tasks(tasks, _items(node, len(tasks)))

    def tasks(self, tasks: list, nodes: list[Node]) -> None:
        ids: dict[str, int] = {}  # valid ids, first index
        needs: dict[int, list[tuple[str, Node]]] = {}  # task index -> its needs, with nodes
        for i, (task, node) in enumerate(zip(tasks, nodes, strict=True)):
            where = f"tasks[{i}]"
            if not isinstance(task, dict):
                self.add(node, where, f"expected a task {{id, title, paths, tests}}, got "
                         f"{yaml_kind(task)}; fix the value")
                continue
            keys = _keys(node)
            for key in task:
                if key not in TASK_KEYS:
                    self.add(keys.get(key, (node,))[0], f"{where}.{key}", f"unknown key `{key}`; "
                             f"remove it or fix the spelling (allowed: {', '.join(TASK_KEYS)})")
            for key in REQUIRED_KEYS:
                if key not in task:
                    self.add(node, f"{where}.{key}", f"missing required key `{key}`; add it")
            values = {k: (task[k], keys[k][1] if k in keys else node) for k in TASK_KEYS
                      if k in task}
            ident = self.task_id(where, *values["id"]) if "id" in values else None
            if ident is not None:
                if ident in ids:
                    self.add(values["id"][1], f"{where}.id", f"duplicate task id `{ident}` (first "
                             f"at tasks[{ids[ident]}]); give each task a unique id")
                else:
                    ids[ident] = i
            if "title" in values:
                self.title(where, *values["title"])
            if "needs" in values:
                needs[i] = self.needs(where, *values["needs"])
            if "paths" in values:
                self.paths(where, *values["paths"])
            if "tests" in values:
                self.tests(where, *values["tests"])
        known = ", ".join(ids)
        for i, items in needs.items():
            for need, node in items:
                if need not in ids:
                    self.add(node, f"tasks[{i}].needs", f"unknown task `{need}`; name one of the "
                             f"task ids ({known or 'none'}) or remove it")
        with_id = [i for i, t in enumerate(tasks) if isinstance(t, dict) and "id" in t]
        if len(ids) == len(with_id):  # every id valid and unique: the needs are a graph
            graph = {tasks[i]["id"]: [n for n, _ in needs.get(i, [])] for i in with_id}
            cycle = find_cycle(graph)
            if cycle:
                first = ids[cycle[0]]
                node = next(n for need, n in needs[first] if need == cycle[1])
                self.add(node, f"tasks[{first}].needs", f"cycle {' -> '.join(cycle)}; remove one "
                         "of these needs")

    def task_id(self, where: str, value: object, node: Node) -> str | None:
        if not isinstance(value, str):
            self.add(node, f"{where}.id", f"expected an id, got {yaml_kind(value)}; fix the value")
        elif not re.fullmatch(ID_PATTERN, value):
            self.add(node, f"{where}.id", f"`{value}` is not a valid id; use lowercase letters, "
                     "digits, `-` and `_`, starting with a letter or digit")
        else:
            return value
        return None

    def title(self, where: str, value: object, node: Node) -> None:
        if not isinstance(value, str):
            self.add(node, f"{where}.title", f"expected text, got {yaml_kind(value)}; fix the "
                     "value")
        elif not value.strip():
            self.add(node, f"{where}.title", "empty title; say in a few words what the task does")

    def strings(self, where: str, value: object, node: Node, what: str,
                if_empty: str | None) -> list[tuple[str, Node]]:
        """The (text, node) items of a list of `what` (singular); a value that is no list, an
        item that is no text and, with `if_empty` (the fix), an empty list are problems."""
        if not isinstance(value, list):
            self.add(node, where, f"expected a list of {what}s, got {yaml_kind(value)}; write "
                     "`[a, b]` or one `- a` line per item")
            return []
        if not value and if_empty:
            self.add(node, where, f"empty list; {if_empty}")
        out = []
        for item, item_node in zip(value, _items(node, len(value)), strict=True):
            if isinstance(item, str):
                out.append((item, item_node))
            else:
                self.add(item_node, where, f"expected a {what}, got {yaml_kind(item)}; fix the "
                         "item")
        return out

    def needs(self, where: str, value: object, node: Node) -> list[tuple[str, Node]]:
        return self.strings(f"{where}.needs", value, node, "task id", None)

    def paths(self, where: str, value: object, node: Node) -> None:
        for rel, item in self.strings(f"{where}.paths", value, node, "path",
                                      "name at least one file the task expects to touch"):
            problem = path_problem(rel)
            if problem:
                self.add(item, f"{where}.paths", f"`{rel}` {problem}; give a path relative to the "
                         "repository root, e.g. src/Feed/Parser.cs")

    def tests(self, where: str, value: object, node: Node) -> None:
        for name, item in self.strings(f"{where}.tests", value, node, "test name",
                                       "name at least one acceptance test by its fully "
                                       "qualified name"):
            if not is_qualified_name(name):
                self.add(item, f"{where}.tests", f"`{name}` is not a fully qualified test name; "
                         "write Namespace.Class.Method, e.g. Feed.Tests.ParserTests.ParsesItems")


def path_problem(rel: str) -> str | None:
    """Why `rel` is not a file path relative to the repository root inside it, or None."""
    if not rel.strip():
        return "is empty"
    if rel.startswith(("/", "\\", "~")) or (len(rel) > 1 and rel[1] == ":"):
        return "is absolute"
    parts = PurePosixPath(rel.replace("\\", "/")).parts
    if ".." in parts:
        return "contains `..`"
    return None if any(p != "." for p in parts) else "names no file"


def is_qualified_name(name: str) -> bool:
    """A test's fully qualified name: dotted parts with no blanks (Class.Method at least), then
    optionally the arguments of a data row, e.g. `Ns.Tests.T.Parses(input: "a b")`."""
    head = name.split("(", 1)[0]
    parts = head.split(".")
    return len(parts) >= 2 and all(parts) and not re.search(r"\s", head)




def _keys(node: Node) -> dict[object, tuple[Node, Node]]:
    """key -> (key node, value node) of a mapping node, the last of a repeated key (as the
    loader keeps it); keys merged in with `<<` are missing and point at the mapping instead."""
    if not isinstance(node, MappingNode):
        return {}
    return {k.value: (k, v) for k, v in node.value if isinstance(k, ScalarNode)}


def _items(node: Node, count: int) -> list[Node]:
    """The item nodes of a sequence node holding `count` items (else `node` for each)."""
    if isinstance(node, SequenceNode) and len(node.value) == count:
        return list(node.value)
    return [node] * count
