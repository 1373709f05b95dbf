from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import REPO, VENV_BIN

DOMAIN = ["specops_dag.definition", "specops_dag.catalog", "specops_dag.state",
          "specops_dag.delivery", "specops_dag.step", "specops_dag.process",
          "specops_dag.prompt", "specops_dag.errors", "specops_dag.launch", "specops_dag.cli"]


@pytest.mark.parametrize("module", DOMAIN)
def test_importing_a_domain_module_does_not_import_dagster(module: str) -> None:
    code = f"import sys, {module}; print('dagster' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_specops_status_runs_without_importing_dagster(tmp_path) -> None:
    code = ("import sys; from specops_dag.cli import main\n"
            "try:\n    main(['--root', sys.argv[1], 'status'])\n"
            "except SystemExit:\n    pass\n"
            "print('dagster' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.splitlines()[-1] == "False"


def test_no_module_is_named_utils_helpers_or_common() -> None:
    names = {p.stem for p in (REPO / "specops_dag").glob("*.py")}
    assert not names & {"utils", "helpers", "common"}


def test_the_console_script_is_installed() -> None:
    assert (VENV_BIN / "specops").exists()
