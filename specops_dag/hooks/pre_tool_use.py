"""`specops hook pre-tool-use`, the fail-closed half: the PreToolUse payload's checks, then the
command's walk (`walk`, which applies `rules`) and the TDD rule (`tdd`), all within
PRE_TOOL_BUDGET_S; a call it cannot check, or cannot check in time, is denied. It runs on every
agent tool call, so it imports only the standard library and the other pre-tool-use modules,
and writes its own bytecode."""

from __future__ import annotations

import json
import os
import sys

from specops_dag.hooks import Deadline

# `typing` alone costs more than this hook's work.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from specops_dag.hooks.walk import Walk

PRE_TOOL_BUDGET_S = 20.0  # inside the 30 s codex timeout of pre-tool-use (codex.HOOKS)


def deny_reason(env: dict[str, str]) -> str | None:
    """The deny reason for the tool call on stdin, or None to allow it."""
    deadline = Deadline(PRE_TOOL_BUDGET_S)  # a check that runs out of time denies
    deadline.start()
    try:
        return check_tool_call(env)
    finally:
        deadline.close()


def check_tool_call(env: dict[str, str]) -> str | None:
    """The deny reason for the tool call on stdin, or None to allow it."""
    try:
        return _check(sys.stdin.buffer.read(), env)
    except Exception as err:  # fail closed: a call that cannot be checked does not run
        return (f"specops hook pre-tool-use could not check this call ({type(err).__name__}: "
                f"{str(err)[:300]}), so it is denied; retry with a simpler command")


def cache_bytecode() -> None:
    """PYTHONDONTWRITEBYTECODE (common in containers) would recompile this hook's ~1,400 lines on
    every tool call, which costs more than the interpreter's start-up: write their bytecode."""
    sys.dont_write_bytecode = False  # for walk, rules, patch and tdd, imported next
    for module in (sys.modules.get("specops_dag.hooks"), sys.modules.get(__name__)):
        compile_once(getattr(module, "__file__", None),
                     getattr(getattr(module, "__spec__", None), "cached", None))


def compile_once(source: object, cached: object) -> None:
    """Write the bytecode of a module imported before `cache_bytecode` ran, if it is stale."""
    if not isinstance(source, str) or not isinstance(cached, str):
        return
    try:
        if os.stat(cached).st_mtime >= os.stat(source).st_mtime:
            return
    except OSError:
        pass
    import py_compile

    try:
        py_compile.compile(source, cached, quiet=2)
    except OSError:  # a read-only install: it only costs time
        pass


def _check(raw: bytes, env: dict[str, str]) -> str | None:
    cache_bytecode()
    from specops_dag.hooks import walk as walker

    try:
        payload = json.loads(raw)
    except ValueError as err:
        return (f"the PreToolUse payload on stdin is not JSON ({str(err)[:200]}); specops denies "
                "calls it cannot check")
    if not isinstance(payload, dict):
        return "the PreToolUse payload on stdin is not a JSON object; specops denies calls it " \
               "cannot check"
    tool_input = payload.get("tool_input")
    if tool_input is not None and not isinstance(tool_input, dict):
        return "tool_input is not a JSON object; specops denies calls it cannot check"
    command = (tool_input or {}).get("command")
    if command is None:
        return None  # a tool without a command (e.g. an MCP tool): nothing to check
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        command = " ".join("'" + w.replace("'", "'\\''") + "'" for w in command)
    if not isinstance(command, str):
        return (f"tool_input.command is {type(command).__name__}, not a string; specops denies "
                "calls it cannot check")
    cwd = payload.get("cwd")
    here = cwd if isinstance(cwd, str) and os.path.isabs(cwd) and os.path.isdir(cwd) \
        else os.getcwd()
    workdir = (tool_input or {}).get("workdir")
    if isinstance(workdir, str) and workdir:  # the call's own folder, relative to the session's
        here = os.path.normpath(os.path.join(here, workdir))
    repo = repository_root(here, env)
    if payload.get("tool_name") == "apply_patch" or command.lstrip().startswith("*** Begin Patch"):
        walk = walker.Walk(repo, env, here)
        walk.record_patch(command)
    else:
        walk = walker.inspect(command, repo, env, here)
    return walk.reason or tdd_reason(walk, env)


def repository_root(here: str, env: dict[str, str]) -> str:
    """The root of the repository the call works in, whatever folder it runs from: the
    delivery's target (the agent's working directory) when the call runs inside it, else the
    nearest folder with a `.git` (a worktree has a `.git` file), else the call's own folder."""
    target = (env.get("SPECOPS_TARGET") or "").rstrip("/")
    if target and (here == target or here.startswith(target + "/")):
        return target
    folder = here
    while not is_repository(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            return here
        folder = parent
    return folder


def is_repository(folder: str) -> bool:
    """A git work tree's root: a `.git` file (a worktree) or a `.git` folder with a HEAD."""
    dot_git = os.path.join(folder, ".git")
    return os.path.isfile(dot_git) or os.path.isfile(os.path.join(dot_git, "HEAD"))


def tdd_reason(walk: Walk, env: dict[str, str]) -> str | None:
    """Seed 001 §7: every C# product file the call edits needs a matching test file."""
    from specops_dag.hooks import tdd

    repo = walk.repo.rstrip("/") + "/"
    written = [p[len(repo):] for p in walk.writes if p.startswith(repo)]
    edited = [p for p in written if p.lower().endswith(".cs")]
    if not edited:
        return None
    root = env.get("SPECOPS_ROOT")
    try:  # the rules of the delivery the session serves, as `specops new` froze them
        rules = tdd.load_rules(root or walk.repo, env.get("SPECOPS_DELIVERY", "") if root else "")
    except tdd.ConfigError as err:
        return err.message
    deleted = {p[len(repo):] for p in walk.deleted if p.startswith(repo)}
    contents = {p[len(repo):]: walk.files.get(p) for p in walk.writes if p.startswith(repo)}
    missing = tdd.missing_tests(edited, set(written), deleted, walk.repo, rules, contents)
    if not missing:
        return None
    more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
    return (f"TDD: C# product code needs a matching test file first: {'; '.join(missing[:3])}"
            f"{more}. Write the failing test first (apply_patch may add it and the product "
            "file together); if the file needs no test, say why in the file the current step "
            "names under RISK, and a person decides")
