"""docs/cli.md is `specops_dag.cli.reference.render()` of the click commands, and says what the
real `specops <command> --help` says; `specops --version` names the package version; the exit
codes `specops validate --help` states are the ones it ends with."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from specops_dag.cli.commands import main, package_version
from specops_dag.cli.reference import EXIT_CODES, REGENERATE, render
from specops_dag.errors import SpecopsError

from ..support.cli import specops
from ..support.dotnet import FIXTURES, path_without_dotnet
from ..support.harness import REPO, VENV_BIN, write_tree

CLI_MD = REPO / "docs" / "cli.md"


def section(page: str, title: str) -> str:
    """The text of the `## <title>` section of the page, up to the next `## ` heading."""
    parts = re.split(r"(?m)^## ", page)
    return next((p for p in parts[1:] if p.splitlines()[0].strip() == title), "")


def help_of(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "specops"), *command, "--help"], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_specops_version_prints_the_package_version_and_exits_0(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    result = specops(clean_env, tmp_path, "--version")
    assert (result.returncode, result.stdout, result.stderr) == (
        0, f"specops {importlib.metadata.version('specops-dag')}\n", "")


def test_the_version_falls_back_to_pyproject_without_an_installed_distribution(
        tmp_path: Path) -> None:
    pyproject = write_tree(tmp_path, {"pyproject.toml": """
        [project]
        name = "specops-dag"
        version = "9.8.7"
    """}) / "pyproject.toml"
    assert package_version("specops-dag-never-installed", pyproject) == "9.8.7"


def test_docs_cli_md_is_the_reference_rendered_from_the_commands() -> None:
    assert CLI_MD.read_text(encoding="utf-8") == render(), (
        f"docs/cli.md is stale: run `{REGENERATE}`")


def test_the_reference_says_how_to_regenerate_it_and_covers_every_command_in_order() -> None:
    page = render()
    assert page.startswith("<!-- Generated from the click commands by "
                           "specops_dag/cli/reference.py; do not edit.\n"
                           f"     Regenerate: {REGENERATE} -->\n")
    titles = re.findall(r"(?m)^## (.+)$", page)
    assert titles == ["specops (global options)", *(f"specops {n}" for n in main.commands),
                      "specops hook", "Exit codes"]


def test_the_reference_lists_every_error_class_under_its_exit_code() -> None:
    table = section(render(), "Exit codes")
    for cls in [SpecopsError, *all_subclasses(SpecopsError)]:
        if cls.__module__ == "specops_dag.errors":
            row = next((line for line in table.splitlines()
                        if line.startswith(f"| {cls.exit_code} | ")), "no row")
            assert f"`{cls.__name__}`" in row, f"{cls.__name__} missing from: {row}"
    assert set(EXIT_CODES) == {0, 1, 2, 3}


def all_subclasses(cls: type) -> list[type]:
    return [sub for child in cls.__subclasses__() for sub in (child, *all_subclasses(child))]


@pytest.mark.e2e
def test_the_reference_agrees_with_the_real_help_of_every_command() -> None:
    page = CLI_MD.read_text(encoding="utf-8")
    for name, title in [("", "specops (global options)"),
                        *((n, f"specops {n}") for n in main.commands)]:
        shown = help_of(*([name] if name else []))
        assert shown.returncode == 0, shown.stderr
        text = section(page, title)
        usage = " ".join(shown.stdout.split("\n\n")[0].split()).removeprefix("Usage: ")
        assert f"```text\n{usage}\n```" in text, f"{title}: usage `{usage}` not in docs/cli.md"
        first = " ".join(shown.stdout.split("\n\n")[1].split())
        assert first in " ".join(text.split()), f"{title}: help `{first}` not in docs/cli.md"
        options = re.findall(r"(?m)^  (--[\w-]+)", shown.stdout)
        assert options and all(f"- `{o}" in text for o in options), (
            f"{title}: --help lists {options}; docs/cli.md: run `{REGENERATE}`")


def test_validate_help_states_its_four_exit_codes() -> None:
    text = " ".join((main.commands["validate"].help or "").split())
    assert ("Exit codes: 0 passed; 1 failed (the report names the stage and what to fix), or git "
            "could not read the repository; 2 bad input (an option, PATH, validation.yaml or the "
            "--baseline file; nothing ran); 3 environment: no `dotnet` on PATH, an SDK or "
            "runtime the target policy refuses, or a NuGet audit failure that validation.yaml "
            "blames on the environment.") in text


@pytest.mark.e2e
def test_validate_ends_with_the_exit_codes_its_help_states(tmp_path: Path,
                                                           clean_env: dict[str, str]) -> None:
    def validate(repo: Path, *args: str, env: dict[str, str] = clean_env):
        return subprocess.run([str(VENV_BIN / "specops"), "validate", str(repo), *args], env=env,
                              capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)

    empty = write_tree(tmp_path / "empty", {"README.md": "# nothing to build\n"})
    assert validate(empty).returncode == 0
    orphan = write_tree(tmp_path / "orphan", {"src/A.cs": "class A {}\n"})
    failed = validate(orphan)
    assert (failed.returncode, failed.stdout.split(":")[0]) == (
        1, "validation `full` failed at stage `discovery`")
    (tmp_path / "base.json").write_text("[]\n")
    bad = validate(empty, "--baseline", str(tmp_path / "base.json"))
    assert (bad.returncode, bad.stdout, bad.stderr) == (
        2, "", f"error: --baseline {tmp_path / 'base.json'}: not a `specops validate --json` "
        "report (a JSON list, not an object); pass the file `specops validate --json` wrote "
        "for the base tree\n")
    (tmp_path / "base.json").write_text("{")
    broken = validate(empty, "--baseline", str(tmp_path / "base.json"))
    assert (broken.returncode, broken.stderr) == (
        2, f"error: --baseline {tmp_path / 'base.json'}: not a `specops validate --json` "
        "report (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)); "
        "pass the file `specops validate --json` wrote for the base tree\n")
    layout = write_tree(tmp_path / "layout", {"workflow_defs/validation.yaml": "bogus: 1\n"})
    assert validate(layout).returncode == 2
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "all-pass", project)
    no_sdk = validate(project, env={**clean_env, "PATH": path_without_dotnet(tmp_path)})
    assert (no_sdk.returncode, no_sdk.stderr) == (
        3, "error: the .NET SDK (`dotnet`) is not installed or not on PATH: install the .NET 10 "
        "SDK (https://dot.net/download; it also builds net8.0) so full validation can build and "
        "test; without an SDK, a delivery whose change is documentation only can run: create it "
        "with `specops new WORKFLOW DELIVERY --validation docs-only ...` (`specops validate "
        "--mode docs-only` for a folder)\n")
