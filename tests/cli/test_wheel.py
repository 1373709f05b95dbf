"""`pip install .` then `specops demo` in an empty folder: the wheel ships what the demo needs
(fixture, workspace.yaml, the npm lock that pins codex) and, with no codex anywhere, the demo
installs the pinned CLI into the per-user cache with `npm ci` of the packaged lock file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from specops_dag.agent import codex
from specops_dag.builtin import CODEX_NPM
from specops_dag.errors import ToolMissing

from ..support.dotnet import path_without_dotnet
from ..support.harness import REPO, VENV_BIN

REAL_CODEX = (REPO / "node_modules" / ".bin" / "codex").resolve()
LOCK = json.loads((REPO / "package-lock.json").read_text())
VERSION = LOCK["packages"]["node_modules/@openai/codex"]["version"]


def fake_npm(folder: Path, record: Path) -> Path:
    """An `npm` that records its argv, cwd and the lock file it was given, and installs
    node_modules/.bin/codex as a link to the checkout's real codex CLI (no download)."""
    folder.mkdir(parents=True, exist_ok=True)
    record.mkdir(parents=True, exist_ok=True)
    npm = folder / "npm"
    npm.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}/argv\npwd > {record}/cwd\n"
                   f"cp package-lock.json {record}/package-lock.json\n"
                   f"mkdir -p node_modules/.bin && ln -s {REAL_CODEX} node_modules/.bin/codex\n")
    npm.chmod(0o755)
    return folder


def bare_path(tmp_path: Path, *first: Path) -> str:
    """PATH without this venv, a codex or a dotnet (the demo then validates docs-only)."""
    keep = [p for p in os.environ["PATH"].split(":") if p and Path(p) != VENV_BIN
            and not (Path(p) / "codex").exists()]
    return path_without_dotnet(tmp_path, ":".join([*map(str, first), *keep]))


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """A fresh venv holding only the wheel built from this checkout (`--no-deps`, no index); its
    dependencies come from this venv's site-packages through a plain .pth line, which adds no
    .pth of that folder (so not this checkout's editable install)."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "--no-index", "-w", str(wheels), str(REPO)],
                   check=True, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    [wheel] = wheels.glob("specops_dag-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install",
                    "-q", "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True,
                   timeout=120, stdin=subprocess.DEVNULL)
    site = Path(subprocess.run([str(venv / "bin/python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "_deps_of_the_test_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # `dagster` is a console script of a dependency: the one pip would have written here.
    script = (VENV_BIN / "dagster").read_text().split("\n", 1)[1]
    (venv / "bin/dagster").write_text(f"#!{venv / 'bin/python'}\n{script}")
    (venv / "bin/dagster").chmod(0o755)
    return venv


@pytest.mark.e2e
def test_a_wheel_install_runs_the_demo_from_an_empty_folder_and_installs_the_pinned_codex(
        installed: Path, tmp_path: Path) -> None:
    empty, cache = tmp_path / "empty", tmp_path / "xdg-cache"
    empty.mkdir()
    record = tmp_path / "npm-record"
    env = {"PATH": bare_path(tmp_path, fake_npm(tmp_path / "fake-bin", record)), "HOME": str(tmp_path),
           "XDG_CACHE_HOME": str(cache), "LANG": "C.UTF-8"}
    where = json.loads(subprocess.run(
        [str(installed / "bin/python"), "-c", "import json, specops_dag.builtin as b; print("
         "json.dumps({k: str(getattr(b, k)) for k in ('PACKAGE', 'FIXTURES', 'WORKSPACE', "
         "'CODEX_NPM', 'BUILTIN_DEFS', 'HOOK_GUARD')}))"],
        cwd=empty, env=env, check=True, capture_output=True, text=True, timeout=60).stdout)
    package = Path(where.pop("PACKAGE"))
    assert package.parent.name == "site-packages" and package.is_relative_to(installed)
    assert all(Path(p).is_relative_to(package) and Path(p).exists() for p in where.values()), where
    # A file only the installed fixture has: the demo's repository must come from the wheel.
    (Path(where["FIXTURES"]) / "all-pass" / "FROM-THE-WHEEL.txt").write_text("installed\n")

    result = subprocess.run([str(installed / "bin/specops"), "demo", "--dir",
                             str(tmp_path / "demo"), "--executor", "in_process"], cwd=empty,
                            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    target = cache / "specops-dag" / f"codex-{VERSION}"
    root = tmp_path / "demo/demo-1"
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        f"codex CLI not found: installing the pinned @openai/codex {VERSION} into {target} "
        "(npm ci, once per user)",
        f"demo harness root: {root} (a git repo with the `all-pass` fixture, net8.0)"]
    assert "delivery demo-1  workflow quick-delivery  status completed" in lines
    assert f"state: {root}/phases/demo-1/index.json" in lines
    assert "handoff develop/changes: phases/demo-1/develop/changes.md" in result.stdout
    assert (f"Dagster: DAGSTER_HOME={root}/.dagster_home; the run log is in "
            f"{root}/phases/demo-1/runs") in lines
    home = f"{root}/.dagster_home"  # the UI and schedule commands, absolute, from the wheel
    assert lines[-3] == f"UI: DAGSTER_HOME={home} {installed}/bin/specops --root {root} ui"
    assert lines[-1] == (f"nightly schedule: SPECOPS_ROOT={root} DAGSTER_HOME={home} "
                         f"{installed}/bin/dagster schedule start nightly -w "
                         f"{where['WORKSPACE']}")
    assert (root / "FROM-THE-WHEEL.txt").read_text() == "installed\n"
    assert list(empty.iterdir()) == []  # nothing was written where it ran
    # npm ci ran once, with the lock file the wheel ships, in a folder renamed into the cache.
    assert (record / "argv").read_text().split() == ["ci", "--no-audit", "--no-fund"]
    assert (record / "package-lock.json").read_bytes() == (
        Path(where["CODEX_NPM"]) / "package-lock.json").read_bytes()
    assert (record / "package-lock.json").read_bytes() == (REPO / "package-lock.json").read_bytes()
    assert Path((record / "cwd").read_text().strip()).parent == target.parent
    assert [p.name for p in target.parent.iterdir()] == [target.name]
    state = json.loads((root / "phases/demo-1/index.json").read_text())
    assert [(s["name"], s["status"]) for s in state["steps"]] == [
        ("develop", "completed"), ("verify", "completed"), ("delivery", "completed")]
    output = json.loads((root / "phases/demo-1/develop/step0-output.json").read_text())
    assert output["argv"][0] == str(target / "node_modules/.bin/codex")  # codex of the cache
    assert f"-I {where['HOOK_GUARD']} pre-tool-use" in " ".join(output["argv"])  # hooks: installed


@pytest.fixture
def no_codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """As in a wheel install: no node_modules beside the package, no codex on PATH, an empty
    per-user cache. Returns the cache folder `install_codex` must fill."""
    monkeypatch.setattr(codex, "PACKAGE_ROOT", tmp_path / "site-packages")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SPECOPS_CODEX_BIN", raising=False)
    return tmp_path / "cache" / "specops-dag" / f"codex-{VERSION}"


def test_without_any_codex_the_demo_installs_the_pinned_one_with_npm_ci_into_the_cache(
        no_codex: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "record"
    monkeypatch.setenv("PATH", bare_path(tmp_path, fake_npm(tmp_path / "bin", record)))
    settings = codex.AgentSettings()
    with pytest.raises(ToolMissing, match="^the codex CLI is not installed: "):
        codex.find_codex(settings, tmp_path)
    said: list[str] = []
    found = codex.ensure_codex(settings, tmp_path, said.append)
    assert found == str(no_codex / "node_modules/.bin/codex")
    assert said == [f"codex CLI not found: installing the pinned @openai/codex {VERSION} into "
                    f"{no_codex} (npm ci, once per user)"]
    assert (record / "argv").read_text().split() == ["ci", "--no-audit", "--no-fund"]
    assert (record / "package-lock.json").read_bytes() == (CODEX_NPM / "package-lock.json"
                                                           ).read_bytes()
    assert codex.find_codex(settings, tmp_path) == found  # found from now on; no second install
    assert codex.ensure_codex(settings, tmp_path, said.append) == found and len(said) == 1
    version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == f"codex-cli {VERSION}"


def test_without_npm_the_install_says_what_to_install(
        no_codex: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(ToolMissing) as err:
        codex.ensure_codex(codex.AgentSettings(), tmp_path, print)
    assert err.value.message == (
        f"the codex CLI is not installed and `npm` is not on PATH to install the pinned "
        f"@openai/codex {VERSION}: install Node.js 18+ with npm (Debian: `apt-get install -y "
        f"nodejs npm`) and run this again, or set SPECOPS_CODEX_BIN to a codex {VERSION} binary")
    assert not no_codex.parent.exists()


def test_a_failed_npm_ci_installs_nothing_and_says_why(
        no_codex: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npm").write_text("#!/bin/sh\nmkdir -p node_modules/.bin\n"
                                 "echo 'npm error code E404' >&2\nexit 1\n")
    (bin_dir / "npm").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    with pytest.raises(ToolMissing) as err:
        codex.install_codex(lambda line: None)
    assert err.value.message == (
        f"`npm ci` of the pinned @openai/codex {VERSION} for {no_codex} exited 1 without "
        "node_modules/.bin/codex (nothing was installed): npm error code E404; check that npm "
        "reaches its registry (`npm config get registry`), or set SPECOPS_CODEX_BIN")
    assert list(no_codex.parent.iterdir()) == []


def test_a_wrong_codex_override_is_reported_not_replaced_by_an_install(
        no_codex: Path, tmp_path: Path) -> None:
    settings = codex.AgentSettings(codex_bin=str(tmp_path / "no-codex"))
    with pytest.raises(ToolMissing, match="is not an executable file; fix it or unset it"):
        codex.ensure_codex(settings, tmp_path, print)
    assert not no_codex.parent.exists()


def test_the_cache_follows_xdg_cache_home_and_the_pinned_version() -> None:
    assert json.loads((CODEX_NPM / "package.json").read_text())["dependencies"] == {
        "@openai/codex": VERSION}
    assert codex.codex_cache({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path(
        f"/c/specops-dag/codex-{VERSION}")
    for env in ({"HOME": "/h"}, {"XDG_CACHE_HOME": "relative", "HOME": "/h"}):
        assert codex.codex_cache(env) == Path(f"/h/.cache/specops-dag/codex-{VERSION}")
