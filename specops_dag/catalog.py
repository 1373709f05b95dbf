"""Loads every `workflow_defs/` root into one validated `Catalog` and checks the cross-file rules of
DESIGN §4 before anything runs.

Every problem is collected (not just the first) and named by file, YAML path and the fix; the caller
gets one `DefinitionError`. Reading only: nothing here writes a file.
"""

from __future__ import annotations

import heapq
import os
import re
import types
import typing
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from . import yamlfile
from .definition import (
    ID_PATTERN,
    Node,
    Phase,
    SkillGraph,
    ValidationConfig,
    ValidationFile,
    Workflow,
)
from .errors import DefinitionError
from .prompt import MAX_ATTEMPTS
from .reading import BUILTIN_DEFS, BUILTIN_PREFIX

K = TypeVar("K", bound=Hashable)

BUILTIN_REAL = BUILTIN_DEFS.resolve()
VALIDATION_FILE = "validation.yaml"
ANALYZER_FRAMEWORKS = ("netstandard2.0", "net8.0")


@dataclass(frozen=True)
class SourceFile:
    """A definition file (workflow, phase, skill, skill-graph); `rel` is relative to its root."""

    kind: str
    id: str
    root: Path
    rel: str
    display: str

    @property
    def path(self) -> Path:
        return self.root / self.rel


@dataclass(frozen=True)
class Catalog:
    workflows: dict[str, Workflow]
    phases: dict[str, Phase]
    graph: SkillGraph
    sources: dict[tuple[str, str], SourceFile] = field(default_factory=dict)
    validation: ValidationConfig = ValidationConfig()  # the harness root's validation.yaml

    def validation_for(self, phase_id: str) -> ValidationConfig:
        """The layout a phase validates with: validation.yaml, then the phase's own keys."""
        own = self.phases[phase_id].validation
        if isinstance(own, str):
            return self.validation.model_copy(update={"mode": own})
        return self.validation.model_copy(update={k: getattr(own, k) for k in own.model_fields_set})

    def source(self, kind: str, ident: str) -> SourceFile:
        return self.sources[(kind, ident)]

    def phase_for(self, workflow_id: str, node_id: str) -> Phase:
        node = next(n for n in self.workflows[workflow_id].nodes if n.id == node_id)
        return self.phases[node.phase]

    def files_of(self, workflow_id: str) -> list[SourceFile]:
        """The workflow file, its phases (review phases too) and their skill files, in order.
        The skill graph is not one of them: a snapshot keeps only the edges between bound skills."""
        wf = self.workflows[workflow_id]
        phase_ids: list[str] = []
        for node in wf.nodes:
            for pid in (node.phase, node.review.phase if node.review else None):
                if pid and pid not in phase_ids:
                    phase_ids.append(pid)
        files = [self.source("workflow", workflow_id)]
        files += [self.source("phase", pid) for pid in phase_ids]
        if ("validation", "validation") in self.sources:
            files.append(self.source("validation", "validation"))
        skill_ids: list[str] = []
        for pid in phase_ids:
            skill_ids += [s.id for s in self.phases[pid].execution.skills if s.id not in skill_ids]
        return files + [self.source("skill", sid) for sid in skill_ids]


def definition_roots(harness_root: Path | None) -> list[Path]:
    """The built-in `workflow_defs/` plus the harness root's own, each once."""
    roots = [BUILTIN_DEFS]
    if harness_root is not None:
        own = harness_root / "workflow_defs"
        if own.is_dir() and own.resolve() != BUILTIN_DEFS.resolve():
            roots.append(own)
    return roots


def load_catalog(roots: Iterable[Path], display_base: Path | None = None) -> Catalog:
    """Load and check every definition under `roots`; raise `DefinitionError` with all problems."""
    loader = _Loader(display_base)
    for root in roots:
        loader.load_root(Path(root))
    loader.check()
    if loader.problems:
        raise DefinitionError(loader.problems)
    return Catalog(loader.workflows, loader.phases, SkillGraph(edges=loader.edges), loader.sources,
                   loader.validation)


def load_layout(harness_root: Path) -> ValidationConfig:
    """Only `workflow_defs/validation.yaml` of a harness root (for `specops validate`); the
    default layout when there is none. Raises `DefinitionError` with its problems."""
    loader = _Loader(harness_root)
    if (harness_root / "workflow_defs" / VALIDATION_FILE).is_file():
        loader.load_validation(harness_root / "workflow_defs")
    if loader.problems:
        raise DefinitionError(loader.problems)
    return loader.validation


def yaml_path(loc: Iterable[object]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def id_fix(root: Path, rel: str, ident: str, stem: str) -> str:
    """How to make a definition's id and file name agree, offering only fixes that can work."""
    fixes = []
    if not (root / rel).with_name(f"{ident}.yaml").exists():
        fixes.append(f"rename the file to `{ident}.yaml`")
    if re.fullmatch(ID_PATTERN, stem):
        fixes.append(f"{'or ' if fixes else ''}change the id to `{stem}`")
    if fixes:
        return " ".join(fixes)
    return (f"`{ident}.yaml` already exists and `{stem}` is not a valid id; remove this file or "
            "give it a new id and a file name to match")


class _Loader:
    def __init__(self, display_base: Path | None) -> None:
        self.display_base = display_base.resolve() if display_base else None
        self.problems: list[str] = []
        self.workflows: dict[str, Workflow] = {}
        self.phases: dict[str, Phase] = {}
        self.edges: list = []
        self.sources: dict[tuple[str, str], SourceFile] = {}
        self.edge_files: list[tuple[SourceFile, int]] = []
        self.resolved: dict[Path, Path] = {}
        self.skills_seen: dict[tuple[Path, str], tuple[bool, Path, str]] = {}
        self.validation = ValidationConfig()

    def display(self, root: Path, rel: str) -> str:
        """How messages name a file: `built-in:workflow_defs/…`, relative to the harness root,
        or absolute. Roots are resolved once: hundreds of files share a few roots."""
        if root not in self.resolved:
            self.resolved[root] = root.resolve()
        real = self.resolved[root]
        if real == BUILTIN_REAL:
            return f"{BUILTIN_PREFIX}{rel}"
        full = real / rel
        if ".." in rel:  # a symlinked definition is named by its link, never its target
            full = Path(os.path.normpath(full))
        if self.display_base and full.is_relative_to(self.display_base):
            return str(full.relative_to(self.display_base))
        return str(full)

    def load_root(self, root: Path) -> None:
        kinds = (("workflow", "workflows", Workflow), ("phase", "phases", Phase))
        for kind, folder, model in kinds:
            for path in sorted((root / folder).glob("*.y*ml")):
                self.load_definition(root, f"{folder}/{path.name}", kind, model)
        if (root / VALIDATION_FILE).is_file():
            self.load_validation(root)
        graph = root / "skills" / "graph.yaml"
        if graph.is_file():
            rel = "skills/graph.yaml"
            src = SourceFile("skill-graph", "graph", root, rel, self.display(root, rel))
            data = self.read_yaml(src)
            if data is not None:
                parsed = self.validate(src, SkillGraph, data)
                if parsed is not None:
                    self.edges += parsed.edges
                    self.edge_files += [(src, i) for i in range(len(parsed.edges))]
                    self.sources.setdefault(("skill-graph", "graph"), src)

    def read_yaml(self, src: SourceFile) -> object | None:
        try:  # bounded: file size, nesting depth, nodes after alias expansion (yamlfile's caps)
            text = yamlfile.read_text(src.path)
            try:
                data = yamlfile.safe_load(text)
            except yaml.YAMLError:  # re-read with the pure loader: its messages name the fix
                data = yamlfile.safe_load(text, yaml.SafeLoader)
        except yamlfile.LimitError as err:
            self.problems.append(f"{src.display}: (file): {err}")
            return None
        except RecursionError:  # not expected past the depth cap; never a traceback
            self.problems.append(f"{src.display}: (file): {yamlfile.TooDeep()}")
            return None
        except UnicodeDecodeError:
            self.problems.append(f"{src.display}: not UTF-8 text; save the file as UTF-8")
            return None
        except OSError as err:  # a folder, a symlink loop, unreadable
            self.problems.append(f"{src.display}: cannot be read ({err.strerror}); make it a "
                                 "readable YAML file or remove it")
            return None
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            reason = getattr(err, "problem", None) or str(err)
            self.problems.append(f"{src.display}: invalid YAML{where}: {reason}; fix the syntax")
            return None
        if not isinstance(data, dict):
            got = "an empty file" if data is None else yaml_kind(data)
            self.problems.append(f"{src.display}: (top level): expected a mapping of keys, "
                                 f"got {got}; start the file with `kind: ...`")
            return None
        return data

    def validate(self, src: SourceFile, model: type[BaseModel], data: dict) -> BaseModel | None:
        try:
            return model.model_validate(data)
        except ValidationError as err:
            for e in err.errors():
                self.problems.append(f"{src.display}: {format_error(model, e)}")
            return None

    def load_validation(self, root: Path) -> None:
        src = SourceFile("validation", "validation", root, VALIDATION_FILE,
                         self.display(root, VALIDATION_FILE))
        data = self.read_yaml(src)
        parsed = self.validate(src, ValidationFile, data) if data is not None else None
        if not isinstance(parsed, ValidationFile):
            return
        if ("validation", "validation") in self.sources:
            first = self.sources[("validation", "validation")].display
            self.problems.append(f"{src.display}: (file): a second validation.yaml (first: "
                                 f"{first}); keep the layout in one of them")
            return
        if "mode" in parsed.validation.model_fields_set:
            self.problems.append(f"{src.display}: validation.mode: the mode is chosen per phase "
                                 "(`validation: full | docs-only | none` in the phase); remove "
                                 "it here")
        self.check_validation(f"{src.display}: validation", parsed.validation)
        self.validation = parsed.validation
        self.sources[("validation", "validation")] = src

    def check_validation(self, where: str, cfg: ValidationConfig) -> None:
        """The layout keys a model cannot check alone: paths, globs, frameworks, configuration."""
        p = self.problems
        for i, rel in enumerate(cfg.build):
            problem = relative_path_problem(rel) if rel.strip() else "is empty"
            if problem is None and not rel.lower().endswith((".sln", ".csproj")):
                problem = "is not a solution or project"
            if problem:
                p.append(f"{where}.build[{i}]: `{rel}` {problem}; name a .sln or .csproj by its "
                         "path relative to the repository root, e.g. `App.sln`")
        for i, glob in enumerate(cfg.exclude):
            problem = relative_path_problem(glob) if glob.strip() else "is empty"
            if problem:
                p.append(f"{where}.exclude[{i}]: `{glob}` {problem}; use a glob relative to the "
                         "repository root, e.g. `docs/snippets/**`")
        for i, tfm in enumerate(cfg.analyzer_frameworks):
            if tfm.lower() not in ANALYZER_FRAMEWORKS:
                p.append(f"{where}.analyzer_frameworks[{i}]: `{tfm}` is not a framework Roslyn "
                         f"loads analyzers from; use one of {', '.join(ANALYZER_FRAMEWORKS)}")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,63}", cfg.configuration):
            p.append(f"{where}.configuration: `{cfg.configuration}` is not an MSBuild "
                     "configuration name; use letters, digits, `_`, `.`, `-`, e.g. `Release`")

    def load_definition(self, root: Path, rel: str, kind: str, model: type[BaseModel]) -> None:
        stem = PurePosixPath(rel).stem
        src = SourceFile(kind, stem, root, rel, self.display(root, rel))
        data = self.read_yaml(src)
        if data is None:
            return
        if data.get("kind") != kind:
            self.problems.append(f"{src.display}: kind: expected `{kind}` in {rel.split('/')[0]}/, "
                                 f"got `{data.get('kind')}`; move the file or fix `kind`")
            return
        parsed = self.validate(src, model, data)
        if parsed is None:
            return
        if parsed.id != stem:
            self.problems.append(f"{src.display}: id: `{parsed.id}` does not match the file "
                                 f"name `{stem}`; {id_fix(root, rel, parsed.id, stem)}")
            return
        table = self.workflows if kind == "workflow" else self.phases
        if parsed.id in table:
            first = self.sources[(kind, parsed.id)].display
            self.problems.append(f"{src.display}: id: duplicate {kind} id `{parsed.id}` (also "
                                 f"defined in {first}); rename one of them")
            return
        table[parsed.id] = parsed
        self.sources[(kind, parsed.id)] = src

    def check(self) -> None:
        for pid, phase in self.phases.items():
            self.check_phase(self.sources[("phase", pid)], phase)
        for wid, wf in self.workflows.items():
            self.check_workflow(self.sources[("workflow", wid)], wf)
        self.check_graph()

    def check_phase(self, src: SourceFile, phase: Phase) -> None:
        p = self.problems
        skills = phase.execution.skills
        if phase.execution.executor.kind == "command":
            if skills:
                p.append(f"{src.display}: execution.skills: a command phase loads no skills; "
                         "remove them or use `executor: {kind: codex}`")
        else:
            entries = [i for i, s in enumerate(skills) if s.load == "entry"]
            if not entries:
                p.append(f"{src.display}: execution.skills: no entry skill; add exactly one skill "
                         "with `load: entry` (the phase's main skill)")
            for i in entries[1:]:
                p.append(f"{src.display}: execution.skills[{i}].load: second entry skill "
                         f"`{skills[i].id}` (first: `{skills[entries[0]].id}` at "
                         f"execution.skills[{entries[0]}]); a phase has exactly one entry skill, "
                         "make the others `load: on-demand`")
        for i, skill in enumerate(skills):
            self.bind_skill(src, i, skill.id, skill.path)
        self.check_context_files(f"{src.display}: context_files", phase.context_files)
        if not isinstance(phase.validation, str):
            self.check_validation(f"{src.display}: validation", phase.validation)
        execution = phase.execution
        if execution.executor.kind == "evaluator":
            if not execution.criteria:
                p.append(f"{src.display}: execution.criteria: an evaluator phase needs at least "
                         "one criterion `{id, description, threshold}` to score against")
            if execution.sandbox not in (None, "read-only"):
                p.append(f"{src.display}: execution.sandbox: an evaluator runs `read-only`, not "
                         f"`{execution.sandbox}`; remove the key or set `read-only`")
        elif execution.criteria:
            p.append(f"{src.display}: execution.criteria: only an evaluator phase scores "
                     f"criteria, this one runs `{execution.executor.kind}`; remove them")
        if execution.qa is not None and execution.executor.kind != "evaluator":
            p.append(f"{src.display}: execution.qa: only an evaluator phase runs QA against the "
                     f"application, this one runs `{execution.executor.kind}`; remove it or use "
                     "`executor: {kind: evaluator}`")
        elif execution.qa is not None:
            self.check_qa(src.display, phase)
        seen: dict[str, int] = {}
        for i, art in enumerate(phase.output.artifacts):
            where = f"{src.display}: output.artifacts[{i}]"
            if art.id in seen:
                p.append(f"{where}.id: duplicate artifact id `{art.id}` (first at "
                         f"output.artifacts[{seen[art.id]}]); give each artifact a unique id")
            seen.setdefault(art.id, i)
            problem = relative_path_problem(art.path)
            if problem:
                p.append(f"{where}.path: `{art.path}` {problem}; use a path relative to the "
                         "node folder phases/<delivery>/<node>/")

    def check_qa(self, d: str, phase: Phase) -> None:
        """The `qa:` block of an evaluator phase: a project inside the repository, deadlines
        that fit the phase's, probe and page paths from the base URL, ids unique (they name
        the evidence files)."""
        p, qa, timeout = self.problems, phase.execution.qa, phase.execution.timeout_s
        assert qa is not None
        where = f"{d}: execution.qa"
        if qa.project is not None:
            problem = relative_path_problem(qa.project)
            if problem in ("is absolute", "escapes the phase folder"):
                what = "is absolute" if problem == "is absolute" else "leaves the target repository"
                p.append(f"{where}.project: `{qa.project}` {what}; use a path relative to the "
                         "target repository")
            elif not qa.project.endswith(".csproj"):
                p.append(f"{where}.project: `{qa.project}` is not a .csproj file; name the "
                         "project `dotnet run` starts, e.g. src/Api/Api.csproj")
        if qa.deadline_s >= timeout:
            p.append(f"{where}.deadline_s: {qa.deadline_s} s does not fit in the phase's "
                     f"timeout_s ({timeout} s), which QA and the evaluator's session share; "
                     "lower qa.deadline_s or raise timeout_s")
        if qa.startup_timeout_s >= qa.deadline_s:
            p.append(f"{where}.startup_timeout_s: {qa.startup_timeout_s} s leaves no time to "
                     f"probe within qa.deadline_s ({qa.deadline_s} s); lower it")
        seen: dict[str, str] = {}
        for kind, items in (("probes", qa.probes), ("browser", qa.browser)):
            for i, item in enumerate(items):
                if not item.path.startswith("/"):
                    p.append(f"{where}.{kind}[{i}].path: `{item.path}` does not start with `/`; "
                             "give a path from the application's base URL, e.g. /health")
                if item.id in seen:
                    p.append(f"{where}.{kind}[{i}].id: duplicate QA id `{item.id}` (first at "
                             f"execution.qa.{seen[item.id]}); give each probe and page its own id")
                seen.setdefault(item.id, f"{kind}[{i}]")

    def check_context_files(self, where: str, paths: list[str]) -> None:
        """Context paths are read from the target repository: relative, inside it, a file."""
        for i, rel in enumerate(paths):
            problem = relative_path_problem(rel) if rel.strip() else "is empty"
            if rel.startswith("~") or problem == "is absolute":
                problem = "is absolute; use a path relative to the target repository"
            elif problem == "escapes the phase folder":
                problem = "leaves the target repository; use a path inside it"
            elif problem is not None:
                problem = f"{problem}; name a file of the target repository or remove the entry"
            if problem:
                self.problems.append(f"{where}[{i}]: `{rel}` {problem}")

    def bind_skill(self, src: SourceFile, index: int, skill_id: str, rel: str) -> None:
        where = f"{src.display}: execution.skills[{index}].path"
        problem = relative_path_problem(rel)
        if problem:
            self.problems.append(f"{where}: `{rel}` {problem}; use a path under skills/ of the "
                                 "same workflow_defs folder")
            return
        is_file, real, shown = self.skill_file(src.root, rel)
        if not is_file:
            self.problems.append(f"{where}: skill file not found: {shown}; "
                                 "create it or fix the path")
            return
        known = self.sources.get(("skill", skill_id))
        if known and self.skill_file(known.root, known.rel)[1] != real:
            self.problems.append(f"{where}: skill `{skill_id}` is bound to {known.display} "
                                 f"elsewhere; one skill id names one file, rename one of them")
            return
        self.sources.setdefault(("skill", skill_id), SourceFile(
            "skill", skill_id, src.root, rel, shown))

    def skill_file(self, root: Path, rel: str) -> tuple[bool, Path, str]:
        """(is a file, real path, display) of a skill path; hundreds of phases share a few."""
        if (root, rel) not in self.skills_seen:
            path = root / rel
            self.skills_seen[(root, rel)] = (path.is_file(), path.resolve(),
                                             self.display(root, rel))
        return self.skills_seen[(root, rel)]

    def check_workflow(self, src: SourceFile, wf: Workflow) -> None:
        p, d = self.problems, src.display
        index: dict[str, int] = {}
        for i, node in enumerate(wf.nodes):
            if node.id in index:
                p.append(f"{d}: nodes[{i}].id: duplicate node id `{node.id}` (first at "
                         f"nodes[{index[node.id]}]); give each node a unique id")
            else:
                index[node.id] = i
        known = ", ".join(index)
        for i, node in enumerate(wf.nodes):
            for j, need in enumerate(node.needs):
                if need not in index:
                    p.append(f"{d}: nodes[{i}].needs[{j}]: unknown node `{need}` (known: {known})")
            self.check_context_files(f"{d}: nodes[{i}].context_files", node.context_files)
            if node.phase not in self.phases:
                p.append(f"{d}: nodes[{i}].phase: unknown phase `{node.phase}` (known: "
                         f"{', '.join(sorted(self.phases))}); add workflow_defs/phases/"
                         f"{node.phase}.yaml or fix the id")
            elif self.phases[node.phase].execution.executor.kind == "evaluator":
                p.append(f"{d}: nodes[{i}].phase: `{node.phase}` is an evaluator phase; an "
                         "evaluator judges a generator node: use `review: {phase: "
                         f"{node.phase}, max_rounds: N}}` on that node instead")
            if node.review:
                rp = self.phases.get(node.review.phase)
                if rp is None or rp.execution.executor.kind != "evaluator":
                    p.append(f"{d}: nodes[{i}].review.phase: `{node.review.phase}` is not an "
                             "evaluator phase; name a phase with `executor: {kind: evaluator}`")
                if node.review.max_rounds > MAX_ATTEMPTS:  # a round is one of the step's calls
                    p.append(f"{d}: nodes[{i}].review.max_rounds: {node.review.max_rounds} rounds "
                             f"cannot run: each round is one of the step's {MAX_ATTEMPTS} agent "
                             f"calls; use max_rounds ≤ {MAX_ATTEMPTS}")
        cycle = find_cycle({n.id: n.needs for n in wf.nodes})
        if cycle:
            p.append(f"{d}: nodes: cycle {' -> '.join(cycle)}; remove one of these needs")
            return
        ancestors = transitive_needs(wf.nodes)
        for i, node in enumerate(wf.nodes):
            if node.id in ancestors and node.phase in self.phases:
                self.check_inputs(d, wf, i, node, ancestors[node.id])
        for name, ref in wf.outputs.items():
            self.check_output_ref(f"{d}: outputs.{name}", wf, ref.node, ref.output)

    def check_inputs(self, d: str, wf: Workflow, i: int, node: Node, upstream: set[str]) -> None:
        p = self.problems
        ports = self.phases[node.phase].input.ports
        for port in ports:
            if port not in node.inputs:
                p.append(f"{d}: nodes[{i}].inputs: missing input `{port}` required by phase "
                         f"`{node.phase}`; add `{port}: {{node: <upstream>, output: <port>}}`")
        for port, ref in node.inputs.items():
            where = f"{d}: nodes[{i}].inputs.{port}"
            if port not in ports:
                p.append(f"{where}: phase `{node.phase}` has no input port `{port}` (has: "
                         f"{', '.join(ports) or 'none'}); remove it or declare it in the phase")
                continue
            want = ports[port].contract
            if ref.input is not None:
                if ref.input not in wf.inputs:
                    p.append(f"{where}.input: unknown workflow input `{ref.input}` (declared: "
                             f"{', '.join(wf.inputs) or 'none'}); declare it under `inputs:`")
                elif wf.inputs[ref.input].contract != want:
                    p.append(f"{where}: contract mismatch: workflow input `{ref.input}` is "
                             f"`{wf.inputs[ref.input].contract}`, phase `{node.phase}` port "
                             f"`{port}` expects `{want}`; make the contracts match")
                continue
            if ref.node not in upstream and any(n.id == ref.node for n in wf.nodes):
                p.append(f"{where}.node: `{ref.node}` is not upstream of `{node.id}` (upstream: "
                         f"{', '.join(sorted(upstream)) or 'none'}); add `{ref.node}` to "
                         f"nodes[{i}].needs or take the input from an upstream node")
                continue
            got = self.check_output_ref(where, wf, ref.node, ref.output,
                                        fix="name an upstream node of this workflow")
            if got is not None and got != want:
                p.append(f"{where}: contract mismatch: node `{ref.node}` output `{ref.output}` is "
                         f"`{got}`, phase `{node.phase}` port `{port}` expects `{want}`; make the "
                         "contracts match")

    def check_output_ref(self, where: str, wf: Workflow, node_id: str, port: str,
                         fix: str = "") -> str | None:
        """The contract of `node_id`'s output `port`; None (and a problem) if there is none."""
        node = next((n for n in wf.nodes if n.id == node_id), None)
        if node is None:
            self.problems.append(f"{where}.node: unknown node `{node_id}` (known: "
                                 f"{', '.join(n.id for n in wf.nodes)})"
                                 + (f"; {fix}" if fix else ""))
            return None
        phase = self.phases.get(node.phase)
        if phase is None:
            return None
        if port not in phase.output.ports:
            self.problems.append(f"{where}.output: node `{node_id}` (phase `{node.phase}`) has no "
                                 f"output port `{port}` (has: "
                                 f"{', '.join(phase.output.ports) or 'none'})")
            return None
        return phase.output.ports[port].contract

    def check_graph(self) -> None:
        bound = sorted(sid for kind, sid in self.sources if kind == "skill")
        for edge, (src, i) in zip(self.edges, self.edge_files, strict=True):
            for key, sid in (("from", edge.source), ("to", edge.to)):
                if sid not in bound:
                    self.problems.append(
                        f"{src.display}: edges[{i}].{key}: skill `{sid}` is not bound by any phase "
                        f"(bound: {', '.join(bound) or 'none'}); bind it in a phase's "
                        "execution.skills or remove the edge")


def relative_path_problem(rel: str) -> str | None:
    """Why `rel` is not a safe path relative to a folder, or None."""
    if rel.startswith(("/", "\\")) or (len(rel) > 1 and rel[1] == ":"):
        return "is absolute"
    parts = PurePosixPath(rel.replace("\\", "/")).parts
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return "escapes the phase folder"
    return None if depth > 0 else "names no file"


def find_cycle(graph: Mapping[K, Iterable[K]]) -> list[K] | None:
    """The first cycle of a directed graph (node → its edges; edges to nodes outside the graph
    are ignored), as nodes ending where they start, or None. Used for `needs` and for the
    .NET ProjectReference graph. Depth-first without recursion: any size of graph."""
    color: dict[K, int] = {}  # 1 = on the current path, 2 = done
    for start in graph:
        if start in color:
            continue
        color[start] = 1
        path, edges = [start], [iter(graph.get(start, ()))]
        while edges:
            for nxt in edges[-1]:
                if nxt not in graph:
                    continue
                if color.get(nxt) == 1:
                    return path[path.index(nxt):] + [nxt]
                if nxt not in color:
                    color[nxt] = 1
                    path.append(nxt)
                    edges.append(iter(graph.get(nxt, ())))
                    break
            else:
                color[path.pop()] = 2
                edges.pop()
    return None


def topological_order(nodes: list[Node]) -> list[Node]:
    """Nodes ordered so every node comes after its needs; ties keep the file order (of the ready
    nodes, the first in the file goes next). Needs naming no node are ignored; a node on a cycle
    raises ValueError."""
    index = {n.id: i for i, n in enumerate(nodes)}
    needs = [{x for x in n.needs if x in index} for n in nodes]
    waiting = [len(known) for known in needs]
    dependents: dict[str, list[int]] = {}
    for i, known in enumerate(needs):
        for x in known:
            dependents.setdefault(x, []).append(i)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    out: list[Node] = []
    while ready:
        node = nodes[heapq.heappop(ready)]
        out.append(node)
        for i in dependents.get(node.id, ()):
            waiting[i] -= 1
            if waiting[i] == 0:
                heapq.heappush(ready, i)
    if len(out) != len(nodes):
        raise ValueError(f"needs cycle among {sorted({n.id for n in nodes} - {n.id for n in out})}")
    return out


def transitive_needs(nodes: list[Node]) -> dict[str, set[str]]:
    """node id → every node it (transitively) needs. Assumes no cycle."""
    memo: dict[str, set[str]] = {}
    for node in topological_order(nodes):
        known = [x for x in node.needs if x in memo]
        memo[node.id] = set(known).union(*(memo[x] for x in known))
    return memo


def format_error(model: type[BaseModel], err: dict) -> str:
    """One pydantic error as `<yaml path>: <what> ; <fix>`."""
    loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    where = yaml_path(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        allowed = allowed_keys(model, loc[:-1])
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"{where}: unknown key `{loc[-1]}`; remove it or fix the spelling{hint}"
    if kind == "missing":
        return f"{where}: missing required key `{loc[-1]}`; add it"
    msg = err["msg"].removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        msg = (f"`{err['input']}` is not a valid id; use lowercase letters, digits, `-` and `_`, "
               "starting with a letter or digit")
    elif kind.endswith(("_type", "_parsing")):  # "Input should be a valid list": say what it was
        msg = f"{msg}, got {yaml_kind(err['input'])}; fix the value"
    return f"{where}: {msg}"


def yaml_kind(value: object) -> str:
    """How a YAML value reads to the person who wrote it."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    shown = str(value) if len(str(value)) <= 40 else str(value)[:37] + "..."
    kind = {bool: "true/false", int: "a number", float: "a number"}.get(type(value), "text")
    return f"{kind} `{shown}`"


def allowed_keys(model: type[BaseModel], loc: list[object]) -> list[str]:
    """The keys the model accepts at `loc` (walking fields, lists and dicts), or [] if unknown."""
    current: object = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel) and isinstance(part, str):
            info = current.model_fields.get(part) or next(
                (f for f in current.model_fields.values() if f.alias == part), None)
            if info is None:
                return []
            current = info.annotation
        elif typing.get_origin(current) in (list, dict):
            current = typing.get_args(current)[-1]
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or name for name, f in current.model_fields.items()]
    return []


def _unwrap(tp: object) -> object:
    while typing.get_origin(tp) in (typing.Union, types.UnionType, typing.Annotated):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = args[0]
    return tp
