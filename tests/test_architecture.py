from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .support.harness import REPO, VENV_BIN

PACKAGE = REPO / "specops_dag"
# Every module outside the Dagster adapter (and the `definitions` shim), from the tree itself.
OUTSIDE_ADAPTER = sorted(
    ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
    for p in PACKAGE.rglob("*.py")
    if p.relative_to(PACKAGE).parts[0] not in ("dagster_adapter", "definitions.py")
    and p.name != "__main__.py")


def printed(code: str, cwd: Path, *args: str) -> str:
    """What `python -c code` prints, in a fresh interpreter of this venv."""
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, check=True).stdout


def test_importing_every_module_outside_the_dagster_adapter_does_not_import_dagster() -> None:
    code = ("import importlib, sys\n"
            f"for m in {OUTSIDE_ADAPTER!r}:\n"
            "    importlib.import_module(m)\n"
            "    assert 'dagster' not in sys.modules, m\n"
            "print(len(sys.argv))")
    assert len(OUTSIDE_ADAPTER) > 40
    assert printed(code, REPO).strip() == "1"


def test_the_graph_module_loads_only_the_standard_library_and_dotnet_not_the_catalog() -> None:
    code = ("import sys; before = set(sys.modules); import specops_dag.graph; "
            "print(sorted(m for m in set(sys.modules) - before "
            "if m.partition('.')[0] not in sys.stdlib_module_names))")
    assert printed(code, REPO).strip() == "['specops_dag', 'specops_dag.graph']"
    code = "import sys, specops_dag.validation.dotnet; print('specops_dag.workflow.catalog' in sys.modules)"
    assert printed(code, REPO).strip() == "False"


@pytest.mark.e2e
def test_loading_the_code_location_leaves_the_step_executor_and_state_store_unloaded(
        tmp_path) -> None:
    # Every Dagster process (code server, daemon, run, step) loads the location; these load on
    # first use (a step, a schedule or sensor tick, a gate decision).
    code = ("import sys, specops_dag.definitions; print(sorted(m for m in ('git', 'psutil', "
            "'specops_dag.agent.replay', 'specops_dag.cli.demo', 'specops_dag.execution.step', "
            "'specops_dag.delivery.store', "
            "'specops_dag.delivery.lifecycle', 'specops_dag.delivery.gates') if m in sys.modules))")
    assert printed(code, tmp_path).strip() == "[]"


@pytest.mark.e2e
def test_loading_the_code_location_freezes_its_definitions_and_leaves_the_collector_on(
        tmp_path) -> None:
    # The collector is paused while `defs` is built and the result frozen (see long_lived_build).
    code = ("import gc; before = gc.get_freeze_count(); import specops_dag.definitions; "
            "print(gc.isenabled(), gc.get_freeze_count() > before + 10_000)")
    assert printed(code, tmp_path).strip() == "True True"


@pytest.mark.parametrize("args", [["status"], ["status", "d1"], ["dry-run", "d1"],
                                  ["dry-run", "d1", "write", "--json"]])
def test_status_and_dry_run_run_without_importing_dagster(tmp_path, args) -> None:
    from .support.agents import agentic_root, new

    root = agentic_root(tmp_path)
    new(root)
    code = ("import sys; from specops_dag.cli.commands import main\n"
            "try:\n    main(['--root', sys.argv[1], *sys.argv[2:]])\n"
            "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
            "print('dagster' in sys.modules)")
    assert printed(code, tmp_path, str(root), *args).splitlines()[-1] == "False"


def test_the_console_script_raises_the_collectors_first_threshold_and_freezes_the_heap_at_exit(
        tmp_path) -> None:
    # `specops` runs as its console script does; an atexit hook (run after `main` has returned
    # through `sys.exit`) reports how it left the collector.
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print(gc.get_threshold(), gc.isenabled(), "
            "gc.get_freeze_count() > 10_000))\n"
            "sys.argv = ['specops', '--root', sys.argv[1], 'status']\n"
            "from specops_dag.cli import main\nmain()")
    assert printed(code, tmp_path, str(tmp_path)).splitlines()[-1] == "(50000, 20, 20) True True"


def test_the_process_that_runs_a_step_raises_the_collectors_first_threshold_before_the_step(
        tmp_path) -> None:
    # Dagster's run worker (or a step worker) hands each step to the resource; the step sees the
    # thresholds already set, whatever the process started with.
    code = ("import gc, sys\n"
            "import specops_dag.execution.step as step\n"
            "from specops_dag.dagster_adapter.resources import SpecopsResource\n"
            "gc.set_threshold(700, 10, 10)\n"
            "step.run_step = lambda *a, **k: gc.get_threshold()\n"
            "print(SpecopsResource(root=sys.argv[1]).run_step('d1', 'wf', 'a'))")
    assert printed(code, tmp_path, str(tmp_path)).strip() == "(50000, 20, 20)"


def test_status_without_a_prices_file_prices_the_delivery_without_yaml_or_the_workflow_models(
        tmp_path) -> None:
    from .support.agents import agentic_root, new

    root = agentic_root(tmp_path)
    new(root)
    code = ("import sys; from specops_dag.cli.commands import main\n"
            "try:\n    main(['--root', sys.argv[1], 'status', 'd1'])\n"
            "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
            "print(sorted(m for m in ('yaml', 'specops_dag.workflow.model') if m in sys.modules))")
    assert printed(code, tmp_path, str(root)).splitlines()[-1] == "[]"


def test_no_module_is_named_utils_helpers_or_common() -> None:
    names = {p.stem for p in (REPO / "specops_dag").glob("*.py")}
    assert not names & {"utils", "helpers", "common"}


def test_the_console_script_is_installed() -> None:
    assert (VENV_BIN / "specops").exists()


def test_the_code_passes_ruff() -> None:
    result = subprocess.run([str(VENV_BIN / "ruff"), "check", "specops_dag", "tests",
                             "benchmarks"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout


def test_the_pre_tool_use_hook_imports_no_heavy_module() -> None:
    code = ("import sys, io, json; sys.stdin = io.StringIO(json.dumps({'tool_name': 'Bash', "
            "'tool_input': {'command': 'ls'}})); from specops_dag.hooks import main; main("
            "['pre-tool-use']); print(sorted(m for m in ('dagster', 'pydantic', 'click', 'yaml', "
            "'git') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=REPO, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
