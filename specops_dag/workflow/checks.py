"""The cross-file rules of DESIGN §4 over what the catalog read: phases (skills, context files,
QA, artifacts, validation layouts), workflows (nodes, needs, cycles), inputs and their contracts,
skill bindings, skill-graph edges and the skills each skill names. It only appends problems, in
the order found: it reads no YAML and raises nothing."""

from __future__ import annotations

import re
from collections.abc import Callable, Set
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from specops_dag.graph import find_cycle, transitive_needs
from specops_dag.workflow.model import MAX_ATTEMPTS, Node, Phase, ValidationConfig, Workflow
from specops_dag.workflow.tasks import check_fan_out, check_fan_out_node

if TYPE_CHECKING:
    from specops_dag.workflow.catalog import SourceFile

ANALYZER_FRAMEWORKS = ("netstandard2.0", "net8.0")
# A skill's text names another skill by its id in backticks; "the `design` gate" is a gate.
NAMED = re.compile(r"`([a-z0-9][a-z0-9_-]{0,62})`(?!\s+gates?\b)")


@dataclass
class Checks:
    """The rules that need more than one file, run once over every definition loaded: a skill
    bound by a phase is added to `sources` (as `skill`), every problem to `problems`."""

    problems: list[str]
    display: Callable[[Path, str], str]
    workflows: dict[str, Workflow]
    phases: dict[str, Phase]
    sources: dict[tuple[str, str], SourceFile]
    edges: list
    edge_files: list[tuple[SourceFile, int]]
    skills_seen: dict[tuple[Path, str], tuple[bool, Path, str]] = field(default_factory=dict)

    def run(self) -> None:
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
            check_validation(self.problems, f"{src.display}: validation", phase.validation)
        p.extend(check_fan_out(src.display, phase))
        contract = phase.execution.contract
        if contract is not None:
            other = self.phases.get(contract.evaluator)
            if phase.execution.executor.kind != "codex":
                p.append(f"{src.display}: execution.contract: only a `codex` phase negotiates a "
                         "contract; remove it or use `executor: {kind: codex}`")
            elif other is None or other.execution.executor.kind != "evaluator":
                p.append(f"{src.display}: execution.contract.evaluator: `{contract.evaluator}` is "
                         "not an evaluator phase; name a phase with `executor: {kind: "
                         "evaluator}`")
            if phase.validation_mode != "full":
                p.append(f"{src.display}: execution.contract: a contract's tests are proven by "
                         f"the attempt's TRX, which `validation: {phase.validation_mode}` does "
                         "not run; use `validation: full` or remove the contract")
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
        self.sources.setdefault(("skill", skill_id), replace(  # a skill file of the phase's root
            src, kind="skill", id=skill_id, rel=rel, display=shown))

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
                self.check_review(d, i, node)
        needs = {n.id: n.needs for n in wf.nodes}
        cycle = find_cycle(needs)
        if cycle:
            p.append(f"{d}: nodes: cycle {' -> '.join(cycle)}; remove one of these needs")
            return
        ancestors = transitive_needs(needs)
        for i, node in enumerate(wf.nodes):
            if node.id in ancestors and node.phase in self.phases:
                self.check_inputs(d, wf, i, node, ancestors[node.id])
                p.extend(check_fan_out_node(d, wf, i, self.phases))
        for name, ref in wf.outputs.items():
            self.check_output_ref(f"{d}: outputs.{name}", wf, ref.node, ref.output)

    def check_review(self, d: str, i: int, node: Node) -> None:
        """`review:` names evaluator phases (its platforms' too), in rounds the step's agent
        calls allow, on a node whose next attempt can act on the findings."""
        p, review = self.problems, node.review
        assert review is not None
        for where, pid in [("phase", review.phase),
                           *((f"platforms.{k}", v) for k, v in review.platforms.items())]:
            rp = self.phases.get(pid)
            if rp is None or rp.execution.executor.kind != "evaluator":
                p.append(f"{d}: nodes[{i}].review.{where}: `{pid}` is not an evaluator phase; "
                         "name a phase with `executor: {kind: evaluator}`")
        if review.max_rounds > MAX_ATTEMPTS:  # a round is one of the step's calls
            p.append(f"{d}: nodes[{i}].review.max_rounds: {review.max_rounds} rounds cannot run: "
                     f"each round is one of the step's {MAX_ATTEMPTS} agent calls; use "
                     f"max_rounds ≤ {MAX_ATTEMPTS}")
        phase = self.phases.get(node.phase)
        if phase is not None and phase.execution.fan_out is not None:
            p.append(f"{d}: nodes[{i}].review: phase `{node.phase}` fans out (one session per "
                     "task), and its merged tasks never run again to act on a review; put the "
                     "review on a node that needs this one")

    def check_inputs(self, d: str, wf: Workflow, i: int, node: Node, upstream: Set[str]) -> None:
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

    def check_skill_names(self) -> None:
        """Whenever a phase binds a skill, it binds every skill that one names: in its text (an
        id in backticks) or by a skills/graph.yaml edge from it. A platform skill (`when:`) is
        named in the text only of a skill bound under the same platforms; an edge may lead to it,
        since a snapshot keeps an edge only where its target is bound."""
        known = {sid for kind, sid in self.sources if kind == "skill"}
        edges: dict[str, list[tuple[str, str]]] = {}
        for edge, (src, i) in zip(self.edges, self.edge_files, strict=True):
            edges.setdefault(edge.source, []).append((edge.to, f"{src.display}: edges[{i}].to"))
        texts: dict[str, set[str]] = {}
        for pid, phase in self.phases.items():
            where = f"{self.sources[('phase', pid)].display}: execution.skills"
            binds = {s.id: s.when.platforms if s.when else None for s in phase.execution.skills}
            for x, when in binds.items():
                if ("skill", x) not in self.sources:
                    continue  # its binding is a problem already
                if x not in texts:
                    texts[x] = self.names_in(x, known)
                skill = self.sources[("skill", x)].display
                for y in sorted(texts[x]):
                    if y not in binds:
                        self.problems.append(
                            f"{skill}: names skill `{y}`, but phase `{pid}` binds `{x}` without "
                            f"`{y}` ({where}); bind `{y}` there or stop naming it")
                    elif binds[y] is not None and (when is None or not set(when) <= set(binds[y])):
                        self.problems.append(
                            f"{skill}: names skill `{y}`, but phase `{pid}` binds `{y}` only "
                            f"{platforms_text(binds[y])} and `{x}` "
                            f"{platforms_text(when) if when else 'always'} ({where}); name a "
                            "platform skill only through a skills/graph.yaml edge, or bind "
                            "both under the same platforms")
                for y, edge_at in edges.get(x, []):
                    if y not in binds:
                        self.problems.append(
                            f"{edge_at}: `{x}` loads `{y}`, but phase `{pid}` binds `{x}` "
                            f"without `{y}` ({where}); bind `{y}` there or remove the edge")

    def names_in(self, skill_id: str, known: set[str]) -> set[str]:
        """The other skills `skill_id`'s file names (unreadable: none; loading reports it)."""
        try:
            text = self.sources[("skill", skill_id)].path.read_text("utf-8", errors="replace")
        except OSError:
            return set()
        return {m for m in NAMED.findall(text) if m in known and m != skill_id}

    def check_graph(self) -> None:
        bound = sorted(sid for kind, sid in self.sources if kind == "skill")
        for edge, (src, i) in zip(self.edges, self.edge_files, strict=True):
            for key, sid in (("from", edge.source), ("to", edge.to)):
                if sid not in bound:
                    self.problems.append(
                        f"{src.display}: edges[{i}].{key}: skill `{sid}` is not bound by any phase "
                        f"(bound: {', '.join(bound) or 'none'}); bind it in a phase's "
                        "execution.skills or remove the edge")


def check_validation(problems: list[str], where: str, cfg: ValidationConfig) -> None:
    """The layout keys a model cannot check alone: paths, globs, frameworks, configuration."""
    p = problems
    for i, rel in enumerate(cfg.build):
        problem = relative_path_problem(rel) if rel.strip() else "is empty"
        if problem is None and not rel.lower().endswith((".sln", ".slnx", ".csproj")):
            problem = "is not a solution or project"
        if problem:
            p.append(f"{where}.build[{i}]: `{rel}` {problem}; name a .sln, .slnx or .csproj by its "
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


def platforms_text(platforms: list[str]) -> str:
    return f"`when: {{platforms: [{', '.join(platforms)}]}}`"


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
