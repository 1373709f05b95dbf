"""Every command the built-in texts tell an agent to run is a contract (issue 43): run exactly as
written (placeholders filled for the all-pass-net10 fixture) by the replay agent through the real
codex CLI, in the writing sandbox, with the real SDK, it does what the text says. The inventory
lists each backticked command of the work rules, phase goals and skills (one that starts with a
program of PROGRAMS, `dotnet`, `git`, `specops`, `nuget`, `grep` ..., or with any word followed by
an option) with the command that stands for it here, or why it is not one to run; a new command
in those texts fails `test_every_command_the_built_in_texts_name_is_in_the_inventory` until it
is listed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specops_dag.builtin import BUILTIN_DEFS
from specops_dag.execution.step import run_step

from ..support.agents import agentic_git_harness, create, outputs_seen, replay, settings_for

NODE = "{node}"  # the writing session's node folder (absolute, as its prompt names it)
NEW = "tests/Calc.More.Tests/Calc.More.Tests.csproj"  # a test project the agent adds by hand
FILTER = '"FullyQualifiedName~CalculatorTests"'

# text as written -> (the command run here, the exit codes that mean "did what it says") or a
# reason it is no instruction to run. `git grep` exits 1 when nothing matches.
RUN: dict[str, tuple[str, tuple[int, ...]] | str] = {
    "`dotnet --version`": ("dotnet --version", (0,)),
    "`dotnet build -warnaserror --no-restore`": ("dotnet build -warnaserror --no-restore", (0,)),
    "`dotnet test --no-restore`": ("dotnet test --no-restore", (0,)),
    "`dotnet build <sln> --no-restore -warnaserror --no-incremental -nodeReuse:false "
    "-p:UseSharedCompilation=false`": (
        "dotnet build Calc.sln --no-restore -warnaserror --no-incremental -nodeReuse:false "
        "-p:UseSharedCompilation=false", (0,)),
    '`dotnet test tests/Feeds.Tests/Feeds.Tests.csproj --no-restore --filter '
    '"FullyQualifiedName~FeedCacheTests"`': (
        f"dotnet test tests/Calc.Tests/Calc.Tests.csproj --no-restore --filter {FILTER}", (0,)),
    '`dotnet test <abs path>/Feeds.Tests.csproj --no-build -c Debug --logger '
    '"trx;LogFileName=results.trx" --results-directory <node folder>/trx/Feeds.Tests-1`': (
        "dotnet test \"$PWD/tests/Calc.Tests/Calc.Tests.csproj\" --no-build -c Debug --logger "
        f"\"trx;LogFileName=results.trx\" --results-directory {NODE}/trx/Calc.Tests-1", (0,)),
    '`dotnet test <proj> --no-build --filter "FullyQualifiedName~<Class>.<Method>" --logger '
    '"trx;LogFileName=rerun.trx" --results-directory <node folder>/trx/<project>-rerun`': (
        "dotnet test tests/Calc.Tests/Calc.Tests.csproj --no-build --filter "
        "\"FullyQualifiedName~CalculatorTests.Add_ReturnsSum\" --logger "
        f"\"trx;LogFileName=rerun.trx\" --results-directory {NODE}/trx/Calc.Tests-rerun", (0,)),
    '`dotnet test <Tests.csproj> --no-build --logger "trx;LogFileName=results.trx" '
    '--results-directory <node folder>/trx/<project>-<n>`': (
        'dotnet test tests/Calc.Tests/Calc.Tests.csproj --no-build --logger '
        f'"trx;LogFileName=results.trx" --results-directory {NODE}/trx/Calc.Tests-2', (0,)),
    "`find . -not -path '*/bin/*' -not -path '*/obj/*' \\( -name '*.sln' -o -name '*.slnx' "
    "-o -name '*.csproj' -o -name global.json -o -name 'Directory.Build.*' -o -name "
    "Directory.Packages.props -o -iname NuGet.config -o -name dotnet-tools.json \\)`": (
        "find . -not -path '*/bin/*' -not -path '*/obj/*' \\( -name '*.sln' -o -name '*.slnx' "
        "-o -name '*.csproj' -o -name global.json -o -name 'Directory.Build.*' -o -name "
        "Directory.Packages.props -o -iname NuGet.config -o -name dotnet-tools.json \\)", (0,)),
    "`grep -o '<Counters [^>]*>' results.trx`": (
        f"grep -o '<Counters [^>]*>' {NODE}/trx/Calc.Tests-1/results.trx", (0,)),
    "`grep -c 'outcome=\"NotExecuted\"' results.trx`": (
        f"grep -c 'outcome=\"NotExecuted\"' {NODE}/trx/Calc.Tests-1/results.trx", (0, 1)),
    "`grep -o 'testName=\"[^\"]*\" [^>]*outcome=\"Failed\"' results.trx`": (
        f"grep -o 'testName=\"[^\"]*\" [^>]*outcome=\"Failed\"' "
        f"{NODE}/trx/Calc.Tests-1/results.trx", (0, 1)),
    "`sed -n`": ("sed -n 1,5p src/Calc/Calculator.cs", (0,)),
    "`dotnet sln list`": ("dotnet sln list", (0,)),
    "`dotnet sln <file>.sln list`": ("dotnet sln Calc.sln list", (0,)),
    "`dotnet msbuild <proj> -getProperty:TargetFramework`": (
        "dotnet msbuild src/Calc/Calc.csproj -getProperty:TargetFramework", (0,)),
    "`dotnet msbuild <proj> -getProperty:TargetFramework -getProperty:TargetFrameworks "
    "-getProperty:Nullable`": (
        "dotnet msbuild src/Calc/Calc.csproj -getProperty:TargetFramework "
        "-getProperty:TargetFrameworks -getProperty:Nullable", (0,)),
    "`dotnet sln add`": (f"dotnet sln Calc.sln add {NEW}", (0,)),
    "`dotnet restore <project> -p:NuGetAudit=false`": (
        f"dotnet restore {NEW} -p:NuGetAudit=false", (0,)),
    "`find . -not -path '*/bin/*' -not -path '*/obj/*' \\( -name '*.csproj' -o -name '*.sln' "
    "\\)`": ("find . -not -path '*/bin/*' -not -path '*/obj/*' \\( -name '*.csproj' -o -name "
             "'*.sln' \\)", (0,)),
    "`find tests -name '*.csproj' -not -path '*/obj/*'`": (
        "find tests -name '*.csproj' -not -path '*/obj/*'", (0,)),
    "`find . -path '*Migrations/*.cs' -not -path '*/obj/*'`": (
        "find . -path '*Migrations/*.cs' -not -path '*/obj/*'", (0,)),
    "`git diff --stat`": ("git diff --stat", (0,)),
    "`git diff`": ("git diff", (0,)),
    "`git log`": ("git log --oneline -3", (0,)),
    "`git show`": ("git show --stat HEAD", (0,)),
    "`git grep`": ("git grep -n Calculator", (0,)),
    '`git grep -n "public static class"`': ('git grep -n "public static class"', (0, 1)),
    '`git grep -n "class FeedCache"`': ('git grep -n "class Calculator"', (0,)),
    '`git grep -n "IFeedReader"`': ('git grep -n "Calculator"', (0,)),
    '`git grep -ln "FeedCache" -- tests`': ('git grep -ln "Calculator" -- tests', (0,)),
    '`git grep -n ": DbContext"`': ('git grep -n ": DbContext"', (0, 1)),
    '`git grep -n "AddSingleton\\|AddScoped\\|AddTransient\\|AddHttpClient\\|Configure<"`': (
        'git grep -n "AddSingleton\\|AddScoped\\|AddTransient\\|AddHttpClient\\|Configure<"',
        (0, 1)),
    '`git grep -nE "(class|interface|record) \\w*(Cache|Client|Repository|Store|Clock|Options|'
    'Validator)\\b"`': (
        'git grep -nE "(class|interface|record) \\w*(Cache|Client|Repository|Store|Clock|'
        'Options|Validator)\\b"', (0, 1)),
    "`dotnet test`": "named, not a command line: the lines above are the ones to run",
    "`dotnet build`": "named, not a command line: the lines above are the ones to run",
    "`dotnet restore`": "what the executor ran before the first attempt, not the agent",
    "`dotnet run`": "what the QA executor runs, not the agent",
    "`specops resume`": "what a person runs once the machine is fixed (failure-triage's who acts)",
    "`codex exec`": "names the session the agent is in, not a command to run",
    "`rm -rf`": "named as what never to run (work rule 4); the pre-tool-use hook denies it",
}

# Programs a text may tell an agent to run; a backticked span that starts with one of them and
# has arguments, or with any lower-case word followed by an option (`tool --flag`), is a command.
PROGRAMS = ("dotnet", "dotnet-ef", "git", "specops", "codex", "nuget", "npm", "npx", "node",
            "python", "python3", "pip", "bash", "sh", "pwsh", "grep", "sed", "awk", "cat", "find",
            "ls", "rm", "cp", "mv", "mkdir", "touch", "chmod", "tar", "curl", "wget", "jq",
            "xargs", "make", "docker", "kubectl", "helm", "gh", "az", "psql", "sqlite3")
PROGRAM = "|".join(map(re.escape, PROGRAMS))
COMMAND = re.compile(rf"`(?:(?:{PROGRAM})\s[^`]+|[a-z][\w.+-]*\s+--?\w[^`]*)`")


def built_in_commands() -> set[str]:
    """Each backticked command of the texts, a line break inside it read as one space."""
    texts = [BUILTIN_DEFS / "work-rules.md", *BUILTIN_DEFS.glob("skills/*/SKILL.md"),
             *BUILTIN_DEFS.glob("phases/*.yaml")]
    return {re.sub(r"\s*\n\s*", " ", c) for path in texts
            for c in COMMAND.findall(path.read_text(encoding="utf-8"))}


def test_every_command_the_built_in_texts_name_is_in_the_inventory() -> None:
    named = built_in_commands()
    assert sorted(named - set(RUN)) == []  # list a new one in RUN, with the command it means
    assert sorted(set(RUN) - named) == []  # a command no text names any more leaves RUN


def test_a_command_of_any_program_is_caught_not_only_dotnet_and_git() -> None:
    text = ("Run `specops status d1`, `nuget locals all\n  --list` and `mytool --fix`; "
            "`Foo.Bar`, `see Q2`, `new HttpClient()` and `dotnet` alone are no commands.")
    assert COMMAND.findall(text) == ["`specops status d1`", "`nuget locals all\n  --list`",
                                     "`mytool --fix`"]


NEW_PROJECT = """<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <TargetFramework>net10.0</TargetFramework>
    <Nullable>enable</Nullable>
    <IsPackable>false</IsPackable>
  </PropertyGroup>
</Project>
"""


@pytest.mark.dotnet
@pytest.mark.e2e
def test_every_command_the_built_in_texts_tell_an_agent_to_run_runs_in_its_sandbox(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path, "all-pass-net10")
    store = create(root, None)
    node = (root / "phases/d1/write").resolve()
    runs = [(cmd.format(node=node) if "{node}" in cmd else cmd, codes)
            for cmd, codes in (v for v in RUN.values() if isinstance(v, tuple))]
    make = f"mkdir -p {Path(NEW).parent} && cat > {NEW} <<'XML'\n{NEW_PROJECT}XML"
    turns = [{"shell": make}] + [{"shell": cmd, "yield_time_ms": 240_000} for cmd, _ in runs]
    with replay(tmp_path, {"write": [{"literal": {"before": turns}}]}) as server:
        run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    seen = outputs_seen(tmp_path, "write")
    failed = {}
    for cmd, codes in runs:
        out = seen.get(cmd, "(never ran)")
        code = re.search(r"Process exited with code (\d+)", out)
        if code is None or int(code.group(1)) not in codes:
            failed[cmd] = out[-600:]
    assert failed == {}
    assert "Passed!  - Failed:     0, Passed:     2, Skipped:     0, Total:     2" in seen[
        "dotnet test --no-restore"]
    assert (node / "trx/Calc.Tests-1/results.trx").is_file()
    trx = f"{node}/trx/Calc.Tests-1/results.trx"  # the skill's quick read of it
    assert 'executed="2" passed="2" failed="0"' in seen[
        f"grep -o '<Counters [^>]*>' {trx}"]
    assert seen[f"grep -c 'outcome=\"NotExecuted\"' {trx}"].rstrip().endswith("\n0")
    assert seen["dotnet msbuild src/Calc/Calc.csproj -getProperty:TargetFramework"].count(
        "net10.0") == 1
