"""Secrets never leak (issue #17, item 3): the product extends the user's effective
`shell_environment_policy` (the user's excludes, codex's KEY/SECRET/TOKEN defaults and
`*_API_KEY`), redacts every excluded value from what it saves, and commits no session
transcript to the product branch."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from specops_dag.agent.codex import AgentSettings, codex_argv, excluded_patterns, secret_values
from specops_dag.execution.step import run_step

from ..support.agents import create, replay, settings_for, world

SECRETS = {"DEMO_API_KEY": "sk-dummy-api-key-0001", "GH_TOKEN": "ghp_dummy_token_0002",
           "CORP_VAULT": "corp-dummy-vault-0003", "DB_SECRET_PASS": "dummy-db-secret-0004"}
USER_CONFIG = '[shell_environment_policy]\nexclude = ["CORP_*"]\n'


def test_the_users_excludes_are_extended_not_replaced(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(USER_CONFIG)
    patterns = excluded_patterns(tmp_path)
    assert patterns == ["*KEY*", "*SECRET*", "*TOKEN*", "CORP_*", "*_API_KEY"]
    argv = codex_argv("codex", sandbox="workspace-write", workdir=tmp_path,
                      last_message=tmp_path / "last.txt",
                      settings=AgentSettings(codex_home=str(tmp_path)), delivery="d1", node="n",
                      idle_timeout_s=60)
    at = argv.index("shell_environment_policy.ignore_default_excludes=false")
    assert argv[at - 3:at + 1] == [
        "-c", 'shell_environment_policy.exclude=["*KEY*", "*SECRET*", "*TOKEN*", "CORP_*", '
              '"*_API_KEY"]',
        "-c", "shell_environment_policy.ignore_default_excludes=false"]
    assert sorted(secret_values({**SECRETS, "PATH": "/usr/bin"}, patterns)) == sorted(
        SECRETS.values())


def test_without_a_user_config_the_defaults_and_api_keys_are_excluded(tmp_path: Path) -> None:
    assert excluded_patterns(tmp_path) == ["*KEY*", "*SECRET*", "*TOKEN*", "*_API_KEY"]


DUMP = "env | sort > env-dump.txt"


@pytest.mark.e2e
def test_an_agent_that_dumps_its_environment_leaks_no_secret_into_phases_or_the_branch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "codex-home").mkdir()
    (tmp_path / "codex-home/config.toml").write_text(USER_CONFIG)
    root, _ = world(tmp_path, "harness root is the git target")
    store = create(root, None)
    nodes = {"write": [{"literal": {"before": [{"shell": DUMP}]}}], "review": [{"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        settings = settings_for(server, tmp_path)
        assert [run_step(store, "d1", n, settings=settings).status
                for n in ("write", "review")] == ["completed", "completed"]
    dump = (root / ".specops/worktrees/d1/env-dump.txt").read_text()
    assert "CODEX_HOME=" in dump  # the dump ran, inside the agent's session
    leaks = [f"{path.relative_to(root)}: {name}" for path in (root / "phases").rglob("*")
             if path.is_file() for name, value in SECRETS.items()
             if value in path.read_text(errors="replace")]
    assert leaks == []
    assert (root / "phases/d1/write/step0-output.json").is_file()  # kept for debugging
    commits = subprocess.run(["git", "rev-list", "feat-d1"], cwd=root, capture_output=True,
                             text=True, check=True, timeout=30).stdout.split()
    for commit in commits:
        files = subprocess.run(["git", "ls-tree", "-r", "--name-only", commit], cwd=root,
                               capture_output=True, text=True, check=True, timeout=30).stdout
        assert "-output.json" not in files, commit  # transcripts are never committed
        for value in SECRETS.values():
            found = subprocess.run(["git", "grep", "-F", "-l", value, commit], cwd=root,
                                   capture_output=True, text=True, timeout=30)
            assert found.returncode == 1, (commit, found.stdout)
