"""Runners of the real command lines: `specops` and `dagster job execute` in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .harness import VENV_BIN


def specops(env: dict[str, str], root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "specops"), "--root", str(root), *args], env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def job_execute(env: dict[str, str], root: Path, job: str, delivery: str,
                executor: str = "in_process") -> subprocess.CompletedProcess:
    config = root / f"{executor}.yaml"
    config.write_text(f"execution:\n  config:\n    {executor}: {{}}\n")
    return subprocess.run(
        [str(VENV_BIN / "dagster"), "job", "execute", "-m", "specops_dag.definitions", "-j", job,
         "-c", str(config), "--tags", json.dumps({"dagster/partition": delivery})],
        env={**env, "SPECOPS_ROOT": str(root)}, cwd=root, capture_output=True, text=True,
        timeout=300, stdin=subprocess.DEVNULL)


def specops_at(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    return subprocess.run([str(VENV_BIN / "specops"), "--root", str(root), *args], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
