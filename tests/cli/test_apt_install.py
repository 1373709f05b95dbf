"""`scripts/apt-install`, which `scripts/test` runs for the Debian packages the tests need: it says
what apt will install and upgrade before it does, asks at a terminal and goes on without one.
apt itself answers (`apt-get install -s`, which changes nothing); no test installs a package."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
from pathlib import Path

import pytest

from ..support.harness import REPO

SCRIPT = REPO / "scripts" / "apt-install"
FLAGS = ["--no-install-recommends", "--no-upgrade"]
# Small, in Debian 12, needed by no test or tool here; libarchive-tools needs its own version of
# libarchive13, so where an older one is installed apt upgrades it, and the plan must say so.
WANTED = ["cowsay", "libarchive-tools"]


def simulated(packages: list[str]) -> list[str] | None:
    """apt's own plan for `packages` (its `Inst` lines), or None where apt cannot plan it here."""
    if shutil.which("apt-get") is None:
        return None
    installed = subprocess.run(["dpkg-query", "-W", *packages], capture_output=True)
    plan = subprocess.run(["apt-get", "install", "-s", *FLAGS, *packages], capture_output=True,
                          text=True, timeout=120)
    if installed.returncode == 0 or plan.returncode != 0:
        return None
    return [line for line in plan.stdout.splitlines() if line.startswith("Inst ")]


def plan_lines(packages: list[str], inst: list[str]) -> list[str]:
    new = [line.split()[1] for line in inst if not line.split()[2].startswith("[")]
    upgraded = [line.split() for line in inst if line.split()[2].startswith("[")]
    lines = [f"scripts/test: the tests need Debian packages that are not installed: "
             f"{' '.join(packages)}",
             f"scripts/test: `apt-get install -y {' '.join(FLAGS)} {' '.join(packages)}` "
             f"installs {len(new)} package(s):", f"  {' '.join(new)}"]
    if upgraded:
        lines.append(f"and upgrades {len(upgraded)} installed package(s) that these need a "
                     "newer version of (nothing else is upgraded):")
        lines += [f"  {w[1]} {w[2][1:-1]} -> {w[3][1:]}" for w in upgraded]
    return lines


def test_a_dry_run_lists_what_apt_would_install_and_upgrade_and_installs_nothing() -> None:
    inst = simulated(WANTED)
    if inst is None:
        pytest.skip("apt cannot plan installing these here (no apt, no lists, or installed)")
    result = subprocess.run(["bash", str(SCRIPT), "--dry-run", *WANTED], capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr.splitlines() == [*plan_lines(WANTED, inst),
                                          "scripts/test: dry run, nothing was installed"]
    assert simulated(WANTED) is not None  # still not installed


def test_packages_already_installed_need_nothing() -> None:
    if shutil.which("apt-get") is None:
        pytest.skip("no apt here")
    result = subprocess.run(["bash", str(SCRIPT), "--dry-run", "bash"], capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stderr.splitlines()[-1]) == (
        0, "scripts/test: apt has nothing to install for bash")


def test_at_a_terminal_it_asks_first_and_an_answer_other_than_yes_installs_nothing() -> None:
    inst = simulated(WANTED)
    if inst is None or os.getuid() != 0:
        pytest.skip("needs root and an apt that can plan installing these")
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the terminal
        os.environ.update(SPECOPS_APT_UPDATE="0", CI="")  # plan from the lists as they are
        os.execvp("bash", ["bash", str(SCRIPT), *WANTED])
    seen = b""
    while b"[y/N] " not in seen:
        seen += os.read(fd, 4096)
    os.write(fd, b"n\n")
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the terminal closed: the script ended
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2
    assert seen.decode().replace("\r\n", "\n").splitlines() == [
        *plan_lines(WANTED, inst), "scripts/test: install them? [y/N] n",
        f"scripts/test: nothing was installed; install them yourself (`apt-get install -y "
        f"{' '.join(FLAGS)} {' '.join(WANTED)}`), then run `bash scripts/test` again"]
    assert simulated(WANTED) is not None


def test_scripts_test_installs_missing_packages_only_through_apt_install() -> None:
    text = (REPO / "scripts" / "test").read_text()
    assert 'bash scripts/apt-install "${missing[@]}"' in text
    assert "apt-get install" not in text and Path(SCRIPT).stat().st_mode & 0o111
