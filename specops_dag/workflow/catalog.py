"""Loads every `workflow_defs/` root into one validated `Catalog`: walks the roots, reads each file
within `yamlfile`'s caps, validates it against its model and collects it, then runs the cross-file
rules of DESIGN §4 (`checks`) before anything runs; `messages` words a model's errors.

Every problem is collected (not just the first) and named by file, YAML path and the fix; the caller
gets one `DefinitionError`. Reading only: nothing here writes a file.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

import yaml
from pydantic import BaseModel, ValidationError

from specops_dag.builtin import BUILTIN_DEFS, BUILTIN_PREFIX
from specops_dag.errors import DefinitionError
from specops_dag.workflow import yamlfile
from specops_dag.workflow.checks import Checks, check_validation
from specops_dag.workflow.messages import format_error, yaml_kind
from specops_dag.workflow.model import (
    ID_PATTERN,
    Phase,
    SkillGraph,
    ValidationConfig,
    ValidationFile,
    Workflow,
)

BUILTIN_REAL = BUILTIN_DEFS.resolve()
VALIDATION_FILE = "validation.yaml"



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
    phases: Mapping[str, Phase]  # a dict, or a snapshot's `SnapshotPhases` read as asked
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

    def phase_ids_of(self, workflow_id: str) -> list[str]:
        """The phases a workflow runs, in order: each node's, every evaluator its review can
        choose (the platforms' too: a snapshot holds each, whichever a delivery records), and
        the evaluator of a phase's sprint contract."""
        phase_ids: list[str] = []
        for node in self.workflows[workflow_id].nodes:
            contract = (self.phases[node.phase].execution.contract
                        if node.phase in self.phases else None)
            for pid in (node.phase, *(node.review.phase_ids if node.review else ()),
                        contract.evaluator if contract else None):
                if pid and pid not in phase_ids:
                    phase_ids.append(pid)
        return phase_ids

    def platforms_of(self, workflow_id: str) -> list[str]:
        """The platforms the workflow tells apart, sorted: those the `when:` of its skill
        bindings name and those its reviews choose an evaluator by."""
        return sorted({p for pid in self.phase_ids_of(workflow_id)
                       for s in self.phases[pid].execution.skills if s.when
                       for p in s.when.platforms}
                      | {p for node in self.workflows[workflow_id].nodes if node.review
                         for p in node.review.platforms})

    def files_of(self, workflow_id: str) -> list[SourceFile]:
        """The workflow file, its phases (review phases too) and their skill files, in order.
        The skill graph is not one of them: a snapshot keeps only the edges between bound skills."""
        phase_ids = self.phase_ids_of(workflow_id)
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


def load_catalog(roots: Iterable[Path], display_base: Path | None = None, *,
                 skill_names: bool = False) -> Catalog:
    """Load and check every definition under `roots`; raise `DefinitionError` with all problems.
    `skill_names` adds the rule that a skill names only skills its phase binds
    (`Checks.check_skill_names`): `specops check` and `new` apply it to the definitions a
    delivery is frozen from, never to a snapshot frozen before the rule."""
    loader, _, catalog = _load(roots, display_base, skill_names)
    if loader.problems:
        raise DefinitionError(loader.problems)
    return catalog


def _load(roots: Iterable[Path], display_base: Path | None,
          skill_names: bool) -> tuple[_Loader, list[str], Catalog]:
    """Every definition under `roots` read and checked: (the loader with all its problems, the
    problems of files that did not load, the catalog of what did)."""
    loader = _Loader(display_base)
    for root in roots:
        loader.load_root(Path(root))
    unread = list(loader.problems)  # files that did not load: named by the file itself
    loader.check(skill_names)
    return loader, unread, Catalog(loader.workflows, loader.phases,
                                   SkillGraph(edges=loader.edges), loader.sources,
                                   loader.validation)


def load_catalog_for(roots: Iterable[Path], workflow: str, display_base: Path | None = None, *,
                     skill_names: bool = False) -> tuple[Catalog, list[str]]:
    """`load_catalog` for creating a delivery of `workflow`: a broken file it does not use (another
    workflow, a phase or skill only others bind) does not stop it, and its problems come back
    second, for a warning. The problems of what it uses — its file, its phases, their skills,
    validation.yaml, skills/graph.yaml — raise `DefinitionError`; the cross-file rules are run
    again over just those, so another workflow's problem never counts as its own."""
    roots = [Path(r) for r in roots]
    loader, unread, catalog = _load(roots, display_base, skill_names)
    if not loader.problems:
        return catalog, []
    used = loader.files_used(roots, workflow)
    mine = [p for p in unread if p.partition(": ")[0] in used]
    if workflow in loader.workflows:
        mine += [p for p in loader.recheck(workflow, skill_names) if p not in mine]
    if mine:
        raise DefinitionError(mine)
    return catalog, list(loader.problems)


def load_snapshot(root: Path, display_base: Path | None = None) -> Catalog:
    """A delivery's frozen snapshot folder, read as far as it is used: its workflow,
    validation.yaml and skill graph now, each phase (with that phase's own rules) the first time
    it is asked for. The snapshot was checked whole when it was frozen, and the code location a
    run executes loads it whole again (`load_catalog`); a step, a hook or a dry-run reads only
    the phases it names, so its cost does not grow with the workflow. Raises `DefinitionError`
    here for the eager files, from `catalog.phases[...]` for a phase.

    A process that runs one step after another (Dagster's run worker) gets the catalog it read
    before as long as no file of the folder changed (`snapshot_stamp`): parsing a 200-node
    workflow's YAML at every step cost more than the rest of the step's bookkeeping together."""
    key = (os.path.realpath(root), str(display_base), snapshot_stamp(root))
    catalog = SNAPSHOTS.get(key)
    if catalog is not None:
        return catalog
    loader = _Loader(display_base)
    loader.load_root(root, phases=False)
    if loader.problems:
        raise DefinitionError(loader.problems)
    catalog = Catalog(loader.workflows, SnapshotPhases(loader, root),
                      SkillGraph(edges=loader.edges), loader.sources, loader.validation)
    with SNAPSHOTS_LOCK:  # a fan-out's task threads read snapshots too
        while len(SNAPSHOTS) >= MAX_SNAPSHOTS:
            SNAPSHOTS.pop(next(iter(SNAPSHOTS)))
        SNAPSHOTS[key] = catalog
    return catalog


# Snapshot catalogs this process has read, by folder, display base and `snapshot_stamp`; the
# definitions in them are frozen models and nothing changes a Catalog once it is made.
SNAPSHOTS: dict[tuple, Catalog] = {}
SNAPSHOTS_LOCK = threading.Lock()
MAX_SNAPSHOTS = 8


def snapshot_stamp(root: Path) -> tuple:
    """Every file under `root` with its size, mtime, ctime and inode (git's stat check): an edit,
    a replacement or a new or removed file changes it."""
    stamp = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            st = os.stat(os.path.join(folder, name))
            stamp.append((folder, name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    return tuple(stamp)


class SnapshotPhases(Mapping[str, Phase]):
    """The phases of a snapshot folder by id, each read and checked on its first lookup; a
    phase whose file is broken raises `DefinitionError` with its problems at every lookup."""

    def __init__(self, loader: _Loader, root: Path) -> None:
        self._loader, self._root = loader, root
        self._lock = threading.RLock()  # a fan-out's task threads look phases up too
        self._files = {p.stem: p.name for p in sorted((root / "phases").glob("*.y*ml"))}
        self._checks = Checks(loader.problems, loader.display, loader.workflows, self,
                              loader.sources, loader.edges, loader.edge_files)

    def __getitem__(self, phase_id: str) -> Phase:
        loaded = self._loader.phases
        if phase_id not in loaded:
            if phase_id not in self._files:
                raise KeyError(phase_id)
            with self._lock:
                if phase_id not in loaded:
                    self._load(phase_id)
        return loaded[phase_id]

    def _load(self, phase_id: str) -> None:
        loader = self._loader
        try:
            loader.load_definition(self._root, f"phases/{self._files[phase_id]}", "phase", Phase)
            if phase_id in loader.phases:  # a contract's evaluator is looked up (read) from here
                self._checks.check_phase(loader.sources[("phase", phase_id)],
                                         loader.phases[phase_id])
        except DefinitionError:
            loader.phases.pop(phase_id, None)
            raise
        if loader.problems:
            problems = list(loader.problems)
            loader.problems.clear()
            loader.phases.pop(phase_id, None)
            raise DefinitionError(problems)

    def __contains__(self, phase_id: object) -> bool:
        return phase_id in self._files

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def load_layout(harness_root: Path) -> ValidationConfig:
    """Only `workflow_defs/validation.yaml` of a harness root (for `specops validate`); the
    default layout when there is none. Raises `DefinitionError` with its problems."""
    loader = _Loader(harness_root)
    if (harness_root / "workflow_defs" / VALIDATION_FILE).is_file():
        loader.load_validation(harness_root / "workflow_defs")
    if loader.problems:
        raise DefinitionError(loader.problems)
    return loader.validation


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

    def load_root(self, root: Path, phases: bool = True) -> None:
        """Every definition under `root`; without `phases`, all but the phase files."""
        kinds = [("workflow", "workflows", Workflow)] + ([("phase", "phases", Phase)] if phases
                                                         else [])
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
        check_validation(self.problems, f"{src.display}: validation", parsed.validation)
        self.validation = parsed.validation
        self.sources[("validation", "validation")] = src

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

    def check(self, skill_names: bool = False) -> None:
        checks = Checks(self.problems, self.display, self.workflows, self.phases, self.sources,
                        self.edges, self.edge_files)
        checks.run()
        if skill_names:
            checks.check_skill_names()

    def phases_used(self, workflow: str) -> dict[str, Phase]:
        catalog = Catalog(self.workflows, self.phases, SkillGraph(edges=[]), self.sources)
        return {pid: self.phases[pid] for pid in catalog.phase_ids_of(workflow)
                if pid in self.phases}

    def files_used(self, roots: list[Path], workflow: str) -> set[str]:
        """How messages name every file `workflow` uses or would use, loaded or not: its own,
        its phases' (by id), their skill files, each root's validation.yaml and skill graph."""
        rels = [VALIDATION_FILE, "skills/graph.yaml", f"workflows/{workflow}.yaml",
                f"workflows/{workflow}.yml"]
        phases = self.phases_used(workflow) if workflow in self.workflows else {}
        if workflow in self.workflows:  # the ids it names, also of phases that did not load
            nodes = self.workflows[workflow].nodes
            ids = {n.phase for n in nodes} | set(phases) | {
                pid for n in nodes if n.review for pid in n.review.phase_ids} | {
                p.execution.contract.evaluator for p in phases.values() if p.execution.contract}
            rels += [f"phases/{pid}{ext}" for pid in ids for ext in (".yaml", ".yml")]
        used = {self.display(root, rel) for root in roots for rel in rels}
        for pid, phase in phases.items():
            root = self.sources[("phase", pid)].root
            used |= {self.display(root, skill.path) for skill in phase.execution.skills}
        return used

    def recheck(self, workflow: str, skill_names: bool) -> list[str]:
        """The cross-file rules over `workflow`, its phases and the skill-graph edges from their
        skills only (what its snapshot keeps); every other definition is known but not checked."""
        phases = self.phases_used(workflow)
        bound = {s.id for phase in phases.values() for s in phase.execution.skills}
        kept = [(e, at) for e, at in zip(self.edges, self.edge_files, strict=True)
                if e.source in bound]
        problems: list[str] = []
        wf = self.workflows[workflow]
        checks = Checks(problems, self.display, {workflow: wf}, self.phases, dict(self.sources),
                        [e for e, _ in kept], [at for _, at in kept])
        for pid, phase in phases.items():  # every phase is looked up, only these are checked
            checks.check_phase(self.sources[("phase", pid)], phase)
        checks.check_workflow(self.sources[("workflow", workflow)], wf)
        checks.check_graph()
        if skill_names:
            replace(checks, phases=phases).check_skill_names()
        return problems
