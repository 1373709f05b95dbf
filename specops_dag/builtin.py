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
WORK_RULES = BUILTIN_DEFS / "work-rules.md"
HOOK_RULES = "workflow_defs/hooks.json"  # of the harness root; the hook's `tdd.CONFIG`

FIXTURES = CHECKOUT / "dotnet_fixtures"
if not FIXTURES.is_dir():  # a wheel ships the demo's fixture (`all-pass`) inside the package
    FIXTURES = PACKAGE / "dotnet_fixtures"
DEMO_SCENARIO = PACKAGE / "demo_scenario.yaml"
WORKSPACE = CHECKOUT / "workspace.yaml"
if not WORKSPACE.is_file():
    WORKSPACE = PACKAGE / "workspace.yaml"
HOOK_GUARD = PACKAGE / "hooks" / "guard.py"

# package.json + package-lock.json pinning `@openai/codex`: the checkout's own (`npm ci` there
# installs node_modules/.bin/codex), or the copy a wheel ships, which `specops demo` installs
# into the per-user cache (specops_dag.agent.codex.codex_cache).
CODEX_NPM = CHECKOUT
if not (CODEX_NPM / "package-lock.json").is_file():
    CODEX_NPM = PACKAGE / "codex_npm"
