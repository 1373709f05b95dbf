"""The documentation check over README.md and docs/*.md: every relative link, anchor and image
resolves; every `specops …` command shown parses with the real `specops <command> --help`; every
whole workflow or phase shown loads with the real `specops check`; docs/cli.md names every
option; docs/troubleshooting.md has a section for every error class and exit code. Each check
is a function over pages, so a planted fault in tmp_path shows it fails with the exact message."""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
import shlex
import subprocess
import textwrap
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
import yaml

from specops_dag.builtin import BUILTIN_DEFS
from specops_dag.cli.commands import main
from specops_dag.cli.reference import REGENERATE, render
from specops_dag.hooks import EVENTS

from ..support.harness import REPO, VENV_BIN, write_tree

SHELL = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
TARGET = re.compile(r"\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]*)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(href|src)=\"([^\"]*)\"", re.I)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:name|id)=\"([^\"]*)\"", re.I)
COMMENT = re.compile(r"<!--.*?-->")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", "$", "<", ">", ">>", ">&", "<<", "`"}
SUBCOMMAND = re.compile(r"^[a-z][a-z-]*$")


def pages_of(root: Path) -> list[Path]:
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


def rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence
    lang: str
    lines: tuple[tuple[int, str], ...]

    @property
    def text(self) -> str:
        return textwrap.dedent("\n".join(text for _, text in self.lines))


@dataclass(frozen=True)
class Page:
    """A Markdown page split into fenced blocks and paragraphs of prose: (line, text) runs."""

    path: Path
    blocks: tuple[Block, ...]
    paragraphs: tuple[tuple[tuple[int, str], ...], ...]


def read_page(path: Path) -> Page:
    blocks, paragraphs, current, fence = [], [], [], None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = FENCE.match(line)
        if fence is not None:
            if m and m.group(2)[0] == fence[0][0] and len(m.group(2)) >= len(fence[0]) \
                    and not m.group(3):
                blocks.append(Block(fence[1], fence[2], tuple(fence[3])))
                fence = None
            else:
                fence[3].append((n, line))
        elif m:
            fence = (m.group(2), n, m.group(3).lower(), [])
            paragraphs.append(tuple(current))
            current = []
        elif line.strip():
            current.append((n, line))
        else:
            paragraphs.append(tuple(current))
            current = []
    if fence is not None:  # an unclosed fence runs to the end of the page, as GitHub shows it
        blocks.append(Block(fence[1], fence[2], tuple(fence[3])))
    paragraphs.append(tuple(current))
    return Page(path, tuple(blocks), tuple(p for p in paragraphs if p))


def joined(paragraph: tuple[tuple[int, str], ...]) -> tuple[str, list[int]]:
    """The paragraph as one string (lines joined by a space, HTML comments blanked: GitHub
    shows nothing of them) and the line of each character."""
    text, lines = "", []
    for n, line in paragraph:
        text += line + " "
        lines += [n] * (len(line) + 1)
    return COMMENT.sub(lambda m: " " * len(m.group(0)), text), lines


def code_spans(page: Page) -> list[tuple[int, str]]:
    """(line, text) of every inline code span of the prose."""
    found = []
    for paragraph in page.paragraphs:
        text, lines = joined(paragraph)
        found += [(lines[m.start()], m.group(2).strip()) for m in SPAN.finditer(text)]
    return found


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its rendered text in lower case, every character but
    letters, digits, `-`, `_` and spaces dropped, spaces made dashes."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Page) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for paragraph in page.paragraphs:
        for i, (_, line) in enumerate(paragraph):
            m = HEADING.match(line)
            setext = i > 0 and re.fullmatch(r" {0,3}(=+|-+)\s*", line) and i == len(paragraph) - 1
            title = m.group(2) if m else " ".join(t for _, t in paragraph[:i]) if setext else None
            if title is not None:
                slug = github_slug(title)
                found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
                seen[slug] = seen.get(slug, 0) + 1
            found.update(HTML_ANCHOR.findall(line))
    return found


def links(page: Page) -> list[tuple[int, str, str]]:
    """(line, target, "link" or "image") of every link of the prose, outside code spans."""
    found = []
    for paragraph in page.paragraphs:
        text, lines = joined(paragraph)
        text = SPAN.sub(lambda m: " " * len(m.group(0)), text)
        images = {m.start(1) for m in IMAGE.finditer(text)}
        found += [(lines[m.start()], m.group(1), "image" if m.start(1) in images else "link")
                  for m in TARGET.finditer(text)]
        found += [(lines[m.start()], m.group(2), "image" if m.group(1).lower() == "src" else "link")
                  for m in HTML_LINK.finditer(text)]
        found += [(n, m.group(1), "link") for n, line in paragraph
                  if (m := REFERENCE.match(COMMENT.sub("", line)))]
    return sorted(found)


def link_problems(root: Path, pages: list[Path]) -> list[str]:
    read = {p.resolve(): read_page(p) for p in pages}

    def anchors_of(path: Path) -> set[str]:
        if path.resolve() not in read:
            read[path.resolve()] = read_page(path)
        return anchors(read[path.resolve()])

    problems = []
    for page in read.copy().values():
        where = rel(page.path, root)
        for line, target, kind in links(page):
            if SCHEME.match(target):
                continue  # an external link: never fetched
            if not target:
                problems.append(f"{where}:{line}: {kind} with an empty target; give it one")
                continue
            path_part, _, anchor = target.partition("#")
            path_part = urllib.parse.unquote(path_part)
            dest = page.path if not path_part else (
                root / path_part.lstrip("/") if path_part.startswith("/")
                else page.path.parent / path_part)
            dest = Path(dest).resolve()
            shown = rel(dest, root.resolve())
            if not dest.is_relative_to(root.resolve()):
                problems.append(f"{where}:{line}: {kind} `{target}` points outside the "
                                f"repository ({dest}); link a file of the repository or a URL")
            elif not dest.exists():
                problems.append(f"{where}:{line}: {kind} `{target}`: {shown} does not exist; "
                                + ("add the image or fix the path" if kind == "image"
                                   else "fix the path or add the file"))
            elif anchor and dest.suffix == ".md" and anchor not in anchors_of(dest):
                problems.append(f"{where}:{line}: {kind} `{target}`: {shown} has no heading "
                                f"with the anchor `{anchor}`; fix the anchor (GitHub's anchor "
                                "of a heading is its text in lower case, punctuation dropped, "
                                "spaces made dashes)")
    return problems


def shell_lines(block: Block) -> list[tuple[int, str]]:
    """The command lines of a shell block: continuations joined, comments, heredoc bodies and
    (in a console block) output left out."""
    found, pending, heredoc = [], None, None
    for n, line in block.lines:
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        text = line.strip()
        if pending is not None:
            start, text = pending[0], pending[1] + " " + text
        elif block.lang == "console" and not text.startswith("$ "):
            continue
        else:
            start = n
        text = text.removeprefix("$ ")
        if text.endswith("\\"):
            pending = (start, text[:-1])
            continue
        pending = None
        if text and not text.startswith("#"):
            found.append((start, text))
            m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", text)
            heredoc = m.group(1) if m else None
    return found


def neutral(text: str) -> str:
    """The command with its placeholders made plain words: `<d>` → ARG, a `|` between
    alternatives (`[--mode full|docs-only]`, `{a|b}`, `\\|` in a table) → `/`."""
    text = re.sub(r"<[^<>\s]+>", "ARG", text.replace("\\|", "/"))
    return re.sub(r"[\[{][^\[\]{}]*[\]}]", lambda m: m.group(0).replace("|", "/"), text)


def specops_argvs(text: str) -> list[list[str]]:
    """The arguments of every `specops` (any path to it) the shell line runs."""
    line = neutral(text)
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote in prose: words are still words
        tokens = re.sub(r"&&|\|\||[;|()]", " ; ", line).split()
    commands, current = [], []
    for token in [*tokens, ";"]:
        if token in SEPARATORS or set(token) <= set("&|;()<>"):
            commands.append(current)
            current = []
        else:
            current.append(token)
    argvs = []
    for words in commands:
        while words and (re.match(r"^[A-Za-z_]\w*=", words[0]) or words[0] in ("env", "sudo")):
            words = words[1:]
        if words and words[0].rsplit("/", 1)[-1] == "specops":
            argvs.append(words[1:])
    return argvs


def commands_shown(page: Page) -> list[tuple[int, str, list[str]]]:
    """(line, the command as shown, its arguments) for every `specops` command of the page's
    shell blocks and inline code spans."""
    found = []
    for block in page.blocks:
        if block.lang in SHELL:
            found += [(n, text, argv) for n, text in shell_lines(block)
                      for argv in specops_argvs(text)]
    for n, text in code_spans(page):
        if text.startswith(("specops ", ".venv/bin/specops ")):
            found += [(n, text, argv) for argv in specops_argvs(text)]
    return sorted(found, key=lambda f: f[0])


def split_command(argv: list[str]) -> tuple[str | None, list[str], list[str]]:
    """(the subcommand, "" for none or None for a placeholder such as `COMMAND` or `…`; the
    group's options before it; the `--options` used after it, up to a `--`)."""
    group, rest = [], list(argv)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        group.append(option.split("=", 1)[0])
        if option == "--root" and rest:
            rest.pop(0)
    if not rest:
        return "", group, []
    sub = rest.pop(0)
    words = [w.strip("[]{}(),`") for w in rest]
    words = words[:words.index("--")] if "--" in words else words
    used = [w.split("=", 1)[0] for w in words if w.startswith("--") and len(w) > 2]
    return (sub if SUBCOMMAND.match(sub) else None), group, used


@functools.cache
def help_options(sub: str) -> tuple[int, tuple[str, ...], str]:
    """(exit code, the options, stderr) of the real `specops [sub] --help`."""
    done = subprocess.run([str(VENV_BIN / "specops"), *([sub] if sub else []), "--help"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return done.returncode, tuple(options_in_help(done.stdout)), done.stderr


def options_in_help(text: str) -> list[str]:
    found, inside = [], False
    for line in text.splitlines():
        if line.rstrip() == "Options:":
            inside = True
        elif inside and line and not line.startswith(" "):
            inside = False
        elif inside and line.startswith("  -"):
            cell = line[2:].split("  ")[0]
            found += re.findall(r"(?<![\w-])--?\w[\w-]*", cell)
    return found


def command_problems(root: Path, pages: list[Path]) -> list[str]:
    problems = []
    for path in pages:
        for line, shown, argv in commands_shown(read_page(path)):
            where = f"{rel(path, root)}:{line}: `{shown}`"
            sub, group, used = split_command(argv)
            problems += unknown_options(where, "", group)
            if sub is None:
                continue
            if sub == "hook":
                event = next((w for w in argv[argv.index("hook") + 1:]), None)
                placeholder = event is None or not SUBCOMMAND.match(event)  # EVENT, ARG, …
                if used or not (placeholder or event in EVENTS):
                    problems.append(f"{where}: `specops hook` takes one event of "
                                    f"{', '.join(EVENTS)} and no option; "
                                    "fix the command")
                continue
            problems += unknown_options(where, sub, used)
    return problems


def unknown_options(where: str, sub: str, used: list[str]) -> list[str]:
    """What is wrong with `specops <sub>` taking `used`, by its real `--help`."""
    if not used and not sub:
        return []
    code, options, stderr = help_options(sub)
    name = f"specops {sub}".strip()
    if code != 0:
        why = (stderr.strip().splitlines() or ["no output"])[-1]
        return [f"{where}: `{name} --help` exits {code} ({why}); fix the command name"]
    return [f"{where}: `{name}` has no option `{option}` (its options: {', '.join(options)}); "
            "fix the option" for option in used if not fnmatch.filter(options, option)]


def named_files(page: Page) -> dict[str, Block]:
    """The blocks that say which file of a harness root they are: a first line
    `# workflow_defs/…` or an `<!-- workflow_defs/… -->` line just before the fence."""
    prose = {n: line for paragraph in page.paragraphs for n, line in paragraph}
    found = {}
    for block in page.blocks:
        first = (block.text.strip().splitlines() or [""])[0]
        m = re.fullmatch(r"#\s*(workflow_defs/\S+)", first.strip()) or re.fullmatch(
            r"\s*<!--\s*(workflow_defs/\S+)\s*-->\s*", prose.get(block.line - 1, ""))
        if m:
            found[m.group(1)] = block
    return found


def skill_stubs(phases: list[str]) -> dict[str, str]:
    """A stand-in SKILL.md for every skill path the phases bind, for the skills a page binds
    without showing them (a page shows a phase, not every file it names)."""
    stubs = {}
    for text in phases:
        try:
            skills = ((yaml.safe_load(text) or {}).get("execution") or {}).get("skills") or []
        except (yaml.YAMLError, AttributeError):
            continue
        for skill in skills if isinstance(skills, list) else []:
            if isinstance(skill, dict) and isinstance(skill.get("path"), str):
                stubs[f"workflow_defs/{skill['path']}"] = (
                    f"# {skill.get('id')}\n\nA stand-in: the page does not show this skill.\n")
    return stubs


def definition_blocks(page: Page) -> list[tuple[Block, str, str]]:
    """(block, kind, id) of every ```yaml block that is a whole workflow or phase."""
    found = []
    for block in page.blocks:
        body = [t for t in block.text.splitlines() if t.strip() and not t.startswith("#")]
        kind = re.fullmatch(r"kind:\s*(workflow|phase)\s*(#.*)?", body[0]) if body else None
        if block.lang in ("yaml", "yml") and kind:
            try:
                ident = (yaml.safe_load(block.text) or {}).get("id")
            except yaml.YAMLError:
                ident = None
            found.append((block, kind.group(1), str(ident or f"block-{block.line}")))
    return found


def batches(shown: list[tuple[Block, str, str]]) -> list[list[tuple[Block, str, str]]]:
    """The blocks in as few harness roots as can hold them: one (kind, id) per root."""
    out: list[list[tuple[Block, str, str]]] = []
    for item in shown:
        free = next((b for b in out if all(i[1:] != item[1:] for i in b)), None)
        if free is None:
            out.append([item])
        else:
            free.append(item)
    return out


def definition_problems(root: Path, pages: list[Path], scratch: Path,
                        env: dict[str, str]) -> list[str]:
    builtin = {(k, p.stem) for k in ("workflow", "phase")
               for p in (BUILTIN_DEFS / f"{k}s").glob("*.yaml")}
    problems = []
    for path in pages:
        page = read_page(path)
        named = {name: block for name, block in named_files(page).items()
                 if not name.startswith(("workflow_defs/workflows/", "workflow_defs/phases/"))}
        for number, batch in enumerate(batches(definition_blocks(page))):
            harness = scratch / f"{path.stem}-{number}"
            files = {}
            for block, kind, ident in batch:
                text = block.text
                if (kind, ident) in builtin:  # shown beside the built-in one: checked as a twin
                    ident, text = f"{ident}-doc", re.sub(rf"(?m)^id:\s*{re.escape(ident)}\s*$",
                                                         f"id: {ident}-doc", text, count=1)
                files[f"workflow_defs/{kind}s/{ident}.yaml"] = (block, text)
            files |= {name: (block, block.text) for name, block in named.items()}
            stubs = skill_stubs([text for name, (_, text) in files.items()
                                 if name.startswith("workflow_defs/phases/")])
            write_tree(harness, {**{name: text for name, text in stubs.items()
                                    if name not in files},
                                 **{name: text for name, (_, text) in files.items()}})
            done = subprocess.run([str(VENV_BIN / "specops"), "--root", str(harness), "check"],
                                  env=env, capture_output=True, text=True, timeout=120,
                                  stdin=subprocess.DEVNULL)
            if done.returncode == 0:
                continue
            for problem in done.stderr.splitlines():
                if problem.startswith("error: ") and "problem(s) in the definitions" in problem:
                    continue
                owner = next((b for name, (b, _) in files.items()
                              if problem.startswith(f"{name}:")), batch[0][0])
                problems.append(f"{rel(path, root)}:{owner.line}: this block does not load "
                                f"with `specops check` (checked as a file of a scratch harness "
                                f"root): {problem}")
    return problems


def undocumented_options(cli_md: str) -> list[str]:
    """`specops <command>` options that docs/cli.md's section of that command does not name."""
    sections = re.split(r"(?m)^## ", cli_md)
    by_title = {s.splitlines()[0].strip(): s for s in sections[1:]}
    root = click.Context(main, info_name="specops")
    commands = [("specops (global options)", main, root),
                *((f"specops {n}", c, click.Context(c, info_name=n, parent=root))
                  for n, c in main.commands.items())]
    problems = []
    for title, cmd, ctx in commands:
        section = by_title.get(title, "")
        for param in cmd.get_params(ctx):
            for option in param.opts if isinstance(param, click.Option) else ():
                if f"`{option}" not in section:
                    problems.append(f"docs/cli.md: `{title}` does not document `{option}`; "
                                    f"run `{REGENERATE}`")
    return problems


def error_family(package: Path) -> dict[str, int]:
    """Every exception class of the package that derives from `SpecopsError`, with its
    `exit_code` (its own, else its base's), read from the source."""
    classes: dict[str, tuple[list[str], int | None]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                         for b in node.bases]
                code = next((s.value.value for s in node.body
                             if isinstance(s, (ast.Assign, ast.AnnAssign))
                             and [getattr(t, "id", "") for t in getattr(s, "targets", [])
                                  or [s.target]] == ["exit_code"]
                             and isinstance(s.value, ast.Constant)), None)
                classes[node.name] = (bases, code)

    def code_of(name: str) -> int | None:
        bases, code = classes[name]
        if code is not None or name == "SpecopsError":
            return code
        return next((c for b in bases if b in classes and (c := code_of(b)) is not None), None)

    def in_family(name: str) -> bool:
        return name == "SpecopsError" or any(b in classes and in_family(b)
                                             for b in classes[name][0])

    return {name: code_of(name) for name in classes if in_family(name)}


def cli_exit_codes(package: Path) -> dict[int, str]:
    """Every exit code the CLI can end with, and where it comes from: the integers of its
    `sys.exit`/`ctx.exit`/`SystemExit` calls and of the returns of its `-> int` functions (the
    codes `specops run` and `specops hook` end with), and the error family's codes."""
    found: dict[int, str] = {}
    sources = [*sorted((package / "cli").glob("*.py")), package / "hooks" / "__init__.py"]
    for path in sources:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            exits = isinstance(node, ast.Call) and (
                getattr(node.func, "attr", "") == "exit" or getattr(node.func, "id", "")
                == "SystemExit")
            returns_int = isinstance(node, ast.FunctionDef) and getattr(node.returns, "id",
                                                                        "") == "int"
            parts = node.args if exits else [r.value for r in ast.walk(node) if
                                             isinstance(r, ast.Return) and r.value] \
                if returns_int else []
            for c in (c for part in parts for c in results(part)):
                found.setdefault(c.value, f"{rel(path, package.parent)}:{c.lineno}")
    for name, code in error_family(package).items():
        found.setdefault(code, f"`{name}`")
    found.setdefault(2, "click's usage errors")
    return dict(sorted(found.items()))


def results(expr: ast.expr) -> list[ast.Constant]:
    """The integer constants an expression can evaluate to (`0 if ok else 3 if env else 1`)."""
    if isinstance(expr, ast.IfExp):
        return results(expr.body) + results(expr.orelse)
    return [expr] if isinstance(expr, ast.Constant) and type(expr.value) is int else []


def troubleshooting_problems(page: Path, family: dict[str, int],
                             codes: dict[int, str]) -> list[str]:
    """Each error class needs a heading with `` `Class` (exit N) ``, each exit code a heading
    that starts with `Exit N`."""
    headings = [m.group(2) for p in read_page(page).paragraphs for _, line in p
                if (m := HEADING.match(line))]
    problems = [f"docs/troubleshooting.md has no section for `{name}` (exit {code}); add a "
                f"heading ``### `{name}` (exit {code})`` saying what it means and what to do"
                for name, code in family.items()
                if not any(f"`{name}` (exit {code})" in h for h in headings)]
    problems += [f"docs/troubleshooting.md has no section for exit {code} (from {where}); add a "
                 f"heading `## Exit {code}: …` saying what it means and what to do"
                 for code, where in codes.items()
                 if not any(re.match(rf"Exit {code}\b", h) for h in headings)]
    return problems


# ---- the checks over the real pages ---------------------------------------------------------


def test_every_relative_link_anchor_and_image_of_the_docs_resolves() -> None:
    problems = link_problems(REPO, pages_of(REPO))
    assert problems == [], "\n".join(problems)


@pytest.mark.e2e
def test_every_specops_command_shown_in_the_docs_parses_with_its_real_help() -> None:
    problems = command_problems(REPO, pages_of(REPO))
    assert problems == [], "\n".join(problems)


@pytest.mark.e2e
def test_every_whole_workflow_and_phase_shown_in_the_docs_loads_with_specops_check(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    problems = definition_problems(REPO, pages_of(REPO), tmp_path, clean_env)
    assert problems == [], "\n".join(problems)


def test_every_option_of_every_command_appears_in_docs_cli_md() -> None:
    problems = undocumented_options((REPO / "docs" / "cli.md").read_text(encoding="utf-8"))
    assert problems == [], "\n".join(problems)


def test_troubleshooting_has_a_section_for_every_error_class_and_exit_code() -> None:
    package = REPO / "specops_dag"
    problems = troubleshooting_problems(REPO / "docs" / "troubleshooting.md",
                                        error_family(package), cli_exit_codes(package))
    assert problems == [], "\n".join(problems)


# ---- each check fails on a planted fault ----------------------------------------------------


def test_the_link_check_names_a_missing_file_anchor_and_image_with_their_lines(
        tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "README.md": """
            # Top

            See [the guide](docs/guide.md#set-up-the-sdk-dotnet), [gone](docs/gone.md) and
            [nowhere](docs/guide.md#no-such-heading); [web](https://example.com/x) is not fetched.
            ![shot](docs/images/missing.png) and `[code](docs/not-a-link.md)` are fine to ignore
            only for the code span. [up](../outside.md) [self](#top)
            <!-- a comment shows nothing: [hidden](docs/hidden.md) -->
        """,
        "docs/guide.md": """
            ## Set up the SDK `dotnet`!

            ```bash
            echo "[not](a-link.md)"
            ```
            [back](../README.md#top) [bad anchor](#set-up)
        """,
    })
    assert link_problems(tmp_path, pages_of(tmp_path)) == [
        "README.md:3: link `docs/gone.md`: docs/gone.md does not exist; fix the path or add "
        "the file",
        "README.md:4: link `docs/guide.md#no-such-heading`: docs/guide.md has no heading with the "
        "anchor `no-such-heading`; fix the anchor (GitHub's anchor of a heading is its text in "
        "lower case, punctuation dropped, spaces made dashes)",
        "README.md:5: image `docs/images/missing.png`: docs/images/missing.png does not exist; "
        "add the image or fix the path",
        f"README.md:6: link `../outside.md` points outside the repository "
        f"({tmp_path.parent / 'outside.md'}); link a file of the repository or a URL",
        "docs/guide.md:6: link `#set-up`: docs/guide.md has no heading with the anchor `set-up`; "
        "fix the anchor (GitHub's anchor of a heading is its text in lower case, punctuation "
        "dropped, spaces made dashes)",
    ]


@pytest.mark.parametrize(("heading", "slug"), [
    ("Set up", "set-up"),
    ("`specops validate`", "specops-validate"),
    ("specops (global options)", "specops-global-options"),
    ("Exit 3: blocked", "exit-3-blocked"),
    ("### `WriteConflict` (exit 3)", "-writeconflict-exit-3"),
    ("Git, gates, reviews and budgets", "git-gates-reviews-and-budgets"),
    ("The [agent's](x.md) world — files", "the-agents-world--files"),
    ("snake_case and dry-run", "snake_case-and-dry-run"),
], ids=["words", "code", "parentheses", "colon", "hashes-kept-as-text", "commas", "link-dash",
        "underscore"])
def test_anchors_follow_githubs_heading_slugs(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_a_repeated_heading_gets_githubs_numbered_anchor(tmp_path: Path) -> None:
    page = write_tree(tmp_path, {"a.md": "# Notes\n\n## Notes\n\nSetext\n---\n"}) / "a.md"
    assert anchors(read_page(page)) == {"notes", "notes-1", "setext"}


@pytest.mark.parametrize(("markdown", "found"), [
    ("```bash\n.venv/bin/specops --root /r status d1 --json && dotnet test --no-build\n```",
     [(2, [  "--root", "/r", "status", "d1", "--json"])]),
    ("```bash\ncd x && DAGSTER_HOME=$PWD/h /tmp/x/bin/specops run <d> \\\n  --push\n```",
     [(2, ["run", "ARG", "--push"])]),
    ("```console\n$ specops approve D risk --note \"it's fine\"\nspecops approve printed this\n```",
     [(2, ["approve", "D", "risk", "--note", "it's fine"])]),
    ("```sh\n# specops nope\ncat <<'EOF'\nspecops inside --heredoc\nEOF\n```", []),
    ("```text\nspecops run D --nope\n```", []),
    ("A `specops run DELIVERY [--executor multiprocess\\|in_process] [--push]` row, "
     "`specops` alone and `specops_dag`.",
     [(1, ["run", "DELIVERY", "[--executor", "multiprocess/in_process]", "[--push]"])]),
    ("Wrapped `specops new …\n--validation docs-only` span.",
     [(1, ["new", "…", "--validation", "docs-only"])]),
], ids=["bash-chain", "continuation-placeholder", "console-prompt", "comment-heredoc",
        "text-block-ignored", "inline-table-row", "inline-span-over-two-lines"])
def test_commands_are_found_in_shell_blocks_and_inline_code(tmp_path: Path, markdown: str,
                                                            found: list) -> None:
    page = write_tree(tmp_path, {"a.md": markdown + "\n"}) / "a.md"
    assert [(n, argv) for n, _, argv in commands_shown(read_page(page))] == found


@pytest.mark.parametrize(("argv", "split"), [
    (["--root", "/r", "status", "d1", "--json"], ("status", ["--root"], ["--json"])),
    (["--version"], ("", ["--version"], [])),
    (["<command>", "--help"], (None, [], ["--help"])),
    (["COMMAND", "--help"], (None, [], ["--help"])),
    (["run", "DELIVERY", "[--executor", "a/b]", "[--timeout=S]"],
     ("run", [], ["--executor", "--timeout"])),
    (["new", "…", "--validation", "docs-only", "--", "--not-an-option"],
     ("new", [], ["--validation"])),
], ids=["global-then-command", "group-only", "placeholder-angle", "placeholder-caps",
        "brackets-and-equals", "after-double-dash"])
def test_a_command_splits_into_its_subcommand_and_the_options_it_uses(
        argv: list[str], split: tuple) -> None:
    assert split_command(argv) == split


def test_the_command_check_names_an_unknown_command_and_an_unknown_option(
        tmp_path: Path) -> None:
    write_tree(tmp_path, {"docs/a.md": """
        Run `specops valdate --json`, then:

        ```bash
        specops approve d1 target-write --note ok --yes
        specops --root . --verbose status
        specops hook pre-tool-use < payload.json
        specops hook EVENT < payload.json
        specops new quick-delivery D --budget-* N
        specops hook pre-tool-call
        ```
    """})
    problems = command_problems(tmp_path, pages_of(tmp_path))
    assert problems == [
        "docs/a.md:1: `specops valdate --json`: `specops valdate --help` exits 2 (Error: No such "
        "command 'valdate'. Did you mean 'validate'?); fix the command name",
        "docs/a.md:4: `specops approve d1 target-write --note ok --yes`: `specops approve` has "
        "no option `--yes` (its options: --note, --reject, --help); fix the option",
        "docs/a.md:5: `specops --root . --verbose status`: `specops` has no option `--verbose` "
        "(its options: --version, --root, --help); fix the option",
        "docs/a.md:9: `specops hook pre-tool-call`: `specops hook` takes one event of "
        "pre-tool-use, session-start, user-prompt-submit and no option; fix the command",
    ]


def test_the_definition_check_names_the_block_that_does_not_load(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    write_tree(tmp_path / "repo", {"docs/a.md": """
        ```yaml
        kind: workflow
        id: doc-flow
        inputs: {request: {contract: quick-request}}
        nodes:
          - {id: develop, phase: quick-develop, inputs: {request: {input: request}}}
          - {id: ship, phase: no-such-phase, needs: [develop]}
        ```

        The built-in one, shown as it is (checked as a twin beside it):

        ```yaml
        kind: workflow
        id: quick-delivery
        inputs: {request: {contract: quick-request}}
        nodes:
          - {id: develop, phase: quick-develop, inputs: {request: {input: request}}}
        ```

        A phase whose skill the page does not show (a stand-in SKILL.md is written for it):

        ```yaml
        kind: phase
        id: doc-plan
        input: {ports: {request: {contract: doc-request}}}
        execution:
          goal: Write plan.md.
          executor: {kind: codex}
          skills:
            - {id: doc-planner, path: skills/doc-planner/SKILL.md, load: entry}
        output:
          ports: {plan: {contract: doc-plan}}
          artifacts:
            - {id: plan, path: plan.md}
        validation: docs-only
        ```

        <!-- workflow_defs/validation.yaml -->
        ```yaml
        validation: {judge: lenient}
        ```

        ```yaml
        # a fragment, not a whole definition: not checked
        nodes: []
        ```
    """})
    root = tmp_path / "repo"
    problems = definition_problems(root, pages_of(root), tmp_path / "scratch", clean_env)
    known = sorted(["doc-plan", *(p.stem for p in (BUILTIN_DEFS / "phases").glob("*.yaml"))])
    assert problems == [
        "docs/a.md:39: this block does not load with `specops check` (checked as a file of a "
        "scratch harness root): workflow_defs/validation.yaml: validation.judge: Input should be "
        "'absolute' or 'regressions'",
        "docs/a.md:1: this block does not load with `specops check` (checked as a file of "
        "a scratch harness root): workflow_defs/workflows/doc-flow.yaml: nodes[1].phase: unknown "
        f"phase `no-such-phase` (known: {', '.join(known)}); add "
        "workflow_defs/phases/no-such-phase.yaml or fix the id",
    ]


def test_the_option_check_names_an_option_missing_from_docs_cli_md() -> None:
    page = render()
    assert undocumented_options(page) == []
    planted = "\n".join(line for line in page.splitlines()
                        if not line.startswith("- `--push`"))
    assert undocumented_options(planted) == [
        f"docs/cli.md: `specops run` does not document `--push`; run `{REGENERATE}`"]


def test_the_troubleshooting_check_names_a_missing_class_and_exit_code(tmp_path: Path) -> None:
    page = write_tree(tmp_path, {"t.md": """
        ## Exit 1: failed
        ### `GitError` (exit 1)
        ## Exit 3 blocked
        ### `WriteConflict` (exit 2)
    """}) / "t.md"
    family = {"GitError": 1, "WriteConflict": 3, "UsageError": 2}
    codes = {1: "`GitError`", 2: "`UsageError`", 3: "`WriteConflict`"}
    assert troubleshooting_problems(page, family, codes) == [
        "docs/troubleshooting.md has no section for `WriteConflict` (exit 3); add a heading "
        "``### `WriteConflict` (exit 3)`` saying what it means and what to do",
        "docs/troubleshooting.md has no section for `UsageError` (exit 2); add a heading "
        "``### `UsageError` (exit 2)`` saying what it means and what to do",
        "docs/troubleshooting.md has no section for exit 2 (from `UsageError`); add a heading "
        "`## Exit 2: …` saying what it means and what to do",
    ]


def test_the_error_family_and_the_cli_exit_codes_are_read_from_the_source() -> None:
    package = REPO / "specops_dag"
    family = error_family(package)
    assert {name: family[name] for name in ("SpecopsError", "UsageError", "DefinitionError",
                                            "StateError", "WriteConflict", "BlockedError",
                                            "ToolMissing", "GitError", "ConfigError")} == {
        "SpecopsError": 1, "UsageError": 2, "DefinitionError": 2, "StateError": 2,
        "WriteConflict": 3, "BlockedError": 3, "ToolMissing": 3, "GitError": 1,
        "ConfigError": 2}
    assert set(cli_exit_codes(package)) == {0, 1, 2, 3}
