"""The executors of one attempt: `command` (a deterministic argv, seed 004) and `codex` (the real
Codex CLI, DESIGN §6–7). Each runs outside the state lock, writes `stepN-output.json` of the last
attempt, then verifies independently: required artifacts, then the validation hook point.
It never writes the delivery state: `step` records what an attempt returns.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from specops_dag import gitflow
from specops_dag.agent.codex import (
    AgentSettings,
    CodexRun,
    agent_excludes,
    codex_argv,
    expected_model,
    find_codex,
    run_codex,
    secret_values,
)
from specops_dag.agent.prompt import (
    METADATA_PATHS,
    SUMMARY_LIMIT,
    assemble_prompt,
    failure_summary,
    plain_changes_line,
    read_list,
    review_phase,
    skill_lines,
    target_line,
    where_line,
)
from specops_dag.agent.review import (
    Review,
    evaluator_prompt_section,
    extract_review_block,
    feedback_for_generator,
    read_review,
    save_report,
)
from specops_dag.delivery.budget import budget_spent
from specops_dag.delivery.lifecycle import workdir
from specops_dag.delivery.model import (
    ContractRecord,
    Delivery,
    FileRef,
    InfraRetry,
    IntegrityFinding,
    PreflightRecord,
    ProofRecord,
    QaRecord,
    ReviewRecord,
    ReviewUsage,
    Step,
    Usage,
)
from specops_dag.delivery.pricing import delivery_prices
from specops_dag.delivery.queries import RISK_FILE, accepted_risks, agent_path
from specops_dag.delivery.store import Store
from specops_dag.errors import ToolMissing, UsageError
from specops_dag.files import now_iso, redact, sha256_file, write_json_atomic
from specops_dag.process import run_process
from specops_dag.validation import ValidationReport, validate_attempt
from specops_dag.validation.dotnet import DEADLINE_S, UNSERVED
from specops_dag.validation.preflight import Preflight, block_reason, cached_pass, run_preflight
from specops_dag.validation.qa import QaReport, run_qa
from specops_dag.workflow.catalog import Catalog
from specops_dag.workflow.model import TargetRule, ValidationConfig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from specops_dag.workflow.model import Execution, Phase

DEFAULT_COMMAND_TIMEOUT_S = 600


@dataclass(frozen=True)
class AttemptResult:
    ok: bool
    summary: str
    handoff: dict[str, FileRef] = field(default_factory=dict)
    environment: bool = False  # no retry can fix it: the step is blocked
    usage: Usage | None = None
    message: str = ""
    prompt_chars: int = 0
    validation: ValidationReport | None = None
    review: ReviewRecord | None = None  # the evaluator's round, when the node has one
    review_exhausted: bool = False
    preparation: str | None = None  # what was done to the worktree before the first call
    review_usage: Usage | None = None  # the evaluator's sessions of this round, together
    preflight: PreflightRecord | None = None  # the base tree's validation, before the first call
    contract: ContractRecord | None = None  # the sprint contract this attempt agreed or proposed
    contract_usage: tuple[Usage, ...] = ()  # the contract rounds' sessions
    reason: str = ""  # how it ended (`AttemptReason`); empty: derived (see `step.reason_of`)
    integrity: tuple[IntegrityFinding, ...] = ()  # the test-integrity guard's findings
    raises_risk: bool = False  # the agent's risk.md names what the guard found: a person decides
    infra: tuple[InfraRetry, ...] = ()  # sessions of this attempt the provider failed, retried
    proof: ProofRecord | None = None  # the fail-before, pass-after proof of the step's tests


def attempt_number(step: Step) -> int:
    """The running attempt's number since the last reopen: its place in `attempt_log`, which a
    resume does not restart as it restarts `attempts` (so no attempt's logs overwrite another's)."""
    return len(step.attempt_log) + 1


def attempt_logs(folder: Path, attempt: int) -> Path:
    """`<node or task folder>/validation/attempt-<n>/`: the validation logs and TRX of one
    attempt, emptied first (a killed run's attempt of the same number left its own)."""
    path = folder / "validation" / f"attempt-{attempt}"
    shutil.rmtree(path, ignore_errors=True)
    return path


def cache_dirs(store: Store) -> dict[str, Path]:
    """Writable homes for the agent's .NET tools, outside every worktree (so restore caches never
    show up as product changes), shared by the deliveries of one harness root."""
    base = store.root.resolve() / ".specops" / "cache"
    return {"NUGET_PACKAGES": base / "nuget-packages", "DOTNET_CLI_HOME": base / "dotnet-home"}


def node_dir(store: Store, delivery: str, node: str) -> Path:
    return store.delivery_dir(delivery) / node


def step_env(store: Store, state: Delivery, step: Step) -> dict[str, str]:
    folder = node_dir(store, state.phase, step.name)
    return {**os.environ, "SPECOPS_ROOT": str(store.root.resolve()),
            "SPECOPS_DELIVERY": state.phase, "SPECOPS_NODE": step.name,
            "SPECOPS_NODE_DIR": str(folder.resolve()),
            "SPECOPS_TARGET": str(workdir(store, state, step)),
            "SPECOPS_ATTEMPT": str(step.attempts),
            "SPECOPS_INPUTS": json.dumps({k: v.model_dump() for k, v in step.consumed.items()}),
            **{k: str(v) for k, v in cache_dirs(store).items()}}


def run_attempt(store: Store, state: Delivery, step: Step, catalog: Catalog,
                settings: AgentSettings,
                progress: Callable[[str], None] | None = None,
                sessions: int | None = None,
                dispatch: Callable[[str, str, str], None] | None = None) -> AttemptResult:
    """One attempt of the step (a fan-out node's: all its tasks); `progress` hears what a
    fan-out does as it goes; `dispatch` offers its tasks to other processes."""
    kind = catalog.phases[step.phase].execution.executor.kind
    node_dir(store, state.phase, step.name).mkdir(parents=True, exist_ok=True)
    checked: Preflight | None = None
    try:
        checked = base_check(store, state, step, catalog)
        if checked is not None and not checked.ok:
            return AttemptResult(False, block_reason(checked.record, state.phase, step.name),
                                 environment=True, preflight=step.preflight)
        if kind == "command":
            result = run_command_attempt(store, state, step, catalog)
        elif catalog.phases[step.phase].execution.fan_out is not None:
            from specops_dag.execution.fanout import run_fan_out

            result = run_fan_out(store, state, step, catalog, settings, progress, sessions,
                                 dispatch)
        else:
            result = run_codex_attempt(store, state, step, catalog, settings,
                                       restored=checked is not None and not checked.cached
                                       and step.preflight is not None
                                       and step.preflight.target_found is True)
    except ToolMissing as err:
        return AttemptResult(False, f"environment error: {err.message}", environment=True,
                             preflight=step.preflight if checked else None)
    return replace(result, preflight=step.preflight) if checked is not None else result


def check_snapshot(store: Store, state: Delivery) -> None:
    """Every file `specops new` froze into `phases/<d>/snapshot/` still has its recorded sha256:
    a delivery runs only the definitions it was created with. That covers the work rules, the
    TDD hook's rules and the prices frozen with them, and a harness file frozen as absent must
    stay absent. Raises UsageError naming the first file that changed, went missing or appeared."""
    folder = store.delivery_dir(state.phase)
    # A skill graph's sha256 is its source's (its copy keeps only the bound edges); its copy's
    # own is `copy_sha256`, unrecorded in snapshots frozen before it was.
    frozen = [(f.copy_path, f.copy_sha256 or f.sha256) for f in state.snapshot.files
              if f.kind != "skill-graph" or f.copy_sha256]
    frozen += [(s.path, s.sha256) for bound in state.snapshot.skills.values() for s in bound]
    for rel, sha in dict.fromkeys(frozen):
        path = folder / rel
        now = sha256_file(path) if path.is_file() else None
        if now == sha:
            continue
        shown = f"phases/{state.phase}/{rel}"
        if sha is None and now is not None:
            raise UsageError(f"{shown} appeared since `specops new` froze the delivery without "
                             f"it (sha256 {now[:12]}): a delivery runs only the definitions it "
                             "was created with; remove it, or create a new delivery for the new "
                             "definitions")
        what = ("is missing" if now is None else f"changed since `specops new` froze it (sha256 "
                f"{now[:12]}, frozen {sha[:12]})")
        back = (f"`git show {state.branch}:{shown}` has it as it was, if a metadata commit "
                "holds it" if state.branch else "put it back as it was")
        raise UsageError(f"{shown} {what}: a delivery runs only the definitions it was created "
                         f"with; {back}, or create a new delivery for the new definitions")


def preflight_cache(store: Store) -> Path:
    return store.root.resolve() / ".specops" / "preflight"


def layout_of(catalog: Catalog, state: Delivery, step: Step) -> ValidationConfig:
    """validation.yaml, then the phase's keys, then the delivery's `new --judge`; the target
    policy is the one frozen at `specops new` where the snapshot has one."""
    layout = catalog.validation_for(step.phase)
    update: dict = {"judge": state.judge} if state.judge else {}
    if state.snapshot.target is not None:
        update["target"] = TargetRule(**state.snapshot.target.model_dump())
    return layout.model_copy(update=update) if update else layout


def base_check(store: Store, state: Delivery, step: Step, catalog: Catalog) -> Preflight | None:
    """Before a `full` step's first call: the base tree must pass (issue 16). The result is set
    on `step` too, so this attempt's validation compares with it under `judge: regressions`."""
    if step.validation != "full" or not (step.attempts == 1 or (
            step.preflight is None and state.worktree and step.base_commit
            and not gitflow.product_changes(workdir(store, state, step), since=step.base_commit))):
        return None  # later attempts (or a tree already changed) use the recorded one
    folder = node_dir(store, state.phase, step.name)
    checked = run_preflight(workdir(store, state, step), step.base_commit,
                            layout_of(catalog, state, step), preflight_cache(store),
                            folder / "validation" / "preflight", step_env(store, state, step))
    step.preflight = PreflightRecord.model_validate(checked.record)
    return checked


def run_command_attempt(store: Store, state: Delivery, step: Step,
                        catalog: Catalog) -> AttemptResult:
    """Run the phase's argv in the target with the SPECOPS_* environment."""
    executor = catalog.phases[step.phase].execution.executor
    env = step_env(store, state, step)
    argv = list(executor.argv or [])
    timeout = executor.timeout_s or DEFAULT_COMMAND_TIMEOUT_S
    result = run_process(argv, cwd=workdir(store, state, step), env=env, deadline_s=timeout)
    secrets = secret_values(env, agent_excludes(AgentSettings.from_env()))
    write_json_atomic(node_dir(store, state.phase, step.name) / f"step{step.step}-output.json", {
        "attempt": step.attempts, "argv": argv, "exit_code": result.exit_code,
        "timed_out": result.timed_out, "duration_s": result.duration_s,
        "stdout": redact(result.stdout, secrets), "stderr": redact(result.stderr, secrets)})
    if not result.ok:
        why = f"timed out after {timeout} s" if result.timed_out else f"exited {result.exit_code}"
        log = redact((result.stdout + result.stderr).strip(), secrets)
        text = f"`{shlex.join(argv)}` {why}" + (f"\n{log}" if log else "")
        return AttemptResult(False, failure_summary(text),
                             reason="timeout" if result.timed_out else "agent-error")
    return verify(store, state, step, catalog)


def run_codex_attempt(store: Store, state: Delivery, step: Step, catalog: Catalog,
                      settings: AgentSettings, restored: bool = False) -> AttemptResult:
    """One `codex exec` call (prompt on stdin), then the independent verification."""
    phase = catalog.phases[step.phase]
    folder = node_dir(store, state.phase, step.name)
    target = workdir(store, state, step)
    codex_bin = find_codex(settings, store.root)
    env = step_env(store, state, step)
    deal = None
    if phase.execution.contract is not None and not (step.contract and step.contract.agreed):
        from specops_dag.execution.contract import negotiate

        deal = negotiate(store, state, step, catalog, settings, cwd=target, folder=folder,
                         label=step.name, env=env)
        if deal.refused:
            return AttemptResult(False, deal.refused, environment=True, contract=deal.record,
                                 contract_usage=deal.usage, infra=deal.retries)
        step.contract = deal.record
    prompt = assemble_prompt(store.root, state, step, catalog, target)
    secrets = secret_values(env, agent_excludes(settings))
    (folder / "prompt.md").write_text(redact(prompt.text, secrets), encoding="utf-8")
    preparation = None
    if step.attempts == 1:
        preparation = prepare_dotnet(store, state, step, target, env, catalog, restored=restored)
    if preparation is not None and not preparation[0]:
        return AttemptResult(False, preparation[1], environment=True, preparation=preparation[1])
    session = codex_session(store, settings, phase, codex_bin, prompt=prompt.text, cwd=target,
                            folder=folder, delivery=state.phase, label=step.name,
                            attempt=step.attempts, env=env,
                            output=folder / f"step{step.step}-output.json")
    run, usage, secrets = session.run, session.usage, session.secrets
    execution = phase.execution
    common = {"usage": usage, "message": redact(run.last_message, secrets)[:SUMMARY_LIMIT],
              "prompt_chars": prompt.total_chars,
              "preparation": preparation[1] if preparation else None,
              "infra": (deal.retries if deal else ()) + session.retries}
    if run.environment_error:
        return AttemptResult(False, redact(run.environment_error, secrets), environment=True,
                             **common)
    if run.infrastructure:
        return AttemptResult(False, provider_down(state, step, session.shown(run.infrastructure),
                                                  session.retries, execution),
                             environment=True, reason="infrastructure", **common)
    if not run.ok:
        failure = run.failure(execution.timeout_s, execution.idle_timeout_s)
        return AttemptResult(False, failure_summary(redact(failure, secrets)), reason=run.reason,
                             **common)
    verdict = verify(store, state, step, catalog)
    if deal is not None:
        common.update(contract=deal.record, contract_usage=deal.usage)
    if verdict.ok and step.contract is not None:
        from specops_dag.execution.contract import judge

        broken = judge(step.contract, verdict.validation)
        if broken:
            verdict = AttemptResult(False, broken, validation=verdict.validation)
    if verdict.ok:
        review = review_of(catalog, state, step)
        if review is not None:
            verdict = run_review(store, state, step, catalog, settings, verdict, *review)
    return replace(verdict, **{**common, "infra": common["infra"] + verdict.infra})


def provider_down(state: Delivery, step: Step, why: str, retries: tuple[InfraRetry, ...],
                  execution: Execution) -> str:
    """The block message of an attempt whose provider kept failing past its retries."""
    waited = sum(r.wait_s for r in retries)
    return (f"infrastructure: {why}; retried {len(retries)} of {execution.infra_retries} times "
            f"(execution.infra_retries) over {waited:g} s of backoff; this does not count "
            f"against the agent calls: when the provider is back, `specops resume "
            f"{state.phase} {step.name}`")


@dataclass(frozen=True)
class CodexSession:
    """One finished `codex exec` session: its run, its tokens and the secret values its texts
    are redacted of."""

    run: CodexRun
    usage: Usage
    secrets: list[str]
    retries: tuple[InfraRetry, ...] = ()  # the sessions before it that the provider failed

    def shown(self, text: str) -> str:
        return redact(text, self.secrets)


def codex_session(store: Store, settings: AgentSettings, phase: Phase, codex_bin: str, *,
                  prompt: str, cwd: Path, folder: Path, delivery: str, label: str, attempt: int,
                  env: dict[str, str], output: Path, sandbox: str | None = None) -> CodexSession:
    """Run one codex session in `cwd` under the phase's sandbox and deadlines (the node or task
    folder and the .NET caches writable beside it), `label` routing it (`<node>` or
    `<node>.<task>`); its whole transcript, redacted, is written to `output`. A session the
    provider fails is run again under `execution.infra_retries` (backoff doubling from
    `infra_backoff_s`, none begun past `infra_max_s`); the retries are returned with it."""
    session, retries = infra_retrying(
        phase.execution, label,
        lambda: _one_session(store, settings, phase.execution, codex_bin, prompt=prompt,
                             cwd=cwd, folder=folder, delivery=delivery, label=label,
                             attempt=attempt, env=env, output=output, sandbox=sandbox),
        lambda one: one.run, secret_values(env, agent_excludes(settings)))
    return replace(session, retries=retries)


T = TypeVar("T")


def infra_retrying(execution: Execution, label: str, call: Callable[[], T],
                   run_of: Callable[[T], CodexRun], secrets: list[str]
                   ) -> tuple[T, tuple[InfraRetry, ...]]:
    """`call` (one codex session) again while the provider fails it: at most
    `execution.infra_retries` more times, waiting `infra_backoff_s` doubling, none begun past
    `infra_max_s` after the first failure. The last session is returned with the retries."""
    retries: list[InfraRetry] = []
    first_failure: float | None = None
    while True:
        result = call()
        why = run_of(result).infrastructure
        if why is None:
            return result, tuple(retries)
        first_failure = first_failure if first_failure is not None else time.monotonic()
        wait = execution.infra_backoff_s * 2 ** len(retries)
        if (len(retries) >= execution.infra_retries
                or time.monotonic() - first_failure + wait > execution.infra_max_s):
            return result, tuple(retries)
        retries.append(InfraRetry(at=now_iso(), session=label, reason=redact(why, secrets),
                                  wait_s=wait))
        time.sleep(wait)


def _one_session(store: Store, settings: AgentSettings, execution: Execution, codex_bin: str,
                 *, prompt: str, cwd: Path, folder: Path, delivery: str, label: str,
                 attempt: int, env: dict[str, str], output: Path,
                 sandbox: str | None) -> CodexSession:
    secrets = secret_values(env, agent_excludes(settings))
    last = folder / "last-message.txt"
    last.unlink(missing_ok=True)  # codex leaves a stale -o file on a failed turn
    caches = tuple(cache_dirs(store).values())
    for cache in caches:
        cache.mkdir(parents=True, exist_ok=True)
    # the node (or task) folder is named even inside the working directory: the delivery folder
    # around it is read-only in the sandbox, and the more specific writable root wins
    extra = (folder.resolve(),) + caches
    argv = codex_argv(codex_bin, sandbox=sandbox or execution.sandbox or "workspace-write",
                      workdir=cwd,
                      last_message=last, settings=settings, delivery=delivery, node=label,
                      idle_timeout_s=execution.idle_timeout_s, add_dirs=extra,
                      network=execution.network, tmpdir=env.get("TMPDIR"),
                      read_only=(store.delivery_dir(delivery).resolve(),))
    use_codex_home(store, settings, env)
    with tempfile.TemporaryDirectory(prefix=".attempt-", dir=folder) as scratch:
        run = run_codex(argv, prompt, workdir=cwd, env=env, timeout_s=execution.timeout_s,
                        idle_timeout_s=execution.idle_timeout_s,
                        command_timeout_s=execution.command_timeout_s,
                        stdout_path=Path(scratch) / "stdout.jsonl",
                        stderr_path=Path(scratch) / "stderr.txt")
    last.unlink(missing_ok=True)  # codex wrote it unredacted; the output file keeps it redacted
    write_json_atomic(output, {
        "attempt": attempt, "argv": [redact(a, secrets) for a in argv],
        "exit_code": run.process.exit_code, "timed_out": run.process.timed_out,
        "idle_timed_out": run.process.idle_timed_out, "stopped": run.process.stopped,
        "command_timed_out": run.process.busy_timed_out, "overrun_command": run.overrun_command,
        "duration_s": run.process.duration_s, "thread_id": run.thread_id,
        "usage": run.usage, "last_message": redact(run.last_message, secrets),
        "jsonl": redact(run.process.stdout, secrets),
        "stderr": redact(run.process.stderr, secrets)})
    return CodexSession(run, usage_of(run, attempt, "generator", expected_model(settings)), secrets)


TOKEN_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def usage_of(run: CodexRun, attempt: int, role: str, model: str | None = None) -> Usage:
    """The tokens of one codex session, as the state records them, with the model and provider
    codex reported for it; `model` (what the settings expect) only when codex reported none."""
    return Usage(attempt=attempt, thread_id=run.thread_id, role=role, model=run.model or model,
                 provider=run.provider, **{k: run.usage.get(k, 0) for k in TOKEN_FIELDS})


def use_codex_home(store: Store, settings: AgentSettings, env: dict[str, str]) -> None:
    """CODEX_HOME of an agent session: the configured one, else (for the replay agent) the
    harness root's own; otherwise the user's, untouched."""
    home = settings.codex_home or (str(store.root / ".specops" / "codex-home")
                                   if settings.replay_url else None)
    if home:
        Path(home).mkdir(parents=True, exist_ok=True)
        env["CODEX_HOME"] = home


def prepare_dotnet(store: Store, state: Delivery, step: Step, target: Path,
                   env: dict[str, str], catalog: Catalog, restored: bool = False
                   ) -> tuple[bool, str]:
    """Before a step's first call: restore the worktree outside the sandbox with the agent's own
    NuGet and dotnet homes, so the agent can build and test `--no-restore` without network
    (`restored`: the preflight's validation of the base tree did it), then the packages its
    upstream plan or spec lists under `## Packages` (`plan_packages`).
    (ok, what was done — for the step record); not ok blocks the step."""
    from specops_dag.validation.dotnet import restore_worktree

    folder = node_dir(store, state.phase, step.name)
    log_dir = folder / "validation" / "restore"
    if restored:
        done = (f"restored by the executor before attempt 1 (NuGet packages in "
                f"{env['NUGET_PACKAGES']}, dotnet home {env['DOTNET_CLI_HOME']}), in the "
                f"preflight's validation of the base tree; logs in "
                f"{folder / 'validation' / 'preflight'}")
    else:
        try:
            report = restore_worktree(target, log_dir, env,
                                      config=layout_of(catalog, state, step))
        except ToolMissing:
            return True, ("restore skipped: `dotnet` is not on PATH, so the worktree was not "
                          "restored and the agent cannot build or test")
        if report is not None and not report.passed:
            return False, (f"environment error: the executor's `dotnet restore` before the "
                           f"first attempt failed, no agent call was made: {report.message}; "
                           f"logs in {log_dir}; fix the package sources or the network, then "
                           f"`specops resume {state.phase} {step.name}`")
        done = ("restore skipped: no .NET project to restore in the worktree" if report is None
                else f"restored by the executor before attempt 1 (NuGet packages in "
                     f"{env['NUGET_PACKAGES']}, dotnet home {env['DOTNET_CLI_HOME']}); logs in "
                     f"{log_dir}")
    packages = plan_packages(store, state, step, target, env, catalog)
    return True, done if packages is None else f"{done}; {packages}"


def plan_packages(store: Store, state: Delivery, step: Step, target: Path, env: dict[str, str],
                  catalog: Catalog) -> str | None:
    """The packages the step's upstream markdown handoffs (its `consumed` inputs: the plan, the
    spec) list under `## Packages`, restored outside the sandbox, with the network, into the
    agent's own package folder (`env`'s NUGET_PACKAGES), so its offline `dotnet restore` finds
    them. What was done, for the step's preparation; None when nothing is listed. Never blocks:
    a package the source does not serve is named there."""
    from specops_dag.validation.packages import Package, listed_packages, restore_packages

    listed: dict[str, Package] = {}
    sources = []
    for rel in dict.fromkeys(ref.path for ref in step.consumed.values()):
        path = store.root / rel
        if path.suffix.lower() != ".md" or not path.is_file():
            continue
        found = listed_packages(path.read_text(encoding="utf-8", errors="replace"))
        sources += [rel] if found else []
        for package in found:
            listed.setdefault(package.id.lower(), package)
    if not listed:
        return None
    packages = list(listed.values())
    folder = node_dir(store, state.phase, step.name)
    try:
        with tempfile.TemporaryDirectory(prefix=".packages-", dir=folder) as scratch:
            result = restore_packages(target, packages, Path(scratch),
                                      folder / "validation" / "packages", env,
                                      config=layout_of(catalog, state, step))
    except ToolMissing:
        return (f"the plan's packages (`## Packages` of {', '.join(sources)}): "
                f"{', '.join(map(str, packages))} not restored: `dotnet` is not on PATH")
    return result.describe(sources)


def review_of(catalog: Catalog, state: Delivery, step: Step) -> tuple[str, int] | None:
    """(evaluator phase, max_rounds) of the node's review: the phase the delivery recorded."""
    node = next(n for n in catalog.workflows[state.workflow].nodes if n.id == step.name)
    phase_id = review_phase(state, node)
    return (phase_id, node.review.max_rounds) if node.review and phase_id else None


def run_review(store: Store, state: Delivery, step: Step, catalog: Catalog,
               settings: AgentSettings, generated: AttemptResult, phase_id: str,
               max_rounds: int) -> AttemptResult:
    """One evaluator round (codex -s read-only, READ/TASK/REPORT) on the generator's work; the
    verdict is read from the saved report file, never from the chat. A report that cannot be
    read is asked for once more in the same round and never charged to the generator."""
    phase = catalog.phases[phase_id]
    spent = budget_spent(state, step, phase.execution.budget.tokens, phase_id, "evaluator",
                         phase_usd=phase.execution.budget.usd,
                         prices=delivery_prices(store.root, state), model=expected_model(settings))
    if spent:
        return AttemptResult(False, spent, environment=True, reason="budget")
    folder = node_dir(store, state.phase, step.name)
    repo = workdir(store, state, step)
    round_no = step.attempts
    lines = read_list(store.root, state, step, catalog, repo) + [
        f"{agent_path(store.root / ref.path, repo)} (sha256 {ref.sha256}) — the generator's "
        f"artifact `{art}`" for art, ref in generated.handoff.items()]
    lines += [f"{agent_path(store.root / r.report, repo)} — the report of review round {r.round} "
              f"({r.verdict}): check whether each of its findings was fixed"
              for r in step.reviews if r.report and (store.root / r.report).is_file()]
    if (logs := folder / "validation" / f"attempt-{attempt_number(step)}").is_dir():
        lines.append(f"{agent_path(logs, repo)}/ — the validation logs and TRX of this attempt "
                     "(earlier attempts' are beside it)")
    goal = phase.execution.goal
    if step.contract is not None and step.contract.agreed:
        lines.append(f"{agent_path(store.root / step.contract.path, repo)} (sha256 "
                     f"{step.contract.sha256}) — the sprint contract the generator agreed to")
        goal += ("\nScore the build against the agreed sprint contract (READ): what it says "
                 "it builds is built, and every test it names exists, runs and passes.")
    skills = [line.removeprefix("- ") for line in skill_lines(store.root, state, phase_id, repo)]
    qa = qa_stage(store, state, step, settings, phase, repo, round_no,
                  layout_of(catalog, state, step))
    if qa is not None and qa.status == "skipped" and phase.execution.qa.required:
        reason = (f"review round {round_no}: QA against the running application is required by "
                  f"phase `{phase_id}` (qa.required) but was skipped: {qa.reason}; no evaluator "
                  f"call was made: fix it, then `specops resume {state.phase} {step.name}`")
        return AttemptResult(False, reason, environment=True, review=ReviewRecord(
            round=round_no, verdict="BLOCK", reason=reason, qa_status=qa.status,
            qa=QaRecord.model_validate(qa.as_record())))
    if qa is not None:
        lines += qa_read_lines(store.root / (qa.evidence or ""), qa, repo)
    text = evaluator_prompt_section(phase.execution.criteria, step.name, lines, round_no,
                                    max_rounds, skill_lines=skills, where=where_line(repo),
                                    goal=goal, qa=qa_task_line(qa),
                                    target=target_line(state.snapshot.target),
                                    changes=review_changes(state, step, repo, folder)
                                    or plain_changes_line(store.root, state, phase, repo))
    agents = repo / "AGENTS.md"
    prompt = (agents.read_text(encoding="utf-8") + "\n\n" if agents.is_file() else "") + text
    session = ReviewSession(store, state, step, settings, phase, repo, round_no,
                            spent_s=qa.duration_s if qa else 0.0)
    first = session.evaluate(prompt, "")
    outcome = first
    if first.review.verdict == "MALFORMED" and first.record.verdict == "MALFORMED":
        outcome = session.evaluate(prompt + "\n\n" + REASK.format(reason=first.review.reason),
                                   "-reask")
        outcome.record.reasked = first.record.reason
    usage = outcome.usage if outcome is first else first.usage.model_copy(update={
        k: getattr(first.usage, k) + getattr(outcome.usage, k) for k in TOKEN_FIELDS})
    record = outcome.record.model_copy(update={"usage": ReviewUsage.model_validate(
        usage.model_dump(exclude={"role", "attempt", "task", "model", "provider"}))})
    evaluator_passed, evaluator_reason = record.verdict == "PASS", record.reason
    qa_failure = judge_with_qa(record, qa, store.root, repo)
    retries = first.retries + (outcome.retries if outcome is not first else ())
    if outcome.environment:
        return AttemptResult(False, outcome.environment, environment=True, review=record,
                             review_usage=usage, infra=retries, reason=outcome.reason)
    if record.verdict == "PASS":
        return replace(generated, review=record, review_usage=usage, infra=retries)
    if record.verdict == "MALFORMED":
        return AttemptResult(False, f"review round {round_no}: the evaluator's report could not "
                             f"be read twice ({record.reason}); it is not charged to the "
                             f"generator: read {record.report}, then `specops resume "
                             f"{state.phase} {step.name}`", environment=True, review=record,
                             review_usage=usage, infra=retries)
    shown = agent_path(store.root / (record.report or ""), repo)
    if evaluator_passed or evaluator_reason != outcome.review.reason:
        feedback = (f"review round {round_no} blocked: {record.reason}; read the full report "
                    f"at {shown}")
    else:
        feedback = feedback_for_generator(outcome.review, shown)
        if qa_failure:
            feedback += f"\n{qa_failure}"
    return AttemptResult(False, failure_summary(feedback), review=record,
                         review_exhausted=round_no >= max_rounds, review_usage=usage,
                         infra=retries)


def judge_with_qa(record: ReviewRecord, qa: QaReport | None, root: Path, repo: Path
                  ) -> str | None:
    """Put the round's QA into its review record; a failed QA blocks the round whatever the
    evaluator said (a PASS is overruled). Returns the QA failure for the generator, or None."""
    if qa is None:
        return None
    record.qa_status, record.qa = qa.status, QaRecord.model_validate(qa.as_record())
    if qa.status != "failed" or record.verdict not in ("PASS", "BLOCK"):
        return None
    failure = (f"QA against the running application failed: {qa.reason} (evidence in "
               f"{agent_path(root / (qa.evidence or ''), repo)}/)")
    record.reason = (f"{failure}; it overrules the evaluator's PASS"
                     if record.verdict == "PASS" else f"{record.reason}; {failure}")
    record.verdict = "BLOCK"
    return failure


def review_changes(state: Delivery, step: Step, repo: Path, folder: Path) -> str | None:
    """The evaluator's CHANGES line on a git delivery: the generator's work is not committed yet
    when it is reviewed, so it is snapshotted into a commit no ref points at (the worktree, its
    index and branch untouched) and the line names the command that diffs where the delivery
    began against it (the whole product change it judges: earlier nodes' too), the delivery's
    own records left out."""
    base = state.base_commit or step.base_commit
    if not state.worktree or not base:
        return None
    with tempfile.TemporaryDirectory(prefix=".attempt-", dir=folder) as scratch:
        snap, _ = gitflow.snapshot_commit(repo, Path(scratch), f"specops review: the work of "
                                          f"{step.name} as reviewed")
    return (f"CHANGES: `git diff --stat {base} {snap} -- . {METADATA_PATHS}` lists the product "
            f"change under review: {base} is where this delivery's branch {state.branch} "
            f"began, {snap} the "
            f"work as you review it (`{step.name}`'s not committed yet: a snapshot no branch "
            f"points at); `git diff {base} {snap} -- <path>` shows one file.")


def qa_stage(store: Store, state: Delivery, step: Step, settings: AgentSettings, phase: Phase,
             repo: Path, round_no: int, config: ValidationConfig) -> QaReport | None:
    """The phase's `qa:` against the generator's work, before the evaluator's session; its
    evidence beside the round's report (`reviews/<node>-rN-qa/`)."""
    if phase.execution.qa is None:
        return None
    env = step_env(store, state, step)
    secrets = secret_values(env, agent_excludes(settings))
    folder = node_dir(store, state.phase, step.name)
    return run_qa(phase.execution.qa, repo=repo, git_target=bool(state.worktree),
                  root=store.root, evidence=folder / "reviews" / f"{step.name}-r{round_no}-qa",
                  label=f"{state.phase}-{step.name}-r{round_no}",
                  env={k: v for k, v in env.items() if v not in secrets}, secrets=secrets,
                  config=config)


def qa_read_lines(evidence: Path, qa: QaReport, repo: Path) -> list[str]:
    where = agent_path(evidence, repo)
    return [f"{where}/qa.md — QA of the running application ({qa.status}): what was run and "
            "every check with its evidence files",
            f"{where}/ — the QA evidence: requests, responses, screenshots, application output"]


def qa_task_line(qa: QaReport | None) -> str:
    """What the evaluator is told about the QA of this round (nothing when the phase has none)."""
    if qa is None:
        return ""
    if qa.status == "skipped":
        return (f"QA: the running application was NOT checked ({qa.reason}); nothing about its "
                "behaviour is proven. Judge from the code, tests and validation evidence only, "
                "and say under FINDINGS that QA was skipped.")
    ran = f" (snapshot commit {qa.commit[:12]})" if qa.commit else ""
    return (f"QA: the executor ran the generator's work{ran} in a throwaway worktree, started the "
            f"application and checked it: {qa.status.upper()} — {qa.reason}. Its summary and "
            "evidence (requests, responses, screenshots, application output) are in READ; judge "
            "the behaviour from them. A failed QA check blocks this round whatever you score; "
            "name each one under FINDINGS with what would fix it.")


REASK = ("Your review could not be read ({reason}). Answer again: your LAST message must "
         "contain exactly one block in the REPORT format above, with one VERDICT line and one "
         "SCORE line per criterion.")


@dataclass
class Evaluation:
    """One evaluator session of a round: its verdict, record, usage and transcript paths."""

    review: Review
    record: ReviewRecord
    usage: Usage
    environment: str | None = None  # why the round stops for a person
    retries: tuple[InfraRetry, ...] = ()
    reason: str = "environment"  # of a stop: `environment` or `infrastructure`


@dataclass
class ReviewSession:
    """Runs evaluator sessions of one review round, each kept whole under reviews/sessions/
    (JSONL, stderr, last message; redacted) beside the round's report."""

    store: Store
    state: Delivery
    step: Step
    settings: AgentSettings
    phase: Phase
    repo: Path
    round_no: int
    spent_s: float = 0.0  # QA ran first within the phase's timeout_s: the session gets the rest

    def evaluate(self, prompt: str, suffix: str) -> Evaluation:
        store, state, step, settings = self.store, self.state, self.step, self.settings
        folder = node_dir(store, state.phase, step.name)
        sessions = folder / "reviews" / "sessions"
        sessions.mkdir(parents=True, exist_ok=True)
        base = sessions / f"{step.name}-r{self.round_no}{suffix}"
        env = step_env(store, state, step)
        env["SPECOPS_REVIEW_PHASE"] = self.phase.id  # the state hooks speak to the evaluator
        secrets = secret_values(env, agent_excludes(settings))
        (folder / "reviews" / f"{step.name}-r{self.round_no}{suffix}-prompt.md").write_text(
            redact(prompt, secrets), "utf-8")
        last = folder / "reviews" / "last-message.txt"
        last.unlink(missing_ok=True)
        execution = self.phase.execution
        argv = codex_argv(find_codex(settings, store.root), sandbox="read-only",
                          workdir=self.repo, last_message=last, settings=settings,
                          delivery=state.phase, node=f"{step.name}.review",
                          idle_timeout_s=execution.idle_timeout_s, network=execution.network)
        use_codex_home(store, settings, env)
        before = gitflow.product_changes(self.repo) if state.worktree else []
        timeout_s = max(1, int(execution.timeout_s - self.spent_s))
        run, retries = infra_retrying(
            execution, f"{step.name}.review",
            lambda: run_codex(argv, prompt, workdir=self.repo, env=env, timeout_s=timeout_s,
                              idle_timeout_s=execution.idle_timeout_s,
                              command_timeout_s=execution.command_timeout_s,
                              stdout_path=base.with_name(base.name + ".jsonl"),
                              stderr_path=base.with_name(base.name + ".stderr.txt")),
            lambda one: one, secrets)
        said = redact(run.last_message, secrets)
        last.unlink(missing_ok=True)
        for path in (base.with_name(base.name + ".jsonl"),
                     base.with_name(base.name + ".stderr.txt")):
            if path.is_file():
                path.write_text(redact(path.read_text(encoding="utf-8", errors="replace"),
                                       secrets), encoding="utf-8")
        base.with_name(base.name + ".last-message.md").write_text(said, encoding="utf-8")
        usage = usage_of(run, self.round_no, "evaluator", expected_model(settings))
        transcript = base.with_name(base.name + ".jsonl").relative_to(store.root).as_posix()
        stop = run.environment_error or (run.infrastructure and "infrastructure: the "
                                         "evaluator's " + run.infrastructure)
        if stop:
            review = Review("BLOCK", {}, (), stop, "")
            return Evaluation(review, ReviewRecord(round=self.round_no, verdict="BLOCK",
                                                   reason=stop, transcript=transcript), usage,
                              redact(stop, secrets), retries,
                              "infrastructure" if run.infrastructure else "environment")
        home = Path(env.get("CODEX_HOME") or Path.home() / ".codex")
        denied = sandbox_denials(home, run.thread_id)
        changed = (sorted(set(gitflow.product_changes(self.repo)) - set(before))
                   if state.worktree else [])
        report = save_report(folder, step.name, self.round_no, extract_review_block(said), said)
        review = read_review(report, execution.criteria)
        record = ReviewRecord(round=self.round_no, verdict=review.verdict, reason=review.reason,
                              scores=review.scores,
                              report=report.relative_to(store.root).as_posix(),
                              sandbox_denials=denied, thread_id=run.thread_id,
                              transcript=transcript)
        if changed:
            record.verdict = "BLOCK"
            record.reason = f"the evaluator changed files: {', '.join(changed)}"
        if not run.ok:
            record.verdict = "BLOCK"
            record.reason = "the evaluator run failed: " + run.failure(
                timeout_s, execution.idle_timeout_s)
        return Evaluation(review, record, usage, retries=retries)


def sandbox_denials(codex_home: Path, thread_id: str | None) -> list[str]:
    """Commands of the evaluator that the read-only sandbox refused, from the thread's rollout
    file (`codex exec --json` emits no item for them); reported, never hidden."""
    if not thread_id:
        return []
    calls: dict[str, str] = {}
    denied: list[str] = []
    for rollout in (codex_home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"):
        for line in rollout.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                payload = json.loads(line).get("payload") or {}
            except (json.JSONDecodeError, AttributeError):
                continue
            if payload.get("type") == "function_call":
                calls[str(payload.get("call_id"))] = str(payload.get("arguments"))
            elif (payload.get("type") == "function_call_output"
                  and "Read-only file system" in str(payload.get("output"))):
                denied.append(calls.get(str(payload.get("call_id")), "(unknown command)"))
    return list(dict.fromkeys(denied))


def baseline_for(store: Store, step: Step, config: ValidationConfig) -> dict | None:
    """What an attempt is judged against (under `judge: regressions` its warnings and tests,
    under `absolute` its NuGetAudit advisories): the step's preflight, else the cached pass of
    its base commit (a run killed after its preflight), else an empty baseline — strict, never
    unchecked."""
    if step.preflight is not None:
        return step.preflight.model_dump()
    return cached_pass(preflight_cache(store), step.base_commit, config) or {}


def verify(store: Store, state: Delivery, step: Step, catalog: Catalog) -> AttemptResult:
    """Exit 0 is not success by itself: required artifacts must exist, then validation must pass."""
    phase = catalog.phases[step.phase]
    folder = node_dir(store, state.phase, step.name)
    repo = workdir(store, state, step)
    handoff, missing = {}, []
    for art in phase.output.artifacts:
        path = folder / art.path  # exactly where the prompt's WRITE told the agent to write
        rel = path.relative_to(store.root).as_posix()
        if path.is_file():
            handoff[art.id] = FileRef(path=rel, sha256=sha256_file(path))
        elif art.required:
            missing.append(f"`{art.id}` ({agent_path(path, repo)})")
    if missing:
        return stopped_with_risk(store, state, step, AttemptResult(
            False, "exit 0 but required artifacts are missing: " + ", ".join(missing)))
    if (phase.execution.expects_product_change and step.validation != "docs-only"
            and state.worktree and not gitflow.product_changes(repo, since=step.base_commit)):
        return stopped_with_risk(store, state, step, AttemptResult(
            False, "exit 0 but the product did not change: the phase expects a product change "
            "and nothing outside phases/ and docs/phase/ changed since "
            f"{(step.base_commit or '')[:12]}"))
    config = layout_of(catalog, state, step)
    started = time.monotonic()
    logs_dir = attempt_logs(folder, attempt_number(step))
    try:
        report = validate_attempt(step.validation, repo, delivery=state.phase,
                                  base_commit=step.base_commit, log_dir=logs_dir,
                                  env=step_env(store, state, step), config=config,
                                  baseline=baseline_for(store, step, config))
    except ToolMissing as err:  # no retry can install the SDK
        return AttemptResult(False, f"environment error: {err.message}", environment=True)
    if not report.passed and report.blame == "environment":
        # the environment's problem, not the diff's: the person fixes it, the agent never sees it
        return AttemptResult(False, f"environment error: {report.describe()}; fix it, then "
                             f"`specops resume {state.phase} {step.name}`", environment=True,
                             validation=report)
    if not report.passed:
        logs = (f"\nvalidation logs: {agent_path(logs_dir, repo)}/" if report.logs else "")
        return AttemptResult(False, failure_summary(report.describe() + unserved_advice(
            report, agent_path(folder / RISK_FILE, repo)) + logs), validation=report)
    guarded = guard_tests(store, state, step, repo, report)
    if guarded is not None and guarded.ok:
        guarded = prove_tests(store, state, step, repo, guarded, config,
                              DEADLINE_S - (time.monotonic() - started))
    if guarded is not None:
        return replace(guarded, handoff=handoff if guarded.ok else {})
    return AttemptResult(True, "", handoff, validation=report)


def risk_files(folder: Path) -> list[Path]:
    """The risk files an agent of this node wrote: the node folder's, then each fan-out task
    folder's in name order (a task session's RISK line names its own folder's). A link is not
    one: what a person decides is the file itself."""
    found = [folder / RISK_FILE, *sorted((folder / "tasks").glob(f"*/{RISK_FILE}"))]
    return [f for f in found if f.is_file() and not f.is_symlink()]


def already_decided(state: Delivery, path: str, sha256: str) -> bool:
    """This risk file was raised before, with this very content, and a standing approval of the
    `risk` gate covers it (the guard's waiver it gave): completing does not raise it again. A
    file edited since is a risk no person has seen: it is raised again."""
    return any(r.path == path and r.sha256 == sha256 for r in accepted_risks(state))


def stopped_with_risk(store: Store, state: Delivery, step: Step,
                      result: AttemptResult) -> AttemptResult:
    """An attempt that did not do the work (`result`): when the agent wrote a risk file no
    person has decided yet, it stopped as its RISK line says to, and the step waits for a person
    at the `risk` gate with the risk recorded; otherwise `result` as it is."""
    fresh = [r for r in risk_files(node_dir(store, state.phase, step.name))
             if not already_decided(state, r.relative_to(store.root).as_posix(), sha256_file(r))]
    if not fresh:
        return result
    named = ", ".join(r.relative_to(store.root).as_posix() for r in fresh)
    return replace(result, environment=True, raises_risk=True, summary=(
        f"the agent stopped and raised a risk ({named}): {result.summary}; a person decides "
        f"with `specops approve {state.phase} risk` (or `--reject`), then `specops resume "
        f"{state.phase} {step.name}`"))


def unserved_advice(report: ValidationReport, risk: str) -> str:
    """What the agent does when restore failed on packages the source does not serve."""
    if report.stage != "restore" or UNSERVED not in report.message:
        return ""
    return ("\nRemove those package references and do the work with what the repository and the "
            "framework already have. If it cannot be done without one, do what you can and write "
            f"{risk} naming the package and what it was for: a person decides at the `risk` gate.")


def guard_tests(store: Store, state: Delivery, step: Step, repo: Path,
                report: ValidationReport) -> AttemptResult | None:
    """The test-integrity guard (issue 21), on a `full` step of a git target: the tests as they
    are now against the step's base commit and its preflight's TRX counts, whatever the agent
    says. A finding no approved risk names fails the attempt; when the agent's own risk.md
    names every one, the step waits for a person at the `risk` gate instead."""
    if step.validation != "full" or not state.worktree or not step.base_commit:
        return None
    from specops_dag.validation import integrity

    base = step.preflight if step.preflight is not None and step.preflight.passed else None
    found = integrity.check_tree(repo, step.base_commit) + integrity.check_counts(
        base.executed if base else None, base.skipped if base else None,
        report.executed, report.skipped)
    kept, gone = integrity.waived(found, approved_risk_texts(store, state))
    records = tuple(IntegrityFinding(**f.as_dict(), waived=f in gone) for f in found)
    passed = AttemptResult(True, "", validation=report, integrity=records)
    if not kept:
        return passed
    risk = node_dir(store, state.phase, step.name) / RISK_FILE
    text = integrity.summary(kept, step.base_commit, state.phase, agent_path(risk, repo))
    return unless_risk(store, state, step, passed, text, kept)


def prove_tests(store: Store, state: Delivery, step: Step, repo: Path, guarded: AttemptResult,
                config: ValidationConfig, deadline_s: float) -> AttemptResult:
    """The fail-before, pass-after proof (issue 42 item 5), once the guard passed: the tests the
    step added or changed must fail (or not compile) on its base commit and pass at its head,
    within what is left of the validation's deadline. A test that passes at the base fails the
    attempt unless a risk names it, as the guard's findings are waived."""
    from specops_dag.validation import integrity, proof

    assert guarded.validation is not None and step.base_commit is not None
    folder = node_dir(store, state.phase, step.name)
    done = proof.prove(repo, step.base_commit, guarded.validation,
                       scratch=store.root.resolve() / proof.SCRATCH / f"{state.phase}-{step.name}",
                       log_dir=folder / "validation" / "proof", env=step_env(store, state, step),
                       config=config, deadline_s=deadline_s, shown_from=store.root.resolve())
    found = {t.finding(step.base_commit): t for t in done.passing}
    kept, gone = integrity.waived(list(found), approved_risk_texts(store, state))
    result = replace(guarded, proof=ProofRecord.model_validate(
        done.as_record({found[f].short for f in gone})))
    if done.verdict == "not finished":
        return replace(result, ok=False, summary=done.detail,
                       environment=done.blame == "environment")
    if not kept:
        return result
    text = proof.summary([found[f] for f in kept], step.base_commit, state.phase,
                         agent_path(folder / RISK_FILE, repo))
    return unless_risk(store, state, step, result, text, kept)


def unless_risk(store: Store, state: Delivery, step: Step, result: AttemptResult, text: str,
                kept: list) -> AttemptResult:
    """`result` failed with `text`; when the agent's own risk.md names every one of `kept`
    (findings no approved risk waived), the step waits for a person at the `risk` gate."""
    from specops_dag.validation import integrity

    risk = node_dir(store, state.phase, step.name) / RISK_FILE
    if risk.is_file() and not integrity.waived(kept, [risk.read_text(encoding="utf-8")])[0]:
        return replace(result, ok=False, environment=True, raises_risk=True,
                       summary=f"{text}\nThe agent's {RISK_FILE} names every one: a person "
                       f"decides with `specops approve {state.phase} risk` (or `--reject`), "
                       f"then `specops resume {state.phase} {step.name}`")
    return replace(result, ok=False, summary=text)


def approved_risk_texts(store: Store, state: Delivery) -> list[str]:
    """The texts a standing approval of the `risk` gate accepted: its note and every risk file
    raised before it, as it was raised — a file edited since (its sha256 moved) waives nothing,
    since no person has read what it says now."""
    decisions = [a for a in state.approvals if a.gate == "risk"]
    if not decisions or decisions[-1].decision != "approved":
        return []
    texts = [decisions[-1].note]
    for r in accepted_risks(state):
        path = store.root / r.path
        body = path.read_bytes() if r.sha256 is not None and path.is_file() else None
        if body is not None and hashlib.sha256(body).hexdigest() == r.sha256:
            texts.append(body.decode("utf-8", errors="replace"))
    return texts
