"""What a shell command would run, as far as the PreToolUse hook cares (seed 001 §7): a walk
over the commands `shell` reads — through wrappers, variables, `cd`, `bash -c`, `eval`, pipes
into shells and interpreters, and scripts written earlier in the same command — that hands each
program it finds to `rules` and records the files the command writes and deletes. It decides
nothing itself beyond what it cannot read (a computed program, a terminal, too deep a nesting);
standard library only: it runs on every tool call."""

from __future__ import annotations

import os
import posixpath
import re

from specops_dag.hooks import rules
from specops_dag.hooks.patch import patch_changes
from specops_dag.hooks.rules import (
    CONTAINERS,
    GLOB,
    INTERACTIVE,
    SQL_CLIENTS,
    command_name,
    short,
    shown,
)
from specops_dag.hooks.shell import OUTPUT, Cmd, parse

MAX_COMMAND = 200_000
MAX_DEPTH = 12
MAX_SCRIPT = 256 * 1024


SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish"}
SHELL_LIKE = {"su", "runuser", "script", "pwsh", "powershell"}  # run the argument of -c/-Command
WRAPPERS = {  # commands that run their arguments → their short options taking a separate value
    "sudo": "ugCDhpRrtTU", "doas": "uC", "env": "uC", "nohup": "", "time": "", "nice": "n",
    "ionice": "cnp", "timeout": "sk", "command": "", "builtin": "", "exec": "a", "stdbuf": "ioe",
    "setsid": "", "busybox": "", "xargs": "InPdLsaE", "unbuffer": "", "chronic": ""}
KEYWORDS = {"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
            "esac"}
HEADERS = {"for", "case", "select", "function", "in"}
INTERPRETER = re.compile(r"(?:python|pypy)[\d.]*|node(?:js)?|deno|bun|perl|ruby|php")
ASSIGN = re.compile(r"[A-Za-z_]\w*(?:\[[^\]]*\])?\+?=")
VAR = re.compile(r"\$\{([A-Za-z_]\w*)(?:(:?[-=+?])([^}]*))?\}|\$([A-Za-z_]\w*|[0-9@*#?$!-])")
PWD = ("$(pwd)", "`pwd`", "$(pwd -P)", "$(pwd -L)")
MKTEMP = ("$(mktemp)", "$(mktemp -d)", "`mktemp`", "`mktemp -d`")  # a new name in $TMPDIR
TOPLEVEL = ("$(git rev-parse --show-toplevel)", "`git rev-parse --show-toplevel`")
SHEBANG = re.compile(r"#![^\n]*\b(?:ba|z|da|k|a)?sh\b")
CALL = re.compile(r"\b(system|popen|run|call|check_call|check_output|Popen|getoutput|exec|"
                  r"execSync|spawnSync|spawn|shell_exec|passthru|rmtree|rmSync|rmdirSync|"
                  r"remove_dir_all|rimraf)\s*\(\s*(\[[^\]]*\]|(['\"]).*?(?<!\\)\3)", re.S)
LITERAL = re.compile(r"(['\"])((?:\\.|(?!\1).)*)\1", re.S)
DELETE_FUNCS = {"rmtree", "rmSync", "rmdirSync", "remove_dir_all", "rimraf"}
COMPUTED = re.compile(r"\$\(|`|<\(")


def xargs_replace(arg: str, value: str) -> str | None:
    """The replace string an xargs option sets (`-I R`, `-IR`, `-i[R]`, `--replace[=R]`)."""
    if arg == "-I":
        return value or None
    if arg.startswith("-I"):
        return arg[2:]
    if arg.startswith("--replace"):
        return arg.partition("=")[2] or "{}"
    if arg.startswith("-i"):
        return arg[2:] or "{}"
    return None


def normalize(path: str) -> str:
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("//") else path


def inspect(command: str, repo: str, env: dict[str, str], cwd: str | None = None) -> Walk:
    """Walk a shell command run in `cwd` (default: the root of `repo`); `walk.reason` names the
    first dangerous thing found."""
    walk = Walk(repo, env, cwd)
    if len(command) > MAX_COMMAND:
        walk.reason = (f"the command is {len(command):,} characters long, more than the "
                       f"{MAX_COMMAND:,} the hook checks; split it, or write file contents "
                       "with apply_patch")
    else:
        walk.reason = walk.text(command)
    return walk


class Walk:
    """One walk over a command: the virtual cwd (after `cd`), shell variables, the files the
    command has written so far (path → text, for scripts it runs later) and every path written."""

    def __init__(self, repo: str, env: dict[str, str], cwd: str | None = None) -> None:
        self.env = {**env, "HOME": env.get("HOME") or os.path.expanduser("~")}
        self.repo = normalize(repo)
        self.cwd = normalize(cwd or repo)  # where the tool call runs: the repo or a folder in it
        self.vars: dict[str, str] = {}
        self.loops: dict[str, list[str]] = {}  # `for` variable → the paths it takes
        self.files: dict[str, str] = {}
        self.writes: list[str] = []
        self.deleted: set[str] = set()
        self.reason: str | None = None
        self.depth = 0
        self.guarded = [(normalize(p), what) for p, what in rules.guarded_paths(
            self.env["HOME"], self.repo, env) if p and p.startswith("/")]
        self.state = normalize(rules.state_folder(self.repo, env))
        trees = {normalize(p): what for p, what in reversed(rules.work_trees(self.repo, env))
                 if p and p.startswith("/")}
        self.trees = sorted(trees.items(), key=lambda t: -len(t[0]))  # the innermost first
        scratch = env.get("SPECOPS_NODE_DIR") or ""
        self.scratch = normalize(scratch) if scratch.startswith("/") else None

    # -- reading the command -------------------------------------------------------------------

    def text(self, text: str) -> str | None:
        if self.depth > MAX_DEPTH:
            return (f"the command nests shells, eval or substitutions more than {MAX_DEPTH} "
                    "levels deep and cannot be checked; run the commands directly")
        cmds, subs = parse(text)
        for body in subs:
            if reason := self.nested(body):
                return reason
        for cmd in cmds:
            if reason := self.command(cmd):
                return reason
        return None

    def nested(self, text: str | None) -> str | None:
        """Check text that a shell will run (`bash -c`, eval, a script, a substitution)."""
        if not text:
            return None
        saved = (self.cwd, dict(self.vars))
        self.depth += 1
        try:
            return self.text(text)
        finally:
            self.depth -= 1
            self.cwd, self.vars = saved

    def command(self, cmd: Cmd) -> str | None:
        if len(cmd.words) > 2 and cmd.words[0] == "for" and cmd.words[2] == "in":
            self.loops[cmd.words[1]] = [self.path(w) or "" for w in cmd.words[3:]] or [""]
        words, xargs = self.unwrap(cmd.words)
        if not words and all(ASSIGN.match(w) for w in cmd.words):
            self.assign(cmd.words)
        if xargs and self.interactive(cmd):
            return (f"`{shown(cmd.words)}` builds commands from what is typed into it later, "
                    "which never reaches this hook; pipe it a known input or run the commands "
                    "directly")
        if xargs:
            words = self.xargs(words, cmd, xargs)
        if words:
            words, why = self.program(words)
            if why:
                return why
        self.record_writes(cmd, words)
        return self.check(words, cmd) if words else None

    def xargs(self, words: list[str], cmd: Cmd, replace: bool | str) -> list[str]:
        """The command xargs builds: its input appended, or put where the replace string is
        (`-I R`). An input the hook cannot see stays a placeholder, so a program taken from it
        is computed at run time."""
        piped = self.stdin_text(cmd)
        item = piped.strip() if piped and piped.strip() else "$(xargs input)"
        if isinstance(replace, str):
            return [w.replace(replace, item) for w in words]
        return [*words, *(piped.split() if piped is not None else [item])]

    def program(self, words: list[str]) -> tuple[list[str], str | None]:
        """The program word as the shell will run it; a word computed at run time (a command
        substitution, an unknown variable) cannot be checked, so it is the reason to deny."""
        word = words[0]
        why = (f"`{shown(words)}`: the program is computed at run time, so the hook cannot check "
               "what runs; write the command literally")
        if COMPUTED.search(word):
            return words, why
        if "$" in word:
            names = [m.group(1) or m.group(4) for m in VAR.finditer(word)]
            if not names or any(n != "PWD" and n not in self.vars and n not in self.env
                                for n in names):
                return words, why
            word = VAR.sub(self.var, word)
            if not word.strip() or "$" in word:
                return words, why
        return [word, *words[1:]], None

    def interactive(self, cmd: Cmd) -> bool:
        """Nothing feeds the command's stdin (no heredoc, `<` or pipe): it reads the terminal."""
        return (cmd.stdin is None and cmd.pipe_from is None
                and not any(op == "<" for op, _ in cmd.redirects))

    def unwrap(self, words: list[str]) -> tuple[list[str], bool | str]:
        """Strip assignments, keywords and wrappers (sudo, env, timeout, xargs …), however many;
        also says whether xargs runs the rest (its replace string, if it has one)."""
        xargs: bool | str = False
        k = 0
        while k < len(words):
            while k < len(words) and ASSIGN.match(words[k]):
                k += 1
            name = command_name(words[k]) if k < len(words) else ""
            if name in HEADERS:
                return [], xargs
            if name in KEYWORDS:
                k += 1
                continue
            if name not in WRAPPERS:
                break
            xargs = xargs or name == "xargs"
            i = k + 1
            while i < len(words) and words[i].startswith("-") and words[i] != "-":
                arg, i = words[i], i + 1
                if arg == "--":
                    break
                if name == "xargs":
                    xargs = xargs_replace(arg, words[i] if i < len(words) else "") or xargs
                if name == "command" and arg in ("-v", "-V"):
                    return [], xargs
                if name == "env" and arg == "-S" and i < len(words):
                    words, i = [*words[:i - 1], *words[i].split(), *words[i + 1:]], i - 1
                elif len(arg) == 2 and arg[1] in WRAPPERS[name]:
                    i += 1
            k = i + (name == "timeout")
        return words[k:], xargs

    def check(self, words: list[str], cmd: Cmd) -> str | None:
        name, args = command_name(words[0]), words[1:]
        if name in ("cd", "pushd"):
            target = next((a for a in args if not a.startswith("-")), "~")
            self.cwd = self.path(target) or self.cwd
        elif name in ("export", "declare", "local", "readonly", "typeset"):
            self.assign(args)
        elif name == "alias":
            return next(filter(None, (self.nested(a.partition("=")[2]) for a in args)), None)
        elif name in ("eval", "trap"):
            return self.nested(" ".join(args) if name == "eval" else args[0] if args else None)
        elif name in ("source", "."):
            return self.nested(self.script(args[0], True)) if args else None
        elif name in SHELLS or name in SHELL_LIKE:
            return self.shell(words, cmd)
        elif name in SQL_CLIENTS or name in CONTAINERS and not SQL_CLIENTS.isdisjoint(args):
            return rules.sql_client(self, words, cmd)
        elif INTERPRETER.fullmatch(name):
            return self.interpreter(words, cmd)
        elif rule := rules.rule_for(name):
            return rule(self, words)
        elif "/" in words[0]:
            return self.nested(self.script(words[0]))
        return None

    def shell(self, words: list[str], cmd: Cmd) -> str | None:
        i, inline, from_stdin = 1, False, False
        if command_name(words[0]) in SHELLS:
            while i < len(words) and words[i][:1] in "-+" and words[i] not in ("-", "--"):
                arg, i = words[i], i + 1
                if arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                    i += 1
                elif not arg.startswith("--"):
                    inline, from_stdin = inline or "c" in arg, from_stdin or "s" in arg
            i += i < len(words) and words[i] in ("-", "--")
        else:
            flags = [j for j, a in enumerate(words) if a.lower() in ("-c", "--command", "-command")]
            files = [a for a in words if a.lower() in ("-f", "-file", "--file")]
            if not flags:
                return None if files or command_name(words[0]) in ("su", "runuser", "script") \
                    or not self.interactive(cmd) else (f"`{shown(words)}` "
                                                      + INTERACTIVE.format(what="shell"))
            inline, i = True, flags[0] + 1
        rest = words[i:]
        if inline:
            return self.nested(rest[0]) if rest else None
        if "-i" in words[1:i] or "--interactive" in words[1:i]:
            return f"`{shown(words)}` " + INTERACTIVE.format(what="shell")
        if rest and not from_stdin:
            return self.nested(self.script(rest[0], True))
        if self.interactive(cmd):
            return f"`{shown(words)}` " + INTERACTIVE.format(what="shell")
        piped = self.stdin_text(cmd)
        if piped is None:
            return (f"`{shown(words)}` runs shell commands the hook cannot see (piped from "
                    "another command); write the commands literally")
        return self.nested(piped)

    def interpreter(self, words: list[str], cmd: Cmd) -> str | None:
        for i, arg in enumerate(words[1:-1], 1):
            if arg in ("--eval", "--print") or short(arg) and arg[-1] in "ceEpr" and len(arg) < 5:
                return self.code(words[i + 1])
        if any(a in ("-i", "--interactive") for a in words[1:]):
            return f"`{shown(words)}` " + INTERACTIVE.format(what="interpreter")
        script = next((a for a in words[1:] if not a.startswith("-")), None)
        if script is None and self.interactive(cmd) and not any(
                a in ("--version", "-V", "--help", "-h") or a.startswith("-m")
                for a in words[1:]):
            return f"`{shown(words)}` " + INTERACTIVE.format(what="interpreter")
        if script is None:
            return self.code(self.stdin_text(cmd) or "")
        path = self.path(script)
        return self.code(self.files[path]) if path in self.files else None

    def code(self, text: str) -> str | None:
        """Inline interpreter code: SQL in it, and the shell commands or deletes it calls."""
        if reason := rules.sql_reason(text):
            return reason
        for m in CALL.finditer(text):
            values = [v for _, v in LITERAL.findall(m.group(2))]
            if not values:
                continue
            if m.group(1) in DELETE_FUNCS:
                reason = rules.rm(self, ["rm", "-r", values[0]])
            elif m.group(2).startswith("["):
                reason = self.nested(" ".join("'" + v.replace("'", "'\\''") + "'" for v in values))
            else:
                reason = self.nested(values[0])
            if reason:
                return reason
        return None

    # -- paths -----------------------------------------------------------------------------------

    def path(self, word: str) -> str | None:
        """`word` as an absolute normalized path, as the shell would expand it; None if unknown."""
        known = self.substituted(word)
        if known is None:
            return None
        if known.startswith("~"):
            user, _, rest = known[1:].partition("/")
            if user:
                return None
            known = f"{self.env['HOME']}/{rest}"
        known = self.substituted(VAR.sub(self.var, known))  # a variable may hold a substitution
        return normalize(known if known.startswith("/") else f"{self.cwd}/{known}") if known \
            else None

    def substituted(self, word: str) -> str | None:
        """`word` with the command substitutions whose output the hook knows (`$(pwd)`, the
        repository root, a new `mktemp` name) replaced; None if another one is left."""
        for text in PWD:
            word = word.replace(text, self.cwd)
        for text in TOPLEVEL:
            word = word.replace(text, self.repo)
        for text in MKTEMP:
            word = word.replace(text, f"{self.env.get('TMPDIR') or '/tmp'}/tmp.mktemp")
        return None if "$(" in word or "`" in word else word

    def paths(self, word: str, on_disk: bool = False) -> list[str]:
        """Every path `word` may stand for: once per value of a `for` variable in it and, with
        `on_disk`, once per existing file its glob matches (the shell's expansion)."""
        loop = next((n for n in self.loops if f"${n}" in word or f"${{{n}}}" in word), None)
        out = []
        for value in self.loops[loop][:64] if loop else [None]:
            saved = self.vars
            self.vars = {**saved, loop: value} if loop else saved
            path = self.path(word)
            self.vars = saved
            if path and on_disk and GLOB.search(path):
                import glob

                out += sorted(glob.glob(path)) or [path]
            elif path:
                out.append(path)
        return out

    def known(self, word: str) -> bool:
        """Whether every variable in `word` has a value the hook knows (set in the command, in
        the environment, a loop over known words, or given a default), so `paths` is exact."""
        for m in VAR.finditer(word):
            name, op = m.group(1) or m.group(4), m.group(2)
            if name in self.loops and "" in self.loops[name]:
                return False
            if not (name == "PWD" or op in (":-", "-", ":=", "=") or name in self.loops
                    or name in self.vars or name in self.env):
                return False
        return True

    def var(self, m: re.Match) -> str:
        name, op, alt = m.group(1) or m.group(4), m.group(2), m.group(3) or ""
        value = self.cwd if name == "PWD" else self.vars.get(name, self.env.get(name, ""))
        if op in (":+", "+"):
            return alt if value else ""
        return value or (alt if op else "")

    def assign(self, words: list[str]) -> None:
        for word in words:
            if ASSIGN.match(word):
                name, _, value = word.partition("=")
                self.vars[name.rstrip("+")] = VAR.sub(self.var, value)

    # -- files the command writes and reads ------------------------------------------------------

    def record_writes(self, cmd: Cmd, words: list[str]) -> None:
        out = self.produced(cmd, words)
        for op, target in cmd.redirects:
            for path in self.paths(target, on_disk=True) if op in OUTPUT else []:
                self.wrote(path, out, append=op.endswith(">>"))
        name = command_name(words[0]) if words else ""
        if name in ("apply_patch", "applypatch"):
            self.record_patch(cmd.stdin if cmd.stdin is not None else " ".join(words[1:]))
        for target, source in written_by(words) if words else []:
            for path in self.paths(target, on_disk=True):
                if source and (target.endswith("/") or os.path.isdir(path)):
                    path = f"{path}/{posixpath.basename(source)}"
                self.wrote(path, self.stdin_text(cmd) if name == "tee" else None)

    def record_patch(self, text: str) -> None:
        for action, raw, added in patch_changes(text):
            if (path := self.path(raw)) and action == "delete":
                self.deleted.add(path)
                self.files.pop(path, None)
            elif path:
                self.wrote(path, added)

    def wrote(self, path: str, text: str | None, append: bool = False) -> None:
        self.writes.append(path)
        self.deleted.discard(path)
        if text is None:
            self.files.pop(path, None)
        else:
            self.files[path] = self.files.get(path, "") + text if append else text

    def produced(self, cmd: Cmd, words: list[str], hops: int = 8) -> str | None:
        """What a command writes to stdout, when that is knowable (echo, printf, cat)."""
        name = command_name(words[0]) if words else ""
        if name in ("echo", "printf"):
            return " ".join(a for a in words[1:] if a not in ("-e", "-n", "-E")).replace(
                "\\n", "\n")
        files = [a for a in words[1:] if not a.startswith("-")]
        if name == "cat" and files:
            return "\n".join(self.script(f, True) or "" for f in files)
        return self.stdin_text(cmd, hops) if name in ("cat", "tee") else None

    def stdin_text(self, cmd: Cmd, hops: int = 8) -> str | None:
        """What a command reads on stdin: a heredoc, a `<` file, or what a known producer pipes
        into it (followed back at most `hops` pipe stages)."""
        if cmd.stdin is not None:
            return cmd.stdin
        for op, target in cmd.redirects:
            if op == "<":
                return self.script(target, True)
        if cmd.pipe_from is not None and hops:
            return self.produced(cmd.pipe_from, self.unwrap(cmd.pipe_from.words)[0], hops - 1)
        return None

    def script(self, word: str, any_file: bool = False) -> str | None:
        """The text of a file a command runs: written earlier by this command, or on disk."""
        path = self.path(word)
        if path is None or path in self.files:
            return None if path is None else self.files[path]
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_SCRIPT)
        except OSError:
            return None
        text = data.decode("utf-8", "replace")
        if any_file or path.endswith((".sh", ".bash")) or SHEBANG.match(text):
            return text
        return None


EDITORS = {"tee", "touch", "truncate", "vi", "vim", "nvim", "nano", "emacs", "ed", "ex", "code"}


def written_by(words: list[str]) -> list[tuple[str, str]]:
    """(target, source) per file a command writes other than by redirection; `source` is set
    when the target may be a folder that receives it (cp, mv)."""
    name = words[0].replace("\\", "/").rsplit("/", 1)[-1].lower()
    args = [a for a in words[1:] if not a.startswith("-")]
    if name == "git" and args[:1] == ["mv"]:
        name, args = "mv", args[1:]
    in_place = any(a.startswith("--in-place") or a[:1] == "-" and a[1:2] != "-" and "i" in a
                   for a in words[1:])
    if name in ("cp", "mv", "install", "ln") and len(args) >= 2:
        return [(args[-1], source) for source in args[:-1]]
    if name in EDITORS:
        return [(a, "") for a in args]
    if name in ("sed", "perl") and in_place:
        scripted = name == "sed" and any(a in ("-e", "--expression", "-f") for a in words)
        return [(a, "") for a in (args if scripted else args[1:])]
    if name == "dd":
        return [(a[3:], "") for a in words[1:] if a.startswith("of=")]
    return []
