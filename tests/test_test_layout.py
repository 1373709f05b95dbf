"""The tests' own layout: a test module imports its helpers from `tests/support/` and its
fixtures come from a `conftest.py`; no test module imports another module of tests/."""

from __future__ import annotations

import ast
from pathlib import Path

from .support.harness import REPO, write_tree

TESTS = REPO / "tests"


def imported(path: Path, tests: Path) -> list[tuple[int, str]]:
    """(line, dotted module relative to `tests`) of every import in `path` that names a module
    inside `tests`, at any depth of the file (imports inside functions count too)."""
    package = list(path.relative_to(tests).parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        targets: list[list[str]] = []
        if isinstance(node, ast.Import):
            targets = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            module = (node.module or "").split(".")
            targets = [module + [alias.name] for alias in node.names] if module == ["tests"] \
                else [module]
        elif isinstance(node, ast.ImportFrom):
            if node.level - 1 > len(package):
                continue  # above tests/: not a module of the tests
            base = package[:len(package) - (node.level - 1)]
            if node.module:
                targets = [base + node.module.split(".")]
            else:  # `from . import x`: each name is a module
                targets = [base + [alias.name] for alias in node.names]
            targets = [["tests", *t] for t in targets]
        for target in targets:
            if target[0] == "tests" and len(target) > 1:
                found.append((node.lineno, ".".join(target[1:])))
    return found


def allowed(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "support" or parts[-1] == "conftest"


def violations(tests: Path) -> list[str]:
    """`file:line imports module` for every import from a test module (test_*.py) of a module of
    `tests` other than support/ and a conftest, and from support/ of anything outside it."""
    problems = []
    for path in sorted(tests.rglob("*.py")):
        rel = path.relative_to(tests)
        in_support = rel.parts[0] == "support"
        if not (path.name.startswith("test_") or in_support):
            continue
        for line, module in imported(path, tests):
            if (module.split(".")[0] != "support") if in_support else not allowed(module):
                problems.append(f"tests/{rel}:{line} imports tests.{module}")
    return problems


def test_no_test_module_imports_another_module_of_the_tests() -> None:
    problems = violations(TESTS)
    assert problems == [], ("move what is shared into tests/support/ (fixtures into "
                            "conftest.py):\n" + "\n".join(problems))


def test_helper_modules_live_in_support() -> None:
    loose = sorted(p.name for p in TESTS.glob("*.py")
                   if not p.name.startswith("test_") and p.name not in ("__init__.py",
                                                                        "conftest.py"))
    assert loose == [], f"helper modules outside tests/support/: {loose}"
    assert (TESTS / "support" / "__init__.py").is_file()


def test_the_check_finds_every_kind_of_import_of_a_test_module(tmp_path: Path) -> None:
    tests = write_tree(tmp_path / "tests", {
        "__init__.py": "",
        "conftest.py": "",
        "support/__init__.py": "",
        "support/git.py": "from .harness import x\nfrom ..test_b import y\n",
        "support/harness.py": "",
        "test_b.py": "",
        "helpers.py": "",
        "test_a.py": """
            import os
            from . import conftest
            from .conftest import fixture_helper
            from .support import harness
            from .support.git import x
            from .test_b import y
            from . import test_b
            from .helpers import z
            import tests.test_b
            from tests import test_b as b
            from tests.support.harness import w


            def test_it():
                from .test_b import later
        """,
        "state/__init__.py": "",
        "state/conftest.py": "",
        "state/test_c.py": """
            from ..support.harness import x
            from .conftest import y
            from ..test_b import z
            from . import test_d
        """,
    })
    assert violations(tests) == [
        "tests/state/test_c.py:3 imports tests.test_b",
        "tests/state/test_c.py:4 imports tests.state.test_d",
        "tests/support/git.py:2 imports tests.test_b",
        "tests/test_a.py:6 imports tests.test_b",
        "tests/test_a.py:7 imports tests.test_b",
        "tests/test_a.py:8 imports tests.helpers",
        "tests/test_a.py:9 imports tests.test_b",
        "tests/test_a.py:10 imports tests.test_b",
        "tests/test_a.py:15 imports tests.test_b",
    ]
