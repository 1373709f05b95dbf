"""The dependency rule of the package layout (README "Code map"), as an AST check over every
module of `specops_dag`, function-local imports included: each package imports only the packages
its row allows, Dagster only in the Dagster adapter, click only in the CLI, and the level-0
modules and the pre-tool-use hook only the standard library."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from .support.harness import REPO

PACKAGE = REPO / "specops_dag"
LEVEL0 = {"errors", "files", "locking", "process", "builtin", "graph"}
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
    "dagster_adapter": {"dagster", "pydantic", "yaml", "psutil", "git"},
    "cli": {"click", "pydantic", "yaml", "psutil", "git"},
    "definitions": set(),
}
STDLIB_ONLY = {"hooks/walk.py", "hooks/rules.py", "hooks/patch.py", "hooks/shell.py", "hooks/tdd.py",
               "hooks/guard.py"}


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
            else:
                found.append((node.lineno, name, top))
    return found


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
            elif unit == "cli" and target == "dagster_adapter" and top_level:
                out.append(f"{where} (the CLI imports the Dagster adapter inside the command "
                           "that needs it)")
        elif top not in sys.stdlib_module_names and top != "__future__":
            allowed = set() if rel in STDLIB_ONLY else THIRD_PARTY.get(unit, set())
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
    try:
        assert violations(bad) == [
            "specops_dag/workflow/_probe_for_test.py:2: imports dagster (a third-party package "
            "workflow may not import)",
            "specops_dag/workflow/_probe_for_test.py:3: imports specops_dag.execution "
            "(workflow may import ['builtin', 'errors', 'files', 'graph', 'locking', 'process'])"]
        assert violations(cli) == [
            "specops_dag/cli/_probe_for_test.py:1: imports specops_dag.dagster_adapter "
            "(the CLI imports the Dagster adapter inside the command that needs it)"]
    finally:
        bad.unlink()
        cli.unlink()


@pytest.mark.parametrize("package", sorted(p.parent for p in PACKAGE.glob("*/__init__.py")),
                         ids=lambda p: p.name)
def test_every_package_opens_with_what_it_owns(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc and 1 <= doc.count(". ") + doc.endswith(".") <= 4, package.name
