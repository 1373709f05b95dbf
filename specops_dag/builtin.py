"""Where the files specops ships are, in a checkout and in a wheel: the built-in workflow
definitions and work rules, the .NET fixtures and the demo scenario, `workspace.yaml`, the hook
guard codex runs, and the npm package that pins the codex CLI. Standard library only."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent  # the repository in a checkout; site-packages in a wheel install

BUILTIN_DEFS = CHECKOUT / "workflow_defs"
if not BUILTIN_DEFS.is_dir():  # a wheel install ships them inside the package
    BUILTIN_DEFS = PACKAGE / "builtin_defs"
BUILTIN_PREFIX = "built-in:workflow_defs/"

FIXTURES = CHECKOUT / "dotnet_fixtures"
if not FIXTURES.is_dir():
    FIXTURES = PACKAGE / "dotnet_fixtures"
DEMO_SCENARIO = PACKAGE / "demo_scenario.yaml"
WORKSPACE = CHECKOUT / "workspace.yaml"
HOOK_GUARD = PACKAGE / "hooks" / "guard.py"
