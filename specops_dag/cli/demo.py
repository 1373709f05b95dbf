"""`specops demo`: one command, no network, no credentials. It lays out a scratch harness root
from a `dotnet_fixtures/` repository (a real git repo), starts the replay agent, creates a
`quick-delivery` delivery and runs it through Dagster with the real codex CLI.

The demo's root keeps a copy of the scenario (`cli.ui.DEMO_MARK`): `specops run` and `specops ui`
in that root start the replay agent again, so a re-run (a reopen, a run the UI or a sensor
launches) plays the scenario too and never calls a model provider.

With a .NET 10 SDK on PATH the demo takes the `all-pass-net10` fixture (net10.0), with an older
SDK the `all-pass` one (net8.0), and validates `full` for real. Without `dotnet` on PATH the
delivery validates `docs-only` (its change is documentation only) and says what full validation
would need; nothing pretends a build ran.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specops_dag.builtin import DEMO_SCENARIO as SCENARIO
from specops_dag.builtin import FIXTURES, WORKSPACE
from specops_dag.cli.ui import DEMO_MARK, HOST, dagster_bin
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.gates import approve
from specops_dag.delivery.store import Store
from specops_dag.gitflow import git_out
from specops_dag.workflow.catalog import definition_roots, load_catalog

FIXTURE = "all-pass"  # net8.0; `all-pass-net10` where a .NET 10 SDK is installed
FIXTURE_NET10 = "all-pass-net10"
GITIGNORE = ".specops/\n.dagster_home/\nbin/\nobj/\n"
AGENTS = ("# AGENTS.md\n\nThis repository is a small .NET calculator used by the specops demo.\n"
          "Keep changes small, TargetFramework {tfm}, tests under tests/.\n")


@dataclass(frozen=True)
class DemoPlan:
    root: Path
    delivery: str
    validation: str
    fixture: str = FIXTURE

    @property
    def framework(self) -> str:
        return "net10.0" if self.fixture == FIXTURE_NET10 else "net8.0"


def demo_fixture(base: Path) -> str:
    """`all-pass-net10` when `dotnet --list-sdks` lists a 10.0 or newer SDK, else `all-pass`."""
    from specops_dag.process import run_process

    listed = run_process(["dotnet", "--list-sdks"], cwd=base, deadline_s=60).stdout
    majors = [int(m) for m in re.findall(r"^(\d+)\.\d+\.\d+", listed, re.MULTILINE)]
    return FIXTURE_NET10 if majors and max(majors) >= 10 else FIXTURE


def prepare_demo(base: Path, dotnet_available: bool) -> DemoPlan:
    """A fresh harness root `<base>/demo-N` holding the fixture as a committed git repository."""
    base.mkdir(parents=True, exist_ok=True)
    n = next(i for i in range(1, 10_000) if not (base / f"demo-{i}").exists())
    root = base / f"demo-{n}"
    plan = DemoPlan(root, f"demo-{n}", "full" if dotnet_available else "docs-only",
                    demo_fixture(base) if dotnet_available else FIXTURE)
    shutil.copytree(FIXTURES / plan.fixture, root)
    (root / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    if not (root / "AGENTS.md").exists():
        (root / "AGENTS.md").write_text(AGENTS.format(tfm=plan.framework), encoding="utf-8")
    who = {"GIT_AUTHOR_NAME": "specops demo", "GIT_AUTHOR_EMAIL": "demo@specops.invalid",
           "GIT_COMMITTER_NAME": "specops demo", "GIT_COMMITTER_EMAIL": "demo@specops.invalid"}
    git_out(root, "init", "-q", "-b", "main")
    git_out(root, "add", "-A")
    git_out(root, "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", "commit",
            "-q", "--no-verify", "-m", "demo fixture", env={**os.environ, **who})
    (root / DEMO_MARK).parent.mkdir(parents=True, exist_ok=True)  # .specops/ is ignored by git
    shutil.copyfile(SCENARIO, root / DEMO_MARK)
    return plan


def create_demo_delivery(plan: DemoPlan, register: Callable[[], None]) -> None:
    from specops_dag.cli.commands import target_policy

    store = Store(plan.root)
    catalog = load_catalog(definition_roots(plan.root), display_base=plan.root)
    ops.new_delivery(store, catalog, "quick-delivery", plan.delivery,
                     "Document how to use Calculator.Add for new contributors.",
                     before_write=register, validation=plan.validation,
                     target_policy=target_policy(catalog, "quick-delivery", plan.root,
                                                 plan.validation))
    approve(store, plan.delivery, "target-write",
                note="approved by `specops demo` (scripted replay agent)")


def specops_bin() -> Path:
    """This `specops`, absolute: the script the shell ran, else the one beside this Python."""
    me = Path(sys.argv[0])
    if me.name == "specops" and me.is_file():
        return me.absolute()
    return Path(sys.executable).parent / "specops"


def next_commands(root: Path, home: Path) -> list[str]:
    """What the demo prints last: its root's UI and nightly schedule as commands that work from
    any folder (absolute paths, every variable they need). `specops ui` starts the replay agent
    beside `dagster dev`: the demo's own agent stops with the demo."""
    q = shlex.quote
    return [f"UI: DAGSTER_HOME={q(str(home))} {q(str(specops_bin()))} --root {q(str(root))} ui",
            f"  dagster dev on http://{HOST}:3000 with this demo's replay agent: a run the UI, "
            "the gate_approvals sensor or the nightly schedule launches plays the demo's "
            "scenario, never a model provider; Ctrl-C stops both",
            f"nightly schedule: SPECOPS_ROOT={q(str(root))} DAGSTER_HOME={q(str(home))} "
            f"{q(str(dagster_bin()))} schedule start nightly -w {q(str(WORKSPACE))}"]
