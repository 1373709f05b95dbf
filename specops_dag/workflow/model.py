"""Pydantic models of the YAML a workflow author writes: `kind: workflow`, `kind: phase`, skills and
the skill graph (DESIGN §4, seed 004).

Only shapes and single-file rules live here; rules that need several files (unknown `needs`,
cycles, contracts, skill files on disk) are checked by `checks`. No I/O, no dagster.
"""

# No `from __future__ import annotations` here: pydantic would evaluate every field's string
# annotation as it builds each class, a quarter of this module's import (status, dry-run).
from collections.abc import Collection
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from specops_dag.workflow.strict import Strict

ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
# Agent calls per step (seed 001 §6): the step budget, the evaluator's rounds cap and the
# Dagster retry policy of every node asset all derive from it.
MAX_ATTEMPTS = 3
Ident = Annotated[str, Field(pattern=ID_PATTERN)]
GateName = Literal["scope", "requirements", "design", "target-write", "risk", "external-write"]
GATE_NAMES: tuple[str, ...] = GateName.__args__  # type: ignore[attr-defined]


class Contract(Strict):
    contract: Ident


class InputRef(Strict):
    """Where a node input comes from: the workflow's own input, or an upstream output port."""

    input: Ident | None = None
    node: Ident | None = None
    output: Ident | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "InputRef":
        if self.input is not None and (self.node is not None or self.output is not None):
            raise ValueError("give either `input`, or `node` and `output`, not both")
        if self.input is None and (self.node is None or self.output is None):
            raise ValueError("give either `input: <workflow input>` or "
                             "`node: <id>, output: <port>`")
        return self


class OutputRef(Strict):
    node: Ident
    output: Ident


class Gates(Strict):
    """Human confirmation points (seed 004) around a node: `before` it runs, `after` it ends."""

    before: GateName | None = None
    after: GateName | None = None


class Review(Strict):
    """`review: {phase: E, max_rounds: N, platforms: {P: F}}`: the evaluator phase `E` judges the
    node, or `F` for a delivery with platform `P` (the first one listed that it has). `specops
    new` resolves it once for the delivery's platforms and records it in the snapshot."""

    phase: Ident
    max_rounds: int = Field(default=3, ge=1)  # ≤ the step's 3 calls: checked at load (catalog)
    platforms: dict[Ident, Ident] = {}

    def phase_for(self, platforms: Collection[str]) -> str:
        """The evaluator phase for a delivery with these platforms."""
        return next((pid for p, pid in self.platforms.items() if p in platforms), self.phase)

    @property
    def phase_ids(self) -> list[str]:
        """Every evaluator phase it can choose: `phase` first, each once."""
        return list(dict.fromkeys([self.phase, *self.platforms.values()]))


class Node(Strict):
    id: Ident
    phase: Ident
    needs: list[Ident] = []
    inputs: dict[Ident, InputRef] = {}
    gates: Gates = Gates()
    review: Review | None = None
    context_files: list[str] = []


class Budget(Strict):
    """Per phase (its step's sessions) or per workflow (the whole delivery); `usd` is priced
    with the harness root's price table (`delivery.pricing`)."""

    tokens: int | None = Field(default=None, ge=1)
    usd: float | None = Field(default=None, gt=0, strict=True, allow_inf_nan=False)


class Workflow(Strict):
    kind: Literal["workflow"]
    id: Ident
    description: str = ""
    inputs: dict[Ident, Contract] = {}
    gates: Gates = Gates()
    budget: Budget = Budget()  # tokens and USD for the whole delivery
    nodes: list[Node] = Field(min_length=1)
    outputs: dict[Ident, OutputRef] = {}


class Executor(Strict):
    """`codex` and `evaluator` run the agent; `command` runs a deterministic argv (seed 004)."""

    kind: Literal["codex", "evaluator", "command"]
    argv: list[str] | None = None
    timeout_s: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _argv_only_for_commands(self) -> "Executor":
        if self.kind == "command" and not self.argv:
            raise ValueError("a command executor needs `argv`: a non-empty list of strings")
        if self.kind != "command" and self.argv is not None:
            raise ValueError(f"`argv` is only for `kind: command`, not `kind: {self.kind}`")
        return self


class When(Strict):
    platforms: list[str] = Field(min_length=1)


class Skill(Strict):
    id: Ident
    path: str
    load: Literal["entry", "on-demand"]
    required: bool = False
    when: When | None = None


class Criterion(Strict):
    """An evaluator criterion: scored 0-10, it must reach `threshold` (a hard threshold)."""

    id: Ident
    description: str = Field(min_length=1)
    threshold: int = Field(ge=1, le=10)


HttpMethod = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


class QaProbe(Strict):
    """One HTTP request to the running application and what its answer must show."""

    id: Ident
    method: HttpMethod = "GET"
    path: str  # from the application's base URL: starts with `/` (checked at load)
    headers: dict[str, str] = {}
    body: str | None = None  # sent as is; give a Content-Type in `headers`
    status: int = Field(default=200, ge=100, le=599)
    body_contains: list[str] = []


class QaPage(Strict):
    """A page opened in Chromium (through Playwright): screenshot and visible text are saved."""

    id: Ident
    path: str
    status: int | None = Field(default=None, ge=100, le=599)  # of the page's own response
    text_contains: list[str] = []


class Qa(Strict):
    """QA against the running application (seed 003): in a throwaway worktree at the
    generator's work, restore and build (and with `tests`, the whole validation), start
    `project` with `dotnet run` on a free loopback port, then probe it."""

    project: str | None = None  # the .csproj to run; default: the one Microsoft.NET.Sdk.Web project
    tests: bool = False
    startup_timeout_s: int = Field(default=120, ge=1)
    deadline_s: int = Field(default=900, ge=1)  # the whole QA stage, within execution.timeout_s
    env: dict[str, str] = {}  # for the application only (e.g. ASPNETCORE_ENVIRONMENT)
    probes: list[QaProbe] = []
    browser: list[QaPage] = []
    required: bool = False  # a skipped QA (no SDK) blocks the step instead of being reported


class TaskSource(Strict):
    """The task list a fan-out expands: the artifact `artifact` of the upstream node bound to
    this phase's input port `input` (a `kind: task-list` file, see `tasks`)."""

    input: Ident
    artifact: Ident


class SprintContract(Strict):
    """`execution.contract`: before building, the generator writes `contract.md` (what it will
    build, and the tests by name that prove it) and the evaluator phase `evaluator` reviews it
    read-only until it agrees, in at most `max_rounds` rounds; the build is judged against it."""

    evaluator: Ident
    max_rounds: int = Field(default=2, ge=1, le=2)


class FanOut(Strict):
    """One agent session per task of a task list, at most `max_parallel` at a time. That the
    port and the upstream artifact exist is checked at load (`tasks.check_fan_out`)."""

    tasks: TaskSource
    max_parallel: int = Field(default=2, ge=1, le=16)


class Execution(Strict):
    goal: str = Field(min_length=1)
    executor: Executor
    sandbox: Literal["read-only", "workspace-write"] | None = None
    timeout_s: int = Field(default=3600, ge=1)
    idle_timeout_s: int = Field(default=600, ge=1)
    # While one of the agent's commands runs, the idle watchdog waits; this caps each command.
    command_timeout_s: int = Field(default=1800, ge=1)
    # Network inside the agent's sandbox (workspace-write only); off unless a phase says so.
    network: bool = False
    # A session the provider fails (HTTP 5xx, 429, a cut stream, a reconnect loop) is run again
    # after infra_backoff_s, doubling, at most infra_retries times and not past infra_max_s after
    # the first failure; these retries do not count against the agent calls.
    infra_retries: int = Field(default=3, ge=0, le=20)
    infra_backoff_s: float = Field(default=10.0, ge=0, le=600)
    infra_max_s: int = Field(default=900, ge=1)
    skills: list[Skill] = []
    gates: Gates = Gates()
    budget: Budget = Budget()
    expects_product_change: bool = False  # no product change after exit 0 → a failed attempt
    criteria: list[Criterion] = []  # evaluator phases only
    qa: Qa | None = None  # evaluator phases only
    fan_out: FanOut | None = None  # codex phases only: one session per task of a task list
    contract: SprintContract | None = None  # codex phases only: agree what to build first


class Artifact(Strict):
    id: Ident
    path: str = Field(min_length=1)
    required: bool = True


class InputPorts(Strict):
    ports: dict[Ident, Contract] = {}


class Output(Strict):
    ports: dict[Ident, Contract] = {}
    artifacts: list[Artifact] = []


ValidationMode = Literal["full", "docs-only", "none"]
AUDIT_CODES = ("NU1900", "NU1901", "NU1902", "NU1903", "NU1904")


class SdkRule(Strict):
    """With global.json required (the default) the repository pins its SDK there; without it
    (most real repositories have none) the SDK `dotnet --version` selects in the repository
    must still be one the target policy allows."""

    require_global_json: bool = True


class TargetRule(Strict):
    """The target policy (issue 42): which .NET every project targets and which SDK and runtime
    may build and test it. `auto` takes the SDK line global.json's sdk.version pins (8.0 →
    net8.0, 10.0 → net10.0; without a pinned version, net10.0, the current LTS). `specops new`
    freezes the resolved policy in the delivery's snapshot."""

    framework: Literal["auto", "net8.0", "net10.0"] = "auto"
    newer_sdk: bool = True  # a newer SDK may build the target (a 10.0 SDK building net8.0)
    newer_runtime: bool = True  # tests roll forward to a newer runtime when the target's is absent
    origin: str = ""  # set by `specops new` on the frozen policy: where its framework came from


class ValidationConfig(Strict):
    """How `full` validation reads a repository (issue 16): the harness root's
    `workflow_defs/validation.yaml`, overridden key by key by a phase's `validation:` mapping.
    `judge: regressions` compares an attempt with the base tree's own warnings and tests."""

    mode: ValidationMode = "full"
    judge: Literal["absolute", "regressions"] = "absolute"
    sdk: SdkRule = SdkRule()
    target: TargetRule = TargetRule()
    build: list[str] = []  # the solution or projects to build when the root has several
    configuration: str = "Release"  # -c of build and test, -p:Configuration= of evaluation
    analyzer_frameworks: list[str] = ["netstandard2.0"]  # allowed for Roslyn components only
    exclude: list[str] = []  # globs (repo-relative) of C# sources and projects never validated
    nuget_audit: Literal["environment", "failure"] = "environment"  # NU1900–NU1904


class ValidationFile(Strict):
    """`workflow_defs/validation.yaml` of a harness root: the layout defaults of every phase."""

    validation: ValidationConfig


class Phase(Strict):
    kind: Literal["phase"]
    id: Ident
    description: str = ""
    input: InputPorts = InputPorts()
    execution: Execution
    output: Output = Output()
    validation: ValidationMode | ValidationConfig = "full"
    context_files: list[str] = []

    @property
    def validation_mode(self) -> str:
        return self.validation if isinstance(self.validation, str) else self.validation.mode


class SkillEdge(Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    source: Ident = Field(alias="from")
    to: Ident
    type: Literal["dynamic_load", "static_load"] = "dynamic_load"
    reason: str = Field(min_length=1)


class SkillGraph(Strict):
    edges: list[SkillEdge] = []
