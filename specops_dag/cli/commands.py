"""The `specops` command: a thin click front-end over the domain functions.

It resolves settings once (root, DAGSTER_HOME), translates `SpecopsError` into exit codes
(0 ok, 1 failed run, 2 bad input, 3 blocked) and prints. Dagster is imported only by the
commands that need an instance (`new`, `run`, `demo`), never by `status`.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from specops_dag.cli.worker import BACKEND_ENV, BROKER_ENV
from specops_dag.delivery.queries import check_delivery_id
from specops_dag.errors import DefinitionError, SpecopsError, UsageError

if TYPE_CHECKING:
    from specops_dag.delivery.model import Delivery
    from specops_dag.delivery.store import Store


class Positive(click.FloatRange):
    """A number greater than 0 that is finite: `nan`, `inf` and `1e400` (which Python reads as
    inf) are refused like any other value out of range, not stored as no limit at all."""

    name = "positive number"

    def __init__(self) -> None:
        super().__init__(min=0, min_open=True)

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value} is not a finite number greater than 0.", param, ctx)
        return number


def fail_cleanly(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DefinitionError as err:
            for problem in err.problems:
                click.echo(problem, err=True)
            click.echo(f"error: {len(err.problems)} problem(s) in the definitions; nothing was "
                       "changed", err=True)
            sys.exit(err.exit_code)
        except SpecopsError as err:
            click.echo(f"error: {err.message}", err=True)
            sys.exit(err.exit_code)
    return wrapper


def package_version(distribution: str = "specops-dag", pyproject: Path | None = None) -> str:
    """The installed distribution's version; in a checkout run without an install, the version
    of its pyproject.toml."""
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        import tomllib

        from specops_dag.builtin import CHECKOUT

        with (pyproject or CHECKOUT / "pyproject.toml").open("rb") as file:
            return tomllib.load(file)["project"]["version"]


def show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    # click's own version_option, but looked up only when asked: importlib.metadata alone
    # costs ~50 ms, which every `specops status` would pay.
    if value and not ctx.resilient_parsing:
        click.echo(f"specops {package_version()}")
        ctx.exit()


@click.group()
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=show_version,
              help="Print `specops <version>` and exit.")
@click.option("--root", envvar="SPECOPS_ROOT",
              type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=".", show_default=True, help="Harness root (env SPECOPS_ROOT).")
@click.pass_context
def main(ctx: click.Context, root: Path) -> None:
    """Run Codex agent deliveries on C#/.NET repositories (net8.0, net10.0) as Dagster DAGs."""
    ctx.obj = root.resolve()


def store_of(ctx: click.Context) -> Store:
    return store_of_root(ctx.obj)


@main.command()
@click.pass_context
@fail_cleanly
def check(ctx: click.Context) -> None:
    """Load and validate every workflow, phase and skill definition and the harness root's
    prices.yaml (exit 2 on any problem)."""
    from specops_dag.delivery.pricing import PRICES_FILE, load_prices
    from specops_dag.workflow.catalog import definition_roots, load_catalog

    roots = definition_roots(ctx.obj)
    catalog = load_catalog(roots, display_base=ctx.obj, skill_names=True)
    prices = load_prices(ctx.obj)
    skills = sum(1 for kind, _ in catalog.sources if kind == "skill")
    priced = (f"; prices as of {prices.as_of} from {PRICES_FILE}" if prices.source == PRICES_FILE
              else "")
    click.echo(f"ok: {len(catalog.workflows)} workflows, {len(catalog.phases)} phases, "
               f"{skills} skills from {', '.join(str(r) for r in roots)}{priced}")


@main.command()
@click.option("--kind", type=click.Choice(["workflow", "phase", "skill-graph"]),
              help="Print only this kind's schema (default: all three, keyed by kind).")
def schema(kind: str | None) -> None:
    """Print the JSON Schema of the definition files, for editor completion."""
    from specops_dag.workflow.model import Phase, SkillGraph, Workflow

    schemas = {"workflow": Workflow.model_json_schema(), "phase": Phase.model_json_schema(),
               "skill-graph": SkillGraph.model_json_schema(by_alias=True)}
    click.echo(json.dumps(schemas[kind] if kind else schemas, indent=2))


def check_hook_rules(root: Path) -> None:
    """The harness root's hooks.json, refused before `specops new` freezes it when the hook
    could not use it: a delivery keeps the hook rules it was created with."""
    from specops_dag.builtin import HOOK_RULES
    from specops_dag.hooks import tdd

    try:
        body = (root / HOOK_RULES).read_bytes()
    except FileNotFoundError:
        return
    except OSError as err:
        raise UsageError(f"{HOOK_RULES}: cannot be read ({err.strerror}); make it readable or "
                         "remove it, then run `specops new` again") from None
    try:
        tdd.parse_rules(body, HOOK_RULES)
    except tdd.ConfigError as err:
        problem = err.message.removesuffix(f"; {tdd.UNTIL_FIXED}")
        raise UsageError(f"{problem}; fix it, then run `specops new` again: a delivery keeps "
                         "the hook rules it was created with") from None


@main.command()
@click.argument("workflow")
@click.argument("delivery")
@click.option("--request", "request_text", help="What the delivery must achieve.")
@click.option("--request-file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--target", type=click.Path(path_type=Path), help="Repository to change "
              "(default: the harness root).")
@click.option("--platform", "platforms", multiple=True, help="Binds the skills with "
              "`when: {platforms: [P]}` (repeatable); replaces the platforms detected in the "
              "target (aspnetcore, ef-core).")
@click.option("--validation", type=click.Choice(["full", "docs-only", "none"]),
              help="Override every step's validation mode (default: each phase's own).")
@click.option("--budget-tokens", type=click.IntRange(min=1),
              help="Token budget of the whole delivery (default: the workflow's budget).")
@click.option("--budget-usd", type=Positive(),
              help="Money budget of the whole delivery in USD, priced with prices.yaml "
              "(default: the workflow's budget).")
@click.option("--judge", type=click.Choice(["absolute", "regressions"]),
              help="Override every step's `validation.judge` (default: validation.yaml, then "
              "each phase's own).")
@click.pass_context
@fail_cleanly
def new(ctx, workflow, delivery, request_text, request_file, target, platforms,
        validation, budget_tokens, judge, budget_usd) -> None:
    """Create a delivery of WORKFLOW with id DELIVERY and register its Dagster partition."""
    from specops_dag.delivery import lifecycle as ops
    from specops_dag.delivery.platform import platform_line
    from specops_dag.workflow.catalog import definition_roots, load_catalog_for

    request = read_request(request_text, request_file)
    catalog, others = load_catalog_for(definition_roots(ctx.obj), workflow, display_base=ctx.obj,
                                       skill_names=True)
    if others:  # broken definitions this workflow does not use
        files = ", ".join(dict.fromkeys(p.partition(": ")[0] for p in others))
        click.echo(f"warning: {len(others)} problem(s) in definitions `{workflow}` does not use "
                   f"({files}); `specops check` lists them", err=True)
    check_hook_rules(ctx.obj)

    def register() -> None:
        from specops_dag.dagster_adapter.instance import register_delivery, resolve_dagster_home

        register_delivery(resolve_dagster_home(ctx.obj), delivery)

    policy = target_policy(catalog, workflow, (target or store_of(ctx).root).resolve(),
                           validation)
    state = ops.new_delivery(store_of(ctx), catalog, workflow, delivery, request, target,
                             tuple(platforms) or None, before_write=register, validation=validation,
                             budget_tokens=budget_tokens, judge=judge, budget_usd=budget_usd,
                             target_policy=policy)
    click.echo(f"created delivery {delivery} ({workflow}, {len(state.steps)} steps) in "
               f"phases/{delivery}/; run it with `specops run {delivery}`")
    if policy is not None:
        click.echo(f"target policy: {policy.framework}, "
                   + ("a newer SDK allowed" if policy.newer_sdk else "its own SDK line only")
                   + f" ({policy.origin})")
    if state.platforms_from or catalog.platforms_of(workflow):
        click.echo(platform_line(state.platforms_from))
    for line in before_first_run(store_of(ctx).root, state):
        click.echo(line)


def before_first_run(root: Path, state: Delivery) -> list[str]:
    """What `new` says stops the first run: each gate in its way, and a missing `dotnet` where
    a step validates `full` (with the way to run without one)."""
    from specops_dag.delivery.queries import ahead_lines, gate_plan, runnable_steps

    lines = ahead_lines(state.phase, gate_plan(root, state), "first",
                        bool(runnable_steps(state)))
    full = [s.name for s in state.steps if s.validation == "full"]
    if full and shutil.which("dotnet") is None:
        lines.append(f"note: `dotnet` is not on PATH and {', '.join(full)} validate `full` (a "
                     ".NET build and tests), so the first of them will block before its agent "
                     "call: install the .NET 10 SDK (https://dot.net/download), or, for a change "
                     "of documentation only, create the delivery with `specops new "
                     f"{state.workflow} <id> --validation docs-only ...`")
    return lines


def target_policy(catalog, workflow: str, repo: Path, validation: str | None):
    """The .NET target policy of validation.yaml resolved for `repo` (frozen in the snapshot by
    `new`). None when no step builds .NET (every step validates `none`), or when the repository
    pins no supported target and no step validates `full` (a docs-only delivery); refused when
    a `full` step would need it."""
    from specops_dag.delivery.model import TargetRecord
    from specops_dag.validation.sdk import resolve_target

    modes = {validation} if validation else {
        catalog.phases[p].validation_mode for p in catalog.phase_ids_of(workflow)
    } if workflow in catalog.workflows else set()
    if not modes & {"full", "docs-only"}:
        return None
    rule = catalog.validation.target
    policy = resolve_target(rule.framework, rule.newer_sdk, rule.newer_runtime,
                            repo / "global.json", rule.origin)
    if isinstance(policy, str):
        if "full" in modes:
            raise click.UsageError(f"{repo}: {policy}; nothing was created")
        return None
    return TargetRecord(framework=policy.framework, newer_sdk=policy.newer_sdk,
                        newer_runtime=policy.newer_runtime,
                        origin=f"{policy.origin}; frozen at `specops new`")


def read_request(text: str | None, file: Path | None) -> str:
    if (text is None) == (file is None):
        raise click.UsageError("give exactly one of --request TEXT or --request-file FILE")
    if file is None:
        return text or ""
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise click.UsageError(f"--request-file {file}: cannot read it as UTF-8 text "
                               f"({err})") from err


@main.command()
@click.argument("delivery", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@fail_cleanly
def status(ctx, delivery: str | None, as_json: bool) -> None:
    """Show every delivery, or one delivery's steps, gates, next actions and drift."""
    from specops_dag.delivery.queries import render_index, render_status, status_report

    store = store_of(ctx)
    if delivery is None:
        index = store.read_index()
        problems = unreadable(store, [e.id for e in index.deliveries])
        if as_json:
            click.echo(json.dumps({**index.model_dump(), "unreadable": problems}, indent=2))
            return
        click.echo(render_index(index.deliveries, problems))
        return
    check_delivery_id(delivery)
    state = store.read(delivery)
    report = status_report(store.root, state)
    if as_json:
        click.echo(json.dumps({**state.model_dump(by_alias=True), **report}, indent=2))
        return
    click.echo(render_status(state, report))


def unreadable(store: Store, deliveries: list[str]) -> dict[str, str]:
    """The deliveries whose state file cannot be read, with why: the list of deliveries is a
    summary, and a broken state file must not show there as what the summary last said."""
    from specops_dag.errors import StateError

    problems = {}
    for name in deliveries:
        try:
            store.read(name)
        except StateError as err:
            problems[name] = err.message
    return problems


@main.command()
@click.argument("delivery")
@click.argument("node", required=False)
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown",
              show_default=True, help="markdown: a pull-request body; json: the records.")
@click.pass_context
@fail_cleanly
def evidence(ctx, delivery: str, node: str | None, fmt: str) -> None:
    """Show what each completed node handed off, what proves it, what was waived and by whom,
    and what it cost: its evidence.json, checked against the sha256 in the state."""
    from specops_dag.execution.evidence import read_evidence, render_markdown

    store = store_of(ctx)
    check_delivery_id(delivery)
    state = store.read(delivery)
    records = read_evidence(store, state, node)
    if fmt == "json":
        click.echo(json.dumps(records[0] if node else {"delivery": delivery, "nodes": records},
                              indent=2, ensure_ascii=False))
        return
    click.echo(render_markdown(state, records), nl=False)


@main.command()
@click.argument("delivery")
@click.argument("node")
@click.option("--reason", default="", help="Why the node is reopened (kept in revisions).")
@click.pass_context
@fail_cleanly
def reopen(ctx, delivery: str, node: str, reason: str) -> None:
    """Set NODE and everything downstream of it back to pending; keep old handoffs as revisions."""
    from specops_dag.delivery import lifecycle as ops

    check_delivery_id(delivery)
    names = ops.reopen(store_of(ctx), delivery, node, reason)
    from specops_dag.dagster_adapter.instance import report_reopened, resolve_dagster_home

    state = store_of(ctx).read(delivery)
    report_reopened(resolve_dagster_home(ctx.obj), state.workflow, delivery, names,
                    reason or f"reopened from `{node}`")
    click.echo(f"reopened {', '.join(names)} of {delivery}; re-run with `specops run {delivery}`")


@main.command()
@click.argument("delivery")
@click.argument("node")
@click.pass_context
@fail_cleanly
def resume(ctx, delivery: str, node: str) -> None:
    """Put an `error` or `blocked` NODE back to pending with a fresh 3-call budget."""
    from specops_dag.delivery import lifecycle as ops

    check_delivery_id(delivery)
    ops.resume(store_of(ctx), delivery, node)
    click.echo(f"{node} of {delivery} is pending again; run it with `specops run {delivery}`")


@main.command()
@click.argument("delivery")
@click.argument("gate")
@click.option("--note", default="", help="What was checked, kept with the decision.")
@click.option("--reject", is_flag=True, help="Record a rejection instead of an approval.")
@click.pass_context
@fail_cleanly
def approve(ctx, delivery: str, gate: str, note: str, reject: bool) -> None:
    """Approve (or --reject) a human gate of a delivery."""
    check_delivery_id(delivery)
    from specops_dag.delivery.gates import decide

    made = decide(store_of(ctx), delivery, gate, note, reject)
    click.echo(f"{gate} {made.approval.decision} for {delivery} at {made.approval.at}")
    for line in made.notes(delivery):
        if line is not None:
            click.echo(line)


@main.command("dry-run")
@click.argument("delivery")
@click.argument("node", required=False)
@click.option("--prompt", "show_prompt", is_flag=True, help="Print the prompt itself, exactly as "
              "the next attempt would send it (secret values as `***`, as in its prompt.md).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: the parts and "
              "the prompt.")
@click.pass_context
@fail_cleanly
def dry_run_command(ctx, delivery: str, node: str | None, show_prompt: bool,
                    as_json: bool) -> None:
    """Show what the next attempt's prompt would inject, path by path (or, with --prompt, the
    prompt); change nothing."""
    check_delivery_id(delivery)
    text = render_dry_run(store_of(ctx), delivery, node, as_json, show_prompt)
    click.echo(text, nl=not text.endswith("\n"))


def render_dry_run(store: Store, delivery: str, node: str | None, as_json: bool,
                   show_prompt: bool = False) -> str:
    from specops_dag.agent.prompt import pick_step
    from specops_dag.agent.prompt import render_dry_run as render_preview
    from specops_dag.delivery import lifecycle as ops

    state = store.read(delivery)
    step = pick_step(state, node)
    return render_preview(store.root, state, step, ops.snapshot_catalog(store, state), as_json,
                          show_prompt)


@main.command()
@click.argument("delivery")
@click.option("--executor", type=click.Choice(["multiprocess", "in_process"]),
              default="multiprocess", show_default=True, help="Dagster executor for the run.")
@click.option("--timeout", "timeout_s", type=Positive(),
              default=6 * 3600, show_default=True,
              help="Deadline in seconds for the whole run.")
@click.option("--dry-run", "dry", is_flag=True, help="Print the next prompt's parts; change "
              "nothing.")
@click.option("--push", is_flag=True, help="Push feat-<delivery> to origin after the last step.")
@click.pass_context
@fail_cleanly
def run(ctx, delivery: str, executor: str, timeout_s: float, dry: bool, push: bool) -> None:
    """Run a delivery's pending steps as a Dagster job run on the DAGSTER_HOME instance."""
    if dry and push:
        raise click.UsageError("--dry-run and --push cannot be combined: a dry run changes "
                               "nothing, a push writes to origin")
    check_delivery_id(delivery)
    if dry:
        click.echo(render_dry_run(store_of(ctx), delivery, None, False))
        return
    code = run_delivery(ctx.obj, delivery, executor, timeout_s)
    state = store_of(ctx).read(delivery)
    finished = all(s.status == "completed" for s in state.steps)
    if push and (code == 0 or finished):  # push_delivery refuses while a risk is open
        from specops_dag.delivery import lifecycle as ops

        summary = ops.push_delivery(store_of(ctx), delivery)
        click.echo(f"pushed feat-{delivery} to origin ({summary})")
    elif finished and code == 3:
        from specops_dag.delivery.queries import open_risks

        paths = ", ".join(r.path for r in open_risks(state))
        click.echo(f"blocked: every step is completed, but a risk is open ({paths}); decide it "
                   f"with `specops approve {delivery} risk --note ...` (or `--reject --note "
                   "...`)", err=True)
    sys.exit(code)


def run_delivery(root: Path, delivery: str, executor: str, timeout_s: float) -> int:
    from specops_dag.locking import held  # standard library only until the run lock is ours

    folder = root / "phases" / delivery
    if not (folder / "index.json").is_file():
        store_of_root(root).read(delivery)  # raises the "unknown delivery" error
    with held(folder / ".lock", f"phases/{delivery}/index.json", 30.0, root):
        pass  # a state lock that cannot be taken is said here, not in a step's traceback
    # One `specops run` per delivery at a time: a second one reports the conflict at once,
    # before it imports pydantic or Dagster.
    with held(folder / ".run.lock", f"delivery `{delivery}` (another `specops run`)", 0, root,
              owned=True) as claim:
        store_of_root(root).read(delivery)  # a state that breaks its rules: refused, no write
        claim()  # the owner record names this process to a loser on another host
        from specops_dag.cli.ui import demo_replay

        with demo_replay(root, click.echo):  # a demo root's runs play its scenario
            return run_locked(root, delivery, executor, timeout_s)


def store_of_root(root: Path) -> Store:
    from specops_dag.delivery.store import Store

    return Store(root)


def _fail_orphans(home: Path, delivery: str) -> None:
    from specops_dag.dagster_adapter.instance import fail_orphaned_runs

    for run_id in fail_orphaned_runs(home, delivery):
        click.echo(f"marked Dagster run {run_id} failed: its process was gone (killed)",
                   err=True)


def run_locked(root: Path, delivery: str, executor: str, timeout_s: float) -> int:
    from specops_dag.dagster_adapter.instance import (
        execute_job,
        job_name,
        register_delivery,
        resolve_dagster_home,
    )
    from specops_dag.delivery.model import METADATA_PENDING
    from specops_dag.delivery.queries import render_status, status_report

    store = store_of_root(root)
    state = store.read(delivery)
    log_dir = store.delivery_dir(delivery) / "runs"
    # `runs/active` exists while a `specops run` has its Dagster run going; found here, that
    # run was killed, and its Dagster run may still show STARTED.
    active = log_dir / "active"
    if all(s.status == "completed" and s.commits.get("metadata") != METADATA_PENDING
           for s in state.steps):  # nothing to run: no Dagster run for it
        if active.exists():
            _fail_orphans(resolve_dagster_home(root), delivery)
            active.unlink()
        click.echo(render_status(state, {**status_report(root, state), "drift": []}))
        click.echo(f"nothing to run: every step of {delivery} is completed")
        return 0 if state.status == "completed" else 3
    home = resolve_dagster_home(root)
    register_delivery(home, delivery)
    _fail_orphans(home, delivery)
    click.echo(f"running {job_name(state.workflow)} for {delivery} (DAGSTER_HOME={home}); "
               f"log: {log_dir / 'dagster-run.err'}")
    log_dir.mkdir(parents=True, exist_ok=True)
    active.write_text(f"{os.getpid()}\n", encoding="utf-8")
    try:
        result = execute_job(root, home, state.workflow, delivery, executor, timeout_s, log_dir)
    finally:
        active.unlink(missing_ok=True)
    if result.timed_out or result.exit_code != 0:
        # a `dagster job execute` stopped or killed (even after its last step) never reports
        # its run's end; this run is over and the next may have nothing to do, so mark it now
        _fail_orphans(home, delivery)
    state = store.read(delivery)
    click.echo(render_status(state, {**status_report(root, state), "drift": []}))
    if result.timed_out:
        click.echo(f"error: the run passed its {timeout_s:.0f} s deadline and was stopped",
                   err=True)
        return 1
    if result.exit_code != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-12:])
        click.echo(f"error: the Dagster run failed (exit {result.exit_code}); last lines of "
                   f"{log_dir / 'dagster-run.err'}:\n{tail}", err=True)
    if state.status == "completed":
        return 0
    if any(s.status == "error" for s in state.steps):
        return 1
    if any(s.status == "blocked" for s in state.steps):
        return 3  # a gate, a missing tool or a write conflict: a human has to act
    if result.exit_code == 0:
        click.echo(f"error: {unfinished(state)}", err=True)
    return 1 if result.exit_code != 0 else 3


def unfinished(state: Delivery) -> str:
    """Why a run that ended without an error or a gate left its delivery unfinished."""
    from specops_dag.delivery.queries import owner_alive

    busy = [s for s in state.steps if s.status == "running" and owner_alive(s.owner)]
    if busy:
        who = "; ".join(f"`{s.name}` by pid {s.owner.pid} on {s.owner.host}" for s in busy
                        if s.owner is not None)
        return (f"{state.phase} is not finished: another process is running {who}; wait for it "
                f"to end (or stop that process), then `specops run {state.phase}` again")
    waiting = ", ".join(s.name for s in state.steps if s.status != "completed")
    return (f"{state.phase} is not finished: {waiting} did not run; see `specops status "
            f"{state.phase}`, then `specops run {state.phase}` again")


@main.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              default=Path(".specops-demo"), show_default=True,
              help="Where the demo harness roots go (a fresh demo-N each time).")
@click.option("--executor", type=click.Choice(["multiprocess", "in_process"]),
              default="multiprocess", show_default=True, help="Dagster executor for the run.")
@fail_cleanly
def demo(directory: Path, executor: str) -> None:
    """Run a quick-delivery on a .NET fixture with the real codex CLI and the replay agent."""
    import os

    from specops_dag.agent.codex import AgentSettings, ensure_codex
    from specops_dag.cli.demo import create_demo_delivery, next_commands, prepare_demo
    from specops_dag.dagster_adapter.instance import register_delivery, resolve_dagster_home

    # No codex anywhere (a wheel install): the pinned CLI goes into the per-user cache first.
    ensure_codex(AgentSettings.from_env(), directory.resolve(), click.echo)
    has_dotnet = shutil.which("dotnet") is not None
    plan = prepare_demo(directory.resolve(), has_dotnet)
    home = resolve_dagster_home(plan.root)
    create_demo_delivery(plan, lambda: register_delivery(home, plan.delivery))
    click.echo(f"demo harness root: {plan.root} (a git repo with the `{plan.fixture}` fixture, "
               f"{plan.framework})")
    click.echo(f"delivery {plan.delivery} of quick-delivery; gate target-write approved by the "
               "demo; validation: " + plan.validation)
    if not has_dotnet:
        click.echo("note: `dotnet` is not on PATH, so this demo validates its documentation-only "
                   "change with docs-only; full validation (build with -warnaserror, dotnet test "
                   "with TRX) needs the .NET 10 SDK on PATH")
    os.environ.pop("SPECOPS_REPLAY_URL", None)  # the demo plays its own scenario, no other
    os.environ["DAGSTER_HOME"] = str(home)
    code = run_delivery(plan.root, plan.delivery, executor, 1800)  # with the demo's replay agent
    state = store_of_root(plan.root).read(plan.delivery)
    click.echo(f"state: {plan.root / 'phases' / plan.delivery / 'index.json'}")
    if state.worktree:
        click.echo(f"work: branch {state.branch} in {plan.root / state.worktree}")
    for step in state.steps:
        for art, ref in step.handoff.items():
            click.echo(f"handoff {step.name}/{art}: {ref.path} (sha256 {ref.sha256[:12]}…)")
        report = step.validation_report
        if report is not None and report.mode in ("full", "docs-only→full"):
            click.echo(f"validation {step.name}: {'passed' if report.passed else 'failed'} at "
                       f"`{report.stage}` with SDK {report.sdk_version}: {report.message}")
            for project in report.projects:
                click.echo(f"  TRX {project.trx}: {project.total} total, {project.executed} "
                           f"executed, {project.passed} passed, {project.failed} failed, "
                           f"{project.skipped} skipped")
    click.echo(f"Dagster: DAGSTER_HOME={home}; the run log is in "
               f"{plan.root / 'phases' / plan.delivery / 'runs'}")
    for line in next_commands(plan.root, home):
        click.echo(line)
    sys.exit(code)


@main.command()
@click.option("--port", type=click.IntRange(1, 65535), default=3000, show_default=True,
              help="The webserver's port on 127.0.0.1.")
@click.pass_context
@fail_cleanly
def ui(ctx: click.Context, port: int) -> None:
    """Start the Dagster UI (`dagster dev` on 127.0.0.1) for the harness root, with its
    DAGSTER_HOME and SPECOPS_ROOT; in a `specops demo` root also its replay agent, so a run the
    UI, a sensor or a schedule launches never calls a model provider. Ctrl-C stops it."""
    from specops_dag.cli.ui import demo_replay_server, exec_ui, replay_note
    from specops_dag.dagster_adapter.instance import resolve_dagster_home

    server = demo_replay_server(ctx.obj)
    if server is not None:
        click.echo(replay_note(ctx.obj, server.url))
    exec_ui(ctx.obj, resolve_dagster_home(ctx.obj), port, server, click.echo)


@main.command()
@click.option("--name", default=None, help="The Celery worker's name (its node is NAME@host), "
              "recorded by every step it runs; default specops-<pid>.")
@click.option("--broker", envvar=BROKER_ENV, help="The Celery broker URL, as the launching "
              f"process's run config names it (env {BROKER_ENV}).")
@click.option("--backend", envvar=BACKEND_ENV, help="The Celery result backend URL (env "
              f"{BACKEND_ENV}); default: the broker.")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="The worker's own folder, its working directory and where its Celery config "
              "goes; default <root>/.specops/workers/<name>.")
@click.option("--queue", "queues", multiple=True, default=("dagster",), show_default=True,
              help="A Celery queue to take steps from (up to 4; repeat the option).")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many steps this worker runs at once.")
@click.option("--loglevel", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              default="INFO", show_default=True, help="The Celery worker's log level.")
@click.option("--no-dotnet", is_flag=True, help="Start without `dotnet` on PATH: a step that "
              "validates `full` is then blocked on this worker, before its agent call.")
@click.pass_context
@fail_cleanly
def worker(ctx, name: str | None, broker: str | None, backend: str | None,
           directory: Path | None, queues: tuple[str, ...], concurrency: int, loglevel: str,
           no_dotnet: bool) -> None:
    """Start a Celery worker for `dagster job execute -m specops_dag.dagster_adapter.celery`,
    after checking that this machine has what a step needs: the harness root, DAGSTER_HOME, the
    codex CLI, `dotnet`, the cache folder and the broker (exit 3 naming what is missing)."""
    from specops_dag.cli.worker import Worker, start_worker

    if len(queues) > 4:
        raise click.UsageError("at most 4 queues: dagster-celery cannot start a worker on more")
    name = name or f"specops-{os.getpid()}"
    folder = (directory or ctx.obj / ".specops" / "workers" / name).resolve()
    start_worker(Worker(root=ctx.obj, name=name, broker=broker, backend=backend, folder=folder,
                        queues=queues, concurrency=concurrency, loglevel=loglevel,
                        dotnet=not no_dotnet), click.echo)


@main.command()
@click.argument("path", required=False, default=".",
                type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--mode", type=click.Choice(["full", "docs-only"]), default="full",
              show_default=True, help="full: build and test; docs-only: pass a change of "
              "documentation only (against --base), else validate in full.")
@click.option("--base", default="HEAD", show_default=True, help="docs-only: the commit the "
              "change is measured against.")
@click.option("--delivery", default="", help="docs-only: the delivery whose phases/ files count "
              "as its own documents and bookkeeping.")
@click.option("--judge", type=click.Choice(["absolute", "regressions"]), default=None,
              help="Override `validation.judge` of PATH/workflow_defs/validation.yaml.")
@click.option("--baseline", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="A base tree's `specops validate --json` report to judge against "
              "(regressions: its warnings and tests; absolute: its NuGetAudit advisories).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@fail_cleanly
def validate(path: Path, mode: str, base: str, delivery: str, judge: str | None,
             baseline: Path | None, as_json: bool) -> None:
    """Validate a .NET repository as a step would, with the layout of
    PATH/workflow_defs/validation.yaml when there is one.

    Exit codes: 0 passed; 1 failed (the report names the stage and what to fix), or git could
    not read the repository; 2 bad input (an option, PATH, validation.yaml or the --baseline
    file; nothing ran); 3 environment: no `dotnet` on PATH, an SDK or runtime the target policy
    refuses, or a NuGet audit failure that validation.yaml blames on the environment."""
    import tempfile

    from specops_dag.validation import validate_attempt
    from specops_dag.workflow.catalog import load_layout

    layout = load_layout(path.resolve())
    layout = layout.model_copy(update={"judge": judge}) if judge else layout
    base_report = read_baseline(baseline) if baseline else None
    with tempfile.TemporaryDirectory(prefix="specops-validate-") as logs:
        report = validate_attempt(mode, path.resolve(), delivery=delivery, base_commit=base,
                                  log_dir=Path(logs), config=layout, baseline=base_report)
        click.echo(json.dumps(report.as_metadata(), indent=2) if as_json else report.describe())
    sys.exit(0 if report.passed else 3 if report.blame == "environment" else 1)


def read_baseline(path: Path) -> dict:
    """A base tree's `specops validate --json` report, refused as bad input when it is not one."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        report, why = None, str(err)
    else:
        why = f"a JSON {type(report).__name__}, not an object"
    if not isinstance(report, dict):
        raise UsageError(f"--baseline {path}: not a `specops validate --json` report ({why}); "
                         "pass the file `specops validate --json` wrote for the base tree")
    return report


@main.command("replay-server")
@click.option("--scenario", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              required=True, help="Scenario YAML: per node, attempts of scripted turns.")
@click.option("--port", type=int, default=0, show_default=True, help="0 picks a free port.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Append every request (JSON lines) here.")
@fail_cleanly
def replay_server(scenario: Path, port: int, log_path: Path | None) -> None:
    """Serve the OpenAI Responses API on 127.0.0.1 from a scenario, for the real codex CLI."""
    from specops_dag.agent.replay import ReplayServer, load_scenario

    server = ReplayServer(load_scenario(scenario), port=port, log_path=log_path)
    click.echo(f"replay agent on {server.url} (scenario {scenario}); point specops at it with "
               f"SPECOPS_REPLAY_URL={server.url}", err=False)
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
