"""docs/cli.md, the CLI reference, rendered from the click commands of `specops` so it says what
`--help` says: usage, help text, arguments and every option with its choices and default. It
reads the commands and never runs one; `python -m specops_dag.cli.reference` prints the page."""

from __future__ import annotations

import inspect
import os
import re

import click

from specops_dag import errors, hooks
from specops_dag.cli.commands import main

REGENERATE = ".venv/bin/python -m specops_dag.cli.reference > docs/cli.md"
# What each exit code means; the error classes that end with it are listed from errors.py.
EXIT_CODES = {
    0: "done: the command did what it was asked (`specops run`: every step completed; "
       "`specops validate`: passed)",
    1: "failed: a step or a validation failed, a run passed its deadline, or a git or Dagster "
       "operation failed; the message names it",
    2: "bad input: a bad option, argument, id or definition; nothing was changed (click's own "
       "usage errors end with 2 too)",
    3: "blocked: a person or the environment has to act (a gate, a spent budget, a missing "
       "tool, a write conflict, an open risk)",
}


def render() -> str:
    """The whole page, ending with one newline."""
    root = click.Context(main, info_name="specops")
    commands = [(name, cmd, click.Context(cmd, info_name=name, parent=root))
                for name, cmd in main.commands.items()]
    parts = [
        f"<!-- Generated from the click commands by specops_dag/cli/reference.py; do not edit.\n"
        f"     Regenerate: {REGENERATE} -->",
        "# CLI reference",
        "Every `specops` command with its arguments and options, as `specops <command> --help` "
        "prints them. Exit codes are [below](#exit-codes); what to do about each error is in "
        "[troubleshooting](troubleshooting.md).",
        "\n".join([f"- [specops (global options)](#{slug('specops (global options)')})",
                   *(f"- [specops {name}](#{slug(f'specops {name}')}): "
                     f"{cmd.get_short_help_str(limit=1000)}" for name, cmd, _ in commands),
                   f"- [specops hook](#{slug('specops hook')}): the codex hooks of an agent "
                   "session"]),
        command_section("specops (global options)", main, root),
        *(command_section(f"specops {name}", cmd, ctx) for name, cmd, ctx in commands),
        hook_section(),
        exit_codes_section(),
    ]
    return "\n\n".join(parts) + "\n"


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but `-` and `_` dropped,
    spaces made dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def command_section(title: str, cmd: click.Command, ctx: click.Context) -> str:
    usage = " ".join([ctx.command_path, *cmd.collect_usage_pieces(ctx)])
    lines = [f"## {title}", "", "```text", usage, "```", "", inspect.cleandoc(cmd.help or "")]
    arguments = [p for p in cmd.get_params(ctx) if isinstance(p, click.Argument)]
    if arguments:
        lines += ["", "Arguments:", "", *(argument_line(p, ctx) for p in arguments)]
    options = [p for p in cmd.get_params(ctx) if isinstance(p, click.Option)]
    lines += ["", "Options:", "", *(option_line(p, ctx) for p in options)]
    return "\n".join(lines)


def argument_line(param: click.Argument, ctx: click.Context) -> str:
    facts = ["required" if param.required else "optional"]
    default = param.get_default(ctx, call=False)
    if isinstance(default, (str, int, float, os.PathLike)) and str(default):
        facts.append(f"default `{default}`")
    if param.multiple or param.nargs == -1:
        facts.append("repeatable")
    return f"- `{param.make_metavar(ctx)}`: {', '.join(facts)}"


def option_line(param: click.Option, ctx: click.Context) -> str:
    shown = param.get_help_record(ctx)
    facts = [inspect.cleandoc(param.help or "")]
    if isinstance(param.type, click.Choice):
        facts.append("Choices: " + ", ".join(f"`{c}`" for c in param.type.choices) + ".")
    extra = param.get_help_extra(ctx)
    if "default" in extra:
        facts.append(f"Default: `{extra['default']}`.")
    if "range" in extra:
        facts.append(f"Range: `{extra['range']}`.")
    if param.required:
        facts.append("Required.")
    if param.multiple and "repeatable" not in facts[0].lower():
        facts.append("Repeatable.")
    if isinstance(param.envvar, str):
        facts.append(f"Environment variable: `{param.envvar}`.")
    said = " ".join(f for f in facts if f)
    return f"- `{shown[0] if shown else param.opts[0]}`" + (f": {said}" if said else "")


def hook_section() -> str:
    usage = hooks.USAGE.removeprefix("usage: ")
    events = ", ".join(f"`{event}` ({name})" for event, name in hooks.EVENTS.items())
    return "\n".join([
        "## specops hook", "", "```text", usage, "```", "",
        "The codex hooks of an agent session: every codex session specops starts calls them "
        "(they are not meant to be typed). It reads the hook's JSON payload on stdin and prints "
        f"the hook's answer on stdout. Events: {events}. `pre-tool-use` denies dangerous "
        "commands and untested C# product edits and fails closed; the other two inject the "
        "delivery's workflow state and fail open. It runs before click is loaded, so it has no "
        "`--help`; any other argument prints the usage line and exits 2.",
    ])


def exit_codes_section() -> str:
    family: dict[int, list[str]] = {}
    for name, value in vars(errors).items():
        if isinstance(value, type) and issubclass(value, errors.SpecopsError):
            family.setdefault(value.exit_code, []).append(f"`{name}`")
    rows = [f"| {code} | {EXIT_CODES[code]} | {', '.join(family.get(code, [])) or '—'} |"
            for code in sorted(EXIT_CODES.keys() | family.keys())]
    return "\n".join([
        "## Exit codes", "",
        "The same for every command; [troubleshooting](troubleshooting.md) has each error "
        "family and what to do about it.", "",
        "| exit | meaning | error classes (`specops_dag/errors.py`) |", "|---|---|---|", *rows,
    ])


if __name__ == "__main__":
    click.echo(render(), nl=False)
