"""Fixtures shared by the test modules (their builders live in `tests/support/`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .support.dotnet import STANDIN
from .support.harness import DIAMOND, VENV_BIN, write_tree
from .support.hooks import SPECOPS_VARS


@pytest.fixture
def diamond_root(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "harness", DIAMOND)


@pytest.fixture
def all_pass_dotnet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `dotnet` stand-in on PATH, answering as the all-pass fixture's SDK would."""
    monkeypatch.setenv("PATH", f"{STANDIN}:{os.environ['PATH']}")
    monkeypatch.setenv("DOTNET_STANDIN_ANSWERS", str(STANDIN / "answers/all-pass.yaml"))


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment for child processes with a private DAGSTER_HOME."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    env = {**os.environ, "DAGSTER_HOME": str(home), "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    env.pop("SPECOPS_ROOT", None)
    return env


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small target repository as the session cwd, with a private HOME and no SPECOPS_* vars."""
    root = tmp_path / "repo"
    (root / "src/Orders").mkdir(parents=True)
    (root / "tests/Orders.Tests").mkdir(parents=True)
    (root / "src/Orders/OrderService.cs").write_text("class OrderService {}\n")
    (root / "tests/Orders.Tests/OrderServiceTests.cs").write_text("class T {}\n")
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in (*SPECOPS_VARS, "BUILD_DIR", "TMPDIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(root)
    return root
