"""The dependency rule of the package layout (docs/concepts.md, "Code map"), as an AST check over every
module of `specops_dag`, function-local imports included: each package imports only the packages
its row allows, Dagster only in the Dagster adapter, click only in the CLI, and the level-0
modules and the pre-tool-use hook only the standard library; inside `hooks/`, the pre-tool-use
modules import only each other (and `errors`), the state hooks (`context`) only the delivery,
workflow and `agent.prompt` modules."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from .support.harness import REPO

PACKAGE = REPO / "specops_dag"
LEVEL0 = {"errors", "files", "locking", "process", "builtin", "graph", "collector"}
# unit -> the units it may import (a unit is a level-0 module or a sub-package)
ALLOWED: dict[str, set[str]] = {
    **{m: LEVEL0 for m in LEVEL0},
    "gitflow": LEVEL0,
    "workflow": LEVEL0,
    "validation": LEVEL0 | {"gitflow", "workflow"},  # its config types are workflow models
    "delivery": LEVEL0 | {"workflow", "gitflow"},
    "agent": LEVEL0 | {"workflow", "delivery", "gitflow"},
    "hooks": LEVEL0 | {"workflow", "delivery", "agent"},
    "execution": LEVEL0 | {"workflow", "delivery", "gitflow", "validation", "agent"},
    "dagster_adapter": LEVEL0 | {"workflow", "delivery", "gitflow", "validation", "agent",
                                 "execution"},
    "cli": LEVEL0 | {"workflow", "delivery", "gitflow", "validation", "agent", "execution",
                     "hooks", "dagster_adapter"},
    "definitions": {"dagster_adapter"},  # the code location's module name, a shim
    "__init__": set(),
}
THIRD_PARTY: dict[str, set[str]] = {  # beyond the standard library
    "process": {"psutil"}, "gitflow": {"git"}, "workflow": {"pydantic", "yaml"},
    "delivery": {"pydantic", "yaml", "psutil", "git"}, "validation": {"playwright", "psutil", "git"},
    "agent": {"pydantic", "yaml"}, "hooks": {"pydantic"},
    "execution": {"pydantic", "yaml", "psutil", "git"},
    # celery, dagster-celery and dagster_shared only in the Celery code location and app
    "dagster_adapter": {"dagster", "dagster_celery", "dagster_shared", "celery", "pydantic",
                        "yaml", "psutil", "git"},
    "cli": {"click", "pydantic", "yaml", "psutil", "git"},
    "definitions": set(),
}
# The pre-tool-use hook runs on every agent tool call and fails closed: its modules import the
# standard library, each other and the package's `main`/`Deadline` only. A hooks module the table
# does not name is held to that rule too.
PRE_TOOL_USE = {"pre_tool_use", "shell", "walk", "rules", "patch", "tdd"}
PRE_TOOL_USE_IMPORTS = {"specops_dag.hooks", *(f"specops_dag.hooks.{m}" for m in PRE_TOOL_USE)}
HOOKS: dict[str, set[str]] = {  # hooks/ module -> the specops_dag modules (or packages) it may import
    **{f"hooks/{m}.py": PRE_TOOL_USE_IMPORTS for m in PRE_TOOL_USE},
    "hooks/tdd.py": PRE_TOOL_USE_IMPORTS | {"specops_dag.errors"},  # ConfigError is a UsageError
    "hooks/__init__.py": {"specops_dag.hooks.pre_tool_use", "specops_dag.hooks.context"},
    "hooks/__main__.py": {"specops_dag.hooks"},
    "hooks/guard.py": {"specops_dag.hooks"},
    "hooks/context.py": {"specops_dag.hooks", "specops_dag.delivery", "specops_dag.workflow",
                         "specops_dag.agent.prompt", *(f"specops_dag.{m}" for m in LEVEL0)},
}
STDLIB_ONLY = {rel for rel in HOOKS if rel != "hooks/context.py"}


def unit_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, absolute module, at module level) of every import in the file, at any depth."""
    module = ".".join(path.relative_to(REPO).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    package = package.removesuffix(".__init__")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    local = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if n is not f}
    found = []
    for node in ast.walk(tree):
        top = id(node) not in local
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name == "specops_dag":  # `from specops_dag import gitflow`
                found += [(node.lineno, f"specops_dag.{a.name}", top) for a in node.names]
            elif name == "specops_dag.hooks":  # `from specops_dag.hooks import walk`: by module
                names = [f"{name}.{a.name}" if is_module(f"{name}.{a.name}") else name
                         for a in node.names]
                found += [(node.lineno, n, top) for n in dict.fromkeys(names)]
            else:
                found.append((node.lineno, name, top))
    return found


def is_module(name: str) -> bool:
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def hooks_allow(rel: str, name: str) -> bool:
    """Whether the hooks module `rel` may import `name` (a module of its row in HOOKS, or one
    inside a package of it; `specops_dag.hooks` itself only exactly)."""
    allowed = HOOKS.get(rel, PRE_TOOL_USE_IMPORTS)
    return name in allowed or any(name.startswith(a + ".") for a in allowed
                                  if a != "specops_dag.hooks")


def violations(path: Path) -> list[str]:
    unit, rel = unit_of(path), path.relative_to(PACKAGE).as_posix()
    out = []
    for line, name, top_level in imports(path):
        top = name.split(".")[0]
        where = f"specops_dag/{rel}:{line}: imports {name}"
        if top == "specops_dag":
            target = name.split(".")[1] if name.count(".") else "__init__"
            if target != unit and target not in ALLOWED[unit]:
                out.append(f"{where} ({unit} may import {sorted(ALLOWED[unit]) or 'nothing'})")
            elif unit == "hooks" and not hooks_allow(rel, name):
                allowed = sorted(HOOKS.get(rel, PRE_TOOL_USE_IMPORTS))
                out.append(f"{where} ({rel} may import only {', '.join(allowed)})")
            elif unit == "cli" and target == "dagster_adapter" and top_level:
                out.append(f"{where} (the CLI imports the Dagster adapter inside the command "
                           "that needs it)")
        elif top not in sys.stdlib_module_names and top != "__future__":
            allowed = set() if rel in STDLIB_ONLY or unit == "hooks" and rel not in HOOKS \
                else THIRD_PARTY.get(unit, set())
            if top not in allowed:
                out.append(f"{where} (a third-party package {unit} may not import)")
    return out


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_belongs_to_a_unit_of_the_dependency_table() -> None:
    assert {unit_of(p) for p in MODULES} <= set(ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_a_module_imports_only_what_its_package_may_import(path: Path) -> None:
    assert violations(path) == []


def test_the_check_finds_a_forbidden_import_even_inside_a_function(tmp_path: Path) -> None:
    bad = PACKAGE / "workflow" / "_probe_for_test.py"
    bad.write_text("def f():\n    import dagster\n    from specops_dag.execution import step\n")
    cli = PACKAGE / "cli" / "_probe_for_test.py"
    cli.write_text("from specops_dag.dagster_adapter import instance\n"
                   "def f():\n    from specops_dag.dagster_adapter import instance\n")
    hook = PACKAGE / "hooks" / "_probe_for_test.py"  # on the pre-tool-use side by default
    hook.write_text("from specops_dag.hooks import main, walk\n"
                    "def f():\n    from specops_dag.hooks import context\n    import pydantic\n")
    try:
        assert violations(bad) == [
            "specops_dag/workflow/_probe_for_test.py:2: imports dagster (a third-party package "
            "workflow may not import)",
            "specops_dag/workflow/_probe_for_test.py:3: imports specops_dag.execution "
            "(workflow may import ['builtin', 'collector', 'errors', 'files', 'graph', 'locking', "
            "'process'])"]
        assert violations(cli) == [
            "specops_dag/cli/_probe_for_test.py:1: imports specops_dag.dagster_adapter "
            "(the CLI imports the Dagster adapter inside the command that needs it)"]
        assert violations(hook) == [
            "specops_dag/hooks/_probe_for_test.py:3: imports specops_dag.hooks.context "
            "(hooks/_probe_for_test.py may import only specops_dag.hooks, "
            "specops_dag.hooks.patch, specops_dag.hooks.pre_tool_use, specops_dag.hooks.rules, "
            "specops_dag.hooks.shell, specops_dag.hooks.tdd, specops_dag.hooks.walk)",
            "specops_dag/hooks/_probe_for_test.py:4: imports pydantic (a third-party package "
            "hooks may not import)"]
    finally:
        bad.unlink()
        cli.unlink()
        hook.unlink()


@pytest.mark.parametrize("package", sorted(p.parent for p in PACKAGE.glob("*/__init__.py")),
                         ids=lambda p: p.name)
def test_every_package_opens_with_what_it_owns(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc and 1 <= doc.count(". ") + doc.endswith(".") <= 4, package.name
